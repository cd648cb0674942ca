"""Whether a directory a command writes its files under (--out) can be made and written, asked before the work."""

from __future__ import annotations

import os
from pathlib import Path


def out_dir_problem(path: Path, option: str = "--out") -> str | None:
    """Why ``path`` cannot be the output directory (it or a directory above it is a file, or it is not writable),
    or None. Checked before reading a results file of 10^5 records, not after, as mkdir would."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():  # a dangling link: mkdir would fail on it
            return f"{option} {path}: {existing} is a broken symbolic link; give a directory"
        existing = existing.parent
    if not existing.is_dir():
        what = "is" if existing == path else f"is inside {existing}, which is"
        return f"{option} {path} {what} a file, not a directory; give a directory (it is made if missing)"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{option} {path}: {existing} is not writable; give a directory you can write"
    return None
