"""Does the compare gate tell machine drift from a code change on this machine's own clock (target host)?

    .venv/bin/python benchmarks/confirm_drift.py            # matmul emu, all 150 configs: ~7 minutes on the team VM
    .venv/bin/python benchmarks/confirm_drift.py --quick    # BLOCK_SIZE_K=8 only (30 configs): ~2 minutes

Three real `pytest kernels -k matmul --rvtune-target host --rvtune-case emu` sessions, one after the other:

- A and A2: the same code twice (an A/A pair: every regression flagged between them is drift);
- S: a copy of the project whose matmul makes one more pass over its accumulator per K block (a real slow-down,
  largest at small BLOCK_SIZE_K).

Then `rvtune compare A A2` and `rvtune compare A S`, each judged on the sessions' samples alone and with
`--confirm` (the base and new ELF re-run interleaved, confirm.py), side by side. Figures are printed, never
asserted: the machine may be shared. What to look for: A/A flags that --confirm refutes, and S's flags kept.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

REPO = Path(__file__).resolve().parents[1]
RVTUNE = [sys.executable, "-m", "pytest_rvtune.cli"]
#: The slow-down: one more pass over the accumulator per K block (x + x * 0.0 cannot be folded without
#: fast-math), the same answer.
SLOW_DOWN = ('        acc = tl.dot(a, b, acc, input_precision="ieee")\n',
             '        acc = tl.dot(a, b, acc, input_precision="ieee")\n        acc = acc + acc * 0.0\n')


def slowed_project(root: Path) -> Path:
    """A copy of kernels/matmul.py (and its golden data) with SLOW_DOWN applied."""
    (root / "kernels").mkdir(parents=True)
    source = (REPO / "kernels" / "matmul.py").read_text()
    if SLOW_DOWN[0] not in source:
        raise SystemExit("kernels/matmul.py changed: update SLOW_DOWN in benchmarks/confirm_drift.py")
    (root / "kernels" / "matmul.py").write_text(source.replace(*SLOW_DOWN))
    shutil.copytree(REPO / "golden" / "matmul", root / "golden" / "matmul")
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = kernels\n")
    return root


def session(cwd: Path, results: Path, config_filter: str | None) -> float:
    args = [sys.executable, "-m", "pytest", "kernels", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "-k", "matmul", "--rvtune-target", "host", "--rvtune-case", "emu", f"--rvtune-results={results}",
            "--benchmark-disable"]
    if config_filter:
        args += ["--rvtune-config", config_filter]
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"session in {cwd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return time.perf_counter() - started


def compare(base: Path, new: Path, confirm: bool) -> dict[str, object]:
    args = [*RVTUNE, "compare", str(base), str(new), "--format", "json", *(["--confirm"] if confirm else [])]
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    rows = json.loads(proc.stdout)
    time_rows = [r for r in rows if r["metric"] == "time"]
    regressed = [r["change"] for r in time_rows if r["verdict"] == "regressed"]
    interleaved = [float(m.group(1)) for r in time_rows if (m := re.search(r"interleaved ([+-]?[\d.e-]+)%", r["note"]))]
    return {"exit": proc.returncode, "seconds": seconds, "regressed": len(regressed),
            "unconfirmed": sum(r["verdict"] == "unconfirmed" for r in time_rows),
            "flagged change": _span(regressed), "interleaved change": _span(interleaved)}


def _span(values: list[float]) -> str:
    if not values:
        return ""
    return f"{min(values):+.1f}..{max(values):+.1f}% (median {statistics.median(values):+.1f}%)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="BLOCK_SIZE_K=8 only (30 configs)")
    args = parser.parse_args()
    config_filter = "BLOCK_SIZE_K=8" if args.quick else None
    with tempfile.TemporaryDirectory(prefix="rvtune-confirm-") as tmp:
        out = Path(tmp)
        runs = {"A": out / "a.jsonl", "A2": out / "a2.jsonl", "S": out / "s.jsonl"}
        walls = {"A": session(REPO, runs["A"], config_filter), "A2": session(REPO, runs["A2"], config_filter),
                 "S": session(slowed_project(out / "slow"), runs["S"], config_filter)}
        print("sessions: " + ", ".join(f"{k} {v:.0f} s" for k, v in walls.items()))
        table = []
        for label, new in (("A/A (same code)", runs["A2"]), ("A/S (slowed code)", runs["S"])):
            for confirm in (False, True):
                row = compare(runs["A"], new, confirm)
                table.append({"pair": label, "gate": "--confirm" if confirm else "samples alone", **row})
        print(tabulate(table, headers="keys"))


if __name__ == "__main__":
    main()
