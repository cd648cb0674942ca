"""``rvtune report RUN``: configs ranked per kernel and case, the best config per case, perf_stats.csv, plots.

Everything is per group: target, kernel, case and problem (the values of the kernel's PROBLEM_KEYS, e.g.
IS_CAUSAL; see runs.py). A kernel with problem keys gets one ranking, one winner and one default per problem.

Ranking: by median time on real hardware; under QEMU (timing_source "emulated") by ``x60_cycles``, the X60
model's cycles per launch (x60/model.py: each executed instruction priced by the chip's measured cost), because
emulated wall time is not performance; ``launch_insns`` (guest instructions per launch: grid walk, kernel and the
libc calls it makes, such as memset) stays a column and ranks results recorded before the model, ``kernel_insns``
(inside the kernel symbol only) those recorded before launches were counted. The output says which.

"Default config" (the speed-up column "vs default") is the kernel's untuned config: its module's
``DEFAULT_CONFIG``, else its first config (per problem), as each record of a kernel module names it
(``kernel_default``; runs recorded before have none, and no "vs default"). "vs common winner" compares with the
kernel's most common winner across its cases on that target (per problem), the config ``rvtune export-best`` writes
as its default: what per-case tuning gains over shipping one tuned config.

Normalised metrics, from the module's ``FLOPS(case)`` / ``BYTES(case)`` per launch (records' ``flops`` / ``bytes``),
computed here: FLOP/cycle and bytes/cycle of the X60 model's cycles where ``x60_cycles`` ranks, GFLOP/s and GB/s
of the median time on real hardware (never of emulated time).

perf_stats.csv keeps the seeds' columns so their scripts (analysis_correlation.py, plot_making.py) keep
working: one file per target, kernel and case at ``<out>/<target>/<kernel>/<case>/perf_stats.csv``; a kernel
with problem keys gets one file per problem, ``perf_stats-IS_CAUSAL=True.csv``, so the seeds' correlation
never mixes problems.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_rvtune.results.ranked_at import RECORD_FIELD as RANKED_AT_FIELD
from pytest_rvtune.results.ranked_at import ranked_elsewhere, size_note
from pytest_rvtune.results.records import GroupKey, RunRecord, group_label
from pytest_rvtune.results.runs import (
    EMULATED_RANK_COUNTERS,
    Run,
    group_by_problem,
    has_problems,
    metric_value,
    rank_metric,
    ranked_value,
)

FORMATS = ("table", "csv", "json", "markdown")

# --- presentation helpers shared by every subcommand -------------------------------------------------------


def format_ns(ns: float | None) -> str:
    if ns is None:
        return ""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns"


def format_count(value: float | None) -> str:
    if value is None:
        return ""
    # counts are integers; averaged or scaled counters may not be, but their fraction is noise at >= 1000
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 1000 else f"{value:.4g}"


def format_metric(metric: str, value: float | None) -> str:
    return format_ns(value) if metric == "time" else format_count(value)


def metric_title(metric: str) -> str:
    return "median time" if metric == "time" else metric


def problem_file(stem: str, problem_id: str, ext: str) -> str:
    """``heatmap.png``, or ``heatmap-IS_CAUSAL=True.png`` for one problem of a kernel with problem keys."""
    return f"{stem}-{problem_id}.{ext}" if problem_id else f"{stem}.{ext}"


def render_rows(rows: Sequence[dict[str, Any]], fmt: str, columns: Sequence[str] | None = None) -> str:
    """rows (dicts with the same keys) as a text table, GitHub markdown, CSV or JSON. ``columns`` (CSV only): the
    header, for rows whose keys differ (a row without a column leaves it empty)."""
    if fmt == "json":
        return json.dumps(list(rows), indent=2, default=str)
    if not rows:
        return "(nothing to show)" if fmt in ("table", "markdown") else ""
    headers = list(columns or rows[0])
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=headers, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()
    return tabulate([list(r.values()) for r in rows], headers=headers,
                    tablefmt="github" if fmt == "markdown" else "simple", disable_numparse=True)


# --- ranking ----------------------------------------------------------------------------------------------


def ranked(records: Iterable[RunRecord], metric: str) -> list[RunRecord]:
    """Valid records with the metric, best (smallest) first; config id breaks ties so output is stable."""
    usable = [r for r in records if r.valid and metric_value(r, metric) is not None]
    return sorted(usable, key=lambda r: (ranked_value(r, metric), r.config_id))


def winners(records: Iterable[RunRecord], rank_by: str | None = None) -> dict[GroupKey, RunRecord]:
    """(target, kernel, case, problem id) -> the best record of that group, by the group's rank metric."""
    best: dict[GroupKey, RunRecord] = {}
    for key, group in group_by_problem(records).items():
        order = ranked(group, rank_metric(group, rank_by))
        if order:
            best[key] = order[0]
    return best


