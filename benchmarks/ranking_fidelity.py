"""Which emulated metric ranks configs like real time does? Measured on the host, where real time exists.

    .venv/bin/python benchmarks/ranking_fidelity.py                         # everything (hours on 2 busy cores)
    .venv/bin/python benchmarks/ranking_fidelity.py --kernels layer_norm --cases emu --rounds 4 --span 0.1

For each kernel (matmul, softmax, layer_norm, flash attention; per problem, e.g. causal / non-causal) and case
(emu, bench size), every config is built for the host as a static x86-64-v3 ELF (HOST_MARCH: qemu-x86_64 7.2
cannot run AVX-512) and then
- timed natively: ``--rounds`` rounds, each running every config once in a fresh random order (interleaved, so
  drift of the machine hits every config alike), each run timing launches over ``--span`` seconds (at least
  ``--runs``); the config's time is the median of all its samples. The A/A ceiling: the same ranking from the
  even rounds against the odd rounds.
- counted once under qemu-x86_64 with our plugin (qemu_plugin/icount.c): launch_insns, kernel_insns, the
  timing model's est_cycles (pytest_rvtune/timing_model.py with llvm-mca's model of THIS host's core, e.g.
  znver3) and the cache model's l1d_misses / l2_misses (with this host's own L1D/L2 geometry from sysfs).
  ``est_cycles_mem`` adds a miss cost to est_cycles (MISS_CYCLES: L1D miss served by L2, L2 miss by memory).
Printed per kernel x case x problem x metric: Spearman rho against the timed ranking, top-1 regret (how much
slower the metric's first pick runs than the fastest config) and top-3 regret (the best of its first three),
with the A/A figures and the load average. Nothing is asserted: the machine may be shared.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scipy.stats import spearmanr  # noqa: E402
from tabulate import tabulate  # noqa: E402

from pytest_rvtune import paths, timing_model, toolchain  # noqa: E402
from pytest_rvtune.build import build_item  # noqa: E402
from pytest_rvtune.counters import read_icount_file  # noqa: E402
from pytest_rvtune.hashing import sha256_file  # noqa: E402
from pytest_rvtune.spec import load_kernel_module  # noqa: E402
from pytest_rvtune.targets.local import HostTarget, launcher_symbol  # noqa: E402
from pytest_rvtune.toolchain import HOST_ISA, Toolchain  # noqa: E402

#: The host build this benchmark measures: x86-64-v3 (qemu-x86_64 7.2 runs AVX2, not the AVX-512 of
#: -march=native here) and static, non-PIE (the plugin finds the launcher at its link-time address; under a
#: dynamic loader QEMU reports the loader's entry point, not the program's).
HOST_MARCH = "x86-64-v3"
_for_isa = Toolchain.for_isa


def _fidelity_toolchain(isa: str) -> Toolchain:
    tc = _for_isa(isa)
    if isa != HOST_ISA:
        return tc
    return dataclasses.replace(tc, cflags=tuple(f"-march={HOST_MARCH}" if f.startswith("-march=") else f
                                                for f in tc.cflags), ldflags=(*tc.ldflags, "-static"))


toolchain.Toolchain.for_isa = staticmethod(_fidelity_toolchain)  # type: ignore[method-assign]

KERNELS = ("layer_norm", "softmax", "flash_attention_fwd", "matmul")
CASES = ("emu", "bench")
METRICS = ("launch_insns", "kernel_insns", "est_cycles", "est_cycles_mem", "l1d_misses", "l2_misses")
#: Miss costs in cycles for est_cycles_mem (a coarse, documented guess: an L1D miss served by L2 ~ 14 cycles,
#: an L2 miss served by L3/memory ~ 50; the host's real figures differ per level and access pattern).
MISS_CYCLES = {"l1d_misses": 14.0, "l2_misses": 50.0}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def host_cache_geometry() -> tuple[timing_model.CacheLevel, timing_model.CacheLevel]:
    """This host's L1D and L2 from sysfs (cpu0)."""
    levels: dict[str, timing_model.CacheLevel] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        def read(name: str, index: Path = index) -> str:
            return (index / name).read_text().strip()
        level, kind = read("level"), read("type")
        size = int(read("size").rstrip("K")) * 1024
        geometry = timing_model.CacheLevel(size=size, ways=int(read("ways_of_associativity")),
                                           line=int(read("coherency_line_size")))
        if (level, kind) == ("1", "Data"):
            levels["l1d"] = geometry
        elif level == "2":
            levels["l2"] = geometry
    return levels["l1d"], levels["l2"]


