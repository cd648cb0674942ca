"""Pointer analysis (compiler/ptr_analysis.py): which loads become structured blocks, and that they compute
exactly what Triton's interpreter computes (host and rv64gcv under QEMU).

Unit: the generated C of a block load has unit-stride rows between clamped bounds and no tensor of
pointers; an indirect load (offsets loaded from memory) stays a per-element gather; fused-MoE-like rows
(indirect rows, contiguous columns) are a block whose row offsets come from the loaded indices.
Differential: contiguous, strided, transposed, ragged-mask (<, <=, >, >=), loop-carried (a K loop with a
dot) and indirect loads against the interpreter.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, assert_match, lower_kernel, run_c_kernels, run_interpreter_many

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA


@triton.jit
def block_copy_kernel(src_ptr, dst_ptr, M, N, stride_sm, stride_sn, LO, HI,
                      BM: tl.constexpr, BN: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N) & (offs_n[None, :] >= LO) & (offs_n[None, :] <= HI) \
        & (offs_m[:, None] > 0)
    x = tl.load(src_ptr + offs_m[:, None] * stride_sm + offs_n[None, :] * stride_sn, mask=mask, other=-1.0)
    # the whole padded tile is stored: the masked-off lanes show the `other` value
    dst = dst_ptr + offs_m[:, None] * (tl.num_programs(1) * BN) + offs_n[None, :]
    tl.store(dst, x * 2.0)


@triton.jit
def loop_dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BK), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BK) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def indirect_kernel(src_ptr, idx_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.store(dst_ptr + offs, tl.load(src_ptr + idx, mask=m, other=5.0))


@triton.jit
def rows_kernel(src_ptr, rows_ptr, dst_ptr, n_rows, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    rows = tl.load(rows_ptr + offs_m)
    valid = rows < n_rows
    x = tl.load(src_ptr + rows[:, None] * stride + offs_n[None, :], mask=valid[:, None] & (offs_n[None, :] < N),
                other=0.0)
    tl.store(dst_ptr + offs_m[:, None] * BN + offs_n[None, :], x)


@triton.jit
def reshaped_offsets_kernel(src_ptr, dst_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    """Offsets and a mask given their unit dims by tl.reshape (as Triton's tensor-descriptor rewrite does)."""
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    rows = tl.reshape(offs_m, (BM, 1))  # offsets: [BM] -> [BM, 1]
    cols = tl.reshape(offs_n, (1, BN))
    row_ok = tl.reshape((offs_m >= 1) & (offs_m < M), (BM, 1))  # a mask: [BM] -> [BM, 1]
    x = tl.load(src_ptr + rows * stride + cols, mask=row_ok & (cols < N), other=-2.0)
    tl.store(dst_ptr + tl.reshape(offs_m, (1, BM, 1)) * BN + tl.reshape(offs_n, (1, 1, BN)),
             tl.reshape(x, (1, BM, BN)) + 1.0)


_BLOCK_SIG = {"src_ptr": "*fp32", "dst_ptr": "*fp32", "M": "i32", "N": "i32", "stride_sm": "i32", "stride_sn": "i32",
              "LO": "i32", "HI": "i32"}
_LOOP_SIG = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
_INDIRECT_SIG = {"src_ptr": "*fp32", "idx_ptr": "*i32", "dst_ptr": "*fp32", "n": "i32"}
_ROWS_SIG = {"src_ptr": "*fp32", "rows_ptr": "*i32", "dst_ptr": "*fp32", "n_rows": "i32", "N": "i32",
             "stride": "i32"}
_RESHAPED_SIG = {"src_ptr": "*fp32", "dst_ptr": "*fp32", "M": "i32", "N": "i32", "stride": "i32"}


def _c(fn, sig, consts) -> str:
    return lower_kernel(fn, sig, consts).c_source


# ---- unit: recognised / not recognised -------------------------------------------------------------------


def test_block_load_is_unit_stride_rows_between_bounds() -> None:
    c = _c(block_copy_kernel, _BLOCK_SIG, {"BM": 8, "BN": 16})
    # x * 2 is stored: x is read in the store's loop where the run-time test shows src and dst apart (a deferred
    # load), else read whole first, as one strided block of rows (the copy below)
    assert c.count("a deferred load") == 1 and c.count("if (rv_disjoint(") == 1
    assert "rv_clamp64(" in c  # the column mask became bounds of the row loop
    # each row: one copy between the bounds (vle32 / vlse32 on RVV, memcpy or a strided loop elsewhere)
    assert re.search(r"rv_copy_e32\(load_\w* \+ o_ \+ lo_, 1, row_ \+ lo_ \* \(\(int64_t\)stride_sn\), "
                     r"\(\(int64_t\)stride_sn\), hi_ - lo_\);", c)
    assert "**" not in c  # no tile of pointers anywhere
    assert not re.search(r"\? \*", c)  # no per-element gather


def test_loop_carried_pointers_are_one_scalar_each() -> None:
    c = _c(loop_dot_kernel, _LOOP_SIG, {"BM": 16, "BN": 16, "BK": 16})
    assert "**" not in c
    assert re.search(r"float \* a_ptrs\w* = ", c) and re.search(r"float \* b_ptrs\w* = ", c)
    assert re.search(r"rv_dot_f32(_part)?\(16, 16, 16,", c)


def test_indirect_load_stays_a_gather() -> None:
    c = _c(indirect_kernel, _INDIRECT_SIG, {"BLOCK": 16})
    assert c.count("a strided block") == 2  # idx load and the store: plain blocks
    assert re.search(r"\? \*", c)  # src + idx: a real gather, kept per element


def test_indirect_rows_with_contiguous_columns_are_a_block() -> None:
    c = _c(rows_kernel, _ROWS_SIG, {"BM": 8, "BN": 16})
    assert c.count("a strided block") == 3
    row = next(line for line in c.splitlines() if "row_ = src_ptr" in line)
    assert re.search(r"\(\(int64_t\)\w+\[p0_\]\)", row)  # each row starts at its loaded (scaled) index
    assert not re.search(r"\? \*", c)


def test_unit_dims_added_by_reshape_keep_offsets_and_masks_symbolic() -> None:
    """tl.reshape that only adds unit dims is an expand_dims: the load is a block of rows between bounds, with
    no tile of offsets or of mask bytes."""
    c = _c(reshaped_offsets_kernel, _RESHAPED_SIG, {"BM": 8, "BN": 16})
    assert not re.findall(r"tensor<[0-9x]+xi(1|32|64)>", c)
    assert "rv_clamp64(" in c and not re.search(r"\? \*", c)


# ---- differential ------------------------------------------------------------------------------------------


def _launches() -> dict[str, KernelCall]:
    rng = np.random.default_rng(7)
    out: dict[str, KernelCall] = {}
    big = rng.standard_normal((40, 60)).astype(np.float32)
    bm, bn = 8, 16
    m, n = 19, 27  # ragged: partial tiles on both axes
    grid = (-(-m // bm), -(-n // bn))
    dst = np.zeros((grid[0] * bm, grid[1] * bn), np.float32)
    cases = {
        "contiguous": (big, m, n, 60, 1, 0, n),
        "strided": (big, m, n // 2, 60, 2, 0, n),  # every second column
        "transposed": (big, m, n, 1, 60, 0, n),  # src read as its transpose
        "ragged_lo_hi": (big, m, n, 60, 1, 5, 20),  # 5 <= col <= 20
    }
    for name, (src, mm, nn, sm, sn, lo, hi) in cases.items():
        out[name] = KernelCall(block_copy_kernel, _BLOCK_SIG, {"BM": bm, "BN": bn},
                               [src.copy(), dst.copy(), mm, nn, sm, sn, lo, hi], grid)
    M, N, K = 21, 18, 37
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    out["loop_dot"] = KernelCall(loop_dot_kernel, _LOOP_SIG, {"BM": 16, "BN": 16, "BK": 16},
                                 [a, b, np.zeros((M, N), np.float32), M, N, K], (2, 2))
    src = rng.standard_normal(50).astype(np.float32)
    idx = rng.integers(0, 50, 16).astype(np.int32)
    out["indirect"] = KernelCall(indirect_kernel, _INDIRECT_SIG, {"BLOCK": 16},
                                 [src, idx, np.zeros(16, np.float32), 11], (1,))
    rows = np.array([3, 0, 39, 7, 50, 12, 99, 1], np.int32)  # 50 and 99 are past n_rows: masked rows
    out["indirect_rows"] = KernelCall(rows_kernel, _ROWS_SIG, {"BM": 8, "BN": 16},
                                      [big, rows, np.zeros((8, 16), np.float32), 40, 13, 60], (1,))
    out["reshaped_offsets"] = KernelCall(reshaped_offsets_kernel, _RESHAPED_SIG, {"BM": 8, "BN": 16},
                                         [big, np.zeros((24, 16), np.float32), 19, 13, 60], (3,))
    return out


LAUNCHES = _launches()


@pytest.fixture(scope="module")
def expected() -> dict[str, list[np.ndarray]]:
    return dict(zip(LAUNCHES, run_interpreter_many(list(LAUNCHES.values())), strict=True))


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_structured_loads_match_interpreter(isa: str, expected) -> None:
    got = dict(zip(LAUNCHES, run_c_kernels(list(LAUNCHES.values()), isa), strict=True))
    for name in LAUNCHES:
        assert_match(got[name], expected[name], what=f"{name} on {isa}", rtol=1e-4, atol=1e-5)
