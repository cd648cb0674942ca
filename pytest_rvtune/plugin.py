"""pytest glue for pytest-rvtune: options, collection of kernel modules, fixtures, reporting.

Thin by design: building lives in build.py, golden data in golden.py, running in targets/ and item_runner.py,
records in results.py, the pytest-benchmark hand-over in benchmark_bridge.py. This module only wires them to
pytest's hooks.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import time
import warnings
from collections import Counter
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_rvtune.item import (
    DEFAULT_MAX_TIME,
    ItemOutcome,
    ItemWork,
    RunOptions,
    build_failed,
    default_run_options,
    item_error,
    run_item,
)
from pytest_rvtune.results.writer import ResultsWriteError, ResultsWriter, new_run_id, unwritable_reason
from pytest_rvtune.targets.lock import exclusive
from pytest_rvtune.verdict import OUTCOMES, Verdict

RECORD_KEY = "rvtune_record"
#: user_properties key of an item whose record could not be written: the cause, for the controller to show.
RESULTS_ERROR_KEY = "rvtune_results_error"
ITEM_KEY = pytest.StashKey["KernelItemInfo"]()
DEFAULT_TARGET = "qemu"
DEFAULT_TIMEOUT = 300.0
#: The outcomes the summary line always shows (others only when they happened).
SUMMARY_OUTCOMES = ("passed", "wrong", "build_failed", "crashed", "timeout")


# --------------------------------------------------------------------------------------------- options
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rvtune", "pytest-rvtune: Triton kernel configs on RISC-V")
    group.addoption("--rvtune-target", action="append", default=[], metavar="NAME",
                    help="target to run on (repeatable: a matrix over targets). Default: qemu. "
                         "Built in: qemu, host; boards come from rvtune.toml / [tool.rvtune.targets].")
    group.addoption("--rvtune-case", action="append", default=[], metavar="NAME",
                    help="problem case(s) to run (repeatable), e.g. small, emu, bench. "
                         "Default: the target's default case (emu on qemu, bench on real hardware).")
    group.addoption("--rvtune-config", action="append", default=[], metavar="FILTER",
                    help="keep configs matching e.g. 'BLOCK_SIZE_M=16,32;BLOCK_SIZE_N=64' (repeatable: all apply; "
                         "a kernel without such a key is left out)")
    group.addoption("--rvtune-timeout", type=float, default=None, metavar="SECONDS",
                    help="kill one ELF run after this long (default: the target's timeout, else 300)")
    group.addoption("--rvtune-runs", type=int, default=None, metavar="N",
                    help="timed runs per item (default: 10 on real hardware, 2 under emulation)")
    group.addoption("--rvtune-max-time", type=float, default=None, metavar="SECONDS",
                    help="on real hardware, sample each item for this long (at least --rvtune-runs samples, "
                         f"at most 200): a shared machine's slow and fast spells both show (default "
                         f"{DEFAULT_MAX_TIME}; 0 under emulation, whose time is not gated)")
    group.addoption("--rvtune-warmup", type=int, default=None, metavar="N",
                    help="warm-up runs per item (default: 2 on real hardware, 1 under emulation)")
    group.addoption("--rvtune-threads", type=int, default=1, metavar="N",
                    help="launcher threads (0 = all harts, default 1: serial)")
    group.addoption("--rvtune-results", default=None, metavar="PATH",
                    help="results file (JSON lines) to append to; default .rvtune/results/<run id>.jsonl")
    group.addoption("--rvtune-config-file", default=None, metavar="PATH",
                    help="target configuration file (default: rvtune.toml, then pyproject.toml)")
    group.addoption("--rvtune-compare", default=None, metavar="BASE",
                    help="fail items that regressed significantly against BASE (results file or benchmark JSON)")
    group.addoption("--rvtune-threshold", action="append", default=[], metavar="[KERNEL=]PCT",
                    help="with --rvtune-compare: the change that matters, in percent (default 5; repeatable, "
                         "KERNEL=PCT per kernel)")
    group.addoption("--rvtune-noise", action="append", default=[], metavar="NOISE.json",
                    help="with --rvtune-compare: the target's A/A noise floor (`rvtune noise A B`); a time "
                         "change must also exceed it")
    group.addoption("--rvtune-alpha", type=float, default=None, metavar="P",
                    help="with --rvtune-compare: the significance level of its tests, Mann-Whitney on the "
                         "samples and the sign test of --rvtune-confirm (default 0.01)")
    group.addoption("--rvtune-confirm", type=int, default=None, metavar="TRIALS",
                    help="with --rvtune-compare: re-run the base and new ELF of a time regression interleaved, "
                         "TRIALS times each, and fail only if that confirms it (default 15; 0: judge the session's "
                         "samples alone)")
    group.addoption("--rvtune-resume", default=None, metavar="RUN",
                    help="reuse results of RUN for items whose ELF, golden data and target are unchanged")
    parser.addini("rvtune_kernels", type="paths", default=[],
                  help="directories holding kernel modules (default: kernels/)")
    parser.addini("rvtune_golden", type="paths", default=[],
                  help="golden data directory (default: golden/ beside the first kernels directory); "
                       "the RVTUNE_GOLDEN_DIR environment variable wins over both")


# --------------------------------------------------------------------------------------------- session state
class RvtuneSession:
    """Per-process state: targets (opened once), results file, counters for the summary line."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rootdir = Path(config.rootpath)
        self.target_names: list[str] = list(dict.fromkeys(config.getoption("rvtune_target") or [DEFAULT_TARGET]))
        self.cases: list[str] = config.getoption("rvtune_case")
        self.config_filters: list[str] = config.getoption("rvtune_config")
        kernel_dirs = config.getini("rvtune_kernels") or [self.rootdir / "kernels"]
        self.kernel_dirs = [Path(p).resolve() for p in kernel_dirs]
        golden = config.getini("rvtune_golden")
        self.golden_dir = Path(golden[0]).resolve() if golden else self.kernel_dirs[0].parent / "golden"
        self.targets: dict[str, Any] = {}
        self.target_errors: dict[str, str] = {}
        self.target_error_reported: set[str] = set()
        self.tally: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self.identities: dict[str, dict[str, Any]] = {}  # target name -> identity, from finished items
        self.filter_keys_unknown: dict[str, int] = Counter()  # filter key -> kernel modules without it
        # filter -> key -> values the kernels with its keys have, for a filter that matched no config at all
        self.filter_values: dict[str, dict[str, set[str]]] = {f: {} for f in self.config_filters}
        self.filters_matched: set[str] = set()
        self.unconfirmed: list[dict[str, Any]] = []  # records' confirmation fields: flagged, then refuted
        self.emulated_records: list[dict[str, Any]] = []  # controller: for the ranking at the end
        self.kernel_modules = 0
        workerinput = getattr(config, "workerinput", None)
        self.run_id: str = workerinput["rvtune_run_id"] if workerinput else new_run_id()
        results = config.getoption("rvtune_results")
        self.results_path = (Path(results).resolve() if results
                             else self.rootdir / ".rvtune" / "results" / f"{self.run_id}.jsonl")
        self._writer: ResultsWriter | None = None
        self.results_errors: list[str] = []  # the cause, per record not written (controller: of all workers)
        self.results_error_shown = False
        self._earlier_rounds: dict[Any, Any] | None = None
        self.worker_id: str = workerinput["workerid"] if workerinput else "main"
        self._configs: dict[str, Any] | None = None
        if config.getoption("rvtune_target") or config.getoption("rvtune_config_file"):
            self.target_configs()  # asked for by name: a bad name or file is an error before anything runs
        _check_run_option_ranges(config)
        max_time = config.getoption("rvtune_max_time")
        if max_time is not None and not 0 <= max_time <= 3600:
            raise pytest.UsageError(f"--rvtune-max-time {max_time:g}: seconds of samples per item, between 0 "
                                    "and 3600 (0: exactly --rvtune-runs samples)")
        self.compare_base = _load_run_option(config, "rvtune_compare")
        self.compare_thresholds = _compare_thresholds(config, self.compare_base)
        self.confirm_trials = _confirm_trials(config, self.compare_base, self.compare_thresholds)
        self.resume_index = _load_resume_index(config)
        if self.results_path.is_file():  # read now: a file that is not a run (binary...) is refused before
            self._earlier_rounds = self._load_earlier_rounds()  # anything runs or is appended to it

    def earlier_round(self, key: tuple[str, str, str, str]) -> Any:
        """The item's record from an earlier session in the same results file (a round to pool with)."""
        if self._earlier_rounds is None:
            self._earlier_rounds = self._load_earlier_rounds()
        return self._earlier_rounds.get(key)

    def _load_earlier_rounds(self) -> dict[Any, Any]:
        from pytest_rvtune.results.rounds import earlier_rounds
        # allow_empty: a file a full disk or a kill left without one whole line is still ours to append to
        run = _read_run(self.config, self.results_path, "--rvtune-results", allow_empty=True,
                        advice="; give another --rvtune-results file (this one is appended to)") \
            if self.results_path.is_file() else None
        if run is not None and run.format != "jsonl":
            raise pytest.UsageError(f"--rvtune-results {self.results_path}: a {run.format} file; results are "
                                    "appended as JSON lines, which would break it: give a .jsonl file")
        return earlier_rounds(run, self.run_id)

    @property
    def writer(self) -> ResultsWriter:
        if self._writer is None:  # created on first use, so plain test runs leave no results directory
            self._writer = ResultsWriter(self.results_path)
        return self._writer

    @pytest.hookimpl(trylast=True)  # after the terminal's header: the first thing under it
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Say at once when the results file cannot be written (a read-only location): the items still run."""
        explicit = self.config.getoption("rvtune_results") is not None
        if not _is_controller(self.config) or not (explicit or any(d.is_dir() for d in self.kernel_dirs)):
            return  # workers: the controller says it; no kernels: nothing would be recorded anyway
        reason = unwritable_reason(self.results_path)
        if reason is not None:
            self._show_results_error(reason)

    def _show_results_error(self, cause: str) -> None:
        if self.results_error_shown:
            return
        self.results_error_shown = True
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        text = (f"rvtune: ERROR: cannot write results to {self.results_path}: {cause}; items still run and report "
                "their verdicts, but records not written are lost (the summary line counts them): make room or give "
                "another --rvtune-results PATH")
        if terminal is not None:
            terminal.ensure_newline()
            terminal.write_line(text, red=True, bold=True)

    def target_configs(self) -> dict[str, Any]:
        """Built-in and configured targets, read on first use: a broken rvtune.toml does not stop a plain
        `pytest tests` that never uses a target."""
        if self._configs is None:
            configs = _load_target_configs(self.rootdir, self.config.getoption("rvtune_config_file"))
            unknown = [name for name in self.target_names if name not in configs]
            if unknown:
                raise pytest.UsageError(
                    f"--rvtune-target {', '.join(unknown)}: unknown target; known targets are "
                    f"{', '.join(sorted(configs))} (configure boards in rvtune.toml, see README)")
            self._configs = configs
        return self._configs

    def target(self, name: str) -> Any:
        """The live target ``name``, opened once per process; _TargetUnavailable (cached) if it cannot be."""
        if name in self.target_errors:
            raise _TargetUnavailable(name, self.target_errors[name])
        if name not in self.targets:
            try:
                self.targets[name] = _make_target(self.target_configs()[name], self.worker_id)
            except Exception as exc:  # one clear error per target and process, not one per item
                text = str(exc)
                self.target_errors[name] = text if f"target {name!r}" in text else \
                    f"target {name!r} is unavailable: {type(exc).__name__}: {text}"
                raise _TargetUnavailable(name, self.target_errors[name]) from exc
        return self.targets[name]

    def default_case(self, target_name: str) -> str:
        cfg = self.target_configs().get(target_name)
        default = getattr(cfg, "default_case", None)
        if default:
            return default
        return "emu" if getattr(cfg, "timing_source", None) == "emulated" or target_name == "qemu" else "bench"

    def run_options(self, target: Any, num_threads: int | None = None) -> RunOptions:
        """The item's run options; ``num_threads``, a config's own (triton-cpu's ``num_threads=n``), wins over
        --rvtune-threads: the kernel's author tuned that config for that thread count."""
        defaults = default_run_options(emulated=target.timing_source == "emulated")
        runs = self.config.getoption("rvtune_runs")
        warmup = self.config.getoption("rvtune_warmup")
        max_time = self.config.getoption("rvtune_max_time")
        return dataclasses.replace(
            defaults,
            warmup=warmup if warmup is not None else defaults.warmup,
            runs=runs if runs is not None else defaults.runs,
            max_time=max_time if max_time is not None else defaults.max_time,
            threads=self.config.getoption("rvtune_threads") if num_threads is None else num_threads,
            timeout=self.timeout_for(target.name),
            timeout_setting=self.timeout_setting(target.name),
        )

    def timeout_for(self, target_name: str) -> float:
        """--rvtune-timeout, else the target's own `timeout` (a slow board may need more), else the default."""
        given = self.config.getoption("rvtune_timeout")
        if given is not None:
            return given
        return getattr(self.target_configs().get(target_name), "timeout", None) or DEFAULT_TIMEOUT

    def timeout_setting(self, target_name: str) -> str:
        """Where timeout_for's value comes from, as a timed-out item's message names it."""
        if self.config.getoption("rvtune_timeout") is not None:
            return "--rvtune-timeout"
        cfg = self.target_configs().get(target_name)
        if getattr(cfg, "timeout", None):
            return f"{cfg.where('timeout')} = {cfg.timeout:g}; --rvtune-timeout overrides it"
        return "the default; --rvtune-timeout N sets it"

    def close(self) -> None:
        for target in self.targets.values():
            target.close()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """In the process that owns pytest-benchmark (xdist controller or the only process): tally, merge."""
        if not _is_controller(self.config):
            return
        if report.when != "call":
            if self._lost_with_its_worker(report):
                self.tally["lost"] += 1
            return
        error = next((value for key, value in report.user_properties if key == RESULTS_ERROR_KEY), None)
        if error is not None:
            self.results_errors.append(error)
            self._show_results_error(error)  # once, when it first happens (unless said at the start)
        record = next((value for key, value in report.user_properties if key == RECORD_KEY), None)
        if record is None:
            return
        self.tally[record["outcome"]] += 1
        self.seconds["build"] += record.get("build_seconds") or 0.0
        confirmation = record.get("confirmation") or {}
        self.seconds["run"] += (record.get("run_seconds") or 0.0) + confirmation.get("seconds", 0.0)
        if "build_cache_hit" in record:
            self.tally["cache_hit" if record["build_cache_hit"] else "cache_miss"] += 1
        if record.get("resumed_from"):
            self.tally["resumed"] += 1
        if record.get("counts_cached"):
            self.tally["counts_cached"] += 1
        if record.get("machine"):
            self.identities.setdefault(record["target"], record["machine"])
        if record["outcome"] == "passed" and confirmation and not confirmation["confirmed"]:
            self.unconfirmed.append(confirmation)
        if record["outcome"] in ("passed", "regressed") and record.get("samples_ns"):
            _add_to_benchmark(self.config, record)
        if record.get("timing_source") == "emulated":
            self.emulated_records.append(record)


    def _lost_with_its_worker(self, report: pytest.TestReport) -> bool:
        """xdist's report of a kernel item whose worker died under it (killed, out of memory): no verdict came
        back and no record was written, but the item ran and must be counted."""
        if not (report.failed and report.when == "???" and "crashed while running" in str(report.longrepr)):
            return False
        path = (self.rootdir / report.nodeid.split("::")[0]).resolve()
        return path.name == "rvtune.toml" or any(path.is_relative_to(d) for d in self.kernel_dirs)


class _TargetUnavailable(Exception):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def _load_target_configs(rootdir: Path, config_file: str | None) -> dict[str, Any]:
    from pytest_rvtune.targets.config import ConfigError, load_targets
    try:
        return load_targets(rootdir, Path(config_file) if config_file else None)
    except ConfigError as exc:
        raise pytest.UsageError(f"target configuration: {exc}") from None


def _make_target(cfg: Any, worker_id: str) -> Any:
    from pytest_rvtune.targets.config import make_target
    return make_target(cfg, worker_id=worker_id)


#: Integer run options: (least, most, what the value means). The harness takes the same ranges on its command
#: line (rvtune_harness.h), except --runs 0, which gives no timing sample, so every item would fail on its own.
_RUN_OPTION_RANGES = {
    "rvtune_runs": (1, 1_000_000, "timed runs per item"),
    "rvtune_warmup": (0, 1_000_000, "warm-up runs per item"),
    "rvtune_threads": (0, 4096, "launcher threads (0 = all harts, 1 = serial)"),
}


def _check_run_option_ranges(config: pytest.Config) -> None:
    """A run option out of range is one usage error at start-up, not a failure of every item."""
    for option, (least, most, meaning) in _RUN_OPTION_RANGES.items():
        value = config.getoption(option)
        if value is not None and not least <= value <= most:
            raise pytest.UsageError(f"--{option.replace('_', '-')} {value}: {meaning}, from {least} to {most}")
    timeout = config.getoption("rvtune_timeout")
    if timeout is not None and not 0 < timeout < float("inf"):  # also rejects nan
        raise pytest.UsageError(f"--rvtune-timeout {timeout:g}: seconds one ELF run may take, a number above 0")


def _load_run_option(config: pytest.Config, option: str) -> Any:
    path = config.getoption(option)
    if not path:
        return None
    return _read_run(config, Path(path), f"--{option.replace('_', '-')}")


def _read_run(config: pytest.Config, path: Path, option: str, allow_empty: bool = False, advice: str = "") -> Any:
    """runs.load_run for an option: an unreadable file is a UsageError, a skipped torn line a pytest warning."""
    from pytest_rvtune.results.runs import RunFileError, RunFileWarning, load_run
    try:
        with warnings.catch_warnings(record=True) as skipped:
            warnings.simplefilter("always", RunFileWarning)
            run = load_run(path, allow_empty=allow_empty)
    except RunFileError as exc:
        raise pytest.UsageError(f"{option}: {exc}{advice}") from None
    for warning in skipped:  # torn lines: shown in the warnings summary, the rest of the file is used
        config.issue_config_time_warning(pytest.PytestWarning(f"{option}: {warning.message}"), stacklevel=2)
    return run


def _compare_thresholds(config: pytest.Config, base: Any) -> Any:
    """--rvtune-threshold, --rvtune-noise and --rvtune-alpha as compare.Thresholds; a bad value is a usage
    error up front."""
    thresholds, noise = config.getoption("rvtune_threshold"), config.getoption("rvtune_noise")
    alpha = config.getoption("rvtune_alpha")
    if base is None:
        if thresholds or noise or alpha is not None:
            raise pytest.UsageError("--rvtune-threshold, --rvtune-noise and --rvtune-alpha tune --rvtune-compare "
                                    "BASE; give the base run too")
        return None
    from pytest_rvtune.results.compare import DEFAULT_ALPHA, Thresholds
    from pytest_rvtune.results.noise import load_noise_for
    try:
        parsed = Thresholds.parse(thresholds)
    except ValueError as exc:
        raise pytest.UsageError(f"--rvtune-threshold: {exc}") from None
    try:
        parsed = dataclasses.replace(parsed, alpha=DEFAULT_ALPHA if alpha is None else alpha)
    except ValueError as exc:
        raise pytest.UsageError(f"--rvtune-alpha: {exc}") from None
    if noise:
        try:
            parsed = dataclasses.replace(parsed, noise=load_noise_for(noise, base.records, parsed.statistic))
        except ValueError as exc:  # a NoiseFileError names the file
            raise pytest.UsageError(f"--rvtune-noise: {exc}") from None
    return parsed


def _confirm_trials(config: pytest.Config, base: Any, thresholds: Any) -> int:
    """--rvtune-confirm: trial pairs; a usage error without --rvtune-compare, out of range, or too few to ever
    confirm anything at the compare's alpha."""
    from pytest_rvtune.results.compare import DEFAULT_CONFIRM_TRIALS
    from pytest_rvtune.results.confirm import check_trials
    trials = config.getoption("rvtune_confirm")
    if trials is None:
        return DEFAULT_CONFIRM_TRIALS
    if base is None:
        raise pytest.UsageError("--rvtune-confirm re-runs the regressions --rvtune-compare BASE finds; give a base")
    if not 0 <= trials <= 100:
        raise pytest.UsageError(f"--rvtune-confirm {trials}: interleaved trials per side, 0 (off) to 100")
    try:
        if trials:
            check_trials(trials, thresholds.alpha)
    except ValueError as exc:
        raise pytest.UsageError(f"--rvtune-confirm: {exc}") from None
    return trials


def _load_resume_index(config: pytest.Config) -> dict[Any, Any]:
    run = _load_run_option(config, "rvtune_resume")
    if run is None:
        return {}
    from pytest_rvtune.results.runs import RESUMABLE_OUTCOMES, completed_items
    done = completed_items(run)
    if not done:
        config.issue_config_time_warning(pytest.PytestWarning(
            f"--rvtune-resume {run.path}: none of its {len(run.records)} items can be resumed (only "
            f"{' or '.join(sorted(RESUMABLE_OUTCOMES))} items with their ELF and golden hashes): every item runs"),
            stacklevel=2)
    return done


def _session(config: pytest.Config) -> RvtuneSession:
    return config.stash[SESSION_KEY]


SESSION_KEY = pytest.StashKey[RvtuneSession]()
_GOLDEN_ENV_KEY = pytest.StashKey[None]()

# pytest's -k grammar has no '=': a user's `-k "BLOCK_SIZE_M=16"` is rewritten to the keyword
# `:BLOCK_SIZE_M:16:`, which every item carries for each of its config values. -k matches substrings; the
# colons around make it exact (BLOCK_SIZE_M=16 must not select BLOCK_SIZE_M=160 or XBLOCK_SIZE_M=16).
_KEY_EQ_VALUE = re.compile(r"\b([A-Za-z_]\w*)=([\w.]+)")


def _config_keywords(config: dict[str, Any]) -> set[str]:
    return {f":{key}:{value}:" for key, value in config.items()}


def _filter_keys(config_filter: str) -> set[str]:
    """The keys a --rvtune-config filter names (its syntax was checked at configure)."""
    return {clause.partition("=")[0].strip() for clause in config_filter.split(";") if clause.strip()}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rvtune: an item of the pytest-rvtune kernel suite")
    keyword = config.getoption("keyword", default="")
    if keyword and "=" in keyword:
        config.option.keyword = _KEY_EQ_VALUE.sub(r":\1:\2:", keyword)
    from pytest_rvtune.spec import filter_configs
    for config_filter in config.getoption("rvtune_config"):
        try:  # syntax only: with no configs no key can be unknown; keys are checked per kernel
            filter_configs([], config_filter)
        except ValueError as exc:
            raise pytest.UsageError(f"--rvtune-config: {exc}") from None
    session = config.stash[SESSION_KEY] = RvtuneSession(config)
    # golden.py finds its data through RVTUNE_GOLDEN_DIR; kernels outside this checkout keep theirs beside
    # their kernels directory rather than in the package's tree. Set only when that differs from golden.py's
    # own default and the user set nothing; restored at unconfigure (in-process runs).
    from pytest_rvtune.golden import golden_dir
    if "RVTUNE_GOLDEN_DIR" not in os.environ and session.golden_dir != golden_dir().resolve():
        config.stash[_GOLDEN_ENV_KEY] = None
        os.environ["RVTUNE_GOLDEN_DIR"] = str(session.golden_dir)
    config.pluginmanager.register(session, "rvtune-session")


def pytest_configure_node(node: Any) -> None:
    """xdist controller: every worker appends to the controller's results file."""
    node.workerinput["rvtune_run_id"] = _session(node.config).run_id


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()
    if _GOLDEN_ENV_KEY in config.stash:  # we set it: drop it again
        os.environ.pop("RVTUNE_GOLDEN_DIR", None)


# --------------------------------------------------------------------------------------------- collection
class KernelItemInfo:
    """What one kernel-suite item is: the loaded kernel module, case, config and target name."""

    def __init__(self, spec: Any, case: str, config: Any, target: str) -> None:
        self.spec = spec
        self.case = case
        self.config = config
        self.config_values = dict(config.kwargs)
        self.config_id = spec.config_id(config)
        self.target = target


class KernelModule(pytest.File):
    """A kernels/<name>.py module: one item per (case, config, target)."""

    def collect(self) -> Iterator[pytest.Item]:
        from pytest_rvtune.spec import KernelModuleError, filter_configs, filter_key_values, load_kernel_module
        session = _session(self.config)
        try:
            spec = load_kernel_module(self.path)
        except Exception as exc:
            # One broken kernel module must not stop the suite: pytest would interrupt the whole session on
            # a collection error, so the error is reported and the other kernels still run.
            self.config.option.continue_on_collection_errors = True
            message = str(exc) if isinstance(exc, KernelModuleError) else \
                f"kernel module {self.path}: {type(exc).__name__}: {exc}"
            raise self.CollectError(message) from exc
        session.kernel_modules += 1
        configs = list(spec.configs)
        known_keys = {key for config in configs for key in config}
        for config_filter in session.config_filters:
            missing = _filter_keys(config_filter) - known_keys
            for key in missing:
                session.filter_keys_unknown[key] += 1
            # A filter on a key this kernel does not have selects none of its configs (e.g. BLOCK_SIZE_M
            # across the suite leaves out jacobi); a key no kernel has is one collection error (see below).
            configs = [] if missing else filter_configs(configs, config_filter)
            if not missing:
                if filter_configs(spec.configs, config_filter):
                    session.filters_matched.add(config_filter)
                for key, values in filter_key_values(spec.configs, config_filter).items():
                    session.filter_values[config_filter].setdefault(key, set()).update(values)
        for marker in (spec.name, *spec.cases):  # per kernel and case, registered so --strict-markers works
            self.config.addinivalue_line("markers", f"{marker}: pytest-rvtune kernel or case {marker}")
        for target in session.target_names:
            cases = session.cases or [session.default_case(target)]
            unknown = [c for c in cases if c not in spec.cases]
            if unknown:
                self.config.option.continue_on_collection_errors = True
                raise self.CollectError(f"kernel module {self.path}: no case {', '.join(unknown)}; "
                                        f"it has {', '.join(spec.cases)}")
            for case in cases:
                for config in configs:
                    info = KernelItemInfo(spec, case, config, target)
                    suffix = f"-{target}" if len(session.target_names) > 1 else ""
                    name = f"{spec.name}[{case}-{info.config_id}{suffix}]"
                    item = KernelItem.from_parent(self, name=name, callobj=_kernel_item_test)
                    item.stash[ITEM_KEY] = info
                    for marker in (spec.name, case, "rvtune"):
                        item.add_marker(marker)
                    item.extra_keyword_matches.update(_config_keywords(info.config_values))
                    yield item


class KernelItem(pytest.Function):
    def reportinfo(self) -> tuple[Path, int, str]:
        # Line 0: there is no test function line; pytest's skip report needs a number.
        return self.path, 0, self.name


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path,
                        parent: pytest.Collector) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
    others: list[pytest.Collector] = yield
    from pytest_rvtune.collect import ProjectFile, is_project_file
    if is_project_file(file_path):  # a Triton_RVV checkout configured by `rvtune import`
        return [ProjectFile.from_parent(parent, path=file_path), *others]
    if file_path.suffix != ".py" or file_path.name.startswith("_") or file_path.name == "conftest.py":
        return others
    session = _session(parent.config)
    if not any(file_path.resolve().is_relative_to(d) for d in session.kernel_dirs):
        return others
    # A kernel module named on the command line (or matching python_files) is also a test module to pytest's
    # python plugin, which would import it a second time: a syntax error would then be reported twice, once
    # with pytest's import traceback. A kernel module is ours alone.
    return [KernelModule.from_parent(parent, path=file_path),
            *(c for c in others if not isinstance(c, pytest.Module))]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("benchmark_only", False):
        # Kernel items are benchmarks even though they do not request pytest-benchmark's fixture (their stats
        # come from the target's samples): --benchmark-only keeps them and skips the rest.
        for item in items:
            if ITEM_KEY in item.stash:
                item.own_markers = [m for m in item.own_markers
                                    if not (m.name == "skip" and "benchmark-only" in str(m.kwargs.get("reason")))]
    session = _session(config)
    nowhere = sorted(k for k, n in session.filter_keys_unknown.items() if n == session.kernel_modules > 0)
    if nowhere:
        # A collection error rather than a UsageError: xdist workers forward it to the controller, which
        # shows it (a UsageError raised in a worker is lost and the run just "collects nothing").
        message = (f"--rvtune-config: no kernel has the key(s) {', '.join(nowhere)}; check the spelling "
                   "against the config ids in `pytest --collect-only -q`")
        config.hook.pytest_collectreport(report=pytest.CollectReport(
            nodeid="rvtune-config", outcome="failed", longrepr=message, result=[]))
    for config_filter, values in session.filter_values.items():
        if config_filter in session.filters_matched or not values:  # no values: its key is unknown (above)
            continue
        existing = "; ".join(f"{key}: {', '.join(sorted(vs, key=_value_order))}" for key, vs in values.items())
        message = (f"--rvtune-config {config_filter}: no config of any kernel matches it; the values that exist "
                   f"are {existing}")
        config.hook.pytest_collectreport(report=pytest.CollectReport(
            nodeid="rvtune-config", outcome="failed", longrepr=message, result=[]))


