"""Deferred loads (ptr_analysis.BlockLoad, fusion.deferred_load_ok): a block load whose only reader is an
element-wise chain is not copied into a tile; the chain's loop reads memory, without the mask's test where a
run-time check shows the block inside it (fusion.Expr.unmasked; a ``tl.where`` mask likewise). Never when a
store between the load and the chain could change what it reads. Differential checks against Triton's
interpreter on the host and under QEMU."""

from __future__ import annotations

import re

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, lower_kernel, run_and_match, run_interpreter_many

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA


@triton.jit
def row_stream_kernel(x_ptr, out_ptr, n_rows, n_cols, BM: tl.constexpr, BN: tl.constexpr):
    """softmax's first and last sweeps: a running max of masked loads, then each element scaled in place."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    offs = tl.arange(0, BN)
    row_ok = rows < n_rows
    acc = tl.full([BM, BN], float("-inf"), dtype=tl.float32)
    for start in range(0, n_cols, BN):
        cols = start + offs
        mask = row_ok[:, None] & (cols[None, :] < n_cols)
        acc = tl.maximum(acc, tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask,
                                      other=float("-inf")))
    m = tl.max(acc, 1)
    for start in range(0, n_cols, BN):
        cols = start + offs
        mask = row_ok[:, None] & (cols[None, :] < n_cols)
        ptrs = out_ptr + rows[:, None] * n_cols + cols[None, :]
        tl.store(ptrs, tl.load(ptrs, mask=mask, other=0.0) * 0.5 + m[:, None], mask=mask)  # in place


@triton.jit
def store_between_kernel(p_ptr, out_ptr, B: tl.constexpr):
    """x is read before p is overwritten: x's reader comes after the store, so x must be a tile."""
    r = tl.arange(0, B)
    x = tl.load(p_ptr + r)
    tl.store(p_ptr + r, x * 0.0 - 7.0)
    tl.store(out_ptr + r, x * 2.0 + 1.0)


@triton.jit
def shifted_in_place_kernel(p_ptr, B: tl.constexpr):
    """Written one element further on than read: element q + 1 is read after element q is written, unless x
    is read whole first (a tile)."""
    r = tl.arange(0, B)
    x = tl.load(p_ptr + r)
    tl.store(p_ptr + 1 + r, x * 2.0 + 1.0)


@triton.jit
def interior_kernel(a_ptr, b_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """jacobi's shape: a rectangle mask chooses between two values of a chain stored to another array."""
    i = (tl.program_id(0) * BM + tl.arange(0, BM))[:, None]
    j = (tl.program_id(1) * BN + tl.arange(0, BN))[None, :]
    inside = (i < M) & (j < N)
    interior = (i > 0) & (i < M - 1) & (j > 0) & (j < N - 1)
    center = a_ptr + i * N + j
    up = tl.load(center - N, mask=interior, other=0.0)
    left = tl.load(center - 1, mask=interior, other=0.0)
    old = tl.load(center, mask=inside, other=0.0)
    tl.store(b_ptr + i * N + j, tl.where(interior, 0.5 * (up + left), old), mask=inside)


@triton.jit
def in_place_rows_kernel(p_ptr, stride, BM: tl.constexpr, BN: tl.constexpr):
    """store(p, load(p) * s + 1) through rows of a run-time stride: stride 0 makes every row the same memory, so
    the rows must be read whole before the first is written (the run-time test of ptr_analysis._one_to_one)."""
    ptrs = p_ptr + tl.arange(0, BM)[:, None] * stride + tl.arange(0, BN)[None, :]
    tl.store(ptrs, tl.load(ptrs) * 0.5 + 1.0)


_STREAM_SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32"}


def test_a_load_read_by_one_chain_is_read_in_its_loop_without_the_mask_where_the_block_is_inside() -> None:
    c = lower_kernel(row_stream_kernel, _STREAM_SIG, {"BM": 4, "BN": 64}).c_source
    assert c.count("a deferred load") == 2, c  # both loads: no tile, no copy-in
    # the only copy-in left: the in-place update's rows read whole where a run-time row stride might alias them
    assert c.count("rv_copy_rows_e32") == 1 and "load x" not in c
    # the max's loop reads x_ptr itself: once plainly (the block inside the mask, tested once), once masked
    reads = re.findall(r"acc_\w+\[p0_ \* 64 \+ p1_\] = fmaxf\(acc_\w+\[p0_ \* 64 \+ p1_\], (.*)\);", c)
    assert len(reads) == 2, c
    plain, masked = reads
    assert "x_ptr" in plain and "?" not in plain
    assert "x_ptr" in masked and re.search(r"\(p1_ < mask_at\w*\)\) \?", masked)
    assert re.search(r"if \(\(\(mask_at\w* >= 4\) && \(mask_at\w* >= 64\)\)\)", c)


def test_a_where_mask_all_true_on_interior_tiles_is_no_test_there() -> None:
    c = lower_kernel(interior_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "M": "i32", "N": "i32"},
                     {"BM": 8, "BN": 64}).c_source
    stores = re.findall(r"row_\[q_\] = (.*);", c)
    # the store's chain twice (for interior tiles, and for the others) where a and b are apart, as the run-time
    # test says; where they might meet, twice more reading a's block whole first
    assert len(stores) == 4, c
    assert re.search(r"if \(rv_disjoint\(\(+a_ptr .*\(b_ptr .* && rv_disjoint\(\(+a_ptr .*\(b_ptr ", c), c
    plain, tested = stores[:2]
    assert "?" not in plain and "0x1.0000000000000p-1f" in plain  # 0.5 * (up + left), no select
    assert "?" in tested and "0x1.0000000000000p-1f" in tested
    assert "a_ptr" in plain and "a_ptr" not in stores[2]  # read in the store's loop / from the tile


