"""What the plugin costs around the work it drives: the full matmul space on QEMU, cold and warm, -n 0 and -n 2.

    .venv/bin/python benchmarks/plugin_overhead.py            # the full space (150 items), ~6 minutes
    .venv/bin/python benchmarks/plugin_overhead.py --quick    # BLOCK_SIZE_M=16 only (25 items)

Each session is a real `pytest kernels -k matmul --rvtune-case small` subprocess. "cold" starts from an empty
build cache (RVTUNE_CACHE_DIR in a temp dir), "warm" repeats the session on that cache. Per item, from pytest's
JUnit XML (setup + call + teardown) and the results file:

- overhead = item time - build time - ELF run time   (what the plugin and pytest add: the target is < 50 ms)
- build    = build_item's time (on a warm run: the cache look-ups only)
- run      = the ELF's own run on the target (QEMU start-up included)

Figures are printed, never asserted: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from tabulate import tabulate

REPO = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest"]


def run_session(cache: Path, workers: int, config_filter: str | None, out: Path) -> dict[str, Any]:
    """One pytest session over the matmul space; returns its wall time and per-item figures."""
    junit, results = out / "junit.xml", out / "results.jsonl"
    args = [*PYTEST, "kernels", "-q", "-p", "no:cacheprovider", "-k", "matmul", "--rvtune-case", "small",
            "--benchmark-disable", "--junitxml", str(junit), "--rvtune-results", str(results),
            "-o", "junit_duration_report=total", "-n", str(workers)]
    if config_filter:
        args += ["--rvtune-config", config_filter]
    env = {**os.environ, "RVTUNE_CACHE_DIR": str(cache)}
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    summary = next((line for line in proc.stdout.splitlines() if line.startswith("rvtune: ")), "")
    if not summary:
        sys.exit(f"session failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    item_time = {}
    for case in ET.parse(junit).iter("testcase"):
        nodeid = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        item_time[nodeid] = float(case.get("time", 0.0))
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    overhead, builds, runs = [], [], []
    for r in records:
        total = item_time.get(r["nodeid"])
        if total is None:
            continue
        build, run = r.get("build_seconds") or 0.0, r.get("run_seconds") or 0.0
        overhead.append(total - build - run)
        builds.append(build)
        runs.append(run)
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    return {"wall": wall, "items": len(records), "outcomes": outcomes, "overhead": overhead, "build": builds,
            "run": runs, "item_total": sum(item_time.values()), "summary": summary}


def ms(values: list[float], how: str = "median") -> str:
    if not values:
        return "-"
    value = statistics.median(values) if how == "median" else statistics.fmean(values)
    return f"{value * 1e3:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="BLOCK_SIZE_M=16 only (25 items)")
    args = parser.parse_args()
    config_filter = "BLOCK_SIZE_M=16" if args.quick else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="rvtune-overhead-") as tmp:
        for workers in (0, 2):
            cache = Path(tmp) / f"cache-n{workers}"  # each -n gets its own cold cache
            cache.mkdir()
            for phase in ("cold", "warm"):
                out = Path(tmp) / f"n{workers}-{phase}"
                out.mkdir()
                print(f"running: -n {workers}, {phase} cache ...", file=sys.stderr, flush=True)
                s = run_session(cache, workers, config_filter, out)
                # per-process fixed cost (start-up, imports, collection) = wall - item time / workers
                fixed = s["wall"] - s["item_total"] / max(workers, 1)
                rows.append([f"-n {workers}", phase, s["items"], f"{s['wall']:.1f}",
                             f"{s['wall'] / max(s['items'], 1) * 1e3:.0f}", ms(s["overhead"]),
                             ms(s["overhead"], "mean"), ms(s["build"]), ms(s["run"]), f"{fixed:.1f}",
                             ", ".join(f"{n} {o}" for o, n in sorted(s["outcomes"].items()))])
                print(f"  {s['summary']}", file=sys.stderr, flush=True)
    print(tabulate(rows, headers=["xdist", "cache", "items", "wall s", "wall/item ms", "overhead ms (median)",
                                  "overhead ms (mean)", "build ms (median)", "ELF run ms (median)",
                                  "fixed s", "outcomes"]))
    print("\noverhead = item time (setup+call+teardown) - build - ELF run; target < 50 ms on a warm re-run")


if __name__ == "__main__":
    main()
