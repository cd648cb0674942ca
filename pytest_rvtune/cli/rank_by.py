"""``--rank-by METRIC``, shared by the commands that rank configs (report, export-best) or gate on the ranking
metric (compare)."""

from __future__ import annotations

import argparse

from pytest_rvtune.results.runs import EMULATED_RANK_COUNTERS


def add_rank_by_argument(parser: argparse.ArgumentParser, what: str = "rank configs by") -> None:
    parser.add_argument("--rank-by", default=None, metavar="METRIC",
                        help=f"{what} this metric: time or any recorded counter (x60_cycles, launch_insns, "
                             "kernel_insns, est_cycles, l1d_misses, l2_misses, ...); default: time on real "
                             f"hardware, under QEMU {EMULATED_RANK_COUNTERS[0]}. An unknown metric is an error listing "
                             "those present")
