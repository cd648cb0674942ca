"""Fixtures of the CPU driver tests: the driver active for one module (a private Triton cache, so every
kernel really compiles), and a log of what Triton's JIT compiled (its own post-compile hook)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from triton import knobs

import pytest_rvtune.cpu_driver as cpu_driver
from pytest_rvtune.cpu_driver import loader

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # rvv_style_matmul.py is imported as a plain script module, as its users do
    sys.path.insert(0, _HERE)


@pytest.fixture(scope="module")
def active_driver(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The driver active for the module, in the mode its ``DRIVER_MODE`` names (default: host)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
        mp.setenv("RVTUNE_CACHE_DIR", str(tmp_path_factory.mktemp("rvtune-cache")))
        mp.delenv(cpu_driver.ENV_VAR, raising=False)
        cpu_driver.activate(getattr(request.module, "DRIVER_MODE", cpu_driver.HOST_MODE))
        try:
            yield
        finally:
            cpu_driver.deactivate()


@dataclass
class CompileLog:
    """Every compilation Triton's JIT ran (``jit_post_compile_hook``), and the binaries clang built."""

    compiles: list[dict[str, Any]] = field(default_factory=list)
    builds_at_start: int = 0

    @property
    def count(self) -> int:
        return len(self.compiles)

    @property
    def binaries_built(self) -> int:
        return loader.binaries_built() - self.builds_at_start

    def reset(self) -> None:
        self.compiles.clear()
        self.builds_at_start = loader.binaries_built()


@pytest.fixture
def compile_log(active_driver: None) -> Iterator[CompileLog]:
    log = CompileLog(builds_at_start=loader.binaries_built())

    def hook(*, compile: dict[str, Any], **_: Any) -> None:
        log.compiles.append(compile)

    previous = knobs.runtime.jit_post_compile_hook
    knobs.runtime.jit_post_compile_hook = hook
    try:
        yield log
    finally:
        knobs.runtime.jit_post_compile_hook = previous
