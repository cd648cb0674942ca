"""scripts/setup.sh: a second run does nothing, and its checks notice what is missing (the plugin step is
`rvtune setup --check`, whose own tests are in test_tools_setup.py).

These tests never install anything: the real script only runs once `--check` has shown it has nothing to do
(`make test` runs the setup before the tests, so that is the state here and in CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pytest_rvtune import paths

REPO_ROOT = Path(__file__).resolve().parents[1]  # the checkout these tests belong to

SETUP = REPO_ROOT / "scripts" / "setup.sh"


def setup(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SETUP), *args], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def products() -> dict[Path, int]:
    made = [REPO_ROOT / ".venv" / ".rvtune-setup-stamp", paths.icount_plugin(),
            paths.tools_dir() / "include" / "qemu-plugin.h"]
    return {p: p.stat().st_mtime_ns for p in made}


def test_second_run_does_nothing() -> None:
    check = setup("--check")
    assert check.returncode == 0, f"setup is incomplete here, run `make setup` first:\n{check.stdout}"
    assert "nothing to do" in check.stdout
    before = products()
    run = setup()
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "setup: nothing to do: everything is installed"
    assert products() == before


def test_check_reports_a_missing_plugin_and_changes_nothing(tmp_path: Path) -> None:
    check = setup("--check", env={"RVTUNE_TOOLS_DIR": str(tmp_path)})
    assert check.returncode == 1
    assert "would fetch qemu-plugin.h" in check.stdout
    assert f"would build {tmp_path}/libicount.so" in check.stdout
    assert list(tmp_path.iterdir()) == []


def test_check_rebuilds_a_plugin_built_from_another_source(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    shutil.copy(paths.qemu_plugin_header(), tmp_path / "include")
    stale = tmp_path / "libicount.so"
    shutil.copy(paths.icount_plugin(), stale)
    (tmp_path / "libicount.so.stamp").write_text("0" * 64 + "\n")  # the hash of other inputs than today's icount.c
    check = setup("--check", env={"RVTUNE_TOOLS_DIR": str(tmp_path)})
    assert check.returncode == 1
    assert f"setup: would build {stale} (icount.c, qemu-plugin.h or the flags changed)" in check.stdout.splitlines()
    assert "qemu-plugin.h (apt-get" not in check.stdout  # the kept header is reused: no download
    assert (tmp_path / "libicount.so.stamp").read_text() == "0" * 64 + "\n"


def test_unknown_option_is_refused() -> None:
    proc = setup("--bogus")
    assert proc.returncode == 2 and "usage:" in proc.stderr
