"""The local targets (qemu, host) with real programs, plus the parsers they share.

One small C program, cross-built for rv64gcv and built for the host with the project's toolchain, behaves
according to its first argument: print RVTUNE lines, sleep (with a forked child) past the timeout, or crash.
"""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path

import pytest

from pytest_rvtune.counters import CounterFormatError, parse_hart_launch_insns, parse_icount, parse_perf_stat_csv
from pytest_rvtune.harness.output import parse_harness_output
from pytest_rvtune.targets.base import Target
from pytest_rvtune.targets.local import (
    HostTarget,
    QemuTarget,
    TargetSetupError,
    builtin_targets,
    harness_threads,
    perf_events_that_count,
)
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) long probe_kernel(long n) {
    volatile long s = 0;
    for (long i = 0; i < n; i++) s += i;
    return s;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    if (strcmp(mode, "ok") == 0) {
        printf("free text RVTUNE-like but not a fact\n");
        printf("RVTUNE sample 1500\nRVTUNE sample 1200\n");
        printf("RVTUNE check out ok max_abs=0 max_rel=0 first_bad=-1 count=%ld\n", probe_kernel(4) + 6);
        return 0;
    }
    if (strcmp(mode, "bad") == 0) {
        printf("RVTUNE check out bad max_abs=0.5 max_rel=nan first_bad=3 count=16\n");
        printf("RVTUNE error golden file %s line 2: short row\n", argv[2]);
        fprintf(stderr, "wrong answer\n");
        return 1;
    }
    if (strcmp(mode, "sleep") == 0) {
        pid_t child = fork();  /* a grandchild of the target: the group kill must take it too */
        if (child == 0) { sleep(120); return 0; }
        FILE *f = fopen(argv[2], "w");
        fprintf(f, "%d %d\n", (int)getpid(), (int)child);
        fclose(f);
        sleep(120);
        return 0;
    }
    if (strcmp(mode, "crash") == 0) {
        printf("RVTUNE sample 7\n");
        fflush(stdout);
        *(volatile int *)0 = 1;
    }
    return 3;
}
"""


def _build(tmp: Path, isa: str) -> Path:
    src = tmp / "prog.c"
    src.write_text(PROGRAM)
    tc = Toolchain.for_isa(isa)
    obj, elf = tmp / f"prog-{isa}.o", tmp / f"prog-{isa}.elf"
    tc.compile(src, obj, extra=("-O1",))
    tc.link([obj], elf)
    return elf


@pytest.fixture(scope="module", params=["qemu", "host"])
def target_and_elf(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    target: Target = QemuTarget() if request.param == "qemu" else HostTarget()
    elf = _build(tmp_path_factory.mktemp(request.param), RISCV_ISA if request.param == "qemu" else HOST_ISA)
    yield target, elf
    target.close()


def _alive(pid: int) -> bool:
    """A pid that still runs (zombies waiting for a reaper count as gone: they hold nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_builtin_targets_are_named_and_satisfy_the_protocol() -> None:
    targets = builtin_targets()
    assert set(targets) == {"qemu", "host"}
    qemu, host = targets["qemu"](), targets["host"]()
    assert isinstance(qemu, Target) and isinstance(host, Target)
    assert (qemu.isa, qemu.timing_source) == (RISCV_ISA, "emulated")
    assert (host.isa, host.timing_source) == (HOST_ISA, "real")
    assert qemu.identity()["board"] == "qemu-user" and qemu.identity()["vlen"] == "256"
    assert "7.2" in qemu.identity()["qemu"]
    assert host.identity()["arch"] and host.identity()["isa"] == "host"


def test_samples_and_checks_are_parsed(target_and_elf) -> None:
    target, elf = target_and_elf
    result = target.run(elf, ["ok"], timeout=60, kernel_symbol="probe_kernel")
    assert result.returncode == 0 and result.signal is None and not result.timed_out
    assert result.samples_ns == [1500, 1200]
    assert [(c.name, c.ok, c.count) for c in result.checks] == [("out", True, 12)]
    assert result.all_checks_ok and result.errors == []
    assert "free text" in result.stdout
    if target.name == "qemu":
        assert result.counters["kernel_insns"] > 0
        assert result.counters["insns"] > result.counters["kernel_insns"]


def test_wrong_answer_is_reported_not_raised(target_and_elf, tmp_path: Path) -> None:
    target, elf = target_and_elf
    golden = tmp_path / "golden.txt"
    result = target.run(elf, ["bad", golden], timeout=60)
    assert result.returncode == 1 and result.signal is None
    (check,) = result.checks
    assert not check.ok and check.first_bad == 3 and check.max_abs == 0.5 and math.isnan(check.max_rel)
    # The Path argument reached the ELF as the absolute path the target sees.
    assert result.errors == [f"golden file {golden.resolve()} line 2: short row"]
    assert "wrong answer" in result.stderr


def test_timeout_kills_the_whole_process_group(target_and_elf, tmp_path: Path) -> None:
    target, elf = target_and_elf
    pid_file = tmp_path / "pids"
    result = target.run(elf, ["sleep", pid_file], timeout=2)
    assert result.timed_out and result.returncode is None
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), f"left running: {[p for p in pids if _alive(p)]}"


