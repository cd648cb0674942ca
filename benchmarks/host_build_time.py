"""Cold build time of tl.dot kernels per config on the host against rv64, and the host kernel's run time, with the
lowering before and after the pointer analysis followed ``tt.reshape`` (issue 29 part 6).

    .venv/bin/python benchmarks/host_build_time.py              # 4 kernels x 4 configs, 512^3 runs
    .venv/bin/python benchmarks/host_build_time.py --quick      # one config per kernel
    .venv/bin/python benchmarks/host_build_time.py --size 256 --rounds 9

Issue 29 saw host builds of tensor-descriptor matmuls take 7-13 s per config against 0.6-0.7 s for rv64. The time
was not in the GEMM tiles (a pointer matmul builds about as fast on the host as for rv64, the last kernel below shows
it): Triton's descriptor rewrite shapes the offsets with ``tt.reshape`` ([BM] -> [BM, 1]), which the pointer
analysis did not follow, so each descriptor load became tiles of offsets and of mask bytes and a test per element,
which clang unrolled and SLP-vectorised for seconds on x86-64. "before" is the lowering without that one handler
(``ptr_analysis.OPTIONAL["tt.reshape"]`` taken out for the build), "after" the lowering as it is; both in this run.

Per kernel, lowering and ISA a fresh build cache (``compile_kernel(cache_root=...)``), first warmed by one config of
a small kernel (the precompiled header and the rv64 runtime object are built once per toolchain: shown apart). Then
every config is built cold; each cell is wall seconds and, in brackets, the CPU seconds of clang (the machine is
shared: wall time moves with the load, the CPU seconds much less). The ratio is host / rv64 wall time.

Run time: the host kernel of each lowering linked into a shared object with its launcher, run over the whole grid on
the calling thread, the best of ``--rounds`` launches in CPU time of that thread (on a shared machine wall time counts
the time the thread waited for a core), the two lowerings alternating round by round (the speed of a core drifts);
the outputs of both compared bit for bit, and against float64 numpy.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import triton
import triton.language as tl
from tabulate import tabulate

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_rvtune.compiler import ptr_analysis  # noqa: E402
from pytest_rvtune.compiler.api import CompiledKernel, compile_kernel  # noqa: E402
from pytest_rvtune.spec import load_kernel_module  # noqa: E402
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain  # noqa: E402


@triton.jit
def desc_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
    """C = A @ B through tensor descriptors (the shape of Triton's descriptor matmuls), C in A's dtype."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_SIZE_K, BLOCK_SIZE_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BLOCK_SIZE_N)
    pid_n = pid % tl.cdiv(N, BLOCK_SIZE_N)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = a_desc.load([pid_m * BLOCK_SIZE_M, k * BLOCK_SIZE_K])
        b = b_desc.load([k * BLOCK_SIZE_K, pid_n * BLOCK_SIZE_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N], acc.to(c_desc.dtype))


@triton.jit
def desc_matmul_bt_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                          BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
    """C = A @ B^T with B stored N x K, as Triton's persistent-matmul tutorial's descriptor kernels take it."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BLOCK_SIZE_N)
    pid_n = pid % tl.cdiv(N, BLOCK_SIZE_N)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(tl.cdiv(K, BLOCK_SIZE_K)):
        a = a_desc.load([pid_m * BLOCK_SIZE_M, k * BLOCK_SIZE_K])
        b = b_desc.load([pid_n * BLOCK_SIZE_N, k * BLOCK_SIZE_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N], acc)


@triton.jit
def warmup_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)


@dataclass
class Kernel:
    label: str
    fn: Any
    dtype: Any  # numpy dtype of A, B and C
    signature: dict[str, str]
    extra: dict[str, Any]  # constexprs every config has
    strided: bool  # the kernel takes the six strides after M, N, K
    b_transposed: bool = False  # B is stored N x K


def _kernels() -> list[Kernel]:
    desc = {"a_ptr": "*{t}", "b_ptr": "*{t}", "c_ptr": "*{t}", "M": "i32", "N": "i32", "K": "i32"}
    matmul = load_kernel_module(REPO / "kernels" / "matmul.py")
    strides = ("stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")
    return [
        Kernel("descriptor matmul fp32", desc_matmul_kernel, np.float32,
               {k: v.format(t="fp32") for k, v in desc.items()}, {}, False),
        Kernel("descriptor matmul fp32, B^T", desc_matmul_bt_kernel, np.float32,
               {k: v.format(t="fp32") for k, v in desc.items()}, {}, False, b_transposed=True),
        Kernel("descriptor matmul fp16 (fp32 acc)", desc_matmul_kernel, np.float16,
               {k: v.format(t="fp16") for k, v in desc.items()}, {}, False),
        Kernel("kernels/matmul.py (pointers)", matmul.kernel, np.float32,
               {**{k: v.format(t="fp32") for k, v in desc.items()}, **dict.fromkeys(strides, "i32")},
               {"GROUP_SIZE_M": 8}, True),
    ]


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def lowering(which: str) -> Iterator[None]:
    """The lowering as it is ("after"), or without the pointer analysis's tt.reshape handler ("before")."""
    if which == "after":
        yield
        return
    handler = ptr_analysis.OPTIONAL.pop("tt.reshape")
    try:
        yield
    finally:
        ptr_analysis.OPTIONAL["tt.reshape"] = handler


def timed(build: Callable[[], CompiledKernel]) -> tuple[CompiledKernel, float, float]:
    cpu, wall = _children_cpu(), time.perf_counter()
    ck = build()
    return ck, time.perf_counter() - wall, _children_cpu() - cpu


def config_of(bm: int, bn: int, bk: int, kernel: Kernel) -> dict[str, Any]:
    return {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, **kernel.extra}


class HostRun:
    """A host build linked with its launcher into a shared object, run over the grid on one thread."""

    def __init__(self, ck: CompiledKernel, out_dir: Path) -> None:
        so = out_dir / f"{ck.name}_{ck.kernel_obj.parent.name[:12]}.so"
        tc = Toolchain.for_isa(HOST_ISA)
        tc.link(list(ck.objects), so, libs=("-shared", "-lm", "-lpthread"))
        self.lib = ctypes.CDLL(str(so))
        self.kernel = ctypes.cast(getattr(self.lib, ck.name), ctypes.c_void_p)
        self.wrap = getattr(self.lib, f"{ck.name}_wrap")
        self.name = ck.name

    def __call__(self, grid: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, ints: list[int]) -> float:
        args = [ctypes.c_uint32(grid), ctypes.c_uint32(1), ctypes.c_uint32(1), ctypes.c_int(1), self.kernel,
                *(ctypes.c_void_p(x.ctypes.data) for x in (a, b, c)), *map(ctypes.c_int32, ints)]
        start = time.thread_time()  # CPU time of this thread (the launch runs on it): preemption left out
        self.wrap(*args)
        return time.thread_time() - start


def run_both(kernel: Kernel, cfg: dict[str, Any], runs: dict[str, HostRun], size: int,
             rounds: int) -> tuple[dict[str, float], bool, float]:
    """Best seconds of each lowering's host kernel (alternating), whether their outputs are the same bits, and the
    largest relative error against float64 numpy."""
    rng = np.random.default_rng(29)
    m = n = k = size
    a = (rng.random((m, k)) * 2 - 1).astype(kernel.dtype)
    b = (rng.random((n, k) if kernel.b_transposed else (k, n)) * 2 - 1).astype(kernel.dtype)
    ints = [m, n, k, *([k, 1, n, 1, n, 1] if kernel.strided else [])]
    grid = triton.cdiv(m, cfg["BLOCK_SIZE_M"]) * triton.cdiv(n, cfg["BLOCK_SIZE_N"])
    outs = {which: np.full((m, n), np.nan, kernel.dtype) for which in runs}
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for which, run in runs.items():
            best[which] = min(best[which], run(grid, a, b, outs[which], ints))
    first, *others = outs.values()
    same = all(first.tobytes() == o.tobytes() for o in others)
    want = a.astype(np.float64) @ (b.T if kernel.b_transposed else b).astype(np.float64)
    err = float(np.max(np.abs(first.astype(np.float64) - want)) / np.max(np.abs(want)))
    return best, same, err


def cell(wall: float, cpu: float) -> str:
    return f"{wall:.2f} ({cpu:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one config per kernel (64x64x32)")
    parser.add_argument("--size", type=int, default=512, help="M = N = K of the host runs (default 512)")
    parser.add_argument("--rounds", type=int, default=5, help="launches per lowering, the best counts (default 5)")
    parser.add_argument("--configs", help="BMxBNxBK,... instead of the default four (e.g. 128x128x32)")
    parser.add_argument("--kernel", help="only the kernels whose label holds this (e.g. fp32, pointers)")
    args = parser.parse_args()
    configs = [(64, 64, 32)] if args.quick else [(32, 32, 32), (64, 64, 32), (128, 128, 32), (64, 64, 64)]
    if args.configs:
        try:
            configs = [(int(m), int(n), int(k)) for m, n, k in (c.split("x") for c in args.configs.split(","))]
        except ValueError:
            parser.error(f"--configs {args.configs!r}: expected BMxBNxBK,... such as 64x64x32,128x128x32")
    kernels = [k for k in _kernels() if args.kernel is None or args.kernel in k.label]
    if not kernels:
        parser.error(f"--kernel {args.kernel!r} matches none of: {', '.join(k.label for k in _kernels())}")
    print(f"load average at the start: {loadavg()}", flush=True)
    rows, setup = [], []
    with tempfile.TemporaryDirectory(prefix="rvtune-host-build-") as tmp_dir:
        tmp = Path(tmp_dir)
        for number, kernel in enumerate(kernels):
            roots = {(w, isa): tmp / f"kernel{number}-{w}-{isa}"
                     for w in ("before", "after") for isa in (RISCV_ISA, HOST_ISA)}
            for (which, isa), root in roots.items():  # the precompiled header and runtime object: once per cache
                with lowering(which):
                    _, wall, cpu = timed(functools.partial(compile_kernel, warmup_kernel, {"x_ptr": "*fp32"},
                                                           {"BLOCK": 64}, isa, cache_root=root))
                setup.append([kernel.label, which, isa, cell(wall, cpu)])
            for bm, bn, bk in configs:
                cfg = config_of(bm, bn, bk, kernel)
                times: dict[tuple[str, str], tuple[float, float]] = {}
                built: dict[str, CompiledKernel] = {}
                for (which, isa), root in roots.items():
                    with lowering(which):
                        ck, wall, cpu = timed(functools.partial(compile_kernel, kernel.fn, kernel.signature, cfg,
                                                                isa, cache_root=root))
                    times[(which, isa)] = (wall, cpu)
                    if isa == HOST_ISA:
                        built[which] = ck
                runs = {which: HostRun(ck, tmp) for which, ck in built.items()}
                best, same, err = run_both(kernel, cfg, runs, args.size, args.rounds)
                rv_b, rv_a = times[("before", RISCV_ISA)], times[("after", RISCV_ISA)]
                h_b, h_a = times[("before", HOST_ISA)], times[("after", HOST_ISA)]
                rows.append([kernel.label, f"{bm}x{bn}x{bk}", cell(*rv_b), cell(*rv_a), cell(*h_b), cell(*h_a),
                             f"{h_b[0] / rv_b[0]:.2f}x", f"{h_a[0] / rv_a[0]:.2f}x",
                             f"{best['before'] * 1e3:.2f}", f"{best['after'] * 1e3:.2f}",
                             f"{best['after'] / best['before']:.2f}x", "yes" if same else "NO", f"{err:.1e}",
                             loadavg()])
                print(f"  {kernel.label} {bm}x{bn}x{bk}: host {h_b[0]:.2f} -> {h_a[0]:.2f} s, rv64 {rv_b[0]:.2f} -> "
                      f"{rv_a[0]:.2f} s (load {loadavg()})", flush=True)
    print("\nWarm-up per cache (a small kernel: the precompiled header, and for rv64 the runtime object), "
          "wall s (clang CPU s):")
    print(tabulate(setup, headers=["kernel", "lowering", "ISA", "warm-up"]))
    print(f"\nCold build per config, wall s (clang CPU s); host runs {args.size}^3 on one thread, best CPU time of "
          f"{args.rounds}:")
    print(tabulate(rows, headers=["kernel", "config", "rv64 before", "rv64 after", "host before", "host after",
                                  "host/rv64 before", "host/rv64 after", "run before ms", "run after ms",
                                  "run after/before", "same bits", "max rel err", "load"]))
    print(f"\nload average at the end: {loadavg()}")
    return 0 if all(r[11] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
