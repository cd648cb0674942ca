"""Triton's own language tests (``python/test/unit/language/test_core.py``) as a conformance suite for rvtune.

    .venv/bin/python benchmarks/triton_conformance.py PATH/TO/test_core.py                  # host, every item
    .venv/bin/python benchmarks/triton_conformance.py PATH/TO/test_core.py --target rv64 --sample 1000

The test file is not ours and is never committed: pass its path (Triton's checkout, or triton-cpu's copy). It
is copied into a scratch directory (so the conftest and pytest.ini beside it stay out of the way) and run by
pytest with the rvtune CPU driver active (triton_conformance_plugin.py: ``device`` = "cpu", fixtures,
sampling, verdicts) in xdist workers, so a kernel that crashes its process costs one item, not the run.

Prints per test function: run, pass, wrong, refused, gpu stage, other, skipped; then the pass rate over the items
that reached our lowering (with and without the "gpu stage" items: kernels that ran, in tests that then read a GPU
compiler stage such as ``asm["ttgir"]``, which a CPU backend does not have), one line per wrong result, and the most
common refusals. Exit status 1 when any result is wrong.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tabulate import tabulate

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VERDICTS = ("pass", "wrong", "refused", "gpu stage", "other", "skipped")


def run_tests(test_file: Path, target: str, sample: int, seed: int, workers: int, keyword: str | None,
              timeout: float | None, shuffle: bool = False, stop_after: float | None = None,
              torch_cpu_matmul: bool = False, journal: Path | None = None) -> tuple[list[dict[str, Any]], bool]:
    """Run the file under pytest with the driver active: the verdict of every item run, and whether it was
    stopped early.

    ``stop_after`` seconds: pytest is interrupted (SIGINT, as Ctrl-C) and the verdicts of the items that
    finished are returned; with ``shuffle`` those are a random sample of the file."""
    with tempfile.TemporaryDirectory(prefix="rvtune-conformance-") as tmp:
        work = Path(tmp)
        shutil.copy(test_file, work / test_file.name)
        (work / "pytest.ini").write_text("[pytest]\n")
        report = work / "verdicts.json"
        cmd = [sys.executable, "-m", "pytest", str(work / test_file.name), "-q", "--tb=no", "-rN",
               "--disable-warnings", "-p", "no:rvtune",
               "-p", "no:cacheprovider", "-p", "triton_conformance_plugin", "--rootdir", str(work),
               "--conformance-target", target, "--conformance-sample", str(sample),
               "--conformance-seed", str(seed), "--conformance-report", str(report), "-o", "console_output_style=count"]
        if workers > 0:
            cmd += ["-n", str(workers)]
        if keyword:
            cmd += ["-k", keyword]
        if shuffle:
            cmd += ["--conformance-shuffle"]
        if torch_cpu_matmul:
            cmd += ["--conformance-torch-cpu-matmul"]
        if journal:
            cmd += ["--conformance-journal", str(journal)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), str(REPO), env.get("PYTHONPATH")) if p)
        # A runner started in the background by a shell (`cmd &`) inherits SIGINT ignored, and so would pytest:
        # --stop-after's SIGINT would then do nothing and the run's verdicts be lost. pytest gets it back.
        proc = subprocess.Popen(cmd, cwd=work, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        stopped = False
        try:
            proc.wait(timeout=stop_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # pytest stops, its session-finish hook writes what finished
            stopped = True
            print(f"\nstopped after {stop_after:.0f} s (--stop-after): the verdicts below are the items that "
                  "finished", flush=True)
            try:
                proc.wait(timeout=timeout or 300)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if journal:  # every verdict of this run and of the runs it resumes
            from triton_conformance_plugin import read_journal

            return read_journal(journal), stopped
        if not report.exists():
            raise SystemExit(f"pytest ended (exit status {proc.returncode}) without verdicts: see its output above")
        return json.loads(report.read_text()), stopped


def summary_rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per test function (in first-run order), then the total."""
    by_function: dict[str, collections.Counter] = {}
    for r in results:
        by_function.setdefault(r["function"], collections.Counter())[r["verdict"]] += 1
    total: collections.Counter = collections.Counter()
    rows = []
    for name, counts in by_function.items():
        total.update(counts)
        rows.append([name, sum(counts.values()), *(counts[v] for v in VERDICTS)])
    rows.append(["TOTAL", sum(total.values()), *(total[v] for v in VERDICTS)])
    return rows


