"""Peak memory of `rvtune report`, `rvtune compare` and `rvtune export-best` on a results file of many records.

    .venv/bin/python benchmarks/results_memory.py                 # 10^5 records
    .venv/bin/python benchmarks/results_memory.py --records 20000

Writes two results files in a temp dir with the results tests' record shape (tests/results/results_data.py
make_record: 4 kernels x 5 cases x 5,000 configs, 5 time samples, 3 counters, checks, a failure message on every
tenth item), the second with each sample 2 % slower, then runs each command in its own process and prints the
input size, the child's peak RSS (getrusage ru_maxrss via wait4), peak / input, the wall time and the load
average. A bare `rvtune --version` gives the interpreter's own footprint for scale. The ratio is against every
file the command reads (compare reads two).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "results"))

from results_data import make_record  # noqa: E402

KERNELS = ("matmul", "softmax", "layer_norm", "flash_attention")
CASES = ("emu", "small", "medium", "large", "huge")


def records(count: int, slower: float) -> Any:
    per_group = max(1, count // (len(KERNELS) * len(CASES)))
    for kernel in KERNELS:
        for case in CASES:
            for n in range(per_group):
                config = {"BLOCK_SIZE_M": 16 * (1 + n % 8), "BLOCK_SIZE_N": 16 * (1 + n // 8 % 8),
                          "BLOCK_SIZE_K": n // 64 + 1, "num_warps": 4}
                base = 1000.0 + (n * 7919) % 5000
                failed = n % 10 == 9
                samples = [] if failed else [base * slower * (1 + 0.01 * s) for s in range(5)]
                counters = {} if failed else {"x60_cycles": base * 3, "launch_insns": base * 5,
                                              "kernel_insns": base * 4}
                yield make_record(kernel, case, config, samples, target="qemu",
                                  outcome="wrong" if failed else "passed", counters=counters,
                                  case_params={"M": 128, "N": 256})


def write(path: Path, count: int, slower: float) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for record in records(count, slower):
            out.write(json.dumps(record) + "\n")
    return path


def peak(argv: list[str], cwd: Path) -> tuple[int, float, int]:
    """(peak RSS in bytes, wall seconds, exit code) of one CLI run in a child process."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pytest_rvtune.cli", *argv], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024, time.perf_counter() - started, proc.returncode


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    mb = 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="rvtune-results-memory-") as tmp:
        work = Path(tmp)
        base = write(work / "base.jsonl", args.records, 1.0)
        new = write(work / "new.jsonl", args.records, 1.02)
        size = base.stat().st_size
        print(f"{args.records} records: {size / mb:.1f} MB per file; load average {loadavg()}")
        commands = {
            "rvtune --version": (["--version"], 0),
            "report": (["report", str(new), "--no-plots", "--out", str(work / "rep")], size),
            "report --format csv": (["report", str(new), "--no-plots", "--out", str(work / "rep"),
                                     "--format", "csv"], size),
            "compare": (["compare", str(base), str(new)], 2 * size),
            "export-best": (["export-best", str(new), "--out", str(work / "tuned")], size),
        }
        print(f"{'command':22} {'input MB':>9} {'peak RSS MB':>12} {'peak/input':>11} {'wall s':>7} exit  load")
        for name, (argv, read) in commands.items():
            rss, wall, code = peak(argv, work)
            ratio = f"{rss / read:.2f}x" if read else "-"
            print(f"{name:22} {read / mb:9.1f} {rss / mb:12.1f} {ratio:>11} {wall:7.1f} {code:4}  {loadavg()}")


if __name__ == "__main__":
    main()
