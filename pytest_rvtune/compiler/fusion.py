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
                out += [c, *(c.sym.parts() if _is_mask(c) and c.sym is not None else [])]
        return out

    def size(self) -> int:
        """Ops in the chain."""
        return 1 + sum(c.size() for c in self.children if isinstance(c, Expr))

    def small(self) -> bool:
        """Few enough tiles read and ops for a loop at LMUL 8 (4 register groups) without spills."""
        tiles = {(x.expr, x.offset, x.strides) for x in self.parts() if x.kind == "buf" and x.strides[-1:] != (0,)}
        return len(tiles) <= 3 and self.size() <= 8

    def code(self, at: Callable[[Val], str]) -> str:
        args = [c.code(at) if isinstance(c, Expr) else at(c) for c in self.children]
        if _vector_exp(self.op):
            return f"rv_expf({args[0]})"
        return scalar_expr(self.op, args)

    def materialize(self, f: FuncEmitter, v: Val, ssa: str | None = None) -> Val:
        leaves = self.parts()
        for leaf in leaves:
            f.touch(leaf)
        out = f.new_buf(ssa, v.type, "fused")
        shape = v.shape
        keep_out_of_carried_home(out, leaves)
        # assume_safety: the result tile never overlaps a leaf except element for element (an in-place
        # loop-carried home), which clang's dependence analysis cannot prove for arena offsets in a nest
        pragma = _pragma(self.small(), numel(shape))
        if all(f.flat_ok(x, shape) for x in (out, *leaves)):  # (a mask leaf is not: its test needs indices)
            f.emit(pragma)
            with f.block(f"for (int32_t i_ = 0; i_ < {numel(shape)}; ++i_)"):
                f.emit(f"{out.expr}[i_] = {self.code(lambda x: f.access(x, None, 'i_'))};")
            return out
        idx = [f"p{d}_" for d in range(len(shape))]
        flat = " + ".join(f"{i} * {st}" if st != 1 else i for i, st in zip(idx, contiguous_strides(shape), strict=True))
        with contextlib.ExitStack() as stack:
            for d, (i, n) in enumerate(zip(idx, shape, strict=True)):
                if d == len(shape) - 1:
                    f.emit(_pragma(self.small(), n))
                stack.enter_context(f.block(f"for (int32_t {i} = 0; {i} < {n}; ++{i})"))
            f.emit(f"{out.expr}[{flat}] = {self.code(lambda x: f.access(x, idx, flat))};")
        return out


def _pragma(small: bool, trip: int) -> str:
    """rvtune_rt.h's vectorisation hint for an element-wise loop of ``trip`` iterations: LMUL 8 for a short
    chain, kept rolled when it runs 2 vectors or more."""
    if not small:
        return "RV_VECTORIZE_FUSED"
    return "RV_VECTORIZE_FUSED_WIDE_ROLLED" if trip >= 128 else "RV_VECTORIZE_FUSED_WIDE"


#: _fusable's answer per function being emitted (computed once: it walks the whole function).
_FUSABLE: weakref.WeakKeyDictionary[FuncEmitter, set[str]] = weakref.WeakKeyDictionary()


def _fusable(f: FuncEmitter) -> set[str]:
    """SSA names defined by an element-wise tensor op and read exactly once, by a reader of the same block."""
    cached = _FUSABLE.get(f)
    if cached is not None:
        return cached
    uses: dict[str, int] = {}
    blocks: list[Block] = []

    def walk(op: Op) -> None:
        for region in op.regions:
            for block in region.blocks:
                blocks.append(block)
                for inner in block.ops:
                    for o in inner.operands:
                        uses[o] = uses.get(o, 0) + 1
                    walk(inner)

    walk(f.func)
    # an element-wise op reading one value twice (d * d) computes it once per element: that is one use
    for block in blocks:
        for op in block.ops:
            if is_elementwise(op.name):
                for o in set(op.operands):
                    uses[o] -= op.operands.count(o) - 1
    out: set[str] = set()
    for block in blocks:
        # float chains only: integer / pointer / mask tensors are index arithmetic that ptr_analysis wants
        # to see as values (a block or bounds), not as opaque expressions
        defined = {r for op in block.ops if is_elementwise(op.name) and op.result_types and
                   op.result_types[0].is_tensor and op.result_types[0].element.elem in FLOAT_TYPES
                   for r in op.results}
        for op in block.ops:
            if op.name in _READERS or is_elementwise(op.name):
                out |= {o for o in op.operands if o in defined and uses.get(o) == 1}
    _FUSABLE[f] = out
    return out


def _is_mask(v: Val) -> bool:
    """A mask ptr_analysis keeps symbolic (a ``Bounds``: its condition is C over the loop indices)."""
    return v.kind == "sym" and hasattr(v.sym, "cond_expr")


def _hoisted_mask(f: FuncEmitter, v: Val) -> Val:
    """The mask with its guard and index bounds computed once, before the loop, as int32 values clamped to the
    tile (the same test for every index inside it): the loop compares 32-bit indices (vmslt at e32) instead
    of widening them to 64 bits for ``p1_ < (int64_t)N - start``."""
    b: Any = v.sym  # a ptr_analysis.Bounds dataclass (not imported: ptr_analysis imports this module)
    guard = b.guard
    if guard != "1":
        guard = f.temp("mask_on")
        f.emit(f"const int {guard} = {b.guard};")

    def bound(x: str | None, n: int) -> str | None:
        if x is None:
            return None
        name = f.temp("mask_at")
        f.emit(f"const int32_t {name} = (int32_t)rv_clamp64({x}, 0, {n});")
        return name
    shape = v.shape
    lo = tuple(bound(x, n) for x, n in zip(b.lo, shape, strict=True))
    hi = tuple(bound(x, n) for x, n in zip(b.hi, shape, strict=True))
    return Val(v.type, "sym", "", (), 0, None, dataclasses.replace(b, guard=guard, lo=lo, hi=hi))


def _vector_exp(op: Op) -> bool:
    """fp32 ``math.exp``: rv_expf (rvtune_exp.h, <= 1.03 ulp, branch-free: it vectorises; libm's is a call)."""
    return op.name == "math.exp" and op.result_types[0].element.elem == "f32"


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
            children.append(_hoisted_mask(f, v))
        else:
            children.append(f.get(o))  # ordinary values; other symbolic ones are materialised
    if all(isinstance(c, Val) and c.kind in ("scalar", "splat") for c in children):
        return False  # computed once as a scalar by the ordinary path
    if _vector_exp(op):
        f.values[op.results[0]] = _exp_tile(f, op, children[0])
        return True
    expr = Expr(op, children)
    value = Val(rt, "sym", "", (), 0, None, expr)
    too_long = len(expr.code(lambda v: "x" * 12)) > MAX_EXPR_CHARS
    if fuse_out and not too_long:
        f.values[op.results[0]] = value
    else:  # computed here, in one loop with the chain that feeds it, under the kernel's own name
        f.values[op.results[0]] = expr.materialize(f, value, op.results[0])
    return True


TIER = Tier("fusion", elementwise=fuse_elementwise)
