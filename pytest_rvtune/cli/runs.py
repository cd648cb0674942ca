"""`rvtune runs`: the runs of the project's results directory, oldest first, each with the name that reaches it
(``latest``, ``latest~1``, ...; any command that takes a run takes these), when it started, its targets, cases,
kernels, items, outcomes and the git commit its records carry."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.results.history import commit_of
from pytest_rvtune.results.records import RunFileError
from pytest_rvtune.results.report import render_rows
from pytest_rvtune.results.run_names import named_runs, runs_in, started_label
from pytest_rvtune.results.runs import ANALYSIS_FIELDS, RunFileWarning, load_run


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("runs", help="list the project's runs (name them latest, latest~1, ...)",
                              description=__doc__)
    p.add_argument("--dir", type=Path, default=None, metavar="DIR",
                   help="the results directory (default: .rvtune/results of the project)")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table")
    p.set_defaults(func=run_runs)


def run_runs(args: argparse.Namespace) -> int:
    directory = args.dir or paths.results_dir()
    files = runs_in(directory)
    if not files:
        print(f"rvtune runs: no runs in {directory} (a pytest session writes one there)", file=sys.stderr)
        return 0
    rows = []
    for name, path in named_runs(files):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RunFileWarning)  # a torn line: `rvtune report` names it
                run = load_run(path, fields=ANALYSIS_FIELDS)
        except RunFileError as exc:
            print(f"rvtune runs: skipped {exc}", file=sys.stderr)
            continue
        outcomes = Counter(r.outcome for r in run.records)
        rows.append({
            "name": name,
            "started (UTC)": started_label(path),
            "target": ",".join(sorted({r.target for r in run.records})),
            "cases": ",".join(sorted({r.case for r in run.records})),
            "kernels": len({r.kernel for r in run.records}),
            "items": len(run.records),
            "outcomes": ", ".join(f"{n} {o}" for o, n in outcomes.most_common()),
            "commit": commit_of(run),
            "file": path.name,
        })
    print(render_rows(rows, args.format))
    return 0
