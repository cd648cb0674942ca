"""How long the kernel suite takes on QEMU, cold and warm, side by side in one run (issue 19's bar: the 150
matmul emu configs with -n 2 in <= 60 s cold and <= 10 s warm).

    .venv/bin/python benchmarks/pipeline.py             # matmul cold + warm, then the 300-item suite warm
    .venv/bin/python benchmarks/pipeline.py --no-suite  # matmul only

Every session is a real `pytest kernels --rvtune-case emu -n 2` subprocess on a cache in a temp dir
(RVTUNE_CACHE_DIR: "cold" = empty build, golden, data-image and count caches). The whole suite (`make bench`'s
selection) runs once on the cache the matmul runs left (the rest of it cold: shown, not the figure) and again
warm. The reference, measured in the same run on the same cache: `pytest --collect-only` of the same
selection with -n 2, i.e. interpreter start-up, imports, xdist workers and collection and no item at all (a
warm session cannot be faster than that). The load average (1 min) is printed before and after every
session: the machine is shared, wall times move with it; the CPU seconds of each session (pytest, workers,
clang, QEMU: every child process) do not, so they say what an idle machine would take.

Per session: wall time, items, outcomes, the sums over items of build time, ELF run time and the rest
(pytest + the plugin around each item), and how many runs came from the count cache.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

REPO = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest"]


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def _children_cpu() -> float:
    """User + system CPU seconds of every finished child process (pytest, its workers, clang, QEMU...)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def session(cache: Path, out: Path, selection: list[str], collect_only: bool = False) -> dict[str, Any]:
    results = out / "results.jsonl"
    args = [*PYTEST, "kernels", "-q", "-p", "no:cacheprovider", "--rvtune-case", "emu", "-n", "2",
            "--benchmark-disable", "--rvtune-results", str(results), *selection]
    if collect_only:
        args.append("--collect-only")
    env = {**os.environ, "RVTUNE_CACHE_DIR": str(cache)}
    load_before = loadavg()
    cpu_before = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    cpu = _children_cpu() - cpu_before
    if proc.returncode not in (0, 5) and not collect_only:
        sys.exit(f"session failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()] \
        if results.is_file() else []
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    summary = next((ln for ln in proc.stdout.splitlines() if ln.startswith("rvtune: ")), "")
    distinct = next((ln for ln in proc.stdout.splitlines() if "distinct" in ln), "")
    return {"wall": wall, "cpu": cpu, "load": f"{load_before} -> {loadavg()}", "items": len(records),
            "outcomes": outcomes,
            "build": sum(r.get("build_seconds") or 0.0 for r in records),
            "run": sum(r.get("run_seconds") or 0.0 for r in records),
            "cached": sum(bool(r.get("counts_cached")) for r in records), "summary": summary,
            "distinct": distinct}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-suite", action="store_true", help="leave out the whole-suite sessions")
    parser.add_argument("--keep-results", type=Path, metavar="DIR",
                        help="copy each session's results JSONL to DIR/session<N>.jsonl (e.g. to compare the "
                             "counts of two trees)")
    args = parser.parse_args()
    matmul = ["-k", "matmul"]
    plan = [("matmul 150, cold", matmul, False), ("matmul 150, warm", matmul, False),
            ("matmul, collect only (reference)", matmul, True)]
    if not args.no_suite:
        plan += [("suite 300, rest cold (fill)", [], False), ("suite 300, warm", [], False),
                 ("suite, collect only (reference)", [], True)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="rvtune-pipeline-") as tmp:
        cache = Path(tmp) / "cache"
        for i, (name, selection, collect_only) in enumerate(plan):
            out = Path(tmp) / f"s{i}"
            out.mkdir()
            print(f"running: {name} ...", file=sys.stderr, flush=True)
            s = session(cache, out, selection, collect_only)
            if args.keep_results and (out / "results.jsonl").is_file():
                args.keep_results.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(out / "results.jsonl", args.keep_results / f"session{i}.jsonl")
            rows.append([name, f"{s['wall']:.1f}", f"{s['cpu']:.1f}", s["items"] or "-",
                         ", ".join(f"{n} {o}" for o, n in sorted(s["outcomes"].items())) or "-",
                         f"{s['build']:.1f}", f"{s['run']:.1f}", s["cached"], s["load"]])
            if s["summary"]:
                print(f"  {s['summary']}", file=sys.stderr, flush=True)
            if s["distinct"]:
                print(f"  {s['distinct']}", file=sys.stderr, flush=True)
    print(tabulate(rows, headers=["session (-n 2, emu)", "wall s", "CPU s", "items", "outcomes", "build s (sum)",
                                  "ELF run s (sum)", "runs from count cache", "load 1 min before -> after"]))
    cold, warm, floor = (float(r[1]) for r in rows[:3])
    cold_cpu, warm_cpu = float(rows[0][2]), float(rows[1][2])
    print(f"\nmatmul: cold {cold:.1f} s (bar 60), warm {warm:.1f} s (bar 10); warm / collect-only reference "
          f"{warm / floor:.2f}x; cold / warm {cold / warm:.1f}x")
    print(f"CPU (load-independent; on 2 idle cores the wall time is about CPU / 2 at best): cold {cold_cpu:.1f} s, "
          f"warm {warm_cpu:.1f} s")


if __name__ == "__main__":
    main()
