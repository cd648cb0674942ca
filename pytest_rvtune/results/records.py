"""One item's record as analysis reads it back (RunRecord), from one results-file object or pytest-benchmark
extra_info (record_from_dict); the time statistics and the group configs are ranked within. Nothing here knows
pytest; the line as written is results/writer.py's RecordDict.
"""

from __future__ import annotations

import math
import statistics
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from pytest_rvtune.spec import config_id
from pytest_rvtune.verdict import ITEM_OUTCOMES, Outcome, finite_only, is_outcome, non_finite

#: (target, kernel, case, problem id): the unit every analysis ranks configs within.
GroupKey = tuple[str, str, str, str]


#: How compare and noise summarise an item's time samples. "min" (the default there) follows Chen & Revels,
#: "Robust benchmarking in noisy environments" (2016, BenchmarkTools.jl's judge): interference only ever
#: adds time, so the minimum of samples spread over time is the estimate that repeats between sessions.
#: The median (what reports rank by) moves with the share of slow spells a session happened to catch.
TIME_STATISTICS = ("min", "median")


DEFAULT_STATISTIC = "min"


#: Outcomes whose samples and counters are a valid measurement: "regressed" is a passed item that a
#: --rvtune-compare gate then failed against its base; its numbers are as good as any.
VALID_OUTCOMES: frozenset[Outcome] = frozenset({"passed", "regressed"})


class RunFileError(ValueError):
    """A results file that cannot be read; the message names the file (and line) and what to do."""


class RunFileWarning(UserWarning):
    """Part of a results file was skipped (a torn line) or is not a measurement (a NaN sample); the message names
    the file and line."""


