"""``rvtune export-best RUN``: the tuned configs, as JSON (or a C header) per target and kernel.

Per case the winner (smallest median time; smallest x60_cycles under QEMU), its runner-up, and whether the
win is real: a one-sided Mann-Whitney test of winner vs each other config; not significant -> ``"tie": true``
with the configs it ties with (exact counts tie only when equal). A win smaller than ``--min-gain`` (1 %, the
change LNT ignores) is a tie too: with many samples a 0.3 % difference is significant yet says nothing about
the config. Users pinning configs for determinism need to know when the choice is a coin toss (Triton
autotuner issue #9368).

The default config is the most common winner across the kernel's cases. Where a kernel has cases at several
M sizes, the configs are also keyed by aiter's M buckets (small M<32, medium_M32/64/128 for 32<=M<=128 by the
next power of two, large M<=256, xlarge M>256, any = the default), so a caller can pick one by M.
M comes from the record's ``case_params["M"]``, else from the case name (``M64``, ``M=64``, ``m_64``).

A kernel with problem keys (PROBLEM_KEYS, e.g. flash attention's IS_CAUSAL) has one tuning per problem: a caller
knows which problem it solves and must never get a winner taken across problems (a causal config does half the
work). Its document keeps the kernel-level fields and, instead of one ``default``/``cases``/``buckets``, has
``"problems": {"IS_CAUSAL=True": {"problem": {"IS_CAUSAL": true}, "default": ..., "cases": ..., ...}}``: each
entry has exactly the shape of a kernel without problem keys, so a consumer reads ``doc["problems"][id]`` where it
would read ``doc``. ``"problem_keys"`` (``[]`` when none) tells which shape a document has.

A case whose results ran only the configs a shortlist ranked at another case (``--rvtune-shortlist`` of an
emulation-sized run, then the board's bench size) has ``"shortlisted_by"`` (that run, case, sizes, metric) and
``"size_note"`` saying so, naming both sizes; `rvtune export-best` prints the note (ranked_at.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pytest_rvtune.results.compare import DEFAULT_ALPHA, DEFAULT_MIN_SAMPLES, mann_whitney_p
from pytest_rvtune.results.ranked_at import ranked_elsewhere, size_note
from pytest_rvtune.results.records import GroupKey, RunRecord
from pytest_rvtune.results.report import most_common_winner, ranked
from pytest_rvtune.results.runs import group_by_problem, metric_samples, metric_value, rank_metric

#: Wins smaller than this (percent) are ties whatever the p-value.
DEFAULT_MIN_GAIN_PCT = 1.0

_M_IN_NAME = re.compile(r"(?:^|[^A-Za-z])[Mm][=_]?(\d+)(?![0-9])")


def m_bucket(m: int) -> str:
    """aiter's M bucket of a problem size."""
    if m < 32:
        return "small"
    if m <= 128:
        return f"medium_M{1 << (m - 1).bit_length()}"  # next power of two: 32, 64 or 128
    return "large" if m <= 256 else "xlarge"


def case_m(record: RunRecord) -> int | None:
    if "M" in record.case_params:
        return int(record.case_params["M"])
    match = _M_IN_NAME.search(record.case)
    return int(match.group(1)) if match else None