def reached_pass_rate(results: list[dict[str, Any]], gpu_stage: bool = True) -> tuple[int, int]:
    """(passed, reached): items that reached our lowering and how many of them passed; without ``gpu_stage``,
    the items whose only failure was reading a GPU compiler stage are left out of both."""
    reached = [r for r in results if r["reached_lowering"] and (gpu_stage or r["verdict"] != "gpu stage")]
    return sum(r["verdict"] == "pass" for r in reached), len(reached)


def _without_place(message: str) -> str:
    """A refusal without its file:line and kernel name, so one missing op counts as one reason."""
    return re.sub(r" at \S+:\d+ \(kernel \w+\)", "", message)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("test_file", type=Path, help="Triton's test_core.py (not part of this repository)")
    parser.add_argument("--target", choices=("host", "rv64"), default="host",
                        help="host: run in-process; rv64: every launch under qemu-riscv64 (slow)")
    parser.add_argument("--sample", type=int, default=0, help="run N items drawn at random (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--workers", type=int, default=1,
                        help="xdist workers (default 1: isolates crashes; 0: in this process's pytest)")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression, e.g. 'test_bin_op or test_dot'")
    parser.add_argument("--timeout", type=float, default=None,
                        help="after --stop-after, wait this long for pytest to end (default 300 s)")
    parser.add_argument("--shuffle", action="store_true", help="run the items in a random order (--seed)")
    parser.add_argument("--stop-after", type=float, default=None,
                        help="interrupt the run after this many seconds and report the items that finished "
                             "(with --shuffle: a random sample of the file)")
    parser.add_argument("--torch-cpu-matmul", action="store_true",
                        help="references from torch's own CPU fp16/bf16 matmul (fp32 sums in torch's order) "
                             "instead of exact ones (triton_conformance_plugin.exact_half_matmul)")
    parser.add_argument("--json", type=Path, help="also write every item's verdict here")
    parser.add_argument("--journal", type=Path,
                        help="append each verdict to this JSON-lines file as it is known; run again with the same "
                             "file (and options) to go on where an interrupted run stopped: the table covers all")
    args = parser.parse_args(argv)
    if not args.test_file.is_file():
        parser.error(f"{args.test_file}: no such file (pass the path of Triton's test_core.py)")

    results, stopped = run_tests(args.test_file.resolve(), args.target, args.sample, args.seed, args.workers,
                        args.keyword, args.timeout, args.shuffle, args.stop_after, args.torch_cpu_matmul,
                                  args.journal.resolve() if args.journal else None)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    print(f"\n{args.test_file} on {args.target}"
          + (f" (sample of {args.sample}, seed {args.seed})" if args.sample else "")
          + (f" (random order, seed {args.seed})" if args.shuffle else "")
          + (f": stopped after {args.stop_after:.0f} s, {len(results)} items finished" if stopped else ""))
    print("references: torch.matmul on CPU fp16/bf16 tensors as torch computes it (fp32 sums, torch's order)"
          if args.torch_cpu_matmul else
          "references: torch.matmul on CPU fp16/bf16 tensors exact, rounded once (--torch-cpu-matmul: torch's own)")
    print(tabulate(summary_rows(results), headers=["test function", "run", *VERDICTS], tablefmt="github"))
    passed, reached = reached_pass_rate(results)
    if reached:
        print(f"\nitems that reached our lowering: {reached}, passed {passed} ({100 * passed / reached:.2f} %)")
        passed_cpu, reached_cpu = reached_pass_rate(results, gpu_stage=False)
        if reached_cpu != reached and reached_cpu:
            print(f"without the {reached - reached_cpu} that read a GPU compiler stage: {reached_cpu}, passed "
                  f"{passed_cpu} ({100 * passed_cpu / reached_cpu:.2f} %)")
    wrong = [r for r in results if r["verdict"] == "wrong"]
    if wrong:
        print(f"\nwrong results ({len(wrong)}):")
        for r in wrong:
            print(f"  {r['nodeid']}: {r['message']}")
    for verdict in ("refused", "gpu stage", "other"):
        reasons = collections.Counter(_without_place(r["message"]) for r in results if r["verdict"] == verdict)
        if reasons:
            print(f"\nmost common reasons, {verdict}:")
            for message, count in reasons.most_common(15):
                print(f"  {count:5d}  {message}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
