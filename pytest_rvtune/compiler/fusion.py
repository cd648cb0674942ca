"""Fusion of element-wise chains: ``qk * scale - m[:, None]`` is one loop, not two tiles.

An element-wise op whose result has exactly one use, by an op of the same block that reads it element
for element (another element-wise op, a store, a reduce, a dot), is not computed where it is defined:
its value stays an ``Expr`` (kind "sym", like ptr_analysis' blocks). The consumer that is element-wise
extends the expression; any other consumer gets it through ``FuncEmitter.get``, which materialises the whole
chain in ONE loop nest over its leaves (ordinary tiles, views with broadcast strides, splats). A value
with several uses is computed once into a tile, as before, so nothing is evaluated twice.

A mask kept symbolic by ptr_analysis (``Bounds``: ``rows < n && cols < N`` from iotas) is a leaf too: the
loop tests its condition on the loop indices (a vector compare in registers), no byte tile is built. A value
read twice by ONE element-wise op (``d * d``) is fused into it like a single use: C computes it once per element.

Expressions are pure C over their leaves, and a leaf's liveness is extended to the point of use, so the
arena never reuses a leaf's memory before the chain is computed. Every float element-wise tile is written
here, by a loop nest whose innermost loop carries ``RV_VECTORIZE_FUSED[_WIDE]`` (rvtune_rt.h:
``vectorize(assume_safety)``, as arena offsets in a loop nest defeat clang's dependence analysis, and on
RVV a pinned LMUL). An fp32 ``exp`` ends a chain: the chain below it is computed into the exp's tile and
``rv_exp_f32`` (rvtune_exp.h, RVV intrinsics) runs there in place; its consumers read that tile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import rvv_chain
from .emitter import FuncEmitter, Tier, Val, contiguous_strides, keep_out_of_carried_home, numel
from .lower_ops import FLOAT_TYPES, is_elementwise, scalar_expr
from .ttir import Block, Op

#: Consumers that read an operand element for element where it is used (fusing into them is safe and
#: saves a tile); block terminators and shape ops get a materialised tile instead.
_READERS = frozenset({"tt.store", "tt.reduce", "tt.dot"})
#: Longest C expression a chain may grow to before it is materialised (ops like min/max repeat operands).
MAX_EXPR_CHARS = 1500


@dataclass(eq=False)
class Expr:
    op: Op
    children: list[Val | Expr]

    def parts(self) -> list[Val]:
        """Every value the chain reads: its leaves, and what a symbolic mask leaf's condition reads."""
        out: list[Val] = []
        for c in self.children:
            if isinstance(c, Expr):
                out += c.parts()
            else:
                out += [c, *(c.sym.parts() if c.kind == "sym" and c.sym is not None else [])]
        return out

    def size(self) -> int:
        """Ops in the chain."""
        return 1 + sum(c.size() for c in self.children if isinstance(c, Expr))

    def small(self) -> bool:
        """Few enough tiles read and ops for a loop at LMUL 8 (4 register groups) without spills."""
        parts = self.parts()
        tiles = {(x.expr, x.offset, x.strides) for x in parts if x.kind == "buf" and x.strides[-1:] != (0,)}
        loads = {id(x.sym) for x in parts if is_deferred_load(x)}
        return len(tiles) + len(loads) <= 3 and self.size() <= 8

    def code(self, at: Callable[[Val], str]) -> str:
        args = [c.code(at) if isinstance(c, Expr) else at(c) for c in self.children]
        if _vector_exp(self.op):
            return f"rv_expf({args[0]})"
        if self.op.name == "arith.select" and args[0] == "1":  # a mask known true (unmasked): the value itself
            return args[1]
        return scalar_expr(self.op, args)

    def replace_leaves(self, fn: Callable[[Val], Val]) -> Expr:
        """This chain with every leaf ``x`` replaced by ``fn(x)``."""
        return Expr(self.op, [c.replace_leaves(fn) if isinstance(c, Expr) else fn(c) for c in self.children])

    def unmasked(self) -> tuple[str, Expr] | None:
        """(C condition, this chain without its masks) when some mask in it, a deferred load's or a ``tl.where``'s,
        is one that a run-time test can show to be all true (the block lies inside it: the common case of every
        column step but the last, every interior tile of a stencil): then the chain's loop needs no per-element
        test and reads memory with plain vector loads. None when the chain has no such mask."""
        conds: dict[str, None] = {}  # (ordered, each test once: equal masks give equal hoisted names)

        def unmask(x: Val) -> Val:
            if is_deferred_load(x):
                whole = x.sym.unmasked()  # type: ignore[union-attr]
                if whole is not None:
                    conds[whole[0]] = None
                    return Val(x.type, "sym", "", (), 0, None, whole[1])
            elif _is_mask(x):
                cond = x.sym.all_true(x.shape)  # type: ignore[union-attr]
                if cond is not None:
                    conds[cond] = None
                    return Val(x.type, "splat", "1")
            return x
        fast = self.replace_leaves(unmask)
        return (" && ".join(f"({c})" for c in conds), fast) if conds else None

    def materialize(self, f: FuncEmitter, v: Val, ssa: str | None = None,
                    siblings: Callable[[Val], list[tuple[Expr, Val]]] | None = None) -> Val:
        """The chain computed into a new tile, in one loop nest. ``siblings(tile)``, when given, returns more
        (chain, tile) pairs whose chains read this one's tile: each is computed in the same loop."""
        leaves = self.parts()
        for leaf in leaves:
            f.touch(leaf)
        out = f.new_buf(ssa, v.type, "fused")
        keep_out_of_carried_home(out, leaves)
        more = siblings(out) if siblings is not None else []
        for chain, _tile in more:
            leaves += [x for x in chain.parts() if x is not out]
        self.in_versions(f, lambda chain: chain._compute_into(f, [(chain, out), *more], leaves))
        return out

    def in_versions(self, f: FuncEmitter, emit: Callable[[Expr], None]) -> None:
        """``emit(chain)`` for this chain; where it has masks that a run-time test can show all true (unmasked),
        twice: the unmasked chain under that test, this one otherwise."""
        versions = self.unmasked()
        if versions is None:
            emit(self)
            return
        with f.block(f"if ({versions[0]})"):
            emit(versions[1])
        with f.block("else"):
            emit(self)

    def _compute_into(self, f: FuncEmitter, outputs: list[tuple[Expr, Val]], leaves: list[Val]) -> None:
        """Each (chain, tile) of ``outputs`` (this chain first) computed in one loop nest over the tiles."""
        shape = outputs[0][1].shape
        if any(rvv_chain.has_exp(c) for c, _t in outputs) and all(c.vector_form(f, shape, leaves) for c, _t in outputs):
            rvv_chain.emit_versions(f, [c for c, _t in outputs], lambda: self._vector_into(f, outputs, leaves),
                                    lambda: self._scalar_into(f, outputs, leaves))
        else:
            self._scalar_into(f, outputs, leaves)

    def vector_form(self, f: FuncEmitter, shape: tuple[int, ...], leaves: list[Val], rows: bool = False) -> bool:
        """Can this chain be written as RVV intrinsics (rvv_chain.py) in one loop over a tile of ``shape`` read from
        ``leaves``, or row by row (``rows``)? (Callers ask for chains holding an exp: clang's loop of those spills.)"""
        if not rows and all(f.flat_ok(x, shape) for x in leaves):
            return rvv_chain.vector_form(self, lambda x: x.kind == "buf", lambda x: False)
        return rvv_chain.vector_form(self, unit_stride_row, lambda x: x.kind == "buf" and x.strides[-1:] == (0,))

    @staticmethod
    def _vector_into(f: FuncEmitter, outputs: list[tuple[Expr, Val]], leaves: list[Val]) -> None:
        shape = outputs[0][1].shape
        if all(f.flat_ok(x, shape) for x in leaves):  # one loop over the whole tile, rows end to end
            rvv_chain.emit_loop(f, [(c, f"{t.expr}[i_]", t) for c, t in outputs], "0", str(numel(shape)), "i_",
                                lambda x: f.access(x, None, "i_"), lambda x: x.kind == "buf")
            return
        idx = [f"p{d}_" for d in range(len(shape) - 1)] + ["q_"]
        with contextlib.ExitStack() as stack:
            for i, n in zip(idx[:-1], shape[:-1], strict=True):
                stack.enter_context(f.block(f"for (int32_t {i} = 0; {i} < {n}; ++{i})"))
            rvv_chain.emit_loop(f, [(c, f.access(t, idx, ""), t) for c, t in outputs], "0", str(shape[-1]), "q_",
                                lambda x: f.access(x, idx, ""), unit_stride_row)

    def _scalar_into(self, f: FuncEmitter, outputs: list[tuple[Expr, Val]], leaves: list[Val]) -> None:
        out = outputs[0][1]
        shape = out.shape
        # assume_safety: the result tile never overlaps a leaf except element for element (an in-place
        # loop-carried home), which clang's dependence analysis cannot prove for arena offsets in a nest
        pragma = _pragma(self.small(), numel(shape))
        if all(f.flat_ok(x, shape) for x in (out, *leaves)):  # (a mask leaf is not: its test needs indices)
            f.emit(pragma)
            with f.block(f"for (int32_t i_ = 0; i_ < {numel(shape)}; ++i_)"):
                for chain, tile in outputs:
                    f.emit(f"{tile.expr}[i_] = {chain.code(lambda x: f.access(x, None, 'i_'))};")
            return
        idx = [f"p{d}_" for d in range(len(shape))]
        flat = " + ".join(f"{i} * {st}" if st != 1 else i for i, st in zip(idx, contiguous_strides(shape), strict=True))
        with contextlib.ExitStack() as stack:
            loads = any(is_deferred_load(x) for x in leaves)
            for d, (i, n) in enumerate(zip(idx, shape, strict=True)):
                if d == len(shape) - 1:
                    short_row = loads and n < 64 and n & (n - 1) == 0 and self.small()
                    f.emit(f"RV_VECTORIZE_FUSED_ROW({n})" if short_row else _pragma(self.small(), n))
                elif loads and d == len(shape) - 2 and n >= 4 and shape[-1] == 64:
                    # 4+ rows of one vector each read from memory: unrolled whole, every row's loads are hoisted
                    # to the top and spill (RVV; measured: two rows an iteration is fewer instructions here)
                    f.emit("RV_ROWS_PAIRED")
                stack.enter_context(f.block(f"for (int32_t {i} = 0; {i} < {n}; ++{i})"))
            for chain, tile in outputs:
                f.emit(f"{tile.expr}[{flat}] = {chain.code(lambda x: f.access(x, idx, flat))};")


