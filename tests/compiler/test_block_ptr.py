"""Block pointers (compiler/block_ptr.py), tensor descriptors and tl.debug_barrier through the real Triton
3.9 frontend, our lowering and clang, natively and as rv64gcv ELFs under QEMU, against numpy references.

The kernels have the shapes the Triton_RVV benchmark kernels use (our own code): a matmul whose block
pointers are chosen under a constexpr ``USE_BLOCK_POINTERS`` and advanced inside the K loop, a five-point
stencil built with negative ``tl.advance`` steps, ragged tiles with ``boundary_check`` and both padding
options (offsets below zero included), a 4-D block pointer with non-default ``order`` and
``tl.trans(x, (0, 1, 3, 2))``, a load/store that checks one dimension only (the other reads and writes
past ``shape``, as Triton's unmasked block-pointer accesses do), a block pointer carried through a runtime
``if`` and a ``while``, a tensor-descriptor loop with a ragged store, and a ``tl.debug_barrier``. The
interpreter of Triton 3.9 refuses block pointers: numpy is the oracle.
"""

from __future__ import annotations

import inspect
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, assert_match, run_c_kernels

from pytest_rvtune.compiler import api
from pytest_rvtune.compiler.frontend import FrontendError, kernel_to_ttir
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout these tests belong to

