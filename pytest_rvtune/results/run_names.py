"""Naming a run by its age: ``latest`` is the newest results file of the project, ``latest~N`` the one N runs
before it (as git's ``HEAD~N``). Wherever a run is named (rvtune report, compare, export-best, count
--compare-to, noise, correlate; --rvtune-compare, --rvtune-resume, --rvtune-shortlist), a name of this form that is
not an existing file is resolved here, in the project's results directory (``.rvtune/results``).

Runs are ordered by when they started: the run id a session names its file with starts with its UTC start time
(writer.new_run_id); a file named otherwise (--rvtune-results) counts by its modification time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.results.records import RunFileError

LATEST = re.compile(r"latest(?:~(\d+))?")
_RUN_ID_TIME = re.compile(r"(\d{8}T\d{6})-")
#: Result file suffixes that name runs.
SUFFIXES = (".jsonl",)


def started(path: Path) -> str:
    """A sortable start time: the run id's, else the file's modification time, in the same form."""
    match = _RUN_ID_TIME.match(path.name)
    if match:
        return match[1]
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y%m%dT%H%M%S")


def started_label(path: Path) -> str:
    """started() as ``YYYY-MM-DD HH:MM`` (UTC), for a listing."""
    stamp = started(path)
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]}"


def named_runs(files: list[Path]) -> list[tuple[str, Path]]:
    """``files`` (runs_in's, oldest first) each with the name that reaches it: ``latest`` for the newest,
    ``latest~N`` for the one N runs before it."""
    last = len(files) - 1
    return [("latest" if i == last else f"latest~{last - i}", path) for i, path in enumerate(files)]


def runs_in(directory: Path) -> list[Path]:
    """The results files of ``directory``, oldest first (empty files, runs that recorded nothing, left out)."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if p.suffix in SUFFIXES and p.is_file() and p.stat().st_size > 0]
    return sorted(found, key=lambda p: (started(p), p.name))


def resolve(name: str | Path, exclude: Path | None = None, directory: Path | None = None) -> Path:
    """``name`` as a path: itself when it is not ``latest``/``latest~N`` or a file of that name exists; else the
    run it names in ``directory`` (default: the project's results directory), leaving ``exclude`` out (the
    session's own results file). Raises RunFileError naming the directory and how many runs it holds."""
    path = Path(name)
    match = LATEST.fullmatch(str(name))
    if match is None or path.exists():
        return path
    back = int(match[1] or 0)
    directory = directory or paths.results_dir()
    runs = [p for p in runs_in(directory) if exclude is None or p.resolve() != exclude.resolve()]
    if back >= len(runs):
        held = f"holds {len(runs)} run{'' if len(runs) == 1 else 's'}" if runs else "holds no run"
        raise RunFileError(f"{name}: {directory} {held}, so there is no {name} (`rvtune runs` lists them; "
                           "latest~N counts back from the newest, latest~0 is latest)")
    return runs[-1 - back]
