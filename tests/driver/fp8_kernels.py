"""Kernels and numpy/torch references of the fp8, tl.dot_scaled and tl.device_print tests (host and QEMU modes).

The references are independent of the lowering: torch's own fp8 conversions (correctly rounded, to nearest
even) for values in range, and for tl.dot_scaled a float64 product of operands decoded by hand (the OCP MX
tables), which the result must equal rounded to fp32 once, so a wrong decode, nibble order, scale index or K
grouping is caught.
"""

from __future__ import annotations

import bisect
import math

import torch
import triton
import triton.language as tl

#: (torch dtype, Triton dtype) of every fp8 format the lowering handles.
FP8_FORMATS = [
    (torch.float8_e5m2, tl.float8e5),
    (torch.float8_e4m3fn, tl.float8e4nv),
    (torch.float8_e4m3fnuz, tl.float8e4b8),
    (torch.float8_e5m2fnuz, tl.float8e5b16),
]


@triton.jit
def convert_kernel(x_ptr, y_ptr, back_ptr, N: tl.constexpr, T: tl.constexpr, RTZ: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = x.to(T, fp_downcast_rounding="rtz" if RTZ else None)
    tl.store(y_ptr + offs, y)  # 8-bit storage
    tl.store(back_ptr + offs, tl.load(y_ptr + offs).to(tl.float32))  # an 8-bit load, widened


def convert(x: torch.Tensor, fp8: torch.dtype, t: tl.dtype, rtz: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` converted by the kernel: (the fp8 tensor, its values read back as float32)."""
    y = torch.empty(x.shape, dtype=fp8)
    back = torch.empty(x.shape, dtype=torch.float32)
    convert_kernel[(1,)](x, y, back, N=x.numel(), T=t, RTZ=rtz)
    return y, back


def assert_conversions_match_torch(fp8: torch.dtype, t: tl.dtype, x: torch.Tensor) -> None:
    """Bit-exact with torch for every value in the format's range; NaN stays NaN; the widening is exact."""
    y, back = convert(x, fp8, t)
    in_range = x.float().abs() <= torch.finfo(fp8).max
    got, want = y.view(torch.uint8), x.to(fp8).view(torch.uint8)
    bad = in_range & (got != want)
    assert not bad.any(), (f"{x.dtype} -> {fp8}: {int(bad.sum())} of {x.numel()} differ, e.g. "
                           f"{x[bad][:4].tolist()} -> {got[bad][:4].tolist()}, torch {want[bad][:4].tolist()}")
    assert y.float()[x.float().isnan()].isnan().all()
    assert torch.equal(back.isnan(), y.float().isnan())
    assert torch.equal(back[~back.isnan()], y.float()[~back.isnan()])


@triton.jit
def scaled_dot_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                      A_ROWS: tl.constexpr, A_COLS: tl.constexpr, B_ROWS: tl.constexpr, B_COLS: tl.constexpr,
                      TYPE_A: tl.constexpr, TYPE_B: tl.constexpr, LHS_K_PACK: tl.constexpr,
                      SCALE_A: tl.constexpr, SCALE_B: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, A_ROWS)[:, None] * A_COLS + tl.arange(0, A_COLS)[None, :])
    b = tl.load(b_ptr + tl.arange(0, B_ROWS)[:, None] * B_COLS + tl.arange(0, B_COLS)[None, :])
    sa = None
    sb = None
    if SCALE_A:
        sa = tl.load(sa_ptr + tl.arange(0, M)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    if SCALE_B:
        sb = tl.load(sb_ptr + tl.arange(0, N)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    acc = tl.full((M, N), 0.5, tl.float32)
    c = tl.dot_scaled(a, sa, TYPE_A, b, sb, TYPE_B, acc, lhs_k_pack=LHS_K_PACK)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
_FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "bf16": torch.bfloat16, "fp16": torch.float16}


def _decode(x: torch.Tensor, fmt: str, packed_dim: int) -> torch.Tensor:
    """float64 values of an operand; e2m1 holds two per byte along ``packed_dim``, the even index low."""
    if fmt != "e2m1":
        return x.view(_FP8[fmt]).double()
    nibbles = torch.stack([x & 0xF, x >> 4], dim=packed_dim + 1).flatten(packed_dim, packed_dim + 1)
    mag = _E2M1[(nibbles & 7).long()]
    return torch.where((nibbles & 8) != 0, -mag, mag)


def _e8m0(s: torch.Tensor) -> torch.Tensor:
    return torch.where(s == 255, torch.tensor(float("nan"), dtype=torch.float64), torch.exp2(s.double() - 127))


def make_operand(shape: tuple[int, int], fmt: str, gen: torch.Generator) -> torch.Tensor:
    if fmt in ("bf16", "fp16"):
        return torch.randn(shape, generator=gen).to(_FP8[fmt])
    x = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
    if fmt in ("e4m3", "e5m2"):  # finite codes only: the reference's bound needs finite products
        top = 0x7F if fmt == "e4m3" else 0x7C
        x = torch.where(x & top == top, x & 0x83, x)
    return x


def check_scaled_dot(type_a: str, type_b: str, scale_a: bool, scale_b: bool, lhs_k_pack: bool = True,
                     m: int = 16, n: int = 32, k: int = 64, seed: int = 0, a_scales: tuple[int, int] = (100, 150),
                     b_scales: tuple[int, int] = (100, 150), nan_scale_rows: tuple[int, ...] = ()) -> None:
    """``a_scales`` / ``b_scales``: the range the e8m0 bytes are drawn from; ``nan_scale_rows``: rows of a whose
    second scale group is 255 (NaN)."""
    gen = torch.Generator().manual_seed(seed)
    a_shape = (m, k // 2) if type_a == "e2m1" and lhs_k_pack else (m // 2, k) if type_a == "e2m1" else (m, k)
    b_shape = (k // 2, n) if type_b == "e2m1" else (k, n)
    a, b = make_operand(a_shape, type_a, gen), make_operand(b_shape, type_b, gen)
    sa = torch.randint(*a_scales, (m, k // 32), generator=gen, dtype=torch.uint8)
    sb = torch.randint(*b_scales, (n, k // 32), generator=gen, dtype=torch.uint8)
    sa[list(nan_scale_rows), 1] = 255
    out = torch.empty((m, n))
    scaled_dot_kernel[(1,)](a, sa if scale_a else None, b, sb if scale_b else None, out, M=m, N=n, K=k,
                            A_ROWS=a_shape[0], A_COLS=a_shape[1], B_ROWS=b_shape[0], B_COLS=b_shape[1],
                            TYPE_A=type_a, TYPE_B=type_b, LHS_K_PACK=lhs_k_pack, SCALE_A=scale_a, SCALE_B=scale_b)
    A = _decode(a, type_a, 1 if lhs_k_pack else 0)
    B = _decode(b, type_b, 0)
    if scale_a:
        A = A * _e8m0(sa).repeat_interleave(32, dim=1)
    if scale_b:
        B = B * _e8m0(sb).repeat_interleave(32, dim=1).T
    ref = A @ B + 0.5
    nan = ref.isnan()
    assert torch.equal(out.isnan(), nan), f"NaN where the reference has none (or not where it has): {out}"
    assert_rounded_once(out, ref, A.abs() @ B.abs() + 0.5, f"{type_a} x {type_b}")


def assert_rounded_once(out: torch.Tensor, ref: torch.Tensor, magnitude: torch.Tensor, what: str) -> None:
    """``out`` (fp32) is the exact ``ref`` rounded to fp32 once: within half an fp32 ulp (plus double-precision
    sums' slack, ``magnitude`` * 2^-45), not the several ulps of the largest partial sum an fp32 running sum
    drifts by."""
    finite = ~ref.isnan()
    r32 = ref.float().abs()
    half_ulp = (torch.nextafter(r32, torch.tensor(float("inf"))) - r32).double() / 2
    err = (out.double() - ref).abs()
    bad = finite & (err > half_ulp + magnitude * 2.0**-45)
    assert not bad.any(), (f"{what}: {int(bad.sum())} elements not the exact dot rounded once, e.g. "
                           f"{out[bad][:3].tolist()} for {ref[bad][:3].tolist()}")


@triton.jit
def fp8_dot_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], tl.dot(a, b))


@triton.jit
def print_kernel(x_ptr, n, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    print("n =", n)
    tl.device_print("x", x, hex=True)
    tl.device_print("h", x.to(tl.float16), x.to(tl.uint8))


def e4b15_value(byte: int) -> float:
    """What a float8e4b15 byte means: sign, 4 exponent bits with bias 15, 3 mantissa bits, subnormals at exponent
    0, no infinities or NaN (written from the format, not from the conversion code)."""
    sign = -1.0 if byte & 0x80 else 1.0
    exponent, mantissa = (byte >> 3) & 0xF, byte & 0x7
    if exponent == 0:
        return sign * mantissa / 8 * 2.0**-14
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 15)


def e4b15_encode(x: float) -> int:
    """NVIDIA's sm80 down-conversion of an fp16 value, by value: |x| saturated at 1.75 (NaN too), the nearest
    float8e4b15 value with ties away from zero, the sign kept (of -0.0 too)."""
    negative = math.copysign(1.0, x) < 0
    magnitude = 1.75 if math.isnan(x) else min(abs(x), 1.75)
    above = bisect.bisect_left(_E4B15_MAGNITUDES, magnitude)  # the values ascend with the byte
    below = max(above - 1, 0)
    nearer_below = magnitude - _E4B15_MAGNITUDES[below] < _E4B15_MAGNITUDES[above] - magnitude  # a tie: above
    return (below if nearer_below else above) | (0x80 if negative else 0)


_E4B15_MAGNITUDES = [e4b15_value(b) for b in range(0x80)]


def convert_e4b15(x: torch.Tensor, rtz: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` converted to float8e4b15 by the kernel: (its bytes, those read back as float32)."""
    y = torch.empty(x.shape, dtype=torch.uint8)
    back = torch.empty(x.shape, dtype=torch.float32)
    convert_kernel[(1,)](x, triton.reinterpret(y, tl.float8e4b15), back, N=x.numel(), T=tl.float8e4b15, RTZ=rtz)
    return y, back


def assert_e4b15_conversions(x16: torch.Tensor) -> None:
    """fp16 -> float8e4b15 bytes as e4b15_encode says, and every byte read back is its value."""
    y, back = convert_e4b15(x16)
    want = torch.tensor([e4b15_encode(v) for v in x16.float().tolist()], dtype=torch.uint8)
    bad = y != want
    assert not bad.any(), (f"{int(bad.sum())} of {x16.numel()} differ, e.g. {x16[bad][:4].tolist()} -> "
                           f"{y[bad][:4].tolist()}, want {want[bad][:4].tolist()}")
    assert back.tolist() == [e4b15_value(b) for b in y.tolist()]


@triton.jit
def widen_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(tl.float32))
