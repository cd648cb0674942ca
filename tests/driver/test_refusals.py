"""Kernels rvtune cannot run are refused with an error that names the kernel, its config and the line, on both
roads into the lowering: ``compile_kernel`` (the pytest plugin and ``rvtune compile``) and the CPU driver.

The frontend's refusals on our options (a dot input precision no CPU has, here the GPUs' hf32) name the kernel,
its config and the line (they used to escape from ``compile_kernel`` as a bare ``OpSemanticsError``).

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
def hf32_dot(src, dst, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(src + r[:, None] * BLOCK + r[None, :])
    tl.store(dst + r[:, None] * BLOCK + r[None, :], tl.dot(x, x, input_precision="hf32"))


def test_compile_kernel_refusal_names_kernel_config_and_line(tmp_path: Path) -> None:
    with pytest.raises(CompileError) as err:
        compile_kernel(hf32_dot, {"src": "*fp32", "dst": "*fp32"}, {"BLOCK": 16}, HOST_ISA, cache_root=tmp_path)
    message = str(err.value)
    assert f"kernel hf32_dot [BLOCK=16] for {HOST_ISA}: the Triton frontend failed" in message
    assert f"{Path(__file__).name}:" in message and 'input_precision="hf32"' in message  # the file and the line
    assert "input_precision must be one of" in message  # what is wrong, with what is allowed


@pytest.mark.usefixtures("active_driver")
def test_driver_refuses_at_the_kernel_before_running_it() -> None:
    out = torch.full((16, 16), 7.0)
    with pytest.raises(CompilationError, match="input_precision must be one of") as err:
        hf32_dot[(1,)](torch.ones(16, 16), out, BLOCK=16)
    message = str(err.value)
    assert "input_precision must be one of ('ieee', 'tf32'" in message and "Got hf32" in message
    assert "def hf32_dot(" in message and "at 4:" in message  # the kernel and the line of the dot
    assert torch.equal(out, torch.full((16, 16), 7.0))  # nothing ran


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
