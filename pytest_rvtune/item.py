"""Run one item (kernel x case x config x target) and turn it into a verdict and a results record.

Knows nothing of pytest: the plugin calls it, and so can any script.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvtune.counters import ICOUNT_KEYS, LAUNCH_COUNT_KEY, LAUNCH_COUNTER
from pytest_rvtune.harness.output_format import OutputFormat
from pytest_rvtune.results.writer import Record, now_iso
from pytest_rvtune.targets.base import RunResult, Target
from pytest_rvtune.targets.count_cache import count_key, fingerprint_of, measure_once
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


def per_launch_counters(counters: dict[str, float], launches: int,
                        counted_launches: int | None = None) -> dict[str, float]:
    """Counters of a whole process divided by the kernel launches in it, so configs compare per launch.

    The harness launches the kernel once per warm-up and once per timed run; counts are exact under QEMU,
    so the division is exact too up to the harness's own bookkeeping outside the kernel (``insns`` also holds
    reading the input files: it is not a per-launch cost). ``launch_insns`` counts only inside launches, so it
    is divided by the launches the QEMU plugin saw (``counted_launches``): exact per launch.
    """
    per_launch = {name: value / launches for name, value in counters.items()} if launches > 0 else dict(counters)
    if LAUNCH_COUNTER in counters:
        if counted_launches:
            per_launch[LAUNCH_COUNTER] = counters[LAUNCH_COUNTER] / counted_launches
        else:  # the plugin saw no launch end (a direct call it could not see): no per-launch figure
            del per_launch[LAUNCH_COUNTER]
    return per_launch


def rerun_field(elf: Path, argv: list[Any], kernel_symbol: str, external: ExternalRun | None = None
                ) -> dict[str, Any]:
    """The record's ``rerun`` field: how to run this ELF again as it ran (confirm.py re-runs the base and new
    ELFs of a flagged regression). ``files`` indexes the argv entries that are files the ELF reads; a user's own
    harness adds ``run_files`` (relative path -> file) and its ``output_format``."""
    field = {"elf": str(elf), "kernel_symbol": kernel_symbol, "argv": [str(a) for a in argv],
             "files": [i for i, a in enumerate(argv) if isinstance(a, Path)]}
    if external is not None:
        field |= {"run_files": {rel: str(path) for rel, path in external.files.items()},
                  "output_format": external.output_format.source}
    return field


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
    options, reads files at relative paths and prints in its own format.

    On an emulated target that can say what decides its results (count_cache.py), an unchanged run is not run
    again: its result comes from the cache (record field ``counts_cached``)."""
    started, started_epoch = time.perf_counter(), time.time()
    if external is None:
        run_argv: list[Any] = [*options.harness_args(), *argv]
        files, output_format = None, None
        expected_launches = options.warmup + options.runs
    else:
        run_argv, files, output_format = list(argv), external.files, external.output_format
        expected_launches = external.launches or 1

    def measure() -> RunResult:
        if external is None:
            return target.run(elf, run_argv, options.timeout, kernel_symbol=kernel_symbol)
        return target.run(elf, run_argv, options.timeout, kernel_symbol=kernel_symbol, files=files,
                          output_format=output_format)

    fingerprint = fingerprint_of(target)
    if fingerprint is None:
        result, cached = measure(), False
    else:
        key = count_key(elf_sha256=elf_sha256, data_sha256=golden_sha256, fingerprint=fingerprint,
                        argv=run_argv, kernel_symbol=kernel_symbol, files=files,
                        output_format=output_format.name if output_format else None)
        result, cached = measure_once(key, measure, about={"what": work.what, "elf": str(elf)})
    run_seconds = time.perf_counter() - started
    verdict = judge(result, what=work.what, timeout=options.timeout, check=options.check,
                    timeout_setting=options.timeout_setting)
    counters = dict(result.counters)
    plugin_launches = counters.pop(LAUNCH_COUNT_KEY, None)  # the plugin's own count, not a counter
    counted_launches = int(plugin_launches) if plugin_launches is not None else None
    launches = result.launches if result.launches is not None else expected_launches
    if result.launches is None and counted_launches:
        launches = counted_launches  # a harness that does not say: the plugin saw every launch
    if options.threads != 1 and target.timing_source == "emulated":
        # QEMU's plugin counts with non-atomic inline adds: with several guest threads the counts are not
        # exact, and a count that is not exact must not pass for one (compare gates on exact counts).
        counters = {k: v for k, v in counters.items() if k not in ICOUNT_KEYS}
    record = base_record(work, target) | {
        "outcome": verdict.outcome,
        "message": "" if verdict.passed else verdict.message,
        "samples_ns": result.samples_ns,
        "counters": per_launch_counters(counters, launches, counted_launches),
        "counters_total": counters,
        "threads": options.threads,
        "launches": launches,
        "counted_launches": counted_launches,  # launches the QEMU plugin saw (None: no plugin)
        "counts_cached": cached,  # the result of an earlier identical run (count_cache.py): QEMU did not run
        "elf_sha256": elf_sha256,
        "golden_sha256": golden_sha256,
        "rerun": rerun_field(elf, argv, kernel_symbol, external),
        "checks": [vars(c) for c in result.checks],
        "run_seconds": run_seconds,
        # Wall-clock span of the run (epoch seconds): shows which runs overlapped across xdist workers.
        "run_span": [started_epoch, started_epoch + run_seconds],
        **build_info,
    }
    return ItemOutcome(verdict, record, result, timings={"run": run_seconds,
                                                         "build": build_info.get("build_seconds", 0.0)})
