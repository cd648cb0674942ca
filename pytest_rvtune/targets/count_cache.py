"""Measure once: an emulated run's result, reused while nothing that decides it has changed.

Under QEMU a run is deterministic: the same ELF, input data, argv, QEMU build and counter plugin give the same
instruction counts (and the same emulated times would tell nothing new: they are not performance). So the
result of a clean run is kept as a content-addressed record, ``<cache>/counts/<key[:2]>/<key>.json``, and a later
run of the same key reads it instead of starting QEMU. A per-key file lock makes a worker that needs a key
another worker is measuring wait for that result instead of measuring it again.

Only targets that say what decides their results (``count_fingerprint()``: QemuTarget) are cached; real timings
(host, boards) are always measured. Nothing here knows pytest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_rvtune import paths, repairs
from pytest_rvtune.compiler.cache import cache_key, mark_used
from pytest_rvtune.counters import REQUIRED_ICOUNT_KEYS
from pytest_rvtune.hashing import argv_by_content, files_by_content
from pytest_rvtune.targets.base import Check, RunResult

#: Bump when the stored record's shape or meaning changes: older records are then never read.
RECORD_VERSION = 2  # 2: the result's sha256 is stored with it and checked


def fingerprint_of(target: Any) -> dict[str, str] | None:
    """What decides the target's results besides the ELF, data and argv; None for a target whose results
    must be measured every time (real hardware)."""
    fingerprint = getattr(target, "count_fingerprint", None)
    if getattr(target, "timing_source", None) != "emulated" or not callable(fingerprint):
        return None
    return dict(fingerprint())


def count_key(*, elf_sha256: str, data_sha256: str, fingerprint: Mapping[str, str], argv: Sequence[Any],
              kernel_symbol: str | None, files: Mapping[str, Path] | None = None,
              output_format: str | None = None) -> str:
    """The key of one run. File arguments count by content (the same data at another path is the same run);
    ``files`` are the relative paths an external harness opens, with their content."""
    args = argv_by_content(argv)
    laid_out = files_by_content(files)
    return cache_key(kind="counts", version=RECORD_VERSION, elf=elf_sha256, data=data_sha256,
                     target=dict(fingerprint), argv=args, symbol=kernel_symbol or "", files=laid_out,
                     output_format=output_format or "")


def reusable(result: RunResult) -> bool:
    """A clean run with its counts: anything else (a crash, a timeout, a killed plugin) is measured again."""
    return (result.returncode == 0 and not result.timed_out and result.signal is None and not result.errors
            and all(k in result.counters for k in REQUIRED_ICOUNT_KEYS))


def _entry(key: str) -> Path:
    return paths.cache_dir() / "counts" / key[:2] / f"{key}.json"


def _result_sha(result: Mapping[str, Any]) -> str:
    """The sha256 of a stored result, as canonical JSON: a record carries it and is checked against it."""
    return hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()


def _load(path: Path) -> tuple[RunResult | None, str | None]:
    """(the stored result, None), (None, None) when there is none (or of an older version), or (None, why it is
    damaged)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:  # a record is published with one rename: a torn one was damaged later
        return None, f"unreadable ({type(exc).__name__}: {exc})"
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not a record"
    if data.get("version") != RECORD_VERSION:
        return None, None
    if data.get("key", path.stem) != path.stem:  # a whole record of another run, copied or renamed here
        return None, f"it is the record of key {str(data.get('key'))[:16]}..., not of its own name"
    stored = data.get("result")
    if not isinstance(stored, dict) or data.get("sha256") != _result_sha(stored):
        return None, "its result does not match the sha256 stored with it"
    try:
        fields = dict(stored)
        fields["checks"] = [Check(**c) for c in fields.get("checks", [])]
        return RunResult(**fields), None
    except (TypeError, ValueError) as exc:
        return None, f"its result has the wrong fields ({exc})"


def record_problem(path: Path) -> str | None:
    """Why the record at ``path`` cannot be used (None: intact, absent or of an older version)."""
    return _load(path)[1]


def load_checked(path: Path) -> RunResult | None:
    """The result stored at ``path``; a damaged record is removed and reported (repairs.py), and None returned."""
    result, problem = _load(path)
    if problem is not None:
        path.unlink(missing_ok=True)
        repairs.note(f"count cache record {path} was damaged ({problem}): removed and measured again")
    return result


def _store(path: Path, result: RunResult, about: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    stored = dataclasses.asdict(result)
    record = {"version": RECORD_VERSION, "key": path.stem, "about": dict(about), "result": stored,
              "sha256": _result_sha(stored)}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def measure_once(key: str, run: Callable[[], RunResult], about: Mapping[str, Any] | None = None,
                 timeout: float | None = None) -> tuple[RunResult, bool]:
    """``run()``'s result for ``key``, from the cache when it is there: (result, cache hit). ``about`` (what
    was run, for a person reading the cache) is stored beside a new result. A stored run that took ``timeout``
    seconds or longer is not reused: run now, it would be killed (the timeout is no part of the key, so a
    changed timeout that the run fits in still reuses it)."""
    path = _entry(key)

    def fits(result: RunResult | None) -> RunResult | None:
        return result if result is not None and (timeout is None or result.wall_s < timeout) else None

    cached = fits(load_checked(path))
    if cached is not None:
        mark_used(path)
        return cached, True
    locks = paths.cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / f"counts-{key}.lock")):
        cached = fits(load_checked(path))  # measured by another worker while this one waited
        if cached is not None:
            mark_used(path)
            return cached, True
        result = run()
        if reusable(result):
            _store(path, result, about or {})
    return result, False