@dataclass
class Config:
    config_id: str
    problem: str
    elf: Path
    argv: list[Any]
    kernel_symbol: str
    samples: list[list[float]] = field(default_factory=list)  # per round
    counters: dict[str, float] = field(default_factory=dict)


def spread(configs: list[Any], limit: int) -> list[Any]:
    """At most ``limit`` configs (0: all), evenly spread over the config space's order."""
    if not limit or len(configs) <= limit:
        return configs
    step = len(configs) / limit
    return [configs[int(i * step)] for i in range(limit)]


def harness_args(runs: int, warmup: int, check: bool) -> list[str]:
    args = ["--warmup", str(warmup), "--runs", str(runs), "--threads", "1"]
    return args if check else [*args, "--no-check"]


COUNTS_CACHE = REPO / ".rvtune" / "fidelity" / "counts"


def count(config: Config, l1d: timing_model.CacheLevel, l2: timing_model.CacheLevel, timeout: float) -> str | None:
    """count_uncached, its result kept per (ELF, argv, plugin, models): counts are deterministic."""
    key = hashlib.sha256(json.dumps([sha256_file(config.elf), [str(a) for a in config.argv],
                                     sha256_file(paths.icount_plugin()), timing_model.host_core_model().identity(),
                                     l1d.plugin_arg(), l2.plugin_arg()]).encode()).hexdigest()
    entry = COUNTS_CACHE / f"{key}.json"
    if entry.is_file():
        config.counters = json.loads(entry.read_text())
        return None
    error = count_uncached(config, l1d, l2, timeout)
    if error is None:
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(json.dumps(config.counters))
    return error


def count_uncached(config: Config, l1d: timing_model.CacheLevel, l2: timing_model.CacheLevel,
                   timeout: float) -> str | None:
    """The config's emulated counters under qemu-x86_64 (one launch, unchecked: the harness's parsing of the
    expected data under emulation would dominate; the kernel suite checks every config); an error text or None."""
    with tempfile.TemporaryDirectory(prefix="rvtune-fidelity-") as tmp:
        out, blocks = Path(tmp) / "icount.txt", Path(tmp) / "blocks.txt"
        plugin = (f"{paths.icount_plugin()},out={out},symbol={config.kernel_symbol},"
                  f"launch={launcher_symbol(config.kernel_symbol)},blocks={blocks},"
                  f"l1d={l1d.plugin_arg()},l2={l2.plugin_arg()}")
        argv = [str(a) for a in [*harness_args(1, 0, False), *config.argv]]
        proc = subprocess.run(["qemu-x86_64", "-plugin", plugin, str(config.elf), *argv], capture_output=True,
                              text=True, timeout=timeout, check=False, cwd=tmp)
        if proc.returncode != 0:
            return f"qemu-x86_64 exit {proc.returncode}: {proc.stderr.strip()[-400:]}"
        counters = read_icount_file(out)
        launches = counters.get("launches", 0)
        if not launches or "launch_insns" not in counters:
            return f"the plugin saw no launch of {launcher_symbol(config.kernel_symbol)}"
        counters.update(timing_model.est_cycles_of(blocks, timing_model.host_core_model()))
    config.counters = {k: counters[k] / launches for k in METRICS if k in counters}
    config.counters["est_cycles_mem"] = config.counters["est_cycles"] + sum(
        config.counters[k] * cost for k, cost in MISS_CYCLES.items())
    return None