def _value_order(value: str) -> tuple[bool, int, str]:
    """Config values as typed (filter_key_values), merged over kernels: ints in numeric order, then the rest."""
    is_int = value.lstrip("-").isdigit()
    return (not is_int, int(value) if is_int else 0, value)


# --------------------------------------------------------------------------------------------- fixtures
def _resolve_item(request: pytest.FixtureRequest, param: Any) -> KernelItemInfo:
    """A KernelItemInfo for a user's own test: ``(kernel, case, config)`` given by indirect parametrization.

    kernel is a module name in the kernel directories or a path; config a config id, a dict, or None for
    the first config; case None for the target's default case.
    """
    from pytest_rvtune.spec import as_config, load_kernel_module
    session = _session(request.config)
    kernel, case, config = (*tuple(param), None, None)[:3] if isinstance(param, list | tuple) else (param, None, None)
    path = Path(kernel)
    if path.suffix != ".py":
        path = next((d / f"{kernel}.py" for d in session.kernel_dirs if (d / f"{kernel}.py").is_file()), path)
    spec = load_kernel_module(path)
    if config is None:
        chosen = spec.configs[0]
    else:
        wanted = config if isinstance(config, str) else spec.config_id(as_config(config))
        chosen = next((c for c in spec.configs if spec.config_id(c) == wanted), None)
        if chosen is None:
            raise pytest.UsageError(f"rvtune_item: kernel {spec.name} has no config {wanted}; "
                                    f"configs are {', '.join(spec.config_id(c) for c in spec.configs)}")
    target = session.target_names[0]
    return KernelItemInfo(spec, case or session.default_case(target), chosen, target)