def _pragma(small: bool, trip: int) -> str:
    """rvtune_rt.h's vectorisation hint for an element-wise loop of ``trip`` iterations: LMUL 8 (64 lanes) for a
    short chain that fills it, kept rolled when it runs 2 vectors or more."""
    if not small or trip < 64:  # (a shorter loop would run all in the scalar remainder of a 64-lane one)
        return "RV_VECTORIZE_FUSED"
    return "RV_VECTORIZE_FUSED_WIDE_ROLLED" if trip >= 128 else "RV_VECTORIZE_FUSED_WIDE"


@dataclass
class _Uses:
    """Who reads what in one function: the number of uses of each SSA value (an element-wise op reading a
    value twice, ``d * d``, counts once: C computes it once per element), its readers, each op's block."""

    count: dict[str, int]
    readers: dict[str, list[Op]]
    block_of: dict[int, Block]  # id(op) -> the block holding it


#: _uses' and _fusable's answers per function being emitted (computed once: each walks the whole function).
_USES: weakref.WeakKeyDictionary[FuncEmitter, _Uses] = weakref.WeakKeyDictionary()
_FUSABLE: weakref.WeakKeyDictionary[FuncEmitter, set[str]] = weakref.WeakKeyDictionary()


def _uses(f: FuncEmitter) -> _Uses:
    cached = _USES.get(f)
    if cached is not None:
        return cached
    uses = _Uses({}, {}, {})

    def walk(op: Op) -> None:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.ops:
                    uses.block_of[id(inner)] = block
                    for o in set(inner.operands):
                        n = inner.operands.count(o)
                        uses.count[o] = uses.count.get(o, 0) + (1 if is_elementwise(inner.name) else n)
                        uses.readers.setdefault(o, []).append(inner)
                    walk(inner)

    walk(f.func)
    _USES[f] = uses
    return uses


