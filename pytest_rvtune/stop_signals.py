"""SIGTERM and SIGHUP stop a pytest-rvtune session the way Ctrl-C does, passed on to the processes it started.

By default either signal ends a Python process on the spot: no `finally`, no summary. Under xdist the controller
died at once and its workers, reparented to PID 1, kept starting QEMU runs for ~20 s until execnet noticed, and
every interrupted run left its `/tmp/rvtune-qemu-*` directory behind. Here each process turns the first such
signal into KeyboardInterrupt (so pytest prints the summary of what finished and every temporary directory and
QEMU process group is cleaned up on the way out) after passing the signal on to its own child processes by PID:
the controller's children are its xdist workers, which stop the same way. A second signal while stopping is
ignored (the cleanup is running). Nothing here knows pytest.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def child_pids(parent: int | None = None) -> list[int]:
    """The PIDs of ``parent``'s (default: this process's) direct children, from /proc."""
    parent = os.getpid() if parent is None else parent
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # pid (comm) state ppid ...: the command may hold spaces and parentheses, so split after the last ')'
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                children.append(int(stat.parent.name))
    return children


def make_interruptible() -> None:
    """SIGINT back to Python's KeyboardInterrupt where this process inherited it ignored (a session started in the
    background: `pytest ... &`, nohup). execnet stops an xdist worker whose controller died with SIGINT; ignored,
    the worker ran on and was ended by os._exit 15 s later, without its clean-up (QEMU run directories stayed)."""
    with contextlib.suppress(ValueError):  # not the main thread: Python refuses signal handlers there
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)


class StopOnSignal:
    """Installed for a session (main thread only: elsewhere Python refuses signal handlers), then restored."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}
        self.stopping: signal.Signals | None = None

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread (an embedding application): leave its signals alone
                return

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, handler)
        self.previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping is not None:
            return
        self.stopping = signal.Signals(signum)
        for pid in child_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
        raise KeyboardInterrupt(f"rvtune: {self.stopping.name} received: stopping; the items that finished are "
                                "recorded")
