"""``rvtune report RUN --html FILE``: one self-contained HTML page of a run, readable offline.

Per group (target, kernel, case, problem; runs.py): the configs ranked by the group's metric in a table sorted by
clicking a header, a heatmap of the two block parameters that vary (svg.py), the counters' correlation with
time (correlation.py) and a scatter of the strongest counter against time; the best config per group; the items
without a valid result; with a base run, every item's change and verdict as ``rvtune compare`` computes them.

The file carries everything inline (CSS, a small script for sorting, SVG charts): no network, no CDN, so it
opens from a mail attachment or a CI artifact as it is. Every string from a run (kernel names, config values,
messages, counter names) is escaped with :func:`html.escape`. ``#sort=TABLE:COLUMN[:asc|desc]`` in the URL sorts
a table on load (the table ids and column keys are the ``id`` and ``data-key`` attributes), so a sorted view
can be linked. Nothing here knows pytest or argparse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

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


def class_attr(css: str) -> str:
    return f' class="{escape(css)}"' if css else ""


#: Rows one table shows at most: a results file of 10^5 items made a 130 MB page no browser opens; the report's
#: text, CSV and JSON outputs hold every row.
MAX_TABLE_ROWS = 500


def table_html(table_id: str, columns: Sequence[Column], rows: Sequence[Row], sorted_by: str | None = None,
               empty: str = "nothing to show") -> str:
    """A sortable table: clicking a header sorts by it (numbers as numbers); ``sorted_by`` marks the column the
    rows are already in ascending order of. At most MAX_TABLE_ROWS rows, in their order; a note says how many
    more there are."""
    if not rows:
        return f'<p class="empty">{escape(empty)}</p>'
    more = len(rows) - MAX_TABLE_ROWS
    rows = rows[:MAX_TABLE_ROWS]
    head = []
    for column in columns:
        attrs = f' data-key="{escape(column.key)}" data-type="{"num" if column.numeric else "text"}"'
        if column.key == sorted_by:
            attrs += ' aria-sort="ascending"'
        css = " ".join(c for c in ("num" if column.numeric else "", column.css) if c)
        head.append(f'<th{attrs}{class_attr(css)} scope="col" tabindex="0">'
                    f"{escape(column.title)}</th>")
    body = []
    for row in rows:
        attrs = "".join(f' {escape(name)}="{escape(value)}"' for name, value in row.attrs.items())
        cells = []
        for column, cell in zip(columns, row.cells, strict=True):
            css = " ".join(c for c in ("num" if column.numeric else "", column.css, cell.css) if c)
            sort = "" if cell.sort is None else (repr(cell.sort) if isinstance(cell.sort, float) else cell.sort)
            title = f' title="{escape(cell.tooltip)}"' if cell.tooltip else ""
            cells.append(f'<td data-v="{escape(sort)}"{class_attr(css)}{title}>'
                         f"{escape(cell.text)}</td>")
        body.append(f"<tr{attrs}>{''.join(cells)}</tr>")
    capped = (f'<p class="note">The first {MAX_TABLE_ROWS} rows of {MAX_TABLE_ROWS + more} (sorting sorts these); '
              "<code>rvtune report --format csv</code> lists every row.</p>") if more > 0 else ""
    return (f'<div class="table-wrap"><table id="{escape(table_id)}" class="sortable">'
            f"<thead><tr>{''.join(head)}</tr></thead><tbody>\n" + "\n".join(body) + "\n</tbody></table></div>"
            + capped)


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
                  verdicts: dict[tuple[str, str, str, str], ItemComparison] | None) -> str:
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
    return table_html(table_id, columns, rows, sorted_by=sorted_by)


def metric_change(verdict: ItemComparison | None, metric: str) -> Change | None:
    """The change of the group's ranking metric in an item's verdict (None when it was not compared)."""
    if verdict is None:
        return None
    return next((c for c in verdict.changes if c.metric == metric), None)


def heatmap_figure(grid: HeatmapGrid, chart_id: str) -> str:
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
    return (f'<figure class="plot">{svg}<figcaption>{escape(metric_title(grid.metric))} per cell, lower is better'
            f"{escape(others)}; outlined: the winner, {escape(grid.winner.config_id)}</figcaption></figure>")


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


def scatter_figure(group: Sequence[RunRecord], strongest: dict[str, Any], emulated: bool) -> str:
    name = strongest["counter"]
    valid = [r for r in group if r.valid and r.median_ns is not None and name in r.counters]
    best = ranked(valid, rank_metric(valid))[0]
    points = [Point(r.counters[name], r.median_ns or 0.0,
                    f"{r.config_id}\n{name}: {format_count(r.counters[name])}\nmedian time: {format_ns(r.median_ns)}",
                    highlight=r is best) for r in valid]
    time_title = "median time" + (" (emulated by QEMU)" if emulated else "")
    svg = scatter_svg(points, name, time_title, compact, format_ns, f"{name} against median time",
                      note=f"Spearman {strongest['spearman']:+.2f}, Pearson {strongest['pearson']:+.2f}")
    return (f'<figure class="plot">{svg}<figcaption>The counter most correlated with time, {escape(name)}, '
            f"one point per valid config; diamond: the winner, {escape(best.config_id)}</figcaption></figure>")


def correlation_table(table_id: str, rows: Sequence[dict[str, Any]]) -> str:
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
    return table_html(table_id, columns, shown, empty="no counter varies over three or more valid configs")


def failure_table(table_id: str, records: Sequence[RunRecord]) -> str:
    columns = [Column("target", "target", False), Column("kernel", "kernel", False), Column("case", "case", False),
               Column("config", "config", False, "config"), Column("outcome", "outcome", False),
               Column("message", "message", False)]
    rows = [Row([txt(r.target), txt(r.kernel), txt(r.case), txt(r.config_id),
                 txt(r.outcome, "verdict tone-bad"),
                 txt(first_line(r.message), tooltip=r.message)], {"data-config": r.config_id}) for r in records]
    return table_html(table_id, columns, rows)


def first_line(message: str, width: int = 160) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


@dataclass
class GroupView:
    """What the page shows of one group, and the anchor it is reached by."""

    anchor: str
    key: GroupKey
    report: CaseReport
    records: list[RunRecord]
    correlations: list[dict[str, Any]]
    default_id: str | None  # the kernel's default config for this target and problem (report.default_configs)

    @property
    def title(self) -> str:
        return f"{self.report.kernel} / {self.report.label}"


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


def group_section(view: GroupView, verdicts: dict[tuple[str, str, str, str], ItemComparison] | None) -> str:
    rep, n = view.report, view.anchor
    facts = []
    if rep.rows:
        best = rep.rows[0]
        value = best["median_ns"] if rep.metric == "time" else best.get(rep.metric)
        facts.append(("best", best["config"]))
        facts.append((metric_title(rep.metric), format_metric(rep.metric, value)))
        if best["vs_worst"]:
            facts.append(("worst / best", f"{best['vs_worst']:.2f}x over {len(rep.rows)} configs"))
        default_rank = next((r["rank"] for r in rep.rows if r["config"] == view.default_id), None)
        if default_rank and default_rank > 1:
            facts.append(("kernel default", f"#{default_rank}, best is {best['vs_default']:.2f}x faster"))
    if rep.failures:
        facts.append(("without a valid result", str(len(rep.failures))))
    badges = [f'<span class="badge target">{escape(rep.target)}</span>']
    if rep.emulated:
        badges.append('<span class="badge emulated" title="QEMU: instruction counts are exact, times are not '
                      'performance">emulated</span>')
    parts = [f'<section class="group" id="{n}">',
             f"<h2>{escape(view.title)} {''.join(badges)}</h2>",
             f'<p class="note">{escape(ranking_note(rep))}</p>']
    if facts:
        parts.append('<dl class="facts">' + "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>"
                                                     for k, v in facts) + "</dl>")
    figures = []
    grid = heatmap_grid(view.records)
    if grid is not None:
        figures.append(heatmap_figure(grid, f"{n}-heat"))
    if view.correlations:
        figures.append(scatter_figure(view.records, view.correlations[0], rep.emulated))
    if figures:
        parts.append(f'<div class="plots">{"".join(figures)}</div>')
    parts += [f"<h3>Configs, best first <small>({len(rep.rows)} valid; click a header to sort)</small></h3>",
              ranking_table(f"rank-{n}", rep, view.records, verdicts)]
    parts += [f"<h3>Counters against time <small>(valid configs; |r| &gt; {STRONG} highlighted"
              f"{'; times emulated' if rep.emulated else ''})</small></h3>",
              correlation_table(f"corr-{n}", view.correlations)]
    if rep.failures:
        parts += [f"<h3>Without a valid result <small>({len(rep.failures)}, not ranked)</small></h3>",
                  failure_table(f"fail-{n}", rep.failures)]
    parts.append("</section>")
    return "\n".join(parts)


# --- the page ---------------------------------------------------------------------------------------------


def best_table(views: Sequence[GroupView], defaults: dict[tuple[str, str, str], str]) -> str:
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
    return table_html("best", columns, rows)


def comparison_section(base: Run, run: Run, verdicts: Sequence[ItemComparison], thresholds: Thresholds) -> str:
    """Every item's verdict against the base run, worst first: the change of its group's ranking metric, and the
    other metrics that moved."""
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
    chips = "".join(f'<span class="chip tone-{tone(status)}">{n} {escape(status)}</span>'
                    for status, n in sorted(counts.items(), key=lambda kv: (severity(kv[0]), kv[0])))
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
    return (f'<section id="comparison"><h2>Against the base run <small>{escape(str(base.path))}</small></h2>'
            f'<p class="chips">{chips}</p><p class="note">Per item, as <code>rvtune compare</code> judges it: '
            f"{escape(gate)}. Hover a row's last cell for the full verdict.</p>"
            + table_html("compare", columns, rows, empty="no item in either run") + "</section>")


def record_key(verdict: ItemComparison) -> dict[str, str]:
    target, kernel, case, config = verdict.key
    return {"target": target, "kernel": kernel, "case": case, "config_id": config}


def tone(status: str) -> str:
    return VERDICT_TONE.get(status, "plain")


def severity(status: str) -> int:
    return TONE_ORDER.index(tone(status))


def _nav(views: Sequence[GroupView]) -> str:
    items = []
    for view in views:
        rep = view.report
        spread = f"{rep.rows[0]['vs_worst']:.2f}x" if rep.rows and rep.rows[0]["vs_worst"] else ""
        items.append(f'<li><a href="#{view.anchor}"><span>{escape(view.title)}</span>'
                     f'<span class="muted">{escape(rep.target)} {escape(spread)}</span></a></li>')
    return '<nav><h2>Groups</h2><ul>' + "".join(items) + "</ul></nav>"


def _summary(run: Run, views: Sequence[GroupView]) -> str:
    valid = sum(r.valid for r in run.records)
    failed = len(run.records) - valid
    targets = sorted({r.target for r in run.records})
    stats = [("items", str(len(run.records))), ("valid", str(valid)), ("without a valid result", str(failed)),
             ("groups", str(len(views))), ("targets", ", ".join(targets))]
    machines = {}
    for record in run.records:
        machine = record.machine
        described = ", ".join(str(machine[k]) for k in ("isa", "board", "cpu") if machine.get(k))
        if described:
            machines[record.target] = described
    tiles = [f'<div{class_attr("bad" if k.startswith("without") and v != "0" else "")}><dt>{escape(k)}</dt>'
             f"<dd>{escape(v)}</dd></div>" for k, v in stats]
    return ('<dl class="summary">' + "".join(tiles) + "</dl>"
            + "".join(f'<p class="machine"><b>{escape(t)}</b>: {escape(m)}</p>' for t, m in sorted(machines.items())))


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
    views = [GroupView(f"g{i}", key, reports[key], records, correlations.get(key, []),
                       defaults.get((key[0], key[1], key[3])))
             for i, (key, records) in enumerate(groups.items(), 1)]
    verdict_list = compare_runs(base, run, thresholds) if base is not None else None
    verdicts = {v.key: v for v in verdict_list} if verdict_list is not None else None
    failures = [r for r in run.records if not r.valid]
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    body = [f"<header><h1>rvtune report <span>{escape(run.path.name)}</span></h1>"
            f'<p class="muted">{escape(str(run.path))} &middot; generated {escape(stamp)}</p>'
            f"{_summary(run, views)}</header>",
            '<div class="layout">', _nav(views), "<main>",
            '<section id="overview"><h2>Best config per group</h2>'
            '<p class="note">Default = the kernel\'s most common winner across its cases (what '
            "<code>rvtune export-best</code> ships); vs worst = how much the best gains over the worst valid "
            "config.</p>" + best_table(views, defaults) + "</section>"]
    if base is not None and verdict_list is not None:
        body.append(comparison_section(base, run, verdict_list, thresholds))
    body += [group_section(view, verdicts) for view in views]
    if failures and len(views) > 1:  # (one group: its section lists them already)
        body.append(f'<section id="failures"><h2>Items without a valid result ({len(failures)})</h2>'
                    + failure_table("failures-all", failures) + "</section>")
    body += ["</main>", "</div>"]
    title = f"rvtune report: {run.path.name}"
    return PAGE.format(title=escape(title), style=STYLE, body="\n".join(body), script=SCRIPT)


def write_html(run: Run, path: Path, base: Run | None = None, thresholds: Thresholds | None = None) -> list[Path]:
    """The page at ``path``; returns the files written (the page first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(run, base, thresholds), encoding="utf-8")
    return [path]


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="pytest-rvtune">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
{body}
<script>{script}</script>
</body>
</html>
"""

STYLE = """
:root { --ink:#111827; --muted:#6b7280; --line:#e5e7eb; --bg:#f6f7f9; --card:#fff; --accent:#1d4ed8;
  --bad:#b91c1c; --bad-bg:#fee2e2; --good:#15803d; --good-bg:#dcfce7; --warn:#92400e; --warn-bg:#fef3c7; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--ink);
  background:var(--bg); }