def _fusable(f: FuncEmitter) -> set[str]:
    """SSA names defined by an element-wise tensor op and read exactly once, by a reader of the same block."""
    cached = _FUSABLE.get(f)
    if cached is not None:
        return cached
    uses = _uses(f)
    out: set[str] = set()
    for block in {id(b): b for b in uses.block_of.values()}.values():
        # float chains only: integer / pointer / mask tensors are index arithmetic that ptr_analysis wants
        # to see as values (a block or bounds), not as opaque expressions
        defined = {r for op in block.ops if is_elementwise(op.name) and op.result_types and
                   op.result_types[0].is_tensor and op.result_types[0].element.elem in FLOAT_TYPES
                   for r in op.results}
        for op in block.ops:
            if op.name in _READERS or is_elementwise(op.name):
                out |= {o for o in op.operands if o in defined and uses.count.get(o) == 1}
    _FUSABLE[f] = out
    return out


#: Ops that write memory: a deferred load is never read after one of them.
_WRITERS = frozenset({"tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.call", "tt.descriptor_store",
                      "tt.experimental_descriptor_store", "tt.print", "tt.assert"})


def _may_write(op: Op) -> bool:
    writes = op.name in _WRITERS or any(word in op.name for word in ("store", "atomic", "scatter"))
    return writes or any(_may_write(inner) for region in op.regions for block in region.blocks
                                      for inner in block.ops)


