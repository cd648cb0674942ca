"""Read a finished (or killed) run into one list of records, whatever file it was saved in.

Two inputs carry the same facts: our results file (JSON lines, one object per finished item, see
docs/contracts.md) and pytest-benchmark JSON, whose ``benchmarks[].extra_info`` holds the same fields. Everything
that analyses numbers (report, compare, export, plots, correlation) starts from :func:`load_run`, so it never
cares which file the user pointed at. Nothing here knows pytest.

Configs are ranked within a *group*: one target, kernel, case and problem. The problem is the values of the
kernel module's PROBLEM_KEYS (e.g. ``{"IS_CAUSAL": true}``), config keys that change what is computed: a causal
attention config does half the work of a non-causal one, so the two are never ranked against each other.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pytest_rvtune.counters import ICOUNT_KEYS, LAUNCH_COUNTER, X60_CYCLES
from pytest_rvtune.results.records import (
    REQUIRED_FIELDS,
    GroupKey,
    RunFileError,
    RunFileWarning,
    RunRecord,
    SharedValues,
    record_from_dict,
)
from pytest_rvtune.results.run_names import resolve
from pytest_rvtune.verdict import Outcome

#: Instruction counts from our QEMU plugin: deterministic, so any change between runs is real.
DETERMINISTIC_COUNTERS: frozenset[str] = frozenset(ICOUNT_KEYS)

#: What ranks configs under emulation, in order of preference: QEMU wall time is not performance. ``x60_cycles``
#: first: the X60 model's cycles of the whole launch (x60/model.py: every executed instruction priced by the chip's
#: measured cost at its SEW/LMUL, in-order dual issue, a vector unit beside the scalar pipe, DRAM bandwidth).
#: Then ``launch_insns`` (every guest instruction of the launch: grid walk, kernel and the libc calls it makes, e.g.
#: memset, each counting 1) for results recorded before the model, and ``kernel_insns`` (inside the kernel symbol
#: only) for results recorded before the plugin counted launches. In-kernel counts alone can flip a ranking: a
#: config whose work moves into memset looks cheaper.
EMULATED_RANK_COUNTERS: tuple[str, ...] = (X60_CYCLES, LAUNCH_COUNTER, "kernel_insns")
EMULATED_RANK_COUNTER = EMULATED_RANK_COUNTERS[0]


@dataclass
class Run:
    """A loaded run: its records (last one wins when an item was recorded twice) and where it came from."""

    path: Path
    records: list[RunRecord]
    format: str  # "jsonl" or "pytest-benchmark"
    machine_info: dict[str, Any] = field(default_factory=dict)
    _index: dict[tuple[str, str, str, str], RunRecord] | None = field(default=None, init=False, repr=False)

    def by_key(self) -> dict[tuple[str, str, str, str], RunRecord]:
        return {r.key: r for r in self.records}

    def index(self) -> dict[tuple[str, str, str, str], RunRecord]:
        """by_key, made once and kept (find and the comparisons share it)."""
        if self._index is None:
            self._index = self.by_key()
        return self._index

    def find(self, item: RunRecord | dict[str, Any]) -> RunRecord | None:
        """This run's record of the same item (target, kernel, case, config id), or None."""
        key = item.key if isinstance(item, RunRecord) else (
            str(item.get("target", "")), str(item.get("kernel", "")), str(item.get("case", "")),
            str(item.get("config_id", "")))
        return self.index().get(key)


def identity_key(identity: dict[str, Any]) -> str:
    """A stable string for "the same target": its identity dict (ISA, VLEN, board, kernel, toolchain)."""
    return json.dumps(identity, sort_keys=True, default=str)


#: Outcomes whose result does not change when the same ELF runs on the same data on the same target again:
#: a resumed run keeps them. Crashes, timeouts and errors may be a board's fault, so they run again.
RESUMABLE_OUTCOMES: frozenset[Outcome] = frozenset({"passed", "wrong"})


def completed_items(run: Run) -> dict[tuple[str, str], RunRecord]:
    """Items a resumed run need not repeat, keyed by (verdict key: everything that decided the verdict, see
    verdict_key.py; identity_key of the target's identity, i.e. the record's ``machine``). A record without a
    verdict key (written before it existed) is not resumable: what decided it is not known."""
    from pytest_rvtune.verdict_key import RECORD_FIELD
    done: dict[tuple[str, str], RunRecord] = {}
    for record in run.records:
        key = record.raw.get(RECORD_FIELD)
        if record.outcome in RESUMABLE_OUTCOMES and isinstance(key, str) and key:
            done[(key, identity_key(record.machine))] = record
    return done


