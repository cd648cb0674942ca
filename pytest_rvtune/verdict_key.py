"""What decides an item's verdict, as one key: a result is reused (``--rvtune-resume``, the count cache) only
when everything in it is the same.

An item's verdict follows from the ELF (the kernel, the harness, the toolchain that built them: its sha256), the
golden data (its sha256), the harness's whole argv (run options, ``--no-check``, the tolerance ``--atol/--rtol``,
the scalars and grid; files by content), the kernel symbol counted, and for a user's own harness the files it
opens and how its output is read. The target's own part is the caller's (the count cache adds QEMU's fingerprint,
resume the target's identity); the timeout is no part of the key: a stored run is reused only when it took less
than the timeout now in force (its ``wall_s``), so a changed timeout that the run fits in keeps the result.
Nothing here knows pytest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_rvtune.compiler.cache import cache_key
from pytest_rvtune.hashing import argv_by_content, files_by_content

#: Bump when what the key covers changes: records of an older key are then never reused.
KEY_VERSION = 1
#: The record field that holds it.
RECORD_FIELD = "verdict_key"


def verdict_key(*, elf_sha256: str, golden_sha256: str, argv: Sequence[Any], kernel_symbol: str | None,
                files: Mapping[str, Path] | None = None, output_format: str | None = None) -> str:
    """The key of one run as the item makes it: ``argv`` is everything the ELF gets (run options first), with
    ``Path`` entries for the files it reads (hashed by content: the same data at another path is the same run)."""
    args = argv_by_content(argv)
    laid_out = files_by_content(files)
    return cache_key(kind="verdict", version=KEY_VERSION, elf=elf_sha256, data=golden_sha256, argv=args,
                     symbol=kernel_symbol or "", files=laid_out, output_format=output_format or "")


def fits_timeout(wall_s: Any, timeout: float) -> bool:
    """A stored run that took ``wall_s`` seconds would not have been killed at ``timeout`` (unknown: it might)."""
    return isinstance(wall_s, (int, float)) and 0 <= wall_s < timeout
