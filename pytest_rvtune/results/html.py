"""``rvtune report RUN --html FILE``: one self-contained HTML page of a run, readable offline.

Per group (target, kernel, case, problem; runs.py): the configs ranked by the group's metric in a table sorted by
clicking a header, a heatmap of the two block parameters that vary (svg.py), the counters' correlation with
time (correlation.py) and a scatter of the strongest counter against time; the best config per group; the items
without a valid result; with a base run, every item's change and verdict as ``rvtune compare`` computes them.

This module computes what the page shows (tables of cells, facts, charts); the markup is in Jinja2 templates
(``templates/page.html.j2``, ``macros.html.j2``, with the page's CSS and script beside them), rendered with
autoescape on: every string from a run (kernel names, config values, messages, counter names) is escaped on
output, and only the charts svg.py draws (which escapes what it draws) go in as markup. The file carries
everything inline (CSS, a small script for sorting, SVG charts): no network, no CDN, so it opens from a mail
attachment or a CI artifact as it is. ``#sort=TABLE:COLUMN[:asc|desc]`` in the URL sorts a table on load (the
table ids and column keys are the ``id`` and ``data-key`` attributes), so a sorted view can be linked. Nothing
here knows pytest or argparse.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from markupsafe import Markup

from pytest_rvtune.results.code_files import CodeFiles, ItemKey, MakeAsm, copy_code
from pytest_rvtune.results.compare import Change, ItemComparison, Thresholds, compare_runs, format_pct
from pytest_rvtune.results.correlation import STRONG, correlation_rows
from pytest_rvtune.results.heatmap import HeatmapGrid, heatmap_grid, sorted_values
from pytest_rvtune.results.records import GroupKey, RunRecord
from pytest_rvtune.results.report import (
    RATE_COLUMNS,
    CaseReport,
    counter_names,
    default_configs,
    format_count,
    format_metric,
    format_ns,
    iter_case_reports,
    metric_title,
    ranked,
)
from pytest_rvtune.results.roofline import BYTES_PER_CYCLE, PEAK_FLOP_PER_CYCLE, roof_points
from pytest_rvtune.results.roofline import METRIC as ROOF_METRIC
from pytest_rvtune.results.runs import Run, group_by_problem, metric_value, rank_metric
from pytest_rvtune.results.svg import (
    HeatCell,
    Point,
    Series,
    colour_scale,
    heatmap_svg,
    line_chart_svg,
    roofline_svg,
    scatter_svg,
)
from pytest_rvtune.results.templating import environment

#: ItemComparison statuses (compare.ItemComparison.status) by how they read: bad, good, worth a look, nothing to say.
VERDICT_TONE = {"regressed": "bad", "broken": "bad", "still failing": "bad", "improved": "good", "fixed": "good",
                "too few samples": "warn", "unconfirmed": "warn", "new": "warn", "missing": "warn",
                "changed": "warn", "unchanged": "plain", "same": "plain", "not gated": "plain"}
TONE_ORDER = ("bad", "warn", "good", "plain")


# --- tables -----------------------------------------------------------------------------------------------

SortValue = float | str | None


@dataclass(frozen=True)
class Column:
    key: str  # the column's data-key: what a #sort= fragment names
    title: str
    numeric: bool = True
    css: str = ""  # extra class of the column's cells, e.g. "metric" for the ranking metric


@dataclass(frozen=True)
class Cell:
    text: str  # shown, escaped on output
    sort: SortValue = None  # what the column sorts by (None: shown last); the text when omitted
    css: str = ""
    tooltip: str = ""
    links: tuple[tuple[str, str], ...] = ()  # (text, href) shown instead of the text: links beside the page

    @property
    def data_v(self) -> str:
        return "" if self.sort is None else (repr(self.sort) if isinstance(self.sort, float) else self.sort)


@dataclass(frozen=True)
class Row:
    cells: list[Cell]
    attrs: dict[str, str]  # data-* attributes and a class, escaped on output


def num(value: float | None, text: str) -> Cell:
    """A numeric cell: shown as ``text``, sorted by ``value`` (None sorts last, NaN too)."""
    usable = value is not None and not (isinstance(value, float) and math.isnan(value))
    return Cell(text, float(value) if usable and value is not None else None)


def txt(text: str, css: str = "", tooltip: str = "") -> Cell:
    return Cell(text, text, css, tooltip)


def classes(*names: str) -> dict[str, str]:
    """``{"class": "a b"}`` of the non-empty names, ``{}`` when there are none."""
    joined = " ".join(n for n in names if n)
    return {"class": joined} if joined else {}


#: Rows one table shows at most: a results file of 10^5 items made a 130 MB page no browser opens; the report's
#: text, CSV and JSON outputs hold every row.
MAX_TABLE_ROWS = 500
#: The rows a table shows on the page being rendered (render_html's ``max_rows``, ``--html-rows``).
ROW_LIMIT: ContextVar[int] = ContextVar("ROW_LIMIT", default=MAX_TABLE_ROWS)


@dataclass(frozen=True)
class HeadCell:
    title: str
    attrs: dict[str, str]


@dataclass(frozen=True)
class BodyCell:
    text: str
    attrs: dict[str, str]
    links: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class BodyRow:
    attrs: dict[str, str]
    cells: list[BodyCell]


@dataclass(frozen=True)
class Table:
    """A sortable table: clicking a header sorts by it (numbers as numbers); ``sorted_by`` marks the column the
    rows are already in ascending order of. At most ``limit`` rows, in their order; a note says how many there
    are (``count``, when only the first rows were made: a run of 10^5 items held 90,000 rows of cells)."""

    id: str
    columns: Sequence[Column]
    rows: Sequence[Row]
    sorted_by: str | None = None
    empty: str = "nothing to show"
    limit: int = field(default_factory=ROW_LIMIT.get)
    count: int | None = None  # the rows there are; None: len(rows)

    @property
    def total(self) -> int:
        return len(self.rows) if self.count is None else self.count

    @property
    def more(self) -> int:
        return self.total - self.limit

    def head(self) -> list[HeadCell]:
        cells = []
        for column in self.columns:
            attrs = {"data-key": column.key, "data-type": "num" if column.numeric else "text"}
            if column.key == self.sorted_by:
                attrs["aria-sort"] = "ascending"
            cells.append(HeadCell(column.title, attrs | classes("num" if column.numeric else "", column.css)))
        return cells

    def body(self) -> list[BodyRow]:
        rows = []
        for row in self.rows[: self.limit]:
            cells = []
            for column, cell in zip(self.columns, row.cells, strict=True):
                attrs = {"data-v": cell.data_v} | classes("num" if column.numeric else "", column.css, cell.css)
                if cell.tooltip:
                    attrs["title"] = cell.tooltip
                cells.append(BodyCell(cell.text, attrs, cell.links))
            rows.append(BodyRow(row.attrs, cells))
        return rows


@dataclass(frozen=True)
class Figure:
    svg: Markup  # drawn by svg.py, which escapes every string it draws
    caption: str
    css: str = ""


def ratio(value: float | None) -> Cell:
    return num(value, "" if value is None else f"{value:.2f}x")


def verdict_cell(status: str) -> Cell:
    """Sorted worst first (bad, worth a look, good, nothing to say), then by name."""
    return Cell(status, f"{severity(status)} {status}", f"verdict tone-{tone(status)}")


# --- one group --------------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def param_columns(group: Sequence[RunRecord]) -> list[str]:
    """Config parameters shown as their own columns: all but the problem keys (constant in a group), in the
    kernel's own order (the config id's; a results file may have sorted the config's keys)."""
    problem = group[0].problem
    keys = [k for k in dict.fromkeys(k for r in group for k in r.config) if k not in problem]
    sample = group[0].config_id

    def position(key: str) -> int:
        at = sample.find(f"{key}=")
        while at > 0 and sample[at - 1] != "-":
            at = sample.find(f"{key}=", at + 1)
        return at if at >= 0 else len(sample)

    return sorted(keys, key=position)