def default_configs(records: Sequence[RunRecord], rank_by: str | None = None) -> dict[tuple[str, str, str], str]:
    """(target, kernel, problem id) -> config id of the most common winner across the kernel's cases.

    Per problem: a caller knows whether it wants causal attention, so each problem gets its own default.
    Ties between equally common winners go to the config with the smallest mean slowdown against each case's
    best (over the cases where it ran validly), then to the smaller config id.
    """
    groups = group_by_problem(records)
    wins: dict[tuple[str, str, str], list[str]] = {}
    for (target, kernel, _case, problem), record in winners(records, rank_by).items():
        wins.setdefault((target, kernel, problem), []).append(record.config_id)
    return {key: most_common_winner(ids, [g for (t, k, _c, p), g in groups.items() if (t, k, p) == key], rank_by)
            for key, ids in wins.items()}


def most_common_winner(config_ids: Sequence[str], cases: Sequence[Sequence[RunRecord]],
                       rank_by: str | None = None) -> str:
    """The most frequent of ``config_ids`` (the winners of ``cases``); ties go to the smallest mean slowdown
    over the cases, then to the smaller config id, so the choice is deterministic."""
    counts = Counter(config_ids)
    top = max(counts.values())
    return min((c for c, n in counts.items() if n == top), key=lambda c: (mean_slowdown(c, cases, rank_by), c))


def mean_slowdown(config_id: str, cases: Sequence[Sequence[RunRecord]], rank_by: str | None = None) -> float:
    """Mean of (this config's metric / the case's best) over the cases where the config ran validly."""
    ratios = []
    for group in cases:
        metric = rank_metric(group, rank_by)
        order = ranked(group, metric)
        mine = [r for r in order if r.config_id == config_id]
        if order and mine:
            ratios.append(ranked_value(mine[0], metric) / max(ranked_value(order[0], metric), 1e-300))
    return sum(ratios) / len(ratios) if ratios else float("inf")


#: What each emulated ranking metric counts, for report headings.
EMULATED_METRIC_MEANINGS = {
    "x60_cycles": "modelled SpacemiT X60 cycles per launch: the chip's measured instruction costs at each SEW/LMUL",
    "launch_insns": "guest instructions per launch: grid walk, kernel and the libc calls it makes",
    "kernel_insns": "guest instructions inside the kernel",
    "est_cycles": "estimated cycles per launch: llvm-mca cycles of each executed basic block x its executions",
    "l1d_misses": "modelled K1 L1D misses per launch",
    "l2_misses": "modelled K1 L2 misses per launch",
}


def counter_names(records: Iterable[RunRecord]) -> list[str]:
    """Counters present in any record: QEMU's instruction counts first, then the rest alphabetically."""
    names = {n for r in records for n in r.counters}
    first = [n for n in (*EMULATED_RANK_COUNTERS, "insns", "vector_insns") if n in names]
    return first + sorted(names - set(first))