def test_crash_reports_its_signal(target_and_elf) -> None:
    target, elf = target_and_elf
    result = target.run(elf, ["crash"], timeout=60)
    assert result.signal == signal.SIGSEGV and result.returncode == -signal.SIGSEGV
    assert not result.timed_out and result.samples_ns == [7]


def test_an_elf_that_cannot_run_is_a_result_not_an_exception(tmp_path: Path) -> None:
    rv64 = _build(tmp_path, RISCV_ISA)  # a RISC-V ELF is not executable on this host
    result = HostTarget().run(rv64, ["ok"], timeout=60)
    assert result.returncode == 126 and "Exec format error" in result.stderr
    missing = QemuTarget().run(tmp_path / "no-such.elf", [], timeout=60)
    assert missing.returncode == 127 and "no-such.elf: no such file" in missing.stderr


def test_host_perf_wrapper_counts_and_keeps_the_crash_signal(tmp_path: Path) -> None:
    # task-clock is a software event: perf counts it even where the VM has no PMU (cycles are unsupported).
    if perf_events_that_count(("task-clock",)) != ("task-clock",):
        pytest.fail("perf stat cannot count task-clock here: run `make setup` (installs linux-perf)")
    host = HostTarget(perf_events=("task-clock", "cycles"))
    elf = _build(tmp_path, HOST_ISA)
    ok = host.run(elf, ["ok"], timeout=60)
    assert ok.returncode == 0 and ok.samples_ns == [1500, 1200] and ok.counters["task-clock"] > 0
    crash = host.run(elf, ["crash"], timeout=60)
    assert crash.signal == signal.SIGSEGV and crash.returncode == -signal.SIGSEGV


def test_harness_output_tolerates_free_text_and_names_malformed_lines() -> None:
    out = parse_harness_output(
        "hello\nRVTUNE sample 10\n  RVTUNE sample 2.0e3  \nRVTUNEsample 5\n"
        "RVTUNE check c ok max_abs=1e-07 max_rel=inf first_bad=-1 count=4\n"
        "RVTUNE sample -1\nRVTUNE check c maybe\nRVTUNE error  file a.txt: line 3  bad\n"
    )
    assert out.samples_ns == [10, 2000]
    assert out.checks[0].max_abs == 1e-07 and math.isinf(out.checks[0].max_rel)
    assert out.errors[0].startswith("unparsable harness output line 6")
    assert out.errors[1].startswith("unparsable harness output line 7")
    assert out.errors[2] == "file a.txt: line 3  bad"


