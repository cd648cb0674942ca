"""`rvtune setup` through the real console script: builds the packaged icount.c into an empty tools directory
with real gcc, the plugin counts under real QEMU, a second run does nothing, a plugin built from other inputs is
rebuilt, and bad input is named. Fetching qemu-plugin.h with apt-get is exercised by tests/test_wheel.py (and by
scripts/setup.sh on a fresh machine); here the header this machine's setup fetched is given with
--qemu-plugin-header."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rvtune import paths
from pytest_rvtune.cli.doctor import PROBE_SYMBOL, ProbeBuilder
from pytest_rvtune.targets.local import QemuTarget
from pytest_rvtune.toolchain import RISCV_ISA

RVTUNE = Path(sys.executable).parent / "rvtune"


@pytest.fixture(scope="module")
def header() -> Path:
    path = paths.qemu_plugin_header()
    assert path.is_file(), f"{path} missing: run `make setup` (rvtune setup fetches it)"
    return path


def rvtune_setup(tools: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(RVTUNE), "setup", *args], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "RVTUNE_TOOLS_DIR": str(tools)}, stdin=subprocess.DEVNULL)


def test_setup_builds_a_plugin_that_counts_then_has_nothing_to_do(tmp_path: Path, header: Path) -> None:
    tools = tmp_path / "tools"
    check = rvtune_setup(tools, "--check", "--qemu-plugin-header", str(header))
    assert check.returncode == 1 and f"would build {tools / 'libicount.so'} (missing)" in check.stdout
    assert not tools.exists()  # --check makes nothing

    made = rvtune_setup(tools, "--qemu-plugin-header", str(header))
    assert made.returncode == 0, made.stdout + made.stderr
    plugin = tools / "libicount.so"
    assert plugin.is_file() and (tools / "include" / "qemu-plugin.h").read_bytes() == header.read_bytes()

    elf = ProbeBuilder(tmp_path).elf(RISCV_ISA)
    assert isinstance(elf, Path), elf
    counted = QemuTarget(plugin=plugin).run(elf, [], 120, kernel_symbol=PROBE_SYMBOL)
    assert counted.all_checks_ok and counted.counters["vector_insns"] > 0 and counted.counters["kernel_insns"] > 0

    built_at = plugin.stat().st_mtime_ns
    again = rvtune_setup(tools)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr
    assert plugin.stat().st_mtime_ns == built_at
    assert rvtune_setup(tools, "--check").returncode == 0


def test_a_plugin_built_from_other_inputs_is_rebuilt(tmp_path: Path, header: Path) -> None:
    tools = tmp_path / "tools"
    assert rvtune_setup(tools, "--qemu-plugin-header", str(header)).returncode == 0
    stamp = tools / "libicount.so.stamp"
    today = stamp.read_text()
    stamp.write_text("0" * 64 + "\n")  # as if built from another icount.c (a new release, an edit)
    check = rvtune_setup(tools, "--check")
    assert check.returncode == 1
    assert "would build" in check.stdout and "icount.c, qemu-plugin.h or the flags changed" in check.stdout
    rebuilt = rvtune_setup(tools)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert stamp.read_text() == today


def test_a_header_that_does_not_compile_is_an_error_and_keeps_the_old_plugin(tmp_path: Path, header: Path) -> None:
    tools = tmp_path / "tools"
    assert rvtune_setup(tools, "--qemu-plugin-header", str(header)).returncode == 0
    plugin_bytes = (tools / "libicount.so").read_bytes()
    broken = tmp_path / "qemu-plugin.h"
    broken.write_text("#error this is not QEMU's header\n")
    proc = rvtune_setup(tools, "--qemu-plugin-header", str(broken))
    assert proc.returncode == 2
    assert "building the QEMU plugin failed" in proc.stderr and "this is not QEMU's header" in proc.stderr
    assert (tools / "libicount.so").read_bytes() == plugin_bytes
    assert not [p for p in tools.iterdir() if p.name.endswith(".tmp")]


def test_a_missing_header_file_is_named(tmp_path: Path) -> None:
    proc = rvtune_setup(tmp_path / "tools", "--qemu-plugin-header", str(tmp_path / "nope.h"))
    assert proc.returncode == 2 and f"--qemu-plugin-header {tmp_path / 'nope.h'}: no such file" in proc.stderr
