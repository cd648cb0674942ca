"""The package's surface as an installed plugin: `rvtune --version`, and the optional extras. [boards] (asyncssh)
and [plots] (matplotlib) are hidden from a subprocess by ``sys.modules[name] = None``, Python's own way of making an
import fail, so the test runs the real modules in an environment that lacks them."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

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
    proc = without(("asyncssh", "matplotlib"), "import importlib\n" + "\n".join(
        f"importlib.import_module({m!r})" for m in CORE_MODULES))
    assert proc.returncode == 0, proc.stderr


def test_a_board_without_asyncssh_names_the_boards_extra() -> None:
    proc = without(("asyncssh",), "import pytest_rvtune.targets.ssh")
    assert proc.returncode == 1
    assert "MissingExtraError: RISC-V boards over SSH need the Python package asyncssh, which is not installed: " \
           "pip install 'pytest-rvtune[boards]'" in proc.stderr


def test_plots_without_matplotlib_name_the_plots_extra() -> None:
    proc = without(("matplotlib",), "import pytest_rvtune.results.plots")
    assert proc.returncode == 1 and "pip install 'pytest-rvtune[plots]'" in proc.stderr
