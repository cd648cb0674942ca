"""16-bit float ops (and dot precisions) that Triton's own test_core.py exercises: cumsum without drift,
clamp on f16/bf16, f16 dots, the tf32 input precisions; compiled for the host and compared with numpy."""

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
