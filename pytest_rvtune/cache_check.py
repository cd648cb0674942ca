"""Check a whole cache directory without changing it: every build-cache entry against its manifest
(compiler/cache.py), every count record against its stored sha256 (targets/count_cache.py), and the temporary
directories killed builds left. `rvtune cache verify` removes what this finds; `rvtune doctor` reports it.
Nothing here knows pytest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from pytest_rvtune.cache_layout import KEY, key_lock, walk
from pytest_rvtune.compiler.cache import TMP_MARK, entry_problem, try_lock
from pytest_rvtune.targets.count_cache import record_problem

#: A temporary directory whose key cannot be told (an older version's name) is stale after this long.
STALE_AFTER_S = 3600.0
#: entry_problem's word for an entry an older pytest-rvtune made (no manifest): made again, not damaged.
OLDER = "no manifest"


@dataclass
class CacheCheck:
    """What one pass over a cache found (paths with why)."""

    intact: int = 0
    counts_intact: int = 0
    damaged: list[tuple[Path, str]] = field(default_factory=list)  # build entries
    older: list[Path] = field(default_factory=list)  # build entries without a manifest
    counts_damaged: list[tuple[Path, str]] = field(default_factory=list)
    stale: list[Path] = field(default_factory=list)  # temporary directories of builds no one runs


def stale_lock(temp: Path) -> FileLock | None:
    """The lock a live build of ``temp`` (``<root>/<kind>/<key[:2]>/.<key>.tmp-...``) would hold; None when the
    name holds no key."""
    key = temp.name[1:].split(TMP_MARK)[0]
    if not KEY.fullmatch(key):
        return None
    return key_lock(temp, key)


def is_stale(temp: Path) -> bool:
    """No build is filling ``temp`` now: its key's lock is free (or, without a key, it is over an hour old)."""
    lock = stale_lock(temp)
    if lock is None:
        return time.time() - temp.stat().st_mtime >= STALE_AFTER_S
    if not try_lock(lock):
        return False
    lock.release()
    return True


def check_cache(root: Path) -> CacheCheck:
    found = CacheCheck()
    for where in walk(root):
        path = where.path
        if where.kind == "temp":
            if is_stale(path):
                found.stale.append(path)
        elif where.kind == "entry":
            problem = entry_problem(path)
            if problem is None:
                found.intact += 1
            elif problem == OLDER:
                found.older.append(path)
            else:
                found.damaged.append((path, problem))
        elif where.kind == "record" and path.parent.parent.name == "counts":
            problem = record_problem(path)
            if problem is None:
                found.counts_intact += 1
            else:
                found.counts_damaged.append((path, problem))
    return found
