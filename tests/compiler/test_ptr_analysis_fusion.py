"""Element-wise fusion (compiler/fusion.py): a single-use float chain is one loop, computed where it is
consumed (a store, a dot's accumulator); a value used twice is computed once; an iota mask is a test in the
loop, not a tile; a carried accumulator is updated in place. Differential check against
Triton's interpreter on the host and under QEMU."""

from __future__ import annotations

import re

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, assert_match, lower_kernel, run_and_match, run_c_kernels, run_interpreter_many

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA


@triton.jit
def chain_kernel(x_ptr, m_ptr, out_ptr, scale, BM: tl.constexpr, BN: tl.constexpr):
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    m = tl.load(m_ptr + rm)
    p = tl.exp(x * scale - m[:, None])  # the chain below the exp: one loop; the exp: one vector call
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], p)
    q = x * 2.0 + 1.0  # two uses: computed once
    tl.store(out_ptr + BM * BN + rm[:, None] * BN + rn[None, :], q + tl.sum(q, 1)[:, None])


@triton.jit
def acc_kernel(a_ptr, b_ptr, alpha_ptr, out_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    alpha = tl.load(alpha_ptr + r)
    acc = tl.dot(a, b, a * alpha[:, None], input_precision="ieee")  # the scaled accumulator is fused
    tl.store(out_ptr + r[:, None] * B + r[None, :], acc)


@triton.jit
def exp_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    y = tl.exp(tl.load(x_ptr + r))
    tl.store(out_ptr + r, y + 0.0)  # a tile of y, then a store (both the materialised and the fused path)
    tl.store(out_ptr + BLOCK + r, tl.exp(tl.load(x_ptr + r)))


@triton.jit
def carried_trans_kernel(x_ptr, out_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    acc = tl.load(x_ptr + r[:, None] * B + r[None, :])
    for _ in range(3):  # the chain reads the carried tile transposed: never computed in place
        acc = tl.trans(acc) * 2.0 + 1.0
    tl.store(out_ptr + r[:, None] * B + r[None, :], acc)


@triton.jit
def masked_square_kernel(x_ptr, m_ptr, out_ptr, n, BM: tl.constexpr, BN: tl.constexpr):
    """layer_norm's variance loop: tl.where on an iota mask, its result squared, summed into a carried tile."""
    rows, offs = tl.arange(0, BM), tl.arange(0, BN)
    m = tl.load(m_ptr + rows)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for start in range(0, n, BN):
        cols = start + offs
        mask = (rows[:, None] < BM - 1) & (cols[None, :] < n)  # the last row and the column tail are masked
        x = tl.load(x_ptr + rows[:, None] * n + cols[None, :], mask=mask, other=5.0)
        d = tl.where(mask, x - m[:, None], 0.0)  # the mask tested in the loop; d read twice by one op
        acc += d * d  # computed in acc's own memory, although the chain reads m through a broadcast view
    tl.store(out_ptr + rows[:, None] * BN + offs[None, :], acc)


_CHAIN_SIG = {"x_ptr": "*fp32", "m_ptr": "*fp32", "out_ptr": "*fp32", "scale": "fp32"}
_SQUARE_SIG = {"x_ptr": "*fp32", "m_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
_ACC_SIG = {"a_ptr": "*fp32", "b_ptr": "*fp32", "alpha_ptr": "*fp32", "out_ptr": "*fp32"}


def test_single_use_chain_is_one_loop_and_exp_one_vector_call() -> None:
    c = lower_kernel(chain_kernel, _CHAIN_SIG, {"BM": 8, "BN": 16}).c_source
    # exp(x * scale - m[:, None]) is computed in the store's loop: RVV intrinsics (rvv_chain.py), the product
    # and the subtraction one vfmsac as clang contracts the scalar C of the other targets
    assert re.search(r"row_\[q_\] = rv_expf\(\(\(x_\w+\[.*\] \* scale\) - m_\w+\[p0_\]\)\);", c)
    assert re.search(r"__riscv_vfmsac_vf_f32m8\(__riscv_vfmv_v_f_f32m8\(m_\w+\[p0_\], vl_\), scale, v0_, vl_\)", c)
    assert re.search(r"rv_vexp_f32m8\(v1_, vl_, &exp_k_\);\s+__riscv_vse32_v_f32m8\(&row_\[q_\], v2_, vl_\);", c)
    assert not re.search(r"\*p_\w+ = \(rv_float \*\)", c)  # no tile for p nor for x * scale
    assert len(re.findall(r"\*q_\w+ = \(rv_float \*\)", c)) == 1  # q (two uses) has its own tile
    assert re.search(r"row_\[q_\] = \(q_\w+\[.*\] \+ v\w+\[p0_\]\);", c)  # q + sum(q): in the store


def test_mask_is_tested_in_the_loop_and_the_carried_sum_is_computed_in_place() -> None:
    c = lower_kernel(masked_square_kernel, _SQUARE_SIG, {"BM": 4, "BN": 16}).c_source
    assert "rv_uint8_t" not in c  # no byte tile of the mask
    assert not re.search(r"\*d_\w+ = \(rv_float \*\)", c)  # no tile of d: d * d is in the sum's loop
    body = re.search(r"(acc_\w+)\[p0_ \* 16 \+ p1_\] = \((acc_\w+)\[p0_ \* 16 \+ p1_\] \+ .*\(p1_ < .*\);", c)
    assert body, c
    declared = dict(re.findall(r"\*(acc_\w+) = \(rv_float \*\)\(rv_arena \+ (@OFF\d+@|\d+)\)", c))
    assert declared[body.group(1)] == declared[body.group(2)]  # the sum is written in the carried tile
    assert not re.search(r"acc_\w+\[i_\] = acc_\w+\[i_\];", c)  # and not copied back


def test_dot_accumulator_chain_goes_straight_into_the_result() -> None:
    c = lower_kernel(acc_kernel, _ACC_SIG, {"B": 16}).c_source
    assert "fused_" not in c
    assert re.search(r"acc_\w+\[.*\] = \(a_\w+\[.*\] \* alpha_\w+\[", c)


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_vector_exp_is_within_one_ulp_with_ieee_special_cases(isa: str) -> None:
    # rv_exp_f32 takes 64-lane chunks with every |x| <= 86 by its fast path, others by the full-range one: whole
    # chunks of each (the linspace) and chunks mixing both lane by lane (the tile of in- and out-of-range values)
    xs = np.concatenate([np.linspace(-110, 95, 4000), [0.0, -0.0, np.inf, -np.inf, np.nan, 88.72, 88.73, -87.3,
                                                       -103.9, -104.5, 1e-8, -1e-30, 86.0, -86.0, 86.01, -86.01],
                         np.tile([0.5, -100.0, 3.0, np.nan, -2.0, 87.5, -np.inf, 85.9], 16)]).astype(np.float32)
    n = 8192
    x = np.resize(xs, n)
    x[len(xs):] = 1.0
    out = run_c_kernels([KernelCall(exp_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": n},
                                    [x, np.zeros(2 * n, np.float32)], (1,))], isa)[0][1]
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    for half in (out[:n], out[n:]):
        assert_match([half], [want], what="rv_expf", rtol=1.2e-7, atol=1e-44)
        assert np.signbit(half[np.isfinite(half)]).sum() == 0


@pytest.fixture(scope="module")
def launches() -> dict[str, KernelCall]:
    rng = np.random.default_rng(3)
    f32 = np.float32
    return {
        "carried_trans": KernelCall(carried_trans_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"B": 16},
                                    [rng.standard_normal((16, 16)).astype(f32), np.zeros((16, 16), f32)], (1,)),
        "chain": KernelCall(chain_kernel, _CHAIN_SIG, {"BM": 8, "BN": 16},
                            [rng.standard_normal((8, 16)).astype(f32), rng.standard_normal(8).astype(f32),
                             np.zeros(2 * 8 * 16, f32), 0.7], (1,)),
        "masked_square": KernelCall(masked_square_kernel, _SQUARE_SIG, {"BM": 4, "BN": 16},
                                    [rng.standard_normal(4 * 37).astype(f32), rng.standard_normal(4).astype(f32),
                                     np.zeros((4, 16), f32), 37], (1,)),
        "acc": KernelCall(acc_kernel, _ACC_SIG, {"B": 16},
                          [rng.standard_normal((16, 16)).astype(f32), rng.standard_normal((16, 16)).astype(f32),
                           rng.standard_normal(16).astype(f32), np.zeros((16, 16), f32)], (1,)),
    }


@pytest.fixture(scope="module")
def expected(launches) -> list:
    return run_interpreter_many(list(launches.values()))


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_fused_chains_match_interpreter(isa: str, launches, expected) -> None:
    run_and_match(launches, expected, isa, rtol=1e-5, atol=1e-5)
