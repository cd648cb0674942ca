"""tt.dot on masked (ragged) blocks multiplies the data only (issue 17): a load whose mask is upper bounds with
``other=0`` hands its data extents to rv_dot_f32_part, whose RVV panels run a run-time vl over the data
columns, a compile-time row tile over the data rows and the k loop over the data k; the zeros past the mask
are not written when the dot is the tile's only reader (RV_DOT_DATA_ONLY). Differential against Triton's
interpreter on the host and under QEMU, at shapes that leave every panel width and row remainder."""

from __future__ import annotations

import re

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, lower_kernel, run_and_match, run_interpreter_many

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA


@triton.jit
def ragged_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32) + 0.5  # rows / columns past the data keep this value
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
    # the whole tile, padding included: its rows / columns past the data must hold acc's value (0.5)
    tl.atomic_add(c_ptr + M * N + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1), tl.sum(tl.sum(acc, 1), 0))


@triton.jit
def shared_tile_kernel(a_ptr, b_ptr, c_ptr, s_ptr, M, N, K,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """A's tile has a second reader (a row sum over its zeros too): its zeros must be written."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    acc = tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
    tl.store(s_ptr + rm, tl.sum(a * 1.0 + 1.0, 1))  # every element of the tile, padding included


_SIG = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
_SHARED_SIG = {**_SIG, "s_ptr": "*fp32"}
#: (BM, BN, BK, M, N, K): last blocks whose data is 32 of 64 columns (the LMUL-4 panel), 33..63 (LMUL 8 at a
#: partial vl), 9..16 and 1..8 columns, row remainders 1..7 of the 3-, 7- and 8-row tiles, a k tail, a
#: block with no data rows at all (M < BM * grid) and a k tail shorter than one unrolled pair
CASES = [(64, 64, 32, 160, 160, 40), (32, 64, 16, 37, 45, 21), (16, 32, 16, 23, 50, 17), (64, 128, 64, 70, 200, 65),
         (8, 16, 8, 13, 11, 3), (32, 32, 32, 5, 60, 1), (64, 64, 16, 64, 72, 16)]


def _ragged(bm: int, bn: int, bk: int, m: int, n: int, k: int, rng: np.random.Generator) -> KernelCall:
    grid = (-(-m // bm) + 1, -(-n // bn))  # one more row of blocks than the data needs: a block of padding only
    c = np.zeros(m * n + grid[0] * grid[1], np.float32)
    return KernelCall(ragged_matmul_kernel, _SIG, {"BM": bm, "BN": bn, "BK": bk},
                      [rng.standard_normal((m, k)).astype(np.float32),
                       rng.standard_normal((k, n)).astype(np.float32), c, m, n, k], grid)


@pytest.fixture(scope="module")
def calls() -> dict[str, KernelCall]:
    rng = np.random.default_rng(1717)
    out = {f"ragged {c}": _ragged(*c, rng) for c in CASES}
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 9)).astype(np.float32)
    out["shared A tile"] = KernelCall(shared_tile_kernel, _SHARED_SIG, {"BM": 8, "BN": 16, "BK": 8},
                                      [a, b, np.zeros((8, 16), np.float32), np.zeros(8, np.float32), 5, 9, 7], (1,))
    return out


@pytest.fixture(scope="module")
def expected(calls) -> list:
    return run_interpreter_many(list(calls.values()))


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_ragged_dots_match_interpreter(isa: str, calls, expected) -> None:
    run_and_match(calls, expected, isa, rtol=2e-5, atol=2e-4)


def test_masked_tiles_pass_their_extents_to_the_dot() -> None:
    c = lower_kernel(ragged_matmul_kernel, _SIG, {"BM": 32, "BN": 64, "BK": 16}).c_source
    rows = re.search(r"const int64_t (a_\w+_rows_) = rv_clamp64\(.*M.*, 0, 32\);", c)
    cols = re.search(r"const int64_t (b_\w+_cols_) = rv_clamp64\(.*N.*, 0, 64\);", c)
    assert rows and cols, "no data extents computed at the masked loads"
    assert re.search(rf"rv_dot_f32_part\(32, 64, 16, {rows.group(1)}, {cols.group(1)}, "
                     r"rv_min64\(a_\w+_cols_, b_\w+_rows_\), ", c)
    # the tiles are read by the dot alone: their zeros are written only where the dot reads whole tiles
    fills = re.findall(r".*rv_fill_f32\((?:a|b)_\w+ \+ o_.*", c)
    assert fills and all("if (!RV_DOT_DATA_ONLY)" in line for line in fills)


def test_a_tile_with_another_reader_keeps_its_zeros() -> None:
    c = lower_kernel(shared_tile_kernel, _SHARED_SIG, {"BM": 8, "BN": 16, "BK": 8}).c_source
    a_fills = re.findall(r".*rv_fill_f32\(a_\w+ \+ o_.*", c)
    b_fills = re.findall(r".*rv_fill_f32\(b_\w+ \+ o_.*", c)
    assert a_fills and not any("RV_DOT_DATA_ONLY" in line for line in a_fills)
    assert b_fills and all("if (!RV_DOT_DATA_ONLY)" in line for line in b_fills)
    assert "rv_dot_f32_part(8, 16, 8, " in c
