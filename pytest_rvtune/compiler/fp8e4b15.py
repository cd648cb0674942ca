"""Triton's ``float8e4b15`` on the CPU: the frontend's ``convert_custom_types`` hook, in plain integer ops.

Triton 3.9 gives float8e4b15 no MLIR float type (it is i8) and leaves its conversions to a codegen hook of the
backend; NVIDIA's is PTX (``triton/language/extra/cuda/utils.py``). The format is fp16's with the low 7 mantissa
bits and the top exponent bit dropped (sign, 4 exponent bits with fp16's bias 15, 3 mantissa bits), so:
- up: the byte's sign to bit 15 and its other 7 bits shifted left by 7 give the fp16 of the same value exactly
  (subnormals included; no infinities or NaN: 0x7f is 1.875);
- down: as NVIDIA's sm80 code does it, so kernels tuned there read back the same bytes: fp32 first becomes fp16
  rounding toward zero, |x| saturates at 1.75 (fp16 0x3f00, NaN included), then rounds half away from zero to 3
  mantissa bits ((|bits| * 2 + 0x80) >> 8), and the sign is put back.
"""

from __future__ import annotations

from typing import Any

import triton.language as tl

_SATURATE_F16_BITS = 0x3F00  # 1.75, the largest magnitude NVIDIA's down-conversion produces


def convert_custom_types(arg: Any, dst_ty: Any, fp_downcast_rounding: str | None = None, _semantic: Any = None) -> Any:
    """``arg`` converted to ``dst_ty`` where one side is float8e4b15 and the other fp16 or fp32."""
    sem = _semantic
    src = arg.type.scalar
    dst = dst_ty.scalar if hasattr(dst_ty, "scalar") else dst_ty

    def const(value: int) -> Any:
        return sem.full(list(arg.shape), value, tl.int32) if arg.type.is_block() else sem.scalar_constant(value,
                                                                                                         tl.int32)

    if src.is_fp8e4b15():
        byte = sem.cast(sem.cast(sem.bitcast(arg, tl.uint8), tl.uint32), tl.int32)
        bits = sem.or_(sem.shl(sem.and_(byte, const(0x80)), const(8)), sem.shl(sem.and_(byte, const(0x7F)), const(7)))
        half = sem.bitcast(sem.cast(bits, tl.int16), tl.float16)
        return half if dst.is_fp16() else sem.cast(half, dst)
    if not dst.is_fp8e4b15() or not (src.is_fp16() or src.is_fp32()):
        raise ValueError(f"float8e4b15 converts to and from fp16 and fp32 only, not {src} to {dst}")
    half = arg if src.is_fp16() else sem.cast(arg, tl.float16, fp_downcast_rounding="rtz")
    bits = sem.cast(sem.cast(sem.bitcast(half, tl.uint16), tl.uint32), tl.int32)
    magnitude = sem.and_(bits, const(0x7FFF))
    magnitude = sem.where(sem.less_than(magnitude, const(_SATURATE_F16_BITS)), magnitude, const(_SATURATE_F16_BITS))
    rounded = sem.lshr(sem.add(sem.shl(magnitude, const(1)), const(0x80), False), const(8))
    byte = sem.or_(rounded, sem.and_(sem.lshr(bits, const(8)), const(0x80)))
    return sem.bitcast(sem.cast(byte, tl.int8), tl.float8e4b15)