def group_by_problem(records: Iterable[RunRecord]) -> dict[GroupKey, list[RunRecord]]:
    """(target, kernel, case, problem id) -> its records, in first-seen order: the unit every analysis ranks
    configs within (configs of different problems, e.g. causal and non-causal attention, never compete)."""
    groups: dict[GroupKey, list[RunRecord]] = {}
    for record in records:
        groups.setdefault(record.group, []).append(record)
    return groups


def has_problems(records: Iterable[RunRecord]) -> bool:
    """Whether any record carries problem keys: tables then show a problem column (else they stay as before)."""
    return any(r.problem for r in records)


class MetricError(ValueError):
    """A --rank-by metric that no record has; the message lists the metrics present."""


def metrics_present(records: Iterable[RunRecord]) -> list[str]:
    """What the valid records can be ranked by: ``time`` when any has samples, then every counter any has
    (the emulated ranking counters first)."""
    names: set[str] = set()
    timed = False
    for record in records:  # one pass, nothing held: ``records`` may be a run read as it streams (iter_run)
        if record.valid:
            names.update(record.counters)
            timed = timed or record.n_samples > 0
    first = [n for n in EMULATED_RANK_COUNTERS if n in names]
    return (["time"] if timed else []) + first + sorted(names - set(first))


def check_rank_by(records: Iterable[RunRecord], rank_by: str | None, source: str = "the results") -> None:
    """Raise MetricError unless ``rank_by`` (None: the default) is a metric some valid record has."""
    if rank_by is None:
        return
    present = metrics_present(records)
    if rank_by not in present:
        raise MetricError(f"--rank-by {rank_by}: no valid record in {source} has it; metrics present: "
                          f"{', '.join(present) or 'none'}")


def rank_metric(records: Iterable[RunRecord], rank_by: str | None = None) -> str:
    """What to rank a group by: ``rank_by`` when every valid record of the group has it (check_rank_by has
    checked that some record does: a group without it keeps its default). The default: when every valid record
    is emulated, the first of EMULATED_RANK_COUNTERS that every one has; else time."""
    valid = [r for r in records if r.valid]
    if rank_by == "time" and any(r.n_samples for r in valid):
        return "time"
    if rank_by is not None and valid and all(rank_by in r.counters for r in valid):
        return rank_by
    if valid and all(r.emulated for r in valid):
        for counter in EMULATED_RANK_COUNTERS:
            if all(counter in r.counters for r in valid):
                return counter
    return "time"


def metric_value(record: RunRecord, metric: str) -> float | None:
    """The number a config is ranked by: median time in ns, or a counter."""
    if metric == "time":
        return record.median_ns
    value = record.counters.get(metric)
    return None if value is None else float(value)


def ranked_value(record: RunRecord, metric: str) -> float:
    """metric_value of a record known to have the metric (one report.ranked kept); ValueError otherwise."""
    value = metric_value(record, metric)
    if value is None:
        raise ValueError(f"record {record.config_id} of {record.kernel} has no {metric}: it is not ranked")
    return value


def metric_samples(record: RunRecord, metric: str) -> list[float]:
    """Samples of a metric for significance tests: time samples, or the single (exact) counter value."""
    if metric == "time":
        return list(record.samples_ns)
    value = metric_value(record, metric)
    return [] if value is None else [value]


# --- loading ---------------------------------------------------------------------------------------------


#: Skipped lines warned about one by one; beyond this, one warning counts the rest.
WARNED_LINES = 5


#: What the analyses (report, compare, export-best, noise, correlate, runs, history) read from a record's ``raw`` object
#: besides RunRecord's own fields: loading with ``fields=ANALYSIS_FIELDS`` keeps only these, not the whole object
#: (its checks and any text a future writer adds), so 10^5 records fit in a few times the file.
ANALYSIS_FIELDS: frozenset[str] = frozenset({
    "rounds", "threads", "rerun", "run_id", "wall_s", "run_seconds", "verdict_key",
    "git_commit", "git_dirty", "kernel_sha256",
    "kernel_default", "flops", "bytes", "code",  # the untuned config, the launch's work, its C/.s (report.py)
    "shortlisted_by",  # ranked_at.RECORD_FIELD: report and export-best's note on a ranking made at another size
})


#: What load_run keeps of each record as it reads it: the record itself, or a summary of it (records.summarise).
Reducer = Callable[[RunRecord], RunRecord]


