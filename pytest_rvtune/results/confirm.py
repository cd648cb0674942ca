"""Confirm a flagged time regression by running the base and new ELFs again, interleaved, on the same target.

Two sessions differ by more than their code: a shared machine runs in fast and slow spells of seconds to
minutes, and rounds and A/A floors (rounds.py, noise.py) only shrink that drift. When compare flags a time
regression and both ELFs are still on this machine, this module runs them again in alternation, in a random
order per trial (randomized multiple interleaved trials: Abedi & Brecht, "Conducting Repeatable Experiments in
Highly Variable Cloud Computing Environments", ICPE 2017), so every spell the machine passes through falls on
both sides alike. Each trial is a pair measured within a tenth of a second: its ratio new/base of the sides'
minimum times cancels whatever spell the machine was in. The regression stands only if the pairs say so: the
median ratio above the kernel's threshold, and more pairs slower than a coin would give (a one-sided sign test,
significant at compare's alpha). The sign test, not Wilcoxon's signed-rank test: a pair split by a change of
spell has a ratio of 0.8 or 1.4, and ranking by size would make that one pair outweigh nine consistent ones
(seen on this team's VM: a real +11.6 % with one pair at 0.83 gave Wilcoxon p = 0.042). Pooling the trials'
samples would be worse: one base side that caught a fast spell its partner missed moves the pooled minimum by
the spell's size (+7.8 % between one ELF and itself).

Only time is confirmed: exact QEMU counts need no second look, and emulated time is never gated. A regression
that cannot be re-run here (another machine, a cleaned cache, changed golden data) keeps its verdict, with the
reason. Nothing here knows pytest: the plugin (``--rvtune-compare``) and ``rvtune compare --confirm`` call it.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvtune.harness.output_format import OutputFormat
from pytest_rvtune.hashing import sha256_file
from pytest_rvtune.results.compare import DEFAULT_CONFIRM_TRIALS, ItemComparison, Thresholds, format_pct
from pytest_rvtune.results.records import RunRecord
from pytest_rvtune.results.report import format_metric
from pytest_rvtune.results.runs import Run, identity_key
from pytest_rvtune.run_options import RunOptions, default_run_options
from pytest_rvtune.targets.base import Target
from pytest_rvtune.targets.lock import exclusive
from pytest_rvtune.verdict import judge

#: Seconds of samples per side and trial (the harness's --max-time): short, so both sides of a pair share a spell.
TRIAL_SECONDS = 0.03


class CannotConfirm(Exception):
    """The regression cannot be re-run here; the message says why and the verdict stands."""


@dataclass(frozen=True)
class Rerun:
    """What running one record's ELF again needs: the ELF, its argv after the run options, its kernel symbol."""

    elf: Path
    argv: list[str | Path]  # Path = a file the ELF reads (uploaded to a board)
    kernel_symbol: str
    run_files: dict[str, Path] | None = None  # a user's own harness: files at relative paths (Target.run files)
    output_format: str | None = None  # ... and how it prints (harness/formats); None: our harness, our options

    @classmethod
    def of(cls, record: RunRecord, side: str) -> Rerun:
        """The record's ELF as it ran (its ``rerun`` field, item.rerun_field), checked to still be the
        same file; CannotConfirm says what is missing."""
        fields = record.raw.get("rerun")
        if not isinstance(fields, dict) or not fields.get("elf"):
            raise CannotConfirm(f"the {side} run does not say how to re-run its ELF (a record "
                                "written before runs recorded their ELF, or pytest-benchmark JSON)")
        elf = Path(fields["elf"])
        files = set(fields.get("files") or [])
        argv: list[str | Path] = [Path(a) if i in files else str(a) for i, a in enumerate(fields.get("argv") or [])]
        run_files = {rel: Path(p) for rel, p in (fields.get("run_files") or {}).items()} or None
        for path in [elf, *(a for a in argv if isinstance(a, Path)), *(run_files or {}).values()]:
            if not path.is_file():
                raise CannotConfirm(f"the {side} run's {path} is gone from this machine (build or golden cache "
                                    "cleaned, or the run was made elsewhere)")
        if sha256_file(elf) != record.elf_sha256:
            raise CannotConfirm(f"the {side} run's ELF {elf} has changed since it ran (sha256 differs)")
        return cls(elf, argv, str(fields.get("kernel_symbol") or ""), run_files, fields.get("output_format"))