def ranking_table(table_id: str, rep: CaseReport, group: Sequence[RunRecord],
                  verdicts: dict[tuple[str, str, str, str], ItemComparison] | None,
                  links: dict[ItemKey, dict[str, str]] | None = None) -> Table:
    by_config = {r.config_id: r for r in group}
    params = param_columns(group)
    counters = [n for n in counter_names(group) if n != rep.metric]
    rates = [name for name in RATE_COLUMNS if any(name in raw for raw in rep.rows)]
    links = links or {}
    code = any(r.key in links for r in group)
    columns = [Column("rank", "#")]
    columns += [Column(f"param:{p}", p, numeric=all(_is_number(r.config.get(p)) for r in group)) for p in params]
    if rep.metric != "time":
        columns.append(Column(f"counter:{rep.metric}", rep.metric, css="metric"))
    columns += [Column(f"rate:{name}", name) for name in rates]
    columns += [Column("median", "median time", css="metric" if rep.metric == "time" else ""),
                Column("iqr", "IQR"), Column("n", "samples")]
    columns += [Column(f"counter:{n}", n) for n in counters]
    columns += [Column("vs_worst", "vs worst"), Column("vs_default", "vs default"),
                Column("vs_common", "vs common winner")]
    if code:
        columns += [Column("code", "code", False)]
    if verdicts is not None:
        columns += [Column("change", f"{metric_title(rep.metric)} vs base"), Column("verdict", "verdict", False)]
    rows = []
    for raw in rep.rows[: ROW_LIMIT.get()]:  # the rows the page shows: the others are never drawn
        record = by_config[raw["config"]]
        is_default = raw["config"] == rep.default_id
        cells = [Cell(f"{raw['rank']} (default)" if is_default else str(raw["rank"]), float(raw["rank"]),
                      tooltip="the kernel's untuned config (DEFAULT_CONFIG or its first)" if is_default else "")]
        for p in params:
            value = record.config.get(p)
            cells.append(num(value, str(value)) if _is_number(value) else txt("" if value is None else str(value)))
        if rep.metric != "time":
            cells.append(num(raw.get(rep.metric), format_count(raw.get(rep.metric))))
        cells += [num(raw.get(name), "" if raw.get(name) is None else f"{raw[name]:.3g}") for name in rates]
        cells += [num(raw["median_ns"], format_ns(raw["median_ns"])), num(raw["iqr_ns"], format_ns(raw["iqr_ns"])),
                  num(raw["n"], str(raw["n"]))]
        cells += [num(raw.get(n), format_count(raw.get(n))) for n in counters]
        cells += [ratio(raw["vs_worst"]), ratio(raw["vs_default"]), ratio(raw["vs_common"])]
        if code:
            mine = links.get(record.key, {})
            cells.append(Cell(" ".join(mine), " ".join(mine), links=tuple(mine.items())))
        if verdicts is not None:
            verdict = verdicts.get(record.key)
            change = metric_change(verdict, rep.metric)
            pct = change.change_pct if change else None
            cells += [num(pct, format_pct(pct)), verdict_cell(verdict.status if verdict else "")]
        attrs = {"data-config": record.config_id, "title": record.config_id}
        css = " ".join(c for c in ("winner" if raw["rank"] == 1 else "", "default" if is_default else "") if c)
        if css:
            attrs["class"] = css
        rows.append(Row(cells, attrs))
    sorted_by = f"counter:{rep.metric}" if rep.metric != "time" else "median"
    return Table(table_id, columns, rows, sorted_by=sorted_by, count=rep.n_ranked)