def load_run(path: str | Path, *, allow_empty: bool = False, fields: frozenset[str] | None = None,
             reduce: Reducer | None = None) -> Run:
    """Read our results JSONL or a pytest-benchmark JSON file (or ``latest``, ``latest~N``: run_names.py). Raises
    RunFileError naming the problem.

    A JSONL file is read one line at a time: what is held is the records (the last one of each item), never the
    file. ``fields``: keep only these fields of each object as the record's ``raw`` (ANALYSIS_FIELDS for the
    analyses); None keeps the whole object (a resumed item re-records it as it was written). ``reduce``: what to
    keep of each record instead of itself (e.g. records.summarise: its samples' statistics, not the samples),
    applied as each line is read, so the whole records are never held together.

    Torn lines (a write cut short by a kill or a full disk, anywhere in the file) are skipped with a
    RunFileWarning naming file:line; the rest of the file still counts. A file without a single record is an
    error (it is not a run, or it was garbled) unless ``allow_empty`` (a results file about to be appended to)."""
    path = resolve(path)  # latest, latest~N: a run of the project's results directory
    found = _Found()
    by_key: dict[tuple[str, str, str, str], RunRecord] = {}
    listed: list[RunRecord] = []  # pytest-benchmark's benchmarks, as listed
    for record in _read(path, allow_empty, fields, found):
        kept = record if reduce is None else reduce(record)
        if found.format == "jsonl":
            by_key.pop(record.key, None)  # a re-recorded item (rerun) replaces the earlier line, keeping order
            by_key[record.key] = kept
        else:
            listed.append(kept)
        del record, kept  # a reducer's record is not held while the next line is read
    run = Run(path=path, records=list(by_key.values()) if found.format == "jsonl" else listed, format=found.format,
              machine_info=found.machine_info)
    if not run.records and not allow_empty:
        raise RunFileError(f"{path}: no item records in it (a pytest-benchmark JSON without benchmarks); give "
                           "a run that recorded items")
    return run


def iter_run(path: str | Path, *, fields: frozenset[str] | None = None) -> Iterator[RunRecord]:
    """The records of a run one at a time, as they are read (``fields`` as load_run's): for a command that reduces
    them as it goes instead of holding them (`rvtune compare`'s new run). An item recorded twice comes twice, in
    file order: the last one counts, as in load_run. The same RunFileErrors and torn-line warnings as load_run."""
    path = resolve(path)
    count = 0
    for record in _read(path, False, fields, _Found()):
        count += 1
        yield record
    if not count:
        raise RunFileError(f"{path}: no item records in it (a pytest-benchmark JSON without benchmarks); give "
                           "a run that recorded items")


@dataclass
class _Found:
    """What _read found the file to be, set before its first record."""

    format: str = "jsonl"
    machine_info: dict[str, Any] = field(default_factory=dict)


def _read(path: Path, allow_empty: bool, fields: frozenset[str] | None, found: _Found) -> Iterator[RunRecord]:
    """The records of a results file in file order; RunFileError naming what is wrong with it."""
    try:
        with path.open("rb") as stream:
            first = _first_text_line(stream)
            if first is None:
                if allow_empty:
                    return
                raise RunFileError(f"{path}: empty results file (did the run record any item?)")
            # pytest-benchmark's JSON is one indented object: its first line is "{" alone (or, written without
            # indent, one line holding the whole document). A JSONL line is one whole record.
            whole = _whole_json(stream.read() if first.strip() == b"{" else b"", first)
            if isinstance(whole, dict) and "benchmarks" in whole:
                found.format, found.machine_info = "pytest-benchmark", whole.get("machine_info") or {}
                yield from _benchmark_records(path, whole)
            else:
                stream.seek(0)
                yield from _jsonl_records(path, stream, allow_empty, fields)
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such results file (give a .jsonl results file or a "
                           "pytest-benchmark --benchmark-json file)") from None
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _first_text_line(stream: BinaryIO) -> bytes | None:
    """The first line that is not blank (the stream is left after it), None if the whole file is blank."""
    for line in stream:
        if line.strip():
            return line
    return None


def _whole_json(rest: bytes, first: bytes) -> Any:
    """The document when the first line and ``rest`` (read only when the first line opens an indented object)
    are one JSON value, else None."""
    try:
        return json.loads(first + rest)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # JSON lines (several objects) or broken: the line reader names the bad line


