"""``tt.dot_scaled`` (``tl.dot_scaled``: OCP microscaling operands) as an fp32 dot over decoded operands.

Triton's semantics (its interpreter's ``create_dot_scaled``): each operand is decoded to fp32 exactly (e2m1
nibbles, e4m3/e5m2 bytes, bf16/fp16), multiplied by its e8m0 scale (one per group of K elements, 2^(s-127),
255 = NaN) when it has one, and the product is an fp32 dot plus the accumulator. The fp32 product of a decoded
value and its scale is exact unless it leaves fp32's range, so this is as accurate as GPU paths that upcast to
bf16/fp16 first. The decoded tiles are plain fp32 buffers; the dot is an i-k-j loop nest like ``tt.dot``'s, but
summed in double and rounded to fp32 once (see op_dot_scaled): the exact dot, whatever order a GPU sums in.
"""

from __future__ import annotations

import contextlib

from .emitter import FuncEmitter, Handler, Tier, Val, handles_into, numel
from .lower_ops import to_float
from .ttir import Op, Type, parse_int_array

#: The handlers of this tier (one: tt.dot_scaled); lower.TIERS places it.
HANDLERS: dict[str, Handler] = {}
handles = handles_into(HANDLERS)

#: triton::ScaleDotElemType (``ir.ScaleDotElemTypeTY``): the value of the a_elem_type / b_elem_type attributes.
_FORMATS = {0: "e4m3", 1: "e5m2", 2: "e2m3", 3: "e3m2", 4: "e2m1", 5: "bf16", 6: "fp16"}
#: The element type each non-packed format arrives as in the TTIR (the frontend bitcasts the loaded bytes).
_ELEM = {"e4m3": "f8E4M3FN", "e5m2": "f8E5M2", "bf16": "bf16", "fp16": "f16"}


def _flag(op: Op, key: str, default: bool) -> bool:
    raw = op.attr(key)
    return default if raw is None else raw.split(":")[0].strip() == "true"


@handles("tt.dot_scaled")
def op_dot_scaled(f: FuncEmitter, op: Op) -> None:
    seg = parse_int_array(op.attr("operandSegmentSizes") or "array<i32: 1, 1, 1, 0, 0>")
    it = iter(op.operands)
    a, b, c = (f.get(next(it)) for _ in range(3))
    a_scale = f.get(next(it)) if seg[3] else None
    b_scale = f.get(next(it)) if seg[4] else None
    fmt_a, fmt_b = (_FORMATS.get(op.int_attr(k), "?") for k in ("a_elem_type", "b_elem_type"))
    t = op.result_types[0]
    if t.element.elem != "f32":
        raise f.unsupported(f"tt.dot_scaled with a {t.element.elem} result (rvtune computes it in f32)")
    for fmt, v in ((fmt_a, a), (fmt_b, b)):
        if fmt != "e2m1" and _ELEM.get(fmt) != v.type.element.elem:
            raise f.unsupported(f"tt.dot_scaled with {fmt} operands of type {v.type.element.elem}")
    shape = t.shape or ()
    batch, m_, n_ = shape[:-2], shape[-2], shape[-1]
    k_ = (a.type.shape or ())[-1] * (2 if fmt_a == "e2m1" and _flag(op, "lhs_k_pack", True) else 1)
    bi = ["b_"] if batch else []

    a32 = f.new_buf(None, Type("f32", None, (*batch, m_, k_)), "a_decoded")
    b32 = f.new_buf(None, Type("f32", None, (*batch, k_, n_)), "b_decoded")
    f.emit(f"/* tt.dot_scaled: {fmt_a} x {fmt_b} operands decoded to fp32 and scaled, then an fp32 dot */")
    # a is [.., M, K]: its K index is the one packed (k_pack) or M is; its scale is [.., M, K / group]
    _decode(f, a32, a, fmt_a, a_scale, [*bi, "r_", "s_"], rows=m_, cols=k_,
            packed_dim=1 if _flag(op, "lhs_k_pack", True) else 0, scale_idx=(*bi, "r_"), k_index="s_")
    # b is [.., K, N]: K is packed by default; its scale is [.., N, K / group]
    _decode(f, b32, b, fmt_b, b_scale, [*bi, "r_", "s_"], rows=k_, cols=n_,
            packed_dim=0 if _flag(op, "rhs_k_pack", True) else 1, scale_idx=(*bi, "s_"), k_index="r_")

    out = f.new_buf(op.results[0], t)
    f.copy_into(out, c)
    # The products of decoded operands are exact in double (<= 24-bit significands each), and K of them sum in
    # double with errors far below fp32's ulp: each element is the exact dot plus the accumulator, rounded to fp32
    # once. An fp32 running sum is off by about an ulp of the largest partial sum, which a result near zero
    # (cancellation) turns into a large relative error (Triton's test_scaled_dot met it: 1.2e-4 on -0.0108).
    with (f.block(f"for (int32_t b_ = 0; b_ < {numel(batch)}; ++b_)") if batch else contextlib.nullcontext(),
          f.block(f"for (int32_t m_ = 0; m_ < {m_}; ++m_)")):
        base = f"b_ * {m_ * n_} + " if batch else ""
        f.emit(f"double acc_[{n_}] = {{0}};")
        with f.block(f"for (int32_t k_ = 0; k_ < {k_}; ++k_)"):
            f.emit(f"const double a_ = {a32.expr}[{'b_ * ' + str(m_ * k_) + ' + ' if batch else ''}m_ * {k_} + k_];")
            with f.block(f"for (int32_t n_ = 0; n_ < {n_}; ++n_)"):
                f.emit(f"acc_[n_] += a_ * (double){b32.expr}[{'b_ * ' + str(k_ * n_) + ' + ' if batch else ''}"
                       f"k_ * {n_} + n_];")
        with f.block(f"for (int32_t n_ = 0; n_ < {n_}; ++n_)"):
            f.emit(f"{out.expr}[{base}m_ * {n_} + n_] = (float)((double){out.expr}[{base}m_ * {n_} + n_] + acc_[n_]);")
    f.values[op.results[0]] = out


