"""`rvtune export-best`: the command line of pytest_rvtune.results.export (arguments, output, exit code)."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path

from pytest_rvtune.cli.out_dir import out_dir_problem
from pytest_rvtune.cli.rank_by import add_rank_by_argument
from pytest_rvtune.results.compare import DEFAULT_ALPHA
from pytest_rvtune.results.export import DEFAULT_MIN_GAIN_PCT, export_kernel, header_text, tunings
from pytest_rvtune.results.export_triton import FORMATS as TRITON_FORMATS
from pytest_rvtune.results.export_triton import module_text
from pytest_rvtune.results.ranked_at import RECORD_FIELD as RANKED_AT_FIELD
from pytest_rvtune.results.records import RunRecord, group_label, slim
from pytest_rvtune.results.runs import ANALYSIS_FIELDS, check_rank_by, load_run


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export-best", help="tuned configs per target and kernel (JSON, a C header, or Triton configs)",
        description="Write the best config per case (ties marked), aiter-style M buckets and a default config "
                    "(most common winner) to <out>/<target>/<kernel>.json or .h; one set per problem for a kernel "
                    "with PROBLEM_KEYS (e.g. IS_CAUSAL).")
    p.add_argument("run", help="results .jsonl or pytest-benchmark .json")
    p.add_argument("-o", "--out", type=Path, default=Path("tuned-configs"), help="directory (default tuned-configs)")
    p.add_argument("--format", choices=("json", "header", *TRITON_FORMATS), default="json",
                   help="json (default), header (C #defines), triton (a module of triton.Config lists for "
                        "@triton.autotune), triton-rvv (the same with a get_<kernel>_kernel_autotune_config() getter)")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                   help=f"significance level of the winner-vs-runner-up test (default {DEFAULT_ALPHA})")
    p.add_argument("--min-gain", type=float, default=DEFAULT_MIN_GAIN_PCT, metavar="PCT",
                   help=f"a win smaller than this is a tie (default {DEFAULT_MIN_GAIN_PCT:g}%%)")
    add_rank_by_argument(p)
    p.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    problem = out_dir_problem(args.out)
    if not 0 < args.alpha < 1:  # as compare's Thresholds: --alpha 2 called every win significant
        problem = f"--alpha {args.alpha:g}: the significance level must be between 0 and 1, e.g. 0.01"
    if problem:
        print(f"rvtune export-best: {problem}", file=sys.stderr)
        return 2
    # each record keeps, of its raw object, only the field export reads (ranked_at's): 10^5 of them fit in 2.5x the file
    run = load_run(args.run, fields=ANALYSIS_FIELDS, reduce=partial(slim, raw_fields=frozenset({RANKED_AT_FIELD})))
    check_rank_by(run.records, args.rank_by, args.run)  # a MetricError too
    by_kernel: dict[tuple[str, str], list[RunRecord]] = {}
    for record in run.records:
        by_kernel.setdefault((record.target, record.kernel), []).append(record)
    written = 0
    for (target, kernel), records in by_kernel.items():
        doc = export_kernel(records, args.alpha, source=str(args.run), min_gain_pct=args.min_gain,
                            rank_by=args.rank_by)
        if doc is None:
            print(f"warning: {kernel} on {target}: no valid config in any case: nothing exported", file=sys.stderr)
            continue
        suffix = {"header": "h", "triton": "py", "triton-rvv": "py"}.get(args.format, "json")
        path = args.out / target / f"{kernel}.{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if args.format == "header":
            text = header_text(doc)
        elif args.format in TRITON_FORMATS:
            text = module_text(doc, args.format)
        else:
            text = json.dumps(doc, indent=2) + "\n"
        path.write_text(text, encoding="utf-8")
        parts = []
        for problem_id, tuning in tunings(doc).items():
            ties = [group_label(case, problem_id) for case, e in tuning["cases"].items() if e["tie"]]
            default = tuning["default"]["config_id"]
            parts.append(f"{problem_id}: {len(tuning['cases'])} cases, default {default}" if problem_id else
                         f"{len(tuning['cases'])} cases, default {default}")
            parts += [f"ties in {', '.join(ties)}"] if ties else []
        print(f"{path}: " + "; ".join(parts))
        for tuning in tunings(doc).values():
            for entry in tuning["cases"].values():
                if entry.get("size_note"):
                    print(f"  note: {entry['size_note']}")
        written += 1
    if not written:
        print(f"rvtune export-best: nothing exported: no kernel of {args.run} has a passed item ({len(run.records)} "
              "items, none valid)", file=sys.stderr)
        return 1
    return 0
