"""The pytester project of the plugin and fault tests: a directory with kernels/, golden data beside it and the
session's shared build cache, and the in-process pytester runs that keep Triton and torch loaded (conftest.py of
tests/plugin and tests/faults import the fixtures from here)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import _pytest.pytester
import pytest
from plugin_helpers import kernel_source

#: Packages whose modules an in-process pytester run may import and must keep afterwards: Triton's nanobind
#: extension does not survive a second import in one process (crashes at the next GC), and re-importing
#: torch is slow. pytester offers no public switch for this, hence the subclass (test code only).
_KEEP = ("triton", "torch", "pytest_rvtune", "numpy", "scipy", "sympy", "filelock", "execnet", "xdist")


class _KeepHeavyModules(_pytest.pytester.SysModulesSnapshot):
    def __init__(self, preserve: Callable[[str], bool] | None = None) -> None:
        super().__init__(lambda name: name.startswith(_KEEP) or bool(preserve and preserve(name)))


_pytest.pytester.SysModulesSnapshot = _KeepHeavyModules  # type: ignore[misc]



@pytest.fixture(scope="session")
def rvtune_cache_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One build cache for the whole test session, shared by xdist workers (builds are file-locked)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if worker_id != "master" else base
    path = root / "rvtune-plugin-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def project(pytester: pytest.Pytester, rvtune_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester directory with kernels/ (empty), the shared cache, and golden data beside kernels/."""
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(rvtune_cache_dir))
    monkeypatch.delenv("RVTUNE_GOLDEN_DIR", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    pytester.mkdir("kernels")
    pytester.makeini("[pytest]\ntestpaths = kernels\nrvtune_kernel_dirs = kernels\n")
    return pytester


@pytest.fixture
def add_kernel(project: pytest.Pytester) -> Callable[..., Path]:
    def add(name: str, kind: str = "good", configs: tuple[int, ...] = (16, 32), source: str | None = None) -> Path:
        path = project.path / "kernels" / f"{name}.py"
        path.write_text(source if source is not None else kernel_source(name, kind, configs))
        return path

    return add
