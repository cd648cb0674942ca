"""A content-addressed on-disk build cache, safe under concurrent pytest-xdist workers.

One entry is a directory named by a key (a hash of everything that changes its contents). An entry is built
in a private temporary directory beside it and published with one atomic ``rename``, so readers never see a
half-written entry and a killed build leaves only a stray temp dir. A per-key file lock makes concurrent
workers that need the same entry wait for the first one instead of all doing the same compiler work.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock


def cache_key(**parts: Any) -> str:
    """A stable hash of named parts (JSON with sorted keys; non-JSON values by ``str``)."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class BuildCache:
    """Entries under ``root/<kind>/<key[:2]>/<key>``; locks under ``root/locks``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def entry(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def get_or_build(self, kind: str, key: str, build: Callable[[Path], None]) -> tuple[Path, bool]:
        """The entry directory for ``key`` and whether it was already there (a hit).

        On a miss ``build(tmp_dir)`` fills a fresh directory, which then becomes the entry. If ``build``
        raises, nothing is published and the exception propagates.
        """
        final = self.entry(kind, key)
        if final.is_dir():
            return final, True
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        with FileLock(str(locks / f"{kind}-{key}.lock")):
            if final.is_dir():  # another worker built it while we waited
                return final, True
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key[:16]}.tmp-", dir=final.parent))
            try:
                build(tmp)
                os.rename(tmp, final)
            except BaseException as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                if isinstance(exc, OSError) and exc.filename is None:  # write() errors name no file: say where
                    raise OSError(exc.errno, f"{exc.strerror or exc} (writing build cache entry {final}; make room "
                                             "or set RVTUNE_CACHE_DIR to another disk)") from exc
                raise
        return final, False
