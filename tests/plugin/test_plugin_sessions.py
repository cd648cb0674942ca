"""Whole sessions: xdist (spread builds, complete benchmark output, host timing runs never overlap), a run
killed mid-way (finished items are on disk), and a target that cannot connect (one clear error)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import read_results, results_file, subprocess_env


def test_xdist_matrix_qemu_and_host(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("px_par", configs=(16, 32, 64))
    result = project.runpytest("-n", "2", "-v", "--rvtune-case", "small", "--rvtune-target", "qemu",
                               "--rvtune-target", "host", "--benchmark-json", "out.json")
    result.assert_outcomes(passed=6)
    # both workers built and ran items
    workers = {line.split()[0] for line in result.outlines if line.startswith("[gw") and "PASSED" in line}
    assert workers == {"[gw0]", "[gw1]"}
    result.stdout.fnmatch_lines(["rvtune: 6 passed, 0 wrong, 0 build-failed, 0 crashed, 0 timeout; *"])

    # pytest-benchmark disables itself under xdist: the controller merged every item anyway
    doc = json.loads((project.path / "out.json").read_text())
    names = sorted(b["name"] for b in doc["benchmarks"])
    assert names == sorted(f"px_par[small-BLOCK={b}-{t}]" for b in (16, 32, 64) for t in ("qemu", "host"))
    assert set(doc["machine_info"]["rvtune_targets"]) == {"qemu", "host"}
    host_bench = next(b for b in doc["benchmarks"] if b["name"].endswith("-host]"))
    # real hardware samples for --rvtune-max-time (0.5 s): a tiny kernel gets far more than --rvtune-runs' 10
    assert host_bench["extra_info"]["timing_source"] == "real" and 10 < host_bench["stats"]["rounds"] <= 200

    # one results file for the session (both workers append to it), one whole line per item
    records = read_results(results_file(project))
    assert sorted(r["nodeid"].split("::")[1] for r in records) == names
    # real timing runs on one local target never overlap across workers (the target lock); emulated runs may
    # (test_plugin_counts.py shows they do)
    spans = sorted(r["run_span"] for r in records if r["target"] == "host")
    assert len(spans) == 3
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, spans


def _pids_running(marker: str) -> list[int]:
    """QEMU processes running ``marker`` (the ELF of a kernel only this test uses). Only QEMU's: while the item
    builds, the linker and llvm-objdump name the same ELF in their command lines, briefly."""
    pids = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
            if argv and b"qemu-riscv64" in Path(argv[0].decode()).name.encode() and \
                    any(marker.encode() in a for a in argv):
                pids.append(int(proc.name))
    return pids


def test_killed_run_keeps_finished_items(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                         rvtune_cache_dir: Path) -> None:
    add_kernel("pk_a_done", configs=(16, 32))
    add_kernel("pk_z_hangs", "hang", configs=(16,))
    results = project.path / "killed.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:randomly", "--rvtune-case", "small",
                             "--rvtune-timeout", "600", "--rvtune-results", str(results)],
                            cwd=project.path, env=subprocess_env(rvtune_cache_dir),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not _pids_running("pk_z_hangs_kernel.rv64.elf") and time.monotonic() < deadline:
            assert proc.poll() is None, "pytest ended before the hanging item started"
            time.sleep(0.2)
        assert _pids_running("pk_z_hangs_kernel.rv64.elf"), "the hanging item never started"
    finally:
        proc.send_signal(signal.SIGKILL)  # no chance to clean up or flush anything
        proc.wait()
        for pid in _pids_running("pk_z_hangs_kernel.rv64.elf"):  # the orphaned QEMU of the hanging item
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    records = read_results(results)
    assert sorted((r["config_id"], r["outcome"]) for r in records) == [("BLOCK=16", "passed"),
                                                                      ("BLOCK=32", "passed")]
    assert all(r["kernel"] == "pk_a_done" and r["samples_ns"] for r in records)


def test_unreachable_board_is_one_error(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("pe_board", configs=(16, 32, 64))
    # port 1 on this machine: nothing listens, the connection is refused at once
    project.path.joinpath("rvtune.toml").write_text('[targets.deadboard]\nhost = "127.0.0.1"\nport = 1\n')
    result = project.runpytest("--rvtune-target", "deadboard", "--rvtune-case", "small", "-rs")
    result.assert_outcomes(errors=1, skipped=2)
    result.stdout.fnmatch_lines(["*target 'deadboard': board 127.0.0.1:1: nothing listens on port 1 (connection "
                                 "refused): check that sshd runs on the board and port in *rvtune.toml*",
                                 "*target 'deadboard' unavailable (the error is reported once, above)*"])
    assert result.stdout.str().count("nothing listens on port 1") == 1
