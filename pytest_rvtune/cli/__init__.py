"""The `rvtune` command line: one argparse subcommand per job.

Each subcommand lives in its own module, which defines ``add_parser(subparsers)``; that function registers
the subcommand and sets ``func`` (taking the parsed args, returning the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from typing import TextIO

from pytest_rvtune import __version__
from pytest_rvtune.cli.help_text import finish

#: Modules of pytest_rvtune.cli, each named after the `rvtune` command it defines, in --help order.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "compile", "report", "compare", "export_best", "correlate", "doctor", "golden", "bench_compiler", "noise",
    "import_project", "count", "setup", "cache", "runs", "history", "tune",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rvtune", description="pytest-rvtune: Triton kernels on RISC-V")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(f"pytest_rvtune.cli.{name}").add_parser(subparsers)
    finish(parser)  # plain text for a terminal, and the environment variables, in every --help
    return parser


def main(argv: list[str] | None = None) -> int:
    from pytest_rvtune.paths import EnvDirError, settle_env_dirs
    from pytest_rvtune.results.records import RunFileError
    from pytest_rvtune.results.runs import MetricError, RunFileWarning

    args = build_parser().parse_args(argv)
    try:
        settle_env_dirs()
    except EnvDirError as exc:  # names the variable: not one errno line per file later
        print(f"rvtune {args.command}: {exc}", file=sys.stderr)
        return 2

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if issubclass(category, RunFileWarning):  # a skipped torn line: file:line and why, no source location
            print(f"rvtune {args.command}: warning: {message}", file=sys.stderr)
        else:
            default_show(message, category, filename, lineno, file, line)

    default_show = warnings.showwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always", RunFileWarning)
        warnings.showwarning = show
        try:
            return int(args.func(args) or 0)
        except (RunFileError, MetricError) as exc:  # an unreadable results file, an unknown --rank-by metric: the
            # message names the file (and line) or the metrics present, and what to do
            print(f"rvtune {args.command}: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