@pytest.fixture
def rvtune_item(request: pytest.FixtureRequest) -> KernelItemInfo:
    """The kernel, case, config and target of this item: a kernel-suite item's own, or in a user's test
    ``@pytest.mark.parametrize("rvtune_item", [("softmax", "small", "BLOCK_SIZE_M=4-BLOCK_SIZE_N=32")],
    indirect=True)``."""
    info = request.node.stash.get(ITEM_KEY, None)
    if info is not None:
        return info
    if not hasattr(request, "param"):
        raise pytest.UsageError("rvtune_item: parametrize it indirectly with (kernel, case, config id); "
                                "see README 'Using the fixtures in your own tests'")
    return _resolve_item(request, request.param)


@pytest.fixture(scope="session")
def rvtune_targets(request: pytest.FixtureRequest) -> RvtuneSession:
    """The session's targets, opened once per process: ``rvtune_targets.target("qemu")``."""
    return _session(request.config)


@pytest.fixture
def rvtune_target(request: pytest.FixtureRequest, rvtune_targets: RvtuneSession) -> Any:
    """The Target of this item (kernel items), or the first --rvtune-target (other tests).

    A target that cannot be opened fails the first item that needs it (naming the target, host and cause);
    the later ones of the same process skip with a pointer to that error.
    """
    info = request.node.stash.get(ITEM_KEY, None)
    name = info.target if info else rvtune_targets.target_names[0]
    try:
        return rvtune_targets.target(name)
    except _TargetUnavailable as exc:
        message = str(exc)
    # Outside the except block: the failure shows the message alone, not the exception chain behind it.
    if name in rvtune_targets.target_error_reported:
        pytest.skip(f"target {name!r} unavailable (the error is reported once, above)")
    rvtune_targets.target_error_reported.add(name)
    pytest.fail(message, pytrace=False)


