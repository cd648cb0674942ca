"""The package as a user gets it: the wheel built from this checkout, installed into a fresh venv outside it,
serving a new project that has one kernel of its own.

No part of the checkout is on that venv's path. torch and triton (2 GB unpacked; the exact releases this suite
runs with, and torch's CPU build, which pip would replace by the CUDA one) come from this test's environment
through a .pth file naming a directory of symlinks to their packages, as a --system-site-packages venv over a base
holding them would; pip installs everything else the wheel declares, without extras, so a dependency missing from
pyproject.toml fails here and the [plots] and [boards] extras are really absent. `rvtune setup` then fetches
qemu-plugin.h and builds the QEMU plugin into the user cache directory (XDG_CACHE_HOME points into the test's
directory), and the project's pytest run executes the kernel on QEMU with instruction counts.

A few minutes (pip, apt-get source qemu; each step's time is printed with -s): marked `wheel`, deselected with
`-m "not wheel"`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel

REPO_ROOT = Path(__file__).resolve().parents[1]  # the checkout these tests belong to
#: Distributions the venv borrows from this environment instead of installing them (see the docstring).
BORROWED = ("torch", "triton")
#: What the wheel is built from: the package and the files pyproject.toml names (copied, so the checkout gets
#: no build/ or egg-info, and a file the package needs but does not declare is missing from the wheel).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "pytest_rvtune")
#: Files the installed package needs besides its Python modules.
PACKAGE_DATA = (
    "pytest_rvtune/py.typed",
    "pytest_rvtune/targets/qemu_plugin/icount.c",
    "pytest_rvtune/targets/die_with_parent.c",
    "pytest_rvtune/compiler/runtime/rvtune_rt.h",
    "pytest_rvtune/compiler/runtime/rvtune_dot.h",
    "pytest_rvtune/compiler/runtime/rvtune_dot_panels.c",
    "pytest_rvtune/harness/rvtune_harness.h",
    "pytest_rvtune/harness/formats/triton-rvv.toml",
    "pytest_rvtune/results/templates/page.html.j2",
    "pytest_rvtune/results/templates/macros.html.j2",
    "pytest_rvtune/results/templates/chart.svg.j2",
    "pytest_rvtune/results/templates/report.css",
    "pytest_rvtune/results/templates/report.js",
)

#: The new project's kernel: y = 2 x + b over n elements, written for this test (no kernel of the checkout).
KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def wheel_axpb_kernel(x_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, 2.0 * x + b, mask=mask)


def get_wheel_axpb_kernel_autotune_config():
    return [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})]


CASES = {"small": dict(n=100), "emu": dict(n=1000)}
TOLERANCE = dict(atol=1e-6, rtol=1e-6)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    n = case["n"]
    return {"x": torch.randn(n, generator=g), "b": torch.randn(n, generator=g), "y": torch.empty(n)}


def reference(inputs, case):
    return {"y": 2.0 * inputs["x"] + inputs["b"]}


def launch(kernel, inputs, case):
    grid = lambda META: (triton.cdiv(case["n"], META["BLOCK"]),)  # noqa: E731
    kernel[grid](inputs["x"], inputs["b"], inputs["y"], case["n"])
'''

PROJECT_PYPROJECT = '''[project]
name = "my-kernels"
version = "0.0.1"

[tool.pytest.ini_options]
rvtune_kernel_dirs = ["kernels"]
'''


@dataclass
class Installed:
    wheel: Path
    venv: Path
    project: Path
    cache_home: Path  # XDG_CACHE_HOME of the venv's commands
    env: dict[str, str]
    seconds: dict[str, float]

    def run(self, *cmd: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        exe = self.venv / "bin" / cmd[0]
        return subprocess.run([str(exe), *cmd[1:]], cwd=self.project, env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None, timeout: float = 900) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{what} failed ({' '.join(cmd)}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything that would put the checkout or our test session's settings in play."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("RVTUNE_", "PYTEST_"))}
    return env | extra


def _borrow(venv: Path, into: Path) -> None:
    """Make BORROWED importable in ``venv`` (and known to its pip) without copying them: symlinks to their
    top-level directories and dist-info in ``into``, which a .pth file in the venv's site-packages names."""
    into.mkdir()
    for name in BORROWED:
        dist = importlib.metadata.distribution(name)
        site = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in sorted(tops):
            (into / top).symlink_to(site / top)
    _site_packages(venv).joinpath("_rvtune_test_borrowed.pth").write_text(f"{into}\n")


