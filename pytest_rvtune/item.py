"""One item (kernel x case x config x target): build -> golden data -> run or resume -> verdict -> record ->
compare with the base run.

Knows nothing of pytest: the plugin's item functions (collect.py) call it with the session, and turn the
outcome into a pass or a failure; ``run_item`` alone (build already done) serves any script.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_rvtune import repairs
from pytest_rvtune.counters import LAUNCH_COUNT_KEY, LAUNCH_WINDOW_COUNTERS, UNDIVIDED_COUNTERS
from pytest_rvtune.harness.data_image import data_image
from pytest_rvtune.harness.output_format import OutputFormat
from pytest_rvtune.provenance import git_state, kernel_source
from pytest_rvtune.results.writer import RecordDict, now_iso
from pytest_rvtune.run_options import RunOptions
from pytest_rvtune.targets.base import RunResult, Target
from pytest_rvtune.targets.count_cache import count_key, fingerprint_of, measure_once
from pytest_rvtune.targets.lock import exclusive
from pytest_rvtune.verdict import ItemVerdict, finite_only, judge
from pytest_rvtune.verdict_key import RECORD_FIELD as VERDICT_KEY_FIELD
from pytest_rvtune.verdict_key import fits_timeout, verdict_key

if TYPE_CHECKING:
    from pytest_rvtune.build import BuildArtifact
    from pytest_rvtune.compat.project import RvvVariant
    from pytest_rvtune.golden import GoldenSet
    from pytest_rvtune.item_info import KernelItemInfo, ProjectItemInfo
    from pytest_rvtune.results.records import RunRecord
    from pytest_rvtune.session import RvtuneSession
    from pytest_rvtune.spec import ConfigValue


@dataclass(frozen=True)
class ItemWork:
    """What one item is: enough to build it, run it and name it in every message."""

    nodeid: str
    kernel: str
    case: str
    config: dict[str, ConfigValue]
    config_id: str
    target: str
    case_params: dict[str, Any] = field(default_factory=dict)  # the case's sizes: export buckets by M
    problem: dict[str, ConfigValue] = field(default_factory=dict)  # config values that change the problem (IS_CAUSAL)

    @property
    def what(self) -> str:
        return f"{self.kernel} [case {self.case}, {self.config_id}] on target {self.target}"


@dataclass(frozen=True)
class ExternalRun:
    """How to run a user's own harness: the files it opens by relative path, its output format, and how many
    launches it makes when it does not say (their RUN_COUNT)."""

    files: Mapping[str, Path]
    output_format: OutputFormat
    launches: int | None = None


@dataclass
class ItemOutcome:
    verdict: ItemVerdict
    record: RecordDict
    run: RunResult | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def with_fields(self, **fields: Any) -> ItemOutcome:
        """The same outcome, its record with ``fields`` added (e.g. which harness ran a project item)."""
        self.record = self.record | fields
        return self


def base_record(work: ItemWork, target: Target | None) -> RecordDict:
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
    reading the input files: it is not a per-launch cost). ``launch_insns``, ``est_cycles`` and the cache
    model's counts are taken only inside launches, so they are divided by the launches the QEMU plugin saw
    (``counted_launches``): exact per launch. A share or a thread count (UNDIVIDED_COUNTERS) is not divided.
    """
    per_launch = {name: value if name in UNDIVIDED_COUNTERS else value / launches
                  for name, value in counters.items()} if launches > 0 else dict(counters)
    for name in LAUNCH_WINDOW_COUNTERS:
        if name not in counters:
            continue
        if counted_launches:
            per_launch[name] = counters[name] / counted_launches
        else:  # the plugin saw no launch end (a direct call it could not see): no per-launch figure
            del per_launch[name]
    return per_launch


