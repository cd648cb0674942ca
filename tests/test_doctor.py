"""`rvtune doctor` through the real console script: all green here, a missing clang is named with its Debian package,
a missing or outdated QEMU plugin with `rvtune setup`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

RVTUNE = Path(sys.executable).parent / "rvtune"


def doctor(rootdir: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(RVTUNE), "doctor", "--rootdir", str(rootdir)], capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, "PATH": path, **env})


def test_doctor_passes_on_this_machine(tmp_path: Path) -> None:
    proc = doctor(tmp_path, os.environ["PATH"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for tool in ("clang-19", "ld.lld-19", "llvm-objdump-19", "qemu-riscv64", "sshd", "perf", "riscv64 sysroot",
                 "triton", "torch", "pytest-benchmark", "asyncssh", "QEMU icount plugin"):
        assert tool in out
    assert "QEMU rv64gcv VLEN 256" in out and "right answer" in out
    assert "vector_insns=" in out and "target qemu" in out and "target host" in out
    assert "MISSING" not in out and "FAILED" not in out


def test_doctor_names_a_missing_clang_and_the_fix(tmp_path: Path) -> None:
    # A PATH with every tool of this machine except clang: links to each executable, clang* left out.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = bin_dir / entry.name
            if not entry.name.startswith("clang") and not link.exists():
                link.symlink_to(entry.path)
    proc = doctor(tmp_path, str(bin_dir))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    clang = next(line for line in lines if line.startswith("clang-19"))
    assert "MISSING" in clang and "`apt-get install clang-19`" in clang
    assert "qemu-riscv64" in proc.stdout and "FAILED" in proc.stdout  # the probes could not be built
    assert "clang-19: run `apt-get install clang-19`" in lines[-1]
    assert "install the missing tools above" in lines[-1]  # the failed probes point at the tool, not at setup


def test_an_unreachable_board_is_fixed_in_its_config_entry_not_by_setup(tmp_path: Path) -> None:
    """A board that does not answer is not a missing tool: the headline sends the user to its rvtune.toml entry."""
    import socket
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "rvtune.toml").write_text(f'[targets.laptop]\nhost = "127.0.0.1"\nport = {port}\nconnect_timeout = 2\n')
    proc = doctor(tmp_path, os.environ["PATH"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.splitlines()[-1]
    assert last.startswith("rvtune doctor: 1 problem(s). Fix: target laptop: check ")
    assert f"{tmp_path / 'rvtune.toml'} [targets.laptop] (host, port, user, key, known_hosts)" in last
    assert "rvtune setup" not in last and "apt-get" not in last


def test_a_missing_or_outdated_plugin_sends_the_user_to_rvtune_setup(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    proc = doctor(tmp_path, os.environ["PATH"], RVTUNE_TOOLS_DIR=str(tools))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    plugin = next(line for line in proc.stdout.splitlines() if line.startswith("QEMU icount plugin "))
    assert "MISSING" in plugin and "missing: run `rvtune setup`" in plugin and str(tools) in plugin
    last = proc.stdout.splitlines()[-1]
    assert "QEMU icount plugin, QEMU icount plugin counts: run `rvtune setup`" in last
    # built from another icount.c (its stamp disagrees): out of date, the same fix
    from pytest_rvtune import paths
    (tools / "include").mkdir(parents=True)
    shutil.copy(paths.qemu_plugin_header(), tools / "include")
    shutil.copy(paths.icount_plugin(), tools / "libicount.so")
    (tools / "libicount.so.stamp").write_text("0" * 64 + "\n")
    proc = doctor(tmp_path, os.environ["PATH"], RVTUNE_TOOLS_DIR=str(tools))
    plugin = next(line for line in proc.stdout.splitlines() if line.startswith("QEMU icount plugin "))
    assert "out of date" in plugin and "run `rvtune setup`" in plugin