def _site_packages(venv: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    return Path(subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                               check=True).stdout.strip())


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel")
    assert not base.resolve().is_relative_to(REPO_ROOT), "the venv must live outside the checkout"
    seconds: dict[str, float] = {}

    started = time.monotonic()
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    dist = base / "dist"
    # --no-build-isolation: the wheel is built with this environment's setuptools (the dev extra has it), so no
    # build environment is downloaded.
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
          str(src)], "building the wheel")
    (wheel,) = dist.glob("pytest_rvtune-*.whl")
    seconds["build wheel"] = time.monotonic() - started

    started = time.monotonic()
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], "creating the venv")
    _borrow(venv, base / "borrowed")
    seconds["venv"] = time.monotonic() - started
    started = time.monotonic()
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], "installing the wheel",
         env=_clean_env())
    seconds["pip install wheel + deps"] = time.monotonic() - started

    project = base / "project"
    (project / "kernels").mkdir(parents=True)
    (project / "kernels" / "wheel_axpb.py").write_text(KERNEL)
    (project / "pyproject.toml").write_text(PROJECT_PYPROJECT)
    cache_home = base / "user-cache"
    run_env = _clean_env(XDG_CACHE_HOME=str(cache_home), TRITON_CACHE_DIR=str(base / "triton-cache"),
                         PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    yield Installed(wheel, venv, project, cache_home, run_env, seconds)
    print("wheel test steps:", ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()),
          f"(load average {Path('/proc/loadavg').read_text().split()[0]})")
    shutil.rmtree(venv, ignore_errors=True)  # ~0.5 GB


def test_the_wheel_ships_the_non_python_files(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as whl:
        names = set(whl.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_text = whl.read(entry_points).decode()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata_text = whl.read(metadata).decode()
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        license_text = whl.read(license_file).decode()
    missing = [f for f in PACKAGE_DATA if f not in names]
    assert not missing, f"not in the wheel: {missing}"
    assert license_text.startswith("MIT License") and "the pytest-rvtune authors" in license_text
    assert "License-Expression: MIT" in metadata_text
    python = f"Classifier: Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}"
    assert python in metadata_text and "Classifier: Development Status :: " in metadata_text
    assert "rvtune = pytest_rvtune.plugin" in entry_text and "rvtune = pytest_rvtune.cli:main" in entry_text


def test_the_installed_package_is_the_wheel_and_says_its_version(installed: Installed) -> None:
    where = installed.run("python", "-c", "import pytest_rvtune; print(pytest_rvtune.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.venv), where.stdout
    installed_here = {p.name.lower() for p in _site_packages(installed.venv).iterdir()}
    assert "torch" not in installed_here and not any(n.startswith("nvidia") for n in installed_here), \
        "pip installed a torch of its own (a CUDA build) over the borrowed CPU one"
    assert "matplotlib" not in installed_here and "asyncssh" not in installed_here  # extras only on request
    version = installed.run("rvtune", "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"rvtune {_wheel_version(installed.wheel)}"


def test_setup_then_the_new_projects_kernel_passes_on_qemu(installed: Installed) -> None:
    started = time.monotonic()
    setup = installed.run("rvtune", "setup")
    installed.seconds["rvtune setup"] = time.monotonic() - started
    assert setup.returncode == 0, setup.stdout + setup.stderr
    tools = installed.cache_home / "pytest-rvtune" / "tools"
    assert (tools / "libicount.so").is_file() and (tools / "include" / "qemu-plugin.h").is_file()
    again = installed.run("rvtune", "setup")
    assert again.returncode == 0 and "nothing to do" in again.stdout

    started = time.monotonic()
    proc = installed.run("pytest", "--rvtune-case", "small", "-q", "-p", "no:cacheprovider")
    installed.seconds["pytest"] = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout
    (results,) = (installed.project / ".rvtune" / "results").glob("*.jsonl")  # state under the project
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert {r["config_id"] for r in records} == {"BLOCK=16", "BLOCK=64"}
    for r in records:
        assert r["outcome"] == "passed" and r["kernel"] == "wheel_axpb" and r["target"] == "qemu"
        assert r["counters"]["launch_insns"] > 0 and r["counters"]["vector_insns"] > 0  # the plugin counted
    assert any((installed.project / ".rvtune" / "cache").iterdir())


def test_report_without_the_plots_extra_names_it(installed: Installed) -> None:
    results = installed.project / ".rvtune" / "results"
    if not results.is_dir():
        installed.run("rvtune", "setup")
        installed.run("pytest", "--rvtune-case", "small", "-q", "-p", "no:cacheprovider")
    (run,) = results.glob("*.jsonl")
    report = installed.run("rvtune", "report", str(run))
    assert report.returncode == 2
    assert "pip install 'pytest-rvtune[plots]'" in report.stderr and "--no-plots" in report.stderr
    assert "wheel_axpb" in report.stdout  # the tables still came out
    assert installed.run("rvtune", "report", str(run), "--no-plots").returncode == 0


def _wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]