def rerun_field(elf: Path, argv: list[str | Path], kernel_symbol: str, external: ExternalRun | None = None
                ) -> dict[str, object]:
    """The record's ``rerun`` field: how to run this ELF again as it ran (confirm.py re-runs the base and new
    ELFs of a flagged regression). ``files`` indexes the argv entries that are files the ELF reads; a user's own
    harness adds ``run_files`` (relative path -> file) and its ``output_format``."""
    field: dict[str, object] = {"elf": str(elf), "kernel_symbol": kernel_symbol, "argv": [str(a) for a in argv],
             "files": [i for i, a in enumerate(argv) if isinstance(a, Path)]}
    if external is not None:
        field |= {"run_files": {rel: str(path) for rel, path in external.files.items()},
                  "output_format": external.output_format.source}
    return field


def build_failed(work: ItemWork, target: Target | None, message: str, build_seconds: float) -> ItemOutcome:
    verdict = ItemVerdict("build_failed", f"{work.what}: build failed\n{message}")
    record = base_record(work, target) | {"outcome": verdict.outcome, "message": verdict.message,
                                          "build_seconds": build_seconds}
    return ItemOutcome(verdict, record, timings={"build": build_seconds})


def item_error(work: ItemWork, target: Target | None, message: str) -> ItemOutcome:
    """An item that could not be run for a reason that is neither the build nor the ELF (bad golden data)."""
    verdict = ItemVerdict("error", message)
    return ItemOutcome(verdict, base_record(work, target) | {"outcome": "error", "message": message})


