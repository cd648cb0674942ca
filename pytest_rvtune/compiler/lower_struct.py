"""Lowering of the non-element-wise ops: constants, shape views, memory, dot, reduce/scan, control flow.

Each handler receives the function emitter (``emitter.FuncEmitter``) and the op; it defines the op's results in
``f.values`` and emits C through ``f.emit`` / ``f.loop``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re

from . import fusion
from .emitter import FuncEmitter, Handler, Tier, Val, contiguous_strides, handles_into, numel
from .lower_ops import (
    FLOAT_TYPES,
    FP8_TYPES,
    INT_WIDTH,
    OpSemanticsError,
    c_type,
    float_literal,
    from_float,
    int_literal,
    is_elementwise,
    to_float,
)
from .ttir import Block, Op, Type, parse_int_array

#: The handlers of this tier, by op name (filled by ``@handles`` below; lower.TIERS composes the tiers).
HANDLERS: dict[str, Handler] = {}
handles = handles_into(HANDLERS)

# ---- constants ----------------------------------------------------------------------------------------


def _literal(text: str, t: Type) -> str:
    text = text.strip()
    e = t.element.elem or ""
    if e in INT_WIDTH:
        value = {"true": 1, "false": 0}.get(text)
        return int_literal(int(text, 0) if value is None else value, t.element)
    if e in FLOAT_TYPES:
        if text.lower().startswith("0x"):  # non-finite values are printed as bit patterns
            bits = int(text, 16)
            if e in ("f16", "bf16"):
                return f"((uint16_t)0x{bits:04x}u)"
            if e in FP8_TYPES:
                return f"((uint8_t)0x{bits:02x}u)"
            return f"rv_bits_f32(0x{bits:08x}u)" if e == "f32" else f"rv_bits_f64(0x{bits:016x}ull)"
        return float_literal(float(text), e)
    raise OpSemanticsError(f"constant of type {t} is not supported")


def _hex_items(blob: str, t: Type) -> list[str]:
    import numpy as np

    e = t.element.elem or ""
    dtype = {"i1": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "f16": np.uint16,
             "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64, **dict.fromkeys(FP8_TYPES, np.uint8)}[e]
    data = np.frombuffer(bytes.fromhex(blob), dtype=dtype)
    if data.size == 1:
        data = np.repeat(data, t.numel)
    if e in FLOAT_TYPES:  # bit patterns: _literal reads 0x... as the element's bits
        return [hex(int(v)) for v in data]
    return [str(int(v)) for v in data]


@handles("arith.constant")
def op_constant(f: FuncEmitter, op: Op) -> None:
    raw, t, res = op.props["value"], op.result_types[0], op.results[0]
    if not t.is_tensor:
        f.values[res] = Val(t, "scalar", _literal(raw.rsplit(":", 1)[0], t))
        return
    m = re.match(r"dense<(.*)>\s*:\s*tensor<.*>$", raw, re.S)
    if not m:
        raise f.unsupported(f"constant {raw[:60]}")
    body = m.group(1).strip()
    if body.startswith('"0x'):  # large constants may be printed as a little-endian hex blob
        items = _hex_items(body.strip('"')[2:], t)
    elif not body.startswith("["):
        f.values[res] = Val(t, "splat", _literal(body, t))
        return
    else:
        items = [x for x in re.split(r"[\[\],\s]+", body) if x]
    if len(items) != t.numel:
        raise f.fail(f"dense constant has {len(items)} elements, its type {t} needs {t.numel}")
    name = f.cname(res)
    e = t.element.elem
    if e in ("f32", "f64"):  # exact bit patterns (NaN and inf have no constant C spelling): a union
        import numpy as np

        ft, ut, width = (np.float32, np.uint32, 8) if e == "f32" else (np.float64, np.uint64, 16)
        bits = [int(x, 16) if x.lower().startswith("0x") else int(ft(float(x)).view(ut)) for x in items]
        utype = "uint32_t" if e == "f32" else "uint64_t"
        f.emit(f"static const union {{ {utype} u[{t.numel}]; {c_type(t)} v[{t.numel}]; }} {name} = "
               f"{{{{{', '.join(f'0x{b:0{width}x}u' for b in bits)}}}}};")
        f.values[res] = Val(t, "buf", f"{name}.v", contiguous_strides(t.shape or ()), 0, None)
        return
    f.emit(f"static const {c_type(t)} {name}[{t.numel}] = {{{', '.join(_literal(x, t) for x in items)}}};")
    f.values[res] = Val(t, "buf", name, contiguous_strides(t.shape or ()), 0, None)


@handles("ub.poison")
def op_poison(f: FuncEmitter, op: Op) -> None:
    t = op.result_types[0]
    f.values[op.results[0]] = Val(t, "splat" if t.is_tensor else "scalar", f"(({c_type(t)})0)")


# ---- program ids, ranges and shape views ---------------------------------------------------------------


@handles("tt.get_program_id", "tt.get_num_programs")
def op_program_id(f: FuncEmitter, op: Op) -> None:
    axis = "xyz"[op.int_attr("axis")]
    expr = f"pid_{axis}" if op.name == "tt.get_program_id" else f"((int32_t)grid_{axis})"
    f.values[op.results[0]] = Val(op.result_types[0], "scalar", expr)


@handles("tt.make_range")
def op_make_range(f: FuncEmitter, op: Op) -> None:
    t = op.result_types[0]
    f.values[op.results[0]] = Val(t, "iota", "", (1,), op.int_attr("start"))


@handles("tt.splat")
def op_splat(f: FuncEmitter, op: Op) -> None:
    src = f.get(op.operands[0])
    f.values[op.results[0]] = Val(op.result_types[0], "splat", src.expr)


@handles("tt.broadcast")
def op_broadcast(f: FuncEmitter, op: Op) -> None:
    src, t = f.get(op.operands[0]), op.result_types[0]
    if src.kind in ("scalar", "splat"):
        f.values[op.results[0]] = Val(t, "splat", src.expr)
        return
    shape = t.shape or ()
    strides = tuple(0 if s == 1 and d != 1 else st for s, d, st in zip(src.shape, shape, src.strides, strict=True))
    f.values[op.results[0]] = f.view(src, t, strides)


@handles("tt.expand_dims")
def op_expand_dims(f: FuncEmitter, op: Op) -> None:
    src, t, axis = f.get(op.operands[0]), op.result_types[0], op.int_attr("axis")
    if src.kind in ("scalar", "splat"):
        f.values[op.results[0]] = Val(t, "splat", src.expr)
        return
    f.values[op.results[0]] = f.view(src, t, (*src.strides[:axis], 0, *src.strides[axis:]))


@handles("tt.reshape")
def op_reshape(f: FuncEmitter, op: Op) -> None:
    src, t = f.get(op.operands[0]), op.result_types[0]
    if src.kind in ("scalar", "splat"):
        f.values[op.results[0]] = Val(t, "splat", src.expr)
        return
    if src.strides != contiguous_strides(src.shape):
        src = f.materialize(src, f.cname(op.results[0]) + "_src")
    f.values[op.results[0]] = f.view(src, t, contiguous_strides(t.shape or ()))


@handles("tt.trans")
def op_trans(f: FuncEmitter, op: Op) -> None:
    src, t = f.get(op.operands[0]), op.result_types[0]
    if src.kind in ("scalar", "splat"):
        f.values[op.results[0]] = Val(t, "splat", src.expr)
        return
    order = parse_int_array(op.props["order"])
    f.values[op.results[0]] = f.view(src, t, tuple(src.strides[o] for o in order))


@handles("tt.join")
def op_join(f: FuncEmitter, op: Op) -> None:
    a, b = f.get(op.operands[0]), f.get(op.operands[1])
    t = op.result_types[0]
    out = f.new_buf(op.results[0], t)
    inner = contiguous_strides(t.shape or ())[:-1]
    for k, src in enumerate((a, b)):
        f.copy_into(Val(src.type, "buf", out.expr, inner, k, out.storage), src)
    f.values[op.results[0]] = out


@handles("tt.split")
def op_split(f: FuncEmitter, op: Op) -> None:
    src = f.get(op.operands[0])
    for k, (res, t) in enumerate(zip(op.results, op.result_types, strict=True)):
        if src.kind in ("scalar", "splat"):
            f.values[res] = Val(t, "splat", src.expr)
            continue
        base = src if src.kind == "buf" else f.materialize(src)
        f.values[res] = f.view(base, t, base.strides[:-1], base.offset + k * base.strides[-1])


@handles("tt.cat")
def op_cat(f: FuncEmitter, op: Op) -> None:
    """Concatenation along dim 0 (in order: also a valid answer when can_reorder was given)."""
    a, b = f.get(op.operands[0]), f.get(op.operands[1])
    t = op.result_types[0]
    out = f.new_buf(op.results[0], t)
    strides = contiguous_strides(t.shape or ())
    f.copy_into(Val(a.type, "buf", out.expr, strides, 0, out.storage), a)
    f.copy_into(Val(b.type, "buf", out.expr, strides, a.shape[0] * strides[0], out.storage), b)
    f.values[op.results[0]] = out


@handles("tt.unsplat")
def op_unsplat(f: FuncEmitter, op: Op) -> None:
    src = f.get(op.operands[0])
    t = op.result_types[0]
    f.values[op.results[0]] = f.scalar(op.results[0], t, f.access(src, ["0"] * len(src.shape), "0"))


@handles("tt.histogram")
def op_histogram(f: FuncEmitter, op: Op) -> None:
    src = f.get(op.operands[0])
    mask = f.get(op.operands[1]) if len(op.operands) > 1 else None
    t = op.result_types[0]
    out = f.new_buf(op.results[0], t)
    bins = t.numel
    f.loop(t.shape or (), [out], lambda at, flat: f"{out.expr}[{flat}] = 0;")

    def count(at, _flat):
        cond = f"0 <= v_ && v_ < {bins}" + (f" && {at(mask)}" if mask is not None else "")
        return f"{{ const int64_t v_ = (int64_t){at(src)}; if ({cond}) {out.expr}[v_] += 1; }}"

    f.loop(src.shape, [src] + ([mask] if mask is not None else []), count)
    f.values[op.results[0]] = out


@handles("tt.gather")
def op_gather(f: FuncEmitter, op: Op) -> None:
    """out[i] = src[i with index[i] on ``axis``]; an index outside the source reads 0 (Triton: undefined)."""
    src, index = f.get(op.operands[0]), f.get(op.operands[1])
    axis, t = op.int_attr("axis"), op.result_types[0]
    out = f.new_buf(op.results[0], t)
    shape = t.shape or ()
    idx = [f"g{d}_" for d in range(len(shape))]
    flat = " + ".join(f"{i} * {s}" for i, s in zip(idx, contiguous_strides(shape), strict=True))
    with contextlib.ExitStack() as stack:
        for i, n in zip(idx, shape, strict=True):
            stack.enter_context(f.block(f"for (int32_t {i} = 0; {i} < {n}; ++{i})"))
        f.emit(f"const int64_t j_ = (int64_t){f.access(index, idx, '')};")
        src_idx = [*idx[:axis], "(int32_t)j_", *idx[axis + 1:]]
        f.emit(f"{out.expr}[{flat}] = (0 <= j_ && j_ < {src.shape[axis]}) ? {f.access(src, src_idx, '')} : 0;")
    f.values[op.results[0]] = out


@handles("llvm.intr.assume")
def op_assume(f: FuncEmitter, op: Op) -> None:
    """tl.assume: a hint only; nothing to compute."""


@handles("ttg.barrier")
def op_barrier(f: FuncEmitter, op: Op) -> None:
    """tl.debug_barrier: syncs the threads of one program on a GPU; here a program is one thread with no
    shared memory, so program order already is the barrier."""


# ---- memory -------------------------------------------------------------------------------------------


def _segments(op: Op, names: int) -> list[int]:
    raw = op.attr("operandSegmentSizes")
    return parse_int_array(raw) if raw else [1] * names


@handles("tt.load")
def op_load(f: FuncEmitter, op: Op) -> None:
    seg = _segments(op, 3)
    ops = iter(op.operands)
    ptr = f.get(next(ops))
    mask = f.get(next(ops)) if len(seg) > 1 and seg[1] else None
    other = f.get(next(ops)) if len(seg) > 2 and seg[2] else None
    t = op.result_types[0]
    zero = "0"

    def element(at):  # masked-off lanes read `other`, or 0 (Triton leaves them undefined)
        load = f"*{at(ptr)}"
        if mask is None:
            return load
        return f"({at(mask)} ? {load} : {at(other) if other is not None else zero})"

    if not t.is_tensor:
        f.values[op.results[0]] = f.scalar(op.results[0], t, element(lambda v: v.expr))
        return
    out = f.new_buf(op.results[0], t)
    vals = [v for v in (ptr, mask, other) if v is not None]
    f.loop(t.shape or (), [out, *vals], lambda at, flat: f"{out.expr}[{flat}] = {element(at)};")
    f.values[op.results[0]] = out


@handles("tt.store")
def op_store(f: FuncEmitter, op: Op) -> None:
    ptr, val = f.get(op.operands[0]), f.get(op.operands[1])
    mask = f.get(op.operands[2]) if len(op.operands) > 2 else None

    def stmt(at, _flat=None):
        s = f"*{at(ptr)} = {at(val)};"
        return f"if ({at(mask)}) {s}" if mask is not None else s

    t = op.operand_types[0]
    if not t.is_tensor:
        f.emit(stmt(lambda v: v.expr))
        return
    f.loop(t.shape or (), [v for v in (ptr, val, mask) if v is not None], stmt)


#: The 16-bit float types, stored as bit patterns and computed in float.
_HALF_FLOATS = ("f16", "bf16")


def _widen(t: Type) -> Type:
    """``t`` with an f16/bf16 element made f32 (the type 16-bit values are computed in)."""
    return dataclasses.replace(t, elem="f32") if t.elem in _HALF_FLOATS else t


# ---- dot ----------------------------------------------------------------------------------------------


@handles("tt.dot")
def op_dot(f: FuncEmitter, op: Op) -> None:
    a, b, c = (f.get(o) for o in op.operands[:3])
    t = op.result_types[0]
    ea, rt = op.operand_types[0].element.elem or "", t.element.elem or ""
    shape = t.shape or ()
    half = rt in _HALF_FLOATS and ea == rt
    if rt not in ("f32", "f64") and not (rt == "i32" and ea == "i8") and not half:
        raise f.unsupported(f"tt.dot with {ea} inputs and {rt} result")
    out = f.new_buf(op.results[0], t)
    if half:
        # A 16-bit result accumulates in fp32 and is rounded once at the end, as Triton does on GPUs
        # (their f16 MMAs accumulate in at least fp32): rounding each partial sum would drift with K.
        acc = f.new_buf(None, _widen(t), "acc32")
        f.loop(shape, [acc, c], lambda at, _flat: f"{at(acc)} = {to_float(at(c), rt)};")
    elif c.kind == "buf" and _identity(c):
        # the result may end up computed in the accumulator's own memory (a loop-carried acc, see
        # _can_compute_in_place); both pointers are constants, so clang drops whichever branch is dead
        with f.block(f"if ({out.expr} != {c.expr})"):
            f.copy_into(out, c)
    else:
        f.copy_into(out, c)
    if not half:
        acc = out
    batch = shape[:-2]
    m_, n_ = shape[-2], shape[-1]
    k_ = (op.operand_types[0].shape or ())[-1]
    def elem(v: Val, idx: list[str]) -> str:  # 16- and 8-bit float inputs are widened (exactly) to float
        return to_float(f.access(v, idx, ""), v.type.element.elem or "")

    acc_t = "int32_t" if rt == "i32" else c_type(acc.type)
    f.emit(f"/* {acc.expr} = dot({m_}x{k_} , {k_}x{n_}) + acc: i-k-j order, the j loop vectorises */")
    bi = ["b_"] if batch else []
    with (f.block(f"for (int32_t b_ = 0; b_ < {numel(batch)}; ++b_)") if batch else contextlib.nullcontext(),
          f.block(f"for (int32_t m_ = 0; m_ < {m_}; ++m_)"),
          f.block(f"for (int32_t k_ = 0; k_ < {k_}; ++k_)")):
        f.emit(f"const {acc_t} a_ = {elem(a, [*bi, 'm_', 'k_'])};")
        row = f"{'b_ * ' + str(m_ * n_) + ' + ' if batch else ''}m_ * {n_} + n_"
        with f.block(f"for (int32_t n_ = 0; n_ < {n_}; ++n_)"):
            if rt == "i32":
                f.emit(f"{acc.expr}[{row}] = (int32_t)((uint32_t){acc.expr}[{row}] + "
                       f"(uint32_t)(a_ * (int32_t){elem(b, [*bi, 'k_', 'n_'])}));")
            else:
                f.emit(f"{acc.expr}[{row}] += a_ * {elem(b, [*bi, 'k_', 'n_'])};")
    if half:
        f.loop(shape, [out, acc], lambda at, _flat: f"{at(out)} = {from_float(at(acc), rt)};")
    f.values[op.results[0]] = out


# ---- reduce and scan ----------------------------------------------------------------------------------


def _bind_region_args(f: FuncEmitter, block: Block, exprs: list[str]) -> None:
    for (ssa, t, _loc), e in zip(block.args, exprs, strict=True):
        if t.is_tensor:
            raise f.unsupported("a tensor-valued combiner region")
        f.values[ssa] = f.scalar(ssa, t, e)


def _region_result(f: FuncEmitter, block: Block, terminator: str) -> list[str]:
    *body, term = block.ops
    if term.name != terminator:
        raise f.fail(f"region does not end in {terminator}")
    f.lower_ops(body)
    f.pos += 1
    return [f.get(o).expr for o in term.operands]


def _reduce_tree(f: FuncEmitter, op: Op) -> None:
    """tt.reduce as a halving tree: level by level, x[i] = combine(x[i], x[i + s]) for i < s.

    Every level is a loop nest whose innermost loop runs over the last (contiguous) dimension, so clang
    vectorises the combiner (sums included: a sequential float sum cannot be reordered). The combining
    order is Triton's own freedom (GPUs reduce in butterflies); the left operand always holds the lower
    indices, which is what argmax-style combiners break ties with.
    """
    axis = op.int_attr("axis")
    in_t = op.operand_types
    shape = in_t[0].shape or ()
    block = op.regions[0].blocks[0]
    srcs = [f.get(o) for o in op.operands]
    work = []
    for src, t in zip(srcs, in_t, strict=True):
        buf = f.new_buf(None, t, "tree")
        f.copy_into(buf, src)
        work.append(buf)
    idx = [f"t{d}_" for d in range(len(shape))]
    other = [i if d != axis else f"({i} + s_)" for d, i in enumerate(idx)]
    with f.block(f"for (int32_t s_ = {shape[axis] // 2}; s_ >= 1; s_ >>= 1)"), contextlib.ExitStack() as stack:
        for d, (i, n) in enumerate(zip(idx, shape, strict=True)):
            stack.enter_context(f.block(f"for (int32_t {i} = 0; {i} < {'s_' if d == axis else n}; ++{i})"))
        with f.region_scope():
            lhs, rhs = [f.access(w, idx, "") for w in work], [f.access(w, other, "") for w in work]
            _bind_region_args(f, block, [*lhs, *rhs])
            results = _region_result(f, block, "tt.reduce.return")
            for w, r in zip(work, results, strict=True):
                f.emit(f"{f.access(w, idx, '')} = {r};")
    for res, t, w in zip(op.results, op.result_types, work, strict=True):
        if t.is_tensor:  # the reduced values sit at index 0 of the axis: a view, no copy
            f.values[res] = f.view(w, t, w.strides[:axis] + w.strides[axis + 1:])
        else:
            f.values[res] = f.scalar(res, t, f"{w.expr}[0]")


#: One-op combiners with a vector reduction in rvtune_rt.h: (op, element type) -> rv_reduce_<name>.
_ROW_REDUCTIONS = {
    ("arith.addf", "f32"): "sum_f32", ("arith.maxnumf", "f32"): "maxnum_f32",
    ("arith.minnumf", "f32"): "minnum_f32", ("arith.maximumf", "f32"): "maximum_f32",
    ("arith.minimumf", "f32"): "minimum_f32", ("arith.addi", "i32"): "sum_i32", ("arith.andi", "i32"): "and_i32",
    ("arith.ori", "i32"): "or_i32", ("arith.xori", "i32"): "xor_i32", ("arith.maxsi", "i32"): "maxsi_i32",
    ("arith.minsi", "i32"): "minsi_i32", ("arith.maxui", "i32"): "maxui_i32", ("arith.minui", "i32"): "minui_i32",
}


def _row_reduction(op: Op) -> str | None:
    """The rv_reduce_* helper for a one-operand tt.reduce over the last axis whose combiner is one
    commutative op of the two region arguments (tl.sum, tl.max, ...); None for anything else."""
    shape = op.operand_types[0].shape or ()
    if len(op.operands) != 1 or not shape or op.int_attr("axis") != len(shape) - 1:
        return None
    block = op.regions[0].blocks[0]
    if len(block.ops) != 2:
        return None
    comb, ret = block.ops
    args = {ssa for ssa, _t, _l in block.args}
    if ret.name != "tt.reduce.return" or list(ret.operands) != list(comb.results) or set(comb.operands) != args \
            or len(comb.operands) != 2:
        return None
    return _ROW_REDUCTIONS.get((comb.name, op.operand_types[0].element.elem or ""))


def _reduce_rows(f: FuncEmitter, op: Op, helper: str) -> None:
    """One vector reduction (rv_reduce_*, rvtune_rt.h: vfredusum / vfredmax ... on RVV) per row."""
    src = f.get(op.operands[0])
    if src.kind != "buf" or src.strides[-1] != 1:
        src = f.materialize(src, "rows")
    shape = src.shape
    outer, n = shape[:-1], shape[-1]
    res, t = op.results[0], op.result_types[0]
    idx = [f"r{d}_" for d in range(len(outer))]
    first = f.access(src, [*idx, "0"], "").replace(" + 0]", "]")
    row = first.removesuffix("[0]") if first.endswith("[0]") else "&" + first
    call = f"rv_reduce_{helper}({row}, {n})"
    f.emit(f"/* reduce over the last axis: a vector reduction per row (rv_reduce_{helper}, rvtune_rt.h) */")
    if not t.is_tensor:
        f.values[res] = f.scalar(res, t, call)
        return
    out = f.new_buf(res, t)
    flat = " + ".join(f"{i} * {st}" if st != 1 else i for i, st in zip(idx, contiguous_strides(outer), strict=True))
    with contextlib.ExitStack() as stack:
        for i, size in zip(idx, outer, strict=True):
            stack.enter_context(f.block(f"for (int32_t {i} = 0; {i} < {size}; ++{i})"))
        f.emit(f"{out.expr}[{flat}] = {call};")
    f.values[res] = out


#: Combiner ops that compute the same thing on f32 as on f16/bf16, only without the rounding to 16 bits.
_WIDENABLE_OPS = frozenset((
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.maxnumf", "arith.minnumf", "arith.maximumf",
    "arith.minimumf", "arith.negf", "arith.cmpf", "arith.select", "arith.extf", "arith.truncf",
    "tt.scan.return", "tt.reduce.return"))
def _widened_combiner(block: Block) -> Block | None:
    """The combiner region with every f16/bf16 value made f32, or None when it has no such value or an op
    that would not mean the same on f32 (constants, bitcasts, ...).

    A sequential scan rounding its running value to 16 bits after every element drifts far from Triton's
    (GPUs combine in a tree, test_core compares tl.cumsum with an fp32 cumsum): the running value stays in
    fp32 and only each output element is rounded to 16 bits.
    """
    if not any(t.elem in _HALF_FLOATS for _s, t, _l in block.args) \
            or any(o.name not in _WIDENABLE_OPS or o.regions for o in block.ops):
        return None
    # A value the combiner takes from outside (a constant hoisted out of the region, e.g. the 1 of
    # `tl.where(a == 1, ...)`) keeps its 16-bit type: widening the ops around it would compare f32 with a 16-bit
    # bit pattern. Only a self-contained combiner is widened.
    defined = {s for s, _t, _l in block.args} | {r for o in block.ops for r in o.results}
    if any(v not in defined for o in block.ops for v in o.operands):
        return None
    ops = [dataclasses.replace(o, operand_types=[_widen(t) for t in o.operand_types],
                               result_types=[_widen(t) for t in o.result_types]) for o in block.ops]
    return dataclasses.replace(block, args=[(s, _widen(t), loc) for s, t, loc in block.args], ops=ops)


@handles("tt.reduce", "tt.scan")
def op_reduce(f: FuncEmitter, op: Op) -> None:
    length = (op.operand_types[0].shape or ())[op.int_attr("axis")]
    helper = _row_reduction(op) if op.name == "tt.reduce" else None
    if helper is not None and length >= 2:
        _reduce_rows(f, op, helper)
        return
    if op.name == "tt.reduce" and length >= 4 and length & (length - 1) == 0:
        _reduce_tree(f, op)
        return
    is_scan = op.name == "tt.scan"
    axis = op.int_attr("axis")
    reverse = is_scan and op.attr("reverse") not in (None, "false")
    srcs = [f.get(o) for o in op.operands]
    in_shape = op.operand_types[0].shape or ()
    length = in_shape[axis]
    outer = in_shape[:axis] + in_shape[axis + 1:]
    block = op.regions[0].blocks[0]
    wide = _widened_combiner(block)
    if wide is not None:  # the running values in fp32, each output rounded once (see _widened_combiner)
        block = wide
    n = len(srcs)
    outs: list[Val] = []
    for res, t in zip(op.results, op.result_types, strict=True):
        if t.is_tensor:
            outs.append(f.new_buf(res, t))
        else:
            name = f.cname(res)
            f.emit(f"{c_type(t)} {name};")
            outs.append(Val(t, "scalar", name))
    elem_types = [t.element for t in op.operand_types]
    acc_types = [_widen(t) for t in elem_types] if wide is not None else elem_types

    def load(k: int, r: str) -> str:
        value = f.access(srcs[k], in_idx(r), "")
        return to_float(value, elem_types[k].elem or "") if wide is not None else value

    def store(k: int) -> str:
        return from_float(accs[k], elem_types[k].elem or "") if wide is not None else accs[k]
    idx = [f"o{d}_" for d in range(len(outer))]
    accs = [f.temp(f"acc{k}") for k in range(n)]
    term = "tt.scan.return" if is_scan else "tt.reduce.return"

    def in_idx(r: str) -> list[str]:
        return [*idx[:axis], r, *idx[axis:]]

    def out_at(v: Val, r: str) -> str:
        if v.kind == "scalar":
            return v.expr
        lin_idx = in_idx(r) if is_scan else idx
        shape = in_shape if is_scan else outer
        strides = contiguous_strides(shape)
        terms = [f"{i} * {s}" if s != 1 else i for i, s in zip(lin_idx, strides, strict=True)] or ["0"]
        return f"{v.expr}[{' + '.join(terms)}]"

    first, rest = (str(length - 1), f"int32_t r_ = {length - 2}; r_ >= 0; --r_") if reverse else \
        ("0", f"int32_t r_ = 1; r_ < {length}; ++r_")
    with contextlib.ExitStack() as stack:
        for i, size in zip(idx, outer, strict=True):
            stack.enter_context(f.block(f"for (int32_t {i} = 0; {i} < {size}; ++{i})"))
        for k in range(n):
            f.emit(f"{c_type(acc_types[k])} {accs[k]} = {load(k, first)};")
            if is_scan:
                f.emit(f"{out_at(outs[k], first)} = {store(k)};")
        with f.region_scope(), f.block(f"for ({rest})"):
            _bind_region_args(f, block, [*accs, *(load(k, "r_") for k in range(n))])
            results = _region_result(f, block, term)
            for k in range(n):
                f.emit(f"{accs[k]} = {results[k]};")
                if is_scan:
                    f.emit(f"{out_at(outs[k], 'r_')} = {store(k)};")
        if not is_scan:
            for k in range(n):
                f.emit(f"{out_at(outs[k], '')} = {store(k)};")
    for res, v in zip(op.results, outs, strict=True):
        f.values[res] = v


# ---- structured control flow --------------------------------------------------------------------------


def declare(f: FuncEmitter, ssa: str, t: Type, init: Val | None = None) -> Val:
    """A mutable home for a loop-carried / branch-merged value."""
    if t.is_tensor:
        v = f.new_buf(ssa, t)
        if init is not None:
            f.copy_into(v, init)
        return v
    name = f.cname(ssa)
    f.emit(f"{c_type(t)} {name}{' = ' + init.expr if init is not None else ''};")
    return Val(t, "scalar", name)


def _identity(v: Val) -> bool:
    return v.kind == "buf" and v.offset == 0 and v.strides == contiguous_strides(v.shape)


def _can_compute_in_place(f: FuncEmitter, src: Val, dst: Val, sources: list[Val], body_start: int) -> bool:
    """May the buffer of ``src`` (computed in this loop body) simply BE ``dst``'s (the value it is yielded to)?

    Yes when the loop-carried value is dead from the moment ``src`` is computed (no later reads, the yield
    included), and the op computing ``src`` reads it only element for element (or as the dot's
    accumulator). Then the dot / pointer increment of a loop writes its carried tile in place, with no copy.
    """
    s, h = src.storage, dst.storage
    if s is None or h is None or s is h or s.alias is not None or h.alias is not None or s.def_op is None:
        return False
    if any(v is h or v.alias is h for v in s.viewed):  # src's computation read the home through a view
        return False
    if not _identity(src) or src.type != dst.type or s.start < body_start:
        return False
    if sum(1 for v in sources if v.storage is s) != 1 or any(u > s.start for u in h.uses):
        return False
    if s.start not in h.uses:  # the carried value is not even read where src is computed
        return True
    op = s.def_op
    read_here = False
    for k, name in enumerate(op.operands):
        v = f.values.get(name)
        if v is None:
            continue
        chain = isinstance(v.sym, fusion.Expr) or fusion.is_deferred_load(v)
        if v.sym is not None and not chain:
            return False  # a pointer block may read it through any view
        # a fused element-wise chain (the dot's ``acc * alpha[:, None]``) reads its leaves where it is used; a
        # deferred load reads global memory, and its offsets / conditions where it is used
        reads = v.sym.parts() if chain and v.sym is not None else [v]
        hits = [x for x in reads if x.storage is h]
        if not hits:
            continue
        read_here = True
        if any(not _identity(x) or x.shape != src.shape for x in hits):
            return False
        if op.name == "tt.dot" and k != 2:
            return False
        if op.name != "tt.dot" and op.name != "tt.load" and not is_elementwise(op.name):
            return False
    # it is read there: only safe when it is one of this op's own element-for-element operands
    return read_here


def assign(f: FuncEmitter, targets: list[Val], sources: list[Val], body_start: int | None = None) -> None:
    """Parallel assignment targets := sources (a yield): every source is read before any target changes.

    With ``body_start`` (an scf.for body) a source computed in the body may be placed in its target's
    memory instead of being copied there (see _can_compute_in_place).
    """
    if body_start is not None:
        for k, (dst, src) in enumerate(zip(targets, sources, strict=True)):
            if dst.kind == "buf" and _can_compute_in_place(f, src, dst, sources, body_start):
                assert src.storage is not None
                src.storage.alias = dst.storage
                sources = [*sources[:k], dst, *sources[k + 1:]]  # nothing left to copy for this one
    for v in targets:
        f.touch(v)
    homes = {id(v.storage) for v in targets if v.storage is not None}
    scalar_tmp: list[tuple[Val, str]] = []
    staged: list[tuple[Val, Val]] = []
    direct: list[tuple[Val, Val]] = []
    for dst, src in zip(targets, sources, strict=True):
        if dst.kind == "scalar":
            if src.expr != dst.expr:
                tmp = f.temp(dst.expr + "_next")
                f.emit(f"{c_type(dst.type)} {tmp} = {src.expr};")
                scalar_tmp.append((dst, tmp))
        elif src.storage is dst.storage and src.strides == dst.strides and src.offset == dst.offset:
            continue
        elif src.storage is not None and id(src.storage) in homes:
            stage = f.new_buf(None, dst.type, "stage")
            f.copy_into(stage, src)
            staged.append((dst, stage))
        else:
            direct.append((dst, src))
    for dst, src in direct + staged:
        f.copy_into(dst, src)
    for dst, tmp in scalar_tmp:
        f.emit(f"{dst.expr} = {tmp};")


def lower_body(f: FuncEmitter, block: Block, on_terminator) -> None:
    *body, term = block.ops
    f.lower_ops(body)
    f.pos += 1
    f.op = term
    on_terminator(term)


@handles("scf.for")
def op_for(f: FuncEmitter, op: Op) -> None:
    lb, ub, step = (f.get(o) for o in op.operands[:3])
    inits = [f.get(o) for o in op.operands[3:]]
    block = op.regions[0].blocks[0]
    (iv_ssa, iv_t, _), *carried = block.args
    homes = [declare(f, ssa, t, init) for (ssa, t, _), init in zip(carried, inits, strict=True)]
    iv = f.cname(iv_ssa)
    # an i32 induction variable never overflows in 64 bits; unsignedCmp loops compare the bounds unsigned
    lo, hi = lb.expr, ub.expr
    if op.attr("unsignedCmp") is not None and iv_t.elem != "i64":
        lo, hi = f"(uint32_t){lo}", f"(uint32_t){hi}"
    wide = "uint64_t" if op.attr("unsignedCmp") is not None else "int64_t"
    start = f.pos + 1
    with f.region_scope(), f.block(f"for ({wide} {iv}_it_ = {lo}; {iv}_it_ < {hi}; {iv}_it_ += {step.expr})"):
        for (ssa, _t, _), v in zip(carried, homes, strict=True):
            f.values[ssa] = v
        f.emit(f"const {c_type(iv_t)} {iv} = ({c_type(iv_t)}){iv}_it_;")
        f.values[iv_ssa] = Val(iv_t, "scalar", iv)
        lower_body(f, block, lambda term: assign(f, homes, [f.get(o) for o in term.operands], start))
    f.loops.append((start, f.pos))
    for res, v in zip(op.results, homes, strict=True):
        f.values[res] = v


@handles("scf.if")
def op_if(f: FuncEmitter, op: Op) -> None:
    cond = f.get(op.operands[0])
    homes = [declare(f, res, t) for res, t in zip(op.results, op.result_types, strict=True)]
    for k, region in enumerate(op.regions):
        if not region.blocks or not region.blocks[0].ops:
            continue
        header = f"if ({cond.expr})" if k == 0 else "else"
        with f.region_scope(), f.block(header):
            lower_body(f, region.blocks[0], lambda term: assign(f, homes, [f.get(o) for o in term.operands]))
    for res, v in zip(op.results, homes, strict=True):
        f.values[res] = v


@handles("scf.while")
def op_while(f: FuncEmitter, op: Op) -> None:
    inits = [f.get(o) for o in op.operands]
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    before_homes = [declare(f, ssa, t, init) for (ssa, t, _), init in zip(before.args, inits, strict=True)]
    after_homes = [declare(f, ssa, t) for ssa, t, _ in after.args]
    results = [declare(f, res, t) for res, t in zip(op.results, op.result_types, strict=True)]
    start = f.pos + 1

    def on_condition(term: Op) -> None:
        cond, *vals = (f.get(o) for o in term.operands)
        with f.block(f"if (!({cond.expr}))"):
            assign(f, results, vals)
            f.emit("break;")
        assign(f, after_homes, vals)

    with f.block("for (;;)"):
        with f.region_scope():
            for (ssa, _t, _), v in zip(before.args, before_homes, strict=True):
                f.values[ssa] = v
            lower_body(f, before, on_condition)
        with f.region_scope():
            for (ssa, _t, _), v in zip(after.args, after_homes, strict=True):
                f.values[ssa] = v
            lower_body(f, after, lambda term: assign(f, before_homes, [f.get(o) for o in term.operands]))
    f.loops.append((start, f.pos))
    for res, v in zip(op.results, results, strict=True):
        f.values[res] = v


# ---- unstructured control flow (early returns) --------------------------------------------------------


def _branch(f: FuncEmitter, target: str, args: list[str]) -> None:
    cfg = f.cfgs[-1]
    block = cfg.blocks[target]
    assign(f, [f.values[ssa] for ssa, _t, _l in block.args], [f.get(a) for a in args])
    if target in cfg.start:  # a backward branch: everything live in between stays live
        f.loops.append((cfg.start[target], f.pos))
    f.emit(f"goto {cfg.labels[target]};")


@handles("cf.br")
def op_br(f: FuncEmitter, op: Op) -> None:
    _branch(f, op.successors[0], op.operands)


@handles("cf.cond_br")
def op_cond_br(f: FuncEmitter, op: Op) -> None:
    seg = _segments(op, 3)
    cond = f.get(op.operands[0])
    t_args = op.operands[1:1 + seg[1]]
    f_args = op.operands[1 + seg[1]:]
    with f.block(f"if ({cond.expr})"):
        _branch(f, op.successors[0], t_args)
    with f.block("else"):
        _branch(f, op.successors[1], f_args)


@handles("tt.map_elementwise")
def op_map_elementwise(f: FuncEmitter, op: Op) -> None:
    """The scalar region (branches allowed) once per element, or with ``pack`` = P once per P elements (its
    arguments are P elements of each operand in turn, its returns P of each result); the returns write the result
    tiles. Which elements share a call is the backend's choice (a GPU takes a thread's registers): here P
    consecutive ones in row-major order."""
    pack = op.int_attr("pack") if op.attr("pack") is not None else 1
    srcs = [f.get(o) for o in op.operands]
    outs = [f.new_buf(res, t) for res, t in zip(op.results, op.result_types, strict=True)]
    shape = op.result_types[0].shape or ()
    if pack < 1 or numel(shape) % pack:
        raise f.unsupported(f"tt.map_elementwise with pack={pack} over {numel(shape)} elements (not a multiple)")
    region = op.regions[0]
    done = f.temp("map_done")
    strides = contiguous_strides(shape)
    if pack == 1:
        idx = [f"e{d}_" for d in range(len(shape))]
        elements = [(idx, " + ".join(f"{i} * {s}" for i, s in zip(idx, strides, strict=True)) or "0")]
        loops = [f"for (int32_t {i} = 0; {i} < {n}; ++{i})" for i, n in zip(idx, shape, strict=True)]
    else:
        elements = []
        for j in range(pack):
            flat_j = f"(p_ + {j})"
            elements.append(([f"({flat_j} / {s} % {n})" for s, n in zip(strides, shape, strict=True)], flat_j))
        loops = [f"for (int32_t p_ = 0; p_ < {numel(shape)}; p_ += {pack})"]

    def on_return(term: Op) -> None:
        for k, out in enumerate(outs):
            for j, (_, flat) in enumerate(elements):
                f.emit(f"{out.expr}[{flat}] = {f.get(term.operands[k * pack + j]).expr};")
        f.emit(f"goto {done};")

    with contextlib.ExitStack() as stack:
        for header in loops:
            stack.enter_context(f.block(header))
        with f.region_scope():
            _bind_region_args(f, region.blocks[0], [f.access(s, idx, "") for s in srcs for idx, _ in elements])
            f.lower_blocks(region.blocks, {"tt.map_elementwise.return": on_return})
        f.lines.append(f"{done}:;")
    for res, v in zip(op.results, outs, strict=True):
        f.values[res] = v


@handles("tt.return")
def op_return(f: FuncEmitter, op: Op) -> None:
    for ret, ssa in zip(f.returns, op.operands, strict=True):  # a noinline function's results
        v = f.get(ssa)
        if v.type.is_tensor:
            f.copy_into(Val(v.type, "buf", ret, contiguous_strides(v.shape), 0, None), v)
        else:
            f.emit(f"*{ret} = {v.expr};")
    f.emit("return;")


@handles("tt.call")
def op_call(f: FuncEmitter, op: Op) -> None:
    callee = op.attr("callee") or ""
    target = f.callees.get(callee.strip("@").strip('"'))
    if target is None:
        raise f.fail(f"calls {callee}, which is not in the module")
    args = [f.get(o).expr for o in op.operands]
    outs: list[str] = []
    for res, t in zip(op.results, op.result_types, strict=True):
        if t.is_tensor:
            v = f.new_buf(res, t)
            outs.append(v.expr)
        else:
            v = declare(f, res, t)
            outs.append("&" + v.expr)
        f.values[res] = v
    grid = ["pid_x", "pid_y", "pid_z", "grid_x", "grid_y", "grid_z"]
    f.emit(f"{target[0]}({', '.join([*args, *grid, *outs])});")


_RMW = {1: "and", 2: "or", 3: "xor", 4: "add", 5: "fadd", 6: "max", 7: "min", 8: "umax", 9: "umin", 10: "xchg"}
_ATOMIC_SUFFIX = {"f32": "f32", "f64": "f64", "f16": "f16", "bf16": "bf16", "i32": "i32", "i64": "i64"}


def _atomic_expr(f: FuncEmitter, op: Op, kind: str, ptr: str, args: list[str]) -> str:
    elem = op.result_types[0].element.elem or ""
    if elem not in _ATOMIC_SUFFIX:
        raise f.unsupported(f"{op.name} on {elem}")
    sfx, is_float = _ATOMIC_SUFFIX[elem], elem in FLOAT_TYPES
    if kind == "cas":
        return f"rv_atomic_cas_{sfx}({ptr}, {args[0]}, {args[1]})"
    if kind == "fadd" and is_float:
        return f"rv_atomic_fadd_{sfx}({ptr}, {args[0]})"
    if kind == "xchg":
        return f"rv_atomic_xchg_{sfx}({ptr}, {args[0]})" if is_float else \
            f"__atomic_exchange_n({ptr}, {args[0]}, __ATOMIC_ACQ_REL)"
    if is_float or kind == "fadd":
        raise f.unsupported(f"tt.atomic_rmw {kind} on {elem}")
    if kind in ("umax", "umin"):
        u = c_type(op.result_types[0].element).replace("int", "uint")
        return f"(({c_type(op.result_types[0].element)})__atomic_fetch_{kind[1:]}(({u} *){ptr}, ({u}){args[0]}, " \
               "__ATOMIC_ACQ_REL))"
    return f"__atomic_fetch_{kind}({ptr}, {args[0]}, __ATOMIC_ACQ_REL)"


@handles("tt.atomic_rmw", "tt.atomic_cas")
def op_atomic(f: FuncEmitter, op: Op) -> None:
    """One atomic per element, in order (never computed once for a splat pointer); masked lanes give 0."""
    ptr = f.get(op.operands[0])
    if op.name == "tt.atomic_cas":
        kind, vals, mask = "cas", [f.get(op.operands[1]), f.get(op.operands[2])], None
    else:
        kind = _RMW.get(op.int_attr("atomic_rmw_op"), "?")
        vals = [f.get(op.operands[1])]
        mask = f.get(op.operands[2]) if len(op.operands) > 2 else None
    t = op.result_types[0]

    def element(at) -> str:
        e = _atomic_expr(f, op, kind, at(ptr), [at(v) for v in vals])
        return f"({at(mask)} ? {e} : 0)" if mask is not None else e

    if not t.is_tensor:
        f.values[op.results[0]] = f.scalar(op.results[0], t, element(lambda v: v.expr))
        return
    out = f.new_buf(op.results[0], t)
    used = [v for v in (ptr, *vals, mask) if v is not None]
    f.loop(t.shape or (), [out, *used], lambda at, flat: f"{out.expr}[{flat}] = {element(at)};")
    f.values[op.results[0]] = out


_SEM_RELAXED = 1  # Triton's MemSemantic: RELAXED=1, ACQUIRE=2 (atomic_poll takes only these two)


@handles("tt.atomic_poll")
def op_atomic_poll(f: FuncEmitter, op: Op) -> None:
    """Spin on each element in order until it holds the expected value; with a timeout operand, one deadline for
    the whole op (taken before the first element), and a timed-out element gives false."""
    ptr, expected = f.get(op.operands[0]), f.get(op.operands[1])
    elem = op.operand_types[1].element.elem
    if elem not in ("i16", "i32", "i64"):
        raise f.unsupported(f"tt.atomic_poll on {elem}")
    acquire = int((op.int_attr("sem") or 2) != _SEM_RELAXED)
    timed, deadline = 0, "0"
    if len(op.operands) > 2:
        timed, deadline = 1, f.temp("poll_deadline")
        f.emit(f"int64_t {deadline} = rv_poll_deadline((uint64_t){f.get(op.operands[2]).expr});")

    def element(at) -> str:
        return f"rv_atomic_poll_{elem}({at(ptr)}, {at(expected)}, {acquire}, {timed}, {deadline})"

    t = op.result_types[0]
    if not t.is_tensor:
        f.values[op.results[0]] = f.scalar(op.results[0], t, element(lambda v: v.expr))
        return
    out = f.new_buf(op.results[0], t)
    f.loop(t.shape or (), [out, ptr, expected], lambda at, flat: f"{out.expr}[{flat}] = {element(at)};")
    f.values[op.results[0]] = out


@handles("tt.assert", "tt.device_assert", "tt.elementwise_inline_asm")  # tt.print: lower_print's tier
def op_rejected(f: FuncEmitter, op: Op) -> None:
    raise f.unsupported(f"operation {op.name}")


TIER = Tier("lower_struct", handlers=HANDLERS)
