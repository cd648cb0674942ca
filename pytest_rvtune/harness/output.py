"""Parse what a harness ELF prints on stdout into samples, checks and errors (every target shares this).

The harness prints one machine-readable line per fact (docs/contracts.md):

    RVTUNE sample <ns>
    RVTUNE launches <n>     (kernel launches in all: warm-up, sizing and every timed run)
    RVTUNE check <name> ok|bad max_abs=<g> max_rel=<g> first_bad=<i> count=<n>
    RVTUNE error <message>

A check's ``<name>`` is an output tensor's, or ``<buffer>:before`` / ``<buffer>:after`` for a guard zone
around a buffer that the kernel wrote into (only printed when it did: always ``bad``, count = elements
overwritten, first_bad = how far past the edge the nearest of them is, 0 = adjacent; see guard_zone). An
output NaN where a number was expected is ``max_abs=nan max_rel=nan`` with first_bad the first such NaN.

Every other line is free text and ignored. A line that starts with ``RVTUNE`` but does not parse is a harness
bug: it is reported as an error (naming the line) instead of being dropped, so it cannot pass as "no check".

This is the default output format; a user's own harness is read through harness/output_format.py instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pytest_rvtune.harness.check import Check

PREFIX = "RVTUNE"
_CHECK_FIELDS = ("max_abs", "max_rel", "first_bad", "count")
GUARD_SIDES = ("before", "after")


def guard_zone(check_name: str) -> tuple[str, str] | None:
    """(buffer, side) when ``check_name`` is a guard zone's check (``y:after``), else None."""
    buffer, sep, side = check_name.rpartition(":")
    return (buffer, side) if sep and buffer and side in GUARD_SIDES else None


@dataclass
class HarnessOutput:
    samples_ns: list[int] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    launches: int | None = None  # None from a harness that does not print it


class _BadLine(ValueError):
    pass


def _parse_sample(rest: list[str]) -> int:
    if len(rest) != 1:
        raise _BadLine("expected `RVTUNE sample <ns>`")
    try:
        value = float(rest[0])  # integers normally; a float is tolerated and truncated
    except ValueError:
        raise _BadLine(f"sample {rest[0]!r} is not a number") from None
    if not value >= 0 or math.isinf(value):  # also rejects nan; inf made int() raise OverflowError
        raise _BadLine(f"sample {rest[0]!r} is not a non-negative finite time in ns")
    return int(value)


def _parse_launches(rest: list[str]) -> int:
    if len(rest) != 1 or not rest[0].isdigit():
        raise _BadLine("expected `RVTUNE launches <n>` with n a non-negative integer")
    return int(rest[0])


def _parse_check(rest: list[str]) -> Check:
    if len(rest) != 2 + len(_CHECK_FIELDS) or rest[1] not in ("ok", "bad"):
        raise _BadLine("expected `RVTUNE check <name> ok|bad max_abs=<g> max_rel=<g> first_bad=<i> count=<n>`")
    values: dict[str, str] = {}
    for item in rest[2:]:
        key, sep, value = item.partition("=")
        if not sep or key not in _CHECK_FIELDS or key in values:
            raise _BadLine(f"unexpected field {item!r} in check line")
        values[key] = value
    try:
        return Check(
            name=rest[0],
            ok=rest[1] == "ok",
            max_abs=float(values["max_abs"]),  # %g may print nan/inf: float() reads both
            max_rel=float(values["max_rel"]),
            first_bad=int(values["first_bad"]),
            count=int(values["count"]),
        )
    except ValueError as exc:
        raise _BadLine(f"bad number in check line ({exc})") from None


def parse_harness_output(stdout: str) -> HarnessOutput:
    """Collect every ``RVTUNE`` line of ``stdout``; free text is ignored."""
    out = HarnessOutput()
    for lineno, raw in enumerate(stdout.splitlines(), start=1):
        line = raw.strip()
        words = line.split()
        if not words or words[0] != PREFIX:
            continue
        kind = words[1] if len(words) > 1 else ""
        try:
            if kind == "sample":
                out.samples_ns.append(_parse_sample(words[2:]))
            elif kind == "launches":
                out.launches = _parse_launches(words[2:])
            elif kind == "check":
                out.checks.append(_parse_check(words[2:]))
            elif kind == "error":
                # The message is free text: keep its spacing after the keyword.
                out.errors.append(line.split(None, 2)[2] if len(words) > 2 else "(no message)")
            else:
                raise _BadLine(f"unknown kind {kind!r} (expected sample, launches, check or error)")
        except _BadLine as exc:
            out.errors.append(f"unparsable harness output line {lineno}: {line!r}: {exc}")
    return out
