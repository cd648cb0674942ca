"""Tie a local run to this process: ``with_parent_death(cmd)`` prefixes the die_with_parent exec wrapper.

pytest killed by SIGKILL (or SIGTERM, which skips our cleanup too) while a hung kernel runs used to leave QEMU
or the host ELF reparented to PID 1, burning a core. The wrapper (die_with_parent.c, whose comment says why
PR_SET_PDEATHSIG is safe with threads here) kills the run's whole process group when we die. It is built once
per toolchain into the build cache with the host compiler. A C wrapper rather than ``preexec_fn``: Python
documents preexec_fn as unsafe when the process has threads (the SSH target runs an event-loop thread), and a
prctl in the direct child alone would not reach perf's child.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.paths import cache_dir
from pytest_rvtune.toolchain import HOST_ISA, Toolchain

SOURCE = Path(__file__).resolve().parent / "die_with_parent.c"


def wrapper_path() -> Path:
    """The built wrapper in the current build cache (compiled on first use there)."""
    path = _built_in(cache_dir())
    if not path.is_file():  # the cache was cleaned under us: build it again
        _built_in.cache_clear()
        path = _built_in(cache_dir())
    return path


@functools.cache
def _built_in(root: Path) -> Path:
    tc = Toolchain.for_isa(HOST_ISA)
    text = SOURCE.read_text()
    key = cache_key(kind="die_with_parent", source=text, toolchain=tc.fingerprint())

    def build(tmp: Path) -> None:
        tc.compile(SOURCE, tmp / "die_with_parent.o")
        tc.link([tmp / "die_with_parent.o"], tmp / "die_with_parent", libs=())

    entry, _ = BuildCache(root).get_or_build("tools", key, build)
    return entry / "die_with_parent"


def with_parent_death(cmd: list[str]) -> list[str]:
    """``cmd`` (cmd[0] a path, not looked up on PATH) run so that it and its process group die with us."""
    return [str(wrapper_path()), str(os.getpid()), *cmd]