def case_winner(group: Sequence[RunRecord], alpha: float = DEFAULT_ALPHA, min_samples: int = DEFAULT_MIN_SAMPLES,
                min_gain_pct: float = DEFAULT_MIN_GAIN_PCT, rank_by: str | None = None) -> dict[str, Any] | None:
    """The best config of one case and whether it is significantly better than the others."""
    metric = rank_metric(group, rank_by)
    order = ranked(group, metric)
    if not order:
        return None
    best = order[0]
    entry: dict[str, Any] = {"config_id": best.config_id, "config": best.config, "ranked_by": metric,
                             "value": metric_value(best, metric), "runner_up": None, "tie": False, "tie_with": []}
    if len(order) == 1:
        entry["note"] = "only one valid config"
        return entry
    runner = order[1]
    entry["runner_up"] = runner.config_id
    entry["runner_up_value"] = metric_value(runner, metric)
    if metric != "time":  # exact counts: equal is a tie, anything else is a real difference
        entry["tie_with"] = [r.config_id for r in order[1:] if metric_value(r, metric) == entry["value"]]
    elif min(len(best.samples_ns), len(runner.samples_ns)) < min_samples:
        entry["tie"] = None
        entry["note"] = (f"too few samples to test the win (need >= {min_samples}): not known whether "
                         f"{best.config_id} beats {runner.config_id}")
        return entry
    else:
        samples = metric_samples(best, metric)
        p_values = {r.config_id: mann_whitney_p(samples, metric_samples(r, metric), "less") for r in order[1:]}
        entry["p_value"] = p_values[runner.config_id]
        gains = {r.config_id: (metric_value(r, metric) / entry["value"] - 1.0) * 100.0 for r in order[1:]}
        entry["tie_with"] = [cid for cid, p in p_values.items() if p >= alpha or gains[cid] < min_gain_pct]
    entry["tie"] = bool(entry["tie_with"])
    if entry["tie"]:
        entry["note"] = "not significantly better than: " + ", ".join(entry["tie_with"])
    return entry


def export_kernel(records: Sequence[RunRecord], alpha: float = DEFAULT_ALPHA, min_samples: int = DEFAULT_MIN_SAMPLES,
                  source: str = "", min_gain_pct: float = DEFAULT_MIN_GAIN_PCT,
                  rank_by: str | None = None) -> dict[str, Any] | None:
    """The tuned-config document of one kernel on one target (records of that kernel and target only)."""
    by_problem: dict[str, dict[GroupKey, list[RunRecord]]] = {}
    for key, group in group_by_problem(records).items():
        by_problem.setdefault(key[3], {})[key] = group
    tunings: dict[str, dict[str, Any]] = {}
    for problem_id, groups in by_problem.items():
        tuning = _problem_tuning(groups, alpha, min_samples, min_gain_pct, rank_by)
        if tuning:
            tunings[problem_id] = {"problem": next(iter(groups.values()))[0].problem, **tuning}
    if not tunings:
        return None
    first = records[0]
    problem_keys = list(dict.fromkeys(k for r in records for k in r.problem))
    doc: dict[str, Any] = {
        "kernel": first.kernel, "target": first.target, "machine": first.machine, "source": source,
        "ranked_by": sorted({m for t in tunings.values() for m in t["ranked_by"]}), "problem_keys": problem_keys,
    }
    if not problem_keys:  # one problem: the tuning's fields at the top, as ever
        tuning = tunings[""]
        del tuning["problem"]
        return {**doc, **tuning}
    doc["problems"] = tunings
    return doc


def _problem_tuning(groups: dict[GroupKey, list[RunRecord]], alpha: float, min_samples: int,
                    min_gain_pct: float, rank_by: str | None = None) -> dict[str, Any] | None:
    """Winners per case, default and M buckets of one problem of a kernel (its groups: one per case)."""
    cases: dict[str, dict[str, Any]] = {}
    configs: dict[str, dict[str, Any]] = {}
    for (_t, _k, case, _p), group in groups.items():
        entry = case_winner(group, alpha, min_samples, min_gain_pct, rank_by)
        by = ranked_elsewhere(group)
        if entry and by:  # picked among configs a ranking at another size shortlisted: the document says so
            entry["shortlisted_by"] = by
            entry["size_note"] = size_note(group[0].kernel, group[0].group_label, group[0].case_params, by)
        if entry:
            cases[case] = entry
            configs[entry["config_id"]] = entry["config"]
    if not cases:
        return None
    default_id = most_common_winner([e["config_id"] for e in cases.values()], list(groups.values()), rank_by)
    tuning: dict[str, Any] = {
        "ranked_by": sorted({e["ranked_by"] for e in cases.values()}),
        "default": {"config_id": default_id, "config": configs[default_id],
                    "wins": sum(e["config_id"] == default_id for e in cases.values()), "of_cases": len(cases)},
        "cases": cases,
    }
    m_of_case = {g[0].case: case_m(g[0]) for g in groups.values()}
    sizes = {m for case, m in m_of_case.items() if case in cases and m is not None}
    if len(sizes) > 1:
        by_bucket: dict[str, list[str]] = {}
        for case, m in m_of_case.items():
            if case in cases and m is not None:
                by_bucket.setdefault(m_bucket(m), []).append(case)
        buckets: dict[str, Any] = {}
        for bucket, names in by_bucket.items():
            winner = most_common_winner([cases[c]["config_id"] for c in names],
                                        [g for (_t, _k, c, _p), g in groups.items() if c in names], rank_by)
            buckets[bucket] = configs[winner]
        buckets["any"] = configs[default_id]
        tuning["buckets"] = buckets
    return tuning


