"""One timing run at a time per local target, across xdist workers, sessions and `rvtune compare --confirm`."""

from __future__ import annotations

import contextlib
from typing import Any

from filelock import FileLock

from pytest_rvtune import paths


def needs_exclusive(target: Any) -> bool:
    """Whether runs on ``target`` must not overlap: a local target whose timings are real (the host). Emulated
    runs (QEMU) count instructions, which no neighbour changes, and their emulated time is not performance,
    so they run in parallel across xdist workers. Boards take their own lock on the board itself
    (targets/ssh.py)."""
    return bool(getattr(target, "local", False)) and getattr(target, "timing_source", None) != "emulated"


def exclusive(target: Any) -> contextlib.AbstractContextManager[Any]:
    """Timing runs on one local target never overlap across xdist workers (or concurrent sessions sharing
    the cache): builds run in parallel, timed runs one at a time (needs_exclusive). The lock is a flock: it
    dies with its holder."""
    if not needs_exclusive(target):
        return contextlib.nullcontext()
    lock_dir = paths.cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    return FileLock(str(lock_dir / f"target-{target.name}.lock"))
