"""What the shortlist workflow saves, and what it costs in tuning quality, on the host (the real target here).

    .venv/bin/python benchmarks/shortlist.py                       # softmax + layer_norm, emu case, top 3
    .venv/bin/python benchmarks/shortlist.py -k matmul --size 5

Three real pytest sessions on one cache in a temp dir, side by side in one run:
1. QEMU: every config, ranked by launch_insns (the emulated run the shortlist comes from);
2. host, every config: the reference (what tuning on the board without a shortlist costs);
3. host, `--rvtune-shortlist <run 1> --rvtune-shortlist-size N`: only the top N distinct results per group.
Printed: wall time and items of each session, and per (kernel, case, problem) the best median host time among
all configs vs among the shortlist (regret: how much slower the shortlist's best is) and where the shortlist's
best stands in the full host ranking. Host times on a shared machine are noisy: the load average is printed
before and after every session.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_rvtune.results.report import ranked  # noqa: E402
from pytest_rvtune.results.runs import group_by_problem, load_run  # noqa: E402


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def session(cache: Path, results: Path, args: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest", "kernels", "-q", "-p", "no:cacheprovider", "--benchmark-disable",
           "--rvtune-results", str(results), *args]
    before = loadavg()
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "RVTUNE_CACHE_DIR": str(cache)}, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    records = load_run(results).records
    return {"wall": wall, "load": f"{before} -> {loadavg()}", "items": len(records),
            "target": sum(r.raw.get("run_seconds") or 0.0 for r in records), "stdout": proc.stdout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="softmax or layer_norm", help="pytest -k selection (default: %(default)s)")
    parser.add_argument("--case", default="emu")
    parser.add_argument("--size", type=int, default=3, help="--rvtune-shortlist-size (default 3)")
    args = parser.parse_args()
    common = ["-k", args.k, "--rvtune-case", args.case]
    with tempfile.TemporaryDirectory(prefix="rvtune-shortlist-") as tmp:
        cache, out = Path(tmp) / "cache", Path(tmp)
        print("running: QEMU, every config ...", file=sys.stderr, flush=True)
        emu = session(cache, out / "emu.jsonl", [*common, "-n", "2"])
        print("running: host, every config ...", file=sys.stderr, flush=True)
        full = session(cache, out / "full.jsonl", [*common, "--rvtune-target", "host"])
        print("running: host, shortlist ...", file=sys.stderr, flush=True)
        short = session(cache, out / "short.jsonl", [*common, "--rvtune-target", "host", "--rvtune-shortlist",
                                                     str(out / "emu.jsonl"), "--rvtune-shortlist-size", str(args.size)])
        print(tabulate([[name, s["items"], f"{s['wall']:.1f}", f"{s['target']:.1f}", s["load"]] for name, s in (
            ("QEMU, every config (-n 2)", emu), ("host, every config (reference)", full),
            (f"host, shortlist top {args.size}", short))],
            headers=["session", "items", "wall s", "on the target s (runs)", "load 1 min before -> after"]))
        print(f"\nhost: the shortlist session {short['wall']:.1f} s vs every config {full['wall']:.1f} s "
              f"({full['wall'] / short['wall']:.1f}x less); time on the target {short['target']:.1f} s vs "
              f"{full['target']:.1f} s ({full['target'] / max(short['target'], 1e-9):.1f}x less). The QEMU ranking "
              f"run ({emu['wall']:.1f} s) needs no board.")
        full_groups = group_by_problem(load_run(out / "full.jsonl").records)
        short_groups = group_by_problem(load_run(out / "short.jsonl").records)
        rows = []
        for key, group in sorted(full_groups.items()):
            order = ranked(group, "time")
            picked = ranked(short_groups.get(key, []), "time")
            if not order or not picked:
                continue
            best, best_short = order[0].median_ns, picked[0].median_ns
            place = next(i for i, r in enumerate(order, 1) if r.config_id == picked[0].config_id)
            # the shortlist's pick timed in the full session too: regret without the drift between sessions
            same_session = order[place - 1].median_ns
            rows.append([f"{key[1]} / {key[2]}{' ' + key[3] if key[3] else ''}", len(order), len(picked),
                         f"{best / 1e3:.1f}", f"{best_short / 1e3:.1f}", f"{(best_short / best - 1) * 100:+.1f}%",
                         f"#{place}", f"{(same_session / best - 1) * 100:+.1f}%"])
        print()
        print(tabulate(rows, headers=["kernel / case", "configs", "timed", "best us (all)", "best us (shortlist)",
                                      "regret", "shortlist's best in the full ranking",
                                      "its regret in the full session"]))


if __name__ == "__main__":
    main()
