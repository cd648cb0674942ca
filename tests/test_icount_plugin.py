"""The QEMU instruction-count plugin (pytest_rvtune/targets/qemu_plugin/icount.c) on real QEMU, real programs."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from pytest_rvtune import paths
from pytest_rvtune.counters import parse_hart_launch_insns, parse_icount
from pytest_rvtune.timing_model import read_blocks
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain, qemu_command

# saxpy vectorizes to RVV with -march=rv64gcv (vle32/vfmacc/vse32) and stays scalar with -march=rv64gc.
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void saxpy(float *y, const float *x, float a, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (int i = 0; i < n; i++) { x[i] = i; y[i] = 1; }
    saxpy(y, x, 2.0f, n);
    printf("%g\n", y[n - 1]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("icount")
    src = tmp / "saxpy.c"
    src.write_text(PROGRAM)
    vector = Toolchain.for_isa(RISCV_ISA)
    # The same flags without V: -march=rv64gc, and no RVV vector-bits option (clang rejects it without V).
    scalar = dataclasses.replace(vector, cflags=tuple(
        "-march=rv64gc" if f.startswith("-march=") else f for f in vector.cflags if not f.startswith("-mrvv")))
    elves = {}
    for name, tc in (("vector", vector), ("scalar", scalar)):
        obj, elf = tmp / f"{name}.o", tmp / f"{name}.elf"
        tc.compile(src, obj)
        tc.link([obj], elf)
        elves[name] = elf
    return elves


def count(elf: Path, n: int, out: Path, symbol: str = "saxpy", more: str = "") -> dict[str, float]:
    plugin = paths.icount_plugin()
    assert plugin.is_file(), f"{plugin} missing: run `make setup`"
    proc = subprocess.run([*qemu_command(), "-plugin", f"{plugin},out={out},symbol={symbol}{more}", str(elf), str(n)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout) == 1 + 2 * (n - 1)  # the program computed the right answer under the plugin
    return parse_icount(out.read_text(), source=str(out))


def test_vector_code_counts_vector_instructions(programs: dict[str, Path], tmp_path: Path) -> None:
    counts = count(programs["vector"], 1024, tmp_path / "v.txt")
    assert counts["vector_insns"] > 0
    assert counts["insns"] > counts["kernel_insns"] > 0
    # The loop body is vector code: most kernel instructions are vector instructions.
    assert counts["vector_insns"] >= counts["kernel_insns"] / 2


def test_scalar_build_has_no_vector_instructions(programs: dict[str, Path], tmp_path: Path) -> None:
    counts = count(programs["scalar"], 1024, tmp_path / "s.txt")
    assert counts["vector_insns"] == 0
    assert counts["kernel_insns"] > 1024  # at least one instruction per element


@pytest.mark.parametrize("kind", ["vector", "scalar"])
def test_symbol_count_scales_with_the_loop_and_repeats_exactly(programs: dict[str, Path], tmp_path: Path,
                                                               kind: str) -> None:
    k = [count(programs[kind], n, tmp_path / f"{n}.txt")["kernel_insns"] for n in (1024, 2048, 4096)]
    # Linear in n with a fixed prologue: each doubling adds twice what the previous one did.
    assert k[2] - k[1] == 2 * (k[1] - k[0]) > 0
    assert count(programs[kind], 2048, tmp_path / "again.txt")["kernel_insns"] == k[1]


def test_unknown_symbol_counts_nothing_in_the_kernel(programs: dict[str, Path], tmp_path: Path) -> None:
    counts = count(programs["vector"], 64, tmp_path / "x.txt", symbol="no_such_function")
    assert counts["kernel_insns"] == 0 and counts["insns"] > 0


def test_helpers_prefix_counts_those_functions_as_the_kernels_own(programs: dict[str, Path], tmp_path: Path) -> None:
    # helpers=<prefix>: the compiler runtime's precompiled functions a kernel calls (the GEMM panels) are counted
    # in kernel_insns; here main is "the kernel" and saxpy the helper it calls
    main_only = count(programs["vector"], 512, tmp_path / "m.txt", symbol="main")["kernel_insns"]
    saxpy_only = count(programs["vector"], 512, tmp_path / "s.txt")["kernel_insns"]
    both = count(programs["vector"], 512, tmp_path / "b.txt", symbol="main", more=",helpers=sax")
    assert both["kernel_insns"] == main_only + saxpy_only and saxpy_only > 0 and main_only > 0
    assert count(programs["vector"], 512, tmp_path / "n.txt", symbol="main",
                 more=",helpers=no_such_")["kernel_insns"] == main_only


def test_bad_plugin_argument_is_refused(programs: dict[str, Path], tmp_path: Path) -> None:
    plugin = paths.icount_plugin()
    proc = subprocess.run([*qemu_command(), "-plugin", f"{plugin},bogus=1", str(programs["vector"]), "4"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert "unknown argument 'bogus=1'" in proc.stderr


# --- the launch window: launch=<launcher> ---------------------------------------------------------------
# A launcher (`step_wrap`, named like ours) whose kernel hands its work to libc's memset, and worker threads
# (argv[5] of them, 1 by default, when argv[4] > 0) each doing `spin` iterations inside the launch, at the same
# time; around the launches, harness-like work outside (`outside` iterations of a loop, standing in for file I/O
# and checks).
LAUNCHER_PROGRAM = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile long sink;

__attribute__((noinline)) void step(float *y, int n) { memset(y, 0, n * sizeof *y); y[0] = 1; }

static void *spin(void *arg) {
    for (long i = 0; i < (long)arg; i++) sink += i;
    return NULL;
}

__attribute__((noinline)) void step_wrap(float *y, int n, long worker_spin, int workers) {
    pthread_t t[16];
    for (int w = 0; worker_spin > 0 && w < workers; w++) pthread_create(&t[w], NULL, spin, (void *)worker_spin);
    step(y, n);
    for (int w = 0; worker_spin > 0 && w < workers; w++) pthread_join(t[w], NULL);
}

int main(int argc, char **argv) {
    int n = atoi(argv[1]), launches = atoi(argv[2]);
    long outside = atol(argv[3]), worker_spin = atol(argv[4]);
    int workers = argc > 5 ? atoi(argv[5]) : 1;
    float *y = malloc(n * sizeof *y);
    for (long i = 0; i < outside; i++) sink += i;
    for (int r = 0; r < launches; r++) step_wrap(y, n, worker_spin, workers);
    for (long i = 0; i < outside; i++) sink += i;
    printf("%g\n", y[0]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def launcher_programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The launcher program as linked normally (calls relaxed to `jal`) and with -mno-relax, where each call
    stays an `auipc`+`jalr` pair: the plugin must find both kinds of call."""
    tmp = tmp_path_factory.mktemp("launch")
    src = tmp / "launch.c"
    src.write_text(LAUNCHER_PROGRAM)
    tc = Toolchain.for_isa(RISCV_ISA)
    elves = {}
    for name, extra in (("jal", ()), ("auipc_jalr", ("-mno-relax",))):
        obj, elf = tmp / f"{name}.o", tmp / f"{name}.elf"
        tc.compile(src, obj, extra)
        tc.link([obj], elf)
        elves[name] = elf
    return elves