@pytest.fixture
def rvtune_build(rvtune_item: KernelItemInfo, rvtune_target: Any, rvtune_targets: RvtuneSession) -> Any:
    """The item's ELF (build.BuildArtifact), built or fetched from the content-addressed cache.

    A build error fails the test with the compiler's message."""
    outcome = _build(rvtune_targets, rvtune_item, rvtune_target)
    if outcome.error is not None:
        pytest.fail(outcome.error, pytrace=False)
    return outcome.artifact


@pytest.fixture
def rvtune_golden(rvtune_item: KernelItemInfo, rvtune_targets: RvtuneSession) -> Any:
    """The item's golden data (golden.GoldenSet: files, scalars, tolerance, sha256), generated on demand."""
    golden, error = _golden(rvtune_targets, rvtune_item)
    if error is not None:
        pytest.fail(error, pytrace=False)
    return golden


class BuildOutcome:
    """The ELF of an item, or the build error (a build error fails the item, it does not error it)."""

    def __init__(self, artifact: Any = None, error: str | None = None, seconds: float = 0.0) -> None:
        self.artifact = artifact
        self.error = error
        self.seconds = seconds


def _build(session: RvtuneSession, info: KernelItemInfo, target: Any) -> BuildOutcome:
    from pytest_rvtune.build import build_item
    started = time.perf_counter()
    try:
        artifact = build_item(info.spec, info.case, info.config, target.isa)
    except Exception as exc:  # BuildError and golden-data errors alike: the message names kernel and config
        return BuildOutcome(error=str(exc), seconds=time.perf_counter() - started)
    return BuildOutcome(artifact, seconds=time.perf_counter() - started)