def time_round(configs: list[Config], runs: int, warmup: int, span: float, timeout: float,
               rng: random.Random) -> None:
    """One run of every config in a random order: at least ``runs`` launches, more until they span ``span``
    seconds (the harness's --max-time; at most 200), so short launches get many samples and long ones few."""
    host = HostTarget(perf_events=())
    order = list(configs)
    rng.shuffle(order)
    for config in order:
        args = [*harness_args(runs, warmup, False), "--max-time", repr(span), "--max-samples", "200"]
        result = host.run(config.elf, [*args, *config.argv], timeout)
        config.samples.append(list(result.samples_ns) if result.returncode == 0 else [])


#: How a config's samples become its time: the median (the brief's), or the minimum (interference only adds
#: time, so on a loaded machine the minimum repeats better; compare.py's default for the same reason).
STATISTICS = {"median": statistics.median, "min": min}


def median_time(config: Config, rounds: list[int] | None = None, statistic: str = "median") -> float | None:
    chosen = [s for i, round_samples in enumerate(config.samples) if rounds is None or i in rounds
              for s in round_samples]
    return float(STATISTICS[statistic](chosen)) if chosen else None


def regret(times: dict[str, float], by: dict[str, float], top: int) -> float:
    """How much slower the best of the metric's first ``top`` picks runs than the fastest config (fraction)."""
    picks = sorted(by, key=lambda c: (by[c], c))[:top]
    return min(times[c] for c in picks) / min(times.values()) - 1


def rho(a: dict[str, float], b: dict[str, float]) -> float:
    keys = sorted(set(a) & set(b))
    if len(keys) < 3:
        return float("nan")
    value = spearmanr([a[k] for k in keys], [b[k] for k in keys]).statistic
    return float(value)


def analyse(configs: list[Config], rounds: int, statistic: str = "median") -> list[dict[str, Any]]:
    rows = []
    for problem in sorted({c.problem for c in configs}):
        group = [c for c in configs if c.problem == problem and median_time(c) is not None]
        times = {c.config_id: median_time(c, None, statistic) for c in group}
        times_f = {k: v for k, v in times.items() if v is not None}
        even = {c.config_id: median_time(c, list(range(0, rounds, 2)), statistic) for c in group}
        odd = {c.config_id: median_time(c, list(range(1, rounds, 2)), statistic) for c in group}
        even_f = {k: v for k, v in even.items() if v is not None}
        odd_f = {k: v for k, v in odd.items() if v is not None}
        row: dict[str, Any] = {"problem": problem, "configs": len(group),
                               "A/A rho": rho(even_f, odd_f) if odd_f else float("nan"),
                               "A/A top-1": regret(times_f, even_f, 1) if even_f else float("nan")}
        for metric in METRICS:
            by = {c.config_id: c.counters[metric] for c in group if metric in c.counters}
            if len(by) < len(group) or not by:
                continue
            row[metric] = {"rho": rho(times_f, by), "top1": regret(times_f, by, 1), "top3": regret(times_f, by, 3)}
        rows.append(row)
    return rows


def table_lines(kernel: str, case: str, rows: list[dict[str, Any]]) -> list[list[Any]]:
    lines = []
    for row in rows:
        line = [kernel, case, row["problem"], row["configs"], f"{row['A/A rho']:.3f}",
                f"{100 * row['A/A top-1']:.1f} %"]
        for metric in METRICS:
            m = row.get(metric)
            line.append(f"{m['rho']:.3f} / {100 * m['top1']:.1f} % / {100 * m['top3']:.1f} %" if m else "-")
        lines.append(line)
    return lines


def print_table(table: list[list[Any]], statistic: str) -> None:
    print(f"\nPer metric: Spearman rho vs host time ({statistic} of the samples) / top-1 regret / top-3 regret; "
          f"load {loadavg()}")
    print(tabulate(table, headers=["kernel", "case", "problem", "configs", "A/A rho", "A/A top-1", *METRICS]))