def metric_change(verdict: ItemComparison | None, metric: str) -> Change | None:
    """The change of the group's ranking metric in an item's verdict (None when it was not compared)."""
    if verdict is None:
        return None
    return next((c for c in verdict.changes if c.metric == metric), None)


def default_cell(grid: HeatmapGrid, records: Sequence[RunRecord], default_id: str | None) -> tuple[int, int] | None:
    """The heatmap cell holding the untuned default config (None when it is not known or not in the run)."""
    record = next((r for r in records if r.config_id == default_id), None)
    if record is None:
        return None
    row = record.config.get(grid.row_param)
    col = record.config.get(grid.col_param) if grid.col_param else None
    if row not in grid.rows or col not in grid.cols:
        return None
    return grid.rows.index(row), grid.cols.index(col)


def heatmap_figure(grid: HeatmapGrid, chart_id: str, default: tuple[int, int] | None = None) -> Figure:
    def label(value: Any) -> str:
        return "" if value is None else str(value)

    cells = []
    for i, row_value in enumerate(grid.rows):
        line = []
        for j, col_value in enumerate(grid.cols):
            where = f"{grid.row_param}={row_value}" + (f", {grid.col_param}={col_value}" if grid.col_param else "")
            value = grid.value((i, j))
            record = grid.best_in_cell.get((i, j))
            if record is not None and value is not None:
                line.append(HeatCell(value, short(grid.metric, value),
                                     f"{where}\n{format_metric(grid.metric, value)}\nbest here: {record.config_id}"))
            elif (i, j) in grid.tried:
                line.append(HeatCell(None, "fail", f"{where}\nno config here gave a valid result", failed=True))
            else:
                line.append(HeatCell(None, "", f"{where}\nnot in the config space"))
        cells.append(line)
    values = [v for v in map(grid.value, grid.best_in_cell) if v is not None]
    legend = (short(grid.metric, min(values)), short(grid.metric, max(values)))
    svg = heatmap_svg(cells, [label(v) for v in grid.rows], [label(v) for v in grid.cols], grid.row_param,
                      grid.col_param or "", legend, grid.best, f"heatmap of {metric_title(grid.metric)}", chart_id,
                      default)
    others = (f"; {', '.join(grid.others)} at their best in each cell" if grid.others else "")
    scale = colour_scale(values)
    how = {"log": "colours on a log scale (a 10x outlier takes one step of the scale)",
           "rank": "colours by rank among the cells (one outlier would wash a log scale out); the numbers are "
                   "the values"}.get(scale.kind, "")
    dashed = "; dashed: the cell of the untuned default config" if default is not None else ""
    return Figure(Markup(svg), f"{metric_title(grid.metric)} per cell, lower is better{others}; "
                               f"{how + '; ' if how else ''}outlined: the winner, {grid.winner.config_id}{dashed}")


