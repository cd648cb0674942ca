"""``rvtune cache verify``: check every entry of the cache (`RVTUNE_CACHE_DIR`, else the project's .rvtune/cache)
against what it held when it was made; remove the damaged ones and the temporary directories of killed builds.

A session checks each entry at its first use anyway (compiler/cache.py: build entries and data images;
targets/count_cache.py: count records) and makes a damaged one again; this command checks all of them at once
(after a disk fault, before sharing a cache) and says what it found. Exit status 1 when anything was damaged.
"""

from __future__ import annotations

import argparse
import shutil

from pytest_rvtune import paths
from pytest_rvtune.cache_check import check_cache
from pytest_rvtune.cli.cache_size import add_actions
from pytest_rvtune.compiler.cache import remove_entry


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("cache", help="the cache: size, eviction, removal, checks", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    verify = actions.add_parser("verify", help="check every cache entry; remove damaged ones and stale temp dirs",
                                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verify.set_defaults(func=run_verify)
    add_actions(actions)  # info, prune, clean: cache_size.py


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
