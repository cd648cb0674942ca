"""Content hashes of files: ELFs and golden data are identified by their sha256 everywhere."""

from __future__ import annotations

import hashlib
from pathlib import Path

#: (path, size, mtime_ns) -> sha256: one golden file is shared by every config of a case; hash it once.
_digests: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """The file's sha256 read now, never from memory: what integrity checks of the cache need (a damaged file may
    keep its size and mtime)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def sha256_file(path: Path) -> str:
    """The file's sha256, remembered per (path, size, mtime): inputs hashed for keys, once per process."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _digests:
        _digests[key] = file_sha256(path)
    return _digests[key]