#: Values of one parameter a chart shows at most: beyond, the parameter is no block size (the table has it).
MAX_CHART_VALUES = 32
#: Line colours of the per-parameter charts: the best over the other parameters, and their median.
BEST_COLOUR, MEDIAN_COLOUR = "#1d4ed8", "#9ca3af"


def param_figures(group: Sequence[RunRecord], metric: str, emulated: bool) -> list[Figure]:
    """One chart per block parameter with two or more values: the group's metric at each of its values, the best
    and the median over the configs that share that value (the other parameters free); the winner's value marked.
    The heatmap folds all but two parameters away; these show each on its own."""
    valid = [r for r in group if r.valid and metric_value(r, metric) is not None]
    if len(valid) < 2:
        return []
    winner = ranked(valid, metric)[0]
    figures = []
    for param in param_columns(group):
        xs = sorted_values(r.config.get(param) for r in valid if param in r.config)
        if not 2 <= len(xs) <= MAX_CHART_VALUES:
            continue
        at: dict[Any, list[float]] = {x: [] for x in xs}
        for r in valid:
            if param in r.config:
                at[r.config[param]].append(metric_value(r, metric) or 0.0)
        best = [min(at[x]) for x in xs]
        middle = [statistics.median(at[x]) for x in xs]
        tips = [f"{param}={x}: best {format_metric(metric, b)}, median {format_metric(metric, m)} over "
                f"{len(at[x])} configs" for x, b, m in zip(xs, best, middle, strict=True)]
        series = [Series("best", best, BEST_COLOUR, tooltips=tips),
                  Series("median", middle, MEDIAN_COLOUR, dashed=True, tooltips=tips)]
        y_title = metric_title(metric) + (" (emulated)" if metric == "time" and emulated else "")
        svg = line_chart_svg([str(x) for x in xs], series, param, y_title, partial(short, metric),
                             f"{metric_title(metric)} against {param}", mark=xs.index(winner.config.get(param)))
        figures.append(Figure(Markup(svg), f"{param}: diamond at the winner's value ({param}="
                                           f"{winner.config.get(param)})", "param"))
    return figures


def short(metric: str, value: float) -> str:
    """A cell-sized number: 1.23 ms, 51.9k, 1.2M."""
    if metric == "time":
        return format_ns(value)
    return compact(value)


def compact(value: float) -> str:
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def scatter_figure(group: Sequence[RunRecord], strongest: dict[str, Any], emulated: bool) -> Figure:
    name = strongest["counter"]
    valid = [r for r in group if r.valid and r.median_ns is not None and name in r.counters]
    order = ranked(valid, rank_metric(valid))
    best = order[0]
    # as the tables, at most ROW_LIMIT points (a run of 10^5 items drew 90,000 circles, 24 MB of the page): then
    # every step-th config of the ranking, the winner first, so the cloud keeps its shape
    step = math.ceil(len(valid) / ROW_LIMIT.get())
    shown = valid if step <= 1 else order[::step]
    points = [Point(r.counters[name], r.median_ns or 0.0,
                    f"{r.config_id}\n{name}: {format_count(r.counters[name])}\nmedian time: {format_ns(r.median_ns)}",
                    highlight=r is best) for r in shown]
    time_title = "median time" + (" (emulated by QEMU)" if emulated else "")
    svg = scatter_svg(points, name, time_title, compact, format_ns, f"{name} against median time",
                      note=f"Spearman {strongest['spearman']:+.2f}, Pearson {strongest['pearson']:+.2f}")
    per = ("one point per valid config" if step <= 1 else
           f"{len(shown)} of {len(valid)} valid configs: every {step}th of the ranking")
    return Figure(Markup(svg), f"The counter most correlated with time, {name}, {per}; "
                               f"diamond: the winner, {best.config_id}")