def deferred_load_ok(f: FuncEmitter, load: Op) -> bool:
    """May this block load be left unread (ptr_analysis.BlockLoad), its elements read by the element-wise chain
    that consumes it, in that chain's loop? Yes when its one reader is a float element-wise op of the same
    block and nothing from the load to the op where the chain is computed can write memory (the chain reads
    memory there, later than the load would have). A store that ends the chain is the one writer allowed: it reads
    the load in its own loop, each element just before it writes one, under a run-time test that this is the
    program's answer (through the load's own pointer block, ``store(p, load(p) * s)``: no two elements share an
    address; through another: the two blocks' address ranges are disjoint), else it reads the load whole first
    (ptr_analysis.op_store)."""
    uses = _uses(f)
    res = load.results[0]
    readers = uses.readers.get(res, [])
    block = uses.block_of.get(id(load))
    if uses.count.get(res) != 1 or len(readers) != 1 or block is None:
        return False
    user = readers[0]
    rt = user.result_types[0] if user.result_types else None
    if uses.block_of.get(id(user)) is not block or not is_elementwise(user.name) or rt is None \
            or not rt.is_tensor or rt.element.elem not in FLOAT_TYPES:
        return False
    end, fusable = user, _fusable(f)
    while end.results and end.results[0] in fusable:
        end = uses.readers[end.results[0]][0]
    ops = block.ops
    first = next(i for i, o in enumerate(ops) if o is load)
    last = next(i for i, o in enumerate(ops) if o is end)
    if any(_may_write(o) for o in ops[first + 1:last]):
        return False
    # a store ending the chain reads the load in its own loop: through its own pointer block or another, it
    # tests at run time that no element is written before it is read (ptr_analysis.op_store), else reads it whole
    return end.name == "tt.store" or not _may_write(end)


def unit_stride_row(v: Val) -> bool:
    """Is ``v`` read along its last axis as consecutive elements of memory (a vle32 of the row)? A tile whose
    last stride is 1; a deferred load without a mask whose pointer steps by one element along the row."""
    if v.kind == "buf":
        return v.strides[-1:] == (1,)
    return is_deferred_load(v) and bool(v.sym.unit_stride_row())  # type: ignore[union-attr]


