"""Kernels rvtune cannot run are refused with an error that names the kernel, its config and the line, on both
roads into the lowering: ``compile_kernel`` (the pytest plugin and ``rvtune compile``) and the CPU driver.

float8e4b15 has no C type in the lowering (Triton 3.9 types it as i8): Triton's frontend refuses it where the
kernel uses it (our options do not list it), so it never reaches the lowering as a pointer parameter (fp8 used to
escape from ``compile_kernel`` as a bare ``OpSemanticsError`` without kernel or config).

What is no longer refused is checked here too: the GPUs' fp32 dot input precisions (tf32, ...).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError

from pytest_rvtune.compiler.api import CompileError, compile_kernel
from pytest_rvtune.toolchain import HOST_ISA


@triton.jit
def fp8_copy(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs))


@triton.jit
def fp8_round_trip(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs).to(tl.float8e4b15).to(tl.float32))


@pytest.mark.parametrize("kernel, signature, line, what", [
    (fp8_copy, {"src": "*fp8e4b15", "dst": "*fp8e4b15"}, "def fp8_copy", "fp8e4b15 not supported"),
    (fp8_round_trip, {"src": "*fp32", "dst": "*fp32"}, "tl.float8e4b15", "doesn't provide conversion for this type"),
], ids=["fp8-pointer-params", "fp8-cast-in-body"])
def test_compile_kernel_refuses_fp8_naming_kernel_config_and_line(kernel, signature: dict[str, str], line: str,
                                                                  what: str, tmp_path: Path) -> None:
    with pytest.raises(CompileError) as err:
        compile_kernel(kernel, signature, {"BLOCK": 16}, HOST_ISA, cache_root=tmp_path)
    message = str(err.value)
    name = kernel.fn.__name__
    assert f"kernel {name} [BLOCK=16] for {HOST_ISA}: the Triton frontend failed" in message
    assert f"{Path(__file__).name}:" in message and line in message  # the user's file and the offending line
    assert what in message  # what is wrong
    assert "fp8 types are fp8e5, fp8e4nv, fp8e4b8, fp8e5b16" in message  # and what to do


@pytest.mark.usefixtures("active_driver")
def test_driver_refuses_fp8_tensor_at_the_kernel() -> None:
    raw = torch.zeros(16, dtype=torch.int8)
    out = torch.full((16,), 7, dtype=torch.int8)
    with pytest.raises(CompilationError, match="fp8e4b15 not supported") as err:
        fp8_copy[(1,)](triton.reinterpret(raw, tl.float8e4b15), triton.reinterpret(out, tl.float8e4b15), BLOCK=16)
    assert "def fp8_copy" in str(err.value)
    assert torch.equal(out, torch.full((16,), 7, dtype=torch.int8))  # nothing ran


@triton.jit
def dot_precision_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr, PRECISION: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    b = tl.load(b_ptr + r[:, None] * N + r[None, :])
    tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, b, input_precision=PRECISION))


@pytest.mark.usefixtures("active_driver")
@pytest.mark.parametrize("precision", ["tf32", "tf32x3", "bf16x3", "bf16x6"])
def test_driver_accepts_gpu_dot_precisions_and_computes_ieee_fp32(precision: str) -> None:
    """Triton's test_core asks for the GPUs' fp32 approximations; we compute IEEE fp32 (tf32 alone would
    be ~1e-3 off), which is at least as accurate as each of them."""
    n = 32
    gen = torch.Generator().manual_seed(9)
    a, b = torch.rand((n, n), generator=gen) + 1, torch.rand((n, n), generator=gen) + 1
    c = torch.zeros((n, n))
    dot_precision_kernel[(1,)](a, b, c, N=n, PRECISION=precision)
    torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=1e-5, atol=0)