def untuned_defaults(records: Iterable[RunRecord]) -> dict[tuple[str, str, str], str]:
    """(target, kernel, problem id) -> the config id of the kernel's untuned config, as its records name it
    (``kernel_default``: DEFAULT_CONFIG or the first config); kernels whose records do not say are left out."""
    found: dict[tuple[str, str, str], str] = {}
    for record in records:
        named = record.raw.get("kernel_default") if isinstance(record.raw, dict) else None
        if isinstance(named, str) and named:
            found.setdefault((record.target, record.kernel, record.problem_id), named)
    return found


#: Normalised columns: name -> (numerator field, what the ranking metric must be, scale). "cycles": per X60 model
#: cycle; "time": per second of measured (not emulated) time, in G.
RATE_COLUMNS = {"flop/cycle": ("flops", "x60_cycles"), "bytes/cycle": ("bytes", "x60_cycles"),
                "GFLOP/s": ("flops", "time"), "GB/s": ("bytes", "time")}


def work_of(record: RunRecord, name: str) -> float | None:
    """The record's ``flops`` or ``bytes`` per launch (None when its kernel declares none)."""
    value = record.raw.get(name) if isinstance(record.raw, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def rates(record: RunRecord, metric: str) -> dict[str, float]:
    """FLOP/cycle and bytes/cycle (``metric`` x60_cycles) or GFLOP/s and GB/s (``metric`` time, measured on real
    hardware) of one record, for the work its kernel declares; {} when there is none or no such metric."""
    out: dict[str, float] = {}
    for name, (field_name, per) in RATE_COLUMNS.items():
        work = work_of(record, field_name)
        if work is None or per != metric:
            continue
        if metric == "time":
            ns = record.median_ns
            if ns and not record.emulated:
                out[name] = work / ns  # per ns = G per s
        else:
            cycles = record.counters.get(metric)
            if cycles:
                out[name] = work / cycles
    return out


@dataclass
class CaseReport:
    target: str
    kernel: str
    case: str
    metric: str
    emulated: bool
    rows: list[dict[str, Any]]  # one per valid config, best first; raw numbers (display() formats them)
    failures: list[RunRecord] = field(default_factory=list)
    problem: dict[str, Any] = field(default_factory=dict)  # the group's problem-key values ({}: none)
    problem_id: str = ""
    shortlisted_by: dict[str, Any] | None = None  # a shortlist ranked at another case (ranked_at.py)
    note: str = ""  # says so, naming both sizes
    default_id: str | None = None  # the kernel's untuned config (untuned_defaults), None when not known
    ranked_count: int | None = None  # the valid configs ranked, when ``rows`` keeps only some (shown_rows)

    @property
    def n_ranked(self) -> int:
        """How many valid configs were ranked (``rows`` may keep only the first of them and the default's)."""
        return len(self.rows) if self.ranked_count is None else self.ranked_count

    def shown_rows(self, limit: int) -> CaseReport:
        """This report keeping the first ``limit`` rows and the untuned default's (its rank stays known): what a
        page that shows ``limit`` rows needs, without every row of a group of thousands of configs."""
        if len(self.rows) <= limit:
            return self
        extra = [row for row in self.rows[limit:] if row["config"] == self.default_id]
        return replace(self, rows=self.rows[:limit] + extra, ranked_count=len(self.rows))

    @property
    def default_rank(self) -> int | None:
        """Where the untuned config ranks (None: not known, or it gave no valid result in this run)."""
        return next((row["rank"] for row in self.rows if row["config"] == self.default_id), None)

    @property
    def label(self) -> str:
        return group_label(self.case, self.problem_id)

    @property
    def heading(self) -> str:
        text = f"{self.kernel} / {self.label} on {self.target}: ranked by {metric_title(self.metric)}"
        if self.metric in EMULATED_METRIC_MEANINGS:
            text += (f" ({EMULATED_METRIC_MEANINGS[self.metric]}; timing is emulated by QEMU, not performance, so "
                     f"configs are ranked by {'a model' if self.metric == 'x60_cycles' else 'a count'})")
        elif self.emulated:
            text += " (timing is emulated by QEMU and no instruction counter was recorded: not performance)"
        return text


def case_report(group: Sequence[RunRecord], common_id: str | None, rank_by: str | None = None,
                untuned_id: str | None = None) -> CaseReport:
    """One group's ranking. ``common_id``: the kernel's most common winner (default_configs); ``untuned_id``:
    its untuned config (untuned_defaults). Each row's "vs_common" / "vs_default" is how many times faster the
    row is than that config (None when it is not known or gave no valid result)."""
    metric = rank_metric(group, rank_by)
    order = ranked(group, metric)
    counters = counter_names(order)

    def value_of(config: str | None) -> float | None:
        record = next((r for r in order if r.config_id == config), None)
        return ranked_value(record, metric) if record else None

    common_value, untuned_value = value_of(common_id), value_of(untuned_id)
    rows = []
    for rank, record in enumerate(order, 1):
        value = ranked_value(record, metric)
        row: dict[str, Any] = {"rank": rank, "config": record.config_id, "median_ns": record.median_ns,
                               "iqr_ns": record.iqr_ns, "n": record.n_samples}
        for name in counters:
            row[name] = record.counters.get(name)
        row.update(rates(record, metric))
        row["vs_worst"] = ranked_value(order[-1], metric) / value if value else None
        row["vs_default"] = untuned_value / value if value and untuned_value else None
        row["vs_common"] = common_value / value if value and common_value else None
        rows.append(row)
    first = group[0]
    by = ranked_elsewhere(group)
    return CaseReport(first.target, first.kernel, first.case, metric, any(r.emulated for r in group), rows,
                      [r for r in group if not r.valid], dict(first.problem), first.problem_id, by,
                      size_note(first.kernel, first.group_label, first.case_params, by) if by else "",
                      untuned_id)


def build_case_reports(run: Run, rank_by: str | None = None) -> list[CaseReport]:
    return list(iter_case_reports(run, rank_by))


def iter_case_reports(run: Run, rank_by: str | None = None,
                      defaults: dict[tuple[str, str, str], str] | None = None) -> Iterator[CaseReport]:
    """build_case_reports one at a time, so a caller can reduce each (CaseReport.shown_rows) before the next;
    ``defaults``: the run's default_configs when the caller has them already."""
    return _case_reports(run, default_configs(run.records, rank_by) if defaults is None else defaults, rank_by)


def _case_reports(run: Run, defaults: dict[tuple[str, str, str], str], rank_by: str | None) -> Iterator[CaseReport]:
    """build_case_reports one at a time (``defaults``: default_configs of the run)."""
    untuned = untuned_defaults(run.records)
    for (target, kernel, _case, problem), group in group_by_problem(run.records).items():
        yield case_report(group, defaults.get((target, kernel, problem)), rank_by,
                          untuned.get((target, kernel, problem)))


def size_notes(run: Run) -> list[str]:
    """The notes of the groups ranked among configs shortlisted at another size (CaseReport.note), in order."""
    notes = []
    for group in group_by_problem(run.records).values():
        by = ranked_elsewhere(group)
        if by:
            first = group[0]
            notes.append(size_note(first.kernel, first.group_label, first.case_params, by))
    return notes


_SHOWN = {"median_ns": "median", "iqr_ns": "IQR", "vs_worst": "vs worst", "vs_default": "vs default",
          "vs_common": "vs common winner", "best_config": "best config", "default_config": "default config",
          "common_winner": "most common winner"}


def display(row: dict[str, Any], metric: str = "time", default_id: str | None = None) -> dict[str, Any]:
    """A raw row formatted for people: times with units, counts with separators, ratios as 1.23x; the rank of the
    kernel's untuned config (``default_id``) as ``4 (default)``."""
    shown: dict[str, Any] = {}
    for key, value in row.items():
        if key == "rank" and default_id is not None and row.get("config") == default_id:
            value = f"{value} (default)"
        elif key in ("median_ns", "iqr_ns"):
            value = format_ns(value)
        elif key in ("vs_worst", "vs_default", "vs_common"):
            value = "" if value is None else f"{value:.2f}x"
        elif key in RATE_COLUMNS:
            value = "" if value is None else f"{value:.3g}"
        elif key == "value":
            value = format_metric(metric, value)
        elif isinstance(value, float) or value is None:
            value = format_count(value)
        shown[_SHOWN.get(key, key)] = value
    return shown


def group_columns(rep: CaseReport, with_problem: bool) -> dict[str, Any]:
    """The leading columns naming a report's group; ``problem`` only in runs where some kernel has problem keys
    (every row of a table has the same columns, and runs without problem keys keep their old tables)."""
    columns: dict[str, Any] = {"target": rep.target, "kernel": rep.kernel, "case": rep.case}
    if with_problem:
        columns["problem"] = rep.problem_id
    return columns


def best_rows(reports: Sequence[CaseReport], defaults: dict[tuple[str, str, str], str]) -> list[dict[str, Any]]:
    """One row per group: its best config, how much faster it is than the kernel's untuned default config, and the
    most common winner of its kernel and problem (``defaults``)."""
    with_problem = any(rep.problem for rep in reports)
    rows = []
    for rep in reports:
        best = rep.rows[0] if rep.rows else {}
        value = best.get("median_ns") if rep.metric == "time" else best.get(rep.metric)
        rows.append({**group_columns(rep, with_problem),
                     "best_config": best.get("config", "(none valid)"), "by": metric_title(rep.metric),
                     "value": value, "vs_worst": best.get("vs_worst"),
                     "default_config": rep.default_id or "", "vs_default": best.get("vs_default"),
                     "common_winner": defaults.get((rep.target, rep.kernel, rep.problem_id), "")})
    return rows


def failure_rows(reports: Sequence[CaseReport]) -> list[dict[str, Any]]:
    # the config id names the problem keys' values already (IS_CAUSAL=True is a config key)
    return [{"target": r.target, "kernel": r.kernel, "case": r.case, "config": r.config_id, "outcome": r.outcome,
             "message": r.message[:120]} for rep in reports for r in rep.failures]


# --- perf_stats.csv (the seeds' format) --------------------------------------------------------------------

PERF_STAT_EVENTS = ("u_mode_cycle", "eu_vfpu_full", "vidu_total_cycle", "vector_micro_op", "vector_load_inst",
                    "vector_store_inst", "vector_inst", "l1d_load_miss", "l1d_load_access", "l1d_access",
                    "l1d_miss")
PERF_RECORD_EVENTS = ("l2_access", "l2_miss", "l2_load_access", "l2_store_access")


def _counter(record: RunRecord, event: str) -> float | None:
    # perf prints user-mode events as "name:u"; our perf record parser may keep the seeds' column name.
    for name in (event, f"{event}:u", f"{event}(perf record)"):
        if name in record.counters:
            return record.counters[name]
    return None


def _timestamp(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso


def perf_stats_rows(group: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """The seeds' perf_stats.csv columns; counters we have beyond the seeds' 15 events go in extra columns."""
    params = list(dict.fromkeys(k for r in group for k in r.config if k.startswith("BLOCK_")))
    known = set(PERF_STAT_EVENTS) | set(PERF_RECORD_EVENTS)
    extras = [n for n in counter_names(group) if n.removesuffix(":u").removesuffix("(perf record)") not in known]
    rows = []
    for r in group:
        values = "_".join(str(r.config[p]) for p in params if p in r.config)
        row: dict[str, Any] = {"Timestamp": _timestamp(r.time),
                               "ELF Name": f"{r.kernel}_{values or r.config_id}_{r.elf_sha256[:12]}.elf"}
        row.update({p: r.config.get(p, "") for p in params})
        row["Valid Output"] = "YES" if r.valid else "NO"
        row["Kernel Time (s)"] = f"{r.median_ns / 1e9:.9f}" if r.median_ns is not None else ""
        row["Total Time (s)"] = f"{r.wall_s:.6f}" if r.wall_s is not None else ""
        for event in PERF_STAT_EVENTS:
            row[event] = format_count(_counter(r, event)).replace(",", "")
        for event in PERF_RECORD_EVENTS:
            row[f"{event}(perf record)"] = format_count(_counter(r, event)).replace(",", "")
        for name in extras:
            row[name] = format_count(r.counters.get(name)).replace(",", "")
        rows.append(row)
    return rows


def write_perf_stats(run: Run, out: Path) -> list[Path]:
    written = []
    for (target, kernel, case, problem), group in group_by_problem(run.records).items():
        path = out / target / kernel / case / problem_file("perf_stats", problem, "csv")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_rows(perf_stats_rows(group), "csv"), encoding="utf-8")
        written.append(path)
    return written


# --- the `rvtune report` subcommand ------------------------------------------------------------------------


def render_report(run: Run, reports: Sequence[CaseReport], fmt: str, correlations: list[dict[str, Any]],
                  rank_by: str | None = None) -> str:
    defaults = default_configs(run.records, rank_by)
    best, failures = best_rows(reports, defaults), failure_rows(reports)
    if fmt == "json":
        doc = {"run": str(run.path), "cases": [
            {"target": r.target, "kernel": r.kernel, "case": r.case, "problem": r.problem, "ranked_by": r.metric,
             "emulated": r.emulated, "configs": r.rows,
             **({"shortlisted_by": r.shortlisted_by, "note": r.note} if r.note else {})} for r in reports],
            "best": best, "failures": failures,
            "correlations": correlations}
        return json.dumps(doc, indent=2, default=str)
    with_problem = has_problems(run.records)
    if fmt == "csv":  # one flat table: every ranked config with its case
        flat = [{**group_columns(r, with_problem), "ranked_by": r.metric, **row} for r in reports for row in r.rows]
        return render_rows(flat, "csv", flat_columns(run, with_problem, rank_by))
    h = "## " if fmt == "markdown" else "== "
    parts = [f"{'# ' if fmt == 'markdown' else ''}rvtune report: {run.path} ({len(run.records)} items)"]
    for rep in reports:
        parts += [f"{h}{rep.heading}", render_rows([display(row, default_id=rep.default_id) for row in rep.rows], fmt)]
        if rep.note:
            parts.append(f"note: {rep.note}")
    parts += _closing_parts(reports, defaults, fmt, correlations, with_problem)
    return "\n\n".join(parts) + "\n"


#: The formats report_parts streams; json is one document, built whole by render_report.
STREAMED_FORMATS = ("table", "markdown", "csv")

#: What `rvtune report` keeps of each record's raw object when it summarises it (records.summarise): the fields
#: report.py, html.py and code_files.py read.
REPORT_FIELDS: frozenset[str] = frozenset({RANKED_AT_FIELD, "kernel_default", "flops", "bytes", "code"})


def report_parts(run: Run, fmt: str, correlations: list[dict[str, Any]], rank_by: str | None = None,
                 top: int | None = None) -> Iterator[tuple[str, str]]:
    """render_report's text (``fmt`` one of STREAMED_FORMATS) one group at a time, so a run of 10^5 items never
    holds all its table rows: pairs (part of the whole text, the same part with each ranking cut to its ``top``
    rows). The parts joined by "\n\n" (csv: by nothing) plus a final "\n" (csv: none) are render_report's text
    for the reports build_case_reports makes (and for those cut to ``top`` rows)."""
    defaults = default_configs(run.records, rank_by)
    with_problem = has_problems(run.records)
    kept: list[CaseReport] = []  # each group's report with its best row only: what the tables after it read
    if fmt == "csv":  # one flat table: every ranked config with its case, under one header for all groups
        columns = flat_columns(run, with_problem, rank_by)
        headed: set[bool] = set()
        for rep in _case_reports(run, defaults, rank_by):
            flat = [{**group_columns(rep, with_problem), "ranked_by": rep.metric, **row} for row in rep.rows]
            parts = []
            for cut, rows in ((False, flat), (True, flat if top is None else flat[:top])):
                if rows and cut not in headed:
                    headed.add(cut)
                    parts.append(render_rows(rows, "csv", columns))
                else:
                    parts.append(_csv_rows(rows, columns))
            yield parts[0], parts[1]
        return
    h = "## " if fmt == "markdown" else "== "
    title = f"{'# ' if fmt == 'markdown' else ''}rvtune report: {run.path} ({len(run.records)} items)"
    yield title, title
    for rep in _case_reports(run, defaults, rank_by):
        yield f"{h}{rep.heading}", f"{h}{rep.heading}"
        shown = [display(row, default_id=rep.default_id) for row in rep.rows]
        whole = render_rows(shown, fmt)
        yield whole, whole if top is None else render_rows(shown[:top], fmt)
        if rep.note:
            yield f"note: {rep.note}", f"note: {rep.note}"
        kept.append(replace(rep, rows=rep.rows[:1]))
    for part in _closing_parts(kept, defaults, fmt, correlations, with_problem):
        yield part, part


def flat_columns(run: Run, with_problem: bool, rank_by: str | None = None) -> list[str]:
    """The header of the flat CSV: every column the rows of any group have, in a row's order. Groups differ: a
    host group has no QEMU counters, a kernel without FLOPS has no flop/cycle (the header of the first group
    made a later group's row a ValueError)."""
    rate_names: set[str] = set()
    for group in group_by_problem(run.records).values():
        metric = rank_metric(group, rank_by)
        for record in group:
            if record.valid:
                rate_names |= rates(record, metric).keys()
    where = ["target", "kernel", "case", *(["problem"] if with_problem else [])]
    return [*where, "ranked_by", "rank", "config", "median_ns", "iqr_ns", "n",
            *counter_names(r for r in run.records if r.valid), *(n for n in RATE_COLUMNS if n in rate_names),
            "vs_worst", "vs_default", "vs_common"]


def _csv_rows(rows: Sequence[dict[str, Any]], headers: list[str]) -> str:
    """More rows of a CSV table whose header (``headers``) is written."""
    buffer = io.StringIO()
    csv.DictWriter(buffer, fieldnames=headers, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def _closing_parts(reports: Sequence[CaseReport], defaults: dict[tuple[str, str, str], str], fmt: str,
                   correlations: list[dict[str, Any]], with_problem: bool) -> list[str]:
    """The parts of a table or markdown report after the rankings: best configs, notes, failures, correlations
    (each report needs only its best row)."""
    h = "## " if fmt == "markdown" else "== "
    best = [display(row, rep.metric) for rep, row in zip(reports, best_rows(reports, defaults), strict=True)]
    title = "Best config per case" + (" and problem" if with_problem else "")
    parts = [f"{h}{title} (default = the kernel's untuned config: DEFAULT_CONFIG or its first; most common "
             f"winner = what export-best ships)", render_rows(best, fmt)]
    notes = [rep.note for rep in reports if rep.note]
    if notes:  # again under the winners: these winners were picked among configs ranked at another size
        parts += [f"{h}Ranked at another size", "\n".join(f"note: {n}" for n in notes)]
    failures = failure_rows(reports)
    if failures:
        parts += [f"{h}Items without a valid result (not ranked)", render_rows(failures, fmt)]
    if correlations:
        parts += [f"{h}Counters correlated with kernel time (|r| > 0.7, valid configs)",
                  render_rows(correlations, fmt)]
    return parts


def default_out_dir(run_path: Path) -> Path:
    return run_path.parent / f"{run_path.stem}-report"
