"""The results file: one JSON object per finished item, appended the moment the item ends.

A killed run therefore loses nothing that had finished. Under pytest-xdist only the controller appends (workers, on
this host or others, send each record with the item's report); two sessions may still append to one file
(`--rvtune-results`), so each append takes a file lock and writes one whole line. A line is whole or absent: a
write cut short (a full disk) is cut back off, and a fragment an earlier session left (killed mid-write) is ended
with a newline before the next record, so the fragment never swallows it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from pytest_rvtune import paths

RecordDict = dict[str, Any]

#: How long an append waits for another process's lock before calling the file unusable (a stuck worker).
LOCK_TIMEOUT_S = 300.0


class ResultsWriteError(OSError):
    """A record could not be appended; the message names the results file and the cause."""

    def __init__(self, code: int, path: Path, cause: str) -> None:
        super().__init__(code, f"cannot write results to {path}: {cause}")
        self.cause = cause  # e.g. "No space left on device"

    def __str__(self) -> str:
        return str(self.strerror)  # the message alone, without OSError's "[Errno 28]" in front


def new_run_id() -> str:
    """A sortable id for one pytest session (shared by its xdist workers). The random part keeps two sessions
    of one process within one second apart (pytest.main twice, pytester): rounds.py tells sessions by it."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}-{secrets.token_hex(3)}"


def unwritable_reason(path: Path) -> str | None:
    """Why ``path`` (a results file, created with its directories on first append) cannot be written, or None.

    Asks without creating anything, so a session that records nothing leaves nothing behind: the file if it
    exists, and the nearest existing directory above it (the lock file is made there). ``os.access`` also sees
    a read-only file system, which even root cannot write."""
    if path.is_dir():
        return f"{path} is a directory"
    directory = path.parent
    while not directory.exists():
        directory = directory.parent
    if not directory.is_dir():
        return f"{directory} is not a directory"
    for target, mode in ((path, os.W_OK), (directory, os.W_OK | os.X_OK)):
        if target.exists() and not os.access(target, mode):
            cause = "read-only file system" if _on_read_only_fs(target) else "permission denied"
            return f"{target} is not writable ({cause})"
    return None


def _on_read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


class ResultsWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S)

    def append(self, record: RecordDict) -> None:
        """Append one record as one whole line, durably; ResultsWriteError naming the file and cause if not."""
        line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.parent.parent.name == paths.STATE_DIRNAME:  # .rvtune/results/: .rvtune/ ignores itself
                paths.mark_state_dir(self.path.parent.parent)
            with self._lock:
                self._append_locked(line)
        except Timeout:
            raise ResultsWriteError(errno.ETIMEDOUT, self.path, f"its lock {self._lock.lock_file} stayed taken "
                                    f"for {LOCK_TIMEOUT_S:g} s") from None
        except OSError as exc:
            cause = exc.strerror or str(exc)
            where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(self.path) else ""
            raise ResultsWriteError(exc.errno or errno.EIO, self.path, f"{cause}{where}") from None

    def _append_locked(self, line: bytes) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # end an earlier writer's torn line: it must not swallow this record
            try:
                written = 0
                while written < len(line):
                    written += os.write(fd, line[written:])
                os.fsync(fd)
            except OSError:
                # A full disk cut the line short: cut it back off, so the file keeps only whole lines.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