def correlation_table(table_id: str, rows: Sequence[dict[str, Any]]) -> Table:
    columns = [Column("counter", "counter", False), Column("n", "n"), Column("spearman", "Spearman"),
               Column("spearman_p", "p"), Column("pearson", "Pearson"), Column("pearson_p", "p ")]
    shown = []
    for row in rows:
        strong = max(abs(row["spearman"]), abs(row["pearson"])) > STRONG
        shown.append(Row([txt(row["counter"]), num(row["n"], str(row["n"])),
                          num(row["spearman"], f"{row['spearman']:+.3f}"), num(row["spearman p"],
                                                                               f"{row['spearman p']:.2g}"),
                          num(row["pearson"], f"{row['pearson']:+.3f}"), num(row["pearson p"],
                                                                             f"{row['pearson p']:.2g}")],
                         {"class": "strong"} if strong else {}))
    return Table(table_id, columns, shown, empty="no counter varies over three or more valid configs")


def failure_table(table_id: str, records: Sequence[RunRecord]) -> Table:
    columns = [Column("target", "target", False), Column("kernel", "kernel", False), Column("case", "case", False),
               Column("config", "config", False, "config"), Column("outcome", "outcome", False),
               Column("message", "message", False)]
    rows = [Row([txt(r.target), txt(r.kernel), txt(r.case), txt(r.config_id),
                 txt(r.outcome, "verdict tone-bad"),
                 txt(first_line(r.message), tooltip=r.message)], {"data-config": r.config_id})
            for r in records[: ROW_LIMIT.get()]]
    return Table(table_id, columns, rows, count=len(records))


def first_line(message: str, width: int = 160) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def ranking_note(rep: CaseReport) -> str:
    if rep.metric == "time":
        return ("Ranked by median time" + (": emulated by QEMU, not performance (no instruction counts were "
                                            "recorded)." if rep.emulated else " of the timed samples."))
    if rep.metric == "x60_cycles":
        return ("Ranked by x60_cycles (modelled SpacemiT X60 cycles per launch: every instruction QEMU executed, "
                "priced by the chip's measured cost at its SEW/LMUL). QEMU's wall time is not performance; the "
                "times are shown for reference.")
    what = ("guest instructions per launch: the grid walk, the kernel and the libc calls it makes"
            if rep.metric == "launch_insns" else "guest instructions inside the kernel symbol")
    return (f"Ranked by {rep.metric} ({what}). QEMU's wall time is not performance, so configs are ranked by "
            "exact instruction counts; the times are shown for reference.")