def test_perf_csv_missing_events_are_absent_not_zero() -> None:
    text = (
        "# started on Sat Nov 21 22:20:34 2026\n\n"
        "<not supported>,,cycles:u,0,100.00,,\n"
        "<not counted>,,instructions,0,0.00,,\n"
        "1.30,msec,task-clock,1295891,100.00,0.615,CPUs utilized\n"
        "0,,page-faults,1295891,100.00,0.000,/sec\n"
        "0.41,msec,cpu-clock,27.84%,412531,100.00,0.425,CPUs utilized\n"
        "the program's own stderr, with, commas\n"
    )
    assert parse_perf_stat_csv(text) == {"task-clock": 1.30, "page-faults": 0.0, "cpu-clock": 0.41}


def test_icount_file_format() -> None:
    assert parse_icount("insns=10 vector_insns=0 kernel_insns=3 launches=2 launch_insns=8\n") == {
        "insns": 10.0, "vector_insns": 0.0, "kernel_insns": 3.0, "launches": 2.0, "launch_insns": 8.0}
    with pytest.raises(CounterFormatError, match="missing kernel_insns"):
        parse_icount("insns=10 vector_insns=0 launches=0", source="x.txt")
    # an older plugin (no launch counting) is named as such, with the fix
    with pytest.raises(CounterFormatError, match=r"missing launches .*rvtune setup"):
        parse_icount("insns=10 vector_insns=0 kernel_insns=3", source="x.txt")


def test_icount_per_thread_figures() -> None:
    line = "insns=90 vector_insns=0 kernel_insns=30 launches=2 launch_insns=80 harts=3 hart_launch_insns=8,40,32\n"
    # the counters stay counters (a per-launch division applies to them); the split is read on its own
    assert parse_icount(line) == {"insns": 90.0, "vector_insns": 0.0, "kernel_insns": 30.0, "launches": 2.0,
                                  "launch_insns": 80.0}
    assert parse_hart_launch_insns(line) == [8, 40, 32]
    # one thread (the plugin writes no split): all of it is thread 0's; no launcher: nothing
    assert parse_hart_launch_insns("insns=9 vector_insns=0 kernel_insns=3 launches=1 launch_insns=7") == [7]
    assert parse_hart_launch_insns("insns=1 vector_insns=0 kernel_insns=0 launches=0") == []
    with pytest.raises(CounterFormatError, match=r"x.txt: harts=2 but 3 hart_launch_insns values"):
        parse_hart_launch_insns(line.replace("harts=3", "harts=2"), source="x.txt")
    with pytest.raises(CounterFormatError, match=r"expected key=<integer>,<integer>,\.\.\. items, got "
                                                 r"'hart_launch_insns=8,,32'"):
        parse_icount(line.replace("8,40,32", "8,,32"))


@pytest.mark.parametrize(("args", "threads"), [
    ([], 1), (["--runs", "3", "x.txt"], 1), (["--threads", "1"], 1), (["--threads", "0", "a"], 0),
    (["--threads", "2", "--threads", "1"], 1), (["--threads", "lots"], None),
])
def test_harness_threads_is_what_our_harness_runs_with(args: list[str], threads: int | None) -> None:
    # decides the plugin's counting: inline adds (threads=1) only when the harness will run one thread
    assert harness_threads(args) == threads


def test_a_plugin_built_from_another_icount_c_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # this code passes the plugin arguments of this icount.c (threads=1): an older build would refuse them at
    # every run, so the target says what to do once, up front
    tools = tmp_path / "tools"
    (tools / "include").mkdir(parents=True)
    (tools / "libicount.so").write_bytes(b"an old build")
    (tools / "include" / "qemu-plugin.h").write_text("/* a header */\n")
    (tools / "libicount.so.stamp").write_text("the inputs' hash of another icount.c\n")
    monkeypatch.setenv("RVTUNE_TOOLS_DIR", str(tools))
    with pytest.raises(TargetSetupError, match=r"libicount.so is out of date .*run `rvtune setup`"):
        QemuTarget()
    QemuTarget(counters=False)  # no plugin, nothing to refuse