def reanalyse(files: list[Path], statistic: str) -> int:
    table = []
    for path in files:
        for name, result in json.loads(path.read_text()).items():
            kernel, case = name.split("/")
            configs = [Config(c["config"], c["problem"], Path(), [], "", c["samples_ns"], c["counters"])
                       for c in result["configs"] if c["counters"]]
            rounds = max((len(c.samples) for c in configs), default=0)
            table += table_lines(kernel, case, analyse(configs, rounds, statistic))
    print_table(table, statistic)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--max-configs", type=int, default=0, help="at most N configs per kernel (evenly spread)")
    parser.add_argument("--limit", action="append", default=[], metavar="KERNEL/CASE=N",
                        help="at most N configs (evenly spread) for one kernel and case, e.g. matmul/bench=30")
    parser.add_argument("--jobs", type=int, default=2, help="QEMU counting runs at a time (timing is serial)")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved timing rounds (default 8)")
    parser.add_argument("--runs", type=int, default=3, help="timed launches per run, at least (default 3)")
    parser.add_argument("--span", type=float, default=0.2,
                        help="seconds a run's timed launches should span (more launches for short ones; default 0.2)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--statistic", choices=sorted(STATISTICS), default="median",
                        help="a config's time from its samples (default median)")
    parser.add_argument("--count-only", action="store_true",
                        help="build and count, time nothing: counts do not depend on the load and are cached, so "
                             "a busy machine can fill the cache and a quiet one time later")
    parser.add_argument("--reanalyse", type=Path, nargs="+", default=None, metavar="JSON",
                        help="measure nothing: print the table of earlier --json files (e.g. with --statistic min)")
    args = parser.parse_args()
    if args.reanalyse:
        return reanalyse(args.reanalyse, args.statistic)
    limits = {k: int(v) for k, _, v in (item.partition("=") for item in args.limit)}
    l1d, l2 = host_cache_geometry()
    model = timing_model.host_core_model()
    print(f"host build -march={HOST_MARCH} -static; llvm-mca model {model.name}; cache model "
          f"L1D {l1d.plugin_arg()} L2 {l2.plugin_arg()} (bytes:ways:line, from sysfs); load {loadavg()}",
          flush=True)
    results: dict[str, Any] = {}
    table = []
    for kernel in args.kernels.split(","):
        spec = load_kernel_module(REPO / "kernels" / f"{kernel}.py")
        for case in args.cases.split(","):
            chosen = spread(list(spec.configs), limits.get(f"{kernel}/{case}", args.max_configs))
            started = time.time()
            configs: list[Config] = []
            for config in chosen:
                kwargs = dict(getattr(config, "kwargs", config))
                try:
                    art = build_item(spec, case, kwargs, isa=HOST_ISA)
                except Exception as exc:  # one config failing never stops the rest
                    print(f"  {kernel}/{case} {spec.config_id(kwargs)}: build failed: {exc}", flush=True)
                    continue
                problem = ",".join(f"{k}={v}" for k, v in spec.problem_of(kwargs).items()) or "-"
                configs.append(Config(spec.config_id(kwargs), problem, art.elf, list(art.argv), art.kernel_symbol))
            built = time.time()
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                errors = pool.map(lambda c: count(c, l1d, l2, args.timeout), configs)
                for c, error in zip(configs, errors, strict=True):
                    if error:
                        print(f"  {kernel}/{case} {c.config_id}: not counted: {error}", flush=True)
            counted = time.time()
            if args.count_only:
                print(f"{kernel}/{case}: {len(configs)} configs; build {built - started:.0f} s, count "
                      f"{counted - built:.0f} s (cached in {COUNTS_CACHE}); load {loadavg()}", flush=True)
                continue
            rng = random.Random(19)
            for _ in range(args.rounds):
                time_round(configs, args.runs, args.warmup, args.span, args.timeout, rng)
            timed = time.time()
            rows = analyse([c for c in configs if c.counters], args.rounds, args.statistic)
            print(f"{kernel}/{case}: {len(configs)} configs; build {built - started:.0f} s, count "
                  f"{counted - built:.0f} s, time {timed - counted:.0f} s; load {loadavg()}", flush=True)
            for line in table_lines(kernel, case, rows):
                table.append(line)
                print("  " + " | ".join(map(str, line)), flush=True)
            results[f"{kernel}/{case}"] = {"rows": rows, "configs": [
                {"config": c.config_id, "problem": c.problem, "median_ns": median_time(c), "counters": c.counters,
                 "samples_ns": c.samples} for c in configs]}
    if args.count_only:
        return 0
    print_table(table, args.statistic)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