@dataclass
class GroupView:
    """What the page shows of one group, and the anchor it is reached by."""

    anchor: str
    key: GroupKey
    report: CaseReport
    records: list[RunRecord]
    correlations: list[dict[str, Any]]
    common_id: str | None  # the kernel's most common winner for this target and problem (report.default_configs)
    verdicts: dict[tuple[str, str, str, str], ItemComparison] | None = None
    links: dict[ItemKey, dict[str, str]] = field(default_factory=dict)  # per-config code links (code_files.py)

    @property
    def title(self) -> str:
        return f"{self.report.kernel} / {self.report.label}"

    @property
    def target(self) -> str:
        return self.report.target

    @property
    def emulated(self) -> bool:
        return self.report.emulated

    @property
    def valid(self) -> int:
        return self.report.n_ranked

    @property
    def metric_title(self) -> str:
        return metric_title(self.report.metric)

    @property
    def spread(self) -> str:
        rows = self.report.rows
        return f"{rows[0]['vs_worst']:.2f}x" if rows and rows[0]["vs_worst"] else ""

    @property
    def note(self) -> str:
        return ranking_note(self.report)

    @property
    def badges(self) -> list[tuple[str, str, str]]:
        """(class, text, tooltip) of the heading's badges."""
        badges = [("target", self.report.target, "")]
        if self.report.emulated:
            badges.append(("emulated", "emulated", "QEMU: instruction counts are exact, times are not performance"))
        return badges

    @property
    def facts(self) -> list[tuple[str, str]]:
        rep, facts = self.report, []
        if rep.rows:
            best = rep.rows[0]
            value = best["median_ns"] if rep.metric == "time" else best.get(rep.metric)
            facts.append(("best", best["config"]))
            facts.append((metric_title(rep.metric), format_metric(rep.metric, value)))
            if best["vs_worst"]:
                facts.append(("worst / best", f"{best['vs_worst']:.2f}x over {rep.n_ranked} configs"))
            if rep.default_rank is not None:
                faster = f", the best is {best['vs_default']:.2f}x faster" if rep.default_rank > 1 else ""
                facts.append(("default (untuned)", f"#{rep.default_rank}{faster}"))
            elif rep.default_id:
                facts.append(("default (untuned)", f"{rep.default_id}: {default_absence(rep, self.records)}"))
        if rep.failures:
            facts.append(("without a valid result", str(len(rep.failures))))
        return facts

    @cached_property
    def figures(self) -> list[Figure]:
        figures = []
        grid = heatmap_grid(self.records)
        if grid is not None:
            figures.append(heatmap_figure(grid, f"{self.anchor}-heat",
                                          default_cell(grid, self.records, self.report.default_id)))
        if self.correlations:
            figures.append(scatter_figure(self.records, self.correlations[0], self.report.emulated))
        return figures

    @cached_property  # the template reads it in a test and again to draw it
    def param_figures(self) -> list[Figure]:
        return param_figures(self.records, self.report.metric, self.report.emulated)

    @cached_property
    def ranking(self) -> Table:
        return ranking_table(f"rank-{self.anchor}", self.report, self.records, self.verdicts, self.links)

    @cached_property
    def correlation(self) -> Table:
        return correlation_table(f"corr-{self.anchor}", self.correlations)

    @cached_property  # the template reads it in a test and again to draw it
    def failures(self) -> Table | None:
        return failure_table(f"fail-{self.anchor}", self.report.failures) if self.report.failures else None


# --- the page ---------------------------------------------------------------------------------------------


def best_table(views: Sequence[GroupView], defaults: dict[tuple[str, str, str], str]) -> Table:
    with_problem = any(v.report.problem for v in views)
    columns = [Column("target", "target", False), Column("kernel", "kernel", False), Column("case", "case", False)]
    if with_problem:
        columns.append(Column("problem", "problem", False))
    columns += [Column("best", "best config", False, "config"), Column("by", "ranked by", False),
                Column("value", "value"), Column("vs_worst", "vs worst"), Column("vs_default", "vs default"),
                Column("configs", "valid configs"), Column("default", "default (untuned)", False, "config"),
                Column("common", "most common winner", False, "config")]
    rows = []
    for view in views:
        rep = view.report
        best = rep.rows[0] if rep.rows else {}
        value = best.get("median_ns") if rep.metric == "time" else best.get(rep.metric)
        cells = [txt(rep.target), txt(rep.kernel), txt(rep.case)]
        if with_problem:
            cells.append(txt(rep.problem_id))
        cells.append(txt(best.get("config", "(none valid)")))
        default = rep.default_id or ""
        if default and rep.default_rank is None:
            default += f" ({default_absence(rep, view.records)})"
        cells += [txt(metric_title(rep.metric)), num(value, format_metric(rep.metric, value)),
                  ratio(best.get("vs_worst")), ratio(best.get("vs_default")),
                  num(rep.n_ranked, f"{rep.n_ranked} of {len(view.records)}"), txt(default),
                  txt(defaults.get((rep.target, rep.kernel, rep.problem_id), ""))]
        rows.append(Row(cells, {"data-group": view.anchor}))
    return Table("best", columns, rows)


def default_absence(rep: CaseReport, records: Sequence[RunRecord]) -> str:
    """Why the untuned default config has no rank: not run (a --rvtune-config selection), or no valid result."""
    ran = any(r.config_id == rep.default_id for r in records)
    return "no valid result in this run" if ran else "not in this run"


