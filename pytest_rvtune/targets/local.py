"""The local targets: ``qemu`` (qemu-riscv64, rv64gcv VLEN 256, exact instruction counts) and ``host``.

Both run the ELF as a child in its own session, so a timeout kills the whole process group (QEMU and
anything the ELF started), under the die_with_parent wrapper, so that group also dies when this process does
(even by SIGKILL), and never raise for a failing ELF: the verdict is the caller's. The ELF runs in a fresh
directory, where ``files`` are symlinked at their relative paths.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import platform
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from pytest_rvtune import paths, timing_model
from pytest_rvtune.compiler.runtime_object import KERNEL_HELPER_PREFIX
from pytest_rvtune.counters import parse_perf_stat_csv, read_icount_file
from pytest_rvtune.harness.output_format import OutputFormat
from pytest_rvtune.hashing import sha256_file
from pytest_rvtune.targets.base import RunResult, Target, TimingSource, run_dir_files
from pytest_rvtune.targets.die_with_parent import with_parent_death
from pytest_rvtune.targets.output_cap import CappedOutput
from pytest_rvtune.toolchain import HOST_ISA, QEMU_CPU, RISCV_ISA, RISCV_VLEN, find_tool, tool_version
from pytest_rvtune.tools import plugin_state
from pytest_rvtune.x60 import model as x60_model
from pytest_rvtune.x60.blocks import read_blocks

#: Host events tried by default; used only if this machine's PMU really counts them (see perf_events_that_count).
DEFAULT_HOST_PERF_EVENTS: tuple[str, ...] = ("cycles", "instructions")

#: After a kill, how long to wait for the pipes to close (a grandchild that left the session may hold them).
_DRAIN_S = 5.0
#: After the ELF exited, how long to wait for the rest of its output (a process it left running may hold it).
_HELD_S = 1.0
#: How often to look whether the ELF has exited while its output is still open.
_POLL_S = 0.25


class TargetSetupError(RuntimeError):
    """A local tool the target needs is missing; the message names it and the fix."""


@dataclass
class _Completed:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float


def run_process(cmd: Sequence[str], timeout: float, cwd: Path) -> _Completed:
    """Run ``cmd`` in a new session; at ``timeout`` kill its whole process group and keep what it printed
    (at most the head and tail of each stream: output_cap.py). The group also dies with this process
    (die_with_parent)."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            with_parent_death(list(cmd)), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:  # not executable, wrong architecture, gone: a failed run, as a shell reports it
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        return _Completed(code, "", f"cannot run {cmd[0]}: {exc}", False, time.monotonic() - start)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = CappedOutput(), CappedOutput()
    with proc:  # closes the pipes at the end, also those a grandchild that left the session still holds
        streams = {proc.stdout: out, proc.stderr: err}
        pipes = {os.fstat(stream.fileno()).st_ino for stream in streams}
        try:
            finished = _pump(streams, start + timeout, proc)
        except BaseException:  # interrupted (Ctrl-C, or SIGTERM made one: stop_signals.py): the run goes too
            _kill_group(proc.pid)
            raise
        timed_out = not finished and proc.poll() is None
        if timed_out:
            _kill_group(proc.pid)
            if not _pump(streams, time.monotonic() + _DRAIN_S):
                proc.kill()
        if streams:  # the ELF is gone, but a process it started in a session of its own holds its output
            killed = _kill_pipe_holders(pipes)
            err.add(f"\n[rvtune: killed {killed} process(es) the ELF left running with its output open]\n".encode())
        returncode = proc.wait()
    return _Completed(None if timed_out else returncode, out.text(), err.text(), timed_out,
                      time.monotonic() - start)


def _pump(streams: dict[IO[bytes], CappedOutput], deadline: float, proc: subprocess.Popen | None = None) -> bool:
    """Read the streams into their captures until each is at its end (True) or ``deadline`` passes (False);
    a stream at its end leaves ``streams``. Once ``proc`` has exited, stop waiting _HELD_S later: a daemon
    it started (setsid, so outside the group a timeout kills) may hold the pipes open for ever."""
    with selectors.DefaultSelector() as selector:
        for stream, capture in streams.items():
            selector.register(stream, selectors.EVENT_READ, capture)
        while streams:
            if proc is not None and proc.poll() is not None:
                deadline, proc = min(deadline, time.monotonic() + _HELD_S), None
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in selector.select(min(left, _POLL_S) if proc is not None else left):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    key.data.add(chunk)
                else:
                    selector.unregister(key.fileobj)
                    # typeshed types fileobj as any file-like; it is the stream registered, one of streams' keys
                    del streams[key.fileobj]  # type: ignore[arg-type]
    return True


