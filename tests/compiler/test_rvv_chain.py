"""Chains holding an fp32 exp written as RVV intrinsics (compiler/rvv_chain.py): the exp stays in its chain, the
chain is one LMUL-8 loop in vector registers (``rv_vexp_f32m8``) with the scalar loop for other targets after
``#else``, and an element-wise reader of the chain's value is computed in the same loop (fusion._siblings).

Each kernel runs under QEMU (the intrinsics) and on the host (the scalar loop), against Triton's interpreter; the
two builds must also agree bit for bit, which is what the fused multiply-add forms and the exp's fallback (a
vector with a lane outside the fast path's range) are written for."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, lower_kernel, run_and_match, run_interpreter_many

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA


@triton.jit
def exp_forms_kernel(x_ptr, y_ptr, m_ptr, out_ptr, s, BM: tl.constexpr, BN: tl.constexpr):
    """exp over each way rvv_chain writes an op: products feeding adds and subtractions from either side (the
    fused forms), a per-row scalar, a kernel scalar on the left of a subtraction and a division, max / min,
    negation, abs, sqrt."""
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    at = rm[:, None] * BN + rn[None, :]
    x, y = tl.load(x_ptr + at), tl.load(y_ptr + at)
    m = tl.load(m_ptr + rm)[:, None]
    size = BM * BN
    tl.store(out_ptr + at, tl.exp(x * s - m))  # a * b - c: vfmsac
    tl.store(out_ptr + size + at, tl.exp(m - x * y))  # c - a * b: vfnmsac
    tl.store(out_ptr + 2 * size + at, tl.exp((x + 1.0) * y + m))  # a * b + c: vfmacc (each product once)
    tl.store(out_ptr + 3 * size + at, tl.exp(m + s * y))  # c + a * b, the scalar factor first
    tl.store(out_ptr + 4 * size + at, tl.exp(s - x) / (s / (tl.abs(y) + 1.0)))  # vfrsub, vfrdiv
    tl.store(out_ptr + 5 * size + at, tl.exp(tl.minimum(tl.maximum(-x, y), m)) + tl.sqrt(tl.abs(x)))


@triton.jit
def exp_sum_kernel(x_ptr, e_ptr, sum_ptr, n_cols, BM: tl.constexpr, BN: tl.constexpr):
    """softmax's second sweep: e = exp(x - m) is stored and summed into a carried tile, whose sum is read in the
    chain's loop from e's register and written in the carried tile's own memory."""
    rows, offs = tl.arange(0, BM), tl.arange(0, BN)
    m = tl.load(x_ptr + rows * n_cols)  # the first column: any value works as the shift
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for start in range(0, n_cols, BN):
        cols = start + offs
        mask = cols[None, :] < n_cols
        x = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=float("-inf"))
        e = tl.exp(x - m[:, None])
        tl.store(e_ptr + rows[:, None] * n_cols + cols[None, :], e, mask=mask)
        acc += e
    tl.store(sum_ptr + rows, tl.sum(acc, 1))


_FORMS_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "m_ptr": "*fp32", "out_ptr": "*fp32", "s": "fp32"}
_SUM_SIG = {"x_ptr": "*fp32", "e_ptr": "*fp32", "sum_ptr": "*fp32", "n_cols": "i32"}


def _forms_launch() -> KernelCall:
    bm, bn = 4, 128  # rows of two vectors
    rng = np.random.default_rng(7)
    x = rng.uniform(-4, 4, (bm, bn)).astype(np.float32)
    y = rng.uniform(-3, 3, (bm, bn)).astype(np.float32)
    # lanes outside the fast path's |x| <= 86 in some vectors only: the fallback for that vector, in registers
    x[1, 5], x[2, 70], x[3, 0] = 60.0, -60.0, np.nan
    y[1, 5] = 2.0
    m = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
    return KernelCall(exp_forms_kernel, _FORMS_SIG, {"BM": bm, "BN": bn},
                      [x, y, m, np.zeros(6 * bm * bn, np.float32), 1.5], (1,))


