"""One timing run at a time per local target, across xdist workers, sessions and `rvtune compare --confirm`."""

from __future__ import annotations

import contextlib
from typing import Any

from filelock import FileLock

from pytest_rvtune import paths


def exclusive(target: Any) -> contextlib.AbstractContextManager[Any]:
    """Timing runs on one local target never overlap across xdist workers (or concurrent sessions sharing
    the cache): builds run in parallel, runs one at a time. Emulated runs too, so their samples stay
    comparable between -n 0 and -n 2. Boards take their own lock on the board itself (targets/ssh.py).
    The lock is a flock: it dies with its holder."""
    if not getattr(target, "local", False):
        return contextlib.nullcontext()
    lock_dir = paths.cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    return FileLock(str(lock_dir / f"target-{target.name}.lock"))
