"""The cache's size cap: its entries, their sizes and last use, and least-recently-used eviction down to the cap.

An *entry* is one content-addressed unit of the cache (``paths.cache_dir()``): a build-cache directory
``<kind>/<key[:2]>/<key>/`` (compiler/cache.py: objects, ELFs, data images, the CPU driver's libraries) or a record
file ``<kind>/<key[:2]>/<key>.json`` (count records, llvm-mca and X60 code analyses). Its last use is its
modification time: a build-cache hit and a count-record hit touch it (compiler/cache.py's ``mark_used``), every
other entry counts as used when it was made. Anything else (golden data generated into the cache, board probes,
lock files) is counted by ``usage`` but never evicted: `rvtune cache clean` removes it.

The cap (``resolve_cap``): the ``--rvtune-cache-max`` / ``rvtune cache prune --max`` option, else the
``RVTUNE_CACHE_MAX`` environment variable, else ``rvtune_cache_max`` in the project's pytest configuration
(``[tool.pytest.ini_options]`` of pyproject.toml), else DEFAULT_CAP. A pytest session prunes at its end, never an
entry it used itself; `rvtune cache prune` never one used in the last RECENT_S seconds (a session running
elsewhere may be about to open it).

Nothing here knows pytest.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.cache_layout import key_lock, walk
from pytest_rvtune.compiler.cache import remove_entry, try_lock

#: 4 GB: a few full sweeps of every kernel (one 6-config kernel's cache was 204 MB), well below a laptop's disk.
DEFAULT_CAP = 4_000_000_000
CAP_ENV = "RVTUNE_CACHE_MAX"
CAP_INI = "rvtune_cache_max"
#: `rvtune cache prune` keeps entries used this recently: another session may hold their paths right now.
RECENT_S = 600.0

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)
#: Values that switch the cap off.
NO_CAP = ("off", "none", "unlimited")


class CapError(ValueError):
    """A cap that is not a size; the message names where it came from."""


@dataclass(frozen=True)
class Entry:
    path: Path
    size: int
    used: float  # seconds since the epoch


@dataclass
class Usage:
    entries: list[Entry]
    other_bytes: int  # golden data, probes, locks: not evictable
    other_files: int

    @property
    def entry_bytes(self) -> int:
        return sum(e.size for e in self.entries)

    @property
    def total(self) -> int:
        return self.entry_bytes + self.other_bytes


@dataclass
class Pruned:
    removed: int = 0
    freed: int = 0
    kept_busy: int = 0  # over the cap but in use (this session's, recent, or locked by a build)
    before: int = 0
    after: int = 0


def parse_size(text: str, where: str) -> int | None:
    """Bytes from "4GB", "500 MB", "1.5GiB", "0"; None for "off" (no cap). ``where`` names the setting."""
    if text.strip().lower() in NO_CAP:
        return None
    match = _SIZE.fullmatch(text)
    unit = match[2].lower() if match else ""
    if not match or unit not in _UNITS:
        raise CapError(f"{where}: {text!r} is not a size; write e.g. 4GB, 500MB, 2GiB, or 'off' for no cap")
    return int(float(match[1]) * _UNITS[unit])


def ini_cap(root: Path) -> str | None:
    """``rvtune_cache_max`` from the project's pyproject.toml ``[tool.pytest.ini_options]`` (for the CLI; a pytest
    session reads its own configuration)."""
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    value = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get(CAP_INI)
    return str(value) if value not in (None, "") else None


def resolve_cap(option: str | None, ini: str | None) -> tuple[int | None, str]:
    """(the cap in bytes or None for no cap, where it came from)."""
    env = os.environ.get(CAP_ENV)
    for value, where in ((option, "option"), (env, CAP_ENV), (ini, CAP_INI)):
        if value:
            return parse_size(value, f"{where}={value}"), where
    return DEFAULT_CAP, "default"


def format_size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _tree_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # removed while we walk
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def usage(root: Path | None = None) -> Usage:
    root = root or paths.cache_dir()
    entries: list[Entry] = []
    other_bytes = other_files = 0
    if not root.is_dir():
        return Usage(entries, 0, 0)
    for found in walk(root):
        try:
            st = found.path.lstat()
        except OSError:
            continue
        if found.kind in ("entry", "record"):
            size = _tree_size(found.path) if found.kind == "entry" else st.st_size
            entries.append(Entry(found.path, size, st.st_mtime))
        elif found.kind == "temp":  # a build filling it (prune leaves it); `rvtune cache verify` removes stale ones
            other_bytes += _tree_size(found.path)
            other_files += 1
        else:
            other_bytes += st.st_size
            other_files += 1
    return Usage(entries, other_bytes, other_files)


def _remove(entry: Path) -> bool:
    """Remove one entry unless a build of its key holds the key's lock now."""
    if entry.is_file():
        entry.unlink(missing_ok=True)
        return True
    lock = key_lock(entry, entry.name)
    if not try_lock(lock):
        return False
    try:
        remove_entry(entry)
    finally:
        lock.release()
    return True


def prune(cap: int, keep_since: float, root: Path | None = None) -> Pruned:
    """Remove the least recently used entries until the cache holds at most ``cap`` bytes; entries used at or
    after ``keep_since`` stay whatever the cap."""
    found = usage(root)
    result = Pruned(before=found.total, after=found.total)
    for entry in sorted(found.entries, key=lambda e: e.used):
        if result.after <= cap:
            break
        if entry.used >= keep_since or not _remove(entry.path):
            result.kept_busy += 1
            continue
        result.removed += 1
        result.freed += entry.size
        result.after -= entry.size
    return result


def prune_recent_safe(cap: int, root: Path | None = None) -> Pruned:
    """`rvtune cache prune`: as ``prune``, keeping what was used in the last RECENT_S seconds."""
    return prune(cap, time.time() - RECENT_S, root)
