r"""``rvtune bench-compiler``: how fast is the code our Triton -> C compiler makes?

    rvtune bench-compiler                       # host: matmul 512^3, flash attention, fused MoE; QEMU: matmul
    rvtune bench-compiler --size 128 --qemu-size 64 --max-configs 2 --skip-torch   # a quick look

One table, one row per measurement:

- host: the kernels built natively (``-march=native -O3``), one thread, best of a few block configs, against
  numpy/OpenBLAS (matmul, in a subprocess with ``OPENBLAS_NUM_THREADS=1``) and torch on the CPU with
  ``torch.set_num_threads(1)`` (flash attention, fused MoE), timed in the same run;
- rv64gcv under QEMU (VLEN 256), per ``--qemu-size``: dynamic instructions per FLOP inside the kernel (our
  QEMU plugin's ``kernel_insns``) for the matmul config with the fewest, against two hand-written
  RVV-intrinsics kernels (``pytest_rvtune/bench/rvv_matmul.c``, same clang flags: 4 rows x LMUL 4 and the
  stronger 3 rows x LMUL 8, the ratio is against the better of the two), and the share of vector
  instructions. Counts are per launch: two runs with different ``--runs`` are subtracted, so loading the
  input files does not count.

Every kernel run also checks its answer against the kernel module's reference (a wrong answer is an error).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain

BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"
RVV_SOURCE = BENCH_DIR / "rvv_matmul.c"

#: Block configs tried per kernel (a subset of each module's space: the tile shapes that suit a CPU).
MATMUL_CANDIDATES = [(128, 128, 128), (64, 64, 64), (32, 64, 32), (128, 128, 32), (64, 128, 128), (32, 128, 64),
                     (32, 32, 32), (16, 16, 16)]
#: The hand-written RVV matmuls of bench/rvv_matmul.c: argv variant -> (kernel symbol, description).
RVV_VARIANTS = {"4x4": ("rvv_matmul", "hand-written RVV, 4 rows x LMUL4"),
                "3x8": ("rvv_matmul_3x8", "hand-written RVV, 3 rows x LMUL8")}
FLASH_CANDIDATES = [(64, 64), (32, 64), (64, 32), (32, 32), (16, 32), (16, 16)]
MOE_CANDIDATES = [(64, 64, 64), (32, 64, 64), (64, 128, 32), (16, 64, 128), (32, 32, 32), (16, 16, 16)]


class BenchError(Exception):
    """A build or run that failed: names the kernel, config and target."""


@dataclass
class Row:
    target: str
    what: str
    config: str
    ours: str
    reference: str
    ratio: str
    note: str = ""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("bench-compiler", help="speed of the generated code: host vs OpenBLAS/torch, "
                                                     "QEMU instructions per FLOP vs hand-written RVV",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", type=Path, default=Path("kernels"), help="the kernels directory (default ./kernels)")
    p.add_argument("--size", type=int, default=512, help="host matmul M=N=K (default 512)")
    p.add_argument("--qemu-size", type=int, nargs="+", default=[128, 160],
                   help="QEMU matmul M=N=K, one or more (default 128 160)")
    p.add_argument("--max-configs", type=int, default=len(MATMUL_CANDIDATES),
                   help="block configs tried per kernel (default all candidates)")
    p.add_argument("--runs", type=int, default=5, help="timed launches per host measurement (default 5)")
    p.add_argument("--skip-torch", action="store_true", help="only matmul (no flash attention / fused MoE rows)")
    p.add_argument("--skip-qemu", action="store_true", help="no QEMU rows")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON to this file")
    p.set_defaults(func=run)


# ---- building and running one kernel config ------------------------------------------------------------


def _spec(kernels: Path, name: str) -> Any:
    from pytest_rvtune.spec import load_kernel_module

    path = kernels / f"{name}.py"
    if not path.is_file():
        raise BenchError(f"kernel module {path} not found: pass --kernels <dir with {name}.py>")
    return load_kernel_module(path)


def _run_item(spec: Any, case: str, config: dict[str, Any], isa: str, options: Sequence[str]) -> Any:
    """Build (cached) and run one item; returns the RunResult. A wrong answer or crash is a BenchError."""
    from pytest_rvtune.build import build_item
    from pytest_rvtune.targets.local import HostTarget, QemuTarget

    art = build_item(spec, case, config, isa)
    target = HostTarget(perf_events=()) if isa == HOST_ISA else QemuTarget()
    res = target.run(art.elf, [*options, *art.argv], timeout=600, kernel_symbol=art.kernel_symbol)
    if res.returncode != 0 or not res.checks or not all(c.ok for c in res.checks):
        checks = [f"{c.name} {'ok' if c.ok else 'bad'} max_abs={c.max_abs:g}" for c in res.checks]
        detail = "; ".join([*checks, *res.errors, res.stderr[-300:]])
        raise BenchError(f"{spec.name} [{spec.config_id(config)}] on {isa} failed (exit {res.returncode}): {detail}")
    return res


def _best_host(spec: Any, case: str, configs: list[dict[str, Any]], runs: int) -> tuple[dict[str, Any], float]:
    """(config, seconds): the fastest config by its best timed launch."""
    best: tuple[dict[str, Any], float] | None = None
    for config in configs:
        res = _run_item(spec, case, config, HOST_ISA, ["--warmup", "1", "--runs", str(runs)])
        seconds = min(res.samples_ns) / 1e9
        if best is None or seconds < best[1]:
            best = (config, seconds)
    assert best is not None
    return best


def _kernel_counts_per_launch(spec: Any, case: str, config: dict[str, Any]) -> dict[str, float]:
    """QEMU counters of one launch: runs=2 minus runs=1 (file loading and checking cancel out)."""
    one = _run_item(spec, case, config, RISCV_ISA, ["--warmup", "0", "--runs", "1"]).counters
    two = _run_item(spec, case, config, RISCV_ISA, ["--warmup", "0", "--runs", "2"]).counters
    return {k: two[k] - one[k] for k in ("insns", "vector_insns", "kernel_insns")}


# ---- references -----------------------------------------------------------------------------------------

_NUMPY_TIMER = """
import sys, time, numpy as np
n, runs = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
a @ b
best = min((lambda t0: (a @ b, time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(runs))
print(best)
"""


def numpy_matmul_seconds(n: int, runs: int) -> float:
    """Best time of numpy's (OpenBLAS) fp32 n^3 matmul on one thread, in a fresh process."""
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", _NUMPY_TIMER, str(n), str(max(runs, 3))], capture_output=True,
                         text=True, env=env, check=False)
    if out.returncode != 0:
        raise BenchError(f"timing numpy matmul failed: {out.stderr.strip()[-300:]}")
    return float(out.stdout.strip())


def _torch_seconds(fn: Any, runs: int) -> float:
    import time

    import torch

    torch.set_num_threads(1)
    fn()
    best = float("inf")
    for _ in range(max(runs, 3)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def torch_flash_fn(inputs: dict[str, Any], case: dict[str, Any], scale: float) -> Any:
    import torch.nn.functional as F

    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(case["IS_CAUSAL"]), scale=scale)


def torch_moe_fn(inputs: dict[str, Any]) -> Any:
    """The same computation as fused_moe in fp32 torch ops: per expert, its routed token rows @ weights^T."""
    import torch

    a, b, ids, w = inputs["a"], inputs["b"], inputs["topk_ids"].long(), inputs["topk_weights"]

    def fn() -> Any:
        c = torch.zeros((*ids.shape, b.shape[1]), dtype=torch.float32)
        for e in range(b.shape[0]):
            tokens, ks = torch.nonzero(ids == e, as_tuple=True)
            c[tokens, ks] = a[tokens] @ b[e].T
        return c * w[:, :, None]
    return fn


# ---- the hand-written RVV kernel ---------------------------------------------------------------------------


def rvv_reference_counts(n: int, workdir: Path, variant: str = "4x4") -> dict[str, float]:
    """Per-call QEMU counts of one bench/rvv_matmul.c kernel (RVV_VARIANTS, n^3), built with the kernels'
    flags."""
    from pytest_rvtune.targets.local import QemuTarget

    tc = Toolchain.for_isa(RISCV_ISA)
    workdir.mkdir(parents=True, exist_ok=True)
    obj, elf = workdir / "rvv_matmul.o", workdir / "rvv_matmul.elf"
    tc.compile(RVV_SOURCE, obj)
    tc.link([obj], elf)
    counts = []
    for reps in (1, 2):
        res = QemuTarget().run(elf, [str(n), str(reps), variant], timeout=600,
                               kernel_symbol=RVV_VARIANTS[variant][0])
        if res.returncode != 0:
            raise BenchError(f"hand-written RVV matmul {variant} failed under QEMU (exit {res.returncode}): "
                             f"{(res.stdout + res.stderr)[-300:]}")
        counts.append(res.counters)
    return {k: counts[1][k] - counts[0][k] for k in ("insns", "vector_insns", "kernel_insns")}


# ---- the table -----------------------------------------------------------------------------------------------


def _mm_config(bm: int, bn: int, bk: int) -> dict[str, Any]:
    return {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8}


def _short(config: dict[str, Any]) -> str:
    return ",".join(f"{k.replace('BLOCK_SIZE_', '')}={v}" for k, v in config.items() if k != "GROUP_SIZE_M")


def host_matmul_row(args: argparse.Namespace) -> Row:
    spec = _spec(args.kernels, "matmul")
    n = args.size
    case = f"bench_compiler_{n}"
    spec.cases[case] = dict(M=n, N=n, K=n)  # in memory only: golden data goes to the cache
    configs = [_mm_config(*c) for c in MATMUL_CANDIDATES if max(c[:2]) <= n][:args.max_configs]
    config, ours = _best_host(spec, case, configs, args.runs)
    blas = numpy_matmul_seconds(n, args.runs)
    flops = 2.0 * n ** 3
    return Row("host", f"matmul {n}^3 fp32, GFLOP/s", _short(config), f"{flops / ours / 1e9:.1f}",
               f"{flops / blas / 1e9:.1f} (numpy/OpenBLAS 1 thread)", f"{blas / ours:.2f}x",
               "speed ours/ref; target >= 0.5x")


def host_flash_row(args: argparse.Namespace) -> Row:
    spec = _spec(args.kernels, "flash_attention_fwd")
    configs = [{"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": bn, "IS_CAUSAL": False} for m, bn in FLASH_CANDIDATES]
    config, ours = _best_host(spec, "bench", configs[:args.max_configs], args.runs)
    case = spec.case("bench", spec.variant_of(config))
    inputs = spec.make_inputs("bench", spec.variant_of(config))
    scale = float(spec.module.sm_scale(case))
    ref = _torch_seconds(torch_flash_fn(inputs, case, scale), args.runs)
    shape = f"Z={case['Z']} H={case['H']} N_CTX={case['N_CTX']} D={case['D_HEAD']}"
    return Row("host", f"flash attention fwd ({shape}), ms", _short(config), f"{ours * 1e3:.3f}",
               f"{ref * 1e3:.3f} (torch SDPA 1 thread)", f"{ref / ours:.2f}x", "speed ours/ref")


def host_moe_row(args: argparse.Namespace) -> Row:
    spec = _spec(args.kernels, "fused_moe")
    configs = [{"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk} for m, bn, bk in MOE_CANDIDATES]
    configs = [c for c in configs if set(c) <= set(spec.configs[0].kwargs if hasattr(spec.configs[0], "kwargs")
                                                    else spec.configs[0])]
    base = dict(getattr(spec.configs[0], "kwargs", spec.configs[0]))
    configs = [{**base, **c} for c in configs][:args.max_configs]
    config, ours = _best_host(spec, "bench", configs, args.runs)
    inputs = spec.make_inputs("bench", spec.variant_of(config))
    ref = _torch_seconds(torch_moe_fn(inputs), args.runs)
    case = spec.case("bench")
    shape = f"M={case['M']} E={case['E']} K={case['K']} N={case['N']} top_k={case['top_k']}"
    return Row("host", f"fused MoE ({shape}), ms", _short(config), f"{ours * 1e3:.3f}",
               f"{ref * 1e3:.3f} (torch, per-expert matmuls, 1 thread)", f"{ref / ours:.2f}x", "speed ours/ref")


def qemu_rows(args: argparse.Namespace, workdir: Path) -> list[Row]:
    rows: list[Row] = []
    for n in args.qemu_size:
        rows += qemu_matmul_rows(args, n, workdir)
    return rows


def qemu_matmul_rows(args: argparse.Namespace, n: int, workdir: Path) -> list[Row]:
    spec = _spec(args.kernels, "matmul")
    case = f"bench_compiler_{n}"
    spec.cases[case] = dict(M=n, N=n, K=n)
    configs = [_mm_config(*c) for c in MATMUL_CANDIDATES if max(c[:2]) <= n][:args.max_configs]
    flops = 2.0 * n ** 3
    best: tuple[dict[str, Any], dict[str, float]] | None = None
    for config in configs:
        counts = _kernel_counts_per_launch(spec, case, config)
        if best is None or counts["kernel_insns"] < best[1]["kernel_insns"]:
            best = (config, counts)
    assert best is not None
    config, ours = best
    hand = {v: rvv_reference_counts(n, workdir, v)["kernel_insns"] / flops for v in RVV_VARIANTS}
    top = min(hand, key=hand.__getitem__)
    ipf_ours = ours["kernel_insns"] / flops
    share = ours["vector_insns"] / ours["insns"]
    others = "; ".join(f"{RVV_VARIANTS[v][1]}: {hand[v]:.4f}" for v in hand if v != top)
    return [
        Row("qemu rv64gcv VLEN 256", f"matmul {n}^3 fp32, kernel insns / FLOP", _short(config), f"{ipf_ours:.4f}",
            f"{hand[top]:.4f} ({RVV_VARIANTS[top][1]})", f"{ipf_ours / hand[top]:.2f}x",
            f"insns ours/ref; target <= 1.1x; {others}"),
        Row("qemu rv64gcv VLEN 256", f"matmul {n}^3, vector share of insns", _short(config), f"{share:.1%}",
            "", "", "per launch"),
    ]


def bench_rows(args: argparse.Namespace) -> list[Row]:
    from pytest_rvtune import paths

    rows = [host_matmul_row(args)]
    if not args.skip_torch:
        rows += [host_flash_row(args), host_moe_row(args)]
    if not args.skip_qemu:
        rows += qemu_rows(args, paths.cache_dir() / "bench_compiler")
    return rows


def run(args: argparse.Namespace) -> int:
    try:
        rows = bench_rows(args)
    except Exception as e:  # build / golden / run failures: one clear line, exit 1
        print(f"rvtune bench-compiler: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    headers = ["target", "measurement", "best config", "ours", "reference", "ratio", "note"]
    print(tabulate([[r.target, r.what, r.config, r.ours, r.reference, r.ratio, r.note] for r in rows],
                   headers=headers, tablefmt="github"))
    if args.json is not None:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=2) + "\n")
    return 0


__all__ = ["BenchError", "Row", "add_parser", "bench_rows", "numpy_matmul_seconds", "run", "rvv_reference_counts"]