# slots: a results file of 10^5 records is held as 10^5 of these; weakref: the streaming tests count those alive
@dataclass(slots=True, weakref_slot=True)
class RunRecord:
    """One item's outcome: kernel x case x config on one target."""

    kernel: str
    case: str
    config: dict[str, Any]
    config_id: str
    target: str
    outcome: Outcome
    samples_ns: list[float] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)
    timing_source: str = "real"  # "emulated" under QEMU
    elf_sha256: str = ""
    golden_sha256: str = ""
    machine: dict[str, Any] = field(default_factory=dict)
    nodeid: str = ""
    message: str = ""
    time: str = ""  # ISO 8601, when the item finished
    wall_s: float | None = None  # whole-process time of the timed run (record's wall_s or run_seconds)
    case_params: dict[str, Any] = field(default_factory=dict)  # e.g. {"M": 64}: used for M buckets
    problem: dict[str, Any] = field(default_factory=dict)  # PROBLEM_KEYS values, e.g. {"IS_CAUSAL": True}
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the object as read

    # dict(record) gives the object as it was read (with fields this class does not model, e.g. checks):
    # a resumed item re-records exactly what the earlier run wrote.
    def keys(self) -> Iterable[str]:
        return self.raw.keys()

    def __getitem__(self, name: str) -> Any:
        return self.raw[name]

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What identifies the same item in two runs (pytest-benchmark matches by name the same way)."""
        return (self.target, self.kernel, self.case, self.config_id)

    @property
    def problem_id(self) -> str:
        """``IS_CAUSAL=True`` (the config-id format), ``""`` when the kernel has no problem keys."""
        return config_id(self.problem)

    @property
    def group(self) -> GroupKey:
        """The group this record is ranked in: (target, kernel, case, problem id)."""
        return (self.target, self.kernel, self.case, self.problem_id)

    @property
    def group_label(self) -> str:
        """The case as people read it: ``emu``, or ``emu IS_CAUSAL=True`` when the kernel has problem keys."""
        return group_label(self.case, self.problem_id)

    @property
    def valid(self) -> bool:
        """A right answer with its timings: passed, or failed only by a --rvtune-compare gate ("regressed")."""
        return self.outcome in VALID_OUTCOMES

    @property
    def emulated(self) -> bool:
        return self.timing_source == "emulated"

    @property
    def n_samples(self) -> int:
        return len(self.samples_ns)

    @property
    def median_ns(self) -> float | None:
        return statistics.median(self.samples_ns) if self.samples_ns else None

    @property
    def min_ns(self) -> float | None:
        return float(min(self.samples_ns)) if self.samples_ns else None

    def time_ns(self, statistic: str) -> float | None:
        """The time of this item by one of TIME_STATISTICS."""
        if statistic not in TIME_STATISTICS:
            raise ValueError(f"time statistic {statistic!r}: expected one of {', '.join(TIME_STATISTICS)}")
        return self.min_ns if statistic == "min" else self.median_ns

    @property
    def iqr_ns(self) -> float | None:
        # Quartiles by the "inclusive" method, as pytest-benchmark's stats do, so our IQR matches its table.
        if len(self.samples_ns) < 2:
            return 0.0 if self.samples_ns else None
        q1, _, q3 = statistics.quantiles(self.samples_ns, n=4, method="inclusive")
        return q3 - q1

    @property
    def label(self) -> str:
        return f"{self.kernel}[{self.case}-{self.config_id}] on {self.target}"


class _ReducedSamples(list[float]):
    """The samples of a SummarisedRecord: gone, only their statistics kept. Reading them is a bug of the caller
    (it would rank or test on no samples); it fails loudly instead."""

    def _gone(self, *_: Any) -> Any:
        raise TypeError("the time samples of this record were reduced to their statistics while reading "
                        "(SummarisedRecord): use n_samples, median_ns, min_ns or iqr_ns, or load the run whole")

    __len__ = __iter__ = __bool__ = __getitem__ = _gone


REDUCED_SAMPLES: list[float] = _ReducedSamples()
_NO_FIELDS: dict[str, Any] = {}  # shared by every summary without raw fields: never modified


@dataclass(slots=True)
class SummarisedRecord(RunRecord):
    """A record reduced while reading to what a ranking reads (`rvtune report`): the time samples become their
    statistics (n, median, min, IQR) and ``raw`` keeps only the fields asked for. A results file of 10^5 items is
    held as 10^5 of these, each about half a RunRecord; the analyses take it as a RunRecord."""

    stats: tuple[int, float | None, float | None, float | None] = (0, None, None, None)  # n, median, min, IQR

    @property
    def n_samples(self) -> int:
        return self.stats[0]

    @property
    def median_ns(self) -> float | None:
        return self.stats[1]

    @property
    def min_ns(self) -> float | None:
        return self.stats[2]

    @property
    def iqr_ns(self) -> float | None:
        return self.stats[3]


def summarise(record: RunRecord, raw_fields: frozenset[str] = frozenset()) -> SummarisedRecord:
    """``record`` reduced to a SummarisedRecord keeping ``raw_fields`` of its raw object (a reducer for
    runs.load_run: the whole record is dropped as soon as the next line is read)."""
    raw = {k: record.raw[k] for k in raw_fields if k in record.raw} or _NO_FIELDS
    return SummarisedRecord(
        kernel=record.kernel, case=record.case, config=record.config, config_id=record.config_id,
        target=record.target, outcome=record.outcome, samples_ns=REDUCED_SAMPLES, counters=record.counters,
        timing_source=record.timing_source, elf_sha256=record.elf_sha256, golden_sha256=record.golden_sha256,
        machine=record.machine, nodeid=record.nodeid, message=record.message, time=record.time,
        wall_s=record.wall_s, case_params=record.case_params, problem=record.problem, raw=raw,
        stats=(record.n_samples, record.median_ns, record.min_ns, record.iqr_ns))


def slim(record: RunRecord, raw_fields: frozenset[str] = frozenset()) -> RunRecord:
    """``record`` keeping only ``raw_fields`` of its raw object, and its samples (a reducer for runs.load_run, for a
    command that tests samples: `rvtune export-best`)."""
    return replace(record, raw={k: record.raw[k] for k in raw_fields if k in record.raw} or _NO_FIELDS)


def group_label(case: str, problem_id: str) -> str:
    """``emu`` or ``emu IS_CAUSAL=True``: a case and problem as one name for headings and tables."""
    return f"{case} {problem_id}" if problem_id else case


REQUIRED_FIELDS = ("kernel", "case", "config_id", "target", "outcome")


class SharedValues:
    """Values many records of one file repeat (target, kernel, case, config keys, the machine, case params,
    problem, the golden sha): one object each instead of one per record. Records share them: never modified."""

    def __init__(self) -> None:
        self._mappings: dict[str, dict[str, Any]] = {}

    def text(self, value: Any) -> str:
        return sys.intern(str(value))

    def keys(self, mapping: dict[str, Any]) -> dict[str, Any]:
        return {sys.intern(str(k)): v for k, v in mapping.items()}

    def mapping(self, mapping: dict[str, Any]) -> dict[str, Any]:
        """One dict for equal machines, case params and problems (a file holds a handful of each)."""
        key = repr(sorted(mapping.items(), key=lambda kv: str(kv[0])))
        return self._mappings.setdefault(key, mapping)


def record_from_dict(obj: Any, where: str = "record", *, raw_fields: frozenset[str] | None = None,
                     shared: SharedValues | None = None) -> RunRecord:
    """A RunRecord from one results-file object (or extra_info); RunFileError names ``where`` if it is bad.

    ``raw_fields``: keep only these of the object's fields as ``raw`` (what an analysis reads from it besides
    the modelled fields), not all of them (None: all, for a resumed item that re-records the object as it was).
    ``shared``: the file's SharedValues, so repeated strings and machines are held once."""
    if not isinstance(obj, dict):
        raise RunFileError(f"{where}: expected a JSON object with the item's fields, got {type(obj).__name__}")
    missing = [name for name in REQUIRED_FIELDS if name not in obj]
    if missing:
        raise RunFileError(f"{where}: missing field(s) {', '.join(missing)}; is this a pytest-rvtune results "
                           "file (or a pytest-benchmark JSON written with the rvtune plugin)?")
    _check_types(obj, where)
    try:
        samples = [float(s) for s in obj.get("samples_ns") or []]
        counters = {sys.intern(str(k)): float(v) for k, v in (obj.get("counters") or {}).items() if v is not None}
    except (TypeError, ValueError) as exc:
        raise RunFileError(f"{where}: samples_ns and counters must be numbers ({exc})") from None
    outcome, message = obj["outcome"], str(obj.get("message") or "")
    bad = non_finite(samples, counters)
    if bad:  # NaN would rank first (every comparison with it is false) or break a test: not a measurement
        samples = [s for s in samples if math.isfinite(s)]
        counters = finite_only(counters)
        if is_outcome(outcome) and outcome in VALID_OUTCOMES:
            outcome, message = "error", f"{bad} in the results file: not a measurement"
        warnings.warn(f"{where}: {obj['kernel']}[{obj['case']}-{obj['config_id']}] on {obj['target']}: {bad}: "
                      "read as an error (not ranked, not compared); was the file edited, or did the target report "
                      "it?", RunFileWarning, stacklevel=2)
    # whole-process time of the item's timed ELF run (warm-up + runs): the seeds' "Total Time (s)"
    wall = obj.get("wall_s") or obj.get("run_seconds") or None  # 0.0 means "resumed, not run": unknown
    if not is_outcome(outcome):
        raise RunFileError(f"{where}: outcome {outcome!r} is none of {', '.join(ITEM_OUTCOMES)}; is this a "
                           "pytest-rvtune results file?")
    problem = obj.get("problem") or {}  # absent in files written before problem keys existed: no problem keys
    if not isinstance(problem, dict):
        raise RunFileError(f"{where}: problem must be an object of problem-key values such as "
                           f'{{"IS_CAUSAL": true}}, got {problem!r}')
    share = shared or SharedValues()
    return RunRecord(
        kernel=share.text(obj["kernel"]),
        case=share.text(obj["case"]),
        config=share.keys(dict(obj.get("config") or {})),
        config_id=str(obj["config_id"]),
        target=share.text(obj["target"]),
        outcome=cast(Outcome, share.text(outcome)),
        samples_ns=samples,
        counters=counters,
        timing_source=share.text(obj.get("timing_source") or "real"),
        elf_sha256=str(obj.get("elf_sha256") or ""),
        golden_sha256=share.text(obj.get("golden_sha256") or ""),
        machine=share.mapping(dict(obj.get("machine") or {})),
        # the pytest node id: no analysis reads it; a slim record (raw_fields given) keeps it only if asked
        nodeid=str(obj.get("nodeid") or "") if raw_fields is None or "nodeid" in raw_fields else "",
        message=message,
        time=share.text(obj.get("time") or ""),  # to the second: many items of a run share one
        wall_s=None if wall is None else float(wall),
        case_params=share.mapping(share.keys(dict(obj.get("case_params") or {}))),
        problem=share.mapping(share.keys(dict(problem))),
        raw=dict(obj) if raw_fields is None else {k: obj[k] for k in raw_fields if k in obj},
    )


