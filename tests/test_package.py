"""The package's surface as an installed plugin: `rvtune --version`, and the optional extras. [boards] (asyncssh),
[labgrid] (labgrid) and [plots] (matplotlib) are hidden from a subprocess by ``sys.modules[name] = None``, Python's
own way of making an import fail, so the test runs the real modules in an environment that lacks them."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pytest_rvtune import __version__, cli

#: Modules the kernel suite on QEMU or the host needs, and every command but `rvtune report`'s plots.
CORE_MODULES = ("pytest_rvtune.plugin", "pytest_rvtune.session", "pytest_rvtune.collect", "pytest_rvtune.item",
                "pytest_rvtune.fixtures", "pytest_rvtune.targets.factory", "pytest_rvtune.targets.local",
                "pytest_rvtune.cli", "pytest_rvtune.cli.report", "pytest_rvtune.cli.doctor", "pytest_rvtune.cli.setup")


def without(modules: tuple[str, ...], code: str) -> subprocess.CompletedProcess[str]:
    hide = "; ".join(f"sys.modules[{m!r}] = None" for m in modules)
    return subprocess.run([sys.executable, "-c", f"import sys; {hide}\n{code}"], capture_output=True, text=True,
                          timeout=300, check=False)


def test_version_is_the_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rvtune {__version__}"
    assert __version__ == importlib.metadata.version("pytest-rvtune")


def test_the_core_imports_without_the_extras() -> None:
    proc = without(("asyncssh", "matplotlib", "labgrid"), "import importlib\n" + "\n".join(
        f"importlib.import_module({m!r})" for m in CORE_MODULES))
    assert proc.returncode == 0, proc.stderr


def test_a_board_without_asyncssh_names_the_boards_extra() -> None:
    proc = without(("asyncssh",), "import pytest_rvtune.targets.ssh")
    assert proc.returncode == 1
    assert "MissingExtraError: RISC-V boards over SSH need the Python package asyncssh, which is not installed: " \
           "pip install 'pytest-rvtune[boards]'" in proc.stderr


def test_a_labgrid_target_without_labgrid_names_the_labgrid_extra() -> None:
    proc = without(("labgrid",), "import pytest_rvtune.targets.labgrid_farm")
    assert proc.returncode == 1
    assert "board farms through a labgrid coordinator need the Python package labgrid, which is not installed: " \
           "pip install 'pytest-rvtune[labgrid]'" in proc.stderr


def test_plots_without_matplotlib_name_the_plots_extra() -> None:
    proc = without(("matplotlib",), "import pytest_rvtune.results.plots")
    assert proc.returncode == 1 and "pip install 'pytest-rvtune[plots]'" in proc.stderr


def _install_section(text: str) -> str:
    return text.split("## Install", 1)[1].split("\n## ", 1)[0]


def test_the_readme_install_block_is_what_works_today() -> None:
    """The README's install commands: torch pinned to the minor pyproject.toml requires, from PyTorch's CPU index
    (pip took 2.14 with CUDA's libraries from PyPI), and the package from a path, as it is not on PyPI yet."""
    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    (torch_req,) = [d for d in project["dependencies"] if d.startswith("torch")]
    lower = re.fullmatch(r"torch>=(\d+)\.(\d+),<(\d+)\.(\d+)", torch_req)
    assert lower, torch_req
    pin = f"torch=={lower[1]}.{lower[2]}.*"
    for doc in ("README.md", "docs/usage.md"):
        section = _install_section((root / doc).read_text())
        commands = [line.split("#")[0].strip() for line in section.splitlines() if line.startswith("pip install")]
        assert f"pip install '{pin}' --index-url https://download.pytorch.org/whl/cpu" in commands, (doc, commands)
        assert "pip install pytest-rvtune" not in commands, f"{doc}: the package is not on PyPI yet"
        assert any(c.startswith("pip install /path/to/pytest-rvtune") for c in commands), (doc, commands)


def test_license_and_classifiers_match_what_is_declared_and_tested() -> None:
    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    text = (root / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) 2026 the pytest-rvtune authors" in text
    classifiers = project["classifiers"]
    assert f"Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}" in classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert not any(c.startswith("License ::") for c in classifiers)  # PEP 639: the expression says it
