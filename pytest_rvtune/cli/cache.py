"""``rvtune cache verify``: check every entry of the cache (`RVTUNE_CACHE_DIR`, else the project's .rvtune/cache)
against what it held when it was made; remove the damaged ones and the temporary directories of killed builds.

A session checks each entry at its first use anyway (compiler/cache.py: build entries and data images;
targets/count_cache.py: count records) and makes a damaged one again; this command checks all of them at once
(after a disk fault, before sharing a cache) and says what it found. Exit status 1 when anything was damaged.
"""

from __future__ import annotations

import argparse
import re
import shutil
import time
from pathlib import Path

from filelock import FileLock

from pytest_rvtune import paths
from pytest_rvtune.compiler.cache import TMP_MARK, entry_problem, remove_entry, try_lock
from pytest_rvtune.targets.count_cache import record_problem

_KEY = re.compile(r"[0-9a-f]{64}")
#: A temporary directory whose key cannot be told (an older version's name) is stale after this long.
STALE_AFTER_S = 3600.0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("cache", help="check the build, data-image and count caches", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    verify = actions.add_parser("verify", help="check every cache entry; remove damaged ones and stale temp dirs",
                                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verify.set_defaults(func=run_verify)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _remove_if_stale(temp: Path) -> bool:
    """Remove a build's temporary directory unless that build is running now (it holds its key's lock:
    ``<root>/locks/<kind>-<key>.lock`` for ``<root>/<kind>/<key[:2]>/.<key>.tmp-...``)."""
    key = temp.name[1:].split(TMP_MARK)[0]
    if not _KEY.fullmatch(key):  # no key to lock by: old enough is stale
        if time.time() - temp.stat().st_mtime < STALE_AFTER_S:
            return False
        shutil.rmtree(temp, ignore_errors=True)
        return True
    kind_dir = temp.parent.parent
    lock = FileLock(str(kind_dir.parent / "locks" / f"{kind_dir.name}-{key}.lock"))
    if not try_lock(lock):
        return False
    try:
        shutil.rmtree(temp, ignore_errors=True)
    finally:
        lock.release()
    return True


def run_verify(args: argparse.Namespace) -> int:
    root = paths.cache_dir()
    if not root.is_dir():
        print(f"rvtune cache verify: no cache at {root} (nothing to check)")
        return 0
    intact = damaged = older = stale = counts_ok = counts_bad = 0
    for path in sorted(root.rglob("*")):
        if path.name.startswith(".") and TMP_MARK in path.name and path.is_dir():
            if _remove_if_stale(path):
                stale += 1
                print(f"stale: {path}: left by a killed build: removed")
        elif _KEY.fullmatch(path.name) and path.parent.name == path.name[:2] and path.is_dir():
            problem = entry_problem(path)
            if problem is None:
                intact += 1
                continue
            remove_entry(path)
            if problem == "no manifest":
                older += 1
                print(f"older: {path}: made by an older pytest-rvtune, which kept no manifest: removed")
            else:
                damaged += 1
                print(f"damaged: {path}: {problem}: removed (made again at its next use)")
        elif path.suffix == ".json" and path.parent.parent.name == "counts" and _KEY.fullmatch(path.stem):
            problem = record_problem(path)
            if problem is None:
                counts_ok += 1
                continue
            path.unlink(missing_ok=True)
            counts_bad += 1
            print(f"damaged: {path}: {problem}: removed (measured again at its next use)")
    older_text = f", {older} of an older version (removed)" if older else ""
    print(f"{_plural(intact + damaged + older, 'build entry', 'build entries')} checked: {intact} intact, "
          f"{damaged} damaged (removed){older_text}; "
          f"{_plural(counts_ok + counts_bad, 'count record', 'count records')} checked: {counts_bad} damaged "
          f"(removed); {_plural(stale, 'stale temporary directory', 'stale temporary directories')} removed; "
          f"cache {root}")
    return 1 if damaged or counts_bad else 0