def _jsonl_records(path: Path, stream: BinaryIO, allow_empty: bool,
                   fields: frozenset[str] | None) -> Iterator[RunRecord]:
    skipped: list[tuple[int, _BadLine]] = []
    shared = SharedValues()
    count = 0
    for number, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        obj, bad = _parse_line(raw.rstrip(b"\n"))
        if bad is not None:
            skipped.append((number, bad))
        if obj is None:
            continue
        count += 1
        yield record_from_dict(obj, f"{path}:{number}", raw_fields=fields, shared=shared)
    # Only torn records and nothing else: a results file killed during its first write, still ours to append to.
    if skipped and not count and not (allow_empty and all(b.torn_record for _, b in skipped)):
        number, first = skipped[0]
        kind = "binary data, not a results file" if any(b.binary for _, b in skipped) else "not a results file"
        raise RunFileError(f"{path}: {kind}: no line of it is an item record ({len(skipped)} unreadable line(s), "
                           f"the first, line {number}: {first.why}); give a .jsonl results file or a "
                           "pytest-benchmark --benchmark-json file")
    for number, bad in skipped[:WARNED_LINES]:
        kept = (f"its first {bad.kept_from} characters skipped, the record after them kept" if bad.kept_from
                else "skipped")
        warnings.warn(f"{path}:{number}: {bad.why}: {kept}", RunFileWarning, stacklevel=4)
    if len(skipped) > WARNED_LINES:
        warnings.warn(f"{path}: {len(skipped) - WARNED_LINES} more unreadable line(s) skipped (lines "
                      f"{', '.join(str(n) for n, _ in skipped[WARNED_LINES:WARNED_LINES + 10])}"
                      f"{', ...' if len(skipped) > WARNED_LINES + 10 else ''})", RunFileWarning, stacklevel=4)


@dataclass(frozen=True)
class _BadLine:
    """A line that is not one whole JSON value: why, whether it is binary, where a glued-on record starts."""

    why: str
    binary: bool = False
    kept_from: int = 0  # > 0: a whole record starts at this character and was kept
    torn_record: bool = False  # starts as every record does: a record cut short, not some other file's text


def _parse_line(raw: bytes) -> tuple[Any, _BadLine | None]:
    """The line's object (None if there is none) and what is wrong with the line (None if nothing)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, _BadLine(f"not UTF-8 text (byte {exc.start})", binary=True)
    if "\0" in line:
        return None, _BadLine("NUL bytes (binary data or a crash's zero-filled block)", binary=True)
    try:
        return json.loads(line), None
    except json.JSONDecodeError as exc:
        torn = line.startswith('{"')  # starts as every record does: a record cut short, not some other text
        why = f"not a JSON object ({exc.msg})" + (", a torn line (a run killed mid-write or a full disk?)" if torn
                                                  else "")
    # A fragment with a whole record glued on (written before the writer ended fragments): keep the record.
    start = line.find('{"', 1)
    while start != -1:
        try:
            obj = json.loads(line[start:])
        except json.JSONDecodeError:
            start = line.find('{"', start + 1)
            continue
        if isinstance(obj, dict) and all(name in obj for name in REQUIRED_FIELDS):
            return obj, _BadLine(why, kept_from=start, torn_record=True)
        break
    return None, _BadLine(why, torn_record=torn)


def _benchmark_records(path: Path, doc: dict[str, Any]) -> Iterator[RunRecord]:
    benchmarks = doc.get("benchmarks") or []
    if not isinstance(benchmarks, list):
        raise RunFileError(f"{path}: benchmarks must be a list of benchmark objects; is this a pytest-benchmark "
                           "--benchmark-json file?")
    for index, bench in enumerate(benchmarks):
        if not isinstance(bench, dict) or not isinstance(bench.get("extra_info") or {}, dict):
            raise RunFileError(f"{path}: benchmarks[{index}]: expected an object with an extra_info object, got "
                               f"{bench!r:.80}; is this a pytest-benchmark --benchmark-json file?")
        where = f"{path}: benchmarks[{index}] ({bench.get('fullname') or bench.get('name', '?')})"
        extra = dict(bench.get("extra_info") or {})
        if "samples_ns" not in extra:
            # pytest-benchmark keeps raw samples (seconds) only with --benchmark-save-data.
            data = (bench.get("stats") or {}).get("data") or []
            extra["samples_ns"] = [float(s) * 1e9 for s in data]
        extra.setdefault("nodeid", bench.get("fullname", ""))
        yield record_from_dict(extra, where)
