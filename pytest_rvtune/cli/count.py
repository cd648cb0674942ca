r"""``rvtune count``: the counts of one launch window of any static rv64 ELF, under our QEMU and plugin.

    rvtune count ELF --symbol KERNEL [--launch FN] [--run-dir DIR] [--json] [--compare-to RESULTS] -- ARGS...

The ELF runs once, as it is, with ARGS (everything after ``--``), in the current directory or ``--run-dir DIR``
(where the data files it reads by relative path are), under qemu-riscv64 with VLEN 256 and our icount plugin.
The launch window is every instruction, on any thread, from the entry of the launcher (``--launch``, by default
``KERNEL_wrap``, also a C++ one) to its return; the figures are per launch: ``launch_insns``, ``kernel_insns``
(inside the function KERNEL), the vector share of the window and ``x60_cycles`` (the X60 model, when the package
has it). The plugin's counts are exact with any number of guest threads.

``--compare-to RESULTS`` sets the figures beside our items of the same kernel and config in a results file of
ours (pytest_rvtune/results/peer.py: the kernel by name, the config from ``--config`` or else from the ELF's
block constants), with the ratios ELF / ours.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_rvtune.results.peer import PeerConfigError, kernels_in, matching_records, parse_config
from pytest_rvtune.results.records import RunRecord
from pytest_rvtune.results.runs import load_run
from pytest_rvtune.targets.launch_window import CountError, WindowCounts, count_window, resolve_window

#: Counters set beside our item's, in this order (those both sides have).
COMPARED = ("launch_insns", "kernel_insns", "x60_cycles")


class _CountParser(argparse.ArgumentParser):
    """Everything after the first ``--`` is the program's argv, untouched: argparse alone would read a ``-1``
    or ``--grid`` there as an option of ours, or refuse the ``--`` after options that follow the ELF."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        arg_list = list(sys.argv[1:] if args is None else args)
        program: list[str] = []
        if "--" in arg_list:
            at = arg_list.index("--")
            arg_list, program = arg_list[:at], arg_list[at + 1:]
        parsed, extras = super().parse_known_args(arg_list, namespace)
        parsed.program_args = program
        return parsed, extras


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("count", help="counts of one launch window of any static rv64 ELF under QEMU",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.__class__ = _CountParser  # argparse builds subparsers itself; the class only changes how argv is split
    p.add_argument("elf", type=Path, help="a static rv64 ELF")
    p.add_argument("--symbol", default=None, metavar="FN", help="the kernel function (kernel_insns; the default "
                                                                  "launcher is FN_wrap)")
    p.add_argument("--launch", default=None, metavar="FN",
                   help="the launcher: the window is every instruction from its entry to its return "
                        "(default: <symbol>_wrap)")
    p.add_argument("--run-dir", type=Path, default=Path.cwd(), metavar="DIR",
                   help="where the ELF runs: its relative data paths are relative to this (default: here)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before the run is killed (default 600)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.add_argument("--compare-to", type=Path, default=None, metavar="RESULTS",
                   help="a results file of ours (.rvtune/results/<run>.jsonl): set the figures beside our items of "
                        "the same kernel and config")
    p.add_argument("--config", default=None, metavar="'K=V,...'",
                   help="with --compare-to: the config to match (default: the ELF's block constants)")
    p.add_argument("--case", default=None, help="with --compare-to: only our items of this case")
    p.set_defaults(func=run, program_args=[])


def figures(counts: WindowCounts) -> dict[str, Any]:
    """The JSON object ``--json`` prints: per-launch figures, the window and where the X60 figure came from."""
    per = counts.per_launch()
    out: dict[str, Any] = {
        "elf": str(counts.window.elf), "symbol": counts.window.symbol, "launch": counts.window.launcher,
        "launches": counts.launches, **per, "vector_share": counts.vector_share,
        "insns_whole_process": counts.insns, "block_constants": counts.window.constants, "harts": counts.harts,
        "hart_launch_insns": [n / counts.launches for n in counts.hart_launch_insns],
    }
    if not counts.x60:
        out["x60_missing"] = counts.x60_missing
    return out


def _text(counts: WindowCounts) -> str:
    per = counts.per_launch()
    w = counts.window
    rows = [["launches", f"{counts.launches:,}", f"completed calls of {w.launcher}"],
            ["launch_insns", f"{per['launch_insns']:,.0f}", "per launch: every instruction, entry to return"]]
    if "kernel_insns" in per:
        rows.append(["kernel_insns", f"{per['kernel_insns']:,.0f}", f"per launch: inside {w.symbol}"])
    rows.append(["vector share", f"{100 * counts.vector_share:.1f} %", "RVV instructions in the window"])
    if counts.harts > 1:
        split = " + ".join(f"{n / counts.launches:,.0f}" for n in counts.hart_launch_insns)
        rows.append(["threads", f"{counts.harts}", f"inside the launches; launch_insns per launch = {split}"])
    if counts.x60:
        rows += [_x60_row(name, per[name]) for name in sorted(counts.x60, key=lambda n: (n != "x60_cycles", n))]
    else:
        rows.append(["x60_cycles", "-", counts.x60_missing])
    head = f"{w.elf}: launch window {w.launcher}" + (f", kernel {w.symbol}" if w.symbol else "")
    if w.constants:
        head += "; block constants " + ",".join(f"{k}={v}" for k, v in w.constants.items())
    return head + "\n" + tabulate(rows, tablefmt="plain")


def _x60_row(name: str, value: float) -> list[str]:
    if name == "x60_standin_share":
        return [name, f"{100 * value:.1f} %", "of the modelled busy cycles priced by a stand-in"]
    if name == "x60_harts":
        return [name, f"{value:.0f}", "guest threads that ran inside the launches"]
    return [name, f"{value:,.0f}", "per launch: the X60 model (pytest_rvtune/x60)" if name == "x60_cycles"
            else "per launch"]


def compare_rows(counts: WindowCounts, records: list[RunRecord]) -> list[list[str]]:
    per = counts.per_launch()
    rows = []
    for record in records:
        for name in COMPARED:
            if name in per and name in record.counters:
                ours = record.counters[name]
                rows.append([record.label, name, f"{per[name]:,.0f}", f"{ours:,.0f}",
                             f"{per[name] / ours:.2f}x" if ours else "-"])
    return rows


def _matches(args: argparse.Namespace, counts: WindowCounts) -> tuple[list[RunRecord], str]:
    """Our records to compare with, and how they were matched (CountError when none or no rule applies)."""
    symbol = counts.window.symbol
    if symbol is None:
        raise CountError("--compare-to needs --symbol: our items are matched by their kernel function")
    run = load_run(args.compare_to)
    if args.config is not None:
        config, source = parse_config(args.config), f"--config {args.config}"
    else:
        config, source = counts.window.constants, "the ELF's block constants"
        if not config:
            raise CountError(f"{counts.window.elf} has no block constants {symbol}_<NAME>: give the config to "
                             "match with --config 'BLOCK_SIZE_M=4,...'")
    found = matching_records(run, symbol, config, from_user=args.config is not None, case=args.case)
    if not found:
        wanted = ",".join(f"{k}={v}" for k, v in config.items())
        raise CountError(f"{args.compare_to} has no passed item of kernel {symbol} with {wanted} ({source}"
                         f"{', case ' + args.case if args.case else ''}); its kernels: {', '.join(kernels_in(run))}")
    return found, source


def run(args: argparse.Namespace) -> int:
    try:
        window = resolve_window(args.elf, args.symbol, args.launch)
        counts = count_window(window, args.program_args, args.run_dir, timeout=args.timeout)
        matched, source = _matches(args, counts) if args.compare_to is not None else ([], "")
    except (CountError, PeerConfigError) as exc:
        print(f"rvtune count: {exc}", file=sys.stderr)
        return 1
    if args.json:
        out = figures(counts)
        if args.compare_to is not None:
            out["compare_to"] = {"results": str(args.compare_to), "matched_by": source, "items": [
                {"item": r.label, "counters": {n: r.counters[n] for n in COMPARED if n in r.counters}}
                for r in matched]}
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    print(_text(counts))
    if matched:
        print(f"\nbeside {args.compare_to} (matched by kernel {counts.window.symbol} and {source}):")
        print(tabulate(compare_rows(counts, matched), headers=["our item", "counter", "ELF", "ours", "ELF / ours"],
                       tablefmt="plain"))
    return 0


__all__ = ["add_parser", "compare_rows", "figures", "run"]
