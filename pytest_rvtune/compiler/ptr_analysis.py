"""Pointer analysis: tensors of pointers and masks as structured blocks (as triton-shared's PtrAnalysis).

Without it every ``tl.load`` is a per-element gather through a materialised tensor of pointers
(``a[i] = mask[i] ? *ptrs[i] : other``), which clang can only vectorise into indexed masked loads.
Here, integer and pointer tensors built from ``make_range``, splats and broadcasts stay symbolic:

- ``Affine``: ``base + sum_d i_d * stride_d + sum_j coef_j * vec_j[i]`` where ``base`` and the strides are
  scalar C expressions and each ``vec_j`` is an ordinary (usually one-dimensional, broadcast) tensor: a
  row of token offsets in fused MoE stays indirect, the columns stay a unit-stride block.
- ``Bounds``: a mask that is a conjunction of ``lo_d <= i_d < hi_d`` ranges (from ``offs < N`` on a
  ``make_range``), a scalar guard and leftover per-element conditions.

A load or store through an ``Affine`` pointer becomes a loop nest whose innermost loop runs over a
contiguous (or constant-stride) row between the mask's bounds: ``out[o + q] = row[q]`` for
``lo <= q < hi`` (clang: vle32 / vector loads), the other value outside. Runtime strides are versioned
(``stride == 1`` gets the unit-stride loop). Loop-carried pointer tensors advanced by a splat
(``a_ptrs += BLOCK_K * stride``) keep one scalar base pointer per loop instead of a tile of pointers.

Anything else reads a symbolic value through ``FuncEmitter.get``, which materialises it into an ordinary
buffer first (``Affine.materialize`` / ``Bounds.materialize``): the fallback is the old code, so every
op keeps working. Integer wrap-around of the index arithmetic is not modelled (offsets are computed in
64 bits), as in triton-shared and triton-cpu.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import dot_kernel, rvv_chain
from .emitter import (
    FuncEmitter,
    OptionalHandler,
    Tier,
    Val,
    contiguous_strides,
    fill_stmt,
    handles_into,
    keep_out_of_carried_home,
)
from .fusion import Expr, deferred_load_ok, hoisted_mask, sibling_expr, sibling_tile, stored_readers, unit_stride_row
from .lower_ops import FP8_TYPES, c_type, is_elementwise
from .lower_struct import assign, declare, lower_body
from .ttir import Block, Op, Type, parse_int_array

#: The fast paths of this tier, by op name: each returns False (having emitted nothing) when its pattern is not
#: recognised, and the next tier in lower.TIERS (lower_struct) lowers the op.
OPTIONAL: dict[str, OptionalHandler] = {}
optional = handles_into(OPTIONAL)

# ---- C expressions with constant folding ------------------------------------------------------------


def _const(e: str) -> int | None:
    try:
        return int(e)
    except ValueError:
        return None


def c_add(a: str, b: str) -> str:
    ia, ib = _const(a), _const(b)
    if ia is not None and ib is not None:
        return str(ia + ib)
    if ia == 0:
        return b
    if ib == 0:
        return a
    return f"({a} + {b})"


def c_neg(a: str) -> str:
    ia = _const(a)
    return str(-ia) if ia is not None else f"(-{a})"


def c_mul(a: str, b: str) -> str:
    ia, ib = _const(a), _const(b)
    if ia is not None and ib is not None:
        return str(ia * ib)
    if ia == 0 or ib == 0:
        return "0"
    if ia == 1:
        return b
    if ib == 1:
        return a
    return f"({a} * {b})"


def _i64(e: str) -> str:
    return e if _const(e) is not None else f"((int64_t){e})"


def _max(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a if b is None else b
    return f"rv_max64({a}, {b})"


def _min(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a if b is None else b
    return f"rv_min64({a}, {b})"


# ---- the symbolic values --------------------------------------------------------------------------------


def _dep_dims(v: Val) -> tuple[int, ...]:
    """The dimensions an ordinary tensor value varies along."""
    if v.kind in ("scalar", "splat"):
        return ()
    return tuple(d for d, (s, n) in enumerate(zip(v.strides, v.shape, strict=True)) if s != 0 and n != 1)


def _touch_val(f: FuncEmitter, v: Val) -> None:
    f.touch(v)
    if v.sym is not None:
        for inner in v.sym.parts():
            f.touch(inner)


def _retype(v: Val, shape: tuple[int, ...], strides: tuple[int, ...]) -> Val:
    e = v.type.element
    return Val(Type(e.elem, e.pointee, shape), v.kind, v.expr, strides, v.offset, v.storage)


def _view_expand(v: Val, shape: tuple[int, ...], axis: int) -> Val:
    return v if v.kind in ("scalar", "splat") else _retype(v, shape, (*v.strides[:axis], 0, *v.strides[axis:]))


def _view_broadcast(v: Val, shape: tuple[int, ...]) -> Val:
    if v.kind in ("scalar", "splat"):
        return v
    strides = tuple(0 if s == 1 and d != 1 else st for s, d, st in zip(v.shape, shape, v.strides, strict=True))
    return _retype(v, shape, strides)


def _view_trans(v: Val, shape: tuple[int, ...], order: list[int]) -> Val:
    return v if v.kind in ("scalar", "splat") else _retype(v, shape, tuple(v.strides[o] for o in order))


def _loop_nest(f: FuncEmitter, shape: tuple[int, ...]) -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    for d, n in enumerate(shape):
        stack.enter_context(f.block(f"for (int32_t p{d}_ = 0; p{d}_ < {n}; ++p{d}_)"))
    return stack


@dataclass(eq=False)
class Affine:
    """``base + sum_d i_d * strides[d] + sum coef * vec[i]``: an int64 offset, or a pointer when ``ptr``."""

    base: str
    strides: tuple[str, ...]
    vecs: tuple[tuple[Val, str], ...] = ()
    ptr: bool = False

    def parts(self) -> list[Val]:
        return [v for v, _c in self.vecs]

    @property
    def uniform(self) -> bool:
        return not self.vecs and all(s == "0" for s in self.strides)

    def offset_expr(self, idx: list[str], skip_base: bool = False) -> str:
        """The int64 offset (from ``base`` when it is a pointer) of element ``idx``."""
        e = "0" if (self.ptr or skip_base) else self.base
        for i, s in zip(idx, self.strides, strict=True):
            e = c_add(e, c_mul(i, s))
        for v, coef in self.vecs:
            e = c_add(e, c_mul(_i64(FuncEmitter.access(v, idx, "")), coef))
        return e

    def materialize(self, f: FuncEmitter, v: Val) -> Val:
        for part in self.parts():
            f.touch(part)
        out = f.new_buf(None, v.type, "aff")
        keep_out_of_carried_home(out, self.parts())
        idx = [f"p{d}_" for d in range(len(v.shape))]
        flat = " + ".join(f"{i} * {s}" for i, s in zip(idx, contiguous_strides(v.shape), strict=True))
        off = self.offset_expr(idx)
        with _loop_nest(f, v.shape):
            if self.ptr:
                f.emit(f"{out.expr}[{flat}] = {self.base} + {off};")
            else:
                f.emit(f"{out.expr}[{flat}] = ({c_type(v.type)})({off});")
        return out

    def expand(self, shape: tuple[int, ...], axis: int) -> Affine:
        return Affine(self.base, (*self.strides[:axis], "0", *self.strides[axis:]),
                      tuple((_view_expand(v, shape, axis), c) for v, c in self.vecs), self.ptr)

    def broadcast(self, src_shape: tuple[int, ...], shape: tuple[int, ...]) -> Affine:
        strides = tuple("0" if s == 1 else st for s, st in zip(src_shape, self.strides, strict=True))
        return Affine(self.base, strides, tuple((_view_broadcast(v, shape), c) for v, c in self.vecs), self.ptr)

    def trans(self, shape: tuple[int, ...], order: list[int]) -> Affine:
        return Affine(self.base, tuple(self.strides[o] for o in order),
                      tuple((_view_trans(v, shape, order), c) for v, c in self.vecs), self.ptr)


@dataclass(eq=False)
class Bounds:
    """A mask: ``guard && all(lo[d] <= i_d < hi[d]) && all(conds[i])`` (None = no bound on that side)."""

    guard: str
    lo: tuple[str | None, ...]
    hi: tuple[str | None, ...]
    conds: tuple[Val, ...] = ()

    def parts(self) -> list[Val]:
        return list(self.conds)

    def cond_expr(self, idx: list[str], dims: set[int] | None = None) -> str:
        """The condition for ``idx`` (only the ranges/conditions within ``dims`` when given)."""
        terms = [self.guard] if self.guard != "1" else []
        for d, (i, lo, hi) in enumerate(zip(idx, self.lo, self.hi, strict=True)):
            if dims is not None and d not in dims:
                continue
            if lo is not None:
                terms.append(f"{i} >= {lo}")
            if hi is not None:
                terms.append(f"{i} < {hi}")
        for c in self.conds:
            if dims is None or set(_dep_dims(c)) <= dims:
                terms.append(FuncEmitter.access(c, idx, ""))
        return " && ".join(f"({t})" for t in terms) or "1"

    def materialize(self, f: FuncEmitter, v: Val) -> Val:
        for part in self.parts():
            f.touch(part)
        out = f.new_buf(None, v.type, "mask")
        keep_out_of_carried_home(out, self.parts())
        idx = [f"p{d}_" for d in range(len(v.shape))]
        flat = " + ".join(f"{i} * {s}" for i, s in zip(idx, contiguous_strides(v.shape), strict=True))
        with _loop_nest(f, v.shape):
            f.emit(f"{out.expr}[{flat}] = (uint8_t)({self.cond_expr(idx)});")
        return out

    def all_true(self, shape: tuple[int, ...]) -> str | None:
        """The C condition under which the mask holds for every index of ``shape`` (None: it has per-element
        conditions, or no bounds at all)."""
        if self.conds:
            return None
        terms = [self.guard] if self.guard != "1" else []
        for lo, hi, n in zip(self.lo, self.hi, shape, strict=True):
            terms += [f"{lo} <= 0"] if lo is not None else []
            terms += [f"{hi} >= {n}"] if hi is not None else []
        return " && ".join(f"({x})" for x in terms) if terms else None

    def expand(self, shape: tuple[int, ...], axis: int) -> Bounds:
        return Bounds(self.guard, (*self.lo[:axis], None, *self.lo[axis:]), (*self.hi[:axis], None, *self.hi[axis:]),
                      tuple(_view_expand(c, shape, axis) for c in self.conds))

    def broadcast(self, src_shape: tuple[int, ...], shape: tuple[int, ...]) -> Bounds:
        guard, lo, hi = [self.guard], list(self.lo), list(self.hi)
        for d, (s, n) in enumerate(zip(src_shape, shape, strict=True)):
            if s == 1 and n != 1:  # the source index was 0 on this dim: its range is a scalar condition now
                guard += [f"0 >= {lo[d]}"] if lo[d] is not None else []
                guard += [f"0 < {hi[d]}"] if hi[d] is not None else []
                lo[d] = hi[d] = None
        g = " && ".join(f"({x})" for x in guard if x != "1") or "1"
        return Bounds(g, tuple(lo), tuple(hi), tuple(_view_broadcast(c, shape) for c in self.conds))

    def trans(self, shape: tuple[int, ...], order: list[int]) -> Bounds:
        return Bounds(self.guard, tuple(self.lo[o] for o in order), tuple(self.hi[o] for o in order),
                      tuple(_view_trans(c, shape, order) for c in self.conds))


def _sym_val(t: Type, sym: Affine | Bounds) -> Val:
    return Val(t, "sym", "", (), 0, None, sym)


# ---- recognising operands ---------------------------------------------------------------------------


def _peek(f: FuncEmitter, ssa: str) -> Val:
    """An operand without materialising it (the caller understands symbolic values)."""
    try:
        v = f.values[ssa]
    except KeyError:
        raise f.fail(f"uses {ssa} before its definition") from None
    _touch_val(f, v)
    return v


def _is_int(t: Type) -> bool:
    e = t.element
    return e.pointee is None and e.elem in ("i8", "i16", "i32", "i64", "index")


def as_affine(v: Val) -> Affine | None:
    rank = len(v.shape)
    if isinstance(v.sym, Affine):
        return v.sym
    if v.sym is not None:
        return None
    is_ptr = v.type.element.pointee is not None
    if not is_ptr and not _is_int(v.type):
        return None
    if v.kind in ("scalar", "splat"):
        return Affine(v.expr if is_ptr else _i64(v.expr), ("0",) * rank, (), is_ptr)
    if v.kind == "iota":
        return Affine(str(v.offset), tuple("0" if n == 1 else str(s) for s, n in zip(v.strides, v.shape, strict=True)))
    if v.kind == "buf" and not is_ptr and len(_dep_dims(v)) <= 1:
        return Affine("0", ("0",) * rank, ((v, "1"),))
    return None


def as_mask(f: FuncEmitter, v: Val) -> Bounds:
    rank = len(v.shape)
    if isinstance(v.sym, Bounds):
        return v.sym
    if v.sym is not None:
        v = v.sym.materialize(f, v)
    if v.kind in ("scalar", "splat"):
        return Bounds(v.expr, (None,) * rank, (None,) * rank)
    return Bounds("1", (None,) * rank, (None,) * rank, (v,))


def _structured(v: Val) -> bool:
    return v.kind == "iota" or isinstance(v.sym, Affine)


# ---- handlers -----------------------------------------------------------------------------------------


@optional("arith.addi", "arith.subi", "arith.muli", "tt.addptr", "arith.extsi")
def op_affine_arith(f: FuncEmitter, op: Op) -> bool:
    rt = op.result_types[0]
    if not rt.is_tensor:
        return False
    vals = [_peek(f, o) for o in op.operands]
    found = [as_affine(v) for v in vals]
    affs = [a for a in found if a is not None]
    if len(affs) != len(found):
        return False
    dims = {d for v in vals for d in (_dep_dims(v) if v.sym is None else range(len(v.shape)))}
    # Worth it: an index block (make_range based), or offsets along two dims, or a row of offsets that a
    # broadcast will widen into a block (fused MoE's token rows). A 1-D tensor of loaded offsets is not:
    # that is a real gather and stays one.
    widened = op.name == "tt.addptr" and len(rt.shape or ()) >= 2 and vals[0].kind in ("scalar", "splat")
    if not any(_structured(v) for v in vals) and not (op.name in ("arith.addi", "tt.addptr") and len(dims) >= 2) \
            and not widened:
        return False  # nothing to gain: the ordinary element-wise loop is as good
    if op.name == "arith.extsi":
        out = affs[0]
    elif op.name == "arith.muli":
        x, y = affs
        if not y.uniform:
            x, y = y, x
        if not y.uniform:
            return False
        c = y.base
        out = Affine(c_mul(x.base, c), tuple(c_mul(s, c) for s in x.strides),
                     tuple((v, c_mul(k, c)) for v, k in x.vecs))
    else:
        x, y = affs
        if op.name == "arith.subi":
            if y.ptr:
                return False
            y = Affine(c_neg(y.base), tuple(c_neg(s) for s in y.strides), tuple((v, c_neg(k)) for v, k in y.vecs))
        if x.ptr and y.ptr:
            return False
        if y.ptr:
            x, y = y, x
        base = (x.base if y.base == "0" else f"({x.base} + {y.base})") if x.ptr else c_add(x.base, y.base)
        out = Affine(base, tuple(c_add(a, b) for a, b in zip(x.strides, y.strides, strict=True)), x.vecs + y.vecs,
                     x.ptr)
    f.values[op.results[0]] = _sym_val(rt, out)
    return True


_MIRROR = {2: 4, 3: 5, 4: 2, 5: 3}


@optional("arith.cmpi")
def op_cmpi(f: FuncEmitter, op: Op) -> bool:
    """``offs < N`` on a make_range-based offset: a range of indices, not a tensor of booleans."""
    rt = op.result_types[0]
    pred = op.int_attr("predicate")
    if not rt.is_tensor or pred not in _MIRROR:
        return False
    x, y = (_peek(f, o) for o in op.operands)
    ax, ay = as_affine(x), as_affine(y)
    if ax is None or ay is None:
        return False
    if ax.uniform and not ay.uniform:
        ax, ay, pred, x = ay, ax, _MIRROR[pred], y
    if not ay.uniform or ax.vecs or ax.ptr or not _structured(x):
        return False
    dims = [d for d, s in enumerate(ax.strides) if s != "0"]
    if len(dims) != 1 or ax.strides[dims[0]] != "1":
        return False
    d, rank = dims[0], len(rt.shape or ())
    limit = c_add(ay.base, c_neg(ax.base))  # i_d <pred> limit
    lo: list[str | None] = [None] * rank
    hi: list[str | None] = [None] * rank
    if pred == 2:
        hi[d] = limit
    elif pred == 3:
        hi[d] = c_add(limit, "1")
    elif pred == 4:
        lo[d] = c_add(limit, "1")
    else:
        lo[d] = limit
    f.values[op.results[0]] = _sym_val(rt, Bounds("1", tuple(lo), tuple(hi)))
    return True


@optional("arith.andi")
def op_andi(f: FuncEmitter, op: Op) -> bool:
    rt = op.result_types[0]
    if not rt.is_tensor or rt.element.elem != "i1":
        return False
    x, y = (_peek(f, o) for o in op.operands)
    if not isinstance(x.sym, Bounds) and not isinstance(y.sym, Bounds):
        return False
    a, b = as_mask(f, x), as_mask(f, y)
    guard = " && ".join(f"({g})" for g in (a.guard, b.guard) if g != "1") or "1"
    lo = tuple(_max(p, q) for p, q in zip(a.lo, b.lo, strict=True))
    hi = tuple(_min(p, q) for p, q in zip(a.hi, b.hi, strict=True))
    f.values[op.results[0]] = _sym_val(rt, Bounds(guard, lo, hi, a.conds + b.conds))
    return True


@optional("tt.expand_dims")
def op_expand_dims(f: FuncEmitter, op: Op) -> bool:
    src = _peek(f, op.operands[0])
    if not isinstance(src.sym, Affine | Bounds):
        return False
    t = op.result_types[0]
    f.values[op.results[0]] = _sym_val(t, src.sym.expand(t.shape or (), op.int_attr("axis")))
    return True


def _unit_dims_inserted(src: tuple[int, ...], shape: tuple[int, ...]) -> list[int] | None:
    """The axes at which ``shape`` is ``src`` with unit dims inserted (``[64] -> [64, 1]``: ``[1]``), in
    increasing order, or None when the reshape does anything else."""
    axes, i = [], 0
    for r, n in enumerate(shape):
        if i < len(src) and n == src[i]:
            i += 1
        elif n == 1:
            axes.append(r)
        else:
            return None
    return axes if i == len(src) else None


@optional("tt.reshape")
def op_reshape(f: FuncEmitter, op: Op) -> bool:
    """A reshape that only inserts unit dims is an expand_dims. Triton's rewrite of tensor descriptors into
    pointers (frontend.py) shapes a descriptor's offsets with ``reshape`` ([BM] -> [BM, 1]), not ``[:, None]``.
    Kept symbolic, the descriptor's mask ``0 <= offs < shape`` is loop bounds and its loads are row copies; a
    materialised offset tile made per-element byte masks (a 64x64 matmul config: 3-15 s of the host's clang,
    most of it unrolling and SLP-vectorising those tests)."""
    src = _peek(f, op.operands[0])
    if not isinstance(src.sym, Affine | Bounds):
        return False
    t = op.result_types[0]
    axes = _unit_dims_inserted(src.shape, t.shape or ())
    if axes is None:
        return False
    sym, shape = src.sym, src.shape
    for axis in axes:
        shape = (*shape[:axis], 1, *shape[axis:])
        sym = sym.expand(shape, axis)
    f.values[op.results[0]] = _sym_val(t, sym)
    return True


@optional("tt.broadcast")
def op_broadcast(f: FuncEmitter, op: Op) -> bool:
    src = _peek(f, op.operands[0])
    if not isinstance(src.sym, Affine | Bounds):
        return False
    t = op.result_types[0]
    f.values[op.results[0]] = _sym_val(t, src.sym.broadcast(src.shape, t.shape or ()))
    return True


@optional("tt.trans")
def op_trans(f: FuncEmitter, op: Op) -> bool:
    src = _peek(f, op.operands[0])
    if not isinstance(src.sym, Affine | Bounds):
        return False
    t = op.result_types[0]
    f.values[op.results[0]] = _sym_val(t, src.sym.trans(t.shape or (), parse_int_array(op.props["order"])))
    return True


# ---- loads and stores through structured pointers --------------------------------------------------------


def _segments(op: Op, names: int) -> list[int]:
    raw = op.attr("operandSegmentSizes")
    return parse_int_array(raw) if raw else [1] * names


def block_access(f: FuncEmitter, shape: tuple[int, ...], ptr: Affine, mask: Bounds, elem_ptr_type: str,
                 inner: Callable[[str, str, list[str]], str], outside: Callable[[str, list[str]], str] | None,
                 what: str, row_copy: Callable[[str, list[str]], str] | None = None,
                 row_fill: Callable[[str, str], str | None] | None = None,
                 pragma: str = "RV_VECTORIZE_FUSED", rows: str = "unit-stride rows between the mask's bounds",
                 row_vector: Callable[[list[str], Callable[[], None], str, str], None] | None = None) -> None:
    """Loops over a structured block: ``inner(elem, flat, idx)`` for every element inside the mask (``elem``
    is the C lvalue of the element in memory), ``outside(flat, idx)`` for the others (loads: ``other``).
    ``row_copy(stride, idx)``, when given, is one statement doing ``inner`` for q in [lo_, hi_) of a row
    (rv_copy_e*: vle/vlse on RVV) and is used when no per-element condition or offset is left.
    ``row_fill(first, count)``, when given, is one statement doing ``outside`` for ``count`` elements from flat
    index ``first`` (rv_fill_*: a constant ``other``), so no plain fill loop is left for clang to make a memset
    call of. ``pragma`` goes before a unit-stride element loop (rvtune_rt.h's RV_VECTORIZE_FUSED[_WIDE]).
    ``row_vector(idx, scalar, lo, hi)``, when given, writes a unit-stride row's loop over q_ in [lo, hi) itself
    (RVV intrinsics: rvv_chain.py; lo and hi are numbers when the mask does not bound the row), ``scalar()``
    emitting the plain loop for other targets."""
    rank = len(shape)
    last = rank - 1
    n = shape[last]
    outer_dims = set(range(last))
    idx = [f"p{d}_" for d in range(last)] + ["q_"]
    contig = contiguous_strides(shape)
    o = " + ".join(f"p{d}_ * {contig[d]}" for d in range(last)) or "0"
    row_vecs = [(v, c) for v, c in ptr.vecs if last not in _dep_dims(v)]
    col_vecs = [(v, c) for v, c in ptr.vecs if last in _dep_dims(v)]
    row = Affine("0", (*ptr.strides[:last], "0"), tuple(row_vecs))
    row_off = row.offset_expr([*idx[:last], "0"], skip_base=True)
    col_cond = [c for c in mask.conds if last in _dep_dims(c)]
    stride = ptr.strides[last]
    f.emit(f"/* {what}: a strided block, {rows} */")
    f.emit("{")
    f.depth += 1
    lo_raw, hi_raw = mask.lo[last], mask.hi[last]
    lo = f"rv_clamp64({lo_raw}, 0, {n})" if lo_raw is not None else "0"
    hi = f"rv_clamp64({hi_raw}, lo_, {n})" if hi_raw is not None else str(n)
    f.emit(f"const int64_t lo_ = {lo}, hi_ = {hi};")
    with _outer_loops(f, shape[:last]):
        f.emit(f"const int64_t o_ = {o};")
        f.emit(f"{elem_ptr_type}row_ = {ptr.base} + {row_off};")
        outer_ok = Bounds(mask.guard, mask.lo, mask.hi, tuple(c for c in mask.conds if c not in col_cond))
        cond = outer_ok.cond_expr(idx, outer_dims)
        col_extra = Affine("0", ("0",) * last + ("0",), tuple(col_vecs)).offset_expr(idx, skip_base=True)

        def middle(step: str) -> None:
            off = c_add(c_mul("q_", step), col_extra)
            elem = f"row_[{off}]"
            body = inner(elem, "o_ + q_", idx)
            if col_cond:
                cc = " && ".join(f"({FuncEmitter.access(c, idx, '')})" for c in col_cond)
                els = outside("o_ + q_", idx) if outside else ""
                body = f"if ({cc}) {{ {body} }}" + (f" else {{ {els} }}" if els else "")
            def scalar() -> None:
                if step == "1":  # distinct addresses in global memory, the other side arena tiles: no overlap
                    f.emit(pragma)
                with f.block("for (int64_t q_ = lo_; q_ < hi_; ++q_)"):
                    f.emit(body)
            if row_vector is not None and step == "1" and not col_cond and col_extra == "0":
                row_vector(idx, scalar, lo if lo_raw is None else "lo_", hi if hi_raw is None else "hi_")
            else:
                scalar()

        def outside_range(first: str, end: str) -> None:
            start, count = (f"o_ + {first}", f"{end} - {first}") if first != "0" else ("o_", end)
            fill = row_fill(start, count) if row_fill else None
            if fill is not None:
                f.emit(fill)
                return
            assert outside is not None
            with f.block(f"for (int64_t q_ = {first}; q_ < {end}; ++q_)"):
                f.emit(outside("o_ + q_", idx))

        with f.block(f"if ({cond})") if cond != "1" else contextlib.nullcontext():
            if outside is not None and lo_raw is not None:
                outside_range("0", "lo_")
            if row_copy is not None and not col_cond and not col_vecs:
                f.emit(row_copy(stride, idx))
            elif _const(stride) is not None:
                middle(stride)
            else:  # runtime stride: the unit-stride version is the one that vectorises into vle / vmovups
                with f.block(f"if ({stride} == 1)"):
                    middle("1")
                with f.block("else"):
                    middle(stride)
            if outside is not None and hi_raw is not None:
                outside_range("hi_", str(n))
        if cond != "1" and outside is not None:
            with f.block("else"):
                outside_range("0", str(n))
    f.depth -= 1
    f.emit("}")


def _bits(t: Type) -> int:
    """Element width in bits for rv_copy_e* (0: none fits)."""
    e = t.element
    if e.pointee is not None:
        return 64
    return {"i1": 8, "i8": 8, "i16": 16, "f16": 16, "bf16": 16, "i32": 32, "f32": 32, "i64": 64,
            "f64": 64, **dict.fromkeys(FP8_TYPES, 8)}.get(e.elem or "", 0)


def _outer_loops(f: FuncEmitter, shape: tuple[int, ...]) -> contextlib.ExitStack:
    return _loop_nest(f, shape)


@dataclass(eq=False)
class BlockLoad:
    """A load left unread (fusion.deferred_load_ok): the element-wise chain that consumes it reads the block from
    memory in its own loop, ``mask ? ptr[idx] : other`` per element (a masked vector load on RVV), instead of
    reading a tile this load would have copied in. Anything else gets the tile (``materialize``: the copy,
    emitted where it is asked for, which deferred_load_ok has checked is still the same memory)."""

    op: Op
    ptr: Affine
    mask: Bounds
    other: Val | None

    def parts(self) -> list[Val]:
        return [*self.ptr.parts(), *self.mask.parts()]

    def element_expr(self, idx: list[str]) -> str:
        at = f"({self.ptr.base})[{self.ptr.offset_expr(idx)}]"
        cond = self.mask.cond_expr(idx)
        return at if cond == "1" else f"(({cond}) ? {at} : {_fill_of(self.other)})"

    def unit_stride_row(self) -> bool:
        """Unmasked, and consecutive in memory along the last axis (a vector load of each row: rvv_chain)."""
        last = len(self.ptr.strides) - 1
        return self.mask.cond_expr([f"p{d}_" for d in range(last + 1)]) == "1" and self.ptr.strides[-1] == "1" \
            and not any(last in _dep_dims(v) for v, _c in self.ptr.vecs)

    def unmasked(self) -> tuple[str, BlockLoad] | None:
        """(C condition under which every element is inside the mask, this load without its mask), or None
        when the mask has per-element conditions or is no mask at all."""
        whole = _whole_block(self.ptr, self.mask, self.op.result_types[0].shape or ())
        if whole is None:
            return None
        rank = len(self.mask.lo)
        return whole, BlockLoad(self.op, self.ptr, Bounds("1", (None,) * rank, (None,) * rank), self.other)

    def materialize(self, f: FuncEmitter, v: Val) -> Val:
        for part in self.parts():
            f.touch(part)
        out = f.new_buf(None, v.type, "load")
        _load_into(f, self.op, out, self.ptr, self.mask, self.other)
        return out


def _fill_of(other: Val | None) -> str:
    """The C value of a load's masked-off elements: a scalar ``other``, else 0 (Triton leaves them undefined)."""
    return other.expr if other is not None and other.kind in ("scalar", "splat") else "0"


#: Element types a deferred load may have: those fusion's chains compute on (not fp8: its codes need decoding).
_DEFERRED_TYPES = ("f16", "bf16", "f32", "f64")


@optional("tt.load")
def op_load(f: FuncEmitter, op: Op) -> bool:
    t = op.result_types[0]
    seg = _segments(op, 3)
    ptr_v = _peek(f, op.operands[0])
    if not t.is_tensor or not isinstance(ptr_v.sym, Affine) or not ptr_v.sym.ptr:
        return False
    rest = iter(op.operands[1:])
    mask_v = _peek(f, next(rest)) if len(seg) > 1 and seg[1] else None
    other = f.get(next(rest)) if len(seg) > 2 and seg[2] else None
    shape = t.shape or ()
    mask = as_mask(f, mask_v) if mask_v is not None else Bounds("1", (None,) * len(shape), (None,) * len(shape))
    if t.element.elem in _DEFERRED_TYPES and (other is None or other.kind in ("scalar", "splat")) \
            and deferred_load_ok(f, op):
        f.emit("/* load: a deferred load, read from memory by the element-wise chain that consumes it */")
        f.values[op.results[0]] = Val(t, "sym", "", (), 0, None, BlockLoad(op, ptr_v.sym, mask, other))
        return True
    out = f.new_buf(op.results[0], t)
    _load_into(f, op, out, ptr_v.sym, mask, other)
    f.values[op.results[0]] = out
    return True


def _load_into(f: FuncEmitter, op: Op, out: Val, ptr: Affine, mask: Bounds, other: Val | None) -> None:
    """The tile ``out`` of a block load: one row copy per row where the block lies inside its mask, else the
    rows between the mask's bounds with ``other`` around them."""
    t = out.type
    shape = t.shape or ()
    keep_out_of_carried_home(out, [*ptr.parts(), *mask.parts()])
    fill = _fill_of(other)

    def other_at(flat: str, idx: list[str]) -> str:
        value = fill if other is None or other.kind in ("scalar", "splat") else FuncEmitter.access(other, idx, "")
        return f"{out.expr}[{flat}] = {value};"

    width = _bits(t)

    def copy(stride: str, _idx: list[str]) -> str:
        return f"rv_copy_e{width}({out.expr} + o_ + lo_, 1, row_ + lo_ * {stride}, {stride}, hi_ - lo_);"

    skip = _in_place_for_dot(f, op, ptr, mask, shape)
    dot_reads_data_only = _zero_tail_for_dot(f, op, out, mask, shape, other)

    def fill_row(first: str, count: str) -> str | None:
        if other is not None and other.kind not in ("scalar", "splat"):
            return None
        stmt = fill_stmt(t, f"{out.expr} + {first}", fill, count)
        # the zeros are for the dot alone, and where it reads the data only (RVV) nothing reads them
        return f"if (!RV_DOT_DATA_ONLY) {stmt}" if stmt is not None and dot_reads_data_only else stmt

    whole = _whole_block(ptr, mask, shape) if width and len(shape) in (1, 2) else None
    with f.block(f"if (!{skip})") if skip else contextlib.nullcontext():
        if whole is not None:  # the common case, a block wholly inside its mask: one call copies its rows
            at = c_add(ptr.base, ptr.offset_expr(["0"] * len(shape), skip_base=True))
            with f.block(f"if ({whole})"):
                if len(shape) == 1:  # (a row of a 2-D kernel's 1-D operand: layer_norm's weights, each step)
                    f.emit(f"rv_copy_e{width}({out.expr}, 1, {at}, {ptr.strides[0]}, {shape[0]});")
                else:
                    sld, ss = ptr.strides
                    f.emit(f"rv_copy_rows_e{width}({out.expr}, {shape[1]}, {at}, {sld}, {ss}, {shape[0]}, "
                           f"{shape[1]});")
        with f.block("else") if whole is not None else contextlib.nullcontext():
            block_access(f, shape, ptr, mask, "const " + c_type(op.operand_types[0]),
                         lambda elem, flat, _idx: f"{out.expr}[{flat}] = {elem};", other_at, f"load {out.expr}",
                         copy if width else None, fill_row)


def _whole_block(ptr: Affine, mask: Bounds, shape: tuple[int, ...]) -> str | None:
    """The C condition under which every element of a pointer block is inside its mask (None: the mask has
    per-element conditions, or no bounds at all, so block_access checks nothing per row anyway)."""
    if ptr.vecs or not ptr.ptr:
        return None
    return mask.all_true(shape)


def _block_of(f: FuncEmitter, op: Op) -> Block | None:
    def walk(parent: Op) -> Block | None:
        for region in parent.regions:
            for block in region.blocks:
                if any(o is op for o in block.ops):
                    return block
                for inner in block.ops:
                    found = walk(inner)
                    if found is not None:
                        return found
        return None
    return walk(f.func)


def _in_place_for_dot(f: FuncEmitter, op: Op, ptr: Affine, mask: Bounds, shape: tuple[int, ...]) -> str | None:
    """For a B tile only a dot reads (dot_kernel.b_read_in_place): a C flag, true at run time when the block
    lies wholly inside its mask with unit-stride rows (and the ISA wants it: RV_DOT_B_IN_PLACE, rvtune_dot.h);
    then the dot reads it in place and the copy is skipped (on RVV the copy costs up to a tenth of the dot)."""
    block = _block_of(f, op)
    if ptr.vecs or mask.conds or block is None or not dot_kernel.b_read_in_place(f, op, block, is_elementwise):
        return None
    whole = _whole_block(ptr, mask, shape)
    terms = [whole] if whole is not None else []
    if _const(ptr.strides[1]) != 1:
        terms.append(f"{ptr.strides[1]} == 1")
    flag = f.temp("in_place")
    at = c_add(ptr.base, ptr.offset_expr(["0", "0"], skip_base=True)) if ptr.ptr else None
    if at is None:
        return None
    f.emit("/* the dot below reads this tile in place when it lies wholly inside the mask */")
    f.emit(f"const int {flag} = {' && '.join(['RV_DOT_B_IN_PLACE', *(f'({x})' for x in terms)])};")
    f.in_place_b[op.results[0]] = dot_kernel.InPlaceB(flag, at, ptr.strides[0])
    return flag


def _is_zero(other: Val | None) -> bool:
    """Is a load's ``other`` a literal zero (or absent: masked-off elements are then undefined)?"""
    if other is None:
        return True
    if other.kind not in ("scalar", "splat"):
        return False
    text = other.expr.strip("() ").rstrip("fF")
    try:
        return float.fromhex(text) == 0.0 if "0x" in text.lower() else float(text) == 0.0
    except ValueError:
        return False


def _zero_tail_for_dot(f: FuncEmitter, op: Op, out: Val, mask: Bounds, shape: tuple[int, ...],
                       other: Val | None) -> bool:
    """For a rank-2 fp32 tile an fp32 tt.dot of the same block reads: when the mask is upper bounds only
    (``offs < N``) and ``other`` is zero, the tile is zero past those bounds; the extents are computed here as
    C values (in the dot's scope: same block) so the dot can multiply the data only (dot_kernel.ZeroTail).
    True when that dot is the tile's only reader (then, where the dot reads the data only, the zeros need not
    be written)."""
    res = op.results[0]
    f.zero_tail.pop(res, None)
    if len(shape) != 2 or mask.conds or any(lo is not None for lo in mask.lo) \
            or all(hi is None for hi in mask.hi) or not _is_zero(other) or out.type.element.elem != "f32":
        return False
    block = _block_of(f, op)
    dots = [o for o in block.ops if o.name == "tt.dot" and res in o.operands[:2]] if block is not None else []
    if block is None or not dots:
        return False
    names = []
    for d, (hi, n) in enumerate(zip(mask.hi, shape, strict=True)):
        if hi is None:
            names.append(str(n))
            continue
        name = f.temp(f"{out.expr}_{'rows' if d == 0 else 'cols'}")
        value = f"rv_clamp64({hi}, 0, {n})"
        if mask.guard != "1":
            value = f"(({mask.guard}) ? {value} : 0)"
        f.emit(f"const int64_t {name} = {value};")
        names.append(name)
    f.zero_tail[res] = dot_kernel.ZeroTail(out, names[0], names[1])
    users = [o for o in block.ops if res in o.operands]
    return (len(users) == 1 and users[0] is dots[0] and list(dots[0].operands).count(res) == 1
            and not dot_kernel.used_in_regions(block.ops, res) and dot_kernel.lowers_to_micro_kernel(dots[0]))


@optional("tt.store")
def op_store(f: FuncEmitter, op: Op) -> bool:
    t = op.operand_types[0]
    ptr_v = _peek(f, op.operands[0])
    if not t.is_tensor or not isinstance(ptr_v.sym, Affine) or not ptr_v.sym.ptr:
        return False
    val = _peek(f, op.operands[1])
    if val.sym is not None and not isinstance(val.sym, Expr):
        val = f.get(op.operands[1])  # a pointer block / mask stored as data: materialised
    chain = val.sym if isinstance(val.sym, Expr) else None
    shape = t.shape or ()
    mask = as_mask(f, _peek(f, op.operands[2])) if len(op.operands) > 2 else \
        Bounds("1", (None,) * len(shape), (None,) * len(shape))
    width = _bits(op.operand_types[1])

    def copy(source: Val) -> Callable[[str, list[str]], str]:
        def row(stride: str, idx: list[str]) -> str:
            src = FuncEmitter.access(source, [*idx[:-1], "lo_"], "")
            return f"rv_copy_e{width}(row_ + lo_ * {stride}, {stride}, &{src}, 1, hi_ - lo_);"
        return row

    # a short chain (or none) at LMUL 8, as fusion.Expr.materialize does, when a row holds a whole vector (the
    # bound is not a constant: a shorter row would run in the scalar remainder)
    wide = (chain is None or chain.small()) and shape[-1] >= 64
    ptr = ptr_v.sym
    whole_rows = Bounds("1", (None,) * len(shape), (None,) * len(shape))
    #: the stored value, as its readers computed in the store's loop read it: the element just written
    stored = Val(op.operand_types[1], "buf", "row_", (*(0,) * (len(shape) - 1), 1))

    def store_loops(computed: Expr | None, within: Bounds = mask, source: Val = val,
                    readers: Sequence[tuple[Expr, Val]] = ()) -> None:
        """The store's loops: of ``computed`` (a chain) or else of ``source``'s elements, within the mask or a
        mask that holds for all; ``readers`` ((chain, tile) pairs reading the stored value as the leaf
        ``stored``: fusion.stored_readers) computed in the same loop, into their tiles (whole rows only)."""
        def statement(elem: str, flat: str, idx: list[str]) -> str:
            at = lambda leaf: elem if leaf is stored else FuncEmitter.access(leaf, idx, "")  # noqa: E731
            value = computed.code(at) if computed is not None else at(source)
            return " ".join([f"{elem} = {value};", *(f"{t.expr}[{flat}] = {c.code(at)};" for c, t in readers)])

        def row_vector(idx: list[str], scalar: Callable[[], None], lo: str, hi: str) -> None:  # RVV intrinsics
            assert computed is not None
            at = lambda leaf: FuncEmitter.access(leaf, idx, "")  # noqa: E731
            outputs = [(computed, "row_[q_]", stored), *((c, at(t), t) for c, t in readers)]
            rvv_chain.emit_versions(f, [computed], lambda: rvv_chain.emit_loop(
                f, outputs, lo, hi, "q_", at, unit_stride_row), scalar)
        vector = computed is not None and width == 32 and rvv_chain.has_exp(computed) \
            and computed.vector_form(f, shape, [], rows=True)
        plain_source = source.sym is None and source.kind == "buf" and source.strides[-1:] == (1,)
        # rv_copy_e* (vle / vse in a loop) for a tile's rows, but a plain loop for whole rows of one vector (at
        # most 256 bytes): fewer instructions per row. (A longer plain one would become a memcpy call: clang's
        # loop-idiom pass.)
        row_copy = width and plain_source and computed is None and (within is mask or shape[-1] * width > 2048)
        block_access(f, shape, ptr, within, c_type(t), statement, None, "store", copy(source) if row_copy else None,
                     pragma="RV_VECTORIZE_FUSED_WIDE" if wide else "RV_VECTORIZE_FUSED",
                     rows="whole unit-stride rows (the mask holds for all)" if within is not mask else
                     "unit-stride rows between the mask's bounds", row_vector=row_vector if vector else None)

    def store_tile(source: Val) -> None:
        """A tile stored: plain row loops when the mask holds for the whole block (every block but the last)."""
        whole = mask.all_true(shape) if source.kind == "buf" and source.strides[-1:] == (1,) and shape else None
        if whole is None:
            store_loops(None, source=source)
            return
        with f.block(f"if ({whole})"):
            store_loops(None, whole_rows, source)
        with f.block("else"):
            store_loops(None, source=source)

    if chain is None:
        store_tile(val)
        return True
    # Loads deferred to this store (fusion.deferred_load_ok) are read in its loop, element by element as it
    # writes. Through its own pointer block each element is read just before it is written: right while no two
    # elements share an address. Through another block: right while the two blocks' address ranges do not meet.
    # Else they are read whole first, here (nothing has written memory since the loads).
    deferred = {id(x.sym): x.sym for x in chain.parts() if isinstance(x.sym, BlockLoad)}
    tests = [_one_to_one(ptr, shape) if load.op.operands[0] == op.operands[0] else
             _disjoint(load.ptr, _bits(load.op.result_types[0]), ptr, width, shape) for load in deferred.values()]
    needed = [t for t in dict.fromkeys(tests) if t != "1"]
    one_to_one = None if None in needed else " && ".join(t for t in needed if t is not None) or "1"

    def snapshot() -> Expr:
        def tile(x: Val) -> Val:
            if not isinstance(x.sym, BlockLoad) or id(x.sym) not in deferred:
                return x
            out = x.sym.materialize(f, x)
            f.touch(out)
            return out
        return chain.replace_leaves(tile)

    # the test that the store's mask holds for the whole block, written as a chain's is (hoisted_mask: the same
    # names for the same bounds), once, here, before any branch below
    store_whole = None
    if chain.unmasked() is not None and mask.all_true(shape) is not None:
        hoisted = hoisted_mask(f, Val(op.operand_types[0], "sym", "", (), 0, None, mask)).sym
        store_whole = hoisted.all_true(shape) if isinstance(hoisted, Bounds) else None

    def whole_version(computed: Expr) -> tuple[str, Expr] | None:
        """(its test, the chain unmasked) when the chain's unmasked version runs exactly when the store's mask
        holds for the whole block (the same test): then its rows need no bounds either (plain loops)."""
        fast = computed.unmasked()
        return fast if fast is not None and store_whole is not None and fast[0] == f"({store_whole})" else None

    def versions(computed: Expr) -> None:
        fast = whole_version(computed)
        if fast is None:
            computed.in_versions(f, store_loops)
            return
        with f.block(f"if ({fast[0]})"):
            store_loops(fast[1], whole_rows)
        with f.block("else"):
            store_loops(computed)

    readers = stored_readers(f, op)
    if readers:  # the stored value's other readers, computed with it (fusion._left_to_store)
        res = op.operands[1]
        siblings = [sibling_expr(f, r, res, stored) for r in readers]
        fast = whole_version(chain)
        if fast is not None and one_to_one is not None and all(c is not None for c in siblings):
            pairs = [(c, sibling_tile(f, r, c)) for r, c in zip(readers, siblings, strict=True) if c is not None]
            with f.block(f"if ({fast[0] if one_to_one == '1' else f'({one_to_one}) && {fast[0]}'})"):
                store_loops(fast[1], whole_rows, readers=pairs)  # every element stored: every reader's too
            with f.block("else"):  # the chain into a tile with the readers (its deferred loads read first), stored
                store_tile(chain.materialize(f, val, res, lambda out: [
                    (c.replace_leaves(lambda x: out if x is stored else x), t) for c, t in pairs]))
            return True

        def with_readers(out: Val) -> list[tuple[Expr, Val]]:
            found = [(r, sibling_expr(f, r, res, out)) for r in readers]
            return [(c, sibling_tile(f, r, c)) for r, c in found if c is not None]
        e = chain.materialize(f, val, res, with_readers)
        f.values[res] = e  # (what readers it could not take read)
        store_tile(e)
        return True
    if one_to_one == "1":
        versions(chain)
    elif one_to_one is None:
        versions(snapshot())
    else:
        with f.block(f"if ({one_to_one})"):
            versions(chain)
        with f.block("else"):
            versions(snapshot())
    return True


def _split_add(e: str) -> tuple[str, str] | None:
    """``(x, y)`` when the C expression ``e`` is ``(x + y)`` as c_add writes it, else None."""
    if not (e.startswith("(") and e.endswith(")")):
        return None
    depth = 0
    for i in range(len(e) - 2, 0, -1):  # the last top-level " + " inside the outer parentheses
        depth += {")": 1, "(": -1}.get(e[i], 0)
        if depth == 0 and e.startswith(" + ", i - 1) and i > 1:
            return e[1:i - 1], e[i + 2:-1]
    return None


def _disjoint(a: Affine, a_bits: int, b: Affine, b_bits: int, shape: tuple[int, ...]) -> str | None:
    """A C condition under which two pointer blocks of ``shape`` (elements of a_bits / b_bits) share no byte:
    each block's address range, from its lowest to its highest element, lies wholly below the other's (None:
    not known here, a gathered offset)."""
    if a.vecs or b.vecs or not a_bits or not b_bits:
        return None
    a_base, b_base = a.base, b.base
    while a_bits == b_bits:  # both moved by the same offset (a column step): the same answer without it, and a
        sa, sb = _split_add(a_base), _split_add(b_base)  # test that no longer changes inside the column loop
        if sa is None or sb is None or sa[1] != sb[1]:
            break
        a_base, b_base = sa[0], sb[0]
    a, b = Affine(a_base, a.strides, ptr=True), Affine(b_base, b.strides, ptr=True)

    def span(ptr: Affine, bits: int) -> str:
        lo, hi = "0", "0"
        for st, n in zip(ptr.strides, shape, strict=True):
            c = _const(st)
            if n == 1 or c == 0:
                continue
            if c is not None:
                lo, hi = c_add(lo, str(min((n - 1) * c, 0))), c_add(hi, str(max((n - 1) * c, 0)))
            else:
                step = c_mul(str(n - 1), _i64(st))
                lo, hi = c_add(lo, f"rv_min64({step}, 0)"), c_add(hi, f"rv_max64({step}, 0)")
        return f"{ptr.base}, {c_mul(lo, str(bits // 8))}, {c_mul(c_add(hi, '1'), str(bits // 8))}"
    return f"rv_disjoint({span(a, a_bits)}, {span(b, b_bits)})"


def _one_to_one(ptr: Affine, shape: tuple[int, ...]) -> str | None:
    """A C condition under which no two elements of a pointer block share an address ("1": always; None: not
    known here, e.g. a gathered offset or two run-time strides)."""
    if ptr.vecs:
        return None
    dims = [(st, n) for st, n in zip(ptr.strides, shape, strict=True) if n > 1]
    if not dims:
        return "1"
    if len(dims) == 1:
        st = dims[0][0]
        c = _const(st)
        return f"(({st}) != 0)" if c is None else ("1" if c != 0 else None)
    if len(dims) != 2:
        return None
    (s0, n0), (s1, n1) = dims
    c0, c1 = _const(s0), _const(s1)
    if c0 is not None and c1 is not None:  # injective when the larger stride steps over the other's whole span
        (small, n_small), (big, _) = sorted([(abs(c0), n0), (abs(c1), n1)])
        return "1" if small > 0 and big > (n_small - 1) * small else None
    for (runtime, _), (c, n) in (((s0, n0), (c1, n1)), ((s1, n1), (c0, n0))):
        if c is not None and c != 0:  # rows of a run-time stride over a constant column stride (the usual case)
            span = (n - 1) * abs(c)
            return f"((int64_t)({runtime}) > {span} || (int64_t)({runtime}) < -{span})"
    return None


# ---- loop-carried pointer blocks and accumulators --------------------------------------------------------


def _defs(block: Block) -> dict[str, Op]:
    return {r: op for op in block.ops for r in op.results}


def _advances_by_splat(f: FuncEmitter, block: Block, arg: str, yielded: str) -> bool:
    """``yielded`` is ``arg`` advanced by addptr of splats only (``a_ptrs += BLOCK_K * stride``)."""
    defs = _defs(block)
    cur = yielded
    while cur != arg:
        op = defs.get(cur)
        if op is None or op.name != "tt.addptr":
            return False
        step = defs.get(op.operands[1])
        if step is None:  # defined before the loop: its value is known already
            outside = f.values.get(op.operands[1])
            aff = as_affine(outside) if outside is not None else None
            if aff is None or not aff.uniform:
                return False
        elif step.name != "tt.splat" and not (step.name == "arith.constant" and
                                               "dense<[" not in step.props.get("value", "[")):
            return False
        cur = op.operands[0]
    return True


@optional("scf.for")
def op_for(f: FuncEmitter, op: Op) -> bool:
    block = op.regions[0].blocks[0]
    (iv_ssa, iv_t, _), *carried = block.args
    term = block.ops[-1]
    inits = [_peek(f, o) for o in op.operands[3:]]
    # the carried pointer blocks this loop keeps symbolic (None: an ordinary carried value)
    blocks = [v.sym if isinstance(v.sym, Affine) and v.sym.ptr and _advances_by_splat(f, block, ssa, y) else None
              for v, (ssa, _t, _l), y in zip(inits, carried, term.operands, strict=True)]
    chosen = [b is not None for b in blocks]
    if not any(chosen):
        return False
    lb, ub, step = (f.get(o) for o in op.operands[:3])
    homes: list[Val] = []
    home_blocks: list[Affine | None] = []
    for k, ((ssa, t, _), init_block) in enumerate(zip(carried, blocks, strict=True)):
        if init_block is not None:  # one scalar pointer carries the block; strides and vectors are loop-invariant
            name = f.cname(ssa)
            f.emit(f"{c_type(t)} {name} = {init_block.base};")
            home_block = Affine(name, init_block.strides, init_block.vecs, True)
            homes.append(_sym_val(t, home_block))
        else:
            home_block = None
            homes.append(declare(f, ssa, t, f.get(op.operands[3 + k])))
        home_blocks.append(home_block)
    iv = f.cname(iv_ssa)
    start = f.pos + 1

    def on_yield(term: Op) -> None:
        srcs = [_peek(f, o) for o in term.operands]
        nexts: list[tuple[str, str]] = []
        for home, home_block, src in zip(homes, home_blocks, srcs, strict=True):
            if home_block is not None:
                a = src.sym
                if not (isinstance(a, Affine) and a.strides == home_block.strides and
                        len(a.vecs) == len(home_block.vecs) and
                        all(x is y for (x, _), (y, _) in zip(a.vecs, home_block.vecs, strict=True))):
                    raise f.fail("a loop-carried pointer block changes shape inside the loop")
                tmp = f.temp(home_block.base + "_next")
                f.emit(f"{c_type(home.type)} {tmp} = {a.base};")
                nexts.append((home_block.base, tmp))
        rest = [(h, f.get(o)) for k, (h, o) in enumerate(zip(homes, term.operands, strict=True)) if not chosen[k]]
        assign(f, [h for h, _ in rest], [s for _, s in rest], start)
        for name, tmp in nexts:
            f.emit(f"{name} = {tmp};")

    wide = "int64_t"
    with f.region_scope(), f.block(f"for ({wide} {iv}_it_ = {lb.expr}; {iv}_it_ < {ub.expr}; "
                                   f"{iv}_it_ += {step.expr})"):
        for (ssa, _t, _), v in zip(carried, homes, strict=True):
            f.values[ssa] = v
        f.emit(f"const {c_type(iv_t)} {iv} = ({c_type(iv_t)}){iv}_it_;")
        f.values[iv_ssa] = Val(iv_t, "scalar", iv)
        lower_body(f, block, on_yield)
    f.loops.append((start, f.pos))
    for res, v in zip(op.results, homes, strict=True):
        f.values[res] = v
    return True


@optional("tt.dot")
def op_dot(f: FuncEmitter, op: Op) -> bool:
    return dot_kernel.lower_dot(f, op)


TIER = Tier("ptr_analysis", optional=OPTIONAL)
