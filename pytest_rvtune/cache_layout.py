"""What the paths of a cache directory (``paths.cache_dir()``) are: the one walk `rvtune cache info|prune|verify`,
the session's size cap and `rvtune doctor` share, so they agree on what an entry is.

- an *entry*: a build-cache directory ``<kind>/<key[:2]>/<key>/`` (compiler/cache.py: objects, ELFs, data images,
  the CPU driver's libraries), never walked into;
- a *record*: a file ``<kind>/<key[:2]>/<key>.json`` (count records, llvm-mca and X60 code analyses);
- a *temp*: a directory ``<kind>/<key[:2]>/.<key>.tmp-*`` a build is filling (or a killed build left);
- *other*: every other file (golden data generated into the cache, board probes, lock files).

Keys are sha256 hex digests (compiler/cache.py ``cache_key``, hashing.py). Nothing here knows pytest.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock

from pytest_rvtune.compiler.cache import TMP_MARK, BuildCache

KEY = re.compile(r"[0-9a-f]{64}")

Kind = Literal["entry", "record", "temp", "other"]


@dataclass(frozen=True)
class CachePath:
    path: Path
    kind: Kind


def _keyed(name: str, parent: str) -> bool:
    return KEY.fullmatch(name) is not None and parent == name[:2]


def walk(root: Path) -> Iterator[CachePath]:
    """Every entry, record and temp under ``root`` (without descending into them) and every other file, in a
    stable order."""
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        here = Path(dirpath)
        for name in list(dirs):
            if name.startswith(".") and TMP_MARK in name:
                dirs.remove(name)
                yield CachePath(here / name, "temp")
            elif _keyed(name, here.name):
                dirs.remove(name)
                yield CachePath(here / name, "entry")
        for name in sorted(files):
            stem, dot_json = name[:-5], name.endswith(".json")
            yield CachePath(here / name, "record" if dot_json and _keyed(stem, here.name) else "other")


def key_lock(path: Path, key: str) -> FileLock:
    """The lock a build of ``key`` takes (BuildCache.lock), for a path ``<root>/<kind>/<key[:2]>/...`` of its
    entry or of a temp a build of it is filling."""
    kind_dir = path.parent.parent
    return BuildCache(kind_dir.parent).lock(kind_dir.name, key)


__all__ = ["KEY", "CachePath", "key_lock", "walk"]
