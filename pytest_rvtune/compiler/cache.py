"""A content-addressed on-disk build cache, safe under concurrent pytest-xdist workers, that never serves a damaged
entry.

One entry is a directory named by a key (a hash of everything that changes its contents). An entry is built
in a private temporary directory beside it and published with one atomic ``rename``, so readers never see a
half-written entry and a killed build leaves only a stray temp dir (removed by the next build of that key, or by
``rvtune cache verify``). A per-key file lock makes concurrent workers that need the same entry wait for the first
one instead of all doing the same compiler work.

Every entry holds a manifest (MANIFEST: each file's size and sha256), written into the temporary directory before
the rename, so it is published with the entry. An entry is checked against it at its first use in a process (a
truncated or zeroed ELF would otherwise run, and be reported as the kernel crashing, on every run); a damaged one
is removed, built again and reported once (repairs.py). An entry without a manifest (an older pytest-rvtune made it)
is built again without a report.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from pytest_rvtune import repairs
from pytest_rvtune.hashing import file_sha256

#: The file in every entry listing its other files: {"version": 1, "files": {relative path: [size, sha256]}}.
MANIFEST = ".rvtune-entry.json"
MANIFEST_VERSION = 1
#: What a temporary directory's name holds between the key and its random tail (also `.<key>.tmp-damaged-...`).
TMP_MARK = ".tmp-"

#: Entries found intact in this process (their path): checked once per process, not at every use.
_verified: set[str] = set()


def forget_checks() -> None:
    """Check every entry again at its next use (a new session in the same process: pytester, a notebook)."""
    _verified.clear()


def cache_key(**parts: Any) -> str:
    """A stable hash of named parts (JSON with sorted keys; non-JSON values by ``str``)."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _files(entry: Path) -> Iterator[Path]:
    for path in sorted(entry.rglob("*")):
        if path.is_file() and path.name != MANIFEST:
            yield path


def write_manifest(entry: Path, key: str) -> None:
    """List every file of ``entry`` (a directory not yet published as ``key``) with its size and sha256."""
    files = {p.relative_to(entry).as_posix(): [p.stat().st_size, file_sha256(p)] for p in _files(entry)}
    (entry / MANIFEST).write_text(json.dumps({"version": MANIFEST_VERSION, "key": key, "files": files},
                                             sort_keys=True))


