"""Content hashes of files: ELFs and golden data are identified by their sha256 everywhere."""

from __future__ import annotations

import hashlib
from pathlib import Path

#: (path, size, mtime_ns) -> sha256: one golden file is shared by every config of a case; hash it once.
_digests: dict[tuple[str, int, int], str] = {}


def sha256_file(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _digests:
        with path.open("rb") as fh:
            _digests[key] = hashlib.file_digest(fh, "sha256").hexdigest()
    return _digests[key]
