"""The few lines a session under emulation ends with: per (kernel, case, problem), the best configs by the
ranking metric, the best-to-worst spread and where the default config stands.

Under QEMU the pytest-benchmark table shows emulated times, which are not performance; these lines show what
the configs are ranked by (``launch_insns``, runs.py). ``rvtune report`` has the full tables. The default is
the config ``rvtune export-best`` would write as the kernel's default (the most common winner across the
session's cases, report.default_configs), so its place says what tuning per case would gain.
Nothing here knows pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_rvtune.results.records import group_label, record_from_dict
from pytest_rvtune.results.report import default_configs, format_count, ranked
from pytest_rvtune.results.runs import MetricError, check_rank_by, group_by_problem, metric_value, rank_metric

#: Configs listed per group.
TOP = 3


def ranking_lines(raw_records: Iterable[Mapping[str, Any]], top: int = TOP, rank_by: str | None = None) -> list[str]:
    """Summary lines for the emulated groups among ``raw_records`` (results-file objects); [] when none.
    ``rank_by``: the metric to rank by where a group has it (--rvtune-rank-by), else the default."""
    records = [record_from_dict(dict(r)) for r in raw_records]
    emulated = [r for r in records if r.emulated]
    note = None
    try:
        check_rank_by(emulated, rank_by, "this session's emulated results")
    except MetricError as exc:  # known only at the session's end (no usage error then): say so, rank by default
        note, rank_by = f"  {exc}: ranked by the default", None
    defaults = default_configs(emulated, rank_by)
    lines: list[str] = []
    metrics: set[str] = set()
    for (target, kernel, case, problem), group in sorted(group_by_problem(emulated).items()):
        metric = rank_metric(group, rank_by)
        if metric == "time":
            continue  # no instruction counts recorded: nothing better than emulated time to rank by
        order = ranked(group, metric)
        if not order:
            continue
        metrics.add(metric)
        best, worst = metric_value(order[0], metric), metric_value(order[-1], metric)
        listed = "  ".join(f"{i}. {r.config_id} {format_count(metric_value(r, metric))}"
                           for i, r in enumerate(order[:top], 1))
        text = f"  {kernel} / {group_label(case, problem)} on {target}: {listed}"
        if len(order) > 1 and best:
            text += f"; worst/best {worst / best:.2f}x over {len(order)} configs"
        default = defaults.get((target, kernel, problem))
        place = next((i for i, r in enumerate(order, 1) if r.config_id == default), None)
        if default is not None and place is not None and place > 1:
            text += f"; default {default} #{place} (+{(metric_value(order[place - 1], metric) / best - 1) * 100:.1f}%)"
        elif place == 1 and len({r.case for r in emulated if r.kernel == kernel}) > 1:
            text += "; #1 is the default"  # (with one case the default is its winner: nothing to say)
        lines.append(text)
    if not lines:
        return []
    if note:
        lines.append(note)
    what = " / ".join(sorted(metrics))
    return [f"rvtune ranking under emulation, by {what} (per launch; QEMU time is not performance):", *lines]