def tunings(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Problem id -> its tuning (default, cases, buckets); ``{"": doc}`` for a kernel without problem keys."""
    return doc["problems"] if doc.get("problem_keys") else {"": doc}


def _c_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper() or "X"


def problem_c_name(problem: dict[str, Any]) -> str:
    """``IS_CAUSAL_1``: a problem in macro names, values as C sees them (bool -> 0/1), so a caller can paste
    ``RVTUNE_K_IS_CAUSAL_ ## CAUSAL ## _DEFAULT_...`` from its own macro."""
    return _c_name("_".join(f"{k}_{int(v) if isinstance(v, bool | int) else v}" for k, v in problem.items()))


def header_text(doc: dict[str, Any]) -> str:
    """A C header of #defines: RVTUNE_<KERNEL>_<CASE|DEFAULT|BUCKET_x>_<PARAM>; with problem keys
    RVTUNE_<KERNEL>_<PROBLEM>_<CASE|DEFAULT|BUCKET_x>_<PARAM>, PROBLEM e.g. IS_CAUSAL_1."""
    kernel, target = _c_name(doc["kernel"]), _c_name(doc["target"])
    guard = f"RVTUNE_TUNED_{target}_{kernel}_H"
    lines = [f"/* Tuned configs of {doc['kernel']} on {doc['target']} (ranked by {', '.join(doc['ranked_by'])}),",
             f"   written by `rvtune export-best {doc['source']}`. TIE: not significantly better than the",
             "   runner-up. */", f"#ifndef {guard}", f"#define {guard}", ""]

    def block(prefix: str, config: dict[str, Any], comment: str) -> None:
        lines.append(f"/* {comment} */")
        for param, value in config.items():
            if isinstance(value, bool | int):
                lines.append(f"#define RVTUNE_{kernel}_{prefix}_{_c_name(param)} {int(value)}")
        lines.append("")

    for problem_id, tuning in tunings(doc).items():
        pre = f"{problem_c_name(tuning['problem'])}_" if problem_id else ""
        of = f" of {problem_id}" if problem_id else ""
        d = tuning["default"]
        block(f"{pre}DEFAULT", d["config"], f"default{of}: {d['config_id']}, the most common winner ({d['wins']} "
                                            f"of {d['of_cases']} cases)")
        for case, entry in tuning["cases"].items():
            tie = " TIE with " + ", ".join(entry["tie_with"]) if entry["tie"] else ""
            shortlisted = f"; NOTE {entry['size_note']}" if entry.get("size_note") else ""
            block(f"{pre}{_c_name(case)}", entry["config"],
                  f"case {case}{of}: {entry['config_id']}{tie}{shortlisted}")
        for bucket, config in tuning.get("buckets", {}).items():
            block(f"{pre}BUCKET_{_c_name(bucket)}", config, f"M bucket {bucket}{of}")
    lines.append(f"#endif /* {guard} */")
    return "\n".join(lines) + "\n"
