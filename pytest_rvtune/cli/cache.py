"""``rvtune cache info|prune|clean|verify``: the cache's size and what is in it, least-recently-used eviction down to
its cap, removing it all, and checking every entry.

``verify``: check every entry of the cache (`RVTUNE_CACHE_DIR`, else the project's .rvtune/cache)
against what it held when it was made; remove the damaged ones and the temporary directories of killed builds.

A session checks each entry at its first use anyway (compiler/cache.py: build entries and data images;
targets/count_cache.py: count records) and makes a damaged one again; this command checks all of them at once
(after a disk fault, before sharing a cache) and says what it found. Exit status 1 when anything was damaged.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from pathlib import Path

from filelock import FileLock

from pytest_rvtune import paths
from pytest_rvtune.cache_limit import (
    CAP_ENV,
    DEFAULT_CAP,
    RECENT_S,
    CapError,
    format_size,
    ini_cap,
    prune_recent_safe,
    resolve_cap,
    usage,
)
from pytest_rvtune.compiler.cache import TMP_MARK, entry_problem, remove_entry, try_lock
from pytest_rvtune.targets.count_cache import record_problem

_KEY = re.compile(r"[0-9a-f]{64}")
#: A temporary directory whose key cannot be told (an older version's name) is stale after this long.
STALE_AFTER_S = 3600.0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("cache", help="the cache: its size, eviction, removal, checks", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    verify = actions.add_parser("verify", help="check every cache entry; remove damaged ones and stale temp dirs",
                                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verify.set_defaults(func=run_verify)
    info = actions.add_parser("info", help="where the cache is, its size per kind and its cap",
                              description="Where the cache is (RVTUNE_CACHE_DIR, else .rvtune/cache under the "
                                          "project), its size per kind of entry, and the size cap in force.")
    info.set_defaults(func=run_info)
    prune = actions.add_parser(
        "prune", help="remove least recently used entries down to the cap",
        description="Remove the least recently used entries until the cache holds at most the cap: --max, else "
                    f"{CAP_ENV}, else rvtune_cache_max in pyproject.toml's [tool.pytest.ini_options], else "
                    f"{format_size(DEFAULT_CAP)}. Entries used in the last {RECENT_S / 60:.0f} minutes stay "
                    "(a session may be using them). A pytest session prunes the same way at its end.")
    prune.add_argument("--max", metavar="SIZE", help="the cap for this prune (4GB, 500MB, 2GiB, 0)")
    prune.set_defaults(func=run_prune)
    clean = actions.add_parser("clean", help="remove the whole cache (results files stay)",
                               description="Remove everything in the cache; it is made again as items need it "
                                           "(results files under .rvtune/results stay).")
    clean.set_defaults(func=run_clean)


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


def _cap(option: str | None) -> tuple[int | None, str]:
    return resolve_cap(option, ini_cap(paths.project_root()))


def run_info(args: argparse.Namespace) -> int:
    root = paths.cache_dir()
    try:
        cap, where = _cap(None)
    except CapError as exc:
        print(f"rvtune cache info: the cache's size cap: {exc}", file=sys.stderr)
        return 2
    cap_text = "no cap" if cap is None else f"cap {format_size(cap)} ({where})"
    found = usage(root)
    print(f"cache {root}: {format_size(found.total)}, {cap_text}")
    per_kind: dict[str, list[int]] = {}
    for entry in found.entries:
        kind = entry.path.relative_to(root).parts[0]
        counts = per_kind.setdefault(kind, [0, 0])
        counts[0] += 1
        counts[1] += entry.size
    for kind, (n, size) in sorted(per_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"  {kind:<16} {_plural(n, 'entry', 'entries'):>14}  {format_size(size):>9}")
    if found.other_files:
        print(f"  {'other':<16} {_plural(found.other_files, 'file', 'files'):>14}  {format_size(found.other_bytes):>9}"
              "  (golden data made here, probes, locks: removed only by `rvtune cache clean`)")
    if found.entries:
        oldest = min(e.used for e in found.entries)
        print(f"  least recently used entry: {time.strftime('%Y-%m-%d %H:%M', time.localtime(oldest))}")
    return 0


def run_prune(args: argparse.Namespace) -> int:
    root = paths.cache_dir()
    try:
        cap, where = _cap(args.max)
    except CapError as exc:
        print(f"rvtune cache prune: {exc}", file=sys.stderr)
        return 2
    if cap is None:
        print(f"rvtune cache prune: no cap ({where} says off): nothing removed")
        return 0
    pruned = prune_recent_safe(cap, root)
    busy = f"; {pruned.kept_busy} over the cap kept (used in the last {RECENT_S / 60:.0f} minutes or being built)" \
        if pruned.kept_busy else ""
    print(f"rvtune cache prune: {format_size(pruned.before)} -> {format_size(pruned.after)} (cap "
          f"{format_size(cap)}, {where}): removed {_plural(pruned.removed, 'entry', 'entries')}, least recently used "
          f"first ({format_size(pruned.freed)}){busy}; cache {root}")
    return 0


def run_clean(args: argparse.Namespace) -> int:
    root = paths.cache_dir()
    if not root.is_dir():
        print(f"rvtune cache clean: no cache at {root} (nothing to remove)")
        return 0
    before = usage(root).total
    for child in root.iterdir():
        if child.name in (".gitignore", "CACHEDIR.TAG"):
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    print(f"rvtune cache clean: removed {format_size(before - usage(root).total)}; cache {root} (made again as "
          "items need it; results files stay)")
    return 0
