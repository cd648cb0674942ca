"""Where the X60 model and instruction counts pick different configs: a finished QEMU run, ranked both ways.

    .venv/bin/python benchmarks/x60_picks.py RUN.jsonl

For each kernel, case and problem of the run (valid emulated records with both counters), the config
``x60_cycles`` ranks first and the one ``launch_insns`` ranks first; where they differ, how much slower the
instruction-count pick is on the modelled X60 and where each pick stands in the other's ranking; the Spearman rho
of the two metrics over the group; and what share of the modelled cycles the vector unit accounts for. Prints
figures only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scipy.stats import spearmanr  # noqa: E402
from tabulate import tabulate  # noqa: E402

from pytest_rvtune.results.runs import group_by_problem, load_run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    args = parser.parse_args()
    rows = []
    for (_target, kernel, case, problem), records in group_by_problem(load_run(args.run).records).items():
        valid = [r for r in records if r.valid and r.emulated and "x60_cycles" in r.counters
                 and "launch_insns" in r.counters]
        if len(valid) < 2:
            continue
        by_x60 = sorted(valid, key=lambda r: (r.counters["x60_cycles"], r.config_id))
        by_insns = sorted(valid, key=lambda r: (r.counters["launch_insns"], r.config_id))
        best, counted = by_x60[0], by_insns[0]
        slower = counted.counters["x60_cycles"] / best.counters["x60_cycles"] - 1
        rho = spearmanr([r.counters["x60_cycles"] for r in valid], [r.counters["launch_insns"] for r in valid])[0]
        vector_share = best.counters.get("x60_vector_cycles", 0.0) / best.counters["x60_cycles"]
        rows.append([kernel, case + (f" {problem}" if problem else ""), len(valid), f"{rho:.2f}", best.config_id,
                     counted.config_id if counted is not best else "(same)",
                     f"{slower * 100:.1f} %" if counted is not best else "",
                     f"#{by_x60.index(counted) + 1}", f"#{by_insns.index(best) + 1}", f"{vector_share:.2f}"])
    print(tabulate(rows, headers=["kernel", "case", "configs", "rho(x60, insns)", "x60_cycles pick",
                                  "launch_insns pick", "its x60 cost over the x60 pick", "insns pick by x60",
                                  "x60 pick by insns", "vector share of x60 pick"], tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
