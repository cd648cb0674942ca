"""Verdicts on real QEMU runs: pass, wrong answer, build error, crash, hang, broken module; the session goes on.

One session holds every kind of failure, so the test also shows that none of them stops the others.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import by_kernel, kernel_source, read_results, results_file


def test_every_verdict_in_one_session(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("pv_good", "good", configs=(16, 32))
    add_kernel("pv_wrong", "wrong", configs=(16,))
    add_kernel("pv_asm", "asm", configs=(16,))
    add_kernel("pv_crash", "crash", configs=(16,))
    add_kernel("pv_hang", "hang", configs=(16,))
    add_kernel("pv_broken", source="import triton\nraise ImportError('pv_broken needs a GPU, on purpose')\n")
    result = project.runpytest("--rvtune-case", "small", "--rvtune-timeout", "4", "-p", "no:randomly")

    result.assert_outcomes(passed=2, failed=4, errors=1)
    result.stdout.fnmatch_lines_random([
        # a broken module is one collection error naming it and the cause
        "*pv_broken.py: import failed: ImportError: pv_broken needs a GPU, on purpose*",
        # wrong answer: max abs / rel error and the first bad index, per output
        "*pv_wrong [[]case small, BLOCK=16[]] on target qemu: wrong answer*",
        "*y: max abs error 1, max rel error *, first bad index 0, 75 elements wrong*",
        # build error: the lowering's own message, naming kernel and config
        "*pv_asm [[]case small, BLOCK=16[]] on target qemu: build failed*",
        "*operation tt.elementwise_inline_asm at *pv_asm.py:*rvtune cannot lower it to C yet*",
        # crash: the signal and the output's tail
        "*pv_crash [[]case small, BLOCK=16[]] on target qemu: crashed with SIGSEGV; output tail:*",
        # hang: killed at --rvtune-timeout
        "*pv_hang [[]case small, BLOCK=16[]] on target qemu: killed after the 4 s timeout (--rvtune-timeout)*",
        # the summary line: counts per outcome, build cache, time
        "rvtune: 2 passed, 1 wrong, 1 build-failed, 1 crashed, 1 timeout; build cache * hits / * misses; "
        "building * s, running * s; results: *.jsonl",
    ])
    assert "Interrupted" not in result.stdout.str()

    records = by_kernel(read_results(results_file(project)))
    outcomes = {key: r["outcome"] for key, r in records.items()}
    assert outcomes == {"pv_good[BLOCK=16]": "passed", "pv_good[BLOCK=32]": "passed",
                        "pv_wrong[BLOCK=16]": "wrong", "pv_asm[BLOCK=16]": "build_failed",
                        "pv_crash[BLOCK=16]": "crashed", "pv_hang[BLOCK=16]": "timeout"}
    good = records["pv_good[BLOCK=16]"]
    assert good["nodeid"] == "kernels/pv_good.py::pv_good[small-BLOCK=16]"
    assert len(good["samples_ns"]) == 1 and good["samples_ns"][0] > 0  # one launch under emulation
    assert good["timing_source"] == "emulated" and good["machine"]["target"] == "qemu"
    assert good["counters"]["kernel_insns"] > 0 and good["counters"]["insns"] > good["counters"]["kernel_insns"]
    assert len(good["elf_sha256"]) == 64 and len(good["golden_sha256"]) == 64
    wrong = records["pv_wrong[BLOCK=16]"]
    (check,) = wrong["checks"]
    assert (check["name"], check["ok"], check["first_bad"], check["count"]) == ("y", False, 0, 75)
    assert check["max_abs"] == pytest.approx(1.0)
    assert "tt.elementwise_inline_asm" in records["pv_asm[BLOCK=16]"]["message"]


def test_corrupt_golden_file_is_an_error_naming_the_file(project: pytest.Pytester,
                                                          add_kernel: Callable[..., Path]) -> None:
    # committed golden data (rvtune golden generate), one file then cut short: the item fails as bad input
    # naming the file, not as a build failure; a second config of the same data fails the same way
    add_kernel("pv_golden", configs=(16, 32))
    subprocess.run([sys.executable, "-m", "pytest_rvtune.cli", "golden", "generate", "--kernel", "pv_golden",
                    "--kernels-dir", str(project.path / "kernels")], check=True, capture_output=True)
    (victim,) = [p for p in (project.path / "golden" / "pv_golden" / "small").glob("*.txt") if "_2.txt" in p.name]
    victim.write_text(victim.read_text()[: len(victim.read_text()) // 2])
    result = project.runpytest("--rvtune-case", "small", "--rvtune-results", "run.jsonl")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([f"*{victim.name}*"])
    outcomes = {r["config_id"]: r["outcome"] for r in read_results(project.path / "run.jsonl")}
    assert outcomes == {"BLOCK=16": "error", "BLOCK=32": "error"}


def test_qemu_counts_are_kept_with_launcher_threads(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    # the QEMU plugin counts every guest thread exactly: --rvtune-threads 2 keeps the counts, the kernel's the
    # serial run's (tests/plugin/test_plugin_threads.py checks the threads' figures)
    add_kernel("pv_threads", configs=(16,))
    for threads in ("1", "2"):
        project.runpytest("--rvtune-case", "small", "--rvtune-threads", threads,
                          "--rvtune-results", f"t{threads}.jsonl").assert_outcomes(passed=1)
    (one,) = read_results(project.path / "t1.jsonl")
    (two,) = read_results(project.path / "t2.jsonl")
    assert one["threads"] == 1 and one["counters"]["kernel_insns"] > 0
    assert two["threads"] == 2 and two["counters"]["kernel_insns"] == one["counters"]["kernel_insns"]
    assert two["counters"]["launch_insns"] > one["counters"]["launch_insns"]  # plus starting and joining threads


def test_num_threads_of_a_config_is_the_thread_count_it_runs_with(project: pytest.Pytester,
                                                                   add_kernel: Callable[..., Path]) -> None:
    """triton-cpu's num_threads becomes the launcher's thread count of that item (0 = all harts); a config
    without it runs with --rvtune-threads."""
    source = kernel_source("pc_run_threads", configs=(16,)).replace(
        'return [triton.Config({"BLOCK": b}) for b in [16]]',
        'return [triton.Config({"BLOCK": 16}, num_threads=2), triton.Config({"BLOCK": 32}), '
        'triton.Config({"BLOCK": 32}, num_threads=0)]')
    add_kernel("pc_run_threads", source=source)
    result = project.runpytest("--rvtune-target", "host", "--rvtune-case", "small", "--rvtune-results", "t.jsonl",
                               "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    threads = {r["config_id"]: r["threads"] for r in read_results(project.path / "t.jsonl")}
    assert threads == {"BLOCK=16-num_threads=2": 2, "BLOCK=32": 1, "BLOCK=32-num_threads=0": 0}


def test_a_module_that_forks_at_import_runs_its_items_once(project: pytest.Pytester,
                                                             add_kernel: Callable[..., Path]) -> None:
    """os.fork() in a kernel module's import-time code once ran the rest of the session twice: every item twice
    and two records per item. The fork's copy now ends where the module's import ends."""
    add_kernel("pv_fork", source="import os\nos.fork()\n" + kernel_source("pv_fork", configs=(16, 32)))
    # In a subprocess: a fork of this very test process would run the rest of *this* session twice.
    result = project.runpytest_subprocess("--rvtune-target", "host", "--rvtune-case", "small", "--rvtune-results",
                                          "f.jsonl", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert sorted(r["config_id"] for r in read_results(project.path / "f.jsonl")) == ["BLOCK=16", "BLOCK=32"]