@dataclass
class Confirmation:
    """The interleaved re-run of one flagged item: one ratio new/base of minimum times per trial pair."""

    confirmed: bool
    ratios: list[float]
    base_ns: float  # median over the trials of the base side's minimum
    new_ns: float
    p_value: float  # sign test over the pairs, alternative: new slower
    seconds: float  # wall time of the re-runs

    @property
    def trials(self) -> int:
        return len(self.ratios)

    @property
    def new_slower(self) -> int:
        return sum(r > 1 for r in self.ratios)

    @property
    def change_pct(self) -> float:
        return (statistics.median(self.ratios) - 1.0) * 100.0

    def describe(self) -> str:
        verb = "confirms" if self.confirmed else "does not confirm"
        return (f"interleaved re-run of base and new ELF ({self.trials} trials) {verb} it: "
                f"time {format_metric('time', self.base_ns)} -> {format_metric('time', self.new_ns)}, "
                f"{_change(self.change_pct, self.p_value)}, new slower in {self.new_slower} of {self.trials} trials")

    def record_field(self) -> dict[str, Any]:
        """The record's ``confirmation`` field (docs/contracts.md)."""
        return {"confirmed": self.confirmed, "trials": self.trials, "new_slower": self.new_slower,
                "base_ns": self.base_ns, "new_ns": self.new_ns, "change_pct": self.change_pct,
                "p_value": self.p_value, "ratios": self.ratios, "seconds": self.seconds}


def _change(pct: float, p_value: float) -> str:
    return f"median change per trial {format_pct(pct)} (sign test p={p_value:.2g})"


def fewest_trials(alpha: float) -> int:
    """The fewest trials with which the one-sided sign test can reach p < alpha: all n pairs slower gives
    p = 2**-n. With fewer, no regression could ever be confirmed, and every one would pass."""
    return math.floor(math.log2(1.0 / alpha)) + 1


def check_trials(trials: int, alpha: float) -> None:
    """ValueError naming the count when ``trials`` could never confirm anything at ``alpha``."""
    need = fewest_trials(alpha)
    if trials < need:
        raise ValueError(f"{trials} interleaved trials can never confirm a regression at alpha {alpha:g} (all "
                         f"{trials} pairs slower gives p = {2.0 ** -trials:.2g}); use at least {need}")


def paired_p(ratios: list[float]) -> float:
    """One-sided sign test p of "new slower" over per-trial ratios (ties dropped); 1.0 when no ratio differs
    from 1 (a quantised clock on a tiny kernel)."""
    slower = sum(r > 1.0 for r in ratios)
    differ = sum(r != 1.0 for r in ratios)
    if not differ:
        return 1.0
    from scipy.stats import binomtest  # here: scipy.stats takes ~1 s to import (compare.py)
    return float(binomtest(slower, differ, 0.5, alternative="greater").pvalue)


def describe_unconfirmed(fields: list[dict[str, Any]]) -> str:
    """The summary's lines for regressions that interleaved re-runs refuted (records' ``confirmation``)."""
    lines = [f"rvtune: {len(fields)} time regression(s) against the base were not confirmed by re-running base and "
             "new ELF interleaved (the machine's speed drifted between the runs, not the code); they pass:"]
    for f in fields:
        lines.append(f"  {f['flagged']}; interleaved: {_change(f['change_pct'], f['p_value'])}, new slower in "
                     f"{f['new_slower']} of {f['trials']} trials")
    return "\n".join(lines)


