"""Where a result came from: the project's git commit (and whether the work tree had uncommitted changes) and the
sha256 of the kernel's source file. Every record carries them, so runs can be told apart and ordered by commit
(`rvtune runs`) and a slower kernel traced to the commit that made it so.

Nothing here knows pytest.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

from pytest_rvtune.hashing import sha256_file

GIT_TIMEOUT_S = 10.0


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False,
                              timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):  # no git, or a hung file system: the record says nothing
        return None
    return done.stdout if done.returncode == 0 else None


@functools.cache
def git_state(root: Path) -> dict[str, Any]:
    """``{"git_commit": sha, "git_dirty": bool}`` of the work tree holding ``root``; {} outside one (or without
    git, or before the first commit). Dirty: a tracked file differs from the commit (untracked files do not
    count: .rvtune/ and scratch files would make every run dirty). Once per process."""
    commit = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    if not commit:
        return {}
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit.strip(), "git_dirty": bool(status and status.strip())}


def kernel_source(path: Path) -> dict[str, str]:
    """``{"kernel_sha256": ...}`` of the file an item was collected from; {} when it cannot be read."""
    try:
        return {"kernel_sha256": sha256_file(path)}
    except OSError:
        return {}
