"""16-bit float ops (and dot precisions) that Triton's own test_core.py exercises: cumsum without drift,
clamp on f16/bf16, f16 dots; compiled for the host and compared with numpy."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl
from difftest import KernelCall, assert_match, run_c_kernels


def _bf16_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _bf16_rne(x: np.ndarray) -> np.ndarray:
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return np.where(np.isnan(x), (b >> 16) | 0x40, (b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


@triton.jit
def cumsum_kernel(x_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), axis=0))


def test_bf16_cumsum_keeps_the_running_sum_in_fp32() -> None:
    """Rounding the running sum to bf16 after every element drifts by far more than 1 % over 512 values."""
    n = 512
    x_bits = _bf16_rne(np.random.default_rng(3).uniform(0.0, 1.0, n).astype(np.float32))
    call = KernelCall(cumsum_kernel, {"x_ptr": "*bf16", "o_ptr": "*bf16"}, {"BLOCK": n},
                      [x_bits, np.zeros(n, np.uint16)], (1,))
    got = _bf16_f32(run_c_kernels([call])[0][1])
    want = _bf16_f32(_bf16_rne(np.cumsum(_bf16_f32(x_bits), dtype=np.float32)))
    assert_match([got], [want], rtol=1e-2, atol=0)


@triton.jit
def _shift_combine(a1, b1_last, b1_cur, a2, b2_last, b2_cur):
    # Each output is the element before it: the `1` compared with is a constant the canonicalizer hoists out of
    # the combiner's region.
    return a1 + a2, tl.where(a2 == 1, b1_cur, 0) + b2_last, b2_cur


@triton.jit
def shift_scan_kernel(x_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    _, z, _ = tl.associative_scan((1 + 0 * x, 0 * x, x), axis=0, combine_fn=_shift_combine)
    tl.store(o_ptr + offs, z)


def test_bf16_tuple_scan_with_an_outside_constant_is_exact() -> None:
    """A combiner using a value from outside its region is not widened: widening it once compared an fp32 count
    with the bf16 bit pattern of 1 and silently gave wrong results (Triton's test_scan2d 'roll')."""
    n = 64
    x_bits = _bf16_rne(np.random.default_rng(5).uniform(-2.0, 2.0, n).astype(np.float32))
    call = KernelCall(shift_scan_kernel, {"x_ptr": "*bf16", "o_ptr": "*bf16"}, {"BLOCK": n},
                      [x_bits, np.zeros(n, np.uint16)], (1,))
    got = _bf16_f32(run_c_kernels([call])[0][1])
    want = np.concatenate([[0.0], _bf16_f32(x_bits)[:-1]]).astype(np.float32)
    assert_match([got], [want], rtol=0, atol=0)


@triton.jit
def clamp_kernel(x_ptr, lo_ptr, hi_ptr, o_ptr, on_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x, lo, hi = tl.load(x_ptr + offs), tl.load(lo_ptr + offs), tl.load(hi_ptr + offs)
    tl.store(o_ptr + offs, tl.clamp(x, lo, hi))
    tl.store(on_ptr + offs, tl.clamp(x, lo, hi, propagate_nan=tl.PropagateNan.ALL))


def _clamp_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.array([np.nan, -3.0, -0.5, 0.0, 0.25, 0.75, 2.0, np.inf, -np.inf, np.nan, 1.5, -1.0, 1.0, -0.0, 8.0,
                  -np.nan], np.float32)
    lo = np.full(x.size, -1.0, np.float32)
    hi = np.full(x.size, 1.0, np.float32)
    return x, lo, hi


def test_clamp_on_f16_and_bf16_with_both_nan_policies() -> None:
    x, lo, hi = _clamp_inputs()
    n = x.size
    # Triton: without propagation a NaN x is clamped to lo (max(x, lo) drops the NaN); with ALL it stays NaN.
    plain, propagated = np.clip(np.where(np.isnan(x), lo, x), lo, hi), np.clip(x, lo, hi)
    to16 = {"fp16": lambda a: a.astype(np.float16), "bf16": _bf16_rne}
    calls = [KernelCall(clamp_kernel, dict.fromkeys(("x_ptr", "lo_ptr", "hi_ptr", "o_ptr", "on_ptr"), f"*{dt}"),
                        {"BLOCK": n}, [to16[dt](x), to16[dt](lo), to16[dt](hi), to16[dt](np.zeros(n, np.float32)),
                                       to16[dt](np.zeros(n, np.float32))], (1,)) for dt in ("fp16", "bf16")]
    (f16_out, bf16_out) = run_c_kernels(calls)
    assert_match([f16_out[3], f16_out[4]], [plain.astype(np.float16), propagated.astype(np.float16)], what="fp16")
    assert_match([_bf16_f32(bf16_out[3]), _bf16_f32(bf16_out[4])], [plain, propagated], what="bf16")


@triton.jit
def dot_f16_kernel(a_ptr, b_ptr, c_ptr, d_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, out_dtype=tl.float16))
    acc = tl.full((M, N), 1.0, tl.float16)  # an f16 accumulator: the dot's result is f16 too
    tl.store(d_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, acc))


def test_f16_dot_with_an_f16_result_accumulates_in_fp32() -> None:
    m, n, k = 16, 16, 256
    rng = np.random.default_rng(5)
    a = rng.uniform(0.0, 1.0, (m, k)).astype(np.float16)
    b = rng.uniform(0.0, 1.0, (k, n)).astype(np.float16)
    call = KernelCall(dot_f16_kernel, dict.fromkeys(("a_ptr", "b_ptr", "c_ptr", "d_ptr"), "*fp16"),
                      {"M": m, "N": n, "K": k}, [a, b, np.zeros((m, n), np.float16), np.zeros((m, n), np.float16)],
                      (1,))
    got = run_c_kernels([call])[0]
    exact = a.astype(np.float32) @ b.astype(np.float32)
    # one rounding to f16 at the end: within half an f16 ulp (2**-11 relative) of the fp32 result
    assert_match([got[2], got[3]], [exact.astype(np.float16), (exact + 1).astype(np.float16)], rtol=2**-10, atol=0)