def is_deferred_load(v: Val) -> bool:
    """A load left for the chain to read (ptr_analysis.BlockLoad: its element is C over the loop indices)."""
    return v.kind == "sym" and hasattr(v.sym, "element_expr")


def _is_mask(v: Val) -> bool:
    """A mask ptr_analysis keeps symbolic (a ``Bounds``: its condition is C over the loop indices)."""
    return v.kind == "sym" and hasattr(v.sym, "cond_expr")


#: Bounds hoisted by hoisted_mask, per function: (block, bound, extent) -> the C name holding it.
_HOISTED: weakref.WeakKeyDictionary[FuncEmitter, dict[tuple[int, str, int], str]] = weakref.WeakKeyDictionary()


def hoisted_mask(f: FuncEmitter, v: Val) -> Val:
    """The mask with its guard and index bounds computed once, before the loop, as int32 values clamped to the
    tile (the same test for every index inside it): the loop compares 32-bit indices (vmslt at e32) instead
    of widening them to 64 bits for ``p1_ < (int64_t)N - start``."""
    b: Any = v.sym  # a ptr_analysis.Bounds dataclass (not imported: ptr_analysis imports this module)
    guard = b.guard
    if guard != "1":
        guard = f.temp("mask_on")
        f.emit(f"const int {guard} = {b.guard};")

    hoisted = _HOISTED.setdefault(f, {})

    def bound(x: str | None, n: int) -> str | None:
        if x is None:
            return None
        # one name per bound and block (one C scope, the values it reads do not change in it before the
        # terminator): equal masks read as equal in one chain (Expr.unmasked) and are computed once
        key = (id(_uses(f).block_of.get(id(f.op))), x, n)
        if key not in hoisted:
            hoisted[key] = f.temp("mask_at")
            f.emit(f"const int32_t {hoisted[key]} = (int32_t)rv_clamp64({x}, 0, {n});")
        return hoisted[key]
    shape = v.shape
    lo = tuple(bound(x, n) for x, n in zip(b.lo, shape, strict=True))
    hi = tuple(bound(x, n) for x, n in zip(b.hi, shape, strict=True))
    return Val(v.type, "sym", "", (), 0, None, dataclasses.replace(b, guard=guard, lo=lo, hi=hi))


def _hoisted_load(f: FuncEmitter, v: Val) -> Val:
    """A deferred load with its mask hoisted (hoisted_mask); what it reads is live up to here."""
    load: Any = v.sym  # a ptr_analysis.BlockLoad
    for part in load.parts():
        f.touch(part)
    mask = hoisted_mask(f, Val(v.type, "sym", "", (), 0, None, load.mask))
    return Val(v.type, "sym", "", (), 0, None, dataclasses.replace(load, mask=mask.sym))


def _vector_exp(op: Op) -> bool:
    """fp32 ``math.exp``: rv_expf (rvtune_exp.h, <= 1.03 ulp, branch-free: it vectorises; libm's is a call)."""
    return op.name == "math.exp" and op.result_types[0].element.elem == "f32"


def _exp_in_registers(f: FuncEmitter, chain: Expr) -> bool:
    """Does an fp32 exp stay in its chain, computed in vector registers (rvv_chain.py)? When the chain up to it,
    in the version that runs for whole blocks (Expr.unmasked), has an RVV form: its other versions are scalar
    C, correct but slower (the exp's constants spill). Else the exp ends the chain (_exp_tile)."""
    whole = chain.unmasked()
    fast = whole[1] if whole is not None else chain
    return fast.vector_form(f, fast.op.result_types[0].shape or (), [], rows=True)


