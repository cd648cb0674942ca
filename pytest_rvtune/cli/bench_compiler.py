r"""``rvtune bench-compiler``: how fast is the code our Triton -> C compiler makes, against honest yardsticks?

    rvtune bench-compiler                       # everything: host rows, QEMU rows at 128^3 and 160^3
    rvtune bench-compiler --size 128 --qemu-size 64 --max-configs 2 --skip-torch   # a quick look

One table, one row per measurement, each with the load average when it was taken:

- host: the kernels built natively (``-march=native -O3``), one thread, best of a few block configs, against
  numpy/OpenBLAS (matmul, in a subprocess with ``OPENBLAS_NUM_THREADS=1`` and a clean environment, so
  ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` are unset there; the row names the kernel threadpoolctl reports)
  and torch on the CPU with ``torch.set_num_threads(1)`` (flash attention, fused MoE, softmax, layer_norm);
- rv64gcv under QEMU (VLEN 256): dynamic instructions of one whole launch (our plugin's ``launch_insns``) per
  FLOP (matmul) or per element (softmax, layer_norm at the kernels' emu shapes) for the config with the
  fewest, against each hand-written RVV-intrinsics yardstick of ``pytest_rvtune/bench`` (same clang flags, same
  plugin, the whole call counted as ``launch_insns`` too, every output checked against numpy) and the GEMM
  floor (a computed figure, bench/yardsticks.py); flash attention (non-causal, emu shape) and fused MoE (emu
  shape, the routing padded per the best config's BLOCK_SIZE_M) per FLOP likewise.
  ``est_cycles`` is printed beside the counts when the plugin gives it.
- where the target gives the X60 model's ``x60_cycles`` (pytest_rvtune/x60): modelled SpacemiT X60 cycles per
  FLOP (or per element) of the config with the fewest of them, against each yardstick's and, per FLOP, the
  chip's fp32 peak (vfmacc.vf e32m8 at 8 cycles: 16 FLOP/cycle, 1/16 cycle per FLOP).

Every kernel run also checks its answer against the kernel module's reference (a wrong answer is an error).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_rvtune.bench import yardsticks
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA

#: Block configs tried per kernel (a subset of each module's space: the tile shapes that suit a CPU).
MATMUL_CANDIDATES = [(128, 128, 128), (64, 64, 64), (32, 64, 32), (128, 128, 32), (64, 128, 128), (32, 128, 64),
                     (32, 32, 32), (16, 16, 16)]
FLASH_CANDIDATES = [(64, 64), (32, 64), (64, 32), (32, 32), (16, 32), (16, 16)]
MOE_CANDIDATES = [(64, 64, 64), (32, 64, 64), (64, 128, 32), (16, 64, 128), (32, 32, 32), (16, 16, 16)]


#: Timed tries of numpy's matmul (and of our best config beside it): a 512^3 matmul takes a few ms.
NUMPY_MIN_TRIES = 20

#: Rounds of (ours, OpenBLAS) timed alternately. On this VM the speed of a core drifts by 10-20 % between
#: seconds (three back-to-back runs gave ratios 0.94x, 0.86x, 0.70x): each side takes its best over rounds that
#: interleave with the other's, so both see the same stretches of time.
HOST_MATMUL_ROUNDS = 5


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
    load: str = field(default_factory=lambda: load_average())


def load_average() -> str:
    """The 1/5/15-minute load average now (every figure is printed with it: 2 cores are shared)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("bench-compiler", help="speed of the generated code: host vs OpenBLAS/torch, "
                                                     "QEMU instructions per FLOP vs hand-written RVV",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels-dir", dest="kernels", type=Path, default=Path("kernels"),
                   help="the kernels directory (default ./kernels)")
    p.add_argument("--kernels", dest="kernels", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # old
    p.add_argument("--size", type=int, default=512, help="host matmul M=N=K (default 512)")
    p.add_argument("--qemu-size", type=int, nargs="+", default=[128, 160],
                   help="QEMU matmul M=N=K, one or more (default 128 160)")
    p.add_argument("--max-configs", type=int, default=None,
                   help="block configs tried per kernel (default all: the matmul candidates, every config of "
                        "the other kernels' modules)")
    p.add_argument("--runs", type=int, default=5, help="timed launches per host measurement (default 5)")
    p.add_argument("--skip-torch", action="store_true",
                   help="host: only matmul (no flash attention / fused MoE / softmax / layer_norm rows)")
    p.add_argument("--skip-rows", action="store_true",
                   help="QEMU: only matmul (no softmax / layer_norm / flash attention / fused MoE rows)")
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
    # est_cycles beside the counts: instructions per FLOP alone reward a long LMUL whatever its real cost
    target = HostTarget(perf_events=()) if isa == HOST_ISA else QemuTarget(with_timing_model=True)
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


def launch_counts(spec: Any, case: str, config: dict[str, Any]) -> dict[str, float]:
    """QEMU counters of one launch: ``launch_insns`` (and ``est_cycles`` where the plugin has it) over the
    launches the plugin saw."""
    counters = _run_item(spec, case, config, RISCV_ISA, ["--warmup", "0", "--runs", "2"]).counters
    launches = counters.get("launches", 0)
    if not launches or "launch_insns" not in counters:
        raise BenchError(f"{spec.name} [{spec.config_id(config)}]: the QEMU plugin counted no whole launch "
                         f"(launches={launches}): rebuild the plugin (rvtune setup)")
    out = {"launch_insns": counters["launch_insns"] / launches}
    for name in ("est_cycles", "x60_cycles"):
        if name in counters:
            out[name] = counters[name] / launches
    return out


Best = tuple[dict[str, Any], dict[str, float]]


def _best_qemu(spec: Any, case: str, configs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, float], Best]:
    """(config, counts) of the config whose whole launch takes the fewest instructions, and the config with the
    fewest X60 cycles (the same one again where the target gives no x60_cycles)."""
    scored = [(config, launch_counts(spec, case, config)) for config in configs]
    config, counts = min(scored, key=lambda pair: pair[1]["launch_insns"])
    x60 = min(scored, key=lambda pair: pair[1].get("x60_cycles", pair[1]["launch_insns"]))
    return config, counts, x60


