"""`rvtune setup`: build the helper tools that are missing (the QEMU instruction-count plugin) into the tools
directory; `--check` only says what it would do."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.tools import SetupError, planned_steps, setup


def run_setup(check: bool, header_from: Path | None) -> int:
    """0: everything in place (or made now); 1: --check found something to do; 2: it cannot be made here."""
    if header_from is not None and not header_from.is_file():
        print(f"rvtune setup: --qemu-plugin-header {header_from}: no such file", file=sys.stderr)
        return 2
    if check:
        steps = planned_steps(header_from)
        for step in steps:
            print(f"rvtune setup: would {step.what} ({step.why})")
        if not steps:
            print(f"rvtune setup: nothing to do: the tools in {paths.tools_dir()} are up to date")
        return 1 if steps else 0
    try:
        steps = setup(header_from)
    except SetupError as exc:
        print(f"rvtune setup: ERROR: {exc}", file=sys.stderr)
        return 2
    print(f"rvtune setup: {'done' if steps else 'nothing to do'}: the tools in {paths.tools_dir()} are up to date")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "setup", help="build the helper tools that are missing (the QEMU instruction-count plugin)",
        description="Builds the QEMU instruction-count plugin from the packaged icount.c into the tools directory "
                    "(RVTUNE_TOOLS_DIR, default ~/.cache/pytest-rvtune/tools), fetching qemu-plugin.h from "
                    "Debian's qemu source package when it is not there yet. Idempotent. Debian packages "
                    "(clang-19, qemu-user, ...) are installed with apt-get; `rvtune doctor` names them.")
    p.add_argument("--check", action="store_true",
                   help="only say what would be done (exit 1 if anything, 0 if nothing)")
    p.add_argument("--qemu-plugin-header", type=Path, default=None, metavar="PATH",
                   help="use this qemu-plugin.h (QEMU's include/qemu/qemu-plugin.h of your qemu-riscv64's "
                        "version) instead of fetching it with apt-get")
    p.set_defaults(func=lambda args: run_setup(args.check, args.qemu_plugin_header))
