"""Search strategies on an aiter-sized space: each strategy's regret against an exhaustive pass, by budget.

    .venv/bin/python benchmarks/search.py --exhaustive RUN.jsonl          # replay on a finished exhaustive pass
    .venv/bin/python benchmarks/search.py --run-exhaustive RUN.jsonl      # run the pass first (hours on 2 cores)
    .venv/bin/python benchmarks/search.py --exhaustive RUN.jsonl --check-real tpe:5

The space is benchmarks/search_kernels/gemm_space.py: 3,000 GEMM configs (block sizes, grouping, tile order, K
unrolling) on four M buckets (M = 16, 32, 64, 128 with N = 64, K = 128), as aiter's tuner runs 3,456 configs over
its M buckets. The exhaustive pass is a normal pytest session over every item (`--config` restricts it to a tile).
Each strategy is then replayed on it: an evaluation is a look-up of the item's x60_cycles in the pass (the metric
is deterministic: evaluating the item again gives the same count, which the count cache would serve), so many
seeds and budgets cost seconds. Printed per strategy and budget (evaluations, % of the (config, case) trials): the
regret per M bucket (the search's best over the exhaustive best, median and worst over seeds) and how many (seed,
bucket) pairs ended within 2 % of the exhaustive best. `--check-real STRATEGY:PERCENT` also runs that search for
real (`rvtune tune`: build, QEMU, records) and checks it chose the same items as its replay. The load average is
printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_rvtune.results.runs import load_run  # noqa: E402
from pytest_rvtune.search.engine import run_search  # noqa: E402
from pytest_rvtune.search.space import SearchSpace, Trial, by_size  # noqa: E402
from pytest_rvtune.search.strategies import STRATEGIES, make_strategy  # noqa: E402
from pytest_rvtune.spec import load_kernel_module  # noqa: E402

KERNEL = REPO / "benchmarks" / "search_kernels" / "gemm_space.py"
CASES = ("M16", "M32", "M64", "M128")
METRIC = "x60_cycles"
GOAL = 0.02


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_exhaustive(results: Path, config_filter: str | None) -> None:
    """Every item of the space, a normal pytest session on two workers (one record per item)."""
    cmd = [sys.executable, "-m", "pytest", str(KERNEL.parent), "-o", f"rvtune_kernel_dirs={KERNEL.parent}",
           "-p", "no:cacheprovider", "--benchmark-disable", "-q", "-n", "2", f"--rvtune-results={results}",
           *(arg for case in CASES for arg in ("--rvtune-case", case)),
           *(["--rvtune-config", config_filter] if config_filter else [])]
    started = time.perf_counter()
    print(f"exhaustive pass: {' '.join(cmd)} (load {loadavg()})", flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)
    print(f"exhaustive pass: {time.perf_counter() - started:.0f} s wall (load {loadavg()})")


def exhaustive_values(path: Path) -> tuple[SearchSpace, dict[Trial, float | None], dict[str, float]]:
    """The space the pass covered (the kernel's configs it holds on every case, in the kernel's order), each
    trial's value, and the pass's cost."""
    run = load_run(path)
    spec = load_kernel_module(KERNEL)
    records = [r for r in run.records if r.kernel == spec.name]
    held: dict[str, set[str]] = {}
    for record in records:
        held.setdefault(record.case, set()).add(record.config_id)
    cases = [c for c in CASES if c in held]
    common = set.intersection(*(held[c] for c in cases))
    configs = [c for c in spec.configs if spec.config_id(c) in common]
    ids = [spec.config_id(c) for c in configs]
    space = SearchSpace([dict(c.kwargs) for c in configs], ids, by_size(cases, spec.cases))
    index = {cid: n for n, cid in enumerate(ids)}
    values: dict[Trial, float | None] = {}
    for record in records:
        if record.config_id in index and record.case in cases:
            value = record.counters.get(METRIC) if record.valid else None
            values[Trial(index[record.config_id], record.case)] = value
    build = sum(float(r.raw.get("build_seconds") or 0.0) for r in records)
    run_s = sum(float(r.raw.get("run_seconds") or 0.0) for r in records)
    return space, values, {"build": build, "run": run_s, "items": float(len(records))}


def replay(space: SearchSpace, values: dict[Trial, float | None], strategy: str, budget: int,
           seed: int) -> list[Trial]:
    outcome = run_search(space, make_strategy(strategy, space, budget, seed), budget, lambda t, _: values[t])
    return [e.trial for e in outcome.evaluations]


def regrets(space: SearchSpace, values: dict[Trial, float | None], evaluated: list[Trial]) -> dict[str, float]:
    out = {}
    for case in space.cases:
        best = min(v for t, v in values.items() if t.case == case and v is not None)
        found = [values[t] for t in evaluated if t.case == case and values[t] is not None]
        out[case] = min(found) / best - 1 if found else float("inf")  # type: ignore[type-var]
    return out


def check_real(space: SearchSpace, values: dict[Trial, float | None], spec_text: str, scratch: Path) -> None:
    """The search run for real by `rvtune tune` chooses the items its replay chose."""
    strategy, percent = spec_text.split(":")
    budget = max(1, round(space.trials * float(percent) / 100))
    results = scratch / f"real-{strategy}-{percent}.jsonl"
    results.unlink(missing_ok=True)
    # the tile the pass covered, as a --config filter (every key with the values the space holds)
    tile = ";".join(f"{key}={','.join(map(str, values))}" for key, values in space.values.items())
    cmd = [sys.executable, "-m", "pytest_rvtune.cli", "tune", str(KERNEL), "--strategy", strategy, "--budget",
           str(budget), "--results", str(results), *(a for c in space.cases for a in ("--case", c)),
           "--config", tile]
    started = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    index = {cid: n for n, cid in enumerate(space.ids)}
    real = [Trial(index[r.config_id], r.case)
            for r in sorted(load_run(results).records, key=lambda r: r.raw.get("search", {}).get("step", 0))]
    same = real == replay(space, values, strategy, budget, 0)
    print(f"real {strategy} search, budget {budget}: {len(real)} items in {wall:.0f} s wall; the same items as "
          f"its replay: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exhaustive", type=Path, help="a finished exhaustive pass (results file)")
    parser.add_argument("--run-exhaustive", type=Path, metavar="RUN.jsonl", help="run the pass into this file first")
    parser.add_argument("--config", default=None, help="with --run-exhaustive: a tile of the space (--rvtune-config)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budgets", default="2,5,10,15", help="percent of the (config, case) trials")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--check-real", default=None, metavar="STRATEGY:PERCENT")
    args = parser.parse_args()
    path = args.exhaustive or args.run_exhaustive
    if path is None:
        parser.error("give --exhaustive RUN or --run-exhaustive RUN")
    if args.run_exhaustive:
        run_exhaustive(args.run_exhaustive, args.config)
    print(f"load average before: {loadavg()} ({os.cpu_count()} cores)")
    space, values, cost = exhaustive_values(path)
    print(f"space: {len(space):,} configs x {len(space.cases)} cases ({', '.join(space.cases)}) = {space.trials:,} "
          f"trials; exhaustive pass {path.name}: {cost['items']:,.0f} items, {cost['build']:,.0f} s building + "
          f"{cost['run']:,.0f} s running (summed over its workers)")
    for case in space.cases:
        scored = sorted(v for t, v in values.items() if t.case == case and v is not None)
        print(f"  {case}: exhaustive best {scored[0]:,.0f} {METRIC}, median {statistics.median(scored):,.0f}, "
              f"worst {scored[-1]:,.0f}; configs within 2 % of the best: {sum(v <= scored[0] * 1.02 for v in scored)}")
    rows = []
    started = time.perf_counter()
    for strategy in args.strategies.split(","):
        for percent in (float(p) for p in args.budgets.split(",")):
            budget = max(1, round(space.trials * percent / 100))
            per_case: dict[str, list[float]] = {c: [] for c in space.cases}
            took = time.perf_counter()
            for seed in range(args.seeds):
                for case, regret in regrets(space, values, replay(space, values, strategy, budget, seed)).items():
                    per_case[case].append(regret)
            within = sum(r <= GOAL for rs in per_case.values() for r in rs)
            rows.append({"strategy": strategy, "budget": f"{budget:,} ({percent:g} %)",
                         **{c: f"{statistics.median(rs):.1%} / {max(rs):.1%}" for c, rs in per_case.items()},
                         "within 2 %": f"{within}/{len(space.cases) * args.seeds}",
                         "replay s": f"{time.perf_counter() - took:.1f}"})
    print(f"\nregret of the search's best vs the exhaustive best (median / worst of {args.seeds} seeds), by "
          f"{METRIC}:")
    print(tabulate(rows, headers="keys", tablefmt="github"))
    print(f"replays: {time.perf_counter() - started:.0f} s; load average after: {loadavg()}")
    if args.check_real:
        check_real(space, values, args.check_real, path.parent)
        print(f"load average after the real search: {loadavg()}")


if __name__ == "__main__":
    main()
