"""The CPU driver's QEMU mode: the same ``kernel[grid](...)`` launches, built for rv64gcv and run as an ELF under
qemu-riscv64 on copies of the tensors' memory, copied back in place. Slower than the host mode: few launches."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from driver_kernels import matmul_kernel, run_descriptor_scale
from triton.runtime.driver import driver

import pytest_rvtune.cpu_driver as cpu_driver
from pytest_rvtune.cpu_driver.launch import KernelCrashError, LaunchError
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA

DRIVER_MODE = cpu_driver.QEMU_MODE
pytestmark = pytest.mark.usefixtures("active_driver")


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, alpha, offset, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask) * alpha + tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, y + (offset - 2**40).to(tl.float32), mask=mask)


@triton.jit
def axpy_kernel_u32(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x + x)


@triton.jit
def grid_id_kernel(out_ptr):
    x = tl.program_id(0)
    y = tl.program_id(1)
    z = tl.program_id(2)
    tl.store(out_ptr + (z * tl.num_programs(1) + y) * tl.num_programs(0) + x, (z * 100 + y * 10 + x).to(tl.int32))


def test_qemu_mode_compiles_for_rv64():
    assert cpu_driver.active_mode() == cpu_driver.QEMU_MODE
    assert driver.active.get_current_target().arch == RISCV_ISA
    out = torch.zeros(1, dtype=torch.int32)
    kernel = grid_id_kernel[(1,)](out)
    assert kernel.metadata.target.arch == RISCV_ISA


def test_views_scalars_and_in_place_results():
    base = torch.randn(200)
    x = base[3:43]  # a view at an offset into a larger storage
    y = torch.randn(40)
    out = torch.full((45,), -7.0)
    axpy_kernel[(3,)](x, y, out, 40, 2.5, 2**40 + 1, BLOCK=16)
    torch.testing.assert_close(out[:40], x * 2.5 + y + 1.0)
    assert out[40:].tolist() == [-7.0] * 5
    snapshot = base.clone()
    axpy_kernel[(3,)](x, x, x, 40, 1.0, 2**40, BLOCK=16)  # three aliasing arguments: one storage
    torch.testing.assert_close(x, snapshot[3:43] * 2)
    assert torch.equal(base[:3], snapshot[:3]) and torch.equal(base[43:], snapshot[43:])


def test_matmul_2d_grid_with_masks_and_threads():
    M, N, K = 11, 9, 7
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.zeros(M, N)
    matmul_kernel[(2, 2)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                          c.stride(0), c.stride(1), BM=8, BN=8, BK=4, num_threads=2)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)


def test_3d_grid():
    out = torch.full((2, 3, 4), -1, dtype=torch.int32)
    grid_id_kernel[(4, 3, 2)](out)
    z, y, x = torch.meshgrid(torch.arange(2), torch.arange(3), torch.arange(4), indexing="ij")
    assert torch.equal(out, (z * 100 + y * 10 + x).to(torch.int32))


def test_switching_modes_keeps_kernels_apart():
    out = torch.full((2,), -1, dtype=torch.int32)
    try:
        cpu_driver.activate(cpu_driver.HOST_MODE)
        host_kernel = grid_id_kernel[(2,)](out)
    finally:
        cpu_driver.activate(cpu_driver.QEMU_MODE)
    rv_kernel = grid_id_kernel[(2,)](out)
    assert out.tolist() == [0, 1]
    assert (host_kernel.metadata.target.arch, rv_kernel.metadata.target.arch) == (HOST_ISA, RISCV_ISA)


def test_do_bench_under_qemu():
    out = torch.zeros(4, dtype=torch.int32)
    ms = triton.testing.do_bench(lambda: grid_id_kernel[(4,)](out), warmup=1, rep=1)
    assert ms > 0


def test_tensor_on_another_device_is_refused_by_name():
    x = torch.empty(8, device="meta")
    with pytest.raises(LaunchError, match=r"kernel axpy_kernel: argument 'x_ptr' is on device meta"):
        axpy_kernel[(1,)](x, torch.zeros(8), torch.zeros(8), 8, 1.0, 2**40, BLOCK=8)


def test_reinterpreted_unsigned_tensors():
    # triton.reinterpret wraps a tensor to give it a type torch lacks (Triton's own tests pass uint32 so).
    x = triton.reinterpret(torch.tensor([2**31 + 5, 7, 3, 1], dtype=torch.int64).to(torch.int32), tl.uint32)
    out = triton.reinterpret(torch.zeros(4, dtype=torch.int32), tl.uint32)
    axpy_kernel_u32[(1,)](x, out, BLOCK=4)
    assert out.base.tolist() == (x.base * 2).tolist()


@triton.jit
def far_store_kernel(out_ptr, elements_away):
    # One store far outside the tensor's memory: the kernel itself crashes (SIGSEGV in the guest).
    tl.store(out_ptr + elements_away, 1.0)


def test_crashing_kernel_is_reported_as_a_crash_not_a_refusal():
    out = torch.zeros(4)
    with pytest.raises(KernelCrashError, match=r"kernel far_store_kernel: the kernel crashed under QEMU \(SIGSEGV"):
        far_store_kernel[(1,)](out, 2**40)
    assert out.tolist() == [0.0] * 4  # nothing copied back from a crashed run


@triton.jit
def fmod_by_constant_kernel(out_ptr, x_ptr, y: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) % y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("y", [4, 0.5, 3])
def test_float_remainder_by_a_constant_runs_bit_exactly(dtype: torch.dtype, y: float):
    # A power-of-two divisor let clang fold fmod into x - trunc(x / y) * y, vectorised with vfcvt.rtz, which
    # QEMU 7.2 aborts on (SIGSEGV; Triton's test_bin_op[1-float32-uint64-%] met it): rv_fmod keeps the libm call.
    x = torch.cat([torch.randn(124, generator=torch.Generator().manual_seed(5), dtype=dtype) * 50,
                   torch.tensor([-0.0, -8.0, 7.99, float("inf")], dtype=dtype)])
    out = torch.empty_like(x)
    fmod_by_constant_kernel[(1,)](out, x, y, BLOCK=128)
    expected = torch.fmod(x, y)
    assert torch.equal(out.isnan(), expected.isnan())
    finite = ~expected.isnan()
    assert torch.equal(out[finite].view(torch.int64 if dtype == torch.float64 else torch.int32),
                       expected[finite].view(torch.int64 if dtype == torch.float64 else torch.int32))  # sign of 0 too


def test_tensor_descriptor_parameters_under_qemu():
    x, out, corner = run_descriptor_scale("nan")  # the descriptor's parts travel as the ELF's argument words
    assert torch.equal(out, x * 2)
    assert torch.equal(corner[:2, :5], x[8:, 8:]) and corner[2:].isnan().all() and corner[:, 5:].isnan().all()
