"""Rounds: the same item measured again in a later session, its samples pooled with the earlier rounds'.

A shared machine (a cloud VM, a board with a busy neighbour) is slow for spells of seconds to minutes. Samples
of one session can all fall in one spell, so one session's minimum can sit 20-40 % above another's. asv's
answer is rounds: pass through the suite several times and pool the samples, so every item is sampled at
several moments far apart. Here a round is one more pytest session writing to the same results file::

    for round in 1 2 3; do pytest kernels --rvtune-target host --rvtune-results=host.jsonl; done

Each session's record of an item carries the samples of every earlier round of the same experiment (same
ELF, golden data, target identity and threads; both passed) followed by its own, ``rounds`` and
``round_samples`` (samples per round). The last line of an item is therefore the whole pooled result, so
readers keep taking the last line (runs.py), a killed round loses nothing, and ``--rvtune-compare`` judges
the pooled samples. A record of another ELF (the code changed) starts again at round 1.
Nothing here knows pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_rvtune.results.runs import Run, identity_key

#: Record fields that must match for two records to be rounds of one experiment.
SAME_EXPERIMENT = ("elf_sha256", "golden_sha256", "timing_source")


def _experiment(record: Mapping[str, Any]) -> tuple[Any, ...]:
    return (*(record.get(k) for k in SAME_EXPERIMENT), record.get("threads", 1),
            identity_key(dict(record.get("machine") or {})))


def earlier_rounds(run: Run | None, run_id: str) -> dict[tuple[str, str, str, str], Mapping[str, Any]]:
    """The last passed record of every item in ``run`` written by another session than ``run_id``."""
    if run is None:
        return {}
    return {r.key: r.raw for r in run.records
            if r.outcome == "passed" and r.samples_ns and r.raw.get("run_id") != run_id}


def pool(record: dict[str, Any], earlier: Mapping[str, Any] | None) -> dict[str, Any]:
    """``record`` as round k+1 of ``earlier`` when both measured the same experiment; else round 1."""
    own = list(record.get("samples_ns") or [])
    if (earlier is None or record.get("outcome") != "passed" or not own
            or _experiment(earlier) != _experiment(record)):
        return record | {"rounds": 1, "round_samples": [len(own)]}
    before = list(earlier.get("samples_ns") or [])
    sizes = list(earlier.get("round_samples") or [len(before)])
    return record | {"samples_ns": before + own, "rounds": len(sizes) + 1, "round_samples": [*sizes, len(own)]}
