"""Count one launch window of any static rv64 ELF under our QEMU and plugin (what ``rvtune count`` prints).

The ELF runs as it is, with its own argv, in a directory of the caller's choosing (where the data files it
reads by relative path are), under ``qemu-riscv64 -cpu <QEMU_CPU>`` (VLEN 256) with the icount plugin given
``launch=<launcher>`` (the window: every instruction, on any thread, from the launcher's entry to its return),
``symbol=<kernel>`` (kernel_insns) and ``blocks=`` (each block's executions inside windows: the vector share
of the window and the X60 model's input). Nothing here knows pytest or our kernel specs: a Triton_RVV user's
triton-cpu ELF and a hand-written program are counted alike.

Counts are exact with any number of guest threads (the plugin counts each thread on its own).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvtune import paths, timing_model
from pytest_rvtune.compiler.runtime_object import KERNEL_HELPER_PREFIX
from pytest_rvtune.counters import parse_hart_launch_insns, read_icount_file
from pytest_rvtune.elf_info import ElfError, ElfInfo, read_elf
from pytest_rvtune.targets.local import launcher_symbol, run_process
from pytest_rvtune.toolchain import QEMU_CPU, ToolchainError, find_tool
from pytest_rvtune.x60.blocks import ExecutedBlock, read_blocks
from pytest_rvtune.x60.model import X60_RATIO_COUNTERS, x60_counters

#: The plugin's cache-model counters the X60 model reads (L2 misses: DRAM traffic).
CACHE_COUNTERS = ("l1d_accesses", "l1d_misses", "l2_misses")

#: Lines of stderr (and stdout) shown when the program fails.
TAIL_LINES = 8


class CountError(RuntimeError):
    """The ELF could not be counted; the message names the ELF, the function or the failure, and what to do."""


@dataclass
class LaunchWindow:
    """Which ELF, which launcher (as named in the ELF's symbol table) and kernel function."""

    elf: Path
    launcher: str
    symbol: str | None
    constants: dict[str, int] = field(default_factory=dict)  # the kernel's block constants found in the ELF


@dataclass
class WindowCounts:
    """Totals over every launch of one run (the plugin's counts); ``per_launch`` divides them."""

    window: LaunchWindow
    launches: int
    launch_insns: float
    kernel_insns: float | None
    insns: float                     # the whole process
    hart_launch_insns: list[int]     # launch_insns per guest thread of the launches (0 = the caller's)
    window_vector_insns: float       # RVV instructions inside launch windows (from the blocks file)
    window_block_insns: float        # all instructions inside launch windows, from the same file
    x60: dict[str, float] = field(default_factory=dict)  # the X60 model's totals, when the model is installed
    x60_missing: str = ""            # why there is no X60 figure

    @property
    def harts(self) -> int:
        """Guest threads that ran inside the launch windows (1 without threads)."""
        return max(1, len(self.hart_launch_insns))

    @property
    def vector_share(self) -> float:
        return self.window_vector_insns / self.window_block_insns if self.window_block_insns else 0.0

    def per_launch(self) -> dict[str, float]:
        n = self.launches
        out = {"launch_insns": self.launch_insns / n}
        if self.kernel_insns is not None:
            out["kernel_insns"] = self.kernel_insns / n
        out["vector_insns"] = self.window_vector_insns / n
        out.update({name: value if name in X60_RATIO_COUNTERS else value / n for name, value in self.x60.items()})
        return out


def resolve_window(elf: Path, symbol: str | None, launch: str | None) -> LaunchWindow:
    """The launch window asked for, checked against the ELF; CountError naming what is missing and the
    candidates there are."""
    try:
        info = read_elf(elf)
    except ElfError as exc:
        raise CountError(str(exc)) from None
    if symbol is not None and symbol not in info.functions:
        raise CountError(f"{elf} has no function {symbol!r}{_nearby(info, symbol)}: give --symbol the kernel "
                         "function's name as the ELF's symbol table spells it (llvm-nm-19 ELF)")
    if launch is None:
        if symbol is None:
            raise CountError(f"{elf}: no --symbol (the kernel function) and no --launch: say which launch to count, "
                             f"e.g. --symbol KERNEL for the launcher KERNEL_wrap; {_candidates(info)}")
        launch = launcher_symbol(symbol)
    launcher = info.find_launcher(launch)
    if launcher is None:
        raise CountError(f"{elf} has no launcher function {launch!r}: {_candidates(info)}; give the one that "
                         "wraps the kernel call with --launch FN")
    return LaunchWindow(elf, launcher, symbol, info.int_constants(symbol) if symbol else {})


def _candidates(info: ElfInfo) -> str:
    wraps = info.launcher_candidates()
    if not wraps:
        return "the ELF defines no *_wrap function (pass the function that launches the kernel with --launch FN)"
    return f"its *_wrap functions: {', '.join(wraps)}"


def _nearby(info: ElfInfo, symbol: str) -> str:
    low = symbol.lower()
    close = sorted(name for name in info.functions if low in name.lower() or name.lower() in low)[:8]
    return f" (functions with similar names: {', '.join(close)})" if close else ""


def count_window(window: LaunchWindow, args: Sequence[str], run_dir: Path, *, timeout: float = 600.0,
                 plugin: Path | None = None) -> WindowCounts:
    """Run the ELF once with ``args`` in ``run_dir`` and count its launch windows. CountError when QEMU or the
    plugin is missing, the program fails or times out, or the launcher never ran."""
    plugin = plugin or paths.icount_plugin()
    if not plugin.is_file():
        raise CountError(f"QEMU instruction-count plugin {plugin} is missing: run `rvtune setup` to build it")
    if not run_dir.is_dir():
        raise CountError(f"run directory {run_dir} does not exist: give --run-dir the directory the ELF's data "
                         "paths are relative to")
    try:
        qemu = find_tool("qemu-riscv64")
    except ToolchainError as exc:  # the message names the package to install
        raise CountError(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="rvtune-count-") as tmp:
        out, blocks_file = Path(tmp) / "icount.txt", Path(tmp) / "blocks.txt"
        # the K1 cache model: its L2 misses are the X60 model's DRAM traffic
        argument = (f"{plugin},out={out},launch={window.launcher},blocks={blocks_file}"
                    f",l1d={timing_model.K1_L1D.plugin_arg()},l2={timing_model.K1_L2.plugin_arg()}")
        if window.symbol:
            argument += f",symbol={window.symbol},helpers={KERNEL_HELPER_PREFIX}"
        cmd = [qemu, "-cpu", QEMU_CPU, "-plugin", argument, str(_executable(window.elf, Path(tmp))), *args]
        done = run_process(cmd, timeout, run_dir)
        what = f"{window.elf} {' '.join(args)}".strip()
        if done.timed_out:
            raise CountError(f"{what}: still running after {timeout:g} s under QEMU, killed (give --timeout more, "
                             "or smaller inputs)")
        if done.returncode != 0:
            raise CountError(f"{what} failed under QEMU with exit code {done.returncode} (run in {run_dir}; data "
                             f"paths are relative to it, --run-dir DIR changes it). {_tails(done.stdout, done.stderr)}")
        counters = read_icount_file(out)
        out_text = out.read_text() if out.is_file() else ""
        if "launch_insns" not in counters:
            raise CountError(f"the plugin did not find the launcher {window.launcher} in {window.elf}: rebuild it "
                             "with `rvtune setup`")
        launches = int(counters.get("launches", 0))
        if launches == 0:
            raise CountError(f"{what} ran, but never returned from {window.launcher} (0 launches): the window "
                             "opens at its entry and closes at the instruction after a direct call to it; is it "
                             "called through a function pointer, or is it the wrong function?")
        # read once, for the vector count and the X60 model; a missing file goes to the model, which says why
        blocks = read_blocks(blocks_file) if blocks_file.is_file() else None
        cache = {k: counters[k] for k in CACHE_COUNTERS if k in counters}
        x60, missing = _x60(blocks_file if blocks is None else blocks, window.elf, cache)
    blocks = blocks or []
    vector = sum(b.count * sum(is_vector_insn(i) for i in b.insns) for b in blocks)
    return WindowCounts(window=window, launches=launches, launch_insns=counters["launch_insns"],
                        kernel_insns=counters.get("kernel_insns") if window.symbol else None,
                        insns=counters["insns"], hart_launch_insns=parse_hart_launch_insns(out_text, str(out)),
                        window_vector_insns=float(vector),
                        window_block_insns=float(sum(b.count * len(b.insns) for b in blocks)),
                        x60=x60, x60_missing=missing)


def _executable(elf: Path, tmp: Path) -> Path:
    """``elf``, or an executable copy of it in ``tmp``: qemu-user refuses a file without the execute bit with
    exit code 1 and no message (ELFs committed to git or copied from elsewhere often lack it)."""
    if os.access(elf, os.X_OK):
        return elf.resolve()
    copy = tmp / elf.name
    shutil.copyfile(elf, copy)
    copy.chmod(0o755)
    return copy


def _tails(stdout: str, stderr: str) -> str:
    """The last lines of stderr, and of stdout when the program printed its complaint there (many harnesses do)."""
    parts = []
    for name, text in (("stderr", stderr), ("stdout", stdout)):
        lines = text.rstrip().splitlines()[-TAIL_LINES:]
        if lines:
            parts.append(f"Last {name} lines:\n" + "\n".join(lines))
    return "\n".join(parts) or "It printed nothing."


def _x60(blocks: Path | list[ExecutedBlock], elf: Path, cache: dict[str, float]) -> tuple[dict[str, float], str]:
    """The X60 model's counters of the windows (totals), or why there are none."""
    try:
        return dict(x60_counters(blocks, elf, cache=cache)), ""
    except Exception as exc:  # the model is an estimate beside exact counts: its failure is reported in place
        # of its figure (a traceback would lose the counts)
        return {}, f"the X60 model failed: {type(exc).__name__}: {exc}"


def is_vector_insn(insn: bytes) -> bool:
    """An RVV instruction: major opcode OP-V, or LOAD-FP/STORE-FP with a vector width (0, 5, 6, 7); the
    plugin's own test (icount.c ``is_vector``)."""
    if len(insn) != 4:
        return False
    word = int.from_bytes(insn, "little")
    opcode, width = word & 0x7F, (word >> 12) & 0x7
    return opcode == 0x57 or (opcode in (0x07, 0x27) and (width == 0 or width >= 5))


__all__ = ["CountError", "LaunchWindow", "WindowCounts", "count_window", "is_vector_insn", "resolve_window"]