def needs_confirmation(verdict: ItemComparison) -> bool:
    """A regression of time alone: the only kind a re-run can refute."""
    regressed = [c for c in verdict.changes if c.status == "regressed"]
    return verdict.status == "regressed" and bool(regressed) and all(c.metric == "time" for c in regressed)


def _check_same_experiment(base: RunRecord, new: RunRecord, target: Target) -> None:
    if target.timing_source == "emulated":
        raise CannotConfirm(f"target {target.name} is emulated: its time is not gated")
    here = identity_key(target.identity())
    for side, record in (("base", base), ("new", new)):
        if identity_key(record.machine) != here:
            raise CannotConfirm(f"the {side} run was measured on another machine than target {target.name} "
                                "here: only a run of this machine can be re-run on it")
    if base.golden_sha256 != new.golden_sha256:
        raise CannotConfirm("the golden data changed between the runs: the base item cannot be re-run as it was")
    if _threads(base) != _threads(new):
        raise CannotConfirm(f"the runs used {_threads(base)} and {_threads(new)} launcher threads: not one experiment")


def _threads(record: RunRecord) -> int:
    return int(record.raw.get("threads") or 1)


def _run_side(target: Target, rerun: Rerun, options: RunOptions, what: str) -> list[float]:
    expected = ""
    if rerun.output_format is None:
        result = target.run(rerun.elf, [*options.harness_args(), *rerun.argv], options.timeout,
                            kernel_symbol=rerun.kernel_symbol or None)
    else:  # a user's own harness takes none of our options (item.run_item's external mode)
        output_format = OutputFormat.load(rerun.output_format)
        expected = output_format.describe_sample()
        result = target.run(rerun.elf, rerun.argv, options.timeout, kernel_symbol=rerun.kernel_symbol or None,
                            files=rerun.run_files, output_format=output_format)
    verdict = judge(result, what=what, timeout=options.timeout, check=options.check,
                    timeout_setting=options.timeout_setting, expected_sample=expected)
    if not verdict.passed:
        raise CannotConfirm(f"re-running it failed: {verdict.message}")
    return [float(s) for s in result.samples_ns]


def confirm(base: RunRecord, new: RunRecord, target: Target, options: RunOptions, thresholds: Thresholds, *,
            trials: int = DEFAULT_CONFIRM_TRIALS, seed: int | None = None) -> Confirmation:
    """Run base and new ELFs ``trials`` times each, interleaved in random order, and judge the trial pairs.

    Raises CannotConfirm when the two cannot be re-run here as they ran. The caller holds the target's lock."""
    check_trials(trials, thresholds.alpha)
    # A pool of boards (targets/ssh.SshPool) sends each run to whichever board is free; interleaving means
    # nothing across two boards, so every re-run goes to the board of the pool's last run.
    target = getattr(target, "current", None) or target
    _check_same_experiment(base, new, target)
    sides = {"base": Rerun.of(base, "base"), "new": Rerun.of(new, "new")}
    target.prepare([p for r in sides.values() for p in (r.elf, *r.argv, *(r.run_files or {}).values())
                    if isinstance(p, Path)])
    trial_options = dataclasses.replace(options, max_time=TRIAL_SECONDS, threads=_threads(new))
    rng = random.Random(seed)
    started = time.perf_counter()
    mins: dict[str, list[float]] = {"base": [], "new": []}
    for trial in range(trials):
        for side in rng.sample(list(sides), k=2):
            what = f"{new.label}: {side} ELF, trial {trial + 1}"
            mins[side].append(min(_run_side(target, sides[side], trial_options, what)))
    ratios = [n / b for n, b in zip(mins["new"], mins["base"], strict=True)]
    result = Confirmation(False, ratios, statistics.median(mins["base"]), statistics.median(mins["new"]),
                          paired_p(ratios), time.perf_counter() - started)
    result.confirmed = result.p_value < thresholds.alpha and result.change_pct > thresholds.for_kernel(new.kernel)
    return result


