"""``tt.dot`` on fp32 tiles as a call to the register-blocked micro-kernel of ``runtime/rvtune_dot.h``.

The operands are arena tiles: A may have any strides (a transposed view is fine: its elements are read as
scalars and broadcast), B must have contiguous rows (a transposed B is copied once), the result is a
contiguous tile. A B tile loaded only for this dot may instead be read where it lies in memory (InPlaceB:
ptr_analysis decides at run time, per block, and skips the copy then). A stays a copy: packed, its rows
are a compile-time stride apart, which keeps the micro-kernel at one address step per k. Buffer reuse: a
loop-carried accumulator (``acc = tl.dot(a, b, acc)``) gets the result placed in its own memory by
lower_struct.assign, so nothing is copied per iteration. Other element types and batched dots keep the
generic i-k-j loops of lower_struct.op_dot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import dot_rows
from .emitter import FuncEmitter, Val, contiguous_strides
from .fusion import Expr
from .ttir import Block, Op

#: Ops that write no memory and run no other code: a tile loaded before them may be read in place after.
_NO_WRITES = frozenset({"tt.load", "tt.splat", "tt.broadcast", "tt.expand_dims", "tt.make_range", "tt.addptr",
                        "tt.trans", "tt.reshape", "arith.constant", "tt.get_program_id", "tt.get_num_programs",
                        "tt.dot"})


@dataclass(frozen=True)
class InPlaceB:
    """A loaded B tile the dot may read where it lies in memory: when ``flag`` (a C int) is true at run time,
    the load skipped its copy and the block starts at ``at`` with rows ``ld`` elements apart (unit columns)."""

    flag: str
    at: str
    ld: str


@dataclass(frozen=True)
class ZeroTail:
    """A loaded fp32 tile (the Val ``tile``) that holds zeros outside its first ``rows`` rows and ``cols``
    columns (C int64 values, computed at the load: a mask of upper bounds with ``other`` zero)."""

    tile: Val
    rows: str
    cols: str


def b_read_in_place(f: FuncEmitter, load: Op, block: Block, is_pure: Callable[[str], bool]) -> bool:
    """May the fp32 tile of ``load`` be read in place by the dot that uses it? Yes when its only use is as B
    of an fp32 rank-2 tt.dot later in the same block and every op in between writes no memory."""
    res = load.results[0]
    t = load.result_types[0]
    if t.element.elem != "f32" or len(t.shape or ()) != 2 or load.attr("isVolatile") not in (None, "false"):
        return False
    ops = block.ops
    k = ops.index(load)
    users = [o for o in ops if res in o.operands]
    if len(users) != 1 or users[0].name != "tt.dot" or list(users[0].operands).count(res) != 1 \
            or users[0].operands[1] != res or used_in_regions(ops, res):
        return False
    dot = users[0]
    if [ty.element.elem for ty in (*dot.operand_types[:3], dot.result_types[0])] != ["f32"] * 4:
        return False
    return all(o.name in _NO_WRITES or is_pure(o.name) for o in ops[k + 1:ops.index(dot)])


def used_in_regions(ops: list[Op], ssa: str) -> bool:
    def walk(op: Op) -> bool:
        return any(ssa in inner.operands or walk(inner) for r in op.regions for b in r.blocks for inner in b.ops)
    return any(walk(o) for o in ops)


def _data_extents(f: FuncEmitter, op: Op, shape: tuple[int, int, int]) -> tuple[str, str, str] | None:
    """(m, n, k) as C expressions: the rows of A, columns of B and the k range that hold data, from the
    operands' ZeroTail (None: both tiles are wholly data). A's rows past m and B's columns past n are zero,
    so those rows / columns of the result keep the accumulator's value; past k either A's columns or B's
    rows are zero, so those steps add nothing."""
    tails = []
    for ssa in op.operands[:2]:
        tail = f.zero_tail.get(ssa)
        # the very Val the load made (SSA names repeat across sibling regions)
        tails.append(tail if tail is not None and f.values.get(ssa) is tail.tile else None)
    a_tail, b_tail = tails
    if a_tail is None and b_tail is None:
        return None
    m, n, k = (str(x) for x in shape)
    k_a = a_tail.cols if a_tail is not None else k
    k_b = b_tail.rows if b_tail is not None else k
    k_eff = k_a if k_b == k else k_b if k_a == k else f"rv_min64({k_a}, {k_b})"
    return (a_tail.rows if a_tail is not None else m, b_tail.cols if b_tail is not None else n, k_eff)


def lowers_to_micro_kernel(op: Op) -> bool:
    """Is this tt.dot one that lower_dot makes a call of rv_dot_f32 / rv_dot_f32_part (fp32, rank 2)?"""
    t = op.result_types[0]
    types = [ty.element.elem for ty in op.operand_types[:3]]
    return types == ["f32", "f32", "f32"] and t.element.elem == "f32" and len(t.shape or ()) == 2


def lower_dot(f: FuncEmitter, op: Op) -> bool:
    if not lowers_to_micro_kernel(op):
        return False
    t = op.result_types[0]
    c_val = f.values.get(op.operands[2])
    # the accumulator as a fusion.Expr (e.g. ``acc * alpha[:, None]``), computed straight into the result tile
    chain = c_val.sym if c_val is not None and isinstance(c_val.sym, Expr) else None
    in_place = f.in_place_b.get(op.operands[1])
    a, b = (f.get(o) for o in op.operands[:2])
    c = c_val if c_val is not None and chain is not None else f.get(op.operands[2])
    m, n = t.shape or ()
    k = (op.operand_types[0].shape or ())[-1]
    if a.kind != "buf":
        a = f.materialize(a, "dot_a")
    if b.kind != "buf" or b.strides[-1] != 1 or b.strides[0] == 0:
        b = f.materialize(b, "dot_b")
    if chain is not None:  # the accumulator's chain is computed straight into the result tile
        out = chain.materialize(f, c, op.results[0])
    elif c.kind == "buf" and c.offset == 0 and c.strides == contiguous_strides(c.shape):
        # a loop-carried accumulator may get this result placed in its own memory (lower_struct.assign):
        # both pointers are arena constants, so clang drops whichever branch is dead
        out = f.new_buf(op.results[0], t)
        with f.block(f"if ({out.expr} != {c.expr})"):
            f.copy_into(out, c)
    else:
        out = f.new_buf(op.results[0], t)
        f.copy_into(out, c)
    a_ptr = a.expr if a.offset == 0 else f"{a.expr} + {a.offset}"
    b_ptr = b.expr if b.offset == 0 else f"{b.expr} + {b.offset}"
    ldb = str(b.strides[0])
    if in_place is not None and b.offset == 0 and b.strides == contiguous_strides(b.shape):
        # B where it lies in memory when its load skipped the copy (ptr_analysis: wholly inside its mask)
        b_ptr, ldb = f"({in_place.flag} ? {in_place.at} : {b_ptr})", f"({in_place.flag} ? {in_place.ld} : {ldb})"
    extents = _data_extents(f, op, (m, n, k))
    rows = dot_rows.live_rows(f, op, b_ptr, ldb, k, n)  # A's zero rows past a row mask tile (fused MoE's padding)
    if extents is not None and rows is not None:  # both: the data rows end at the nearer of the two
        extents = (f"rv_min64({extents[0]}, {rows})", extents[1], extents[2])
    f.emit(f"/* {out.expr} += dot({m}x{k}, {k}x{n}): register-blocked micro-kernel (rvtune_dot.h) */")
    args = f"{a_ptr}, {a.strides[0]}, {a.strides[1]}, {b_ptr}, {ldb}, {out.expr}, {n}"
    if extents is not None:  # masked tiles: only their data is multiplied (a ragged block's zero tail adds nothing)
        f.emit(f"rv_dot_f32_part({m}, {n}, {k}, {', '.join(extents)}, {args});")
    elif rows is None:
        f.emit(f"rv_dot_f32({m}, {n}, {k}, {args});")
    else:  # all rows through the call with the constant row count (clang specialises the tiles for it)
        f.emit(f"if ({rows} == {m}) rv_dot_f32({m}, {n}, {k}, {args});")
        f.emit(f"else rv_dot_f32({rows}, {n}, {k}, {args});")
    f.values[op.results[0]] = out
    return True
