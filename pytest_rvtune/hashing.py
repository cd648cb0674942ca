"""Content hashes of files: ELFs and golden data are identified by their sha256 everywhere."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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


def argv_by_content(argv: Sequence[Any]) -> list[str]:
    """A run's argv for a key: ``Path`` entries by their content (the same data at another path is the same run)."""
    return [f"file:{sha256_file(a)}" if isinstance(a, Path) else str(a) for a in argv]


def files_by_content(files: Mapping[str, Path] | None) -> dict[str, str]:
    """The files an external harness opens (relative path -> file), by their content."""
    return {rel: sha256_file(Path(p)) for rel, p in sorted((files or {}).items())}
