"""Turn one RunResult into an outcome and a message a kernel author can act on.

Outcomes are the ones the results file and the session summary use: passed, wrong, build_failed, crashed,
timeout, error (bad input data, a harness that could not start). A store out of a buffer's bounds (a guard
zone's check line, see harness/output.py) is "wrong": the kernel is wrong even when the values it left
in bounds are right; its message names the buffer, the side and how many elements were overwritten.
"""

from __future__ import annotations

import math
import signal as signal_module
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeGuard, get_args

from pytest_rvtune.harness.output import guard_zone
from pytest_rvtune.targets.base import Check, RunResult

#: What judge() makes of a run.
RunOutcome = Literal["passed", "wrong", "build_failed", "crashed", "timeout", "error"]
#: An item's outcome, as its record says: its run's, or "regressed" (it passed, then failed --rvtune-compare's
#: gate against the base run).
Outcome = Literal[RunOutcome, "regressed"]

OUTCOMES: tuple[RunOutcome, ...] = get_args(RunOutcome)
ITEM_OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


def is_outcome(value: object) -> TypeGuard[Outcome]:
    """``value`` is an item outcome (a record read back may hold anything)."""
    return value in ITEM_OUTCOMES

#: How much of the ELF's output a crash report shows: enough for a backtrace-ish tail, not a flood.
OUTPUT_TAIL_LINES = 20


@dataclass(frozen=True)
class ItemVerdict:
    outcome: Outcome
    message: str

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


def _tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    kept = text.strip().splitlines()[-lines:]
    return "\n".join(f"    {line}" for line in kept) if kept else "    (no output)"


def _signal_name(signum: int) -> str:
    try:
        return signal_module.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def describe_bad_check(check: Check) -> str:
    """One failed check as a line of the verdict: a guard zone, a NaN output, or the error sizes (a harness in
    another output format may not print every figure)."""
    zone = guard_zone(check.name)
    if zone is not None:
        buffer, side = zone
        edge = "end" if side == "after" else "start"
        start = "right" if check.first_bad == 0 else f"{_count(check.first_bad, 'element')}"
        return (f"{buffer}: {_count(check.count, 'element')} written {side} its {edge}, starting {start} {side} it "
                f"(the kernel stores out of bounds: check the store's mask and offsets)")
    if check.sizes_given and math.isnan(check.max_abs):  # the harness's sign of an output NaN
        return (f"{check.name}: NaN where a number was expected, first at index {check.first_bad}; "
                f"{_count(check.count, 'element')} wrong")
    parts = [f"max abs error {check.max_abs:.3g}" if check.sizes_given else "",
             f"max rel error {check.max_rel:.3g}" if check.sizes_given else "",
             f"first bad index {check.first_bad}" if check.first_bad >= 0 else "",
             f"{_count(check.count, 'element')} wrong" if check.count >= 0 else ""]
    known = [p for p in parts if p]
    return f"{check.name}: " + (", ".join(known) if known else "not OK (the harness gives no details)")


def non_finite(samples: Iterable[float], counters: Mapping[str, float]) -> str:
    """What is not a finite number among an item's time samples and counters ("2 of 5 samples_ns are nan;
    counter l1d_miss is inf"), "" when all are."""
    samples = list(samples)
    bad = [s for s in samples if not math.isfinite(s)]
    parts = [f"{len(bad)} of {len(samples)} samples_ns {'is' if len(bad) == 1 else 'are'} "
             f"{' and '.join(sorted({repr(float(s)) for s in bad}))}"] if bad else []
    parts += [f"counter {name} is {float(value)!r}" for name, value in counters.items() if not math.isfinite(value)]
    return "; ".join(parts)


def finite_only(counters: Mapping[str, float]) -> dict[str, float]:
    """``counters`` without the values that are not finite numbers (JSON has no NaN: a results file never holds one)."""
    return {name: value for name, value in counters.items() if math.isfinite(value)}


def judge(result: RunResult, *, what: str, timeout: float, check: bool = True,
          timeout_setting: str = "--rvtune-timeout", expected_sample: str = "") -> ItemVerdict:
    """Classify a run. ``what`` names the item (kernel, case, config, target) in every message;
    ``timeout_setting`` names where the timeout was set (the option, or a board's own ``timeout``);
    ``expected_sample`` says what a timing sample looks like and how to teach another form (a user's harness)."""
    output = f"{result.stdout}\n{result.stderr}"
    if result.timed_out:
        return ItemVerdict("timeout", f"{what}: killed after the {timeout:g} s timeout ({timeout_setting}); "
                                  f"output tail:\n{_tail(output)}")
    if result.signal is not None:
        return ItemVerdict("crashed", f"{what}: crashed with {_signal_name(result.signal)}; output tail:\n"
                                  f"{_tail(output)}")
    if result.errors:
        return ItemVerdict("error", f"{what}: the harness rejected its input:\n"
                                + "\n".join(f"    {e}" for e in result.errors))
    bad = [c for c in result.checks if not c.ok]
    if bad:
        values = [c for c in bad if guard_zone(c.name) is None]
        guards = [c for c in bad if guard_zone(c.name) is not None]
        heading = ", ".join(["wrong answer"] * bool(values) + ["out-of-bounds store"] * bool(guards))
        lines = [f"    {describe_bad_check(c)}" for c in values + guards]
        return ItemVerdict("wrong", f"{what}: {heading}\n" + "\n".join(lines))
    if result.returncode != 0:
        return ItemVerdict("crashed", f"{what}: exited with status {result.returncode}; output tail:\n"
                                  f"{_tail(output)}")
    if check and not result.checks:
        return ItemVerdict("error", f"{what}: the harness reported no output check; output tail:\n{_tail(output)}")
    odd = non_finite(result.samples_ns, result.counters)
    if odd:  # a NaN would rank first or break every comparison with it: not a measurement
        return ItemVerdict("error", f"{what}: the target reported {odd}: not a measurement (the record keeps only "
                                    "the finite numbers; check the harness's timer and the counters' source)")
    if not result.samples_ns:
        looked = f" ({expected_sample})" if expected_sample else ""
        return ItemVerdict("error", f"{what}: the harness reported no timing sample{looked}; output tail:\n"
                                    f"{_tail(output)}")
    return ItemVerdict("passed", f"{what}: passed")