header { background:#0f172a; color:#e5e7eb; padding:18px 28px 14px; }
header h1 { margin:0 0 2px; font-size:20px; font-weight:650; }
header h1 span { color:#93c5fd; font-weight:500; margin-left:6px; }
header .muted { color:#94a3b8; margin:0 0 10px; }
dl.summary { display:flex; flex-wrap:wrap; gap:10px; margin:0 0 6px; }
dl.summary div { background:#1e293b; border-radius:8px; padding:6px 12px; min-width:92px; }
dl.summary div.bad dd { color:#fca5a5; }
dl.summary dt { font-size:11px; text-transform:uppercase; letter-spacing:.04em; color:#94a3b8; }
dl.summary dd { margin:0; font-size:17px; font-weight:600; }
p.machine { margin:2px 0; color:#cbd5e1; font-size:12px; }
.layout { display:flex; align-items:flex-start; gap:20px; padding:20px 28px; }
nav { position:sticky; top:12px; flex:0 0 200px; background:var(--card); border-radius:10px; padding:12px;
  box-shadow:0 1px 2px rgba(0,0,0,.06); max-height:calc(100vh - 24px); overflow:auto; }
nav h2 { font-size:12px; text-transform:uppercase; letter-spacing:.05em; color:var(--muted); margin:0 0 8px; }
nav ul { list-style:none; margin:0; padding:0; }
nav a { display:block; padding:5px 8px; border-radius:6px; color:var(--ink); text-decoration:none;
  font-size:13px; }
nav a span { display:block; }
nav a span.muted { font-size:11.5px; }
nav a:hover { background:#eef2ff; }
main { flex:1; min-width:0; }
section { background:var(--card); border-radius:10px; padding:16px 20px 18px; margin-bottom:20px;
  box-shadow:0 1px 2px rgba(0,0,0,.06); }
h2 { font-size:17px; margin:0 0 6px; }
h2 small, h3 small { font-weight:400; color:var(--muted); font-size:12px; }
h3 { font-size:14px; margin:18px 0 6px; }
.note { color:#374151; margin:4px 0 10px; max-width:900px; }
.muted { color:var(--muted); }
code { background:#f1f5f9; padding:1px 4px; border-radius:4px; font-size:12px; }
.badge { display:inline-block; font-size:11px; font-weight:600; padding:2px 8px; border-radius:999px;
  vertical-align:middle; margin-left:6px; background:#e0e7ff; color:#3730a3; }
.badge.emulated { background:var(--warn-bg); color:var(--warn); }
dl.facts { display:flex; flex-wrap:wrap; gap:8px 22px; margin:6px 0 4px; }
dl.facts dt { font-size:11px; color:var(--muted); text-transform:uppercase; letter-spacing:.04em; }
dl.facts dd { margin:0; font-weight:600; word-break:break-all; }
.plots { display:flex; flex-wrap:wrap; align-items:flex-start; gap:18px; margin:12px 0 4px; }
figure.plot { margin:0; padding:10px; border:1px solid var(--line); border-radius:8px; background:#fff;
  max-width:100%; overflow-x:auto; }
figcaption { font-size:12px; color:var(--muted); max-width:460px; margin-top:4px; }
svg.chart .cell:hover rect, svg.chart .point:hover * { stroke:#111827; stroke-width:2; }
.table-wrap { display:inline-block; max-width:100%; overflow:auto; max-height:560px;
  border:1px solid var(--line); border-radius:8px; }
table { border-collapse:collapse; font-size:12.5px; }
th, td { padding:5px 9px; border-bottom:1px solid var(--line); text-align:left; white-space:nowrap; }
th { position:sticky; top:0; background:#f8fafc; font-weight:600; cursor:pointer; user-select:none; z-index:1; }
th:hover { background:#eef2ff; }
th::after { content:"\\2195"; color:#cbd5e1; margin-left:4px; font-size:11px; }
th[aria-sort=ascending]::after { content:"\\25B2"; color:var(--accent); }
th[aria-sort=descending]::after { content:"\\25BC"; color:var(--accent); }
.num { text-align:right; font-variant-numeric:tabular-nums; }
td.metric { font-weight:650; background:#f8fafc; }
td.config { white-space:normal; width:24em; min-width:24em; overflow-wrap:anywhere; }
tbody tr:nth-child(even) { background:#fcfcfd; }
tbody tr:hover { background:#eef2ff; }
tr.winner td { background:#ecfdf5; }
tr.winner td:first-child { box-shadow:inset 3px 0 0 var(--good); }
tr.strong td { background:#fffbeb; }
.verdict, .chip { font-weight:600; }
.tone-bad { color:var(--bad); } .tone-good { color:var(--good); } .tone-warn { color:var(--warn); }
.tone-plain { color:var(--muted); }
.chip { display:inline-block; padding:3px 10px; border-radius:999px; margin:0 6px 4px 0; font-size:12px;
  background:#f1f5f9; }
.chip.tone-bad { background:var(--bad-bg); } .chip.tone-good { background:var(--good-bg); }
.chip.tone-warn { background:var(--warn-bg); }
p.empty { color:var(--muted); font-style:italic; }
@media (max-width: 900px) { .layout { display:block; } nav { position:static; margin-bottom:16px; } }
@media print { nav { display:none; } .table-wrap { max-height:none; } }
"""

SCRIPT = r"""
(function () {
  "use strict";
  function sortTable(table, key, dir) {
    var heads = table.tHead.rows[0].cells, index = -1;
    for (var i = 0; i < heads.length; i++) {
      if (heads[i].getAttribute("data-key") === key) index = i;
    }
    if (index < 0) return false;
    var numeric = heads[index].getAttribute("data-type") === "num";
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].getAttribute("data-v"), y = b.cells[index].getAttribute("data-v");
      if (x === "" || y === "") return x === y ? 0 : (x === "" ? 1 : -1);  // blanks last either way
      var c = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y, undefined, {numeric: true});
      return dir === "desc" ? -c : c;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    for (var j = 0; j < heads.length; j++) heads[j].removeAttribute("aria-sort");
    heads[index].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
    table.setAttribute("data-sorted-by", key + ":" + dir);
    return true;
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      function toggle() {
        sortTable(table, th.getAttribute("data-key"),
                  th.getAttribute("aria-sort") === "ascending" ? "desc" : "asc");
      }
      th.addEventListener("click", toggle);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(); }
      });
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll("tr[data-group]"), function (row) {
    row.addEventListener("click", function () { location.hash = row.getAttribute("data-group"); });
  });
  // #sort=TABLE:COLUMN[:asc|desc] sorts one table on load: a link to a sorted view (and the page test's hook)
  var match = /^#sort=([^:]+):(.+?)(?::(asc|desc))?$/.exec(decodeURIComponent(location.hash));
  if (match) {
    var table = document.getElementById(match[1]);
    if (table) sortTable(table, match[2], match[3] || "asc");
  }
  document.body.setAttribute("data-ready", "1");
})();
"""
