"""Is run B worse than run A? A per-item verdict with a significance test, and the ``rvtune compare`` gate.

Time: Mann-Whitney U on the raw samples (as asv, LNT and google-benchmark do: no normality assumed), and a
change counts only when it is both significant (p < alpha) and larger than the kernel's threshold. The size of
the change is that of the samples' minimum by default (``--statistic``; runs.TIME_STATISTICS says why). With too few
samples no test is meaningful: the verdict says so as a warning, it never passes silently.
Counters: QEMU instruction counts are deterministic, so any change is real and only the threshold applies.
A board's perf counters are one reading per item (no noise estimate); they gate only with ``--counters all``.
Emulated (QEMU) wall time is not performance: it is shown, never gated.
Sessions drift more than samples within one session vary: with an A/A noise floor (``rvtune noise``, see
noise.py) a time change must also exceed the item's floor on its target to count.

The plugin calls :func:`compare_record` for ``--rvtune-compare BASE`` and fails the regressed items with
``Verdict.message``. Nothing here knows pytest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_rvtune.results.noise import NoiseFloors
from pytest_rvtune.results.records import DEFAULT_STATISTIC, TIME_STATISTICS, RunRecord
from pytest_rvtune.results.report import format_metric
from pytest_rvtune.results.runs import DETERMINISTIC_COUNTERS, EMULATED_RANK_COUNTERS, Run

DEFAULT_THRESHOLD_PCT = 5.0
#: Significance level. asv uses 0.002 with many samples; 0.01 keeps the false-alarm rate low at 10-30 samples.
DEFAULT_ALPHA = 0.01
#: Below this many samples per side Mann-Whitney cannot reach p < 0.01 (n=m=4 gives p >= 0.029).
DEFAULT_MIN_SAMPLES = 5

#: Interleaved trial pairs (base, new) that confirm a time regression (confirm.py). With 15, two pairs split by
#: a change of the machine's speed still leave the sign test at p = 0.0037 (13 of 15 slower) < alpha 0.01.
DEFAULT_CONFIRM_TRIALS = 15

COUNTER_GATES = ("deterministic", "all", "none")
#: Of the exact QEMU counts, only a launch's cost gates: the emulated ranking metric, i.e. the first of
#: EMULATED_RANK_COUNTERS both records have (``x60_cycles``, the X60 model's cycles; ``launch_insns`` for runs
#: recorded before it; ``kernel_insns`` before launches were counted). More vector instructions can mean fewer in
#: all (better vectorised code), and the whole-program count includes the harness reading its files.
#: The others are shown when they change, and gate only with ``--counters all``.
GATED_EMULATED_COUNTERS = frozenset(EMULATED_RANK_COUNTERS)


@dataclass(frozen=True)
class Thresholds:
    """How much change matters: a default percentage, per-kernel overrides, and the test's parameters."""

    default_pct: float = DEFAULT_THRESHOLD_PCT
    per_kernel: Mapping[str, float] = field(default_factory=dict)
    alpha: float = DEFAULT_ALPHA
    min_samples: int = DEFAULT_MIN_SAMPLES
    counters: str = "deterministic"  # which counters gate: deterministic (QEMU) | all | none
    noise: NoiseFloors | None = None  # A/A floors per target: a time change must exceed them too
    statistic: str = DEFAULT_STATISTIC  # what a time change is the change of: min | median
    # The exact QEMU counters that gate (with counters="deterministic"): --rank-by narrows them to its metric.
    gated_counters: frozenset[str] = GATED_EMULATED_COUNTERS

    def __post_init__(self) -> None:
        if self.statistic not in TIME_STATISTICS:
            raise ValueError(f"statistic {self.statistic!r}: expected one of {', '.join(TIME_STATISTICS)}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha {self.alpha}: the significance level must be between 0 and 1, e.g. 0.01")
        if self.min_samples < 2:
            raise ValueError(f"min-samples {self.min_samples}: a rank test needs at least 2 samples per side")
        if self.counters not in COUNTER_GATES:
            raise ValueError(f"counters {self.counters!r}: expected one of {', '.join(COUNTER_GATES)}")

    def for_kernel(self, kernel: str) -> float:
        return self.per_kernel.get(kernel, self.default_pct)

    @classmethod
    def parse(cls, specs: Sequence[str], **kwargs: Any) -> Thresholds:
        """``["5", "matmul=10"]`` -> default 5 %, matmul 10 %. Raises ValueError naming the bad spec."""
        default = DEFAULT_THRESHOLD_PCT
        per_kernel: dict[str, float] = {}
        for spec in specs:
            kernel, sep, value = spec.rpartition("=")
            try:
                pct = float(value.rstrip("%"))
            except ValueError:
                raise ValueError(f"threshold {spec!r}: expected PERCENT or KERNEL=PERCENT, e.g. 5 or "
                                 "matmul=10") from None
            if pct < 0 or not math.isfinite(pct):
                raise ValueError(f"threshold {spec!r}: the percentage must be a finite number >= 0")
            if sep:
                if not kernel:
                    raise ValueError(f"threshold {spec!r}: kernel name missing before '='")
                per_kernel[kernel] = pct
            else:
                default = pct
        return cls(default_pct=default, per_kernel=per_kernel, **kwargs)


