"""Hand samples measured on a target to pytest-benchmark, through its public per-item timer route.

pytest-benchmark has no API for times measured elsewhere. Its `pedantic(fn, rounds=N, iterations=1)` reads the
timer once before and once after each call of fn, and never calibrates; with a timer that is a fake clock that
fn advances by one board-measured sample, every round's duration is exactly that sample. Tables, JSON,
autosave, --benchmark-compare(-fail) and `pytest-benchmark compare` then work unchanged.

The stats are always built in the process that owns pytest-benchmark's session (the xdist controller, or the
only process): pytest-benchmark disables itself inside xdist workers, so workers send their samples over with
the test report and the controller merges them here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_benchmark.fixture import BenchmarkFixture
from pytest_benchmark.utils import NameWrapper


class ReplayClock:
    """A monotonic clock (seconds) that only moves when ``advance`` is called."""

    __name__ = "rvtune_target_clock"  # pytest-benchmark prints the timer's name in its JSON

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class _CallSpec:
    id: str
    params: dict[str, Any]


@dataclass
class _Node:
    """The parts of a pytest item BenchmarkFixture reads (name, nodeid, callspec)."""

    name: str
    nodeid: str
    callspec: _CallSpec = field(default_factory=lambda: _CallSpec("", {}))


def add_benchmark(
    session: Any,
    *,
    nodeid: str,
    name: str,
    param: str,
    params: dict[str, Any],
    samples_ns: Sequence[int],
    extra_info: dict[str, Any],
    group: str | None = None,
) -> None:
    """Record ``samples_ns`` as the stats of one item in pytest-benchmark's session ``session``."""
    if not samples_ns:
        raise ValueError(f"{nodeid}: no timing samples to record")
    clock = ReplayClock()
    options = dict(session.options)
    options["timer"] = NameWrapper(clock)
    fixture = BenchmarkFixture(
        _Node(name, nodeid, _CallSpec(param, params)),
        add_stats=session.benchmarks.append,
        logger=session.logger,
        warner=lambda *args, **kwargs: None,
        disabled=False,
        group=group,
        **options,
    )
    samples = iter(samples_ns)
    fixture.pedantic(lambda: clock.advance(next(samples) * 1e-9), rounds=len(samples_ns), iterations=1)
    fixture.extra_info.update(extra_info)