def _golden(session: RvtuneSession, info: KernelItemInfo) -> tuple[Any, str | None]:
    from pytest_rvtune.golden import golden_set
    try:
        return golden_set(info.spec, info.case, info.config), None
    except Exception as exc:  # GoldenError names the file; anything else is the kernel module's fault
        return None, f"golden data of {info.spec.name} [case {info.case}, {info.config_id}]: {exc}"


# --------------------------------------------------------------------------------------------- the item
def _kernel_item_test(request: pytest.FixtureRequest, rvtune_item: KernelItemInfo, rvtune_target: Any) -> None:
    """One kernel-suite item: build, golden data, run (or resume), verdict, record. Never raises mid-way:
    every failure becomes an outcome with a message, recorded like a pass."""
    session = _session(request.config)
    info = rvtune_item
    work = ItemWork(request.node.nodeid, info.spec.name, info.case, info.config_values, info.config_id,
                    info.target, dict(info.spec.cases[info.case]), info.spec.problem_of(info.config))
    # Golden data first: a corrupt or missing file is bad input (outcome "error", naming the file), not a
    # build failure, although the build reads the same files.
    golden, error = _golden(session, info)
    if error is not None:
        outcome = item_error(work, rvtune_target, error)
    else:
        build = _build(session, info, rvtune_target)
        if build.error is not None:
            outcome = build_failed(work, rvtune_target, build.error, build.seconds)
        else:
            outcome = _run_or_resume(session, work, rvtune_target, build, golden,
                                     getattr(info.config, "num_threads", None))
    _finish(request, session, outcome, rvtune_target)


