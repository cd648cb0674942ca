"""The Target protocol and what a run gives back.

A target knows how to put files where an ELF can read them and how to run that ELF once; it knows
nothing of pytest, kernels or golden data. Arguments that are files are given as ``Path`` objects and the
target substitutes the path the ELF sees (a local path, or a content-addressed file on a board).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

TimingSource = Literal["emulated", "real"]


@dataclass(frozen=True)
class Check:
    """One output comparison reported by the harness (an `RVTUNE check ...` line, or another output format's
    check line, which may give no error sizes: nan, and -1 for an unknown first_bad or count)."""

    name: str
    ok: bool
    max_abs: float
    max_rel: float
    first_bad: int  # -1 when every element matched (or, in a format that does not say, unknown)
    count: int  # elements wrong; -1 when the harness does not say
    sizes_given: bool = True  # max_abs/max_rel came from the harness (a nan then means NaN in the output)


@dataclass
class RunResult:
    """Everything one ELF run produced. Never raises for a failing ELF: the verdict is the caller's."""

    returncode: int | None  # None when the run was killed at its timeout
    samples_ns: list[int] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # `RVTUNE error ...` lines: bad input files etc.
    launches: int | None = None  # kernel launches the harness made (`RVTUNE launches`), when it said
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    signal: int | None = None  # the signal that killed the ELF, if any
    wall_s: float = 0.0

    @property
    def all_checks_ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


@runtime_checkable
class Target(Protocol):
    name: str
    isa: str  # "rv64gcv_zvl256b" or "host": which build this target runs
    timing_source: TimingSource

    def identity(self) -> dict[str, str]:
        """ISA, VLEN, board, kernel, toolchain: becomes pytest-benchmark machine_info."""
        ...

    def prepare(self, files: Sequence[Path]) -> None:
        """Make files available to later runs (upload once by content hash on remote targets)."""
        ...

    def run(
        self,
        elf: Path,
        args: Sequence[str | Path],
        timeout: float,
        *,
        kernel_symbol: str | None = None,
    ) -> RunResult:
        """Run ``elf args...`` once; Path arguments are files the ELF reads. Kill it at ``timeout``."""
        ...

    def close(self) -> None: ...