def run_item(
    work: ItemWork,
    target: Target,
    *,
    elf: Path,
    argv: list[str | Path],
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
        # Our harness reads each golden file's binary image (parsed once on the host, the same values): parsing
        # text was most of a QEMU run. A file without an exact image stays text (harness/data_image.py).
        run_argv: list[str | Path] = [*options.harness_args(),
                                      *(data_image(a) if isinstance(a, Path) else a for a in argv)]
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
        result, cached = measure_once(key, measure, about={"what": work.what, "elf": str(elf)},
                                      timeout=options.timeout)
    run_seconds = time.perf_counter() - started
    verdict = judge(result, what=work.what, timeout=options.timeout, check=options.check,
                    timeout_setting=options.timeout_setting,
                    expected_sample=output_format.describe_sample() if output_format else "")
    counters = dict(result.counters)
    plugin_launches = counters.pop(LAUNCH_COUNT_KEY, None)  # the plugin's own count, not a counter
    counted_launches = int(plugin_launches) if plugin_launches is not None else None
    launches = result.launches if result.launches is not None else expected_launches
    if result.launches is None and counted_launches:
        launches = counted_launches  # a harness that does not say: the plugin saw every launch
    record = base_record(work, target) | {
        "outcome": verdict.outcome,
        "message": "" if verdict.passed else verdict.message,
        # JSON has no NaN: a non-finite number (judged an error above) is left out, never written
        "samples_ns": [s for s in result.samples_ns if math.isfinite(s)],
        "counters": finite_only(per_launch_counters(counters, launches, counted_launches)),
        "counters_total": finite_only(counters),
        "threads": options.threads,
        "launches": launches,
        "counted_launches": counted_launches,  # launches the QEMU plugin saw (None: no plugin)
        "counts_cached": cached,  # the result of an earlier identical run (count_cache.py): QEMU did not run
        "elf_sha256": elf_sha256,
        "golden_sha256": golden_sha256,
        # what decided the verdict (verdict_key.py): --rvtune-resume reuses the record only when it is unchanged
        VERDICT_KEY_FIELD: item_verdict_key(elf_sha256, golden_sha256, options, argv, kernel_symbol, external),
        "wall_s": result.wall_s,  # the run's own time (also when counts_cached): a resume checks the timeout
        "rerun": rerun_field(elf, argv, kernel_symbol, external),
        "checks": [vars(c) for c in result.checks],
        "run_seconds": run_seconds,
        # Wall-clock span of the run (epoch seconds): shows which runs overlapped across xdist workers.
        "run_span": [started_epoch, started_epoch + run_seconds],
        **build_info,
    }
    return ItemOutcome(verdict, record, result, timings={"run": run_seconds,
                                                         "build": build_info.get("build_seconds", 0.0)})


def item_verdict_key(elf_sha256: str, golden_sha256: str, options: RunOptions, argv: list[str | Path],
                     kernel_symbol: str, external: ExternalRun | None = None) -> str:
    """The verdict key (verdict_key.py) of an item run with ``options`` and its build's ``argv``."""
    if external is None:
        return verdict_key(elf_sha256=elf_sha256, golden_sha256=golden_sha256,
                           argv=[*options.harness_args(), *argv], kernel_symbol=kernel_symbol)
    return verdict_key(elf_sha256=elf_sha256, golden_sha256=golden_sha256, argv=argv, kernel_symbol=kernel_symbol,
                       files=external.files, output_format=external.output_format.name)


# ------------------------------------------------------------------------------------------ the pipeline
@dataclass
class BuildOutcome:
    """The ELF of an item, or the build error (a build error fails the item, it does not error it)."""

    artifact: BuildArtifact | None = None
    error: str | None = None
    seconds: float = 0.0


def build_kernel_item(info: KernelItemInfo, target: Target, golden_root: Path) -> BuildOutcome:
    from pytest_rvtune.build import build_item
    started = time.perf_counter()
    try:
        artifact = build_item(info.spec, info.case, info.config, target.isa, golden_root=golden_root)
    except Exception as exc:  # BuildError and golden-data errors alike: the message names kernel and config
        return BuildOutcome(error=str(exc), seconds=time.perf_counter() - started)
    return BuildOutcome(artifact, seconds=time.perf_counter() - started)


def kernel_golden(info: KernelItemInfo, golden_root: Path) -> GoldenSet | str:
    """The item's golden data, or the error naming the file."""
    from pytest_rvtune.golden import Store, golden_set
    try:
        return golden_set(info.spec, info.case, info.config, store=Store(root=golden_root))
    except Exception as exc:  # GoldenError names the file; anything else is the kernel module's fault
        return f"golden data of {info.spec.name} [case {info.case}, {info.config_id}]: {exc}"


def run_kernel_item(session: RvtuneSession, nodeid: str, info: KernelItemInfo, target: Target) -> ItemOutcome:
    """One kernel-suite item: build, golden data, run (or resume), verdict, record. Never raises mid-way:
    every failure becomes an outcome with a message, recorded like a pass."""
    work = kernel_work(nodeid, info)
    return kernel_item_outcome(work, info, target, session.golden_dir, lambda golden, artifact, build_seconds:
                               run_or_resume(session, work, target, artifact, build_seconds, golden,
                                             info.config.num_threads))


def kernel_work(nodeid: str, info: KernelItemInfo) -> ItemWork:
    return ItemWork(nodeid, info.spec.name, info.case, info.config_values, info.config_id,
                    info.target, dict(info.spec.cases[info.case]), info.spec.problem_of(info.config))


def kernel_item_outcome(work: ItemWork, info: KernelItemInfo, target: Target, golden_root: Path,
                        run: Callable[[GoldenSet, BuildArtifact, float], ItemOutcome]) -> ItemOutcome:
    """A kernel item's golden data and ELF, then ``run(golden, artifact, build_seconds)`` (the plugin runs or
    resumes it, `rvtune tune` runs it), with the fields reports read beside the measurement; or the outcome that
    ends it before the run."""
    # what reports read beside the measurement: the kernel's untuned config, the launch's FLOPs and bytes
    try:
        kernel_fields: dict[str, Any] = {"kernel_default": info.spec.default_config_id(work.problem),
                                         **info.spec.work_of(info.case, info.spec.variant_of(info.config))}
    except Exception as exc:  # FLOPS(case) / BYTES(case) failed: the module's error, naming the function
        return item_error(work, target, f"{work.what}: {exc}")
    # Golden data first: a corrupt or missing file is bad input (outcome "error", naming the file), not a
    # build failure, although the build reads the same files.
    golden = kernel_golden(info, golden_root)
    if isinstance(golden, str):
        return item_error(work, target, golden).with_fields(**kernel_fields)
    build = build_kernel_item(info, target, golden_root)
    if build.artifact is None:
        return build_failed(work, target, str(build.error), build.seconds).with_fields(**kernel_fields)
    return run(golden, build.artifact, build.seconds).with_fields(**kernel_fields, code=build.artifact.code_field())


def run_or_resume(session: RvtuneSession, work: ItemWork, target: Target, artifact: BuildArtifact,
                  build_seconds: float, golden: GoldenSet, num_threads: int | None = None) -> ItemOutcome:
    build_info = {"build_seconds": build_seconds, "build_cache_hit": bool(artifact.cache_hit)}
    options = session.run_options(target, num_threads)
    resumed = resumed_record(session, item_verdict_key(artifact.elf_sha256, golden.sha256, options,
                                                       list(artifact.argv), artifact.kernel_symbol),
                             target, options.timeout)
    if resumed is not None:
        record = dict(resumed) | {"nodeid": work.nodeid, "resumed_from": str(session.options.resume),
                                  "run_seconds": 0.0} | build_info
        verdict = ItemVerdict(resumed.outcome, resumed.message or f"{work.what}: resumed")
        return ItemOutcome(verdict, record, timings={"build": build_seconds})
    try:
        outcome = run_built(work, target, artifact, build_seconds, golden, options)
        from pytest_rvtune.results.rounds import pool
        outcome.record = pool(outcome.record,
                              session.earlier_round((work.target, work.kernel, work.case, work.config_id)))
        return outcome
    except Exception as exc:  # a board lost after its retry, a full disk, a lock never freed: this item
        from pytest_rvtune.targets.base import BoardLostError
        if isinstance(exc, BoardLostError):
            # The board is gone for this session: its later items skip with a pointer to this error instead of
            # each waiting for a reconnect that fails the same way.
            session.target_errors[work.target] = str(exc)
            session.target_error_reported.add(work.target)
        return item_error(work, target, f"{work.what}: {exc}")


def run_built(work: ItemWork, target: Target, artifact: BuildArtifact, build_seconds: float, golden: GoldenSet,
              options: RunOptions) -> ItemOutcome:
    """Run a built kernel item on ``target`` (its files copied there first; one real-timing run at a time)."""
    build_info = {"build_seconds": build_seconds, "build_cache_hit": bool(artifact.cache_hit)}
    target.prepare([p for p in artifact.argv if isinstance(p, Path)] + [artifact.elf])
    with exclusive(target):
        return run_item(work, target, elf=artifact.elf, argv=list(artifact.argv), elf_sha256=artifact.elf_sha256,
                        golden_sha256=golden.sha256, options=options, kernel_symbol=artifact.kernel_symbol,
                        build_info=build_info)


def resumed_record(session: RvtuneSession, key: str, target: Target, timeout: float) -> RunRecord | None:
    """The earlier run's record of the same verdict key on the same target, unless it took longer than
    ``timeout`` (run now, it would be killed)."""
    if not session.resume_index:
        return None
    from pytest_rvtune.results.runs import identity_key
    record = session.resume_index.get((key, identity_key(target.identity())))
    return record if record is not None and fits_timeout(record.raw.get("wall_s"), timeout) else None


def run_project_item(session: RvtuneSession, nodeid: str, info: ProjectItemInfo, target: Target) -> ItemOutcome:
    """A Triton_RVV project item: data -> build -> run -> verdict -> record, like a kernel-module item; never
    raises mid-way."""
    from pytest_rvtune.compat.project_items import (
        ProjectDataError,
        build_project_item,
        item_variant,
        project_data,
    )

    work = ItemWork(nodeid, info.entry.name, info.case.name, dict(info.config.values),
                    info.config_id, info.target, dict(info.case.params))
    try:
        data = project_data(info.project, info.entry, info.case, info.config)
    except ProjectDataError as exc:
        return item_error(work, target, str(exc))
    variant = item_variant(info.case, info.config)
    if variant is not None and variant.harness == "generic":
        return run_generic_project_item(session, work, info, target, variant, data.sha256)
    started = time.perf_counter()
    try:
        artifact = build_project_item(info.project, info.entry, info.case, info.config, target.isa)
    except Exception as exc:  # compile, link, the module's own errors: this item's build fails, the rest go on
        return build_failed(work, target, f"{work.what}: {exc}", time.perf_counter() - started).with_fields(
            harness="theirs")
    build_info = {"build_seconds": time.perf_counter() - started, "build_cache_hit": bool(artifact.cache_hit)}
    try:
        target.prepare([artifact.elf, *data.files.values()])
        with exclusive(target):
            return run_item(work, target, elf=artifact.elf, argv=list(artifact.argv), elf_sha256=artifact.elf_sha256,
                            golden_sha256=data.sha256, options=session.run_options(target),
                            kernel_symbol=artifact.kernel_symbol, build_info=build_info,
                            external=ExternalRun(data.files, OutputFormat.load(info.project.output_format),
                                                 artifact.launches)).with_fields(harness="theirs")
    except Exception as exc:  # a board lost, a full disk: this item
        return item_error(work, target, f"{work.what}: {exc}")


def run_generic_project_item(session: RvtuneSession, work: ItemWork, info: ProjectItemInfo, target: Target,
                             variant: RvvVariant, data_sha256: str) -> ItemOutcome:
    """A Triton_RVV item their harness cannot serve: their kernel in our generic harness on the variant's data
    (compat/generic_run.py); the record says ``harness: "generic"`` and why."""
    from pytest_rvtune.compat.project_items import build_chain_item, build_generic_item

    started = time.perf_counter()
    fields: dict[str, Any] = {"harness": "generic", "harness_why": variant.why}
    if variant.chain:  # several of their kernels, one after the other in one ELF (compat/chain_run.py)
        fields["chain"] = list(variant.chain)
    try:
        build = build_chain_item if variant.chain else build_generic_item
        artifact = build(info.project, info.entry, info.config, variant, target.isa)
    except Exception as exc:  # their launch, compile, link: this item's build fails, the rest go on
        shown = f"chain harness: {' -> '.join(variant.chain)}" if variant.chain else "generic harness"
        return build_failed(work, target, f"{work.what} ({shown}): {exc}",
                            time.perf_counter() - started).with_fields(**fields)
    build_info = {"build_seconds": time.perf_counter() - started, "build_cache_hit": bool(artifact.cache_hit)}
    try:
        target.prepare([artifact.elf, *(a for a in artifact.argv if isinstance(a, Path))])
        with exclusive(target):
            outcome = run_item(work, target, elf=artifact.elf, argv=artifact.argv, elf_sha256=artifact.elf_sha256,
                               golden_sha256=data_sha256, options=session.run_options(target, info.config.num_threads),
                               kernel_symbol=artifact.kernel_symbol, build_info=build_info)
    except Exception as exc:  # a board lost, a full disk: this item
        return item_error(work, target, f"{work.what}: {exc}")
    if variant.chain and outcome.verdict.outcome == "wrong":
        outcome.verdict = chain_wrong(outcome.verdict, variant, info.config_id)
        outcome.record = outcome.record | {"message": outcome.verdict.message}
    return outcome.with_fields(**fields)


def chain_wrong(verdict: ItemVerdict, variant: RvvVariant, config_id: str) -> ItemVerdict:
    """A chain's wrong answer names its kernels and the config: only the final output(s) have an expected value
    (their Python reference's), so a wrong kernel anywhere in the chain shows there."""
    source = f"their Python reference {variant.reference}()" if variant.reference else "their expected file"
    head = (f"chain {' -> '.join(variant.chain)} [config {config_id}]: the final output "
            f"({', '.join(variant.reference_outputs or tuple(variant.expected))}, written by {variant.chain[-1]}) "
            f"differs from {source}; a wrong "
            f"kernel anywhere in the chain ({', '.join(dict.fromkeys(variant.chain))}) shows here")
    return dataclasses.replace(verdict, message=f"{head}\n{verdict.message}")


@dataclass
class FinishedItem:
    """An item's final verdict (after the compare with the base run) and its record, written or not."""

    verdict: ItemVerdict
    record: RecordDict
    write_error: str | None = None  # why the record could not be appended to the results file


def finish_item(session: RvtuneSession, outcome: ItemOutcome, target: Target, write: bool = True) -> FinishedItem:
    """Compare with the base run (when there is one) and append the record to the results file at once.

    ``write=False`` (an xdist worker, here or on another host): the record only goes back with the item's report,
    and the controller appends it to its results file (RvtuneSession.tally_report)."""
    record = outcome.record | provenance(session.run_id, session.rootdir, record_nodeid(outcome.record))
    if session.search_field is not None:  # the search that chose this item (search_loop.py)
        record["search"] = session.search_field
    repaired = repairs.drain()  # damaged cache entries this item met, removed and made again: the summary says
    if repaired:
        record["cache_repairs"] = repaired
    if session.shortlist is not None and "kernel" in record:  # where this item's shortlist was ranked
        from pytest_rvtune.results.ranked_at import RECORD_FIELD
        from pytest_rvtune.spec import config_id
        by = session.shortlist.record_field(record["kernel"], record["case"], config_id(record.get("problem") or {}))
        if by is not None:
            record[RECORD_FIELD] = by
    verdict = outcome.verdict
    if verdict.passed and session.compare_base is not None:
        verdict = compare_with_base(session, record, target) or verdict
        record["outcome"], record["message"] = verdict.outcome, ("" if verdict.passed else verdict.message)
    if not write:
        return FinishedItem(verdict, record)
    return FinishedItem(verdict, record, session.write_record(record))  # at once: a kill loses nothing finished


def record_nodeid(record: RecordDict) -> str:
    return str(record.get("nodeid", ""))


def provenance(run_id: str, rootdir: Path, nodeid: str) -> dict[str, Any]:
    """The fields every record gets when it is written: the run that wrote it (rounds.py), the project's commit
    and the kernel file's hash (`rvtune runs` and a history across commits read them)."""
    return {"run_id": run_id} | git_state(rootdir) | kernel_source(rootdir / work_path(nodeid))


def work_path(nodeid: str) -> str:
    """The file part of a node id (the kernel module an item was collected from)."""
    return nodeid.split("::", 1)[0]


def compare_with_base(session: RvtuneSession, record: RecordDict, target: Target) -> ItemVerdict | None:
    """A failing verdict when the item regressed against the base run. A time regression is re-run
    interleaved first (confirm.py); the confirmation, either way, goes into ``record``."""
    from pytest_rvtune.results.compare import compare_record
    from pytest_rvtune.results.confirm import confirm_locked, needs_confirmation
    from pytest_rvtune.results.records import record_from_dict
    base_run, thresholds = session.compare_base, session.compare_thresholds
    if base_run is None or thresholds is None:  # no --rvtune-compare
        return None
    base = base_run.find(record)
    if base is None:
        record["compared"] = "not in base"  # the session's comparison line counts these
        return None
    new = record_from_dict(record)
    result = compare_record(base, new, thresholds)
    record["compared"] = result.status
    if not result.regressed:
        return None
    message = result.message
    if session.confirm_trials and needs_confirmation(result):
        confirmation = confirm_locked(base, new, target, session.run_options(target), thresholds,
                                      session.confirm_trials)
        if isinstance(confirmation, str):
            message += f"\n(not re-run to confirm: {confirmation})"
        else:
            record["confirmation"] = confirmation.record_field() | {"flagged": result.message}
            if not confirmation.confirmed:
                record["compared"] = "unconfirmed"
                return None  # the summary lists it (pytest_runtest_logreport)
            message += f"\n{confirmation.describe()}"
    return ItemVerdict("regressed", f"{message}\n(base run {base_run.path})")