def _kill_pipe_holders(pipes: set[int]) -> int:
    """SIGKILL every other process that holds one of these pipes open (found by inode in /proc/<pid>/fd):
    what an ELF started and detached from its session is found by what it inherited, our output pipes."""
    wanted = {f"pipe:[{inode}]" for inode in pipes}
    killed = 0
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in wanted for fd in (pid_dir / "fd").iterdir()):
                os.kill(int(pid_dir.name), signal.SIGKILL)
                killed += 1
    return killed


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(pgid, signal.SIGKILL)


def _local_args(args: Sequence[str | Path]) -> list[str]:
    # Absolute paths: the ELF runs in a scratch directory (where QEMU may drop core files).
    return [str(a.resolve()) if isinstance(a, Path) else a for a in args]


def make_run_dir(scratch: Path, files: Mapping[str, Path] | None) -> Path:
    """A fresh directory under ``scratch`` where each relative path of ``files`` is a symlink to its file
    (raises base.RunFilesError for a path that could escape it)."""
    run_dir = scratch / "run"
    run_dir.mkdir()
    for rel, local in run_dir_files(files).items():
        link = run_dir.joinpath(*rel.parts)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(local)
    return run_dir


def _result(done: _Completed, counters: dict[str, float], signum: int | None = None,
            output_format: OutputFormat | None = None) -> RunResult:
    parsed = (output_format or OutputFormat.load("rvtune")).parse(done.stdout, done.stderr)
    rc = done.returncode
    if signum is None and rc is not None and rc < 0:
        signum = -rc
    return RunResult(
        returncode=rc, samples_ns=parsed.samples_ns, checks=parsed.checks, counters=counters,
        launches=parsed.launches, errors=parsed.errors, stdout=done.stdout, stderr=done.stderr,
        timed_out=done.timed_out, signal=signum, wall_s=done.wall_s,
    )


def launcher_symbol(kernel_symbol: str) -> str:
    """The launcher of a kernel (compiler/launcher.py, and what Triton_RVV harnesses call): the plugin counts
    every instruction from its entry to its return as the launch."""
    return f"{kernel_symbol}_wrap"


def harness_threads(args: Sequence[str | Path]) -> int | None:
    """The launcher threads our harness runs with: its ``--threads N`` (the last one wins, as in the harness), 1
    when absent (its default, docs/contracts.md); None when the value is not a number."""
    threads: int | None = 1
    for flag, value in itertools.pairwise(args):
        if flag == "--threads":
            threads = int(value) if isinstance(value, str) and value.isdigit() else None
    return threads


def plugin_argument(plugin: Path, out: Path, kernel_symbol: str | None, blocks: Path,
                    with_timing_model: bool = False, one_thread: bool = False) -> str:
    """QEMU's -plugin value: counts to ``out``; with a kernel, its launch window, the kernel's instructions
    (its own function and the compiler runtime's precompiled parts it calls) and the per-block counts of the
    window the X60 model prices (``blocks``: a TB-level inline add per block, see benchmarks/x60_overhead.py);
    with the timing model, also the K1 data-cache model (timing_model.K1_L1D/K1_L2: a helper call per memory
    access). ``one_thread``: the guest runs one thread, so the plugin may count with inline adds (``threads=1``:
    the same counts in less QEMU time; a guest that starts a second thread anyway gets no counts). Without it the
    plugin counts every guest thread exactly, with a callback per executed block."""
    argument = f"{plugin},out={out}"
    if one_thread:
        argument += ",threads=1"
    if kernel_symbol:
        argument += (f",symbol={kernel_symbol},launch={launcher_symbol(kernel_symbol)}"
                     f",helpers={KERNEL_HELPER_PREFIX},blocks={blocks}")
        if with_timing_model:
            argument += f",l1d={timing_model.K1_L1D.plugin_arg()},l2={timing_model.K1_L2.plugin_arg()}"
    return argument


