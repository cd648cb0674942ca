"""Which counters move with kernel time? Spearman and Pearson of every counter against median time.

Per target, kernel, case and problem (PROBLEM_KEYS values: causal attention does half the work, so mixing
problems would correlate every counter with the problem, not with the config), over the valid configs only (a
wrong answer's time means nothing), like the seeds' analysis_correlation.py but with Spearman too: a monotonic
but non-linear relation (cache misses vs time often is) shows up there when Pearson misses it. Counters that
never vary are skipped (r is undefined).
Also printed by ``rvtune report``; ``rvtune correlate RUN`` lists every counter, strongest first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from scipy.stats import pearsonr, spearmanr

from pytest_rvtune.results.records import RunRecord
from pytest_rvtune.results.report import counter_names
from pytest_rvtune.results.runs import group_by_problem, has_problems

#: The seeds' cut-off for "high correlation".
STRONG = 0.7
#: Fewer points than this give a correlation coefficient that means little.
MIN_POINTS = 3


def correlation_rows(records: Iterable[RunRecord]) -> list[dict[str, Any]]:
    """One row per (target, kernel, case, problem, counter): n, Spearman rho, Pearson r and their p-values.

    The ``problem`` column (e.g. ``IS_CAUSAL=True``) is there only when some record has problem keys."""
    records = list(records)
    with_problem = has_problems(records)
    rows: list[dict[str, Any]] = []
    for (target, kernel, case, problem), group in group_by_problem(records).items():
        valid = [r for r in group if r.valid and r.median_ns is not None]
        for name in counter_names(valid):
            pairs = [(r.counters[name], m) for r in valid if name in r.counters and (m := r.median_ns) is not None]
            if len(pairs) < MIN_POINTS:
                continue
            xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
            if len(set(xs)) < 2 or len(set(ys)) < 2:
                continue  # a constant has no correlation
            rho, p_rho = spearmanr(xs, ys)
            r, p_r = pearsonr(xs, ys)
            where = {"target": target, "kernel": kernel, "case": case}
            if with_problem:
                where["problem"] = problem
            rows.append({**where, "counter": name, "n": len(pairs),
                         "spearman": round(float(rho), 3), "spearman p": float(f"{p_rho:.2g}"),
                         "pearson": round(float(r), 3), "pearson p": float(f"{p_r:.2g}"),
                         "emulated time": any(rec.emulated for rec in valid)})
    rows.sort(key=lambda row: (row["target"], row["kernel"], row["case"], row.get("problem", ""),
                               -max(abs(row["spearman"]), abs(row["pearson"]))))
    return rows


def strong(rows: Iterable[dict[str, Any]], cutoff: float = STRONG) -> list[dict[str, Any]]:
    """Rows where either coefficient exceeds the cut-off in magnitude (NaN never does)."""
    return [row for row in rows
            if any(not math.isnan(row[k]) and abs(row[k]) > cutoff for k in ("spearman", "pearson"))]