@dataclass
class Change:
    """One metric of one item, base vs new."""

    metric: str  # "time" or a counter name
    base: float | None
    new: float | None
    status: str  # regressed | improved | same | changed | too few samples | not gated | only in one run
    p_value: float | None = None
    gated: bool = False
    note: str = ""

    @property
    def change_pct(self) -> float | None:
        if self.base is None or self.new is None or self.base == 0:
            return None
        return (self.new / self.base - 1.0) * 100.0


@dataclass
class ItemComparison:
    """The outcome of comparing one item; ``message`` is what a failed item shows."""

    key: tuple[str, str, str, str]  # (target, kernel, case, config_id)
    status: str  # regressed | broken | improved | unchanged | too few samples | fixed | still failing | new | missing
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def regressed(self) -> bool:
        return self.status in ("regressed", "broken")


#: Which difference Mann-Whitney U tests for: any, or the first sample being smaller ("less") or larger.
Alternative = Literal["two-sided", "less", "greater"]


def mann_whitney_p(a: Sequence[float], b: Sequence[float], alternative: Alternative = "two-sided") -> float:
    """p-value of Mann-Whitney U; 1.0 when every sample is equal (no evidence of any difference)."""
    if len(set(a) | set(b)) <= 1:
        return 1.0
    from scipy.stats import mannwhitneyu  # here: scipy.stats takes ~1 s to import, every pytest process paid it
    return float(mannwhitneyu(a, b, alternative=alternative).pvalue)


def format_pct(pct: float | None) -> str:
    """A change in percent; tiny exact-count changes keep their digits instead of showing as +0.0%."""
    if pct is None:
        return ""
    if pct == 0:
        return "0%"
    return f"{pct:+.2g}%" if abs(pct) < 0.1 else f"{pct:+.1f}%"


def _label(key: tuple[str, str, str, str]) -> str:
    target, kernel, case, config_id = key
    return f"{kernel}[{case}-{config_id}] on {target}"


def _time_change(base: RunRecord, new: RunRecord, threshold: float, t: Thresholds) -> tuple[Change, str | None]:
    change = Change("time", base.time_ns(t.statistic), new.time_ns(t.statistic), "same")
    if base.emulated or new.emulated:
        change.status, change.note = "not gated", "emulated time (QEMU) is not performance"
        return change, None
    n_base, n_new = len(base.samples_ns), len(new.samples_ns)
    if min(n_base, n_new) < t.min_samples:
        change.status = "too few samples"
        change.note = f"n={n_base}/{n_new}"
        return change, (f"{_label(new.key)}: too few samples for a significance test (base {n_base}, new "
                        f"{n_new}; need >= {t.min_samples} each): time change not judged; run more rounds")
    change.gated = True
    change.p_value = mann_whitney_p(base.samples_ns, new.samples_ns)
    pct = change.change_pct or 0.0
    significant = change.p_value < t.alpha
    # Mann-Whitney sees only this session's noise; the A/A floor is how far the statistic moves between sessions.
    floor = t.noise.floor(new) if t.noise else None
    limit = threshold if floor is None else max(threshold, floor)
    if significant and pct > limit:
        change.status = "regressed"
    elif significant and pct < -limit:
        change.status = "improved"
    change.note = f"{t.statistic} of n={n_base}/{n_new}"
    if floor is not None:
        below = change.status == "same" and abs(pct) <= floor
        change.note += f", {'below the ' if below else ''}A/A noise floor (+-{floor:.0f}%)"
    return change, None


