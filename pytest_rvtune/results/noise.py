"""The A/A noise floor of a target: how much an item's time moves between two sessions of the same code.

Mann-Whitney on the samples of one session sees only the noise WITHIN that session; on a shared VM or a
board with frequency scaling an item's time moves more from one session to the next (on the team's VM the
median of 10 back-to-back samples moved -17%..+28% per item). ``rvtune noise A B`` measures that drift from
an A/A pair (two runs of the same ELFs on the same target) and writes a small JSON file; ``rvtune compare
--noise FILE`` then calls a time change a regression only when it also exceeds the floor of that item on that
target. The drift is that of the statistic compare gates on (``--statistic``, min by default).

File format (``format: rvtune-noise/1``)::

    {"format": "rvtune-noise/1", "quantile": 95, "statistic": "min", "targets": [
      {"target": "host", "machine": {identity dict}, "runs": ["a.jsonl", "b.jsonl"],
       "kernels": {"matmul": {"floor_pct": 21.3, "items_measured": 40,
                              "items": {"<case>": {"<config_id>": <signed change of the statistic, percent>}}}}}]}

A file without "statistic" predates it and measured the median. A kernel's floor is the ``quantile``-th
percentile of |change| over its items; an item's floor is the
larger of its kernel's floor and its own A/A |change| (an item known to be noisier keeps its own margin).
A floor belongs to the target identity it was measured on (ISA, board, CPU, kernel, toolchain): a file of
another target is refused. Nothing here knows pytest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_rvtune.results.records import DEFAULT_STATISTIC, TIME_STATISTICS, RunRecord
from pytest_rvtune.results.runs import Run, identity_key

FORMAT = "rvtune-noise/1"
DEFAULT_QUANTILE = 95.0


class NoiseFileError(ValueError):
    """A noise file that cannot be used; the message names the file and what to do."""


def record_identity(record: RunRecord) -> dict[str, Any]:
    """The target identity a record ran on; the target name alone when the file carries no identity."""
    return dict(record.machine) if record.machine else {"target": record.target}


def describe_identity(identity: dict[str, Any]) -> str:
    """``host (board vm, cpu AMD EPYC, ...)``: an identity as people read it in an error."""
    name = identity.get("target", "?")
    rest = ", ".join(f"{k} {v}" for k, v in sorted(identity.items()) if k != "target")
    return f"{name} ({rest})" if rest else str(name)


@dataclass
class KernelNoise:
    """One kernel's A/A drift on one target."""

    floor_pct: float
    items: dict[str, dict[str, float]] = field(default_factory=dict)  # case -> config_id -> signed change %

    def item_floor(self, case: str, config_id: str) -> float:
        own = self.items.get(case, {}).get(config_id)
        return self.floor_pct if own is None else max(self.floor_pct, abs(own))

    @property
    def items_measured(self) -> int:
        return sum(len(configs) for configs in self.items.values())


@dataclass
class TargetNoise:
    """The floors of every kernel measured on one target identity."""

    target: str
    machine: dict[str, Any]
    kernels: dict[str, KernelNoise] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return identity_key(self.machine)


@dataclass
class NoiseFloors:
    """Noise floors loaded from one or more files, looked up by a record's target identity."""

    targets: dict[str, TargetNoise] = field(default_factory=dict)  # identity_key -> floors
    quantile: float = DEFAULT_QUANTILE
    statistic: str = DEFAULT_STATISTIC  # the drift of which time statistic (runs.TIME_STATISTICS)

    def floor(self, record: RunRecord) -> float | None:
        """The item's A/A floor in percent on the target it ran on; None when not measured there."""
        target = self.targets.get(identity_key(record_identity(record)))
        kernel = target.kernels.get(record.kernel) if target else None
        return kernel.item_floor(record.case, record.config_id) if kernel else None

    def merge(self, other: NoiseFloors) -> None:
        for key, target in other.targets.items():
            mine = self.targets.setdefault(key, TargetNoise(target.target, target.machine, runs=target.runs))
            mine.kernels.update(target.kernels)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "quantile": self.quantile, "statistic": self.statistic, "targets": [
            {"target": t.target, "machine": t.machine, "runs": t.runs,
             "kernels": {name: {"floor_pct": round(k.floor_pct, 3), "items_measured": k.items_measured,
                                "items": {case: {cid: round(pct, 3) for cid, pct in configs.items()}
                                          for case, configs in k.items.items()}}
                         for name, k in sorted(t.kernels.items())}}
            for t in self.targets.values()]}


# --- measuring ---------------------------------------------------------------------------------------------


def _timed(record: RunRecord) -> bool:
    return record.valid and not record.emulated and bool(record.samples_ns) and bool(record.median_ns)


