"""`rvtune noise`: the command line of pytest_rvtune.results.noise (arguments, output, exit code)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from pytest_rvtune.results.noise import DEFAULT_QUANTILE, NoiseFileError, measure_noise
from pytest_rvtune.results.records import DEFAULT_STATISTIC, TIME_STATISTICS, RunFileError
from pytest_rvtune.results.report import render_rows
from pytest_rvtune.results.runs import ANALYSIS_FIELDS, load_run


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "noise", help="measure a target's A/A noise floor from two runs of the same code",
        description="From an A/A pair (two runs of the same ELFs on the same target, e.g. back to back), "
                    "measure how much each item's time (min or median) moves between sessions, and a "
                    "per-kernel floor (a percentile of |change|). Pass the file to `rvtune compare --noise`.")
    p.add_argument("a", help="first run: results .jsonl or pytest-benchmark .json")
    p.add_argument("b", help="second run of the same code on the same target")
    p.add_argument("-o", "--out", dest="output", default="noise.json", metavar="FILE",
                   help="noise file to write (default noise.json)")
    p.add_argument("--output", dest="output", default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # the old name
    p.add_argument("--quantile", type=float, default=DEFAULT_QUANTILE,
                   help=f"percentile of |change| over a kernel's items (default {DEFAULT_QUANTILE:g})")
    p.add_argument("--statistic", choices=TIME_STATISTICS, default=DEFAULT_STATISTIC,
                   help="the drift of the samples' min (default; what compare gates on) or median")
    p.set_defaults(func=run_noise)


def run_noise(args: argparse.Namespace) -> int:
    try:
        floors = measure_noise(load_run(args.a, fields=ANALYSIS_FIELDS), load_run(args.b, fields=ANALYSIS_FIELDS),
                               args.quantile, args.statistic)
    except (RunFileError, NoiseFileError) as exc:
        print(f"rvtune noise: {exc}", file=sys.stderr)
        return 2
    Path(args.output).write_text(json.dumps(floors.to_json(), indent=1) + "\n", encoding="utf-8")
    rows = []
    for target in floors.targets.values():
        for name, kernel in sorted(target.kernels.items()):
            changes = [p for configs in kernel.items.values() for p in configs.values()]
            rows.append({"target": target.target, "kernel": name, "items": len(changes),
                         "median |change|": f"{float(np.median(np.abs(changes))):.1f}%",
                         "max |change|": f"{max(abs(p) for p in changes):.1f}%",
                         f"floor (p{floors.quantile:g})": f"+-{kernel.floor_pct:.1f}%"})
    print(render_rows(rows, "table"))
    print(f"\nwrote {args.output}: use `rvtune compare BASE NEW --noise {args.output}`", file=sys.stderr)
    return 0