def _run_or_resume(session: RvtuneSession, work: ItemWork, target: Any, build: BuildOutcome,
                   golden: Any, num_threads: int | None = None) -> ItemOutcome:
    artifact = build.artifact
    build_info = {"build_seconds": build.seconds, "build_cache_hit": bool(artifact.cache_hit)}
    resumed = _resumed_record(session, artifact.elf_sha256, golden.sha256, target)
    if resumed is not None:
        record = dict(resumed) | {"nodeid": work.nodeid, "resumed_from": str(session.config.getoption(
            "rvtune_resume")), "run_seconds": 0.0} | build_info
        verdict = Verdict(record["outcome"], record.get("message") or f"{work.what}: resumed")
        return ItemOutcome(verdict, record, timings={"build": build.seconds})
    options = session.run_options(target, num_threads)
    try:
        target.prepare([p for p in artifact.argv if isinstance(p, Path)] + [artifact.elf])
        with exclusive(target):
            outcome = run_item(work, target, elf=artifact.elf, argv=list(artifact.argv),
                               elf_sha256=artifact.elf_sha256, golden_sha256=golden.sha256, options=options,
                               kernel_symbol=artifact.kernel_symbol, build_info=build_info)
        from pytest_rvtune.results.rounds import pool
        outcome.record = pool(outcome.record,
                              session.earlier_round((work.target, work.kernel, work.case, work.config_id)))
        return outcome
    except Exception as exc:  # a board lost after its retry, a full disk, a lock never freed: this item
        from pytest_rvtune.targets.ssh import BoardLostError
        if isinstance(exc, BoardLostError):
            # The board is gone for this session: its later items skip with a pointer to this error instead of
            # each waiting for a reconnect that fails the same way.
            session.target_errors[work.target] = str(exc)
            session.target_error_reported.add(work.target)
        return item_error(work, target, f"{work.what}: {exc}")


