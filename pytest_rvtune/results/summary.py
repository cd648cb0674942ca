"""The few lines a session ends with: per (kernel, case, problem), the best configs by the ranking metric, the
best-to-worst spread and where the default config stands.

Under QEMU configs are ranked by the X60 model's cycles (``x60_cycles``; ``launch_insns`` for runs recorded before
it, runs.py), never by emulated time, which is not performance (a group with no counts is left out); on real
targets by median time. ``rvtune report`` has the full tables. The default is the kernel's untuned config
(DEFAULT_CONFIG or its first config, as its records name it: report.untuned_defaults), so its place says what
tuning gains; for records that do not name it, the most common winner across the session's cases (the config
``rvtune export-best`` writes as the kernel's default, report.default_configs), called so.

Configs whose runs are the same run (the same ELF, data and arguments: a constexpr the kernel ignores builds
identical code, build.py) are one result: listed once, the others as its aliases ``(= CONFIG, ...)``, and the
spread says how many distinct results the configs gave. Nothing here knows pytest.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_rvtune.results.records import RunRecord, group_label, record_from_dict
from pytest_rvtune.results.report import default_configs, format_metric, ranked, untuned_defaults
from pytest_rvtune.results.runs import MetricError, check_rank_by, group_by_problem, rank_metric, ranked_value

#: Distinct results listed per group.
TOP = 3
#: Aliases named after a result (the rest are counted).
ALIASES_SHOWN = 2
#: Columns a summary line may take: a config id of six keys made a 200-column line that wrapped mid-number.
WIDTH = 120


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


def _aliases(result: Sequence[RunRecord], name: Callable[[str], str] = str) -> str:
    if len(result) == 1:
        return ""
    shown = ", ".join(name(r.config_id) for r in result[1:1 + ALIASES_SHOWN])
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
    untuned = untuned_defaults(records)
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
        default, called = untuned.get((target, kernel, problem)), "default"
        if default is None:
            default, called = defaults.get((target, kernel, problem)), "most common winner"
        place = next((i for i, result in enumerate(results, 1) if default in {r.config_id for r in result}), None)
        shown = [r for result in results[:top] for r in result[:1 + ALIASES_SHOWN]]
        if default is not None and place is not None and place > 1:
            shown.append(results[place - 1][0])
        name = ConfigNames([r.config_id for r in group], [r.config_id for r in shown], group[0].problem)
        head = f"  {kernel} / {group_label(case, problem)} on {target}: "
        entries = [f"{i}. {name(result[0].config_id)} {format_metric(metric, ranked_value(result[0], metric))}"
                   f"{_aliases(result, name)}" for i, result in enumerate(results[:top], 1)]
        tail = []
        if len(order) > 1 and best:
            distinct = f", {len(results)} distinct" if len(results) < len(order) else ""
            tail.append(f"worst/best {worst / best:.2f}x over {len(order)} configs{distinct}")
        if default is not None and place is not None and place > 1:
            slower = ranked_value(results[place - 1][0], metric) / best - 1 if best else 0.0
            tail.append(f"{called} {name(default)} #{place} (+{slower * 100:.1f}%)")
        elif place == 1 and (called == "default" or
                             len({r.case for r in records if r.kernel == kernel and r.target == target}) > 1):
            tail.append(f"#1 is the {called}")  # (one case's most common winner is its winner: nothing to say)
        if name.legend:
            tail.append(name.legend)
        lines += fit(head, entries, tail)
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
    return [*wrap(f"{title}:"), *lines, *note]


def wrap(text: str, indent: str = "    ", width: int = WIDTH) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken between words, continuations indented."""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def fit(head: str, entries: Sequence[str], tail: Sequence[str], width: int = WIDTH) -> list[str]:
    """One group's summary: ``head``, the entries (``  `` between them), then ``; `` and each part of the tail, on
    one line when that fits ``width``; else broken before an entry or part, continuation lines indented."""
    pieces = [("  " if i else "", e) for i, e in enumerate(entries)] + [("; ", t) for t in tail]
    lines, current = [], head.rstrip(" ")
    for sep, text in pieces:
        fresh = current == head.rstrip(" ")
        joined = f"{current}{' ' if fresh else sep}{text}"
        if len(joined) <= width or fresh:
            current = joined
        else:
            lines.append(current + sep.rstrip())
            current = f"      {text}"
    return [*lines, current]