def test_an_in_place_update_reads_rows_whole_first_unless_they_cannot_share_an_address() -> None:
    c = lower_kernel(in_place_rows_kernel, {"p_ptr": "*fp32", "stride": "i32"}, {"BM": 4, "BN": 64}).c_source
    assert c.count("a deferred load") == 1
    assert re.search(r"if \(\(\(int64_t\)\(\(\(int64_t\)stride\)\) > 63 \|\| .* < -63\)\)", c), c
    assert re.search(r"\*load_\w* = \(rv_float \*\)", c)  # the other branch: the rows read into a tile first


def test_a_load_is_a_tile_when_a_store_could_change_what_its_chain_reads() -> None:
    c = lower_kernel(store_between_kernel, {"p_ptr": "*fp32", "out_ptr": "*fp32"}, {"B": 256}).c_source
    assert "a deferred load" not in c
    # stored through another pointer block: read in the store's loop only where the blocks do not meet (here they
    # do: the launch below takes the other branch, x read whole first)
    c = lower_kernel(shifted_in_place_kernel, {"p_ptr": "*fp32"}, {"B": 256}).c_source
    assert c.count("a deferred load") == 1
    assert re.search(r"if \(rv_disjoint\(p_ptr, 0, 1024, \w+, 0, 1024\)\)", c), c
    assert re.search(r"else \{\s+rv_float \*load_\w* = \(rv_float \*\)", c), c


@pytest.fixture(scope="module")
def launches() -> dict[str, KernelCall]:
    rng = np.random.default_rng(17)
    f32 = np.float32
    out: dict[str, KernelCall] = {}
    for bn in (32, 64):  # a row shorter than a 64-lane vector (RV_VECTORIZE_FUSED_ROW), and a whole one
        rows, cols = 11, 3 * bn + 5  # a ragged last row block and column step
        x = (rng.standard_normal((rows, cols)) * 4).astype(f32)
        out[f"row_stream_{bn}"] = KernelCall(row_stream_kernel, _STREAM_SIG, {"BM": 4, "BN": bn},
                                             [x, rng.standard_normal((rows, cols)).astype(f32), rows, cols],
                                             (triton.cdiv(rows, 4),))
    m, n = 19, 150  # ragged in both directions: border, interior and tail tiles
    out["interior"] = KernelCall(interior_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "M": "i32", "N": "i32"},
                                 {"BM": 8, "BN": 64}, [rng.standard_normal((m, n)).astype(f32),
                                                       np.zeros((m, n), f32), m, n],
                                 (triton.cdiv(m, 8), triton.cdiv(n, 64)))
    for stride in (0, 64):
        out[f"in_place_rows_stride_{stride}"] = KernelCall(
            in_place_rows_kernel, {"p_ptr": "*fp32", "stride": "i32"}, {"BM": 4, "BN": 64},
            [rng.standard_normal(4 * 64).astype(f32), stride], (1,))
    p = rng.standard_normal(257).astype(f32)
    out["store_between"] = KernelCall(store_between_kernel, {"p_ptr": "*fp32", "out_ptr": "*fp32"}, {"B": 256},
                                      [p[:256].copy(), np.zeros(256, f32)], (1,))
    out["shifted_in_place"] = KernelCall(shifted_in_place_kernel, {"p_ptr": "*fp32"}, {"B": 256}, [p.copy()], (1,))
    return out


@pytest.fixture(scope="module")
def expected(launches) -> list:
    return run_interpreter_many(list(launches.values()))


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_deferred_loads_match_interpreter(isa: str, launches, expected) -> None:
    run_and_match(launches, expected, isa, rtol=1e-6, atol=1e-6)
