"""Where a group's ranking was made: a shortlisted run (``--rvtune-shortlist RUN``, results/shortlist.py) ran
only the configs an earlier ranking kept, and that ranking may come from another case (emulation size) than the
one the results are for (the board's bench size). Winners move with size, so `rvtune report` and
`rvtune export-best` say so, naming both sizes, whenever a winner (hence a tuned config) comes from such a group.

Each shortlisted record keeps ``shortlisted_by``: {run, case, case_params, metric, kept, of_configs}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_rvtune.results.records import RunRecord

#: The record field naming the ranking a shortlisted item was chosen by (shortlist.Shortlist.record_field).
RECORD_FIELD = "shortlisted_by"


def sizes_text(case_params: Mapping[str, Any]) -> str:
    """``M=160, N=160, K=160``; ``sizes not recorded`` for a record without them."""
    return ", ".join(f"{k}={v}" for k, v in case_params.items()) or "sizes not recorded"


def ranked_elsewhere(group: Sequence[RunRecord]) -> dict[str, Any] | None:
    """The ``shortlisted_by`` field of a group (one kernel, case and problem) whose configs were chosen by a
    ranking made at another case than the group's own, else None."""
    for record in group:
        by = record.raw.get(RECORD_FIELD)
        if isinstance(by, dict) and by.get("case") not in (None, record.case):
            return by
    return None


def size_note(kernel: str, case: str, case_params: Mapping[str, Any], by: Mapping[str, Any]) -> str:
    """Says that a group's ranking (hence its winner, and any config exported from it) was made among configs
    shortlisted at another size, naming both sizes."""
    kept, of = len(by.get("kept") or []), by.get("of_configs", "?")
    return (f"{kernel} / {case} ({sizes_text(case_params)}): ranked among {kept} of {of} configs shortlisted by "
            f"{by.get('metric', '?')} at case {by.get('case')} ({sizes_text(by.get('case_params') or {})}) in "
            f"{by.get('run', '?')}: a ranking made at another size (winners move with size); the best config at "
            f"{case} may be one that was not run here")
