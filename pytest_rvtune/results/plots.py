"""PNG plots beside the report: a BLOCK_SIZE_M x BLOCK_SIZE_N heatmap and counters against time, per case.

A kernel with problem keys (e.g. IS_CAUSAL) gets one heatmap and one scatter per problem
(``heatmap-IS_CAUSAL=True.png``): the problem keys are never an axis nor an "other param at its best", since
their values are not comparable.

Heatmap cells hold the case's rank metric (median time, or kernel_insns under QEMU) with the other parameters
at their best for that cell, annotated, the winner boxed; cells where every config failed say "fail".
matplotlib's object API (Figure, no pyplot) renders with Agg and keeps no global state, so it is safe in
any process and needs no display.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from scipy.stats import spearmanr

from pytest_rvtune.extras import missing_extra

try:
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FuncFormatter
except ImportError as exc:  # the [plots] extra
    raise missing_extra("matplotlib", "plots", "The report's plots") from exc

from pytest_rvtune.results.heatmap import heatmap_grid
from pytest_rvtune.results.records import RunRecord
from pytest_rvtune.results.report import counter_names, problem_file, ranked
from pytest_rvtune.results.runs import Run, group_by_problem, rank_metric, ranked_value
from pytest_rvtune.results.svg import colour_scale

MAX_SCATTER_PANELS = 12


def _scale(metric: str, values: Sequence[float]) -> tuple[float, str]:
    """Divisor and axis unit so numbers print short: time in us/ms/s, counts in thousands/millions."""
    top = max(values) if values else 1.0
    if metric == "time":
        for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
            if top >= div:
                return div, f"median time ({unit})"
        return 1.0, "median time (ns)"
    for unit, div in (("billions", 1e9), ("millions", 1e6), ("thousands", 1e3)):
        if top >= div:
            return div, f"{metric} ({unit})"
    return 1.0, metric


def heatmap(group: Sequence[RunRecord], path: Path, rank_by: str | None = None) -> Path | None:
    """The group's heatmap as a PNG at ``path``; None when there is nothing to plot."""
    fig = heatmap_figure(group, rank_by)
    if fig is None:
        return None
    fig.savefig(path)
    return path


def heatmap_figure(group: Sequence[RunRecord], rank_by: str | None = None) -> Figure | None:
    """BLOCK_SIZE_M x BLOCK_SIZE_N (or the two most varied params) of one group, the winner boxed."""
    grid_data = heatmap_grid(group, rank_by)
    if grid_data is None:
        return None
    metric, rows, cols = grid_data.metric, grid_data.rows, grid_data.cols
    row_p, col_p = grid_data.row_param, grid_data.col_param
    div, unit = _scale(metric, [v for v in map(grid_data.value, grid_data.best_in_cell) if v is not None])

    import numpy as np

    grid = np.full((len(rows), len(cols)), np.nan)
    for cell in grid_data.best_in_cell:
        grid[cell] = (grid_data.value(cell) or 0.0) / div
    fig = Figure(figsize=(1.2 * len(cols) + 3.5, 0.7 * len(rows) + 2.5), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    ax.set_facecolor("#d9d9d9")  # cells without a valid config (failed, or not in the space) show grey
    # the HTML heatmap's scale (svg.colour_scale): log, or rank when one outlier would wash the log scale out
    scale = colour_scale([float(v) for v in grid[~np.isnan(grid)]])
    if scale.kind == "rank":
        shades = np.vectorize(lambda v: np.nan if np.isnan(v) else scale.fraction(float(v)))(grid)
        image = ax.imshow(np.ma.masked_invalid(shades), cmap="YlOrRd", aspect="auto", vmin=0.0, vmax=1.0)
        fig.colorbar(image, ax=ax, label=f"rank of the cell's {unit} (0 = lowest), lower is better")
    else:
        norm = LogNorm() if scale.kind == "log" else None
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="YlOrRd", aspect="auto", norm=norm)
        bar = fig.colorbar(image, ax=ax, label=f"{unit}, {scale.title + ', ' if scale.title else ''}lower is better")
        plain = FuncFormatter(lambda value, _: f"{value:.3g}")  # 0.3, not 3 x 10^-1
        bar.ax.yaxis.set_major_formatter(plain)
        bar.ax.yaxis.set_minor_formatter(plain)
    ax.set_xticks(range(len(cols)), [str(c) for c in cols] if col_p else [""])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    ax.set_xlabel(col_p or "")
    ax.set_ylabel(row_p)
    lo, hi = np.nanmin(grid), np.nanmax(grid)
    for i in range(len(rows)):
        for j in range(len(cols)):
            value = grid[i, j]
            if np.isnan(value):
                text, colour = ("fail" if (i, j) in grid_data.tried else ""), "black"
            else:
                text = f"{value:.4g}"
                colour = "white" if hi > lo and scale.fraction(float(value)) > 0.6 else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour)
    bi, bj = grid_data.best
    ax.add_patch(Rectangle((bj - 0.5, bi - 0.5), 1, 1, fill=False, edgecolor="blue", linewidth=2.5))
    first = group[0]
    what = f"{metric} (QEMU)" if metric != "time" else "median time" + (" (emulated)" if first.emulated else "")
    others = grid_data.others
    subtitle = f"other params at their best ({', '.join(others)})" if others else ""
    ax.set_title(f"{first.kernel} / {first.group_label} on {first.target}: {what}\n"
                 f"best (boxed): {grid_data.winner.config_id}" + (f"\n{subtitle}" if subtitle else ""), fontsize=9)
    return fig