def roofline_figure(views: Sequence[GroupView]) -> Figure | None:
    """Every config of the groups ranked by the X60 model whose kernel declares FLOPS and BYTES, against the X60
    core's roofline (roofline.py); each group's winner a diamond. None when no group has the figures."""
    points = roof_points([v.records for v in views if v.report.metric == ROOF_METRIC])
    if not points:
        return None
    drawn = [Point(p.intensity, p.flop_per_cycle,
                   f"{p.record.kernel} / {p.record.group_label}: {p.record.config_id}\n"
                   f"{p.intensity:.3g} FLOP/byte, {p.flop_per_cycle:.3g} FLOP/cycle"
                   f" ({p.flop_per_cycle / PEAK_FLOP_PER_CYCLE:.1%} of the peak)", highlight=p.best)
             for p in points]
    svg = roofline_svg(drawn, PEAK_FLOP_PER_CYCLE, BYTES_PER_CYCLE, "arithmetic intensity (FLOP/byte)",
                       "FLOP/cycle (X60 model)", "roofline of the SpacemiT X60",
                       f"X60 peak {PEAK_FLOP_PER_CYCLE:g} FLOP/cycle, DRAM {BYTES_PER_CYCLE:.2f} bytes/cycle")
    kernels = sorted({p.record.kernel for p in points})
    return Figure(Markup(svg), f"Roofline of one SpacemiT X60 core: measured fp32 peak {PEAK_FLOP_PER_CYCLE:g} "
                               f"FLOP/cycle, DRAM bandwidth {BYTES_PER_CYCLE:.2f} bytes/cycle (10.66 GB/s at "
                               f"1.6 GHz). One point per config, FLOP/cycle of the X60 model's cycles, intensity "
                               f"from the kernel's FLOPS(case) / BYTES(case) ({', '.join(kernels)}); diamonds: each "
                               "group's winner.", "roofline")


@dataclass
class Comparison:
    """The section comparing the run with a base run: its path, the verdict counts, the gate, the table."""

    base: str
    chips: list[tuple[str, int, str]]  # (tone, count, status), worst first
    gate: str
    table: Table


def comparison_section(base: Run, run: Run, verdicts: Sequence[ItemComparison], thresholds: Thresholds
                       ) -> Comparison:
    """Every item's verdict against the base run, worst first: the change of its group's ranking metric, and the
    other metrics that moved."""
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
    chips = [(tone(status), n, status) for status, n in sorted(counts.items(), key=lambda kv: (severity(kv[0]),
                                                                                               kv[0]))]
    metrics = {key: rank_metric(group) for key, group in group_by_problem([*base.records, *run.records]).items()}
    columns = [Column("target", "target", False), Column("kernel", "kernel", False), Column("case", "case", False),
               Column("config", "config", False, "config"), Column("verdict", "verdict", False),
               Column("metric", "ranked by", False), Column("base", "base"), Column("new", "this run"),
               Column("change", "change"), Column("p", "p"), Column("others", "other changes", False)]
    rows = []
    for verdict in sorted(verdicts, key=lambda v: (severity(v.status), v.key)):
        record = run.find(record_key(verdict)) or base.find(record_key(verdict))
        metric = metrics.get(record.group, "time") if record else "time"
        change = metric_change(verdict, metric)
        others = [f"{c.metric} {format_pct(c.change_pct)} ({c.status})" for c in verdict.changes
                  if c.metric != metric and c.status in ("regressed", "improved", "changed")]
        target, kernel, case, config = verdict.key
        base_value, new_value = (change.base, change.new) if change else (None, None)
        pct, p = (change.change_pct, change.p_value) if change else (None, None)
        rows.append(Row([txt(target), txt(kernel), txt(case), txt(config), verdict_cell(verdict.status),
                         txt(metric if change else ""), num(base_value, format_metric(metric, base_value)),
                         num(new_value, format_metric(metric, new_value)), num(pct, format_pct(pct)),
                         num(p, "" if p is None else f"{p:.2g}"),
                         txt("; ".join(others), tooltip="\n".join([verdict.message, *verdict.warnings]))],
                        {"data-config": config, "data-verdict": verdict.status}))
    gate = (f"a change counts when it is significant (Mann-Whitney, p < {thresholds.alpha:g}) and beyond "
            f"{thresholds.default_pct:g} %; QEMU instruction counts are exact, so only the threshold applies to "
            "them; emulated time is never gated")
    return Comparison(str(base.path), chips, gate, Table("compare", columns, rows, empty="no item in either run"))


def record_key(verdict: ItemComparison) -> dict[str, str]:
    target, kernel, case, config = verdict.key
    return {"target": target, "kernel": kernel, "case": case, "config_id": config}


def tone(status: str) -> str:
    return VERDICT_TONE.get(status, "plain")


def severity(status: str) -> int:
    return TONE_ORDER.index(tone(status))