class ConfigNames:
    """Config ids short enough for a summary line, by a stable scheme, when the full ids do not fit
    (a six-key Triton_RVV config id is ~80 columns):

    - keys with one value over the whole group (``GROUP_SIZE_M=8``, ``num_threads=1``) are left out of every id
      and named once, in the legend: ``(all: GSM=8, nt=1)``; the problem keys (the group's heading names them)
      are left out;
    - every key is written as the initials of its ``_``-separated parts, case kept: ``BLOCK_SIZE_M`` -> ``BSM``,
      ``num_threads`` -> ``nt``; keys whose initials collide keep their full names.

    Ids that are short already (every shown id at most SHORT_ID columns) stay as they are: ``BLOCK=64``."""

    SHORT_ID = 24

    def __init__(self, ids: Sequence[str], shown: Sequence[str], problem_keys: Iterable[str] = ()) -> None:
        self.short: dict[str, str] = {}
        self.legend = ""
        if all(len(c) <= self.SHORT_ID for c in shown):
            return
        configs = {i: id_pairs(i) for i in ids}
        keys = list(dict.fromkeys(k for pairs in configs.values() for k, _ in pairs))
        abbrev = abbreviations(keys)
        values = {k: {dict(pairs).get(k) for pairs in configs.values()} for k in keys}
        fixed = [k for k in keys if len(values[k]) == 1 and None not in values[k]]
        dropped = set(fixed) | set(problem_keys)
        for full, pairs in configs.items():
            self.short[full] = "-".join(f"{abbrev[k]}={v}" for k, v in pairs if k not in dropped) or full
        named = [f"{abbrev[k]}={next(iter(values[k]))}" for k in fixed if k not in set(problem_keys)]
        self.legend = f"(all: {', '.join(named)})" if named else ""

    def __call__(self, config_id: str) -> str:
        return self.short.get(config_id, config_id)


def abbreviations(keys: Sequence[str]) -> dict[str, str]:
    """Each key as the initials of its ``_``-separated parts, case kept (``BLOCK_SIZE_M`` -> ``BSM``,
    ``num_threads`` -> ``nt``); keys whose initials collide keep their names."""
    initials = {k: "".join(part[:1] for part in k.split("_") if part) or k for k in keys}
    taken = list(initials.values())
    return {k: initials[k] if taken.count(initials[k]) == 1 else k for k in keys}


def short_item_name(name: str) -> str:
    """A pytest item name with its config keys abbreviated (abbreviations):
    ``matmul[small-BLOCK_SIZE_M=16-BLOCK_SIZE_N=32-GROUP_SIZE_M=8]`` -> ``matmul[small-BSM=16-BSN=32-GSM=8]``."""
    keys = [match.group(2) for match in _ITEM_KEY.finditer(name)]
    abbrev = abbreviations(list(dict.fromkeys(keys)))
    return _ITEM_KEY.sub(lambda m: f"{m.group(1)}{abbrev[m.group(2)]}=", name)


_ITEM_KEY = re.compile(r"([\[-])([A-Za-z_]\w*)=")
_PAIR = re.compile(r"([A-Za-z_]\w*)=(.*?)(?=-[A-Za-z_]\w*=|$)")


def id_pairs(config_id: str) -> list[tuple[str, str]]:
    """``BLOCK_SIZE_M=8-K=-1`` -> [("BLOCK_SIZE_M", "8"), ("K", "-1")]: a config id's keys in the kernel's order
    (a results file sorts the config object's keys; the id keeps the order of the kernel's configs)."""
    return _PAIR.findall(config_id)