def _counter_change(name: str, base: RunRecord, new: RunRecord, threshold: float, t: Thresholds) -> Change:
    b, n = base.counters.get(name), new.counters.get(name)
    change = Change(name, b, n, "same")
    if b is None or n is None:
        change.status = "only in one run"
        return change
    deterministic = name in DETERMINISTIC_COUNTERS and base.emulated and new.emulated
    if t.gated_counters == GATED_EMULATED_COUNTERS:  # the default: the ranking metric both records have
        shared = next((c for c in EMULATED_RANK_COUNTERS if c in base.counters and c in new.counters), None)
        ranked = name == shared
    else:  # --rank-by named the metric
        ranked = name in t.gated_counters
    change.gated = t.counters == "all" or (t.counters == "deterministic" and deterministic and ranked)
    pct = change.change_pct
    if pct is None:  # base 0: any new count is an increase of unknown size
        pct = 0.0 if n == 0 else math.inf
    if deterministic:
        change.note = "exact count"
    if not change.gated:
        change.status = "not gated" if pct != 0 else "same"
    elif pct > threshold:
        change.status = "regressed"
    elif pct < -threshold:
        change.status = "improved"
    elif pct != 0:
        change.status = "changed"  # real (deterministic) but within the threshold
    return change


def _describe(change: Change, threshold: float) -> str:
    pct = change.change_pct
    text = (f"{change.metric} {format_metric(change.metric, change.base)} -> "
            f"{format_metric(change.metric, change.new)}")
    text += f" ({format_pct(pct)}, threshold {threshold:g}%" if pct is not None else f" (threshold {threshold:g}%"
    if change.p_value is not None:
        text += f", Mann-Whitney p={change.p_value:.2g}"
    if change.note:
        text += f", {change.note}"
    return text + ")"


def compare_record(base: RunRecord, new: RunRecord, thresholds: Thresholds | None = None) -> ItemComparison:
    """Compare one item's base and new results; ``Verdict.regressed`` says whether to fail it.

    ``thresholds`` None means the defaults (5 %, alpha 0.01, QEMU instruction counts gate)."""
    thresholds = thresholds or Thresholds()
    verdict = ItemComparison(key=new.key, status="unchanged")
    label = _label(new.key)
    threshold = thresholds.for_kernel(new.kernel)
    if base.machine and new.machine and base.machine != new.machine:
        verdict.warnings.append(f"{label}: base and new ran on different machines ({base.machine} vs "
                                f"{new.machine}): the comparison may say more about the machines")
    if not new.valid:
        verdict.status = "broken" if base.valid else "still failing"
        verdict.message = f"{label}: {'passed in base, now' if base.valid else 'still'} {new.outcome}"
        verdict.message += f": {new.message}" if new.message else ""
        return verdict
    if not base.valid:
        verdict.status, verdict.message = "fixed", f"{label}: was {base.outcome} in base, now passes"
        return verdict

    time_change, warning = _time_change(base, new, threshold, thresholds)
    verdict.changes.append(time_change)
    if warning:
        verdict.warnings.append(warning)
    for name in sorted(set(base.counters) | set(new.counters)):
        verdict.changes.append(_counter_change(name, base, new, threshold, thresholds))
    if base.emulated and new.emulated and not any(c.gated for c in verdict.changes):
        verdict.warnings.append(f"{label}: emulated timing and no gated instruction counts: nothing to judge")

    regressed = [c for c in verdict.changes if c.status == "regressed"]
    improved = [c for c in verdict.changes if c.status == "improved"]
    if regressed:
        verdict.status = "regressed"
        verdict.message = f"{label}: regression: " + "; ".join(_describe(c, threshold) for c in regressed)
    elif improved:
        verdict.status = "improved"
        verdict.message = f"{label}: improved: " + "; ".join(_describe(c, threshold) for c in improved)
    elif time_change.status == "too few samples" and not any(c.gated for c in verdict.changes):
        verdict.status = "too few samples"
        verdict.message = verdict.warnings[-1]
    else:
        shown = [c for c in verdict.changes if c.gated] or [time_change]
        verdict.message = f"{label}: no significant change: " + "; ".join(_describe(c, threshold) for c in shown)
    return verdict


def compare_runs(base: Run, new: Run, thresholds: Thresholds) -> list[ItemComparison]:
    """Every item of either run, matched by (target, kernel, case, config id)."""
    return compare_stream(base, new.records, thresholds)