def counters_scatter(group: Sequence[RunRecord], path: Path) -> Path | None:
    valid = [r for r in group if r.valid and r.median_ns is not None]
    median = {id(r): ranked_value(r, "time") for r in valid}  # the median time of each (it has one)
    names = [n for n in counter_names(valid) if len({r.counters.get(n) for r in valid}) > 1][:MAX_SCATTER_PANELS]
    if not names or len(valid) < 2:
        return None
    time_div, time_unit = _scale("time", list(median.values()))
    best = ranked(valid, rank_metric(valid))[0]
    cols = min(3, len(names))
    n_rows = -(-len(names) // cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * n_rows), dpi=100, layout="constrained")
    first = group[0]
    fig.suptitle(f"{first.kernel} / {first.group_label} on {first.target}: counters vs {time_unit}"
                 + (" (emulated time)" if first.emulated else "") + f"\nred star = best config {best.config_id}",
                 fontsize=10)
    for index, name in enumerate(names):
        ax = fig.add_subplot(n_rows, cols, index + 1)
        points = [r for r in valid if name in r.counters]
        div, unit = _scale(name, [r.counters[name] for r in points])
        ax.scatter([r.counters[name] / div for r in points], [median[id(r)] / time_div for r in points], s=18)
        if name in best.counters:
            ax.scatter([best.counters[name] / div], [median[id(best)] / time_div], marker="*", s=160,
                       color="red", zorder=3)
        ax.set_xlabel(unit)
        ax.set_ylabel(time_unit)
        xs = [r.counters[name] for r in points]
        if len(points) >= 3 and len(set(xs)) > 1:
            rho = spearmanr(xs, [median[id(r)] for r in points])[0]
            ax.set_title(f"{name}: Spearman {rho:+.2f}", fontsize=9)
        ax.grid(alpha=0.3)
    fig.savefig(path)
    return path


def write_plots(run: Run, out: Path, rank_by: str | None = None) -> list[Path]:
    """All plots of a run under ``<out>/<target>/<kernel>/<case>/`` (per problem: ``heatmap-<problem id>.png``);
    returns the files written."""
    written: list[Path] = []
    for (target, kernel, case, problem), group in group_by_problem(run.records).items():
        folder = out / target / kernel / case
        folder.mkdir(parents=True, exist_ok=True)
        for made in (heatmap(group, folder / problem_file("heatmap", problem, "png"), rank_by),
                     counters_scatter(group, folder / problem_file("counters_vs_time", problem, "png"))):
            if made:
                written.append(made)
    return written
