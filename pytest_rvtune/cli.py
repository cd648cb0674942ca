"""The `rvtune` command line: one argparse subcommand per job.

Each subcommand lives in its own module, which defines ``add_parser(subparsers)``; that function registers
the subcommand and sets ``func`` (taking the parsed args, returning the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: Modules of pytest_rvtune that each contribute one or more subcommands.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "compile_cmd", "report", "compare", "export", "correlation", "doctor", "golden_cmd", "bench_compiler", "noise",
    "import_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rvtune", description="pytest-rvtune: Triton kernels on RISC-V")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(f"pytest_rvtune.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from pytest_rvtune.runs import RunFileError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except RunFileError as exc:  # a results file that cannot be read: its message names file, line, what to do
        print(f"rvtune {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
