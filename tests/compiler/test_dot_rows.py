"""The rows of a dot worth computing (dot_rows.py, issue 17): fused MoE's A tile loaded under a per-row mask
with other=0.0 is zeros past the mask's last kept row, and the dot skips those rows unless B holds an
infinity or a NaN (0 * inf is NaN: then every row is computed). Differential against Triton's interpreter on
the host and under QEMU, and the C checked for the trimmed call."""

from __future__ import annotations

import re

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, lower_kernel, run_and_match, run_interpreter_many

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA


@triton.jit
def routed_rows_kernel(ids_ptr, a_ptr, b_ptr, acc_ptr, out_ptr, n_valid, K, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr):
    """fused_moe's shape of work: rows gathered through ids, the ids >= n_valid being padding (masked off)."""
    rm, rn, rk = tl.program_id(0) * BM + tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    ids = tl.load(ids_ptr + rm)
    keep = ids < n_valid
    acc = tl.load(acc_ptr + rm[:, None] * BN + rn[None, :])  # every row stored: skipped rows must hold acc
    for k in range(0, K, BK):
        a = tl.load(a_ptr + ids[:, None] * K + (k + rk)[None, :], mask=keep[:, None] & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def other_one_kernel(ids_ptr, a_ptr, b_ptr, acc_ptr, out_ptr, n_valid, K, BM: tl.constexpr, BN: tl.constexpr,
                     BK: tl.constexpr):
    """The masked rows load as 1.0, not zeros: nothing may be skipped."""
    rm, rn, rk = tl.program_id(0) * BM + tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    ids = tl.load(ids_ptr + rm)
    a = tl.load(a_ptr + ids[:, None] * K + rk[None, :], mask=(ids < n_valid)[:, None], other=1.0)
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    acc = tl.dot(a, b, tl.load(acc_ptr + rm[:, None] * BN + rn[None, :]), input_precision="ieee")
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)


_SIG = {"ids_ptr": "*i32", "a_ptr": "*fp32", "b_ptr": "*fp32", "acc_ptr": "*fp32", "out_ptr": "*fp32",
        "n_valid": "i32", "K": "i32"}


def _call(fn, bm: int, bn: int, bk: int, valid_per_block: list[int], k: int, rng: np.random.Generator,
          b_special: float | None = None) -> KernelCall:
    """Blocks of bm ids: the first valid_per_block[i] of block i are tokens (< n_valid), the rest padding."""
    n_valid = 40
    ids = np.concatenate([np.concatenate([rng.integers(0, n_valid, v), np.full(bm - v, n_valid)])
                          for v in valid_per_block]).astype(np.int32)
    a = rng.standard_normal((n_valid + 1, k)).astype(np.float32)  # row n_valid: would be read if unmasked
    b = rng.standard_normal((k, bn)).astype(np.float32)
    if b_special is not None:
        b[k // 2, 3] = b_special
    acc = rng.standard_normal((ids.size, bn)).astype(np.float32)
    acc[-1, 0] = 0.0
    return KernelCall(fn, _SIG, {"BM": bm, "BN": bn, "BK": bk},
                      [ids, a, b, acc, np.zeros((ids.size, bn), np.float32), n_valid, k], (len(valid_per_block),))


@pytest.fixture(scope="module")
def launches() -> dict[str, KernelCall]:
    rng = np.random.default_rng(17)
    blocks = [32, 1, 0, 17, 31, 3]  # a whole block, padding-only, every rounding of the kept rows
    return {"routed 32x64": _call(routed_rows_kernel, 32, 64, 16, blocks, 40, rng),
            "routed 16x32": _call(routed_rows_kernel, 16, 32, 8, [16, 5, 0, 9], 20, rng),
            "routed, inf in B": _call(routed_rows_kernel, 32, 64, 16, blocks, 40, rng, np.inf),
            "routed, NaN in B": _call(routed_rows_kernel, 16, 64, 8, [16, 5, 0, 9], 20, rng, np.nan),
            "masked rows load 1.0": _call(other_one_kernel, 16, 64, 16, [16, 3, 0], 16, rng)}


@pytest.fixture(scope="module")
def expected(launches: dict[str, KernelCall]) -> list[list[np.ndarray]]:
    """Triton's interpreter on every launch, once for both ISAs."""
    return run_interpreter_many(list(launches.values()))


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_skipped_rows_match_interpreter(isa: str, launches: dict[str, KernelCall],
                                        expected: list[list[np.ndarray]]) -> None:
    got = run_and_match(launches, expected, isa, rtol=2e-5, atol=1e-4)
    for name, g, w in zip(launches, got, expected, strict=True):
        if "inf" in name or "NaN" in name:  # padding rows get 0 * inf = NaN in column 3, as the interpreter
            assert np.isnan(g[4][-1, 3]) and np.isnan(w[4][-1, 3]), name


def test_dot_runs_over_the_kept_rows_only_when_masked_rows_are_zeros() -> None:
    c = lower_kernel(routed_rows_kernel, _SIG, {"BM": 32, "BN": 64, "BK": 16}).c_source
    assert "int32_t dot_rows_ = 32;" in c and "dot_rows_ = (dot_rows_ + 2) / 3 * 3;" in c  # RVV: 3-row tiles
    assert "dot_rows_ = (dot_rows_ + 7) / 8 * 8;" in c  # the host tiles
    # the rows reach the micro-kernel: as its row count, or the data extent of a masked tile (rv_dot_f32_part)
    assert ("if (dot_rows_ == 32) rv_dot_f32(32, 64, 16," in c and "else rv_dot_f32(dot_rows_, 64, 16," in c) \
        or re.search(r"rv_dot_f32_part\(32, 64, 16, rv_min64\(\w+, dot_rows_\),", c)
    c = lower_kernel(routed_rows_kernel, _SIG, {"BM": 16, "BN": 64, "BK": 8}).c_source
    assert "int32_t dot_rows_ = 16;" in c
    c = lower_kernel(routed_rows_kernel, _SIG, {"BM": 16, "BN": 32, "BK": 8}).c_source
    assert "dot_rows_" not in c  # narrow B blocks: not worth the finiteness check
    c = lower_kernel(other_one_kernel, _SIG, {"BM": 16, "BN": 64, "BK": 16}).c_source
    assert "dot_rows_" not in c and "rv_dot_f32(16, 64, 16," in c
