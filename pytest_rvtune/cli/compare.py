"""`rvtune compare`: the command line of pytest_rvtune.results.compare (arguments, output, exit code)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from collections.abc import Iterator
from itertools import chain

from pytest_rvtune.cli.rank_by import add_rank_by_argument
from pytest_rvtune.results.compare import (
    COUNTER_GATES,
    DEFAULT_ALPHA,
    DEFAULT_CONFIRM_TRIALS,
    DEFAULT_MIN_SAMPLES,
    DEFAULT_THRESHOLD_PCT,
    ItemComparison,
    NewRunTally,
    Thresholds,
    compare_stream,
    summary_line,
    verdict_rows,
)
from pytest_rvtune.results.noise import NoiseFileError, load_noise_for
from pytest_rvtune.results.records import DEFAULT_STATISTIC, TIME_STATISTICS, RunFileError, RunRecord
from pytest_rvtune.results.report import render_rows
from pytest_rvtune.results.runs import ANALYSIS_FIELDS, Run, RunFileWarning, check_rank_by, iter_run, load_run


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare", help="compare two runs; exit 1 on a significant regression",
        description="Compare run B against base run A item by item: Mann-Whitney U on time samples, "
                    "thresholds per kernel, instruction counts under QEMU. Exit 1 on a significant regression.")
    p.add_argument("base", help="base run: results .jsonl or pytest-benchmark .json")
    p.add_argument("new", help="new run, same formats")
    p.add_argument("--threshold", action="append", default=[], metavar="[KERNEL=]PCT",
                   help=f"change that matters, in percent (default {DEFAULT_THRESHOLD_PCT:g}); repeat as "
                        "KERNEL=PCT for per-kernel values, e.g. --threshold 5 --threshold matmul=10")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                   help=f"significance level of the Mann-Whitney test (default {DEFAULT_ALPHA})")
    p.add_argument("--min-samples", type=int, default=DEFAULT_MIN_SAMPLES,
                   help=f"fewer samples per side than this: a warning instead of a test "
                        f"(default {DEFAULT_MIN_SAMPLES})")
    p.add_argument("--statistic", choices=TIME_STATISTICS, default=DEFAULT_STATISTIC,
                   help="a time change is the change of the samples' min (default: interference only adds "
                        "time, so the minimum repeats between sessions) or median")
    p.add_argument("--counters", choices=COUNTER_GATES, default="deterministic",
                   help="counters that gate: QEMU instruction counts (default), all (board perf too), none")
    p.add_argument("--noise", action="append", default=[], metavar="NOISE.json",
                   help="A/A noise floor of the target (from `rvtune noise`; repeat for several targets): a "
                        "time change must also exceed the item's floor to count")
    p.add_argument("--confirm", type=int, nargs="?", const=DEFAULT_CONFIRM_TRIALS, default=0, metavar="TRIALS",
                   help="re-run the base and new ELF of every time regression on its target, interleaved, "
                        f"TRIALS times each (default {DEFAULT_CONFIRM_TRIALS}), and count it only if that confirms "
                        "it; needs both ELFs on this machine and the target of the runs")
    p.add_argument("--config-file", default=None, metavar="PATH",
                   help="with --confirm: target configuration (default: rvtune.toml, then pyproject.toml here)")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table")
    p.add_argument("--all", action="store_true",
                   help="every item and every metric; by default only items whose verdict is not 'unchanged', "
                        "with the metrics that decided it")
    add_rank_by_argument(p, "gate on")
    p.set_defaults(func=run_compare)


#: What compare reads of each record's raw object besides RunRecord's fields (drift_warning: the rounds pooled).
COMPARE_FIELDS: frozenset[str] = frozenset({"rounds"})


def run_compare(args: argparse.Namespace) -> int:
    # The base run is held (each new item looks up its base); the new run is compared as it is read and never held
    # (compare_stream), so two results files of 10^5 items fit in under 3x their size. --confirm re-runs items
    # from their records' whole fields (rerun argv, ELF paths): it loads both runs whole.
    new: Run | None = None
    try:
        thresholds = Thresholds.parse(args.threshold, alpha=args.alpha, min_samples=args.min_samples,
                                      counters=args.counters, statistic=args.statistic)
        base = load_run(args.base, fields=ANALYSIS_FIELDS if args.confirm else COMPARE_FIELDS)
        if args.confirm:
            new = load_run(args.new, fields=ANALYSIS_FIELDS)
        if args.rank_by is not None:  # the exact counter configs are ranked by is the one that gates
            check_rank_by(_new_records(args, new, quiet=True), args.rank_by, args.new)
            check_rank_by(base.records, args.rank_by, args.base)
            thresholds = dataclasses.replace(thresholds, gated_counters=frozenset(
                set() if args.rank_by == "time" else {args.rank_by}))
        if args.noise:
            noise = load_noise_for(args.noise, chain(base.records, _new_records(args, new, quiet=True)),
                                   thresholds.statistic)
            thresholds = dataclasses.replace(thresholds, noise=noise)
        tally = NewRunTally(base, thresholds.noise)
        verdicts = compare_stream(base, tally.watch(_new_records(args, new)), thresholds,
                                  keep=None if args.all or args.confirm else _printed)
    except (ValueError, RunFileError, NoiseFileError) as exc:
        print(f"rvtune compare: {exc}", file=sys.stderr)
        return 2
    drift = None if args.confirm else tally.drift_warning()  # re-runs settle drift
    if drift:
        print(f"warning: {drift}", file=sys.stderr)
    if args.confirm and new is not None:
        from pytest_rvtune.results.confirm import confirm_with_targets
        try:
            confirm_with_targets(verdicts, base, new, thresholds, args.confirm, args.config_file)
        except ValueError as exc:  # a bad --confirm or target config file
            print(f"rvtune compare: {exc}", file=sys.stderr)
            return 2
    rows = verdict_rows(verdicts, args.all, raw=args.format in ("json", "csv"))
    if rows or args.format not in ("table", "markdown"):
        print(render_rows(rows, args.format))
    else:
        print(f"no item changed ({len(verdicts)} unchanged; --all shows every item and metric)")
    warnings = [w for v in verdicts for w in v.warnings]
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    summary = summary_line(verdicts, base, args.base, len(warnings))
    compared = sum(v.status not in ("new", "missing") for v in verdicts)
    if not compared:
        print(f"\n{summary}\nrvtune compare: nothing compared: {tally.nothing_compared_reason()}",
              file=sys.stderr)
        return 2
    regressions = [v for v in verdicts if v.regressed]
    for v in regressions:
        print(f"REGRESSION {v.message}", file=sys.stderr)
    for v in verdicts:
        if v.status == "unconfirmed":
            print(f"UNCONFIRMED {v.message}", file=sys.stderr)
    print(f"\n{summary}", file=sys.stderr)  # the last line: what a CI log shows
    return 1 if regressions else 0


def _printed(verdict: ItemComparison) -> bool:
    """Whether a verdict's rows are printed without --all (what compare_stream keeps whole)."""
    return verdict.status != "unchanged"


def _new_records(args: argparse.Namespace, new: Run | None, quiet: bool = False) -> Iterator[RunRecord]:
    """The new run's records: as read (iter_run), or those of ``new`` when it was loaded whole. ``quiet``: a pass
    before the comparison (--rank-by, --noise) whose torn-line warnings the comparison's pass gives again."""
    if new is not None:
        yield from new.records
        return
    if not quiet:
        yield from iter_run(args.new, fields=COMPARE_FIELDS)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunFileWarning)
        yield from iter_run(args.new, fields=COMPARE_FIELDS)
