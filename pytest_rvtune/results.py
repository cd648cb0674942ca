"""The results file: one JSON object per finished item, appended the moment the item ends.

A killed run therefore loses nothing that had finished. Several xdist workers append to the same file, so each
append takes a file lock and writes one whole line.
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

Record = dict[str, Any]


def new_run_id() -> str:
    """A sortable id for one pytest session (shared by its xdist workers). The random part keeps two sessions
    of one process within one second apart (pytest.main twice, pytester): rounds.py tells sessions by it."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}-{secrets.token_hex(3)}"


class ResultsWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(path) + ".lock")

    def append(self, record: Record) -> None:
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
