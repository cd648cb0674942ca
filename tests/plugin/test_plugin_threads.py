"""Configs with launcher threads (triton-cpu's num_threads 2 and 0) under QEMU: counted exactly, per thread.

Real Triton frontend, our compiler, clang-19 and QEMU with the icount plugin (RVTUNE_TOOLS_DIR)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from plugin_helpers import kernel_source, read_results

from pytest_rvtune import paths
from pytest_rvtune.counters import parse_hart_launch_insns, parse_icount
from pytest_rvtune.run_options import RunOptions
from pytest_rvtune.targets.local import plugin_argument
from pytest_rvtune.toolchain import qemu_command

#: The "slow" body (2000 passes per element) on the emu case: 19 programs of 16 elements, so the grid's work
#: (~10^5 instructions per launch) stands well above what starting threads costs.
PROGRAMS = 19


def threaded_kernel(name: str) -> str:
    return kernel_source(name, "slow", configs=(16,)).replace(
        'return [triton.Config({"BLOCK": b}) for b in [16]]',
        'return [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 16}, num_threads=2), '
        'triton.Config({"BLOCK": 16}, num_threads=0)]')


def all_harts_workers() -> int:
    """The workers num_threads=0 starts under qemu-user: the launcher asks sysconf(_SC_NPROCESSORS_ONLN), which
    the guest's glibc answers from /sys/devices/system/cpu/online, QEMU passing the host's file through (the CPU
    affinity mask plays no part); never more than the grid has programs."""
    return min(os.sysconf("SC_NPROCESSORS_ONLN"), PROGRAMS)


def count_again(record: dict[str, Any], out: Path) -> tuple[dict[str, float], list[int]]:
    """The record's ELF run again under QEMU with the plugin as QemuTarget runs it at these threads."""
    rerun, threads = record["rerun"], record["threads"]
    options = RunOptions(warmup=0, runs=1, threads=threads).harness_args()
    plugin = plugin_argument(paths.icount_plugin(), out, rerun["kernel_symbol"], out.with_suffix(".blocks"))
    done = subprocess.run([*qemu_command(), "-plugin", plugin, rerun["elf"], *options, *rerun["argv"]],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    return parse_icount(text, source=str(out)), parse_hart_launch_insns(text, source=str(out))


def test_threaded_configs_are_counted_exactly_per_thread(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                                         tmp_path: Path) -> None:
    add_kernel("pt_threads", source=threaded_kernel("pt_threads"))
    result = project.runpytest("--rvtune-case", "emu", "--rvtune-results", "t.jsonl", "--benchmark-disable",
                               "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    records = {r["threads"]: r for r in read_results(project.path / "t.jsonl")}
    serial = records[1]["counters"]
    assert serial["launch_insns"] > 100_000
    for threads, workers in ((2, 2), (0, all_harts_workers())):
        counters = records[threads]["counters"]  # kept: exact with any number of threads
        # The same grid runs the same programs, whichever thread runs each: the kernel's instructions (and the
        # process's vector instructions, all of them the kernel's or the harness's) are those of the serial run.
        assert counters["kernel_insns"] == serial["kernel_insns"] > 0
        assert counters["vector_insns"] == serial["vector_insns"]
        # The launch adds what threads cost: per worker pthread_create (a 16 MB stack mmap'ed, clone, TLS),
        # glibc's thread start and exit, its claims on the grid (one atomic add per program, one more at the
        # end) and pthread_join; num_threads=0 also asks sysconf (reads a /sys file): measured 4,100 per launch
        # for two workers. Nothing else: the grid's own work is the serial run's.
        overhead = counters["launch_insns"] - serial["launch_insns"]
        assert 0 < overhead < 1_500 + 2_000 * workers, overhead

        # Per thread, run twice (emulated results are cached, so QEMU again by hand)
        first, second = (count_again(records[threads], tmp_path / f"{threads}-{i}.txt") for i in range(2))
        for counts, harts in (first, second):
            assert len(harts) == 1 + workers  # thread 0 called the launcher, 1.. are its workers
            assert sum(harts) == counts["launch_insns"]
            assert counts["launch_insns"] == pytest.approx(counters["launch_insns"], abs=1_000)
            # the calling thread only starts and joins: the grid's work is the workers'
            assert min(harts[1:]) > 0 and harts[0] < overhead + 1_000
        # Exact and reproducible: the kernel, and the workers' total (which worker claims which program depends on
        # the host's scheduling, so the split between them does not repeat). Thread 0's count may differ by a
        # pthread_join that found its worker ended or waited for it (a futex call: ~100 instructions).
        assert first[0]["kernel_insns"] == second[0]["kernel_insns"] == serial["kernel_insns"]
        assert sum(first[1][1:]) == sum(second[1][1:])
        assert abs(first[1][0] - second[1][0]) <= 100 * workers