def summary_tiles(run: Run, views: Sequence[GroupView]) -> list[tuple[str, str, bool]]:
    """(name, value, bad) of the header's tiles."""
    valid = sum(r.valid for r in run.records)
    failed = len(run.records) - valid
    targets = sorted({r.target for r in run.records})
    return [("items", str(len(run.records)), False), ("valid", str(valid), False),
            ("without a valid result", str(failed), failed > 0), ("groups", str(len(views)), False),
            ("targets", ", ".join(targets), False)]


def machines_of(run: Run) -> list[tuple[str, str]]:
    """(target, its ISA, board and CPU) of each target that describes its machine."""
    machines = {}
    for record in run.records:
        machine = record.machine
        described = ", ".join(str(machine[k]) for k in ("isa", "board", "cpu") if machine.get(k))
        if described:
            machines[record.target] = described
    return sorted(machines.items())


def render_html(run: Run, base: Run | None = None, thresholds: Thresholds | None = None,
                now: datetime | None = None, code: CodeFiles | None = None, max_rows: int = MAX_TABLE_ROWS) -> str:
    """The whole page of ``run`` (compared with ``base`` when given) as one HTML string; ``code``: the configs'
    C and .s copied beside the page (code_files.py), linked from their rows; ``max_rows``: the rows a table shows
    at most (best first; a note says how many there are)."""
    token = ROW_LIMIT.set(max_rows)
    try:
        return _render(run, base, thresholds, now, code)
    finally:
        ROW_LIMIT.reset(token)


def _render(run: Run, base: Run | None, thresholds: Thresholds | None, now: datetime | None,
            code: CodeFiles | None) -> str:
    thresholds = thresholds or Thresholds()
    groups = group_by_problem(run.records)
    # each group's rows cut to those the page shows as it is made: never every row of every group at once
    defaults = default_configs(run.records)
    reports = {(r.target, r.kernel, r.case, r.problem_id): r.shown_rows(ROW_LIMIT.get())
               for r in iter_case_reports(run, defaults=defaults)}
    correlations: dict[GroupKey, list[dict[str, Any]]] = {}
    for row in correlation_rows(run.records):
        key = (row["target"], row["kernel"], row["case"], row.get("problem", ""))
        correlations.setdefault(key, []).append(row)
    verdict_list = compare_runs(base, run, thresholds) if base is not None else None
    verdicts = {v.key: v for v in verdict_list} if verdict_list is not None else None
    views = [GroupView(f"g{i}", key, reports[key], records, correlations.get(key, []),
                       defaults.get((key[0], key[1], key[3])), verdicts, code.links if code else {})
             for i, (key, records) in enumerate(groups.items(), 1)]
    failures = [r for r in run.records if not r.valid]
    comparison = (comparison_section(base, run, verdict_list, thresholds)
                  if base is not None and verdict_list is not None else None)
    return environment().get_template("page.html.j2").render(
        run_name=run.path.name, run_path=str(run.path),
        stamp=(now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        summary=summary_tiles(run, views), machines=machines_of(run), groups=views,
        overview_note=("Default = the kernel's untuned config (its module's DEFAULT_CONFIG, else its first "
                       "config); vs default = how many times faster the best is than it; vs worst = than the worst "
                       "valid config. Most common winner = the config that wins most of the kernel's cases (what "
                       "rvtune export-best ships as its default)."),
        code_note=code_note(code),
        best=best_table(views, defaults), roofline=roofline_figure(views), comparison=comparison, strong=STRONG,
        # (one group: its section lists them already)
        failures=failure_table("failures-all", failures) if failures and len(views) > 1 else None)


def code_note(code: CodeFiles | None) -> str:
    if code is None or not (code.links or code.missing):
        return ""
    folder = f"{Path(code.written[0]).parent.name}/" if code.written else "the folder beside this page"
    missing = (f" The code of {code.missing} configs was not found (a cleaned build cache, or another machine)."
               if code.missing else "")
    return (f"A config's C and asm links open its generated C and its disassembly, copied into {folder} (keep it "
            f"beside the page).{missing}")


def write_html(run: Run, path: Path, base: Run | None = None, thresholds: Thresholds | None = None,
               make_asm: MakeAsm | None = None, max_rows: int = MAX_TABLE_ROWS) -> list[Path]:
    """The page at ``path`` and, for records that name their code, each shown config's C and .s in
    ``<stem>-code/`` beside it (the .s made by ``make_asm``, build.disassembly_of); returns the files written,
    the page first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    code = copy_code(run.records, path.parent / f"{path.stem}-code", make_asm, max_rows)
    path.write_text(render_html(run, base, thresholds, code=code, max_rows=max_rows), encoding="utf-8")
    return [path, *code.written]