def _resumed_record(session: RvtuneSession, elf_sha: str, golden_sha: str, target: Any) -> Any:
    if not session.resume_index:
        return None
    from pytest_rvtune.results.runs import identity_key
    return session.resume_index.get((elf_sha, golden_sha, identity_key(target.identity())))


def _finish(request: pytest.FixtureRequest, session: RvtuneSession, outcome: ItemOutcome, target: Any) -> None:
    record = outcome.record | {"run_id": session.run_id}  # the session that wrote the line: rounds.py
    verdict = outcome.verdict
    if verdict.passed and session.compare_base is not None:
        verdict = _compare_with_base(session, record, target) or verdict
        record["outcome"], record["message"] = verdict.outcome, ("" if verdict.passed else verdict.message)
    try:
        session.writer.append(record)  # at once: a killed run loses nothing that finished
    except ResultsWriteError as exc:  # a full disk or read-only location: the verdict still counts
        request.node.user_properties.append((RESULTS_ERROR_KEY, exc.cause))
    request.node.user_properties.append((RECORD_KEY, record))
    if not verdict.passed:
        pytest.fail(verdict.message, pytrace=False)


def _compare_with_base(session: RvtuneSession, record: dict[str, Any], target: Any) -> Verdict | None:
    """A failing verdict when the item regressed against the base run. A time regression is re-run
    interleaved first (confirm.py); the confirmation, either way, goes into ``record``."""
    from pytest_rvtune.results.compare import compare_record
    from pytest_rvtune.results.confirm import confirm_locked, needs_confirmation
    from pytest_rvtune.results.runs import record_from_dict
    base = session.compare_base.find(record)
    if base is None:
        return None
    new = record_from_dict(record)
    result = compare_record(base, new, session.compare_thresholds)
    if not result.regressed:
        return None
    message = result.message
    if session.confirm_trials and needs_confirmation(result):
        confirmation = confirm_locked(base, new, target, session.run_options(target), session.compare_thresholds,
                                      session.confirm_trials)
        if isinstance(confirmation, str):
            message += f"\n(not re-run to confirm: {confirmation})"
        else:
            record["confirmation"] = confirmation.record_field() | {"flagged": result.message}
            if not confirmation.confirmed:
                return None  # the summary lists it (pytest_runtest_logreport)
            message += f"\n{confirmation.describe()}"
    return Verdict("regressed", f"{message}\n(base run {session.compare_base.path})")