def _decode(f: FuncEmitter, dst: Val, src: Val, fmt: str, scale: Val | None, idx: list[str], *, rows: int, cols: int,
            packed_dim: int, scale_idx: tuple[str, ...], k_index: str) -> None:
    """dst[.., r_, s_] = the (rows x cols) operand element (r_, s_) as fp32, times its scale."""
    batch = dst.shape[:-2]
    with (f.block(f"for (int32_t b_ = 0; b_ < {numel(batch)}; ++b_)") if batch else contextlib.nullcontext(),
          f.block(f"for (int32_t r_ = 0; r_ < {rows}; ++r_)"),
          f.block(f"for (int32_t s_ = 0; s_ < {cols}; ++s_)")):
        if fmt == "e2m1":  # two values a byte: the even index in the low nibble (as Triton's interpreter unpacks)
            packed = list(idx)
            packed[len(batch) + packed_dim] = f"({idx[len(batch) + packed_dim]} >> 1)"
            shift = f"(({idx[len(batch) + packed_dim]} & 1) * 4)"
            value = f"rv_e2m1_to_f32((uint8_t)(((uint8_t){f.access(src, packed, '')} >> {shift}) & 0xfu))"
        else:
            value = to_float(f.access(src, idx, ""), src.type.element.elem or "")
        if scale is not None:
            value = f"{value} * rv_e8m0_to_f32((uint8_t){_scale_at(f, scale, scale_idx, k_index, rows, cols, idx)})"
        flat = " + ".join(f"{i} * {s}" for i, s in zip(idx, (rows * cols, cols, 1)[-len(idx):], strict=True))
        f.emit(f"{dst.expr}[{flat}] = {value};")


def _scale_at(f: FuncEmitter, scale: Val, lead: tuple[str, ...], k_index: str, rows: int, cols: int,
              idx: list[str]) -> str:
    """The scale byte of one element: scale[.., row-or-col, k / group] (or the one scalar scale)."""
    if not scale.type.is_tensor:
        return scale.expr
    groups = (scale.type.shape or ())[-1]
    k_len = cols if k_index == "s_" else rows
    if groups <= 0 or k_len % groups:
        raise f.fail(f"a scale of shape {scale.type.shape} does not divide K = {k_len} into groups")
    return f.access(scale, [*lead, f"({k_index} / {k_len // groups})"], "")


TIER = Tier("lower_scaled", handlers=HANDLERS)
