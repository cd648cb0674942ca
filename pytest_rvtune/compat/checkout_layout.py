"""Where a Triton_RVV-style checkout keeps its kernels, harnesses, support library, headers and data.

Their repository has ``benchmark/src/triton/``, ``benchmark/src/main/``, ``benchmark/src/support/support.cpp``,
``env_build/include/support/support.h`` and ``benchmark/auto-tuner/<kernel>/run/test_data/``; forks move them
(``src/triton/`` + ``src/main/``...). So the layout is found by what is there: the directory whose ``.py`` files
define ``*_kernel`` functions, the one holding ``*_kernel.cpp`` harnesses, a ``support.cpp``, the directory a
``#include "support/support.h"`` resolves against, and the directory under which ``<kernel>/run/`` lives (the
harnesses' working directory: their getDB() paths are relative to it). The walk never follows symbolic links to
directories (no loops) and stops at a fixed depth.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

#: Their own layout first: when it is there, it wins ties.
KNOWN_KERNELS = ("benchmark/src/triton", "src/triton")
KNOWN_RUN = ("benchmark/auto-tuner", "auto-tuner")
_MAX_DEPTH = 6
_MAX_PY_READ = 2_000_000  # bytes of a .py file read to look for kernels
_SKIP = {".git", "__pycache__", "node_modules", ".venv", "venv", "build", "sysroot", ".rvtune", "site-packages"}
_KERNEL_DEF = re.compile(r"^def\s+\w+_kernel\s*\(", re.M)


@dataclass
class Layout:
    kernels_dir: str | None = None  # relative to the root, posix
    harness_dir: str | None = None
    support_sources: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    run_dir: str | None = None
    unreadable: list[str] = field(default_factory=list)  # "path: why" of what the walk could not read

    def describe(self) -> str:
        return (f"kernels in {self.kernels_dir}/, harnesses in {self.harness_dir or '(none)'}/, support "
                f"{', '.join(self.support_sources) or '(none)'}, includes {', '.join(self.include_dirs) or '(none)'}"
                f", data under {self.run_dir or '(none)'}/")


def _walk(root: Path, unreadable: list[str]) -> list[tuple[str, list[str], list[str]]]:
    out = []

    def on_error(exc: OSError) -> None:
        unreadable.append(f"{exc.filename}: {exc.strerror}")

    for dirpath, dirnames, filenames in os.walk(root, onerror=on_error, followlinks=False):
        rel = Path(dirpath).relative_to(root)
        depth = len(rel.parts)
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.startswith(".") and depth < _MAX_DEPTH)
        out.append((rel.as_posix() if rel.parts else ".", dirnames, sorted(filenames)))
    return out


def _defines_kernels(path: Path, unreadable: list[str]) -> bool:
    try:
        if path.stat().st_size > _MAX_PY_READ:
            return False
        return bool(_KERNEL_DEF.search(path.read_text(errors="replace")))
    except OSError as exc:
        unreadable.append(f"{path}: {exc.strerror or exc}")
        return False


def _best(counts: dict[str, int], known: tuple[str, ...]) -> str | None:
    if not counts:
        return None
    return max(counts, key=lambda d: (counts[d], d in known, -len(d)))


def find_layout(root: Path) -> Layout:
    """The layout of the checkout at ``root`` (each part None / empty when nothing fits)."""
    layout = Layout()
    tree = _walk(root, layout.unreadable)
    kernel_files: dict[str, int] = {}
    harness_files: dict[str, int] = {}
    for rel, dirnames, files in tree:
        for name in files:
            path = root / rel / name
            if name.endswith(".py") and not name.startswith("_") and _defines_kernels(path, layout.unreadable):
                kernel_files[rel] = kernel_files.get(rel, 0) + 1
            elif name.endswith("_kernel.cpp"):
                harness_files[rel] = harness_files.get(rel, 0) + 1
            elif name == "support.cpp":
                layout.support_sources.append(_join(rel, name))
            elif name == "support.h" and Path(rel).name == "support":
                layout.include_dirs.append(Path(rel).parent.as_posix())
        if "run" not in dirnames and any(_is_dir(root / rel / d / "run") for d in dirnames):
            layout.run_dir = _prefer(layout.run_dir, rel)
    layout.kernels_dir = _best(kernel_files, KNOWN_KERNELS)
    layout.harness_dir = _best(harness_files, ())
    return layout


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a directory we may not look into: not a data root
        return False


def _join(rel: str, name: str) -> str:
    return name if rel == "." else f"{rel}/{name}"


def _prefer(current: str | None, candidate: str) -> str:
    """The known data root over another directory that happens to hold `<x>/run/`."""
    if current is None or (candidate in KNOWN_RUN and current not in KNOWN_RUN):
        return candidate
    return current


def looks_like_checkout(root: Path) -> str | None:
    """The kernels directory when ``root`` looks like a Triton_RVV checkout (one of the known places holds a
    module defining a ``*_kernel`` function), else None. Cheap: for a hint, not for the import."""
    for rel in KNOWN_KERNELS:
        directory = root / rel
        try:
            modules = sorted(directory.glob("*.py")) if directory.is_dir() else []
        except OSError:
            continue
        if any(_defines_kernels(m, []) for m in modules[:50]):
            return rel
    return None
