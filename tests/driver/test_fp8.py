"""8-bit floats (float8e5, float8e4nv, float8e4b8, float8e5b16), tl.dot_scaled and tl.device_print through the
CPU driver on the host. Each was refused before: fp8 by the frontend, tt.dot_scaled and tt.print by the lowering.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from fp8_kernels import (
    FP8_FORMATS,
    assert_conversions_match_torch,
    assert_rounded_once,
    check_scaled_dot,
    convert,
    convert_kernel,
    fp8_dot_kernel,
    print_kernel,
    scaled_dot_kernel,
)

pytestmark = pytest.mark.usefixtures("active_driver")

ALL_16_BIT_PATTERNS = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16)


@pytest.mark.parametrize("fp8, t", FP8_FORMATS, ids=[str(f) for f, _ in FP8_FORMATS])
@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16, torch.float32])
def test_conversions_to_and_from_fp8_are_bit_exact_with_torch(fp8: torch.dtype, t: tl.dtype, src: torch.dtype):
    if src == torch.float32:  # every binade from far below the smallest subnormal to far beyond the largest value
        gen = torch.Generator().manual_seed(3)
        x = torch.randn(1 << 16, generator=gen) * torch.exp2(torch.randint(-30, 20, (1 << 16,), generator=gen).float())
    else:
        x = ALL_16_BIT_PATTERNS.view(src).clone()
    assert_conversions_match_torch(fp8, t, x)


def test_out_of_range_saturates_and_nan_stays_nan_as_on_gpus():
    """Triton's GPU lowering narrows with cvt.rn.satfinite: beyond the largest finite value (infinities too)
    gives that value with the sign, not inf or NaN."""
    x = torch.tensor([1e4, -1e4, float("inf"), float("-inf"), float("nan"), -0.0, 448.0, 464.0])
    e4m3, _ = convert(x, torch.float8_e4m3fn, tl.float8e4nv)
    assert e4m3.view(torch.uint8).tolist()[:6] == [0x7E, 0xFE, 0x7E, 0xFE, 0x7F, 0x80]
    assert e4m3.float().tolist()[6:] == [448.0, 448.0]
    e5m2, _ = convert(x * 100, torch.float8_e5m2, tl.float8e5)
    assert e5m2.view(torch.uint8).tolist()[:5] == [0x7B, 0xFB, 0x7B, 0xFB, 0x7F]
    fnuz, _ = convert(x, torch.float8_e4m3fnuz, tl.float8e4b8)
    assert fnuz.view(torch.uint8).tolist()[:6] == [0x7F, 0xFF, 0x7F, 0xFF, 0x80, 0x00]  # no -0; 0x80 is NaN


def test_round_toward_zero():
    x = torch.tensor([1.1, -1.1, 1.0625, 0.0015, 500.0, 0.0, 0.0, 0.0])
    rtz, _ = convert(x, torch.float8_e4m3fn, tl.float8e4nv, rtz=True)
    rne, _ = convert(x, torch.float8_e4m3fn, tl.float8e4nv)
    assert rtz.float().tolist()[:5] == [1.0, -1.0, 1.0, 0.0, 448.0]
    assert rne.float().tolist()[:5] == [1.125, -1.125, 1.0, 0.001953125, 448.0]


@pytest.mark.parametrize("fp8", [torch.float8_e5m2, torch.float8_e4m3fn])
def test_dot_of_fp8_tiles_accumulates_in_fp32(fp8: torch.dtype):
    gen = torch.Generator().manual_seed(5)
    a, b = (torch.randn(shape, generator=gen).to(fp8) for shape in ((16, 32), (32, 16)))
    out = torch.empty((16, 16))
    fp8_dot_kernel[(1,)](a, b, out, M=16, N=16, K=32)
    ref = a.double() @ b.double()
    assert ((out.double() - ref).abs() <= (a.double().abs() @ b.double().abs()) * 64 * 2.0**-24).all()


@pytest.mark.parametrize("type_a, type_b", [("e2m1", "bf16"), ("e4m3", "e5m2"), ("fp16", "e2m1"),
                                            ("e5m2", "e4m3"), ("bf16", "fp16"), ("e2m1", "e2m1")])
@pytest.mark.parametrize("scale_a, scale_b", [(True, False), (False, True), (True, True), (False, False)])
def test_dot_scaled_decodes_scales_and_accumulates(type_a: str, type_b: str, scale_a: bool, scale_b: bool):
    check_scaled_dot(type_a, type_b, scale_a, scale_b)


def test_dot_scaled_e2m1_packed_along_m():
    check_scaled_dot("e2m1", "bf16", True, False, lhs_k_pack=False)


def test_dot_scaled_extreme_scales_nan_and_tiny():
    """e8m0 byte 255 is NaN (its rows become NaN); byte 0 is 2^-127, not zero (b's 2^123 brings it back up)."""
    check_scaled_dot("e4m3", "bf16", True, False, a_scales=(126, 129), nan_scale_rows=(3, 7), seed=1)
    check_scaled_dot("e4m3", "bf16", True, True, a_scales=(0, 1), b_scales=(250, 251), seed=2)


def test_dot_scaled_is_the_exact_dot_rounded_once_despite_cancellation():
    """Large terms that cancel (Triton's test_scaled_dot[64-64-128-False-False-True-e4m3-fp16] has one: exact
    -0.0108160, an fp32 running sum -0.0109253): an fp32 running sum keeps the rounding of its largest partial
    sum, 1000.5 + 0.0010004 - 1000 = 0.50098; tt.dot_scaled gives the exact 0.5010004 rounded once."""
    m, n, k = 16, 32, 64
    a = torch.zeros((m, k), dtype=torch.float16)
    a[:, 0], a[:, 1], a[:, 2] = 1000.0, 0.001, -1000.0
    a[1:, 3:] = torch.randn((m - 1, k - 3), generator=torch.Generator().manual_seed(3)).to(torch.float16) * 300
    b = torch.full((k, n), 0x38, dtype=torch.uint8)  # e4m3 1.0
    sb = torch.full((n, k // 32), 127, dtype=torch.uint8)  # 2^0
    out = torch.empty((m, n))
    scaled_dot_kernel[(1,)](a, None, b, sb, out, M=m, N=n, K=k, A_ROWS=m, A_COLS=k, B_ROWS=k, B_COLS=n,
                            TYPE_A="fp16", TYPE_B="e4m3", LHS_K_PACK=True, SCALE_A=False, SCALE_B=True)
    ref = a.double() @ torch.ones((k, n), dtype=torch.float64) + 0.5
    assert out[0, 0].item() == torch.tensor(0.5 + 0.0010004043579101562).float().item()
    assert_rounded_once(out, ref, a.double().abs() @ torch.ones((k, n), dtype=torch.float64) + 0.5, "fp16 x e4m3")


def test_device_print_prints_every_element_with_pid_and_index(capfd: pytest.CaptureFixture[str]):
    x = torch.tensor([1, -2, 3, 250], dtype=torch.int32)
    print_kernel[(2,)](x, 7, BLOCK=4)
    lines = capfd.readouterr().out.splitlines()
    assert lines.count("pid (1, 0, 0)  n =: 7") == 1
    assert "pid (0, 0, 0) idx (1)  x: 0xfffffffe" in lines
    assert "pid (1, 0, 0) idx (3) (operand 0)  h: 250.000000" in lines
    assert "pid (0, 0, 0) idx (3) (operand 1)  h: 250" in lines  # uint8: unsigned
    assert len(lines) == 2 * (1 + 4 + 8)


def test_fp8_tensors_launch_in_place():
    x = torch.tensor([0.5, -3.0, 448.0, 0.0]).to(torch.float8_e4m3fn)
    y = triton.reinterpret(torch.zeros(4, dtype=torch.uint8), tl.float8e4nv)
    back = torch.empty(4)
    convert_kernel[(1,)](x, y, back, N=4, T=tl.float8e4nv, RTZ=False)
    assert y.base.view(torch.float8_e4m3fn).float().tolist() == [0.5, -3.0, 448.0, 0.0]


def test_float8e4b15_converts_as_on_nvidia_gpus():
    """float8e4b15 (Triton types it i8 and leaves its conversions to the backend): every fp16 bit pattern down, as
    NVIDIA's sm80 code rounds and saturates, every byte up to its value; fp32 goes through fp16 toward zero."""
    from fp8_kernels import assert_e4b15_conversions, convert_e4b15, e4b15_value, widen_kernel

    assert_e4b15_conversions(ALL_16_BIT_PATTERNS.view(torch.float16).clone())
    every_byte = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    back = torch.empty(256, dtype=torch.float32)
    widen_kernel[(1,)](triton.reinterpret(every_byte, tl.float8e4b15), back, N=256)
    assert back.tolist() == [e4b15_value(b) for b in range(256)]
    # 1.0625 is halfway between 1.0 and 1.125: fp32 just below it becomes fp16 1.0615 toward zero, hence 1.0
    y, _ = convert_e4b15(torch.tensor([1.0625, 1.0625 - 2.0**-20, -1.0625 + 2.0**-20, 3.0, 2.0**-17, 0.0, -0.0, 1.0]))
    assert y.tolist() == [0x79, 0x78, 0xF8, 0x7E, 0x01, 0x00, 0x80, 0x78]  # 1.0 is 0x78: exponent 15 is 2**0