def run_launches(elf: Path, out: Path, n: int, launches: int, outside: int = 0, worker_spin: int = 0,
                 launch: str = "step_wrap", workers: int = 1, more: str = "",
                 symbol: str = "step") -> subprocess.CompletedProcess[str]:
    plugin = paths.icount_plugin()
    proc = subprocess.run([*qemu_command(), "-plugin", f"{plugin},out={out},symbol={symbol},launch={launch}{more}",
                           str(elf), str(n), str(launches), str(outside), str(worker_spin), str(workers)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"
    return proc


def count_launches(elf: Path, out: Path, n: int, launches: int, outside: int = 0, worker_spin: int = 0,
                   launch: str = "step_wrap", workers: int = 1, more: str = "", symbol: str = "step"
                   ) -> dict[str, float]:
    run_launches(elf, out, n, launches, outside, worker_spin, launch, workers, more, symbol)
    return parse_icount(out.read_text(), source=str(out))


def hart_counts(out: Path) -> list[int]:
    harts = parse_hart_launch_insns(out.read_text(), source=str(out))
    assert sum(harts) == parse_icount(out.read_text())["launch_insns"]  # the split adds up to the whole
    return harts


def test_launch_counts_the_libc_work_the_kernel_hands_off(launcher_programs: dict[str, Path],
                                                          tmp_path: Path) -> None:
    small = count_launches(launcher_programs["jal"], tmp_path / "s.txt", n=1024, launches=1)
    large = count_launches(launcher_programs["jal"], tmp_path / "l.txt", n=16384, launches=1)
    # The kernel symbol is the same few instructions whatever n; the launch grows with memset's work.
    assert small["kernel_insns"] == large["kernel_insns"] < 50
    assert large["launch_insns"] > 10 * small["launch_insns"] > 10 * 50
    assert large["launch_insns"] > 100 * large["kernel_insns"]
    assert small["launches"] == large["launches"] == 1


@pytest.mark.parametrize("linked", ["jal", "auipc_jalr"])
def test_launch_count_is_exact_per_launch_and_leaves_out_the_harness(launcher_programs: dict[str, Path],
                                                                     tmp_path: Path, linked: str) -> None:
    elf = launcher_programs[linked]
    one = count_launches(elf, tmp_path / "1.txt", n=4096, launches=1)
    three = count_launches(elf, tmp_path / "3.txt", n=4096, launches=3)
    busy = count_launches(elf, tmp_path / "b.txt", n=4096, launches=3, outside=100_000)
    assert (one["launches"], three["launches"]) == (1, 3)
    assert three["launch_insns"] == 3 * one["launch_insns"] > 0
    # Work around the launches (file reading, checks) changes the process's count, never the launch's.
    assert busy["insns"] > three["insns"] + 100_000
    assert busy["launch_insns"] == three["launch_insns"]


def test_worker_threads_started_by_the_launcher_belong_to_the_launch(launcher_programs: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    elf = launcher_programs["jal"]
    alone = count_launches(elf, tmp_path / "0.txt", n=64, launches=1)
    assert hart_counts(tmp_path / "0.txt") == [alone["launch_insns"]]  # one thread: all of it is thread 0's
    workers = []
    for spin in (10_000, 20_000, 40_000):
        out = tmp_path / f"{spin}.txt"
        count_launches(elf, out, n=64, launches=1, worker_spin=spin)
        caller, worker = hart_counts(out)
        # thread 0 called the launcher: its own work plus starting and joining the worker
        assert caller > alone["launch_insns"]
        workers.append(worker)
    # The worker's loop (>= 3 instructions per iteration) is counted exactly, on its own thread, inside the
    # launch: each doubling of the spin adds exactly twice what the previous one did.
    assert workers[2] - workers[1] == 2 * (workers[1] - workers[0]) >= 3 * 10_000


def test_concurrent_threads_are_counted_exactly(launcher_programs: dict[str, Path], tmp_path: Path) -> None:
    """Four workers run the same loop at the same time (QEMU runs each guest thread on its own host thread): no
    count is lost (non-atomic adds to one counter lost some), each thread has its own figure, and a second run
    gives the same counts."""
    elf = launcher_programs["jal"]
    one = count_launches(elf, tmp_path / "1.txt", n=64, launches=1, worker_spin=200_000, symbol="spin")
    runs = [count_launches(elf, tmp_path / f"4-{i}.txt", n=64, launches=1, worker_spin=200_000, workers=4,
                           symbol="spin") for i in range(2)]
    splits = [hart_counts(tmp_path / f"4-{i}.txt") for i in range(2)]
    for four, harts in zip(runs, splits, strict=True):
        assert four["kernel_insns"] == 4 * one["kernel_insns"] > 4 * 3 * 200_000  # the loop, in `spin`
        assert len(harts) == 5  # the calling thread and its four workers, numbered in creation order
        # Every worker did the same work. Thread 0's share varies by a few instructions between runs: whether
        # pthread_join finds a worker ended or waits for it (a futex call) depends on the host's scheduling.
        assert harts[1] == harts[2] == harts[3] == harts[4] > one["kernel_insns"]
    assert runs[0]["kernel_insns"] == runs[1]["kernel_insns"] and splits[0][1:] == splits[1][1:]


def test_blocks_split_their_executions_per_thread(launcher_programs: dict[str, Path], tmp_path: Path) -> None:
    """blocks=: h= gives each block's executions per thread number; per thread, executions x instructions is
    that thread's hart_launch_insns."""
    out, blocks = tmp_path / "c.txt", tmp_path / "c.blocks"
    count_launches(launcher_programs["jal"], out, n=64, launches=2, worker_spin=5_000, workers=2,
                   more=f",blocks={blocks}")
    harts = hart_counts(out)
    read = read_blocks(blocks)
    assert len(harts) == 3 and all(len(b.harts) == 3 and sum(b.harts) == b.count for b in read)
    assert [sum(b.harts[k] * len(b.insns) for b in read) for k in range(3)] == harts


@pytest.mark.parametrize("blocks", [False, True])
def test_one_thread_mode_counts_the_same(launcher_programs: dict[str, Path], tmp_path: Path, blocks: bool) -> None:
    """threads=1 (inline adds, for one guest thread) gives the counts of the per-thread counting, blocks too:
    the launch window opens and closes at the same instructions."""
    elf = launcher_programs["auipc_jalr"]
    outputs = []
    for name, mode in (("exact", ""), ("one", ",threads=1")):
        out, block_file = tmp_path / f"{name}.txt", tmp_path / f"{name}.blocks"
        run_launches(elf, out, n=4096, launches=3, outside=1000, more=mode + (f",blocks={block_file}" * blocks))
        outputs.append((out.read_text(), block_file.read_text() if blocks else ""))
    assert outputs[0] == outputs[1]
    # one thread: no per-thread split in the line nor in the blocks (the line a one-thread run always had)
    assert "harts=" not in outputs[0][0] and " h=" not in outputs[0][1]
    assert parse_icount(outputs[0][0])["launch_insns"] > 0


def test_one_thread_mode_writes_no_counts_for_a_second_thread(launcher_programs: dict[str, Path],
                                                               tmp_path: Path) -> None:
    out = tmp_path / "x.txt"
    proc = run_launches(launcher_programs["jal"], out, n=64, launches=1, worker_spin=1000, more=",threads=1")
    assert "threads=1 but the guest started a second thread" in proc.stderr
    assert not out.exists()  # absent, never an inexact count that passes for an exact one


def test_no_launch_count_without_the_launcher(launcher_programs: dict[str, Path], tmp_path: Path) -> None:
    counts = count_launches(launcher_programs["jal"], tmp_path / "x.txt", n=64, launches=2, launch="no_such_wrap")
    assert "launch_insns" not in counts  # absent, never a zero that would rank first
    assert counts["launches"] == 0 and counts["kernel_insns"] > 0


def test_cache_model_takes_every_threads_accesses(launcher_programs: dict[str, Path], tmp_path: Path) -> None:
    """With several threads the cache model is shared under a lock: no access is lost. Each worker's loop loads and
    stores `sink` once per iteration (a volatile), inside the launch."""
    spin, workers = 50_000, 3
    caches = ",l1d=32768:8:64,l2=524288:8:64"
    alone = count_launches(launcher_programs["jal"], tmp_path / "0.txt", n=64, launches=1, more=caches)
    busy = count_launches(launcher_programs["jal"], tmp_path / "3.txt", n=64, launches=1, worker_spin=spin,
                          workers=workers, more=caches)
    assert busy["l1d_accesses"] >= alone["l1d_accesses"] + 2 * spin * workers
    # the loops touch one line over and over: the threads add almost no misses
    assert busy["l1d_misses"] < alone["l1d_misses"] + 1_000
