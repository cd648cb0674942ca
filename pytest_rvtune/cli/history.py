"""`rvtune history`: every run of the project's results directory as one static HTML page, the best value of the
ranking metric per kernel, case and problem over runs and commits, and for each that got worse the first run and
commit where it did."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.results.history import DEFAULT_THRESHOLD_PCT, RunPoint, build_history, commit_of, write_history
from pytest_rvtune.results.records import RunFileError
from pytest_rvtune.results.run_names import named_runs, runs_in, started_label
from pytest_rvtune.results.runs import ANALYSIS_FIELDS, Run, RunFileWarning, load_run


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("history", help="the best config per kernel over runs and commits, as an HTML page",
                              description=__doc__)
    p.add_argument("--dir", type=Path, default=None, metavar="DIR",
                   help="the results directory (default: .rvtune/results of the project)")
    p.add_argument("-o", "--out", type=Path, default=Path("history.html"), help="the page (default history.html)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT, metavar="PCT",
                   help=f"a best value this much worse than the run before is a regression (default "
                        f"{DEFAULT_THRESHOLD_PCT:g}%%)")
    p.set_defaults(func=run_history)


def run_history(args: argparse.Namespace) -> int:
    directory = args.dir or paths.results_dir()
    files = runs_in(directory)
    runs: list[Run] = []
    points: list[RunPoint] = []
    for name, path in named_runs(files):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RunFileWarning)
                run = load_run(path, fields=ANALYSIS_FIELDS)  # every run is held: only what is read
        except RunFileError as exc:
            print(f"rvtune history: skipped {exc}", file=sys.stderr)
            continue
        runs.append(run)
        points.append(RunPoint(name, started_label(path), commit_of(run)))
    if not runs:
        print(f"rvtune history: no runs in {directory} (a pytest session writes one there)", file=sys.stderr)
        return 1
    series = build_history(runs, args.threshold)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_history(args.out, points, series, args.threshold, str(directory))
    for s in series:
        if s.regression is not None:
            at = points[s.regression[0]]
            target, kernel, case, problem = s.key
            print(f"regression: {kernel} / {case}{' ' + problem if problem else ''} on {target}: best {s.metric} "
                  f"+{s.regression[1]:.1f}% first at {at.name} (commit {at.commit})")
    print(f"wrote {args.out}: {len(series)} kernel/case groups over {len(runs)} runs")
    return 0