class QemuTarget:
    """qemu-riscv64 user mode with VLEN 256; counters from our instruction-count plugin.

    Counts are exact with any number of guest threads (the plugin keeps per-thread counters; with several, its line
    also splits ``launch_insns`` per thread: counters.parse_hart_launch_insns); with our harness at ``--threads 1``
    the plugin counts the one thread with inline adds, which costs less QEMU time.
    Emulated time is not performance, so runs need no exclusive use of the machine (targets/lock.py), and a
    run is deterministic, so its result can be reused (count_fingerprint, count_cache.py). With a kernel the
    X60 model's counters (x60/model.py: ``x60_cycles`` and its parts) are added from the plugin's per-block counts.
    """

    name = "qemu"
    isa = RISCV_ISA
    timing_source: TimingSource = "emulated"
    local = True

    def __init__(self, plugin: Path | None = None, counters: bool = True, with_timing_model: bool = False) -> None:
        self.qemu = find_tool("qemu-riscv64")
        self.plugin = plugin or paths.icount_plugin()
        self.counters = counters
        # est_cycles and the cache-model misses cost ~1.5x QEMU time plus llvm-mca per new block, and est_cycles
        # ranks configs no better than launch_insns on the host (benchmarks/ranking_fidelity.py): asked for, not
        # default. The X60 model runs always (its per-block counts are cheap); with this it also gets the misses.
        self.with_timing_model = counters and with_timing_model
        if counters and not self.plugin.is_file():
            raise TargetSetupError(
                f"QEMU instruction-count plugin {self.plugin} is missing: run `rvtune setup` to build it"
            )
        if counters and plugin is None and plugin_state() == "stale":
            # built from another icount.c: it may not know the arguments this code passes (threads=1)
            raise TargetSetupError(
                f"QEMU instruction-count plugin {self.plugin} is out of date (built from another icount.c, "
                "qemu-plugin.h or flags): run `rvtune setup` to rebuild it"
            )

    @functools.cache  # noqa: B019 (one target object per session: caching on self is intended)
    def identity(self) -> dict[str, str]:
        return {
            "target": self.name,
            "isa": self.isa,
            "vlen": str(RISCV_VLEN),
            "board": "qemu-user",
            "cpu": QEMU_CPU,
            "qemu": tool_version(self.qemu),
            "toolchain": tool_version(find_tool("clang-19")),
        }

    def count_fingerprint(self) -> dict[str, str]:
        """What, besides the ELF, its data and its argv, decides this target's counts and output: the QEMU
        build, its CPU model and the plugin's code (a rebuilt plugin may count differently)."""
        return {"target": self.name, "qemu": self.identity()["qemu"], "cpu": QEMU_CPU,
                "plugin": sha256_file(self.plugin) if self.counters else "none",
                **(x60_model.identity() if self.counters else {}),
                **(timing_model.riscv_core_model().identity() if self.with_timing_model else {})}

    def prepare(self, files: Sequence[Path]) -> None:
        pass  # the ELF reads local files in place

    def run(self, elf: Path, args: Sequence[str | Path], timeout: float, *, kernel_symbol: str | None = None,
            files: Mapping[str, Path] | None = None, output_format: OutputFormat | None = None) -> RunResult:
        if not elf.is_file():  # qemu-user exits 1 without a word for a missing file: say what happened
            return _result(_Completed(127, "", f"cannot run {elf}: no such file", False, 0.0), {},
                           output_format=output_format)
        with tempfile.TemporaryDirectory(prefix="rvtune-qemu-") as tmp:
            run_dir = make_run_dir(Path(tmp), files)
            icount, blocks = Path(tmp) / "icount.txt", Path(tmp) / "blocks.txt"
            cmd = [self.qemu, "-cpu", QEMU_CPU]
            if self.counters:
                # Our harness (no output format) runs one guest thread at --threads 1; a user's harness may
                # start any number, so it gets the per-thread counting.
                one_thread = output_format is None and harness_threads(args) == 1
                cmd += ["-plugin", plugin_argument(self.plugin, icount, kernel_symbol, blocks, self.with_timing_model,
                                                   one_thread=one_thread)]
            done = run_process([*cmd, str(elf.resolve()), *_local_args(args)], timeout, run_dir)
            counters = read_icount_file(icount) if self.counters else {}
            if counters and kernel_symbol and blocks.is_file():
                executed = read_blocks(blocks)  # once, for the X60 model and the llvm-mca timing model
                counters.update(x60_model.x60_counters(
                    executed, elf, cache={k: counters[k] for k in timing_model.CACHE_COUNTERS if k in counters}))
                if self.with_timing_model:
                    counters.update(timing_model.est_cycles_of(executed, timing_model.riscv_core_model()))
        return _result(done, counters, output_format=output_format)

    def close(self) -> None:
        pass