def measure_noise(a: Run, b: Run, quantile: float = DEFAULT_QUANTILE,
                  statistic: str = DEFAULT_STATISTIC) -> NoiseFloors:
    """The floors of an A/A pair: per item the change of ``statistic``, per kernel and target its quantile.

    Raises NoiseFileError when the pair is not an A/A pair (different ELF or target) or has nothing timed."""
    if not 0 < quantile <= 100:
        raise NoiseFileError(f"quantile {quantile:g}: expected a percentile in (0, 100], e.g. 95")
    if statistic not in TIME_STATISTICS:
        raise NoiseFileError(f"statistic {statistic!r}: expected one of {', '.join(TIME_STATISTICS)}")
    floors = NoiseFloors(quantile=quantile, statistic=statistic)
    for rec_a in a.records:
        rec_b = b.find(rec_a)
        if rec_b is None or not (_timed(rec_a) and _timed(rec_b)):
            continue  # emulated time is never gated; failed or missing items have no time to compare
        if rec_a.elf_sha256 and rec_b.elf_sha256 and rec_a.elf_sha256 != rec_b.elf_sha256:
            raise NoiseFileError(f"{rec_a.label}: different ELFs in {a.path} and {b.path}: not an A/A pair "
                                 "(the noise floor needs two runs of the same build on the same target)")
        ident_a, ident_b = record_identity(rec_a), record_identity(rec_b)
        if identity_key(ident_a) != identity_key(ident_b):
            raise NoiseFileError(f"{rec_a.label}: ran on {describe_identity(ident_a)} in {a.path} but on "
                                 f"{describe_identity(ident_b)} in {b.path}: an A/A pair runs on one target")
        target = floors.targets.setdefault(identity_key(ident_a), TargetNoise(
            rec_a.target, ident_a, runs=[str(a.path), str(b.path)]))
        kernel = target.kernels.setdefault(rec_a.kernel, KernelNoise(0.0))
        time_a, time_b = rec_a.time_ns(statistic), rec_b.time_ns(statistic)
        if not time_a or time_b is None:  # (_timed: both have samples, so both have every statistic)
            continue
        change = (time_b / time_a - 1) * 100
        kernel.items.setdefault(rec_a.case, {})[rec_a.config_id] = change
    if not floors.targets:
        raise NoiseFileError(f"{a.path} and {b.path}: no item passed with real timings in both runs (QEMU "
                             "wall time is not gated, so it has no noise floor); give two runs of a real target")
    for target in floors.targets.values():
        for kernel in target.kernels.values():
            changes = [abs(p) for configs in kernel.items.values() for p in configs.values()]
            kernel.floor_pct = float(np.percentile(changes, quantile))
    return floors


# --- reading ----------------------------------------------------------------------------------------------


def load_noise(path: str | Path) -> NoiseFloors:
    """Read a noise file written by ``rvtune noise``; NoiseFileError names the file and the problem."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NoiseFileError(f"{path}: no such noise file (write one with `rvtune noise A B -o {path}`)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise NoiseFileError(f"{path}: not a readable noise file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise NoiseFileError(f"{path}: not an rvtune noise file (expected \"format\": \"{FORMAT}\"; write one "
                             "with `rvtune noise A B -o FILE`)")
    try:
        floors = NoiseFloors(quantile=float(doc.get("quantile", DEFAULT_QUANTILE)),
                             statistic=str(doc.get("statistic", "median")))
        if floors.statistic not in TIME_STATISTICS:
            raise ValueError(f"statistic {floors.statistic!r} is not one of {', '.join(TIME_STATISTICS)}")
        for entry in doc["targets"]:
            target = TargetNoise(str(entry["target"]), dict(entry["machine"]), runs=list(entry.get("runs", [])))
            for name, k in entry["kernels"].items():
                items = {str(case): {str(cid): float(p) for cid, p in configs.items()}
                         for case, configs in (k.get("items") or {}).items()}
                target.kernels[str(name)] = KernelNoise(float(k["floor_pct"]), items)
            floors.targets[target.key] = target
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise NoiseFileError(f"{path}: malformed noise file ({type(exc).__name__}: {exc}); rewrite it with "
                             "`rvtune noise A B -o FILE`") from None
    return floors


def load_noise_for(paths: Sequence[str | Path], records: Iterable[RunRecord],
                   statistic: str = DEFAULT_STATISTIC) -> NoiseFloors:
    """Load every file and check each was measured on a target among ``records``, of the ``statistic`` that
    is gated: a floor of another target (another board, CPU, kernel or toolchain) says nothing about this one,
    and the median's drift says nothing about the minimum's, so either is refused."""
    seen = {identity_key(record_identity(r)): record_identity(r) for r in records}
    merged = NoiseFloors(statistic=statistic)
    for path in paths:
        floors = load_noise(path)
        if floors.statistic != statistic:
            raise NoiseFileError(f"{path}: noise floor of the {floors.statistic} time, but the comparison gates "
                                 f"on the {statistic}; compare with --statistic {floors.statistic}, or measure "
                                 f"again with `rvtune noise A B --statistic {statistic}`")
        if not seen.keys() & floors.targets.keys():
            measured = "; ".join(describe_identity(t.machine) for t in floors.targets.values())
            compared = "; ".join(describe_identity(i) for i in seen.values()) or "nothing"
            raise NoiseFileError(f"{path}: noise floor measured on {measured}, but the runs compared ran on "
                                 f"{compared}; measure this target's floor with `rvtune noise A B` on two A/A "
                                 "runs of it")
        merged.merge(floors)
    return merged
