"""History across runs: the best value of the ranking metric per kernel, case and problem in every run of a
results directory, in run order, with the commit each run measured; and, for a group whose best got worse, the
first run (and so the first commit) where it did, as asv's ``find`` names the commit that made a benchmark slower.

A group's metric is the one its runs rank by (``x60_cycles`` under QEMU, time on real hardware); a change counts
when it is more than ``threshold_pct`` (exact counts move only when the code does; times are noisier, so their
threshold is the user's). Nothing here knows pytest.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvtune.results.records import GroupKey, group_label
from pytest_rvtune.results.report import format_metric
from pytest_rvtune.results.runs import Run, group_by_problem, metric_value, rank_metric

DEFAULT_THRESHOLD_PCT = 5.0


@dataclass
class RunPoint:
    """One run as the history shows it: its name (latest~N), start and commit."""

    name: str
    started: str
    commit: str  # shortened, "+dirty" when the work tree had changes; "-" when the records carry none


@dataclass
class Series:
    key: GroupKey
    metric: str
    values: list[float | None] = field(default_factory=list)  # one per run, None where the run lacks the group
    regression: tuple[int, float] | None = None  # (index of the first run that got worse, change in percent)


def commit_of(run: Run) -> str:
    """The commit the run's records carry (several: each, shortened), "+dirty" when any work tree was."""
    commits = list(dict.fromkeys(str(r.raw["git_commit"])[:10] for r in run.records if r.raw.get("git_commit")))
    dirty = "+dirty" if any(r.raw.get("git_dirty") for r in run.records) else ""
    return ", ".join(commits) + dirty if commits else "-"


def build_history(runs: list[Run], threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> list[Series]:
    """A series per (target, kernel, case, problem) over ``runs`` (oldest first)."""
    keys: dict[GroupKey, str] = {}
    per_run: list[dict[GroupKey, float]] = []
    for run in runs:
        best: dict[GroupKey, float] = {}
        for key, group in group_by_problem(r for r in run.records if r.valid).items():
            metric = keys.setdefault(key, rank_metric(group))
            values = [v for v in (metric_value(r, metric) for r in group) if v is not None]
            if values:
                best[key] = min(values)
        per_run.append(best)
    series = []
    for key, metric in sorted(keys.items()):
        s = Series(key, metric, [best.get(key) for best in per_run])
        s.regression = first_regression(s.values, threshold_pct)
        series.append(s)
    return series


def first_regression(values: list[float | None], threshold_pct: float) -> tuple[int, float] | None:
    """The first run whose best is worse than the best of the run before it that has one, by more than the
    threshold: (its index, the change in percent)."""
    previous: float | None = None
    for index, value in enumerate(values):
        if value is None:
            continue
        if previous is not None and previous > 0 and (value / previous - 1) * 100 > threshold_pct:
            return index, (value / previous - 1) * 100
        previous = value
    return None


def _sparkline(values: list[float | None], width: int = 160, height: int = 28) -> str:
    """An inline SVG polyline of a series (lower is better: drawn low)."""
    points = [(i, v) for i, v in enumerate(values) if v is not None]
    if len(points) < 2:
        return ""
    lo, hi = min(v for _, v in points), max(v for _, v in points)
    span, step = (hi - lo) or 1.0, width / max(len(values) - 1, 1)
    coords = " ".join(f"{i * step:.1f},{height - 2 - (v - lo) / span * (height - 4):.1f}" for i, v in points)
    return (f'<svg width="{width}" height="{height}" role="img"><polyline fill="none" stroke="#246" '
            f'stroke-width="1.5" points="{coords}"/></svg>')


def history_html(points: list[RunPoint], series: list[Series], threshold_pct: float, source: str) -> str:
    """One self-contained page: a row per group, a column per run (commit and start), the first regression."""
    e = html.escape
    head = "".join(f"<th>{e(p.name)}<br><code>{e(p.commit)}</code><br><small>{e(p.started)}</small></th>"
                   for p in points)
    rows = []
    for s in series:
        target, kernel, case, problem = s.key
        cells = []
        for index, value in enumerate(s.values):
            worse = s.regression is not None and s.regression[0] == index
            cls = ' class="worse"' if worse else ""
            cells.append(f"<td{cls}>{e(format_metric(s.metric, value)) if value is not None else ''}</td>")
        if s.regression is None:
            found = "none"
        else:
            at = points[s.regression[0]]
            found = f"{e(at.name)} (commit <code>{e(at.commit)}</code>): +{s.regression[1]:.1f}%"
        rows.append(f"<tr><td>{e(kernel)}</td><td>{e(group_label(case, problem))}</td><td>{e(target)}</td>"
                    f"<td>{e(s.metric)}</td><td>{_sparkline(s.values)}</td>{''.join(cells)}<td>{found}</td></tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rvtune history</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top}} td:nth-child(-n+4){{text-align:left}}
td.worse{{background:#fdd;font-weight:bold}} code{{font-size:90%}}</style></head><body>
<h1>History of the best config per kernel, case and problem</h1>
<p>{len(points)} runs of {e(source)}, oldest first; each cell is the best value of the metric that ranks (lower is
better). "First regression": the first run whose best is more than {threshold_pct:g}% worse than the run before
it, and the commit it measured.</p>
<table><thead><tr><th>kernel</th><th>case</th><th>target</th><th>metric</th><th>trend</th>{head}
<th>first regression</th></tr></thead><tbody>
{chr(10).join(rows)}
</tbody></table></body></html>
"""


def write_history(path: Path, points: list[RunPoint], series: list[Series], threshold_pct: float,
                  source: str) -> None:
    path.write_text(history_html(points, series, threshold_pct, source), encoding="utf-8")
