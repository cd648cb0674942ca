"""What a search found, per case: its best config, how many configs it evaluated, and how far its best is from the
best known (an earlier run given as reference: the exhaustive best when that run holds every config). The summary
is printed and written beside the results file (``<results>.search.json``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvtune.results.records import RunRecord, record_from_dict
from pytest_rvtune.results.report import format_metric
from pytest_rvtune.results.runs import Run, metric_value, rank_metric
from pytest_rvtune.results.summary import wrap
from pytest_rvtune.search.engine import SearchOutcome


@dataclass(frozen=True)
class Reference:
    """The best of an earlier run on one case: its value, config, how many of the space's configs it holds."""

    value: float
    config_id: str
    configs: int
    exhaustive: bool
    source: str


def references(records: Iterable[RunRecord], *, kernel: str, target: str, problem_id: str, ids: Sequence[str],
               cases: Sequence[str], rank_by: str | None, source: str) -> dict[str, Reference]:
    """Per case, the best valid record of ``kernel`` on ``target`` in an earlier run (by the metric its group
    ranks by), counting the configs of this space it holds."""
    space_ids = set(ids)
    found: dict[str, Reference] = {}
    mine = [r for r in records if r.kernel == kernel and r.target == target and r.problem_id == problem_id
            and r.valid]
    for case in cases:
        group = [r for r in mine if r.case == case and r.config_id in space_ids]
        metric = rank_metric(group, rank_by)
        scored = [(v, r.config_id) for r in group if (v := metric_value(r, metric)) is not None]
        if not scored:
            continue
        value, config_id = min(scored)
        held = len({r.config_id for r in group})
        found[case] = Reference(value, config_id, held, held == len(space_ids), source)
    return found


def record_value(record: Mapping[str, Any], rank_by: str | None) -> float | None:
    """What ranks an item's record (its group's metric: x60_cycles under QEMU), None unless it passed."""
    parsed = record_from_dict(dict(record))
    return metric_value(parsed, rank_metric([parsed], rank_by)) if parsed.valid else None


def search_summary(outcome: SearchOutcome, records: Iterable[Mapping[str, Any]], *, kernel: str, target: str,
                   problem_id: str, rank_by: str | None, reference: Run | None) -> dict[str, Any]:
    """The summary of one search (``summary``) from the records of the items it evaluated, with the gap to
    ``reference``'s best when an earlier run is given: what `rvtune tune` and the plugin's search both end with."""
    metric = rank_metric([record_from_dict(dict(r)) for r in records], rank_by)
    known = {} if reference is None else references(
        reference.records, kernel=kernel, target=target, problem_id=problem_id, ids=outcome.space.ids,
        cases=outcome.space.cases, rank_by=rank_by, source=str(reference.path))
    return summary(outcome, kernel=kernel, target=target, problem_id=problem_id, metric=metric, known=known)


def summary(outcome: SearchOutcome, *, kernel: str, target: str, problem_id: str, metric: str,
            known: Mapping[str, Reference]) -> dict[str, Any]:
    """The search's result as one JSON object: per case its best, the configs evaluated and the gap to the best
    known (the reference's best or the search's own, whichever is better)."""
    space = outcome.space
    cases = []
    for case in space.cases:
        best = outcome.best(case)
        reference = known.get(case)
        entry: dict[str, Any] = {
            "case": case, "evaluated": len(outcome.of_case(case)), "configs": len(space),
            "best": None if best is None else {"config_id": space.ids[best.trial.config], "value": best.value,
                                               "step": best.step},
            "reference": None if reference is None else vars(reference),
            "gap": None,
        }
        if best is not None and best.value is not None and reference is not None:
            known_best = min(reference.value, best.value)
            entry["gap"] = best.value / known_best - 1 if known_best > 0 else 0.0
        cases.append(entry)
    return {"kernel": kernel, "target": target, "problem": problem_id, "strategy": outcome.strategy,
            "budget": outcome.budget, "seed": outcome.seed, "metric": metric,
            "evaluated": len(outcome.evaluations), "trials": space.trials, "cases": cases}


def summary_lines(found: Mapping[str, Any]) -> list[str]:
    """The lines a search ends with (the session's or `rvtune tune`'s), wrapped as the ranking's are."""
    metric = found["metric"]
    problem = f" {found['problem']}" if found["problem"] else ""
    share = found["evaluated"] / found["trials"] if found["trials"] else 0.0
    lines = [f"rvtune search ({found['strategy']}, seed {found['seed']}, budget {found['budget']}): "
             f"{found['kernel']}{problem} on {found['target']}, {found['evaluated']:,} of {found['trials']:,} "
             f"(config, case) trials evaluated ({share:.1%}), ranked by {metric}"]
    for case in found["cases"]:
        head = f"  {case['case']}: {case['evaluated']:,} of {case['configs']:,} configs evaluated"
        best = case["best"]
        if best is None:
            lines.append(f"{head}; none passed")
            continue
        head += f"; best {best['config_id']} {format_metric(metric, best['value'])}"
        reference = case["reference"]
        if reference is None:
            lines.append(f"{head}; no reference run to measure it against")
            continue
        what = ("exhaustive best" if reference["exhaustive"]
                else f"best of {reference['configs']:,} configs")
        lines.append(f"{head}; {what} in {reference['source']}: {reference['config_id']} "
                     f"{format_metric(metric, reference['value'])}, gap {case['gap']:+.1%}")
    return [piece for line in lines for piece in wrap(line)]


def write_summaries(path: Path, summaries: Sequence[Mapping[str, Any]]) -> None:
    """The searches of a session or `rvtune tune` run as one JSON file (a list), replaced whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(list(summaries), indent=1, sort_keys=True, default=str) + "\n")
    temporary.replace(path)


def summary_path(results: Path) -> Path:
    """Where a results file's search summaries go: ``<results>.search.json`` beside it."""
    return results.with_name(results.name + ".search.json")