# --------------------------------------------------------------------------------------------- reporting
@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Records that could not be written fail the run, even when every item passed: a CI gate or a later
    compare would otherwise read a green run whose results are gone."""
    rvtune = session.config.stash.get(SESSION_KEY, None)
    if rvtune is not None and rvtune.results_errors and _is_controller(session.config) \
            and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _lost_records(session: RvtuneSession) -> str:
    if not session.results_errors:
        return ""
    return f"; {len(session.results_errors)} records NOT written: {session.results_errors[0]}"


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


#: Record fields carried into pytest-benchmark's extra_info (the JSON keeps them; the table does not show them).
EXTRA_INFO_FIELDS = ("kernel", "case", "case_params", "problem", "config", "config_id", "target", "machine",
                     "counters", "timing_source", "elf_sha256", "golden_sha256", "samples_ns", "outcome", "nodeid")


def _add_to_benchmark(config: pytest.Config, record: dict[str, Any]) -> None:
    bench_session = config.pluginmanager.get_plugin("pytest-benchmark")
    # Under xdist pytest-benchmark marks itself disabled on the controller too: that is exactly the case we
    # merge for, so only the user's own --benchmark-disable / --benchmark-skip stop us.
    if bench_session is None or config.getoption("benchmark_disable", False) or \
            config.getoption("benchmark_skip", False):
        return
    from pytest_rvtune.benchmark_bridge import add_benchmark
    nodeid = record["nodeid"]
    name = nodeid.rsplit("::", 1)[-1]
    param = name[name.index("[") + 1:-1] if "[" in name else ""
    extra = {key: record.get(key) for key in EXTRA_INFO_FIELDS}
    add_benchmark(bench_session, nodeid=nodeid, name=name, param=param,
                  params={"case": record["case"], **record["config"], "target": record["target"]},
                  samples_ns=record["samples_ns"], extra_info=extra, group=_benchmark_group(record))


def _benchmark_group(record: dict[str, Any]) -> str:
    """One pytest-benchmark table per kernel, case and problem (causal and non-causal never share one)."""
    problem = "-".join(f"{key}={value}" for key, value in (record.get("problem") or {}).items())
    return "-".join(part for part in (record["kernel"], record["case"], problem) if part)


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # firstresult: ours, not pytest-benchmark's host info
def pytest_benchmark_generate_machine_info(config: pytest.Config) -> dict[str, Any] | None:
    """Saved runs carry the identity of the targets measured, never only the host's.

    Identities come from the finished items where there are any (no extra connection to a board from the
    xdist controller); otherwise the target is opened here (pytest-benchmark asks at start-up to compare)."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return None
    identities: dict[str, Any] = {}
    for name in session.target_names:
        if name in session.identities:
            identities[name] = session.identities[name]
            continue
        try:
            identities[name] = session.target(name).identity()
        except _TargetUnavailable as exc:
            identities[name] = {"target": name, "error": str(exc)}
    return {"node": platform.node(), "machine": platform.machine(), "system": platform.system(),
            "python_version": platform.python_version(), "rvtune_targets": identities}


#: The identity fields that name the machine measured (not the toolchain: comparing compilers is legitimate).
BOARD_IDENTITY_KEYS = ("isa", "vlen", "board", "arch", "cpu")


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_compare_machine_info(config: pytest.Config, benchmarksession: Any, machine_info: dict[str, Any],
                                          compared_benchmark: dict[str, Any]) -> None:
    """--benchmark-compare against a run of another board is an error, not a warning: its numbers are not
    comparable. pytest-benchmark files saved runs by host, so such a run can sit right beside ours."""
    ours = machine_info.get("rvtune_targets") or {}
    theirs = (compared_benchmark.get("machine_info") or {}).get("rvtune_targets")
    if theirs is None:
        return  # not an rvtune run: pytest-benchmark's own warning applies
    for name, identity in ours.items():
        saved = theirs.get(name)
        if saved is None:
            raise pytest.UsageError(
                f"--benchmark-compare: the saved run measured target(s) {', '.join(sorted(theirs))}, not {name!r}; "
                "compare runs of the same target (rvtune compare A B compares any two runs item by item)")
        differs = {k: (saved.get(k), identity.get(k)) for k in BOARD_IDENTITY_KEYS if saved.get(k) != identity.get(k)}
        if differs:
            detail = ", ".join(f"{k} {a!r} vs {b!r}" for k, (a, b) in differs.items())
            raise pytest.UsageError(f"--benchmark-compare: the saved run of target {name!r} was measured on another "
                                    f"machine ({detail}); compare runs of the same board")


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> Iterator[None]:
    # A wrapper, so the line comes last and still comes when pytest-benchmark raises PerformanceRegression
    # (--benchmark-compare-fail) from its own summary.
    try:
        return (yield)
    finally:
        _write_summary(terminalreporter, config)


def _write_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not _is_controller(config):
        return
    tally = session.tally
    outcomes = (*OUTCOMES, "regressed", "lost")
    if not sum(tally[o] for o in outcomes):
        return
    shown = [o for o in outcomes if o in SUMMARY_OUTCOMES or tally[o]]
    counts = ", ".join(f"{tally[o]} {o.replace('_', '-')}" for o in shown)
    if tally["lost"]:
        counts += " (xdist worker crashed mid-item: no verdict, no record)"
    resumed = f"; {tally['resumed']} resumed" if tally["resumed"] else ""
    if tally["counts_cached"]:  # an unchanged emulated run: its result came from the count cache
        resumed += f"; {tally['counts_cached']} runs reused (unchanged, QEMU not run)"
    from pytest_rvtune.results.summary import ranking_lines
    ranking = ranking_lines(session.emulated_records)
    for line in ranking:
        terminalreporter.write_line(line)
    if ranking:
        terminalreporter.write_line(f"  all configs: rvtune report {session.results_path}")
    terminalreporter.write_line(
        f"rvtune: {counts}{resumed}; build cache {tally['cache_hit']} hits / {tally['cache_miss']} misses; "
        f"building {session.seconds['build']:.1f} s, running {session.seconds['run']:.1f} s; "
        f"results: {session.results_path}{_lost_records(session)}")
    if session.unconfirmed:
        from pytest_rvtune.results.confirm import describe_unconfirmed
        terminalreporter.write_line(describe_unconfirmed(session.unconfirmed))
