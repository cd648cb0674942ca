"""The few lines a session ends with: per (kernel, case, problem), the best configs by the ranking metric, the
best-to-worst spread and where the default config stands.

Under QEMU configs are ranked by the X60 model's cycles (``x60_cycles``; ``launch_insns`` for runs recorded before
it, runs.py), never by emulated time, which is not performance (a group with no counts is left out); on real
targets by median time. ``rvtune report`` has the full tables. The default is the config ``rvtune export-best``
would write as the kernel's default (the most common winner across the session's cases, report.default_configs),
so its place says what tuning per case would gain.

Configs whose runs are the same run (the same ELF, data and arguments: a constexpr the kernel ignores builds
identical code, build.py) are one result: listed once, the others as its aliases ``(= CONFIG, ...)``, and the
spread says how many distinct results the configs gave. Nothing here knows pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_rvtune.results.records import RunRecord, group_label, record_from_dict
from pytest_rvtune.results.report import default_configs, format_metric, ranked
from pytest_rvtune.results.runs import MetricError, check_rank_by, group_by_problem, rank_metric, ranked_value

#: Distinct results listed per group.
TOP = 3
#: Aliases named after a result (the rest are counted).
ALIASES_SHOWN = 2


def run_identity(record: RunRecord) -> tuple[str, ...]:
    """What decides a run's result: the ELF, the golden data and the argv it ran with (data files by content:
    their paths are content-addressed). A record without an ELF hash is only itself."""
    argv = (record.raw.get("rerun") or {}).get("argv") if isinstance(record.raw, Mapping) else None
    if not record.elf_sha256 or argv is None:
        return ("config", record.config_id)
    return (record.elf_sha256, record.golden_sha256, *map(str, argv))


def distinct_results(order: Sequence[RunRecord]) -> list[list[RunRecord]]:
    """``order`` (ranked) folded into results: each a list of the configs that ran the same run, best first."""
    results: dict[tuple[str, ...], list[RunRecord]] = {}
    for record in order:
        results.setdefault(run_identity(record), []).append(record)
    return list(results.values())


def _aliases(result: Sequence[RunRecord]) -> str:
    if len(result) == 1:
        return ""
    shown = ", ".join(r.config_id for r in result[1:1 + ALIASES_SHOWN])
    more = len(result) - 1 - ALIASES_SHOWN
    return f" (= {shown}{f', +{more} more' if more > 0 else ''})"


def ranking_lines(raw_records: Iterable[Mapping[str, Any]], top: int = TOP, rank_by: str | None = None) -> list[str]:
    """Summary lines for the groups among ``raw_records`` (results-file objects); [] when nothing ranks.
    ``rank_by``: the metric to rank by where a group has it (--rvtune-rank-by), else the default."""
    records = [record_from_dict(dict(r)) for r in raw_records]
    unknown_metric = None
    try:
        check_rank_by(records, rank_by, "this session's results")
    except MetricError as exc:  # known only at the session's end (no usage error then): say so, rank by default
        unknown_metric, rank_by = f"  {exc}: ranked by the default", None
    defaults = default_configs(records, rank_by)
    lines: list[str] = []
    metrics: set[str] = set()
    emulated_time = False
    for (target, kernel, case, problem), group in sorted(group_by_problem(records).items()):
        metric = rank_metric(group, rank_by)
        if metric == "time" and all(r.emulated for r in group):
            emulated_time = True
            continue  # no instruction counts recorded: nothing better than emulated time to rank by
        order = ranked(group, metric)
        if not order:
            continue
        metrics.add(metric)
        results = distinct_results(order)
        best, worst = ranked_value(order[0], metric), ranked_value(order[-1], metric)
        listed = "  ".join(f"{i}. {result[0].config_id} {format_metric(metric, ranked_value(result[0], metric))}"
                           f"{_aliases(result)}" for i, result in enumerate(results[:top], 1))
        text = f"  {kernel} / {group_label(case, problem)} on {target}: {listed}"
        if len(order) > 1 and best:
            distinct = f", {len(results)} distinct" if len(results) < len(order) else ""
            text += f"; worst/best {worst / best:.2f}x over {len(order)} configs{distinct}"
        default = defaults.get((target, kernel, problem))
        place = next((i for i, result in enumerate(results, 1) if default in {r.config_id for r in result}), None)
        if default is not None and place is not None and place > 1:
            slower = ranked_value(results[place - 1][0], metric) / best - 1 if best else 0.0
            text += f"; default {default} #{place} (+{slower * 100:.1f}%)"
        elif place == 1 and len({r.case for r in records if r.kernel == kernel and r.target == target}) > 1:
            text += "; #1 is the default"  # (with one case the default is its winner: nothing to say)
        lines.append(text)
    if not lines:
        return []
    what = " / ".join(sorted(metrics))
    title = f"rvtune ranking, by {what}"
    counted = metrics - {"time"}
    if counted:
        if counted <= {"launch_insns", "kernel_insns"}:
            title += " (instructions per launch, counted under emulation; QEMU time is not performance)"
        elif counted == {"x60_cycles"}:
            title += (" (modelled SpacemiT X60 cycles per launch, from the instructions QEMU executed and the chip's "
                      "measured costs; QEMU time is not performance)")
        else:
            title += " (per launch, counted under emulation; QEMU time is not performance)"
    if "time" in metrics:
        title += " (median time on the target)"
    note = ["  (emulated groups without instruction counts are not ranked)"] if emulated_time else []
    if unknown_metric:
        note.append(unknown_metric)
    return [f"{title}:", *lines, *note]
