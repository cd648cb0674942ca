"""fp8 conversions, tl.dot_scaled and tl.device_print in the CPU driver's QEMU mode: the same kernels as
test_fp8.py built for rv64gcv (vectorised fp8 encode/decode) and run under qemu-riscv64. Fewer cases: slow."""

from __future__ import annotations

import pytest
import torch
import triton.language as tl
from fp8_kernels import assert_conversions_match_torch, check_scaled_dot, print_kernel

import pytest_rvtune.cpu_driver as cpu_driver

DRIVER_MODE = cpu_driver.QEMU_MODE
pytestmark = pytest.mark.usefixtures("active_driver")


@pytest.mark.parametrize("fp8, t", [(torch.float8_e4m3fn, tl.float8e4nv), (torch.float8_e5m2, tl.float8e5)],
                         ids=["e4m3fn", "e5m2"])
def test_every_f16_converts_bit_exactly_on_rv64(fp8: torch.dtype, t: tl.dtype):
    assert_conversions_match_torch(fp8, t, torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(
        torch.float16).clone())


@pytest.mark.parametrize("type_a, type_b", [("e2m1", "bf16"), ("e4m3", "e5m2")])
def test_dot_scaled_on_rv64(type_a: str, type_b: str):
    check_scaled_dot(type_a, type_b, True, True)


def test_device_print_reaches_stdout_under_qemu(capsys: pytest.CaptureFixture[str]):
    print_kernel[(1,)](torch.tensor([1, -2, 3, 250], dtype=torch.int32), 7, BLOCK=4)
    lines = capsys.readouterr().out.splitlines()
    assert "pid (0, 0, 0)  n =: 7" in lines and "pid (0, 0, 0) idx (1)  x: 0xfffffffe" in lines


def test_float8e4b15_converts_on_rv64():
    from fp8_kernels import assert_e4b15_conversions

    assert_e4b15_conversions(torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.float16).clone())
