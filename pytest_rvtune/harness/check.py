"""One output comparison a harness reports: what every target's run result, the output parsers and the verdict
share (it lives with the harness, which prints it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One output comparison reported by the harness (an `RVTUNE check ...` line, or another output format's
    check line, which may give no error sizes: nan, and -1 for an unknown first_bad or count)."""

    name: str
    ok: bool
    max_abs: float
    max_rel: float
    first_bad: int  # -1 when every element matched (or, in a format that does not say, unknown)
    count: int  # elements wrong; -1 when the harness does not say
    sizes_given: bool = True  # max_abs/max_rel came from the harness (a nan then means NaN in the output)