def confirm_locked(base: RunRecord, new: RunRecord, target: Target, options: RunOptions, thresholds: Thresholds,
                   trials: int) -> Confirmation | str:
    """confirm() holding the target's lock; or why it could not be re-run here (the regression then stands)."""
    try:
        with exclusive(target):
            return confirm(base, new, target, options, thresholds, trials=trials)
    except CannotConfirm as exc:
        return str(exc)
    except Exception as exc:  # a board lost mid-way, a full disk: this item's regression stands, with why
        return f"re-running it failed: {type(exc).__name__}: {exc}"


def confirm_verdicts(verdicts: Sequence[ItemComparison], base: Run, new: Run, thresholds: Thresholds, trials: int,
                     open_target: Callable[[str], Target]) -> None:
    """``rvtune compare --confirm``: re-run every time-only regression in ``verdicts`` on its target and update
    the verdict in place: status "unconfirmed" when the interleaved samples refute it, the confirmation in
    the message when they back it, a warning when it cannot be re-run here (the regression then stands)."""
    base_items, new_items = base.by_key(), new.by_key()
    for verdict in verdicts:
        if not needs_confirmation(verdict):
            continue
        base_record, new_record = base_items[verdict.key], new_items[verdict.key]
        change = next(c for c in verdict.changes if c.metric == "time")
        try:
            target = open_target(new_record.target)
        except CannotConfirm as exc:
            verdict.warnings.append(f"{new_record.label}: time regression not re-run to confirm: {exc}")
            continue
        # the plugin's defaults for real hardware; confirm() sets the seconds per trial itself
        confirmation = confirm_locked(base_record, new_record, target, default_run_options(emulated=False),
                                      thresholds, trials)
        if isinstance(confirmation, str):
            verdict.warnings.append(f"{new_record.label}: time regression not re-run to confirm: {confirmation}")
            continue
        change.note += f"; interleaved {format_pct(confirmation.change_pct)}"
        if confirmation.confirmed:
            verdict.message += f"; {confirmation.describe()}"
        else:
            verdict.status = change.status = "unconfirmed"
            verdict.message = f"{new_record.label}: time regression not confirmed: the {confirmation.describe()}"


def confirm_with_targets(verdicts: Sequence[ItemComparison], base: Run, new: Run, thresholds: Thresholds, trials: int,
                         config_file: str | None) -> None:
    """confirm_verdicts with the targets of this project (rvtune.toml / pyproject.toml in the current
    directory, or ``config_file``), each opened once and closed at the end. A bad config file raises
    ConfigError; a target that cannot be opened leaves its regressions standing, with the reason."""
    from pytest_rvtune.targets.config import load_targets
    from pytest_rvtune.targets.factory import make_target

    check_trials(trials, thresholds.alpha)
    configs = load_targets(Path.cwd(), Path(config_file) if config_file else None)
    opened: dict[str, Target | CannotConfirm] = {}

    def open_target(name: str) -> Target:
        if name not in opened:
            if name not in configs:
                opened[name] = CannotConfirm(f"target {name!r} is not configured here (known: "
                                             f"{', '.join(sorted(configs))}; see --config-file)")
            else:
                try:
                    opened[name] = make_target(configs[name], worker_id="main")
                except Exception as exc:  # an unreachable board: its regressions stand, each says why
                    opened[name] = CannotConfirm(f"target {name!r} cannot be opened: {exc}")
        target = opened[name]
        if isinstance(target, CannotConfirm):
            raise target
        return target

    try:
        confirm_verdicts(verdicts, base, new, thresholds, trials, open_target)
    finally:
        for target in opened.values():
            if not isinstance(target, CannotConfirm):
                target.close()