def _sum_launch() -> KernelCall:
    bm, bn, n = 8, 64, 200  # three whole column blocks, the fourth masked (8 of 64 lanes)
    rng = np.random.default_rng(11)
    x = rng.normal(0, 3, (bm, n)).astype(np.float32)
    x[2, 130] = -np.inf
    x[5, 7] = 95.0  # e overflows to inf in one lane (the full-range path), and the row's sum with it
    return KernelCall(exp_sum_kernel, _SUM_SIG, {"BM": bm, "BN": bn},
                      [x, np.zeros((bm, n), np.float32), np.zeros(bm, np.float32), n], (1,))


def test_chains_with_exp_are_intrinsics_under_rvv_and_scalar_c_elsewhere() -> None:
    c = lower_kernel(exp_forms_kernel, _FORMS_SIG, {"BM": 4, "BN": 128}).c_source
    assert c.count("#if defined(__riscv_v) && __riscv_v_min_vlen >= 256 /* the chain") == 6
    assert c.count("rv_vexp_f32m8(") == 6 and c.count("rv_expf(") == 6  # each chain in both forms
    assert "rv_exp_f32(" not in c  # no exp left to a tile of its own
    assert c.count("const rv_exp_consts exp_k_ = rv_exp_consts_opaque();") == 1  # once, at the top
    for form in ("vfmsac_vf", "vfnmsac_vv", "vfmacc_vv", "vfmacc_vf", "vfrsub_vf", "vfrdiv_vf", "vfmax_vv",
                 "vfmin_vf", "vfneg_v", "vfabs_v", "vfsqrt_v"):
        assert f"__riscv_{form}_f32m8(" in c, form


# (the sums are reduced in another order by RVV's vfredusum than by the host's loop: only e is compared by bits)
@pytest.mark.parametrize(("launch", "same_bits"), [(_forms_launch, [3]), (_sum_launch, [1])], ids=["forms", "sum"])
def test_vector_and_scalar_chains_give_the_interpreters_answer_and_the_same_bits(
        launch: Callable[[], KernelCall], same_bits: list[int]) -> None:
    call = launch()
    expected = run_interpreter_many([call])
    rvv = run_and_match({"rvv": call}, expected, RISCV_ISA, rtol=2e-6, atol=1e-30)[0]
    host = run_and_match({"host": call}, expected, HOST_ISA, rtol=2e-6, atol=1e-30)[0]
    for k in same_bits:
        assert rvv[k].tobytes() == host[k].tobytes(), f"array {k}"


def test_a_reader_of_the_chain_is_computed_in_its_loop_in_the_carried_tile() -> None:
    c = lower_kernel(exp_sum_kernel, _SUM_SIG, {"BM": 8, "BN": 64}).c_source
    # e = exp(x - m) is computed by its store, in the store's loop, and acc + e with it from e's register (v<k>_):
    # where x and e's blocks are apart and every element is stored (the run-time test)...
    stored = r"const vfloat32m8_t (v\d+_) = rv_vexp_f32m8\(.*\n.*__riscv_vse32_v_f32m8\(&{}, \1, vl_\);\n" \
             r".*= __riscv_vle32_v_f32m8\(&acc_\w+\[.*\n.*__riscv_vfadd_vv_f32m8\(v\d+_, \1, vl_\)"
    # (x and e step along the row together: the test is of their rows, the same in every column step)
    assert re.search(r"if \(\(rv_disjoint\(x_ptr, [^;]*, e_ptr, [^;]*\)\) && \(\(mask_at_ >= 64\)\)\) \{", c), c
    assert re.search(stored.format(r"row_\[q_\]"), c), c
    # ... else e into a tile, acc + e in the same loop, then the tile stored
    assert re.search(stored.format(r"e_\w+\[p0_ \* 64 \+ q_\]"), c), c
    declared = dict(re.findall(r"\*(acc_\w+) = \(rv_float \*\)\(rv_arena \+ (\d+)\)", c))
    assert len(set(declared.values())) == 1, declared  # the new sum in the carried tile's memory
    assert not re.search(r"acc_\w+\[i_\] = acc_\w+\[i_\];", c)  # no copy back at the yield
    assert not re.search(r"acc_\w+\[i_\] = \(acc_\w+\[i_\] \+ e_\w+\[i_\]\);", c)  # no loop of its own