def entry_problem(entry: Path) -> str | None:
    """Why ``entry`` cannot be used as it is (None: intact). "no manifest" marks an entry of an older version."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        listed = manifest["files"]
        if manifest.get("version") != MANIFEST_VERSION or not isinstance(listed, dict):
            raise ValueError("unknown manifest version")
    except FileNotFoundError:
        return "no manifest"
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return f"its manifest {MANIFEST} is unreadable ({type(exc).__name__}: {exc})"
    made_as = manifest.get("key", entry.name)  # (manifests of the first version name no key)
    if made_as != entry.name:  # whole and intact, but of other inputs: copied or renamed within the cache
        return f"it holds the entry made for key {str(made_as)[:16]}..., not for its own name"
    present = {p.relative_to(entry).as_posix(): p for p in _files(entry)}
    for name, size_sha in listed.items():
        path = present.pop(name, None)
        try:
            size, sha = size_sha
        except (TypeError, ValueError):
            return f"its manifest {MANIFEST} is unreadable (entry {name!r})"
        if path is None:
            return f"{name} is missing"
        actual = path.stat().st_size
        if actual != size:
            return f"{name} has {actual} bytes, {size} when it was built"
        if file_sha256(path) != sha:
            return f"{name} has changed since it was built (sha256 differs)"
    if present:
        return f"{', '.join(sorted(present))} was added after it was built"
    return None


def remove_entry(entry: Path) -> None:
    """Take ``entry`` out of the cache at once (one rename), then delete it."""
    try:
        doomed = Path(tempfile.mkdtemp(prefix=f".{entry.name}{TMP_MARK}damaged-", dir=entry.parent))
        os.rename(entry, doomed / entry.name)
    except OSError:
        shutil.rmtree(entry, ignore_errors=True)
        return
    shutil.rmtree(doomed, ignore_errors=True)


def remove_stale_temps(parent: Path, key: str) -> None:
    """Temporary directories of ``key`` left by a killed build (the caller holds the key's lock, so none is live)."""
    for stale in parent.glob(f".{key}{TMP_MARK}*"):
        shutil.rmtree(stale, ignore_errors=True)


#: Below this much free space on the cache's disk, a failed build is blamed on the disk (a static rv64 ELF is
#: about 1 MB; clang's objects and PCH a few MB).
LOW_SPACE_BYTES = 16 << 20


def full_disk_error(final: Path, exc: Exception) -> OSError | None:
    """An ENOSPC error naming the entry when ``exc`` (a build's failure) happened on a full disk: lld writing its
    output into a full tmpfs dies of SIGBUS ("PLEASE submit a bug report"), with no word of space."""
    try:
        free = shutil.disk_usage(final.parent).free
    except OSError:
        return None
    if free >= LOW_SPACE_BYTES:
        return None
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return OSError(errno.ENOSPC, f"No space left on device: {free // 1024} KiB free on the disk of build cache "
                                 f"entry {final}, and the build failed there ({first} ...): a full disk makes clang "
                                 "and lld fail or crash; make room or set RVTUNE_CACHE_DIR to another disk")


class BuildCache:
    """Entries under ``root/<kind>/<key[:2]>/<key>``; locks under ``root/locks``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def entry(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def lock(self, kind: str, key: str) -> FileLock:
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        return FileLock(str(locks / f"{kind}-{key}.lock"))

    def _usable(self, final: Path) -> tuple[bool, str | None]:
        """(usable, why not) of an existing entry, checked once per process."""
        if str(final) in _verified:
            return True, None
        problem = entry_problem(final)
        if problem is None:
            _verified.add(str(final))
            return True, None
        return False, problem

    def get_or_build(self, kind: str, key: str, build: Callable[[Path], None]) -> tuple[Path, bool]:
        """The entry directory for ``key`` and whether it was already there, intact (a hit).

        On a miss ``build(tmp_dir)`` fills a fresh directory, which then becomes the entry. If ``build``
        raises, nothing is published and the exception propagates. A damaged entry is a miss (and reported).
        """
        final = self.entry(kind, key)
        if final.is_dir() and self._usable(final)[0]:
            mark_used(final)
            return final, True
        with self.lock(kind, key):
            if final.is_dir():  # another worker built (or repaired) it while we waited; or it is damaged
                usable, problem = self._usable(final)
                if usable:
                    mark_used(final)
                    return final, True
                remove_entry(final)
                if problem != "no manifest":  # an older version's entry is simply made again
                    repairs.note(f"cache entry {final} was damaged ({problem}): removed and rebuilt")
            elif final.is_symlink() or final.exists():  # a file (or a link) where the entry goes: rename would fail
                final.unlink()
                repairs.note(f"cache entry {final} was damaged (a file, not an entry directory): removed and rebuilt")
            final.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(final.parent, key)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}{TMP_MARK}", dir=final.parent))
            try:
                build(tmp)
                write_manifest(tmp, key)
                os.rename(tmp, final)
            except BaseException as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                if isinstance(exc, OSError) and exc.filename is None:  # write() errors name no file: say where
                    raise OSError(exc.errno, f"{exc.strerror or exc} (writing build cache entry {final}; make room "
                                             "or set RVTUNE_CACHE_DIR to another disk)") from exc
                full = full_disk_error(final, exc) if isinstance(exc, Exception) else None
                if full is not None:
                    raise full from exc
                raise
        _verified.add(str(final))
        return final, False


def mark_used(entry: Path) -> None:
    """Mark an entry (directory or record file) used now: its modification time, which nothing else changes once
    it is published, is what the cache's size cap evicts by (least recently used first: cache_limit.py)."""
    with contextlib.suppress(OSError):  # removed under us, or a read-only shared cache: it keeps its older time
        os.utime(entry)


def try_lock(lock: FileLock) -> bool:
    """Take ``lock`` if no one holds it (the caller releases it)."""
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    return True
