"""A session's records carry the project's git commit, its dirty flag and the kernel file's sha256; a later
session names the earlier run `latest` (never itself). The real plugin, compiler, clang and QEMU; real git."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import read_results

from pytest_rvtune.cli import main

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]


def test_records_carry_commit_and_kernel_hash_and_latest_names_the_last_run(
        project: pytest.Pytester, add_kernel: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    kernel = add_kernel("prov_axpy", configs=(16,))
    subprocess.run([*GIT, "init", "-q"], cwd=project.path, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=project.path, check=True)
    subprocess.run([*GIT, "commit", "-qm", "kernel"], cwd=project.path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project.path, capture_output=True, text=True,
                          check=True).stdout.strip()
    first = project.runpytest("--rvtune-case", "small", "--benchmark-disable")
    first.assert_outcomes(passed=1)
    (run,) = (project.path / ".rvtune" / "results").glob("*.jsonl")
    (record,) = read_results(run)
    assert record["git_commit"] == head and record["git_dirty"] is False  # .rvtune/ is not a change
    assert record["kernel_sha256"] == hashlib.sha256(kernel.read_bytes()).hexdigest()

    again = project.runpytest("--rvtune-case", "small", "--benchmark-disable", "--rvtune-resume", "latest")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*1 resumed*"])  # the first run's verdict, not this session's empty file
    assert main(["runs", "--dir", str(run.parent)]) == 0
    out = capsys.readouterr().out
    assert "latest~1" in out and f"{head[:10]} " in out and "1 passed" in out
