"""`rvtune report`: the command line of pytest_rvtune.results.report (arguments, output, exit code)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from pytest_rvtune.cli.out_dir import out_dir_problem
from pytest_rvtune.cli.rank_by import add_rank_by_argument
from pytest_rvtune.extras import MissingExtraError
from pytest_rvtune.results.records import summarise
from pytest_rvtune.results.report import (
    FORMATS,
    REPORT_FIELDS,
    STREAMED_FORMATS,
    build_case_reports,
    default_out_dir,
    render_report,
    report_parts,
    size_notes,
    write_perf_stats,
)
from pytest_rvtune.results.run_names import resolve
from pytest_rvtune.results.runs import ANALYSIS_FIELDS, Run, check_rank_by, load_run


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report", help="rank configs per kernel and case; best configs, perf_stats.csv, plots",
        description="Configs per kernel and case sorted by median time (by x60_cycles, the X60 model, under "
                    "QEMU), with IQR, samples, counters and speed-ups; the best config per case; perf_stats.csv "
                    "in the seeds' columns; heatmaps and counter scatter plots.")
    p.add_argument("run", help="results .jsonl or pytest-benchmark .json")
    p.add_argument("--format", choices=FORMATS, default="table", help="printed format (default table)")
    p.add_argument("-o", "--out", type=Path, default=None,
                   help="directory for report.<ext>, perf_stats.csv files and plots "
                        "(default: <run>-report beside the run file)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--top", type=_count, default=None, metavar="N",
                   help="show the N best configs per case (files under --out keep all)")
    p.add_argument("--html", type=Path, default=None, metavar="FILE",
                   help="also write one self-contained HTML page (opens offline): sortable rankings, heatmaps, "
                        "counter correlations and, with --base, the comparison with a base run")
    p.add_argument("--html-rows", type=_count, default=None, metavar="N",
                   help="with --html: the rows each table of the page shows at most, best first (default 500; "
                        "a page of 10^5 rows opens in no browser)")
    p.add_argument("--base", default=None, metavar="RUN",
                   help="with --html: a base run to compare with, item by item, as `rvtune compare BASE RUN` does")
    add_rank_by_argument(p)
    p.set_defaults(func=run_report)


def _count(text: str) -> int:
    """--top N: a whole number of rows, 0 or more (a negative N showed all rows but the last ones)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of rows") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: give 0 or more rows per case")
    return value


def _stream_report(run: Run, args: argparse.Namespace, correlations: list[dict[str, Any]], path: Path) -> None:
    """The report's text, part by part (report_parts), into ``path`` and (its --top rows) onto stdout: what
    render_report returns and print shows, without holding every row of a run of 10^5 items."""
    sep, end = ("", "") if args.format == "csv" else ("\n\n", "\n")
    with path.open("w", encoding="utf-8") as file:
        for index, (whole, shown) in enumerate(report_parts(run, args.format, correlations, args.rank_by, args.top)):
            file.write((sep if index else "") + whole)
            sys.stdout.write((sep if index else "") + shown)
        file.write(end)
        sys.stdout.write(end + "\n")  # print's newline after the text
    if args.format == "csv":  # a flat table has no room for them; the other formats carry the notes
        for note in size_notes(run):
            print(f"note: {note}", file=sys.stderr)


def run_report(args: argparse.Namespace) -> int:
    from pytest_rvtune.results.correlation import correlation_rows, strong

    if args.html_rows is not None and not args.html:
        print("rvtune report: --html-rows sets the rows of the HTML page's tables: add --html FILE", file=sys.stderr)
        return 2
    if args.base and not args.html:
        print("rvtune report: --base compares in the HTML page only: add --html FILE (or use `rvtune compare`)",
              file=sys.stderr)
        return 2
    # latest / latest~N named once: the default output goes beside the run file it names, not ./latest-report
    run_path = resolve(args.run)
    problem = out_dir_problem(args.out or default_out_dir(run_path))
    if problem:
        print(f"rvtune report: {problem}", file=sys.stderr)
        return 2
    # Each record is reduced to its samples' statistics as it is read (a results file of 10^5 items would be held
    # whole otherwise); only the HTML page's comparison with --base tests samples, so it keeps them.
    reduce = None if args.base else partial(summarise, raw_fields=REPORT_FIELDS)
    run = load_run(args.run, fields=ANALYSIS_FIELDS, reduce=reduce)  # a RunFileError: cli.main reports it (exit 2)
    base = load_run(args.base, fields=ANALYSIS_FIELDS) if args.base else None
    check_rank_by(run.records, args.rank_by, args.run)  # a MetricError too
    correlations = strong(correlation_rows(run.records))
    out: Path = args.out or default_out_dir(run_path)
    out.mkdir(parents=True, exist_ok=True)
    ext = {"table": "txt", "markdown": "md"}.get(args.format, args.format)
    written = [out / f"report.{ext}"]
    if args.format in STREAMED_FORMATS:  # one group's rows at a time, to the file and the terminal
        _stream_report(run, args, correlations, written[0])
    else:
        reports = build_case_reports(run, args.rank_by)
        text = render_report(run, reports, args.format, correlations, args.rank_by)
        shown = reports if args.top is None else [replace(rep, rows=rep.rows[: args.top]) for rep in reports]
        print(text if args.top is None else render_report(run, shown, args.format, correlations, args.rank_by))
        written[0].write_text(text, encoding="utf-8")
    written += write_perf_stats(run, out)
    status = 0
    if not args.no_plots:
        try:
            from pytest_rvtune.results.plots import write_plots
        except MissingExtraError as exc:  # the report and CSVs are written; only the PNGs are missing
            print(f"rvtune report: {exc} (or pass --no-plots)", file=sys.stderr)
            status = 2
        else:
            written += write_plots(run, out, args.rank_by)
    if args.html:
        from pytest_rvtune.build import disassembly_of
        from pytest_rvtune.results.html import MAX_TABLE_ROWS, write_html

        written += write_html(run, args.html, base, make_asm=disassembly_of,
                              max_rows=args.html_rows if args.html_rows is not None else MAX_TABLE_ROWS)
    for path in written:  # each by name: which file to open is the reader's next question
        print(f"wrote {path}", file=sys.stderr)
    return status
