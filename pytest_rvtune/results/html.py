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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from pytest_rvtune.results.compare import Change, ItemComparison, Thresholds, compare_runs, format_pct
from pytest_rvtune.results.correlation import STRONG, correlation_rows
from pytest_rvtune.results.heatmap import HeatmapGrid, heatmap_grid
from pytest_rvtune.results.records import GroupKey, RunRecord
from pytest_rvtune.results.report import (
    CaseReport,
    build_case_reports,
    counter_names,
    default_configs,
    format_count,
    format_metric,
    format_ns,
    metric_title,
    ranked,
)
from pytest_rvtune.results.runs import Run, group_by_problem, rank_metric
from pytest_rvtune.results.svg import HeatCell, Point, heatmap_svg, scatter_svg

#: ItemComparison statuses (compare.ItemComparison.status) by how they read: bad, good, worth a look, nothing to say.
VERDICT_TONE = {"regressed": "bad", "broken": "bad", "still failing": "bad", "improved": "good", "fixed": "good",
                "too few samples": "warn", "unconfirmed": "warn", "new": "warn", "missing": "warn",
                "changed": "warn", "unchanged": "plain", "same": "plain", "not gated": "plain"}
TONE_ORDER = ("bad", "warn", "good", "plain")


@cache
def environment() -> Environment:
    """The templates' environment: autoescape on, and an undefined name is an error, never an empty string."""
    return Environment(loader=PackageLoader("pytest_rvtune.results", "templates"), autoescape=True,
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


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
    href: str = ""  # a link (relative, beside the page) the text opens

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


@dataclass(frozen=True)
class HeadCell:
    title: str
    attrs: dict[str, str]


@dataclass(frozen=True)
class BodyCell:
    text: str
    attrs: dict[str, str]
    href: str = ""


@dataclass(frozen=True)
class BodyRow:
    attrs: dict[str, str]
    cells: list[BodyCell]


@dataclass(frozen=True)
class Table:
    """A sortable table: clicking a header sorts by it (numbers as numbers); ``sorted_by`` marks the column the
    rows are already in ascending order of. At most ``limit`` rows, in their order; a note says how many there
    are."""

    id: str
    columns: Sequence[Column]
    rows: Sequence[Row]
    sorted_by: str | None = None
    empty: str = "nothing to show"
    limit: int = MAX_TABLE_ROWS

    @property
    def more(self) -> int:
        return len(self.rows) - self.limit

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
                cells.append(BodyCell(cell.text, attrs, cell.href))
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
                  verdicts: dict[tuple[str, str, str, str], ItemComparison] | None) -> Table:
    by_config = {r.config_id: r for r in group}
    params = param_columns(group)
    counters = [n for n in counter_names(group) if n != rep.metric]
    columns = [Column("rank", "#")]
    columns += [Column(f"param:{p}", p, numeric=all(_is_number(r.config.get(p)) for r in group)) for p in params]
    if rep.metric != "time":
        columns.append(Column(f"counter:{rep.metric}", rep.metric, css="metric"))
    columns += [Column("median", "median time", css="metric" if rep.metric == "time" else ""),
                Column("iqr", "IQR"), Column("n", "samples")]
    columns += [Column(f"counter:{n}", n) for n in counters]
    columns += [Column("vs_worst", "vs worst"), Column("vs_default", "vs default")]
    if verdicts is not None:
        columns += [Column("change", f"{metric_title(rep.metric)} vs base"), Column("verdict", "verdict", False)]
    rows = []
    for raw in rep.rows:
        record = by_config[raw["config"]]
        cells = [num(raw["rank"], str(raw["rank"]))]
        for p in params:
            value = record.config.get(p)
            cells.append(num(value, str(value)) if _is_number(value) else txt("" if value is None else str(value)))
        if rep.metric != "time":
            cells.append(num(raw.get(rep.metric), format_count(raw.get(rep.metric))))
        cells += [num(raw["median_ns"], format_ns(raw["median_ns"])), num(raw["iqr_ns"], format_ns(raw["iqr_ns"])),
                  num(raw["n"], str(raw["n"]))]
        cells += [num(raw.get(n), format_count(raw.get(n))) for n in counters]
        cells += [ratio(raw["vs_worst"]), ratio(raw["vs_default"])]
        if verdicts is not None:
            verdict = verdicts.get(record.key)
            change = metric_change(verdict, rep.metric)
            pct = change.change_pct if change else None
            cells += [num(pct, format_pct(pct)), verdict_cell(verdict.status if verdict else "")]
        attrs = {"data-config": record.config_id, "title": record.config_id}
        if raw["rank"] == 1:
            attrs["class"] = "winner"
        rows.append(Row(cells, attrs))
    sorted_by = f"counter:{rep.metric}" if rep.metric != "time" else "median"
    return Table(table_id, columns, rows, sorted_by=sorted_by)


def metric_change(verdict: ItemComparison | None, metric: str) -> Change | None:
    """The change of the group's ranking metric in an item's verdict (None when it was not compared)."""
    if verdict is None:
        return None
    return next((c for c in verdict.changes if c.metric == metric), None)


