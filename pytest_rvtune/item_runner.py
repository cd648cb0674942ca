"""Run one item (kernel x case x config x target) and turn it into a verdict and a results record.

Knows nothing of pytest: the plugin calls it, and so can any script.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvtune.counters import ICOUNT_KEYS
from pytest_rvtune.harness.output_format import OutputFormat
from pytest_rvtune.results import Record, now_iso
from pytest_rvtune.targets.base import RunResult, Target
from pytest_rvtune.verdict import Verdict, judge


@dataclass(frozen=True)
class ItemWork:
    """What one item is: enough to build it, run it and name it in every message."""

    nodeid: str
    kernel: str
    case: str
    config: dict[str, Any]
    config_id: str
    target: str
    case_params: dict[str, Any] = field(default_factory=dict)  # the case's sizes: export buckets by M
    problem: dict[str, Any] = field(default_factory=dict)  # config values that change the problem (IS_CAUSAL)

    @property
    def what(self) -> str:
        return f"{self.kernel} [case {self.case}, {self.config_id}] on target {self.target}"


#: Seconds of samples per item on real hardware. A shared VM changes speed in spells of up to seconds; half a
#: second of samples nearly always holds some of the fast spell, whose minimum repeats within ~1% between
#: sessions (docs/contracts.md, "Timing").
DEFAULT_MAX_TIME = 0.5


@dataclass(frozen=True)
class ExternalRun:
    """How to run a user's own harness: the files it opens by relative path, its output format, and how many
    launches it makes when it does not say (their RUN_COUNT)."""

    files: Mapping[str, Path]
    output_format: OutputFormat
    launches: int | None = None


@dataclass(frozen=True)
class RunOptions:
    warmup: int = 1
    runs: int = 5
    max_time: float = 0.0  # seconds the samples span (0: exactly `runs` samples)
    threads: int = 1
    timeout: float = 300.0
    check: bool = True
    # Where ``timeout`` comes from, for the message of a run killed at it (a board's own setting, or the option).
    timeout_setting: str = "--rvtune-timeout"

    def harness_args(self) -> list[str]:
        args = ["--warmup", str(self.warmup), "--runs", str(self.runs), "--threads", str(self.threads)]
        if self.max_time > 0:
            args += ["--max-time", repr(self.max_time)]
        return args if self.check else [*args, "--no-check"]


def default_run_options(emulated: bool) -> RunOptions:
    """The run options of a target before the user's: emulated time is not gated, so two runs and no time span;
    real hardware gets samples spread over DEFAULT_MAX_TIME."""
    if emulated:
        return RunOptions(warmup=1, runs=2, max_time=0.0)
    return RunOptions(warmup=2, runs=10, max_time=DEFAULT_MAX_TIME)


@dataclass
class ItemOutcome:
    verdict: Verdict
    record: Record
    run: RunResult | None = None
    timings: dict[str, float] = field(default_factory=dict)


def base_record(work: ItemWork, target: Target | None) -> Record:
    return {
        "nodeid": work.nodeid,
        "kernel": work.kernel,
        "case": work.case,
        "case_params": work.case_params,
        "problem": work.problem,
        "config": work.config,
        "config_id": work.config_id,
        "target": work.target,
        "machine": target.identity() if target is not None else {},
        "timing_source": target.timing_source if target is not None else None,
        "time": now_iso(),
    }


def per_launch_counters(counters: dict[str, float], launches: int) -> dict[str, float]:
    """Counters of a whole process divided by the kernel launches in it, so configs compare per launch.

    The harness launches the kernel once per warm-up and once per timed run; counts are exact under QEMU,
    so the division is exact too up to the harness's own bookkeeping outside the kernel.
    """
    return {name: value / launches for name, value in counters.items()} if launches > 0 else dict(counters)


def rerun_field(elf: Path, argv: list[Any], kernel_symbol: str) -> dict[str, Any]:
    """The record's ``rerun`` field: how to run this ELF again as it ran (confirm.py re-runs the base and new
    ELFs of a flagged regression). ``files`` indexes the argv entries that are files the ELF reads."""
    return {"elf": str(elf), "kernel_symbol": kernel_symbol, "argv": [str(a) for a in argv],
            "files": [i for i, a in enumerate(argv) if isinstance(a, Path)]}


def build_failed(work: ItemWork, target: Target | None, message: str, build_seconds: float) -> ItemOutcome:
    verdict = Verdict("build_failed", f"{work.what}: build failed\n{message}")
    record = base_record(work, target) | {"outcome": verdict.outcome, "message": verdict.message,
                                          "build_seconds": build_seconds}
    return ItemOutcome(verdict, record, timings={"build": build_seconds})


def item_error(work: ItemWork, target: Target | None, message: str) -> ItemOutcome:
    """An item that could not be run for a reason that is neither the build nor the ELF (bad golden data)."""
    verdict = Verdict("error", message)
    return ItemOutcome(verdict, base_record(work, target) | {"outcome": "error", "message": message})


def run_item(
    work: ItemWork,
    target: Target,
    *,
    elf: Path,
    argv: list[Any],
    elf_sha256: str,
    golden_sha256: str,
    options: RunOptions,
    kernel_symbol: str,
    build_info: dict[str, Any],
    external: ExternalRun | None = None,
) -> ItemOutcome:
    """Run the built ELF once on ``target`` (the harness repeats the kernel itself) and judge it.

    ``external``: the ELF is a user's own harness (a Triton_RVV one): it takes its own argv, none of our run
    options, reads files at relative paths and prints in its own format."""
    started, started_epoch = time.perf_counter(), time.time()
    if external is None:
        result = target.run(elf, [*options.harness_args(), *argv], options.timeout, kernel_symbol=kernel_symbol)
        expected_launches = options.warmup + options.runs
    else:
        result = target.run(elf, argv, options.timeout, kernel_symbol=kernel_symbol, files=external.files,
                            output_format=external.output_format)
        expected_launches = external.launches or 1
    run_seconds = time.perf_counter() - started
    verdict = judge(result, what=work.what, timeout=options.timeout, check=options.check,
                    timeout_setting=options.timeout_setting)
    launches = result.launches if result.launches is not None else expected_launches
    counters = dict(result.counters)
    if options.threads != 1 and target.timing_source == "emulated":
        # QEMU's plugin counts with non-atomic inline adds: with several guest threads the counts are not
        # exact, and a count that is not exact must not pass for one (compare gates on exact counts).
        counters = {k: v for k, v in counters.items() if k not in ICOUNT_KEYS}
    record = base_record(work, target) | {
        "outcome": verdict.outcome,
        "message": "" if verdict.passed else verdict.message,
        "samples_ns": result.samples_ns,
        "counters": per_launch_counters(counters, launches),
        "counters_total": counters,
        "threads": options.threads,
        "launches": launches,
        "elf_sha256": elf_sha256,
        "golden_sha256": golden_sha256,
        "rerun": rerun_field(elf, argv, kernel_symbol),
        "checks": [vars(c) for c in result.checks],
        "run_seconds": run_seconds,
        # Wall-clock span of the run (epoch seconds): shows which runs overlapped across xdist workers.
        "run_span": [started_epoch, started_epoch + run_seconds],
        **build_info,
    }
    return ItemOutcome(verdict, record, result, timings={"run": run_seconds,
                                                         "build": build_info.get("build_seconds", 0.0)})