def compare_stream(base: Run, new: Iterable[RunRecord], thresholds: Thresholds,
                   keep: Callable[[ItemComparison], bool] | None = None) -> list[ItemComparison]:
    """compare_runs with the new run's records as they are read (runs.iter_run: an item recorded twice comes
    twice, the last one counts), so the new run is never held: each record is compared with its base and
    dropped. ``keep``: which verdicts to keep whole; the others (e.g. unchanged items nobody will print) are
    kept as their status and warnings only, one shared object for all without warnings. Same verdicts, in the
    same order, as compare_runs."""
    base_items = base.index()
    verdicts: dict[tuple[str, str, str, str], ItemComparison] = {}
    for record in new:
        key = record.key
        found = base_items.get(key)
        if found is not None:
            key = found.key  # the base's strings: the new record's are dropped with it
            verdict = compare_record(found, record, thresholds)
        else:
            verdict = ItemComparison(key, "new", message=f"{_label(key)}: not in the base run")
        verdicts.pop(key, None)  # a re-recorded item replaces the earlier line, keeping order (as load_run)
        verdicts[key] = verdict if keep is None or keep(verdict) else _status_only(verdict)
        del record, verdict
    out = list(verdicts.values())
    for key in base_items.keys() - verdicts.keys():
        out.append(ItemComparison(key, "missing", message=f"{_label(key)}: in the base run but not in the new one",
                                  warnings=[f"{_label(key)}: missing from the new run (not compared)"]))
    return out


_STATUS_ONLY: dict[str, ItemComparison] = {}


def _status_only(verdict: ItemComparison) -> ItemComparison:
    """What is left of a verdict nobody will print: its status and warnings (counted and printed)."""
    if verdict.warnings:
        return ItemComparison(verdict.key, verdict.status, warnings=verdict.warnings)
    return _STATUS_ONLY.setdefault(verdict.status, ItemComparison(("", "", "", ""), verdict.status))


# --- the `rvtune compare` subcommand ----------------------------------------------------------------------

#: Item verdicts, worst first: the order of `rvtune compare`'s rows and of its summary line.
ITEM_ORDER = ("regressed", "broken", "unconfirmed", "too few samples", "still failing", "fixed", "improved", "new",
              "missing", "unchanged")


#: A metric's own status as the "note" column says it, beside an item verdict that differs.
OWN_STATUS = {"changed": "changed within the threshold"}


