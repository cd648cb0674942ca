"""Progress of a long session: builds and runs done out of the total, time elapsed and an ETA.

The process that reports (the xdist controller, or the only process) sees every item's reports, and an item's
record (user_properties) says whether it was built (from the cache or not) and run. On a terminal the status is
one line updated in place: drawn after pytest's own progress characters and erased before pytest writes again,
so pytest's output is never interleaved with it. Elsewhere (CI logs, a pipe) it is a line every
``--rvtune-progress`` seconds, never one per item.

The ETA assumes the remaining items take as long as the finished ones did on average, with as many workers:
elapsed time since the first item could start, times remaining items over finished items.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

#: Default seconds between progress lines when the output is not a terminal.
DEFAULT_INTERVAL = 30.0
#: Outcomes of an item whose ELF ran (or whose earlier run was reused: resumed).
RAN_OUTCOMES = frozenset({"passed", "wrong", "crashed", "timeout", "regressed"})
#: Outcomes with a valid result; every other outcome counts as failed.
VALID_OUTCOMES = frozenset({"passed", "regressed"})
#: Below this many free columns after pytest's characters the in-place status is not drawn (it would wrap).
MIN_ROOM = 24

SAVE_CURSOR, RESTORE_CURSOR, ERASE_TO_END = "\x1b7", "\x1b8", "\x1b[K"


def format_duration(seconds: float) -> str:
    """``45s``, ``4m10s``, ``1h02m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass
class Progress:
    """Counts of one session's kernel items; ``total`` is known once collection has finished."""

    total: int = 0
    started: float | None = None  # time.monotonic() when the total became known
    items: int = 0  # finished, with or without a record
    builds: int = 0
    cached: int = 0  # builds served by the build cache
    runs: int = 0
    reused: int = 0  # runs whose result was reused: unchanged under QEMU (count cache), or --rvtune-resume
    failed: int = 0  # finished without a valid result
    seen: set[str] = field(default_factory=set)

    def start(self, total: int, now: float) -> None:
        if self.started is None:
            self.total, self.started = total, now

    def finish(self, nodeid: str, record: Mapping[str, Any] | None) -> None:
        """One item done; its record (None when it has none: setup failed, its worker died) says what it did."""
        if nodeid in self.seen:
            return
        self.seen.add(nodeid)
        self.items += 1
        if record is None:
            self.failed += 1
            return
        outcome = record.get("outcome")
        if "build_cache_hit" in record or outcome == "build_failed":
            self.builds += 1
            self.cached += bool(record.get("build_cache_hit"))
        if outcome in RAN_OUTCOMES:
            self.runs += 1
            self.reused += bool(record.get("counts_cached") or record.get("resumed_from"))
        if outcome not in VALID_OUTCOMES:
            self.failed += 1

    def eta(self, now: float) -> float | None:
        """Seconds left, None until an item finished (or when all have)."""
        if self.started is None or not self.items or self.items >= self.total:
            return None
        return (now - self.started) / self.items * (self.total - self.items)

    def line(self, now: float) -> str:
        total = max(self.total, self.items)
        text = f"builds {self.builds}/{total}"
        if self.cached:
            text += f" ({self.cached} cached)"
        text += f", runs {self.runs}/{total}"
        if self.reused:
            text += f" ({self.reused} reused)"
        if self.failed:
            text += f", {self.failed} failed"
        elapsed = now - self.started if self.started is not None else 0.0
        eta = self.eta(now)
        if eta is not None:
            text += f"; {format_duration(elapsed)} elapsed, ETA {format_duration(eta)}"
        elif self.items and self.items >= total:
            text += f"; all done in {format_duration(elapsed)}"
        return text


class ProgressReporter:
    """pytest hooks of the reporting process: count kernel items as they finish and show the status.

    ``is_kernel_item(nodeid)`` tells kernel items from other tests (a user's own tests in the same session);
    ``record_key`` is the user_properties key under which an item's report carries its record."""

    def __init__(self, config: pytest.Config, is_kernel_item: Callable[[str], bool], record_key: str,
                 interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.is_kernel_item = is_kernel_item
        self.record_key = record_key
        self.interval = interval
        self.clock = clock
        self.progress = Progress()
        self.last_line: float | None = None
        self.drawn = False
        self.shown = False
        self.in_place = False

    @pytest.hookimpl(trylast=True)  # the terminal reporter is registered at configure: it exists by now
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        self.shown = terminal is not None and self.interval > 0  # (-p no:terminal: nothing to write to)
        self.in_place = bool(terminal is not None and self.shown and terminal.isatty()
                             and self.config.get_verbosity() <= 0)  # -v prints a line per item: no room for ours

    # --- the total ---
    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # without xdist (the xdist controller collects nothing itself)
            self.progress.start(sum(self.is_kernel_item(item.nodeid) for item in session.items), self.clock())

    def expect(self, total: int) -> None:
        """The kernel items that will run when that is fewer than were collected (a search's budget)."""
        self.progress.total = total

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.progress.start(sum(self.is_kernel_item(nodeid) for nodeid in ids), self.clock())

    # --- items finishing ---
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Any:
        self.erase()  # before pytest's terminal writes its character for this report
        result = yield
        if not self.progress.total or not self.is_kernel_item(report.nodeid):
            return result
        # xdist: the worker died under the item; "???" is outside pytest's Literal (xdist ignores the same error)
        lost = report.when == "???"  # type: ignore[comparison-overlap]
        finished = report.when == "teardown" or lost
        if finished:
            record = None if lost else next((v for k, v in report.user_properties if k == self.record_key), None)
            self.progress.finish(report.nodeid, record if isinstance(record, dict) else None)
        if self.in_place:
            self.draw()  # again after every report: pytest's character for it erased the last drawing
        elif finished:
            self.print_line()
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.erase()  # pytest may start a line with the next module's name here

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.erase()  # pytest may write its [ NN%] here

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.erase()

    # --- the display ---
    def erase(self) -> None:
        if self.drawn:
            self.config.get_terminal_writer().write_raw(ERASE_TO_END, flush=True)
            self.drawn = False

    def draw(self) -> None:
        """The status after pytest's characters on its current line, the cursor put back where pytest left it;
        cut to the free columns so that it never wraps (a wrap would move the saved position)."""
        if not self.shown or not self.progress.total:
            return
        writer = self.config.get_terminal_writer()
        room = writer.fullwidth - writer.width_of_current_line - 3
        if room >= MIN_ROOM:
            shown = writer.markup(f"  {self.progress.line(self.clock())[:room]}", cyan=True)
            writer.write_raw(SAVE_CURSOR + shown + RESTORE_CURSOR, flush=True)
            self.drawn = True

    def print_line(self) -> None:
        """A line of its own when ``interval`` has passed since the last (or the start), and a last one when
        every item is done if any was printed."""
        if not self.shown or not self.progress.total:
            return
        now = self.clock()
        last = self.last_line if self.last_line is not None else (self.progress.started or now)
        all_done = self.progress.items >= self.progress.total
        if now - last >= self.interval or (all_done and self.last_line is not None):
            self.last_line = now
            writer = self.config.get_terminal_writer()
            if writer.width_of_current_line:
                writer.line()
            writer.line(f"rvtune progress: {self.progress.line(now)}")