# ---- references -----------------------------------------------------------------------------------------

_NUMPY_TIMER = """
import json, sys, time, numpy as np
from threadpoolctl import threadpool_info
n, runs = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
a @ b
best = min((lambda t0: (a @ b, time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(runs))
blas = [p for p in threadpool_info() if p.get("user_api") == "blas"]
print(json.dumps({"seconds": best, "blas": [f"{p.get('internal_api')} {p.get('architecture')} "
                                            f"{p.get('num_threads')} thread(s)" for p in blas]}))
"""


def numpy_matmul_seconds(n: int, runs: int) -> tuple[float, str]:
    """(best seconds, BLAS as threadpoolctl reports it) of numpy's fp32 n^3 matmul on one thread, in a fresh
    process whose environment has only PATH and the thread counts: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (which
    can slow OpenBLAS down) are unset there and only there."""
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    # at least 20 tries: a 512^3 matmul takes a few ms, and on a shared machine a few tries can all be preempted
    out = subprocess.run([sys.executable, "-c", _NUMPY_TIMER, str(n), str(max(runs, NUMPY_MIN_TRIES))],
                         capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise BenchError(f"timing numpy matmul failed (is threadpoolctl installed? pip install -e .[dev]): "
                         f"{out.stderr.strip()[-300:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return float(result["seconds"]), "; ".join(result["blas"]) or "no BLAS found by threadpoolctl"


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
    config, _ = _best_host(spec, case, configs, args.runs)
    # the chosen config re-timed with as many tries as numpy gets (best of 20 against best of 5 would
    # favour numpy on a loaded machine), the two alternately (HOST_MATMUL_ROUNDS)
    tries = max(args.runs, NUMPY_MIN_TRIES)
    ours = blas = float("inf")
    for _ in range(HOST_MATMUL_ROUNDS):
        ours = min(ours, _best_host(spec, case, [config], tries)[1])
        seconds, kernel = numpy_matmul_seconds(n, tries)
        blas = min(blas, seconds)
    flops = 2.0 * n ** 3
    return Row("host", f"matmul {n}^3 fp32, GFLOP/s", _short(config), f"{flops / ours / 1e9:.1f}",
               f"{flops / blas / 1e9:.1f} (numpy/OpenBLAS 1 thread)", f"{blas / ours:.2f}x",
               f"speed ours/ref; target >= 0.9x; threadpoolctl: {kernel}")


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
    config, ours = _best_host(spec, "bench", moe_configs(spec)[:args.max_configs], args.runs)
    inputs = spec.make_inputs("bench", spec.variant_of(config))
    ref = _torch_seconds(torch_moe_fn(inputs), args.runs)
    case = spec.case("bench")
    shape = f"M={case['M']} E={case['E']} K={case['K']} N={case['N']} top_k={case['top_k']}"
    return Row("host", f"fused MoE ({shape}), ms", _short(config), f"{ours * 1e3:.3f}",
               f"{ref * 1e3:.3f} (torch, per-expert matmuls, 1 thread)", f"{ref / ours:.2f}x", "speed ours/ref")


def moe_configs(spec: Any) -> list[dict[str, Any]]:
    """MOE_CANDIDATES over the module's first config (its GROUP_SIZE_M etc.)."""
    base = _module_configs(spec)[0]
    configs = [{"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk} for m, bn, bk in MOE_CANDIDATES]
    return [{**base, **c} for c in configs if set(c) <= set(base)]


def host_row_kernel_row(args: argparse.Namespace, name: str) -> Row:
    """softmax or layer_norm at the module's bench shape vs torch's (1 thread)."""
    import torch.nn.functional as F

    spec = _spec(args.kernels, name)
    config, ours = _best_host(spec, "bench", _module_configs(spec)[:args.max_configs], args.runs)
    inputs = spec.make_inputs("bench", spec.variant_of(config))
    x = inputs["x"]
    if name == "softmax":
        ref = _torch_seconds(lambda: torch_softmax(x), args.runs)
        what = "torch.softmax"
    else:
        w, b, eps = inputs["w"], inputs["b"], float(spec.module.EPS)
        ref = _torch_seconds(lambda: F.layer_norm(x, (x.shape[1],), w, b, eps), args.runs)
        what = "F.layer_norm"
    rows, cols = x.shape
    return Row("host", f"{name} {rows}x{cols} fp32, ms", _short(config), f"{ours * 1e3:.3f}",
               f"{ref * 1e3:.3f} ({what} 1 thread)", f"{ref / ours:.2f}x", "speed ours/ref")


def torch_softmax(x: Any) -> Any:
    import torch

    return torch.softmax(x, dim=1)


def _module_configs(spec: Any) -> list[dict[str, Any]]:
    return [dict(getattr(c, "kwargs", c)) for c in spec.configs]


def _cycles_note(counts: dict[str, float], per: float) -> str:
    if "est_cycles" not in counts:
        return "est_cycles: not counted"
    return f"est_cycles {counts['est_cycles'] / per:.4f}"


#: The peak as a reference row: cycles per FLOP at the X60's fp32 FMA peak.
X60_PEAK = (f"{1 / yardsticks.X60_PEAK_FLOP_PER_CYCLE:.4f} (peak: fp32 vfmacc.vf e32m8, "
            f"{yardsticks.X60_PEAK_FLOP_PER_CYCLE:g} FLOP/cycle, rvv-bench X60 table)")


def x60_rows(what: str, config: str, ours: dict[str, float], per: float,
             refs: Sequence[tuple[str, float | None]]) -> list[Row]:
    """Rows of X60 cycles per FLOP or element (the X60 model's, pytest_rvtune/x60): ours against each reference
    (its x60_cycles per launch, or None where it has none) and, for FLOP rows, the peak. None without the model."""
    if "x60_cycles" not in ours:
        return []
    mine = ours["x60_cycles"] / per
    rows = [Row(QEMU, what, config, f"{mine:.4f}", f"{cycles / per:.4f} ({description})",
                f"{mine / (cycles / per):.2f}x", "X60 model cycles ours/ref")
            for description, cycles in refs if cycles]
    if what.endswith("/ FLOP"):
        peak = 1 / yardsticks.X60_PEAK_FLOP_PER_CYCLE
        rows.append(Row(QEMU, what, config, f"{mine:.4f}", X60_PEAK, f"{mine / peak:.2f}x",
                        "X60 model cycles ours/peak"))
    return rows


def qemu_rows(args: argparse.Namespace, workdir: Path) -> list[Row]:
    rows: list[Row] = []
    for n in args.qemu_size:
        rows += qemu_matmul_rows(args, n, workdir)
    if not args.skip_rows:
        rows += qemu_row_kernel_rows(args, "softmax", workdir)
        rows += qemu_row_kernel_rows(args, "layer_norm", workdir)
    return rows


QEMU = "qemu rv64gcv VLEN 256"


def qemu_matmul_rows(args: argparse.Namespace, n: int, workdir: Path) -> list[Row]:
    spec = _spec(args.kernels, "matmul")
    case = f"bench_compiler_{n}"
    spec.cases[case] = dict(M=n, N=n, K=n)
    configs = [_mm_config(*c) for c in MATMUL_CANDIDATES if max(c[:2]) <= n][:args.max_configs]
    flops = 2.0 * n ** 3
    config, ours, (x60_config, x60_ours) = _best_qemu(spec, case, configs)
    ipf = ours["launch_insns"] / flops
    what = f"matmul {n}^3 fp32, launch insns / FLOP"
    rows = []
    hands = {variant: yardsticks.matmul(n, variant, workdir) for variant in yardsticks.MATMUL_VARIANTS}
    for variant, (_, description) in yardsticks.MATMUL_VARIANTS.items():
        hand = hands[variant].launch_insns / flops
        rows.append(Row(QEMU, what, _short(config), f"{ipf:.4f}", f"{hand:.4f} ({description})",
                        f"{ipf / hand:.2f}x", f"insns ours/ref; {_cycles_note(ours, flops)}"))
    floor = yardsticks.gemm_floor_insns_per_flop()
    rows.append(Row(QEMU, what, _short(config), f"{ipf:.4f}", f"{floor:.4f} (floor: per K step 3 vfmacc.vf + "
                    f"3 flw + 1 vle32 + 1 add, LMUL8; computed)", f"{ipf / floor:.2f}x", "insns ours/floor"))
    return rows + x60_rows(f"matmul {n}^3 fp32, X60 cycles / FLOP", _short(x60_config), x60_ours, flops,
                           [(description, hands[variant].x60_cycles)
                            for variant, (_, description) in yardsticks.MATMUL_VARIANTS.items()])


def qemu_row_kernel_rows(args: argparse.Namespace, name: str, workdir: Path) -> list[Row]:
    """softmax / layer_norm at the module's emu shape: launch insns per element vs the hand-written kernel."""
    spec = _spec(args.kernels, name)
    config, ours, (x60_config, x60_ours) = _best_qemu(spec, "emu", _module_configs(spec)[:args.max_configs])
    case = spec.case("emu", spec.variant_of(config))
    rows_, cols = (case["n_rows"], case["n_cols"]) if name == "softmax" else (case["M"], case["N"])
    elements = float(rows_ * cols)
    measure = yardsticks.softmax if name == "softmax" else yardsticks.layer_norm
    hand = measure(rows_, cols, workdir)
    ipe, hand_ipe = ours["launch_insns"] / elements, hand.launch_insns / elements
    return [Row(QEMU, f"{name} {rows_}x{cols} fp32, launch insns / element", _short(config), f"{ipe:.3f}",
                f"{hand_ipe:.3f} (hand-written RVV, LMUL8, vector reductions)", f"{ipe / hand_ipe:.2f}x",
                f"insns ours/ref; {_cycles_note(ours, elements)}"),
            *x60_rows(f"{name} {rows_}x{cols} fp32, X60 cycles / element", _short(x60_config), x60_ours, elements,
                      [("hand-written RVV, LMUL8, vector reductions", hand.x60_cycles)])]


def qemu_flash_rows(args: argparse.Namespace, workdir: Path) -> list[Row]:
    """Flash attention (non-causal) at the module's emu shape: launch insns per FLOP (4 N^2 D per head, the
    two matmuls) vs the hand-written RVV kernel."""
    spec = _spec(args.kernels, "flash_attention_fwd")
    configs = [{"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": bn, "IS_CAUSAL": False} for m, bn in FLASH_CANDIDATES]
    config, ours, (x60_config, x60_ours) = _best_qemu(spec, "emu", configs[:args.max_configs])
    case = spec.case("emu", spec.variant_of(config))
    heads, n, d = case["Z"] * case["H"], case["N_CTX"], case["D_HEAD"]
    flops = 4.0 * heads * n * n * d
    counts = yardsticks.flash_attention(heads, n, d, False, workdir)
    hand = counts.launch_insns / flops
    ipf = ours["launch_insns"] / flops
    description = "hand-written RVV, K^T packed, 3 query rows x LMUL8, online softmax"
    return [Row(QEMU, f"flash attention fwd (Z*H={heads} N_CTX={n} D={d}), launch insns / FLOP", _short(config),
                f"{ipf:.4f}", f"{hand:.4f} ({description})",
                f"{ipf / hand:.2f}x", f"insns ours/ref; {_cycles_note(ours, flops)}"),
            *x60_rows(f"flash attention fwd (Z*H={heads} N_CTX={n} D={d}), X60 cycles / FLOP", _short(x60_config),
                      x60_ours, flops, [(description, counts.x60_cycles)])]


def qemu_moe_rows(args: argparse.Namespace, workdir: Path) -> list[Row]:
    """Fused MoE at the module's emu shape: launch insns per FLOP (2 x valid slots x N x K) vs the hand-written
    RVV kernel on the same routing (padding per the best config's BLOCK_SIZE_M)."""
    spec = _spec(args.kernels, "fused_moe")
    config, ours, (x60_config, x60_ours) = _best_qemu(spec, "emu", moe_configs(spec)[:args.max_configs])
    case = spec.case("emu", spec.variant_of(config))
    m, e, k, n, top_k = (case[key] for key in ("M", "E", "K", "N", "top_k"))
    flops = yardsticks.moe_flops(m, k, n, top_k)
    counts = yardsticks.fused_moe(m, e, k, n, top_k, config["BLOCK_SIZE_M"], workdir,
                                  idle_experts=tuple(case["idle_experts"]))
    hand = counts.launch_insns / flops
    ipf = ours["launch_insns"] / flops
    description = "hand-written RVV, B^T packed per expert, 3 slots x LMUL8"
    return [Row(QEMU, f"fused MoE (M={m} E={e} K={k} N={n} top_k={top_k}), launch insns / FLOP", _short(config),
                f"{ipf:.4f}", f"{hand:.4f} ({description})",
                f"{ipf / hand:.2f}x", f"insns ours/ref; {_cycles_note(ours, flops)}"),
            *x60_rows(f"fused MoE (M={m} E={e} K={k} N={n} top_k={top_k}), X60 cycles / FLOP", _short(x60_config),
                      x60_ours, flops, [(description, counts.x60_cycles)])]


def bench_rows(args: argparse.Namespace) -> list[Row]:
    from pytest_rvtune import paths

    rows = [host_matmul_row(args)]
    if not args.skip_torch:
        rows += [host_flash_row(args), host_moe_row(args), host_row_kernel_row(args, "softmax"),
                 host_row_kernel_row(args, "layer_norm")]
    if not args.skip_qemu:
        rows += qemu_rows(args, paths.cache_dir() / "bench_compiler")
        if not args.skip_rows:
            rows += qemu_flash_rows(args, paths.cache_dir() / "bench_compiler")
            rows += qemu_moe_rows(args, paths.cache_dir() / "bench_compiler")
    return rows


def run(args: argparse.Namespace) -> int:
    try:
        rows = bench_rows(args)
    except Exception as e:  # build / golden / run failures: one clear line, exit 1
        print(f"rvtune bench-compiler: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    headers = ["target", "measurement", "best config", "ours", "reference", "ratio", "note", "load avg"]
    print(tabulate([[r.target, r.what, r.config, r.ours, r.reference, r.ratio, r.note, r.load] for r in rows],
                   headers=headers, tablefmt="github"))
    if args.json is not None:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=2) + "\n")
    return 0


__all__ = ["BenchError", "Row", "add_parser", "bench_rows", "launch_counts", "load_average", "moe_configs",
           "numpy_matmul_seconds", "run", "torch_softmax", "x60_rows"]