# ---- kernels -------------------------------------------------------------------------------------------


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, USE_BLOCK_POINTERS: tl.constexpr,
                  CHECK: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BN)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    if USE_BLOCK_POINTERS:
        a_tile = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                                   offsets=(pid_m * BM, 0), block_shape=(BM, BK), order=(1, 0))
        b_tile = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(stride_bk, stride_bn),
                                   offsets=(0, pid_n * BN), block_shape=(BK, BN), order=(1, 0))
    else:
        offs_k = tl.arange(0, BK)
        a_tile = a_ptr + (pid_m * BM + tl.arange(0, BM))[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_tile = b_ptr + offs_k[:, None] * stride_bk + (pid_n * BN + tl.arange(0, BN))[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _k in range(0, tl.cdiv(K, BK)):
        if CHECK:
            a = tl.load(a_tile, boundary_check=(0, 1), padding_option="zero")
            b = tl.load(b_tile, boundary_check=(0, 1))
        else:
            a = tl.load(a_tile)
            b = tl.load(b_tile)
        acc = tl.dot(a, b, acc, out_dtype=tl.float32)
        if USE_BLOCK_POINTERS:
            a_tile = tl.advance(a_tile, [0, BK])
            b_tile = b_tile.advance((BK, 0))
        else:
            a_tile += BK * stride_ak
            b_tile += BK * stride_bk
    if USE_BLOCK_POINTERS:
        c_tile = tl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(stride_cm, stride_cn),
                                   offsets=(pid_m * BM, pid_n * BN), block_shape=(BM, BN), order=(1, 0))
        if CHECK:
            tl.store(c_tile, acc, boundary_check=(0, 1))
        else:
            tl.store(c_tile, acc)
    else:
        c_tile = c_ptr + (pid_m * BM + tl.arange(0, BM))[:, None] * stride_cm \
            + (pid_n * BN + tl.arange(0, BN))[None, :] * stride_cn
        tl.store(c_tile, acc)


@triton.jit
def _tile(p, CHECK: tl.constexpr):
    """A block pointer passed to a callee (mangled and flattened like any value)."""
    if CHECK:
        return tl.load(p, boundary_check=(0, 1))
    else:
        return tl.load(p)


@triton.jit
def stencil_kernel(a_ptr, b_ptr, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr,
                   CHECK: tl.constexpr):
    """b[1:M-1, 1:N-1] = 0.2 * (up + mid + down + left + right), one block of the interior per program."""
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N - 2, BN)
    off_m = (pid // num_pid_n) * BM
    off_n = (pid % num_pid_n) * BN
    up = tl.make_block_ptr(base=a_ptr, shape=(M, N), strides=(stride_m, stride_n), offsets=(off_m, off_n + 1),
                           block_shape=(BM, BN), order=(1, 0))
    mid = tl.advance(up, (1, 0))
    down = tl.advance(mid, (1, 0))
    left = tl.advance(mid, (0, -1))
    right = tl.advance(mid, (0, 1))
    acc = _tile(up, CHECK) + _tile(mid, CHECK) + _tile(down, CHECK) + _tile(left, CHECK) + _tile(right, CHECK)
    out = tl.make_block_ptr(base=b_ptr, shape=(M - 1, N - 1), strides=(stride_m, stride_n),
                            offsets=(off_m + 1, off_n + 1), block_shape=(BM, BN), order=(1, 0))
    if CHECK:
        tl.store(out, 0.2 * acc, boundary_check=(0, 1))
    else:
        tl.store(out, 0.2 * acc)


@triton.jit
def pad_kernel(x_ptr, o_ptr, M, N, stride_m, stride_n, SHIFT_M: tl.constexpr, SHIFT_N: tl.constexpr,
               BM: tl.constexpr, BN: tl.constexpr, PAD: tl.constexpr):
    """o's tile (pm, pn) = x's block at (pm * BM - SHIFT_M, pn * BN - SHIFT_N), padded outside x."""
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    src = tl.make_block_ptr(x_ptr, (M, N), (stride_m, stride_n), (pm * BM - SHIFT_M, pn * BN - SHIFT_N),
                            (BM, BN), (1, 0))
    v = tl.load(src, boundary_check=(1, 0), padding_option=PAD)
    width = tl.num_programs(1) * BN
    dst = tl.make_block_ptr(o_ptr, (tl.num_programs(0) * BM, width), (width, 1), (pm * BM, pn * BN), (BM, BN),
                            (1, 0))
    tl.store(dst, v)


@triton.jit
def one_dim_check_kernel(x_ptr, o_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr):
    """Rows are checked against M; columns are not, so those past N (inside the row stride) are copied."""
    pm = tl.program_id(0)
    src = tl.make_block_ptr(x_ptr, (M, N), (stride_m, 1), (pm * BM, 0), (BM, BN), (1, 0))
    v = tl.load(src, boundary_check=(0,), padding_option="nan")
    dst = tl.make_block_ptr(o_ptr, (M, N), (stride_m, 1), (pm * BM, 0), (BM, BN), (0, 1))
    tl.store(dst, v + 1, boundary_check=0)  # one int names one dimension


@triton.jit
def transpose4d_kernel(k_ptr, o_ptr, Z, H, NC, D, s_z, s_h, s_n, s_d, t_z, t_h, t_d, t_n,
                       BM: tl.constexpr, BD: tl.constexpr):
    """o[z, h] = 2 * k[z, h].T over ragged (NC, D), one (BM x BD) block per program, 4-D block pointers."""
    pid = tl.program_id(0)
    zh = tl.program_id(1)
    z = zh // H
    h = zh % H
    src = tl.make_block_ptr(base=k_ptr, shape=(Z, H, NC, D), strides=(s_z, s_h, s_n, s_d),
                            offsets=(z, h, pid * BM, 0), block_shape=(1, 1, BM, BD), order=(2, 3, 0, 1))
    block = tl.load(src, boundary_check=(2, 3))
    dst = tl.make_block_ptr(base=o_ptr, shape=(Z, H, D, NC), strides=(t_z, t_h, t_d, t_n),
                            offsets=(z, h, 0, pid * BM), block_shape=(1, 1, BD, BM), order=(3, 2, 1, 0))
    tl.store(dst, tl.trans(block, (0, 1, 3, 2)) * 2, boundary_check=(3, 2))


@triton.jit
def descriptor_kernel(x_ptr, o_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """o[i, BN + c] = sum_j x[i - 1, j * BN + c] (zero outside x), the store masked to (M, N)."""
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(o_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    m = tl.program_id(0) * BM
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for j in range(0, tl.cdiv(N, BN)):
        acc += src.load([m - 1, j * BN])
    dst.store([m, BN], acc)


@triton.jit
def descriptor_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ B through tensor descriptors (Triton's descriptor matmuls): loads padded with zeros past (M, K)
    and (K, N), the store masked to (M, N)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BN)
    pid_n = pid % tl.cdiv(N, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([pid_m * BM, k * BK]), b_desc.load([k * BK, pid_n * BN]), acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc)


@triton.jit
def control_flow_kernel(x_ptr, o_ptr, M, steps, B: tl.constexpr):
    """A block pointer reassigned under a runtime ``if`` and carried through a ``while``."""
    p = tl.make_block_ptr(x_ptr, (M,), (1,), (0,), (B,), (0,))
    if steps > 0:
        p = tl.advance(p, (B,))
    i = 0
    while i < steps:
        p = p.advance([1])
        i += 1
    tl.store(o_ptr + tl.arange(0, B), tl.load(p, boundary_check=(0,), padding_option="nan"))


@triton.jit
def barrier_kernel(x_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs) * 2)
    tl.debug_barrier()
    tl.store(o_ptr + BLOCK + offs, tl.load(o_ptr + BLOCK - 1 - offs) + 1)


# ---- launches and numpy references ----------------------------------------------------------------------

F32 = np.float32
rng = np.random.default_rng(14)


def _matmul(m: int, n: int, k: int, bm: int, bn: int, bk: int, block_pointers: bool, check: bool):
    a = rng.standard_normal((m, k)).astype(F32)
    b = rng.standard_normal((k, n)).astype(F32)
    c = np.full((m, n), -3.0, F32)
    sig = {p: "*fp32" for p in ("a_ptr", "b_ptr", "c_ptr")} | {
        p: "i32" for p in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")}
    consts = {"BM": bm, "BN": bn, "BK": bk, "USE_BLOCK_POINTERS": block_pointers, "CHECK": check}
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    call = KernelCall(matmul_kernel, sig, consts, [a, b, c, m, n, k, k, 1, n, 1, n, 1], grid)
    return call, [a, b, (a.astype(np.float64) @ b).astype(F32)], {"rtol": 1e-4, "atol": 1e-4}


def _stencil(m: int, n: int, bm: int, bn: int, check: bool):
    a = rng.standard_normal((m, n)).astype(F32)
    b = np.full((m, n), 7.0, F32)  # the border must stay untouched
    want = b.copy()
    want[1:-1, 1:-1] = 0.2 * (a[:-2, 1:-1] + a[1:-1, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "M": "i32", "N": "i32", "stride_m": "i32", "stride_n": "i32"}
    grid = (triton.cdiv(m - 2, bm) * triton.cdiv(n - 2, bn),)
    call = KernelCall(stencil_kernel, sig, {"BM": bm, "BN": bn, "CHECK": check}, [a, b, m, n, n, 1], grid)
    return call, [a, want], {"rtol": 1e-5, "atol": 1e-5}


def _pad(m: int, n: int, shift_m: int, shift_n: int, bm: int, bn: int, pad: str):
    x = rng.standard_normal((m, n)).astype(F32)
    gm, gn = triton.cdiv(m + shift_m, bm), triton.cdiv(n + shift_n, bn)
    want = np.full((gm * bm, gn * bn), np.nan if pad == "nan" else 0.0, F32)
    rows = slice(shift_m, min(shift_m + m, gm * bm))
    cols = slice(shift_n, min(shift_n + n, gn * bn))
    want[rows, cols] = x[:rows.stop - rows.start, :cols.stop - cols.start]
    sig = {"x_ptr": "*fp32", "o_ptr": "*fp32", "M": "i32", "N": "i32", "stride_m": "i32", "stride_n": "i32"}
    consts = {"SHIFT_M": shift_m, "SHIFT_N": shift_n, "BM": bm, "BN": bn, "PAD": pad}
    call = KernelCall(pad_kernel, sig, consts, [x, np.full_like(want, 5.0), m, n, n, 1], (gm, gn))
    return call, [x, want], {"rtol": 0, "atol": 0}


def _one_dim_check(m: int, n: int, bm: int, bn: int):
    rows = triton.cdiv(m, bm) * bm
    x = rng.standard_normal((rows, bn)).astype(F32)  # row stride bn > n: columns n.. are real memory
    want = np.full((rows, bn), -7.0, F32)
    want[:m] = x[:m] + 1
    sig = {"x_ptr": "*fp32", "o_ptr": "*fp32", "M": "i32", "N": "i32", "stride_m": "i32"}
    call = KernelCall(one_dim_check_kernel, sig, {"BM": bm, "BN": bn}, [x, np.full_like(want, -7.0), m, n, bn],
                      (rows // bm,))
    return call, [x, want], {"rtol": 0, "atol": 0}


def _transpose4d(z: int, h: int, nc: int, d: int, bm: int, bd: int):
    k = rng.standard_normal((z, h, nc, d)).astype(F32)
    o = np.zeros((z, h, d, nc), F32)
    sig = {"k_ptr": "*fp32", "o_ptr": "*fp32"} | {p: "i32" for p in (
        "Z", "H", "NC", "D", "s_z", "s_h", "s_n", "s_d", "t_z", "t_h", "t_d", "t_n")}
    strides_k = [s // 4 for s in k.strides]
    strides_o = [s // 4 for s in o.strides]
    call = KernelCall(transpose4d_kernel, sig, {"BM": bm, "BD": bd}, [k, o, z, h, nc, d, *strides_k, *strides_o],
                      (triton.cdiv(nc, bm), z * h))
    return call, [k, 2 * k.transpose(0, 1, 3, 2)], {"rtol": 0, "atol": 0}


def _descriptor(m: int, n: int, bm: int, bn: int):
    x = rng.standard_normal((m, n)).astype(F32)
    shifted = np.zeros((m, triton.cdiv(n, bn) * bn), F32)
    shifted[1:, :n] = x[:-1]
    want = np.full((m, n), 9.0, F32)
    tiles = shifted.reshape(m, -1, bn).sum(axis=1)
    want[:, bn:] = tiles[:, :n - bn]
    sig = {"x_ptr": "*fp32", "o_ptr": "*fp32", "M": "i32", "N": "i32"}
    call = KernelCall(descriptor_kernel, sig, {"BM": bm, "BN": bn}, [x, np.full_like(x, 9.0), m, n],
                      (triton.cdiv(m, bm),))
    return call, [x, want], {"rtol": 1e-5, "atol": 1e-5}


def _descriptor_matmul(ragged: tuple[KernelCall, list[np.ndarray], dict[str, float]]):
    """The descriptor matmul on the arrays and tiles of a ragged block-pointer matmul launch (its A, B and C)."""
    call, (a, b, want), tolerance = ragged
    m, n, k = call.args[3:6]
    sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
    consts = {"BM": call.constexprs["BM"], "BN": call.constexprs["BN"], "BK": call.constexprs["BK"]}
    args = [a, b, call.args[2].copy(), m, n, k]
    return KernelCall(descriptor_matmul_kernel, sig, consts, args, call.grid), [a, b, want], tolerance


def _control_flow(m: int, steps: int, block: int):
    x = rng.standard_normal(m).astype(F32)
    start = block + steps if steps > 0 else 0
    want = np.full(block, np.nan, F32)
    want[:max(0, min(block, m - start))] = x[start:start + block]
    call = KernelCall(control_flow_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32", "M": "i32", "steps": "i32"},
                      {"B": block}, [x, np.zeros(block, F32), m, steps], (1,))
    return call, [x, want], {"rtol": 0, "atol": 0}


def _barrier(block: int):
    x = rng.standard_normal(block).astype(F32)
    call = KernelCall(barrier_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32"}, {"BLOCK": block},
                      [x, np.zeros(2 * block, F32)], (1,))
    return call, [x, np.concatenate([2 * x, 2 * x[::-1] + 1])], {"rtol": 0, "atol": 0}


#: name -> (launch, numpy reference of every array after it, tolerance); rv64 runs the RV64 subset.
LAUNCHES = {
    "matmul_block_ptr": _matmul(16, 24, 32, 8, 8, 8, True, False),
    "matmul_plain_ptr": _matmul(16, 24, 32, 8, 8, 8, False, False),
    "matmul_block_ptr_big_tiles": _matmul(64, 32, 64, 32, 16, 32, True, False),
    "matmul_ragged": _matmul(13, 10, 19, 8, 8, 8, True, True),
    "matmul_ragged_small_tiles": _matmul(29, 21, 37, 4, 8, 16, True, True),
    "stencil_exact": _stencil(18, 34, 8, 16, False),
    "stencil_ragged": _stencil(13, 21, 4, 8, True),
    "pad_zero": _pad(13, 10, 1, 2, 4, 8, "zero"),
    "pad_nan": _pad(13, 10, 1, 2, 4, 8, "nan"),
    "pad_default": _pad(7, 19, 3, 0, 8, 4, ""),
    "one_dim_check": _one_dim_check(13, 5, 4, 8),
    "transpose4d": _transpose4d(2, 3, 11, 6, 4, 8),
    "descriptor": _descriptor(10, 13, 4, 8),
    "control_flow_none": _control_flow(12, 0, 8),
    "control_flow_steps": _control_flow(12, 3, 8),
    "debug_barrier": _barrier(8),
}
LAUNCHES["matmul_descriptor"] = _descriptor_matmul(LAUNCHES["matmul_ragged_small_tiles"])
RV64 = ["matmul_block_ptr", "matmul_ragged", "matmul_ragged_small_tiles", "stencil_ragged", "pad_nan", "one_dim_check",
        "transpose4d", "descriptor", "matmul_descriptor", "control_flow_steps", "debug_barrier"]
CASES = [(HOST_ISA, name) for name in LAUNCHES] + [(RISCV_ISA, name) for name in RV64]


@pytest.fixture(scope="module")
def outputs() -> Callable[[str], dict[str, list[np.ndarray]]]:
    """ISA -> launch name -> arrays after the launch; every launch of an ISA in one C file, built on demand."""
    done: dict[str, dict[str, list[np.ndarray]]] = {}

    def get(isa: str) -> dict[str, list[np.ndarray]]:
        if isa not in done:
            names = list(LAUNCHES) if isa == HOST_ISA else RV64
            runs = run_c_kernels([LAUNCHES[n][0] for n in names], isa)
            done[isa] = dict(zip(names, runs, strict=True))
        return done[isa]

    return get


@pytest.mark.parametrize(("isa", "name"), CASES, ids=[f"{i}-{n}" for i, n in CASES])
def test_matches_numpy(isa: str, name: str, outputs) -> None:
    _call, want, tolerance = LAUNCHES[name]
    assert_match(outputs(isa)[name], want, what=f"{name} on {isa}", **tolerance)


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_a_descriptor_matmul_gives_the_bits_of_the_block_pointer_matmul(isa: str, outputs) -> None:
    """The same A, B and tiles through descriptors and through block pointers with boundary checks: the same
    padded tiles reach the same dot, so every bit of C is the same."""
    got = outputs(isa)["matmul_descriptor"][2]
    want = outputs(isa)["matmul_ragged_small_tiles"][2]
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["descriptor", "matmul_descriptor"])
def test_descriptor_masks_are_loop_bounds(name: str) -> None:
    """Triton shapes a descriptor's offsets with tt.reshape ([BM] -> [BM, 1]); the pointer analysis keeps that
    symbolic, so ``0 <= offs < shape`` is a range of rows and columns, as for ``offs[:, None] < M``: no tile of
    offsets and no byte-mask tile (which made the host's clang spend 3-15 s unrolling and SLP-vectorising
    per-element tests on a 64x64 matmul config), and the in-bounds blocks are whole-row copies."""
    from pytest_rvtune.compiler.lower import lower_ttir

    call = LAUNCHES[name][0]
    c = lower_ttir(kernel_to_ttir(call.fn, call.signature, call.constexprs)).c_source
    assert not re.findall(r"tensor<[0-9x]+xi1>", c)  # no mask tile
    assert not re.findall(r"tensor<[0-9x]+xi64>", c)  # no offset tile
    assert "rv_copy_rows_e32(" in c or "a deferred load" in c


# ---- the frontend hook ------------------------------------------------------------------------------------


def _suite_kernel_calls() -> list[KernelCall]:
    """The kernels of kernels/*.py, each on its "small" case and first config (no block pointers in them)."""
    from pytest_rvtune.spec import load_kernel_module

    calls = []
    for path in sorted((REPO_ROOT / "kernels").glob("*.py")):
        spec = load_kernel_module(path)
        launch = spec.capture_launch("small", spec.configs[0])
        signature = {k: v for k, v in launch.signature.items() if v != "constexpr"}
        calls.append(KernelCall(spec.kernel, signature, dict(launch.constexprs), [], launch.grid))
    return calls


def test_kernels_without_block_pointers_trace_to_identical_ttir() -> None:
    """Every kernel of the op differential tests and of kernels/, and the pointer path of our matmul, gives
    byte-identical TTIR with and without the block-pointer module (ours calls Triton's load/store for plain
    pointers)."""
    import test_ops_diff

    calls = [call for call, _ in test_ops_diff.LAUNCHES.values()] + [LAUNCHES["matmul_plain_ptr"][0]]
    calls += _suite_kernel_calls()
    seen = set()
    for call in calls:
        key = (call.fn.__name__, repr(sorted(call.signature.items())), repr(sorted(call.constexprs.items())))
        if key in seen:
            continue
        seen.add(key)
        before = kernel_to_ttir(call.fn, call.signature, call.constexprs, block_pointers=False)
        assert kernel_to_ttir(call.fn, call.signature, call.constexprs) == before, call.fn.__name__
    assert len(seen) > 20


def test_block_pointer_kernels_need_the_module() -> None:
    """Triton 3.9 alone refuses them: the module is what makes the kernels above compile."""
    call = LAUNCHES["matmul_block_ptr"][0]
    with pytest.raises(FrontendError, match="Block pointers have been removed"):
        kernel_to_ttir(call.fn, call.signature, call.constexprs, block_pointers=False)


@pytest.mark.parametrize("name", [n for n in LAUNCHES if n not in ("matmul_plain_ptr", "debug_barrier")
                                  and not n.startswith("control_flow")])
def test_block_pointer_accesses_are_strided_blocks(name: str) -> None:
    """The pointer analysis sees every block-pointer (and descriptor) load/store as a strided block of
    rows between the mask's bounds, as the hand-written pointer version: no per-element gather."""
    from pytest_rvtune.compiler.lower import lower_ttir

    call = LAUNCHES[name][0]
    ttir = kernel_to_ttir(call.fn, call.signature, call.constexprs)
    accesses = ttir.count('"tt.load"') + ttir.count('"tt.store"')
    assert accesses >= 2
    c = lower_ttir(ttir).c_source
    # (a load whose only reader is an element-wise chain is read as a block in that chain's loop; an access may be
    # written in versions: whole rows or rows between bounds, a deferred load read whole where a store might meet
    # it), and no tile of pointers anywhere
    assert c.count("a strided block, unit-stride rows between the mask's bounds") + c.count("a deferred load") \
        >= accesses
    assert "**" not in c


@triton.jit
def bad_dim_kernel(x_ptr, M, B: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (M, M), (M, 1), (0, 0), (B, B), (1, 0))
    tl.store(p, tl.load(p, boundary_check=(0, 2)))


@triton.jit
def check_on_plain_pointer_kernel(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, boundary_check=(0,)))


@triton.jit
def nan_padding_on_ints_kernel(x_ptr, M, B: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (M,), (1,), (0,), (B,), (0,))
    tl.store(p, tl.load(p, boundary_check=(0,), padding_option="nan"))


def _line_of(kernel, text: str) -> int:
    """The line of this file holding ``text`` inside ``kernel``."""
    lines, first = inspect.getsourcelines(kernel.fn)
    return next(first + i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize(("kernel", "signature", "needle", "message"), [
    (bad_dim_kernel, {"x_ptr": "*fp32", "M": "i32"}, "boundary_check=(0, 2)",
     r"boundary_check=\(0, 2\) must name distinct dimensions of this 2-D block pointer"),
    (check_on_plain_pointer_kernel, {"x_ptr": "*fp32"}, "boundary_check=(0,)))",
     "boundary_check and padding_option apply to block pointers"),
    (nan_padding_on_ints_kernel, {"x_ptr": "*i32", "M": "i32"}, 'padding_option="nan"',
     "padding_option='nan' needs a floating-point block, this one is int32"),
])
def test_bad_block_pointer_use_names_kernel_file_and_line(kernel, signature, needle, message) -> None:
    with pytest.raises(FrontendError, match=message) as err:
        kernel_to_ttir(kernel, signature, {"B": 8})
    assert f"{__file__}:{_line_of(kernel, needle)}: in {kernel.__name__}" in str(err.value)


def plain_block_copy(x_ptr, o_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(o_ptr, (M, N), (N, 1), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1)) * 3, boundary_check=(0, 1))


def test_compile_kernel_builds_a_plain_function_we_jit(tmp_path: Path) -> None:
    """The api route (a function jitted by us, as the kernel loader does) gets block pointers too."""
    built = api.compile_kernel(triton.jit(plain_block_copy), {"x_ptr": "*fp32", "o_ptr": "*fp32", "M": "i32",
                                                              "N": "i32"}, {"BM": 4, "BN": 8}, HOST_ISA,
                               cache_root=tmp_path)
    assert re.search(r'"tt\.store"\(%\w+, %\w+, %\w+\)', built.ttir)  # masked by boundary_check
    assert built.kernel_obj.stat().st_size > 0


def test_build_key_covers_the_block_pointer_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing block_ptr.py changes the compiler hash, hence every kernel's build-cache key."""
    copy = tmp_path / "compiler"
    shutil.copytree(api.COMPILER_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(api, "COMPILER_DIR", copy)
    monkeypatch.setattr(api, "RUNTIME_DIR", copy / "runtime")
    api.compiler_source_hash.cache_clear()
    before = api.compiler_source_hash()
    (copy / "block_ptr.py").write_text((copy / "block_ptr.py").read_text() + "\n# changed\n")
    api.compiler_source_hash.cache_clear()
    try:
        assert api.compiler_source_hash() != before
    finally:
        api.compiler_source_hash.cache_clear()


def test_triton_compile_with_our_backend_gets_block_pointers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other route, ``triton.compile(..., target=rvtune_target(isa))``, uses the backend's module map:
    it traces block pointers too, to the same C as the build API."""
    from triton.compiler import ASTSource

    from pytest_rvtune.compiler.compiler import rvtune_target
    from pytest_rvtune.compiler.frontend import full_signature

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    call = LAUNCHES["matmul_ragged"][0]
    signature = full_signature(call.fn, call.signature, call.constexprs)
    compiled = triton.compile(ASTSource(call.fn, signature, call.constexprs), target=rvtune_target(HOST_ISA))
    built = api.compile_kernel(call.fn, call.signature, call.constexprs, HOST_ISA, cache_root=tmp_path / "rvtune")
    assert compiled.asm["c"].decode() == built.c_source