@functools.cache
def perf_events_that_count(events: tuple[str, ...]) -> tuple[str, ...]:
    """The events ``perf stat`` really counts on this machine (probed once per process).

    A VM without a PMU prints ``<not supported>`` and exits 0, so the exit code alone proves nothing.
    """
    perf = shutil.which("perf")
    if perf is None or not events:
        return ()
    with tempfile.TemporaryDirectory(prefix="rvtune-perf-") as tmp:
        out = Path(tmp) / "perf.csv"
        proc = subprocess.run([perf, "stat", "-x,", "-o", str(out), "-e", ",".join(events), "--", "true"],
                              capture_output=True, text=True, check=False, timeout=30)
        if proc.returncode != 0 or not out.exists():
            return ()
        counted = parse_perf_stat_csv(out.read_text())
    return tuple(e for e in events if e in counted)


def _perf_child_signal(stderr: str, argv0: str) -> int | None:
    """perf stat exits 0 when its child dies of a signal; it reports it as ``<argv0>: <strsignal>``."""
    lines = set(stderr.splitlines())
    for sig in signal.valid_signals():
        description = signal.strsignal(sig)
        if description and f"{argv0}: {description}" in lines:
            return int(sig)
    return None


@functools.cache
def _lscpu_model() -> str:
    lscpu = shutil.which("lscpu")
    if lscpu is None:
        return platform.processor() or "unknown"
    out = subprocess.run([lscpu], capture_output=True, text=True, check=False,
                         env={**os.environ, "LC_ALL": "C"}).stdout
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Model name":
            return value.strip()
    return platform.processor() or "unknown"


class HostTarget:
    """A native build run on this machine; ``perf stat`` counters when the PMU counts, else none."""

    name = "host"
    isa = HOST_ISA
    timing_source: TimingSource = "real"
    local = True

    def __init__(self, perf_events: Sequence[str] = DEFAULT_HOST_PERF_EVENTS, *,
                 with_timing_model: bool = False) -> None:
        # with_timing_model: every built-in opener takes it (BuiltinFactory); the host has real time, nothing to model
        self.perf_events = perf_events_that_count(tuple(perf_events))
        self.perf = shutil.which("perf") if self.perf_events else None

    @functools.cache  # noqa: B019 (one target object per session: caching on self is intended)
    def identity(self) -> dict[str, str]:
        return {
            "target": self.name,
            "isa": self.isa,
            "arch": platform.machine(),
            "cpu": _lscpu_model(),
            "cores": str(os.cpu_count() or 0),
            "board": platform.node(),
            "kernel": platform.release(),
            "toolchain": tool_version(find_tool("clang-19")),
            "perf_events": ",".join(self.perf_events) or "none",
        }

    def prepare(self, files: Sequence[Path]) -> None:
        pass

    def run(self, elf: Path, args: Sequence[str | Path], timeout: float, *, kernel_symbol: str | None = None,
            files: Mapping[str, Path] | None = None, output_format: OutputFormat | None = None) -> RunResult:
        argv = [str(elf.resolve()), *_local_args(args)]
        with tempfile.TemporaryDirectory(prefix="rvtune-host-") as tmp:
            run_dir = make_run_dir(Path(tmp), files)
            if self.perf is None:
                return _result(run_process(argv, timeout, run_dir), {}, output_format=output_format)
            # -o keeps perf's CSV apart from the ELF's own stderr. perf stat exits 0 when its child dies of a
            # signal and only sometimes says so (its SIGCHLD handler can reap the child first): an sh between
            # them turns the signal into status 128+N, which perf passes on (as the board runner does).
            csv = Path(tmp) / "perf.csv"
            cmd = [self.perf, "stat", "-x,", "-o", str(csv), "-e", ",".join(self.perf_events), "--",
                   "/bin/sh", "-c", '"$0" "$@"', *argv]
            done = run_process(cmd, timeout, run_dir)
            counters = parse_perf_stat_csv(csv.read_text()) if csv.exists() and not done.timed_out else {}
        signum = _perf_child_signal(done.stderr, argv[0])
        if signum is None and done.returncode is not None and done.returncode > 128 and not done.timed_out:
            signum = done.returncode - 128
        if signum is not None:
            done.returncode = -signum  # what a plain run would have reported
        return _result(done, counters, signum, output_format)

    def close(self) -> None:
        pass


class BuiltinFactory(Protocol):
    """How a built-in target is opened: its ISA known before it is (configuration reads it), and whether an
    emulated target also records the timing model's counters (est_cycles, cache misses) asked for."""

    isa: str

    def __call__(self, *, with_timing_model: bool = False) -> Target: ...


def builtin_targets() -> dict[str, BuiltinFactory]:
    """The targets that need no configuration, by name (constructed lazily: QEMU needs its plugin)."""
    return {"qemu": QemuTarget, "host": HostTarget}