def _exp_tile(f: FuncEmitter, op: Op, arg: Val | Expr) -> Val:
    """An fp32 exp tile by one call of rv_exp_f32 (rvtune_exp.h: RVV intrinsics at LMUL 8, no spills) on a
    contiguous tile of its argument: the chain below the exp is computed into the result tile first, and
    the exp is done there in place. The exp ends the fused chain: its consumers read the tile."""
    rt = op.result_types[0]
    if isinstance(arg, Expr):
        out = arg.materialize(f, Val(rt, "sym", "", (), 0, None, arg), op.results[0])
        src = out
    elif arg.kind == "buf" and f.flat_ok(arg, rt.shape or ()):
        out, src = f.new_buf(op.results[0], rt), arg
        keep_out_of_carried_home(out, [arg])
    else:  # a view (broadcast, transposed) or an iota: copied into the result tile first
        out = f.new_buf(op.results[0], rt)
        keep_out_of_carried_home(out, [arg])
        f.copy_into(out, arg)
        src = out
    src_ptr = src.expr if src.offset == 0 else f"{src.expr} + {src.offset}"
    f.emit(f"rv_exp_f32({out.expr}, {src_ptr}, {numel(rt.shape or ())});")
    return out


def fuse_elementwise(f: FuncEmitter, op: Op) -> bool:
    """This tier's element-wise handler (see emitter.Tier): True when this op was handled here."""
    if id(op) in _PRECOMPUTED.get(f, ()):
        return True  # computed already, with the value it reads (_siblings)
    rt = op.result_types[0] if op.result_types else None
    if rt is None or not rt.is_tensor:
        return False
    known = [f.values.get(o) for o in op.operands]
    vals = [v for v in known if v is not None]
    if len(vals) != len(known):
        return False
    has_expr = any(isinstance(v.sym, Expr) for v in vals)
    fuse_out = op.results[0] in _fusable(f)
    if not has_expr and not fuse_out and rt.element.elem not in FLOAT_TYPES:
        return False  # integer / mask ops: the ordinary loop (ptr_analysis sees those values)
    children: list[Val | Expr] = []
    for o, v in zip(op.operands, vals, strict=True):
        if isinstance(v.sym, Expr):
            for leaf in v.sym.parts():
                f.touch(leaf)
            children.append(v.sym)
        elif _is_mask(v) and v.shape == (rt.shape or ()) and not _vector_exp(op):
            # tested in the loop (FuncEmitter.access): no byte tile of the mask
            f.touch(v)
            children.append(hoisted_mask(f, v))
        elif is_deferred_load(v) and v.shape == (rt.shape or ()):
            children.append(_hoisted_load(f, v))
        else:
            children.append(f.get(o))  # ordinary values; other symbolic ones are materialised
    if all(isinstance(c, Val) and c.kind in ("scalar", "splat") for c in children):
        return False  # computed once as a scalar by the ordinary path
    expr = Expr(op, children)
    if _vector_exp(op) and not _exp_in_registers(f, expr):
        f.values[op.results[0]] = _exp_tile(f, op, children[0])
        return True
    value = Val(rt, "sym", "", (), 0, None, expr)
    too_long = len(expr.code(lambda v: "x" * 12)) > MAX_EXPR_CHARS
    with_exp = rvv_chain.has_exp(expr)
    if not too_long and (fuse_out or (with_exp and _left_to_store(f, op))):
        f.values[op.results[0]] = value
    else:  # computed here, in one loop with the chain that feeds it, under the kernel's own name
        siblings = (lambda out: _siblings(f, op, out)) if with_exp else None
        f.values[op.results[0]] = expr.materialize(f, value, op.results[0], siblings)
    return True


#: Ops computed before their turn, by _siblings, per function (id(op)): fuse_elementwise passes over them.
_PRECOMPUTED: weakref.WeakKeyDictionary[FuncEmitter, set[int]] = weakref.WeakKeyDictionary()


def _siblings(f: FuncEmitter, op: Op, out: Val) -> list[tuple[Expr, Val]]:
    """The other element-wise readers of ``op``'s value, computed in the loop that computes it (its value read
    from a register, not from the tile): softmax's ``s_acc += e`` where ``e = exp(x - m)`` is also stored. Only
    where that loop holds an exp (RVV intrinsics, rvv_chain.py: clang's own loops need no help), for readers in
    the same block whose other operands are computed already (plain tiles or scalars, never written before the
    reader's turn: SSA, and a loop-carried home is written at the yield) and whose value would be a tile anyway
    (not fused into a reader of its own)."""
    uses = _uses(f)
    found: list[tuple[Expr, Val]] = []
    for reader in uses.readers.get(op.results[0], []):
        if uses.block_of.get(id(reader)) is uses.block_of.get(id(op)) and reader.results \
                and reader.results[0] not in f.values:
            sibling = sibling_expr(f, reader, op.results[0], out)
            if sibling is not None:
                found.append((sibling, sibling_tile(f, reader, sibling)))
    return found