#: Fields that hold a JSON object, a list of numbers, a number or a string when present (null counts as absent).
_OBJECT_FIELDS = ("config", "counters", "machine", "case_params")
_NUMBER_FIELDS = ("wall_s", "run_seconds")
_TEXT_FIELDS = ("kernel", "case", "config_id", "target")


def _check_types(obj: dict[str, Any], where: str) -> None:
    """RunFileError naming the field of a record whose value has the wrong JSON type: it would otherwise be a
    traceback far from the file (a list as config) or, worse, other numbers (a string of samples read digit by
    digit)."""
    def bad(name: str, expected: str) -> RunFileError:
        shown = "" if obj[name] is None else f" {obj[name]!r:.60}"
        return RunFileError(f"{where}: {name} must be {expected}, got {json_type(obj[name])}{shown}; was the file "
                            "edited or written by another tool?")
    for name in _TEXT_FIELDS:
        if not isinstance(obj[name], str):
            raise bad(name, "a string")
    for name in _OBJECT_FIELDS:
        if obj.get(name) is not None and not isinstance(obj[name], dict):
            raise bad(name, "a JSON object")
    samples = obj.get("samples_ns")
    if samples is not None and not isinstance(samples, list):
        raise bad("samples_ns", "a list of numbers")
    for name in _NUMBER_FIELDS:
        value = obj.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise bad(name, "a number (seconds)")


def json_type(value: Any) -> str:
    """What a JSON value is called: object, array, string, number, true/false, null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"
