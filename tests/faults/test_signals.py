"""SIGTERM / SIGHUP to a running session (issue 28, weak cases): before, the xdist controller died on the spot,
its workers (reparented to PID 1) kept starting QEMU runs for ~20 s, no summary was printed, and the interrupted
runs' /tmp/rvtune-qemu-* directories stayed. Now the signal stops the session as Ctrl-C does: the workers and their
QEMU processes end (checked by PID), the summary of what finished is printed, and no temporary directory is left.

Real parts: a pytest session in a subprocess (with and without xdist), a kernel that finishes and one whose QEMU
run never ends, the real QEMU; the processes are found in /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import read_results, subprocess_env

from pytest_rvtune.stop_signals import child_pids


def _qemu_under(tmp: Path) -> list[int]:
    """QEMU processes running in a directory under ``tmp`` (the target's run directories)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if "qemu-riscv64" in (proc / "cmdline").read_text() and \
                        Path(os.readlink(proc / "cwd")).is_relative_to(tmp):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _session_in_qemu(project: pytest.Pytester, add_kernel: Callable[..., Path], cache: Path,
                     workers: str, sigint_ignored: bool = False) -> tuple[subprocess.Popen[str], Path]:
    """A pytest session in a subprocess, once one item passed and a hanging item's QEMU runs; ``sigint_ignored``:
    started as from a background shell job (`pytest ... &`), SIGINT ignored in it and its children."""
    add_kernel("fsig_done", configs=(16,))
    add_kernel("fsig_hang", "hang", configs=(16, 32))
    tmp = project.path / "tmp"
    tmp.mkdir()
    env = subprocess_env(cache) | {"TMPDIR": str(tmp), "PYTHONPATH": str(Path(__file__).parents[2])}
    results = project.path / "run.jsonl"
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--rvtune-case", "small", "--rvtune-timeout", "300", "-n", workers,
         "-p", "no:cacheprovider", "--benchmark-disable", f"--rvtune-results={results}", "kernels"],
        cwd=project.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # until one item finished and a hanging run is in QEMU
        done = results.is_file() and any(r["outcome"] == "passed" for r in read_results(results))
        if done and _qemu_under(tmp):
            return session, tmp
        if session.poll() is not None:
            pytest.fail(session.communicate()[0][-3000:])
        time.sleep(0.3)
    session.kill()
    pytest.fail("no QEMU run of the hanging kernel started")


@pytest.mark.parametrize(("sig", "workers"), [pytest.param(signal.SIGTERM, "2", id="SIGTERM-xdist"),
                                              pytest.param(signal.SIGHUP, "0", id="SIGHUP-one-process")])
def test_a_stop_signal_ends_workers_and_qemu_prints_the_summary_and_leaves_no_temp_dir(
        project: pytest.Pytester, add_kernel: Callable[..., Path], rvtune_cache_dir: Path,
        sig: signal.Signals, workers: str) -> None:
    session, tmp = _session_in_qemu(project, add_kernel, rvtune_cache_dir, workers)
    try:
        qemu = _qemu_under(tmp)
        xdist_workers = child_pids(session.pid) if workers != "0" else []
        session.send_signal(sig)
        out, _ = session.communicate(timeout=60)
    finally:
        if session.poll() is None:
            session.kill()
    assert session.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert f"rvtune: {sig.name} received: stopping" in out, out[-3000:]
    assert "rvtune: 1 passed, 0 wrong, 0 build-failed, 0 crashed, 0 timeout" in out, out[-3000:]  # the summary
    time.sleep(0.5)
    assert [pid for pid in [*qemu, *xdist_workers] if _alive(pid)] == []
    assert _qemu_under(tmp) == []
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith("rvtune-")) == []


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "background-job"])
def test_workers_of_a_controller_killed_with_sigkill_stop_at_once_and_clean_up(
        project: pytest.Pytester, add_kernel: Callable[..., Path], rvtune_cache_dir: Path,
        sigint_ignored: bool) -> None:
    """kill -9 passes nothing on (a hostile case beyond the issue's): execnet interrupts a worker whose controller
    is gone, and that interrupt runs the same clean-up as SIGTERM's (its QEMU group killed, its run directory
    removed) within seconds; also in a session started as a background job, where SIGINT comes in ignored."""
    session, tmp = _session_in_qemu(project, add_kernel, rvtune_cache_dir, "2", sigint_ignored)
    xdist_workers = child_pids(session.pid)
    session.kill()
    session.communicate(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (any(_alive(p) for p in xdist_workers) or _qemu_under(tmp)):
        time.sleep(0.2)
    assert [pid for pid in xdist_workers if _alive(pid)] == [] and _qemu_under(tmp) == []
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith("rvtune-")) == []
