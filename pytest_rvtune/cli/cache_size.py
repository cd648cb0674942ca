"""`rvtune cache info|prune|clean`: the cache's size per kind and its cap, least-recently-used eviction down to the
cap, and removing it all (cache_limit.py holds the rules; `rvtune cache verify` lives in cache.py)."""

from __future__ import annotations

import argparse
import shutil
import sys
import time

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


def add_actions(actions: argparse._SubParsersAction) -> None:
    """Register info, prune and clean under `rvtune cache`."""
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