def _natural(text: str) -> list[Any]:
    """BLOCK=16 before BLOCK=128: numbers in a config id compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _item_order(v: ItemComparison) -> tuple[Any, ...]:
    target, kernel, case, config_id = v.key
    rank = ITEM_ORDER.index(v.status) if v.status in ITEM_ORDER else len(ITEM_ORDER)
    return rank, kernel, case, target, _natural(config_id)


def _deciding(v: ItemComparison) -> list[Change]:
    """The metrics that decided an item's verdict: those that regressed or improved, else the gated ones, else
    time."""
    decided = [c for c in v.changes if c.status in ("regressed", "improved")]
    return decided or [c for c in v.changes if c.gated] or v.changes[:1]


def verdict_rows(verdicts: Sequence[ItemComparison], show_all: bool, raw: bool = False) -> list[dict[str, Any]]:
    """Rows sorted worst verdict first, then kernel, case, target and config. By default one row per item whose
    verdict is not "unchanged", for the metrics that decided it; ``show_all``: every item, every metric. The
    "verdict" column is the item's (what the summary line counts); a metric's own status, where it differs (a
    counter that changed but does not gate), is in "note". ``raw``: numbers as numbers (time in ns, change in
    percent) for JSON and CSV; otherwise formatted for people."""
    rows: list[dict[str, Any]] = []
    for v in sorted(verdicts, key=_item_order):
        if not show_all and v.status == "unchanged":
            continue
        target, kernel, case, config_id = v.key
        item = {"kernel": kernel, "case": case, "config": config_id, "target": target}
        if not v.changes:
            rows.append({**item, "metric": "", "base": None, "new": None, "change": None, "p": None,
                         "verdict": v.status, "note": ""})
        decided = _deciding(v)
        shown = decided + [c for c in v.changes if c not in decided] if show_all else decided
        for c in shown:
            own = "" if c.status in (v.status, "same") else OWN_STATUS.get(c.status, c.status)
            note = "; ".join(part for part in (own, c.note) if part)
            rows.append({**item, "metric": c.metric, "base": c.base, "new": c.new, "change": c.change_pct,
                         "p": c.p_value, "verdict": v.status, "note": note})
    if raw:
        return rows
    return [{**row, "base": format_metric(row["metric"], row["base"]), "new": format_metric(row["metric"], row["new"]),
             "change": format_pct(row["change"]), "p": "" if row["p"] is None else f"{row['p']:.2g}"}
            for row in rows]


def summary_line(verdicts: Sequence[ItemComparison], base: Run, base_name: str, warnings: int) -> str:
    """The one line `rvtune compare` ends with: what was compared and how many items got each verdict (always
    regressed, improved and unchanged, with 0 where none; others where any)."""
    counts = {s: sum(v.status == s for v in verdicts) for s in ITEM_ORDER}
    compared = len(verdicts) - counts["new"] - counts["missing"]
    parts = [f"{counts[s]} {s}" for s in ITEM_ORDER
             if s not in ("new", "missing") and (counts[s] or s in ("regressed", "improved", "unchanged"))]
    others = sum(1 for v in verdicts if v.status not in ITEM_ORDER)
    extra = f", {others} other" if others else ""
    return (f"compared {compared} of the base run's {len(base.records)} items against {base_name}: "
            f"{', '.join(parts)}{extra}; {counts['new']} new, {counts['missing']} missing; "
            f"{warnings} warning{'' if warnings == 1 else 's'}")


#: Rounds (rounds.py) that make the minimum repeatable on the team's VM: 3 pooled sessions a side kept A/A
#: changes of the min within +-3 % (p5..p95) where single sessions moved -19..+17 %.
ENOUGH_ROUNDS = 3

NO_NOISE_WARNING = ("real timings measured in fewer than {rounds} rounds and no noise floor: one session's samples "
                    "can all fall in one slow spell of a shared machine, so session-to-session drift can pass for "
                    "change; re-run the flagged items interleaved on this machine (--confirm), pool rounds (run "
                    "the suite again with the same --rvtune-results) or measure the drift with "
                    "`rvtune noise A B -o noise.json` and pass --noise noise.json")


def _rounds(record: RunRecord) -> int:
    return int(record.raw.get("rounds") or 1)


def drift_warning(base: Run, new: Run, noise: NoiseFloors | None) -> str | None:
    """One line when real timings of too few rounds are gated without a floor: A/A reruns could show up as
    regressions."""
    tally = NewRunTally(base, noise)
    for _ in tally.watch(new.records):
        pass
    return tally.drift_warning()


def nothing_compared_reason(base: Run, new: Run) -> str:
    """Why no item of ``new`` is in ``base``: items match by target, kernel, case and config id."""
    tally = NewRunTally(base, None)
    for _ in tally.watch(new.records):
        pass
    return tally.nothing_compared_reason()


class NewRunTally:
    """What `rvtune compare` needs to know of the new run besides the verdicts (drift_warning,
    nothing_compared_reason), gathered as its records stream past (watch) instead of from a run held whole."""

    def __init__(self, base: Run, noise: NoiseFloors | None) -> None:
        self.base, self.noise = base, noise
        # per item timed on both sides (real time, valid, samples): (too few rounds, "kernel on target" without
        # a floor, or ""); the last record of an item counts, as in load_run
        self.timed: dict[tuple[str, str, str, str], tuple[bool, str]] = {}
        self.seen: tuple[set[str], set[str], set[str]] = (set(), set(), set())  # targets, kernels, cases

    def watch(self, records: Iterable[RunRecord]) -> Iterator[RunRecord]:
        """``records``, passed on one by one after noting what this tally needs of each."""
        for record in records:
            key = record.key
            for index, names in enumerate(self.seen):
                names.add(key[index])
            b = self.base.find(record)
            if (record.valid and not record.emulated and record.n_samples and b is not None and b.valid
                    and not b.emulated and b.n_samples):
                floorless = (f"{record.kernel} on {record.target}"
                             if self.noise is not None and self.noise.floor(record) is None else "")
                self.timed[key] = (min(_rounds(b), _rounds(record)) < ENOUGH_ROUNDS, floorless)
            else:
                self.timed.pop(key, None)
            yield record

    def drift_warning(self) -> str | None:
        """drift_warning of the records watched."""
        if not self.timed:
            return None
        if self.noise is None:
            few = any(too_few for too_few, _ in self.timed.values())
            return NO_NOISE_WARNING.format(rounds=ENOUGH_ROUNDS) if few else None
        missing = sorted({name for _, name in self.timed.values() if name})
        if missing:
            return (f"no A/A noise floor in the --noise file(s) for {', '.join(missing)}: their timing gates count "
                    "session-to-session drift as change (measure it with `rvtune noise A B`)")
        return None

    def nothing_compared_reason(self) -> str:
        """nothing_compared_reason of the records watched."""
        for what, index in (("target", 0), ("kernel", 1), ("case", 2)):
            ours, theirs = {r.key[index] for r in self.base.records}, self.seen[index]
            if not ours & theirs:
                return (f"the base run has {what}(s) {', '.join(sorted(ours))} and the new run "
                        f"{', '.join(sorted(theirs))}; items match by target, kernel, case and config: compare two "
                        f"runs of the same {what}")
        return ("no item (target, kernel, case, config) of the new run is in the base run: were they run with "
                "different --rvtune-config or -k selections?")
