"""The package's structure: no import circle and no private name used across modules (scripts/check_layout.py),
and every module imports on its own, first in a fresh interpreter (so "import in any order" holds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_rvtune"
CHECK = ROOT / "scripts" / "check_layout.py"

# One interpreter imports the heavy libraries most modules share (torch, numpy...), then forks once per module:
# each child starts with none of pytest_rvtune imported, imports one module first, and reports. Forking keeps
# the whole check short where one interpreter per module would take minutes. Not triton: importing it loads its
# backends by entry point, and ours is pytest_rvtune.compiler, which would then be imported before the module.
FORK_PER_MODULE = r"""
import importlib, os, sys, traceback
for heavy in ("numpy", "torch", "scipy", "matplotlib", "pytest", "asyncssh", "filelock", "tomlkit"):
    try:
        importlib.import_module(heavy)
    except Exception:
        pass
assert not [m for m in sys.modules if m == "pytest_rvtune" or m.startswith("pytest_rvtune.")]
failed = 0
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            sys.stderr.write(f"--- import {name} (first, in a fresh process) failed:\n{traceback.format_exc()}")
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    failed += status != 0
sys.exit(1 if failed else 0)
"""


def package_modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue  # `python -m` entry scripts: importing one runs the command
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


def run_check(package_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), str(package_dir)], capture_output=True, text=True,
                          timeout=120)


def test_check_layout_finds_circles_and_private_names(tmp_path: Path) -> None:
    """The checker itself: a circle through a function-local import and a private name imported across
    modules are both reported (exit 1), a circle through a TYPE_CHECKING import too (a type in the wrong
    module)."""
    pkg = tmp_path / "pytest_rvtune"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pytest_rvtune.sub.b import helper\n")
    (pkg / "sub" / "b.py").write_text("def helper():\n    from pytest_rvtune import a\n    return a\n")
    (pkg / "c.py").write_text("from pytest_rvtune.sub.d import _hidden\n")
    (pkg / "sub" / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from pytest_rvtune import c\n_hidden = 1\n")
    result = run_check(pkg)
    assert result.returncode == 1, result.stdout
    assert "import circle: pytest_rvtune.a -> pytest_rvtune.sub.b -> pytest_rvtune.a" in result.stdout
    assert "imports private name _hidden from pytest_rvtune.sub.d" in result.stdout
    assert "import circle: pytest_rvtune.c -> pytest_rvtune.sub.d -> pytest_rvtune.c" in result.stdout
    assert "2 import circle(s), 1 private name use(s)" in result.stdout  # c <-> d under TYPE_CHECKING counts

    (pkg / "sub" / "b.py").write_text("def helper():\n    return 1\n")
    (pkg / "c.py").write_text("from pytest_rvtune.sub import d\nprint(d._hidden)\n")
    (pkg / "sub" / "d.py").write_text("_hidden = 1\n")
    result = run_check(pkg)
    assert result.returncode == 1 and "uses private name d._hidden" in result.stdout
    assert "0 import circle(s)" in result.stdout


def test_package_has_no_import_circle_or_private_name_use() -> None:
    result = run_check(PACKAGE)
    assert result.returncode == 0, result.stdout


def test_every_module_imports_first_in_a_fresh_process() -> None:
    modules = package_modules()
    assert len(modules) > 50 and "pytest_rvtune.plugin" in modules
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-c", FORK_PER_MODULE, *modules], capture_output=True, text=True,
                            timeout=600, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-20000:]