def sibling_expr(f: FuncEmitter, reader: Op, res: str, value: Val) -> Expr | None:
    """``reader`` (an element-wise op reading ``res``) as a chain over ``value`` (res's value in the loop) and
    its other operands, when it can be computed in the loop computing ``value`` (see _siblings); else None."""
    rt = reader.result_types[0] if reader.result_types else None
    if not is_elementwise(reader.name) or _vector_exp(reader) or rt is None or rt.shape != value.type.shape \
            or rt.element.elem != "f32" or reader.results[0] in _fusable(f):
        return None
    others = [f.values.get(o) for o in reader.operands if o != res]
    if any(v is None or v.sym is not None or v.kind not in ("buf", "scalar", "splat") for v in others):
        return None
    sibling = Expr(reader, [value if o == res else f.values[o] for o in reader.operands])
    return sibling if sibling.vector_form(f, value.shape, [x for x in sibling.parts() if x is not value]) else None


def sibling_tile(f: FuncEmitter, reader: Op, sibling: Expr) -> Val:
    """The tile a sibling (_siblings) is computed into: ``reader``'s value from now on, ``reader`` passed over."""
    tile = f.new_buf(reader.results[0], reader.result_types[0])
    assert tile.storage is not None
    tile.storage.def_op = reader  # (what lower_struct's in-place test reads: the carried sum in its home)
    keep_out_of_carried_home(tile, sibling.parts())
    for leaf in sibling.parts():
        f.touch(leaf)
    f.values[reader.results[0]] = tile
    _PRECOMPUTED.setdefault(f, set()).add(id(reader))
    return tile


#: Stores left to compute their value's chain (_left_to_store), per function: id(store) -> the value's other
#: readers, to be computed in the store's loop too.
_STORE_READERS: weakref.WeakKeyDictionary[FuncEmitter, dict[int, list[Op]]] = weakref.WeakKeyDictionary()


def _left_to_store(f: FuncEmitter, op: Op) -> bool:
    """Is ``op``'s value (a chain with an exp, several readers) left unmaterialised, for the store that reads it
    to compute in its own loop, with the other readers (``stored_readers``)? softmax's ``e = exp(x - m)``, stored
    to the output and summed: one loop, ``e`` written once, to the output only. When the store is its first
    reader, the others element-wise ones after it whose other operands are there before it, and nothing between
    the chain and the store writes memory (its deferred loads are read at the store)."""
    uses = _uses(f)
    res, block = op.results[0], uses.block_of.get(id(op))
    readers = uses.readers.get(res, [])
    stores = [r for r in readers if r.name == "tt.store"]
    if block is None or len(stores) != 1 or len(readers) < 2 or any(uses.block_of.get(id(r)) is not block
                                                                    for r in readers):
        return False
    store = stores[0]
    if store.operands[1] != res or res in (store.operands[0], *store.operands[2:]):
        return False
    at = {id(o): i for i, o in enumerate(block.ops)}
    if any(_may_write(o) for o in block.ops[at[id(op)] + 1:at[id(store)]]):
        return False
    late = {r for o in block.ops[at[id(store)]:] for r in o.results}
    others = [r for r in readers if r is not store]
    if any(at[id(r)] < at[id(store)] or not is_elementwise(r.name) or _vector_exp(r) or not r.results
           or r.results[0] in _fusable(f) or any(o in late for o in r.operands if o != res) for r in others):
        return False
    _STORE_READERS.setdefault(f, {})[id(store)] = others
    return True


def stored_readers(f: FuncEmitter, store: Op) -> list[Op]:
    """The readers a store computes along with its value (_left_to_store); [] for any other store."""
    return _STORE_READERS.get(f, {}).pop(id(store), [])


TIER = Tier("fusion", elementwise=fuse_elementwise)
