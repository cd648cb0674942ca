"""Vector code paths of the lowering (issue 17): row reductions as one rv_reduce_* call per row (vfredusum /
vfredmax ... on RVV), tile fills without libc calls, and the register tiles of rv_dot_f32 for every panel width
and row remainder. Differential against Triton's interpreter on the host and under QEMU."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, lower_kernel, run_and_match, run_interpreter_many

from pytest_rvtune.compiler.lower import RUNTIME_DIR
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _min_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _and(a, b):
    return a & b


@triton.jit
def _xor(a, b):
    return a ^ b


@triton.jit
def float_rows_kernel(x_ptr, y_ptr, out_ptr, total_ptr, BM: tl.constexpr, BN: tl.constexpr):
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    y = tl.load(y_ptr + rm[:, None] * BN + rn[None, :])  # rows with NaN: only for the NaN-propagating ones
    tl.store(out_ptr + 0 * BM + rm, tl.sum(x, 1))
    tl.store(out_ptr + 1 * BM + rm, tl.max(x, 1))
    tl.store(out_ptr + 2 * BM + rm, tl.min(x, 1))
    tl.store(out_ptr + 3 * BM + rm, tl.reduce(y, 1, _max_nan))
    tl.store(out_ptr + 4 * BM + rm, tl.reduce(y, 1, _min_nan))
    tl.store(out_ptr + 5 * BM + rm, tl.sum(tl.exp(x * 0.25), 1))  # a fused chain feeding the reduction
    tl.store(total_ptr, tl.sum(tl.load(x_ptr + rn), 0))  # a 1-D tile to a scalar


@triton.jit
def int_rows_kernel(x_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    u = x.to(tl.uint32, bitcast=True)
    tl.store(out_ptr + 0 * BM + rm, tl.sum(x, 1))  # wraps
    tl.store(out_ptr + 1 * BM + rm, tl.max(x, 1))
    tl.store(out_ptr + 2 * BM + rm, tl.min(x, 1))
    tl.store(out_ptr + 3 * BM + rm, tl.max(u, 1).to(tl.int32, bitcast=True))
    tl.store(out_ptr + 4 * BM + rm, tl.min(u, 1).to(tl.int32, bitcast=True))
    tl.store(out_ptr + 5 * BM + rm, tl.reduce(x, 1, _and))
    tl.store(out_ptr + 6 * BM + rm, tl.reduce(x, 1, _xor))


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    acc = tl.dot(a, b, acc, input_precision="ieee")
    acc = tl.dot(tl.trans(b), tl.trans(a), tl.trans(acc), input_precision="ieee")  # strided A, copied B
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.trans(acc))


@triton.jit
def masked_fill_kernel(x_ptr, out_ptr, n, BM: tl.constexpr, BN: tl.constexpr):
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    mask = (rm[:, None] < n) & (rn[None, :] < n)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :], mask=mask, other=-3.5)
    acc = tl.zeros([BM, BN], tl.float32) + x
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def masked_dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_bk, stride_bn,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")  # B read in place when its block is whole
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def overwritten_b_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    tl.store(b_ptr + r[:, None] * B + r[None, :], a)  # B's memory changes before the dot: the tile must be used
    tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, b, input_precision="ieee"))


_F_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "total_ptr": "*fp32"}
_I_SIG = {"x_ptr": "*i32", "out_ptr": "*i32"}
_DOT_SIG = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"}
_FILL_SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
_MASKED_DOT_SIG = {**_DOT_SIG, "M": "i32", "N": "i32", "K": "i32", "stride_bk": "i32", "stride_bn": "i32"}
#: (M, N, K): every RVV panel width (64, 32, 16, 8 columns), several of them in one N, and row counts that
#: leave remainders for the 3-, 6- and 8-row tiles
DOT_SHAPES = [(64, 128, 16), (32, 32, 8), (16, 16, 32), (8, 8, 4), (4, 64, 2), (32, 8, 16), (2, 16, 8)]


def _float_rows(bm: int, bn: int, rng: np.random.Generator) -> KernelCall:
    x = (rng.standard_normal((bm, bn)) * 3).astype(np.float32)
    x[0] = -0.0  # a row of -0.0 sums to -0.0
    x[-1, ::3] = np.inf
    y = x.copy()
    y[0, bn // 2] = np.nan
    return KernelCall(float_rows_kernel, _F_SIG, {"BM": bm, "BN": bn},
                      [x, y, np.zeros(6 * bm, np.float32), np.zeros(1, np.float32)], (1,))


def _int_rows(bm: int, bn: int, rng: np.random.Generator) -> KernelCall:
    x = rng.integers(-2**31, 2**31, (bm, bn), dtype=np.int64).astype(np.int32)
    return KernelCall(int_rows_kernel, _I_SIG, {"BM": bm, "BN": bn}, [x, np.zeros(7 * bm, np.int32)], (1,))


@pytest.fixture(scope="module")
def launches() -> dict[str, KernelCall]:
    rng = np.random.default_rng(17)
    calls = {f"float rows {bm}x{bn}": _float_rows(bm, bn, rng) for bm, bn in ((4, 256), (2, 8), (8, 2))}
    calls |= {f"int rows {bm}x{bn}": _int_rows(bm, bn, rng) for bm, bn in ((4, 256), (2, 16))}
    for m, n, k in DOT_SHAPES:
        args = [rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32),
                rng.standard_normal((m, n)).astype(np.float32)]
        calls[f"dot {m}x{n}x{k}"] = KernelCall(dot_kernel, _DOT_SIG, {"M": m, "N": n, "K": k}, args, (1,))
    m_, n_, k_ = 40, 72, 48  # 16 x 32 x 16 blocks: whole ones (B read in place) and ragged ones (copied)
    for layout in ("row-major", "transposed"):
        a = rng.standard_normal((m_, k_)).astype(np.float32)
        b = rng.standard_normal((k_, n_)).astype(np.float32)
        b_mem, strides = (b, (n_, 1)) if layout == "row-major" else (np.ascontiguousarray(b.T), (1, k_))
        calls[f"masked dot, B {layout}"] = KernelCall(
            masked_dot_kernel, _MASKED_DOT_SIG, {"BM": 16, "BN": 32, "BK": 16},
            [a, b_mem, np.zeros((m_, n_), np.float32), m_, n_, k_, *strides], (3, 3))
    calls["overwritten B"] = KernelCall(overwritten_b_kernel, _DOT_SIG, {"B": 16},
                                        [rng.standard_normal((16, 16)).astype(np.float32),
                                         rng.standard_normal((16, 16)).astype(np.float32),
                                         np.zeros((16, 16), np.float32)], (1,))
    for n in (0, 5, 16):
        calls[f"masked fill n={n}"] = KernelCall(masked_fill_kernel, _FILL_SIG, {"BM": 16, "BN": 16},
                                                 [rng.standard_normal((16, 16)).astype(np.float32),
                                                  np.zeros((16, 16), np.float32), n], (1,))
    return calls


@pytest.fixture(scope="module")
def expected(launches) -> list:
    return run_interpreter_many(list(launches.values()))


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_vector_paths_match_interpreter(isa: str, launches, expected) -> None:
    got = run_and_match(launches, expected, isa, rtol=2e-5, atol=1e-4)
    for name, g in zip(launches, got, strict=True):
        if name.startswith("float rows"):  # the sum of a row of -0.0 keeps its sign
            assert np.signbit(g[2][0]), f"{name} on {isa}: sum of -0.0 gave +0.0"


def test_reductions_are_one_helper_call_per_row() -> None:
    c = lower_kernel(float_rows_kernel, _F_SIG, {"BM": 4, "BN": 256}).c_source
    for helper in ("sum_f32", "maxnum_f32", "minnum_f32", "maximum_f32", "minimum_f32"):
        assert re.search(rf"\w+\[r0_\] = rv_reduce_{helper}\(&\w+\[r0_ \* 256\], 256\);", c), helper
    assert re.search(r"float \w+ = rv_reduce_sum_f32\(\w+, 256\);", c)  # the 1-D tile: a scalar
    assert "s_ >>= 1" not in c  # no halving tree left
    c = lower_kernel(int_rows_kernel, _I_SIG, {"BM": 4, "BN": 256}).c_source
    for helper in ("sum", "maxsi", "minsi", "maxui", "minui", "and", "xor"):
        assert f"rv_reduce_{helper}_i32(" in c, helper


def test_dot_reads_b_in_place_only_when_nothing_writes_it_first() -> None:
    c = lower_kernel(masked_dot_kernel, _MASKED_DOT_SIG, {"BM": 16, "BN": 32, "BK": 16}).c_source
    flag = re.search(r"const int (in_place\w*) = .*\(\(int64_t\)stride_bn\) == 1\);", c)
    assert flag, "no run-time in-place condition for B"
    assert f"if (!{flag.group(1)})" in c  # the copy is skipped then
    assert re.search(rf"rv_dot_f32_part\(16, 32, 16, .*, a_\w+, 16, 1, \({flag.group(1)} \? \(*b_ptr .* : b_\w+\), "
                     rf"\({flag.group(1)} \? \(\(int64_t\)stride_bk\) : 32\), ", c)
    # a whole A block (and a whole B block read through strides) is copied by one rv_copy_rows call
    assert re.search(r"rv_copy_rows_e32\(a_\w+, 16, .*, 16, 16\);", c)
    assert re.search(r"rv_copy_rows_e32\(b_\w+, 32, .*, 16, 32\);", c)
    c = lower_kernel(overwritten_b_kernel, _DOT_SIG, {"B": 16}).c_source
    assert "in_place" not in c


def test_kernels_call_no_libc_for_tiles(tmp_path) -> None:
    """Tile fills and copies are inline vector code on RVV: no memset / memcpy left for the linker."""
    tc = Toolchain.for_isa(RISCV_ISA)
    for name, (fn, sig, consts) in {"fill": (masked_fill_kernel, _FILL_SIG, {"BM": 64, "BN": 64}),
                                    "dot": (dot_kernel, _DOT_SIG, {"M": 64, "N": 64, "K": 64})}.items():
        c = lower_kernel(fn, sig, consts).c_source
        assert "rv_fill_f32(" in c or name == "dot"
        src, obj = tmp_path / f"{name}.c", tmp_path / f"{name}.o"
        src.write_text(c)
        tc.compile(src, obj, extra=("-I", str(RUNTIME_DIR)))
        nm = shutil.which("llvm-nm-19") or shutil.which("llvm-nm")
        assert nm, "llvm-nm (LLVM 19) is needed to list the object's undefined symbols"
        undefined = subprocess.run([nm, "-u", str(obj)], capture_output=True, text=True, check=True).stdout
        assert not re.search(r"\bmem(set|cpy|move)\b", undefined), f"{name}: {undefined}"



def test_vector_exp_runs_at_lmul8_without_spills(tmp_path) -> None:
    """rv_exp_f32 (rvtune_exp.h): its loop at LMUL 8 (64 floats per step at VLEN 256), no vector register
    spilled or reloaded (whole-register vs<n>r / vl<n>r), the full-range path a separate function."""
    tc = Toolchain.for_isa(RISCV_ISA)
    src, obj = tmp_path / "exp.c", tmp_path / "exp.o"
    src.write_text('#include "rvtune_rt.h"\n#include "rvtune_dot.h"\n'
                   "void exp_rows(float *o, const float *i, long n) { rv_exp_f32(o, i, n); }\n")
    tc.compile(src, obj, extra=("-I", str(RUNTIME_DIR)))
    asm = tc.disassemble(obj)
    start = asm.index("<exp_rows>:")
    end = re.compile(r"^[0-9a-f]+ <[^.>][^>]*>:", re.M).search(asm, start + 1)
    body = asm[start:end.start() if end else len(asm)]
    assert "e32, m8" in body, body
    assert not re.search(r"\bv[sl]\dr(e\d+)?\.v\b", body), body
    assert "rv_exp_f32_any" in asm  # the out-of-range chunks' path exists, outside the loop's registers
