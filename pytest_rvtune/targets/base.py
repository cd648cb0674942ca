"""The Target protocol and what a run gives back.

A target knows how to put files where an ELF can read them and how to run that ELF once; it knows
nothing of pytest, kernels or golden data. Arguments that are files are given as ``Path`` objects and the
target substitutes the path the ELF sees (a local path, or a content-addressed file on a board). A harness
that opens files by relative path (a Triton_RVV one reads ``matmul/run/test_data/...``) gets ``files``: the
ELF then runs in a fresh directory where each relative path resolves to its file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from pytest_rvtune.harness.check import Check

if TYPE_CHECKING:
    from pytest_rvtune.harness.output_format import OutputFormat


TimingSource = Literal["emulated", "real"]


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
        files: Mapping[str, Path] | None = None,
        output_format: OutputFormat | None = None,
    ) -> RunResult:
        """Run ``elf args...`` once; Path arguments are files the ELF reads. Kill it at ``timeout``.

        ``files``: relative POSIX path -> local file, placed so that the ELF, run in a fresh directory, opens
        them by those paths (checked by ``run_dir_files``). ``output_format``: how to read the ELF's output
        (default: our RVTUNE protocol).
        """
        ...

    def close(self) -> None: ...


class BoardError(RuntimeError):
    """A board cannot be used (unreachable, auth, host key, wrong ISA/VLEN, full disk, lost mid-run)."""


class BoardLostError(BoardError):
    """The board went away mid-session and reconnecting failed: later runs on it would fail the same way.
    Defined here, not in ssh.py, so the item pipeline can tell it without importing asyncssh (the [boards]
    extra)."""


class RunFilesError(ValueError):
    """A ``files`` mapping a target cannot lay out: names the path and what is wrong with it."""


def run_dir_files(files: Mapping[str, Path] | None) -> dict[PurePosixPath, Path]:
    """Check ``files`` (relative POSIX path -> existing local file) for a run directory.

    Rejected: absolute paths, ``..`` or ``.`` parts, empty paths, backslashes (a Windows-style path would be
    one odd file name on the board), and a path that is also the directory of another.
    """
    out: dict[PurePosixPath, Path] = {}
    for key, local in (files or {}).items():
        rel = PurePosixPath(key)
        if not key or key.startswith("/") or rel.is_absolute():
            raise RunFilesError(f"run file {key!r}: must be a relative path (it is placed in the run directory)")
        if "\\" in key or any(part in ("..", ".") for part in key.split("/")) or "" in key.split("/"):
            raise RunFilesError(f"run file {key!r}: use plain relative POSIX parts (no '..', '.', '//' or '\\')")
        if not Path(local).is_file():
            raise RunFilesError(f"run file {key!r}: its source {local} is not a file")
        out[rel] = Path(local).resolve()
    for rel in out:
        for parent in rel.parents:
            if parent in out:
                raise RunFilesError(f"run files {str(parent)!r} and {str(rel)!r}: the first is a file, so it "
                                    "cannot also be a directory of the second")
    return out
