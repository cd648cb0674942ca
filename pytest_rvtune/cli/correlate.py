"""`rvtune correlate`: the command line of pytest_rvtune.results.correlation (arguments, output, exit code)."""

from __future__ import annotations

import argparse
import sys

from pytest_rvtune.results.correlation import STRONG, correlation_rows, strong
from pytest_rvtune.results.report import FORMATS, render_rows
from pytest_rvtune.results.runs import ANALYSIS_FIELDS, load_run


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "correlate", help="Spearman and Pearson of every counter against kernel time",
        description="Per target, kernel, case and problem, over valid configs: Spearman and Pearson correlation "
                    f"of each counter with median kernel time, strongest first; |r| > {STRONG} listed by --strong.")
    p.add_argument("run", help="results .jsonl or pytest-benchmark .json")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--strong", action="store_true", help=f"only counters with |r| > {STRONG}")
    p.set_defaults(func=run_correlate)


def run_correlate(args: argparse.Namespace) -> int:
    run = load_run(args.run, fields=ANALYSIS_FIELDS)  # a RunFileError is reported by cli.main (exit 2)
    rows = correlation_rows(run.records)
    if args.strong:
        rows = strong(rows)
    print(render_rows(rows, args.format))
    if any(row["emulated time"] for row in rows):
        print("note: some times are emulated (QEMU): correlation with emulated time is not with performance",
              file=sys.stderr)
    return 0
