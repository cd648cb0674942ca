"""The generated C and the assembly of each config, beside the HTML report, for its per-config links.

A kernel-module record names its code (``code``: the C in the compiler's cache, and the ELF, kernel symbol and
kernel object that make its .s, build.py). The page stays one self-contained file; the code goes into a folder
beside it, ``<page stem>-code/``, one file per distinct text (``<kernel>-<sha256[:12]>.c`` / ``.s``: configs whose
code is the same share a file), so the page and its folder can be copied together and opened offline. Only the
rows the page shows get code (at most max_rows per group, best first); code the cache no longer holds (cleaned,
another machine) gets no link and is counted. Nothing here knows pytest or the toolchain: the caller passes what
makes a .s (build.disassembly_of).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvtune.results.records import RunRecord
from pytest_rvtune.results.report import ranked
from pytest_rvtune.results.runs import group_by_problem, rank_metric

#: (elf, kernel symbol, kernel object) -> the .s file (build.disassembly_of)
MakeAsm = Callable[[Path, str, Path], Path]
ItemKey = tuple[str, str, str, str]


@dataclass
class CodeFiles:
    links: dict[ItemKey, dict[str, str]] = field(default_factory=dict)  # record key -> {"C"|"asm": href}
    written: list[Path] = field(default_factory=list)
    missing: int = 0  # configs whose code was named but could not be found or made


def copy_code(records: Sequence[RunRecord], folder: Path, make_asm: MakeAsm | None, max_rows: int) -> CodeFiles:
    """Copy the C and .s of the best ``max_rows`` valid records of each group into ``folder``; hrefs are relative
    to the folder's parent (where the page is)."""
    found = CodeFiles()
    made: dict[Path, str] = {}  # source file -> href (the same C serves many configs and cases)
    for group in group_by_problem(records).values():
        for record in ranked(group, rank_metric(group))[:max_rows]:
            code = record.raw.get("code") if isinstance(record.raw, dict) else None
            if not isinstance(code, dict):
                continue
            links = {}
            try:
                if code.get("c"):
                    links["C"] = _copy(Path(code["c"]), folder, record.kernel, ".c", made)
                if make_asm is not None and code.get("elf") and code.get("kernel_obj"):
                    asm = make_asm(Path(code["elf"]), str(code.get("kernel_symbol") or ""), Path(code["kernel_obj"]))
                    links["asm"] = _copy(asm, folder, record.kernel, ".s", made)
            except (OSError, RuntimeError):  # a cleaned cache, a missing objdump: no link, counted
                found.missing += 1
            if links:
                found.links[record.key] = links
    found.written = sorted({folder / Path(href).name for href in made.values()})
    return found


def _copy(source: Path, folder: Path, kernel: str, suffix: str, made: dict[Path, str]) -> str:
    if source not in made:
        data = source.read_bytes()
        name = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', kernel)}-{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        made[source] = f"{folder.name}/{name}"
    return made[source]