def heatmap_figure(grid: HeatmapGrid, chart_id: str) -> Figure:
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
                      grid.col_param or "", legend, grid.best, f"heatmap of {metric_title(grid.metric)}", chart_id)
    others = (f"; {', '.join(grid.others)} at their best in each cell" if grid.others else "")
    return Figure(Markup(svg), f"{metric_title(grid.metric)} per cell, lower is better{others}; outlined: the "
                               f"winner, {grid.winner.config_id}")


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
    best = ranked(valid, rank_metric(valid))[0]
    points = [Point(r.counters[name], r.median_ns or 0.0,
                    f"{r.config_id}\n{name}: {format_count(r.counters[name])}\nmedian time: {format_ns(r.median_ns)}",
                    highlight=r is best) for r in valid]
    time_title = "median time" + (" (emulated by QEMU)" if emulated else "")
    svg = scatter_svg(points, name, time_title, compact, format_ns, f"{name} against median time",
                      note=f"Spearman {strongest['spearman']:+.2f}, Pearson {strongest['pearson']:+.2f}")
    return Figure(Markup(svg), f"The counter most correlated with time, {name}, one point per valid config; "
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
                 txt(first_line(r.message), tooltip=r.message)], {"data-config": r.config_id}) for r in records]
    return Table(table_id, columns, rows)


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
    default_id: str | None  # the kernel's default config for this target and problem (report.default_configs)
    verdicts: dict[tuple[str, str, str, str], ItemComparison] | None = None
    strong: float = STRONG

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
        return len(self.report.rows)

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
                facts.append(("worst / best", f"{best['vs_worst']:.2f}x over {len(rep.rows)} configs"))
            default_rank = next((r["rank"] for r in rep.rows if r["config"] == self.default_id), None)
            if default_rank and default_rank > 1:
                facts.append(("kernel default", f"#{default_rank}, best is {best['vs_default']:.2f}x faster"))
        if rep.failures:
            facts.append(("without a valid result", str(len(rep.failures))))
        return facts

    @property
    def figures(self) -> list[Figure]:
        figures = []
        grid = heatmap_grid(self.records)
        if grid is not None:
            figures.append(heatmap_figure(grid, f"{self.anchor}-heat"))
        if self.correlations:
            figures.append(scatter_figure(self.records, self.correlations[0], self.report.emulated))
        return figures

    @property
    def param_figures(self) -> list[Figure]:
        return []

    @property
    def ranking(self) -> Table:
        return ranking_table(f"rank-{self.anchor}", self.report, self.records, self.verdicts)

    @property
    def correlation(self) -> Table:
        return correlation_table(f"corr-{self.anchor}", self.correlations)

    @property
    def failures(self) -> Table | None:
        return failure_table(f"fail-{self.anchor}", self.report.failures) if self.report.failures else None


# --- the page ---------------------------------------------------------------------------------------------


def best_table(views: Sequence[GroupView], defaults: dict[tuple[str, str, str], str]) -> Table:
    with_problem = any(v.report.problem for v in views)
    columns = [Column("target", "target", False), Column("kernel", "kernel", False), Column("case", "case", False)]
    if with_problem:
        columns.append(Column("problem", "problem", False))
    columns += [Column("best", "best config", False, "config"), Column("by", "ranked by", False),
                Column("value", "value"), Column("vs_worst", "vs worst"), Column("configs", "valid configs"),
                Column("default", "kernel default", False, "config")]
    rows = []
    for view in views:
        rep = view.report
        best = rep.rows[0] if rep.rows else {}
        value = best.get("median_ns") if rep.metric == "time" else best.get(rep.metric)
        cells = [txt(rep.target), txt(rep.kernel), txt(rep.case)]
        if with_problem:
            cells.append(txt(rep.problem_id))
        cells.append(txt(best.get("config", "(none valid)")))
        cells += [txt(metric_title(rep.metric)), num(value, format_metric(rep.metric, value)),
                  ratio(best.get("vs_worst")), num(len(rep.rows), f"{len(rep.rows)} of {len(view.records)}"),
                  txt(defaults.get((rep.target, rep.kernel, rep.problem_id), ""))]
        rows.append(Row(cells, {"data-group": view.anchor}))
    return Table("best", columns, rows)


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
                now: datetime | None = None) -> str:
    """The whole page of ``run`` (compared with ``base`` when given) as one HTML string."""
    thresholds = thresholds or Thresholds()
    groups = group_by_problem(run.records)
    reports = {(r.target, r.kernel, r.case, r.problem_id): r for r in build_case_reports(run)}
    correlations: dict[GroupKey, list[dict[str, Any]]] = {}
    for row in correlation_rows(run.records):
        key = (row["target"], row["kernel"], row["case"], row.get("problem", ""))
        correlations.setdefault(key, []).append(row)
    defaults = default_configs(run.records)
    verdict_list = compare_runs(base, run, thresholds) if base is not None else None
    verdicts = {v.key: v for v in verdict_list} if verdict_list is not None else None
    views = [GroupView(f"g{i}", key, reports[key], records, correlations.get(key, []),
                       defaults.get((key[0], key[1], key[3])), verdicts)
             for i, (key, records) in enumerate(groups.items(), 1)]
    failures = [r for r in run.records if not r.valid]
    comparison = (comparison_section(base, run, verdict_list, thresholds)
                  if base is not None and verdict_list is not None else None)
    return environment().get_template("page.html.j2").render(
        run_name=run.path.name, run_path=str(run.path),
        stamp=(now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        summary=summary_tiles(run, views), machines=machines_of(run), groups=views,
        overview_note=("Default = the kernel's most common winner across its cases (what rvtune export-best "
                       "ships); vs worst = how much the best gains over the worst valid config."),
        best=best_table(views, defaults), roofline=None, comparison=comparison, strong=STRONG,
        # (one group: its section lists them already)
        failures=failure_table("failures-all", failures) if failures and len(views) > 1 else None)


def write_html(run: Run, path: Path, base: Run | None = None, thresholds: Thresholds | None = None) -> list[Path]:
    """The page at ``path``; returns the files written (the page first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(run, base, thresholds), encoding="utf-8")
    return [path]
