"""``rvtune cache``: the cache (`RVTUNE_CACHE_DIR`, else the project's .rvtune/cache).

- ``info``: where it is, its size per kind and its cap; ``prune``: least-recently-used eviction down to the cap;
  ``clean``: remove it all.
- ``verify``: check every entry against what it held when it was made; remove the damaged ones and the temporary
  directories of killed builds. A session checks each entry at its first use anyway (compiler/cache.py: build
  entries and data images; targets/count_cache.py: count records) and makes a damaged one again; this command checks
  all of them at once (after a disk fault, before sharing a cache) and says what it found. Exit status 1 when
  anything was damaged.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time

from pytest_rvtune import paths
from pytest_rvtune.cache_check import check_cache
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
from pytest_rvtune.compiler.cache import remove_entry

_VERIFY_DOC = """\
``rvtune cache verify``: check every entry of the cache (`RVTUNE_CACHE_DIR`, else the project's .rvtune/cache)
against what it held when it was made; remove the damaged ones and the temporary directories of killed builds.

A session checks each entry at its first use anyway (compiler/cache.py: build entries and data images;
targets/count_cache.py: count records) and makes a damaged one again; this command checks all of them at once
(after a disk fault, before sharing a cache) and says what it found. Exit status 1 when anything was damaged.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("cache", help="the cache: size, eviction, removal, checks", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    verify = actions.add_parser("verify", help="check every cache entry; remove damaged ones and stale temp dirs",
                                description=_VERIFY_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
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


def run_verify(args: argparse.Namespace) -> int:
    root = paths.cache_dir()
    if not root.is_dir():
        print(f"rvtune cache verify: no cache at {root} (nothing to check)")
        return 0
    found = check_cache(root)
    for temp in found.stale:
        shutil.rmtree(temp, ignore_errors=True)
        print(f"stale: {temp}: left by a killed build: removed")
    for entry in found.older:
        remove_entry(entry)
        print(f"older: {entry}: made by an older pytest-rvtune, which kept no manifest: removed")
    for entry, problem in found.damaged:
        remove_entry(entry)
        print(f"damaged: {entry}: {problem}: removed (made again at its next use)")
    for record, problem in found.counts_damaged:
        record.unlink(missing_ok=True)
        print(f"damaged: {record}: {problem}: removed (measured again at its next use)")
    damaged, counts_bad = len(found.damaged), len(found.counts_damaged)
    older = f", {len(found.older)} of an older version (removed)" if found.older else ""
    print(f"{_plural(found.intact + damaged + len(found.older), 'build entry', 'build entries')} checked: "
          f"{found.intact} intact, {damaged} damaged (removed){older}; "
          f"{_plural(found.counts_intact + counts_bad, 'count record', 'count records')} checked: {counts_bad} "
          f"damaged (removed); {_plural(len(found.stale), 'stale temporary directory', 'stale temporary directories')}"
          f" removed; cache {root}")
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
