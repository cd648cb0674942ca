"""Issue 15, fault 3: a run must not outlive the process that started it.

A Python parent (as pytest would) runs a hung program on the qemu or host target from a worker thread, and
is then killed with SIGKILL, which gives it no chance to clean up. Every process of the run's session
(die_with_parent, QEMU or perf and the shell under it, the program and the child it forked) must be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain

HANG = r"""
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    pid_t child = fork();  /* a second process of the run: the group kill must take it too */
    if (child == 0) { for (;;) pause(); }
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "%d %d\n", (int)getpid(), (int)child);
    fclose(f);
    for (;;) {}  /* a hung kernel: burns a core until killed */
}
"""

# From a worker thread: PR_SET_PDEATHSIG follows the thread that forked, and this one stays blocked in the run.
PARENT = r"""
import sys, threading, time
from pathlib import Path
from pytest_rvtune.targets.local import HostTarget, QemuTarget
kind, elf, pids = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
target = QemuTarget(counters=False) if kind == "qemu" else HostTarget()
threading.Thread(target=lambda: target.run(elf, [pids], timeout=600)).start()
time.sleep(600)
"""


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat fields after the command name (state, ppid, pgrp, session, ...); None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"  # a zombie waiting for its reaper holds nothing


def _session(sid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[3]) == sid:
            out.append(int(entry.name))
    return out


@pytest.mark.parametrize("kind", ["qemu", "host"])
def test_a_killed_parent_leaves_no_run_behind(kind: str, tmp_path: Path):
    isa = RISCV_ISA if kind == "qemu" else HOST_ISA
    tc = Toolchain.for_isa(isa)
    (tmp_path / "hang.c").write_text(HANG)
    tc.compile(tmp_path / "hang.c", tmp_path / "hang.o", extra=("-O0",))
    tc.link([tmp_path / "hang.o"], tmp_path / "hang.elf")
    pids_file = tmp_path / "pids"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, kind, str(tmp_path / "hang.elf"), str(pids_file)],
                              env=os.environ)
    try:
        deadline = time.monotonic() + 60
        while not (pids_file.exists() and len(pids_file.read_text().split()) == 2):
            assert parent.poll() is None, "the parent died before the run started"
            assert time.monotonic() < deadline, "the run did not start within 60 s"
            time.sleep(0.05)
        elf_pids = [int(p) for p in pids_file.read_text().split()]
        fields = _stat(elf_pids[0])
        assert fields is not None
        run = _session(int(fields[3]))
        assert set(elf_pids) <= set(run)
        leader = _stat(int(fields[3]))
        assert leader is not None and int(leader[1]) == parent.pid  # the session is the run this parent started
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in run) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in run if _alive(p)]
    for pid in left:  # do not leave them burning the machine's cores if the test fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"left running after the parent was killed: {left}"
