"""The session's options (one frozen object, validated once at configure) and its per-process state: targets
opened once, the results file, the base run to compare with, the resume index and the counts for the summary.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rvtune import paths, repairs
from pytest_rvtune.benchmark_bridge import modelled_ns
from pytest_rvtune.remote_workers import SHIPPED_KEY, RemoteWorkers, node_host, unpack_files
from pytest_rvtune.results.writer import ResultsWriter, new_run_id, unwritable_reason
from pytest_rvtune.run_options import RunOptions, default_run_options
from pytest_rvtune.verdict import OUTCOMES, Outcome

if TYPE_CHECKING:  # imported where used: a plain `pytest tests` run never loads the targets or results code
    from pytest_rvtune.results.compare import Thresholds
    from pytest_rvtune.results.records import RunRecord
    from pytest_rvtune.results.runs import Run
    from pytest_rvtune.results.shortlist import Shortlist
    from pytest_rvtune.targets.base import Target
    from pytest_rvtune.targets.config import TargetConfig
    from pytest_rvtune.targets.factory import HeldPlace

#: user_properties key of a finished item's record (the controller tallies it and hands it to pytest-benchmark).
RECORD_KEY = "rvtune_record"
#: user_properties key of an item whose record could not be written: the cause, for the controller to show.
RESULTS_ERROR_KEY = "rvtune_results_error"
DEFAULT_TARGET = "qemu"
#: workerinput key of the leases of boards the xdist controller took from a farm for its workers.
PLACES_KEY = "rvtune_places"
#: The kernel-directory ini option's name before collection became opt-in (rvtune_kernel_dirs); refused by name.
RENAMED_INI = "rvtune_kernels"
DEFAULT_TIMEOUT = 300.0
#: The outcomes the summary line always shows (others only when they happened).
SUMMARY_OUTCOMES: tuple[Outcome, ...] = ("passed", "wrong", "build_failed", "crashed", "timeout")

#: Integer run options: (least, most, what the value means). The harness takes the same ranges on its command
#: line (rvtune_harness.h), except --runs 0, which gives no timing sample, so every item would fail on its own.
RUN_OPTION_RANGES = {
    "rvtune_runs": (1, 1_000_000, "timed runs per item"),
    "rvtune_warmup": (0, 1_000_000, "warm-up runs per item"),
    "rvtune_threads": (0, 4096, "launcher threads (0 = all harts, 1 = serial)"),
}


@dataclass(frozen=True)
class RvtuneOptions:
    """The --rvtune-* options and ini values, read and checked once: a bad value is one usage error at start-up,
    not a failure of every item."""

    target_names: tuple[str, ...]
    targets_given: bool  # --rvtune-target or --rvtune-config-file on the command line: checked up front
    cases: tuple[str, ...]
    config_filters: tuple[str, ...]
    timeout: float | None
    runs: int | None
    max_time: float | None
    warmup: int | None
    threads: int
    results: str | None
    rank_by: str | None  # --rvtune-rank-by: what the session-end ranking ranks by (None: the default)
    timing_model: bool  # --rvtune-timing-model: emulated runs also record est_cycles and cache-model misses
    config_file: str | None
    compare: str | None
    thresholds: tuple[str, ...]
    noise: tuple[str, ...]
    alpha: float | None
    confirm: int | None
    resume: str | None
    shortlist: str | None
    shortlist_size: int | None
    kernel_dirs: tuple[Path, ...]  # collected from: empty unless the project opts in (rvtune_kernel_dirs, --rvtune)
    golden_dir: Path
    progress: float  # seconds between progress lines off a terminal (0: no progress shown)
    search: str | None = None  # --rvtune-search: the strategy choosing which kernel items run (search_loop.py)
    budget: int | None = None  # --rvtune-budget: items a search runs per kernel, target and problem
    search_seed: int = 0
    search_reference: str | None = None  # --rvtune-search-reference: an earlier run to measure the gap against
    xdist: bool = False  # -n N (N > 0) or --dist: a search needs one process

    @classmethod
    def from_config(cls, config: pytest.Config) -> RvtuneOptions:
        from pytest_rvtune.spec import filter_configs

        for config_filter in config.getoption("rvtune_config"):
            try:  # syntax only: with no configs no key can be unknown; keys are checked per kernel
                filter_configs([], config_filter)
            except ValueError as exc:
                raise pytest.UsageError(f"--rvtune-config: {exc}") from None
        rootdir = Path(config.rootpath)
        try:
            paths.settle_env_dirs()
        except paths.EnvDirError as exc:
            raise pytest.UsageError(str(exc)) from None
        if config.getini(RENAMED_INI):
            raise pytest.UsageError(f"{config.inipath or '-o'}: the ini option {RENAMED_INI} is now "
                                    "rvtune_kernel_dirs: rename it there")
        # Collection is opt-in: a project names its kernel directories (or passes --rvtune), so an unrelated
        # project's kernels/util.py is never imported as a kernel module.
        kernel_dirs = tuple(Path(p).resolve() for p in config.getini("rvtune_kernel_dirs"))
        if not kernel_dirs and config.getoption("rvtune"):
            kernel_dirs = ((rootdir / "kernels").resolve(),)
        golden = config.getini("rvtune_golden")
        golden_dir = (Path(golden[0]).resolve() if golden
                      else (kernel_dirs[0].parent if kernel_dirs else rootdir.resolve()) / "golden")
        if os.environ.get("RVTUNE_GOLDEN_DIR"):  # the documented override wins over both
            golden_dir = Path(os.environ["RVTUNE_GOLDEN_DIR"]).resolve()
        return cls(
            target_names=tuple(dict.fromkeys(config.getoption("rvtune_target") or [DEFAULT_TARGET])),
            targets_given=bool(config.getoption("rvtune_target") or config.getoption("rvtune_config_file")),
            cases=tuple(config.getoption("rvtune_case")),
            config_filters=tuple(config.getoption("rvtune_config")),
            timeout=config.getoption("rvtune_timeout"),
            runs=config.getoption("rvtune_runs"),
            max_time=config.getoption("rvtune_max_time"),
            warmup=config.getoption("rvtune_warmup"),
            threads=config.getoption("rvtune_threads"),
            results=config.getoption("rvtune_results"),
            rank_by=config.getoption("rvtune_rank_by"),
            timing_model=config.getoption("rvtune_timing_model"),
            config_file=config.getoption("rvtune_config_file"),
            compare=config.getoption("rvtune_compare"),
            thresholds=tuple(config.getoption("rvtune_threshold")),
            noise=tuple(config.getoption("rvtune_noise")),
            alpha=config.getoption("rvtune_alpha"),
            confirm=config.getoption("rvtune_confirm"),
            resume=config.getoption("rvtune_resume"),
            shortlist=config.getoption("rvtune_shortlist"),
            shortlist_size=config.getoption("rvtune_shortlist_size"),
            kernel_dirs=kernel_dirs,
            golden_dir=golden_dir,
            progress=config.getoption("rvtune_progress"),
            search=config.getoption("rvtune_search"),
            budget=config.getoption("rvtune_budget"),
            search_seed=config.getoption("rvtune_search_seed"),
            search_reference=config.getoption("rvtune_search_reference"),
            xdist=bool(config.getoption("numprocesses", None)) or config.getoption("dist", "no") != "no"
            or hasattr(config, "workerinput"),
        )

    def check_ranges(self) -> None:
        """A run option out of range is one usage error at start-up, not a failure of every item."""
        for option, (least, most, meaning) in RUN_OPTION_RANGES.items():
            value = getattr(self, option.removeprefix("rvtune_"))
            if value is not None and not least <= value <= most:
                raise pytest.UsageError(f"--{option.replace('_', '-')} {value}: {meaning}, from {least} to {most}")
        if self.timeout is not None and not 0 < self.timeout < float("inf"):  # also rejects nan
            raise pytest.UsageError(f"--rvtune-timeout {self.timeout:g}: seconds one ELF run may take, a number "
                                    "above 0")
        if self.max_time is not None and not 0 <= self.max_time <= 3600:
            raise pytest.UsageError(f"--rvtune-max-time {self.max_time:g}: seconds of samples per item, between 0 "
                                    "and 3600 (0: exactly --rvtune-runs samples)")
        self.check_search()
        if not 0 <= self.progress < float("inf"):
            raise pytest.UsageError(f"--rvtune-progress {self.progress:g}: seconds between progress lines, a number "
                                    ">= 0 (0: no progress shown)")


    def check_search(self) -> None:
        """--rvtune-search and its options, together and in range: one usage error at start-up."""
        from pytest_rvtune.search.strategies import STRATEGIES
        if self.search is None:
            given = [o for o, v in (("--rvtune-budget", self.budget), ("--rvtune-search-reference",
                                                                       self.search_reference)) if v is not None]
            if given:
                raise pytest.UsageError(f"{', '.join(given)} without --rvtune-search STRATEGY: give the search "
                                        f"({', '.join(STRATEGIES)})")
            return
        if self.search not in STRATEGIES:
            raise pytest.UsageError(f"--rvtune-search {self.search}: unknown strategy; expected one of "
                                    f"{', '.join(STRATEGIES)} (docs/scaling.md)")
        if self.xdist:
            raise pytest.UsageError(f"--rvtune-search {self.search}: a search chooses each item from the results "
                                    "before it, in one process: run it without -n / --dist (docs/scaling.md)")
        if self.search == "tpe":
            from pytest_rvtune.search.strategies import import_optuna
            try:
                import_optuna()
            except ImportError as exc:
                raise pytest.UsageError(f"--rvtune-search tpe: {exc}") from None
        if self.budget is None:
            raise pytest.UsageError(f"--rvtune-search {self.search} needs --rvtune-budget N: the (config, case) "
                                    "items to run per kernel, target and problem")
        if self.budget < 1:
            raise pytest.UsageError(f"--rvtune-budget {self.budget}: the (config, case) items to run per kernel, "
                                    "target and problem, at least 1")


class TargetUnavailable(Exception):
    """A target that could not be opened in this process; the message names it, its host and the cause."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class RvtuneSession:
    """Per-process state: targets (opened once), results file, counters for the summary line."""

    def __init__(self, config: pytest.Config) -> None:
        from pytest_rvtune.compiler.cache import forget_checks
        self.config = config
        forget_checks()  # every cache entry is checked at its first use in each session
        repairs.new_session()
        self.options = options = RvtuneOptions.from_config(config)
        self.rootdir = Path(config.rootpath)
        self.target_names: list[str] = list(options.target_names)
        self.cases: list[str] = list(options.cases)
        self.config_filters: list[str] = list(options.config_filters)
        self.kernel_dirs = list(options.kernel_dirs)
        self._kernel_modules: dict[str, bool] = {}  # module part of a node id -> is_kernel_item
        self.golden_dir = options.golden_dir
        self.targets: dict[str, Target] = {}
        self.target_errors: dict[str, str] = {}
        self.target_error_reported: set[str] = set()
        self.tally: Counter[str] = Counter()
        self.compared: Counter[str] = Counter()  # --rvtune-compare: items per comparison verdict
        self.seconds: dict[str, float] = {"build": 0.0, "run": 0.0}  # summed over finished items
        self.identities: dict[str, dict[str, Any]] = {}  # target name -> identity, from finished items
        self.filter_keys_unknown: dict[str, int] = Counter()  # filter key -> kernel modules without it
        # filter -> key -> values the kernels with its keys have, for a filter that matched no config at all
        self.filter_values: dict[str, dict[str, set[str]]] = {f: {} for f in self.config_filters}
        self.filters_matched: set[str] = set()
        self.cache_repairs: dict[str, None] = {}  # damaged cache entries items met (repairs.py), in order
        self.unconfirmed: list[dict[str, Any]] = []  # records' confirmation fields: flagged, then refuted
        self.finished_records: list[dict[str, Any]] = []  # controller: for the ranking at the end
        self.remote_workers = RemoteWorkers()  # controller: xdist workers on other hosts, hosts lost mid-run
        self.kernel_modules = 0
        self.search_field: dict[str, Any] | None = None  # the record field of the item a search runs now
        self.search_lines: list[str] = []  # what the searches found, for the terminal summary
        # --rvtune-case (or the targets' default cases) over modules with different case sets: the cases asked, those
        # some module has, and per module that lacks one (node id, path, kernel, its missing cases, its cases) to be
        # left out with a note
        self.cases_asked: set[str] = set()
        self.cases_found: set[str] = set()
        self.cases_left_out: list[tuple[str, str, str, list[str], list[str]]] = []
        workerinput = getattr(config, "workerinput", None)
        self.run_id: str = workerinput["rvtune_run_id"] if workerinput else new_run_id()
        self.results_path = (results_file_path(options.results) if options.results
                             else paths.results_dir(self.rootdir) / f"{self.run_id}.jsonl")
        # A worker on another host reads the files the options name from the copies its controller sent.
        self._shipped_dir: Path | None = None
        if workerinput and workerinput.get(SHIPPED_KEY):
            self._shipped_dir = Path(tempfile.mkdtemp(prefix="rvtune-shipped-"))
            shipped = unpack_files(workerinput[SHIPPED_KEY], self._shipped_dir)
            if "results" in shipped:  # earlier rounds to pool with (the controller appends to the real file)
                self.results_path = shipped.pop("results")[0]
            def copy_of(name: str, given: str | None) -> str | None:
                return str(shipped[name][0]) if name in shipped else given

            options = self.options = dataclasses.replace(
                options, noise=tuple(str(p) for p in shipped.get("noise", options.noise)),
                compare=copy_of("compare", options.compare), resume=copy_of("resume", options.resume),
                shortlist=copy_of("shortlist", options.shortlist))
        self._writer: ResultsWriter | None = None
        self.results_errors: list[str] = []  # the cause, per record not written (controller: of all workers)
        self.results_error_shown = False
        self._earlier_rounds: dict[tuple[str, str, str, str], Mapping[str, Any]] | None = None
        self.worker_id: str = workerinput["workerid"] if workerinput else "main"
        # Boards taken from a farm (labgrid places) for the whole session: the controller holds them, and its
        # workers get their leases (the board's address) or the error that kept the controller from one.
        self.held_places: dict[str, HeldPlace] = {}
        self.place_leases: dict[str, dict[str, Any]] = dict(workerinput.get(PLACES_KEY, {})) if workerinput else {}
        self._configs: dict[str, TargetConfig] | None = None
        if options.targets_given:
            self.target_configs()  # asked for by name: a bad name or file is an error before anything runs
        options.check_ranges()
        self.compare_base = self._load_run_option(options.compare, "--rvtune-compare")
        self.compare_thresholds = self._compare_thresholds()
        self.confirm_trials = self._confirm_trials()
        self.resume_path: Path | None = None  # the run --rvtune-resume named, as resolved
        self.resume_index = self._load_resume_index()
        self.shortlist = self._load_shortlist()
        self.search_reference = self._load_run_option(options.search_reference, "--rvtune-search-reference")
        self.started = time.time()  # the cache's size cap never evicts what this session used
        self.cache_cap = self._cache_cap()
        self.cache_pruned: str | None = None  # the summary's line about what the cap evicted
        if self.results_path.is_file():  # read now: a file that is not a run (binary...) is refused before
            self._earlier_rounds = self._load_earlier_rounds()  # anything runs or is appended to it

    @property
    def is_controller(self) -> bool:
        return is_controller(self.config)

    def earlier_round(self, key: tuple[str, str, str, str]) -> Mapping[str, Any] | None:
        """The item's record from an earlier session in the same results file (a round to pool with)."""
        if self._earlier_rounds is None:
            self._earlier_rounds = self._load_earlier_rounds()
        return self._earlier_rounds.get(key)

    def _load_earlier_rounds(self) -> dict[tuple[str, str, str, str], Mapping[str, Any]]:
        from pytest_rvtune.results.rounds import earlier_rounds
        # allow_empty: a file a full disk or a kill left without one whole line is still ours to append to
        run = self._read_run(self.results_path, "--rvtune-results", allow_empty=True,
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

    def write_record(self, record: dict[str, Any]) -> str | None:
        """Append one record to the results file; the cause when it could not be (a full disk, a read-only
        location: the item's verdict still counts)."""
        from pytest_rvtune.results.writer import ResultsWriteError
        try:
            self.writer.append(record)
        except ResultsWriteError as exc:
            return exc.cause
        return None

    def check_results_writable(self) -> None:
        """Say at once when the results file cannot be written (a read-only location): the items still run."""
        explicit = self.options.results is not None
        if not self.is_controller or not (explicit or any(d.is_dir() for d in self.kernel_dirs)):
            return  # workers: the controller says it; no kernels: nothing would be recorded anyway
        reason = unwritable_reason(self.results_path)
        if reason is not None:
            self.show_results_error(reason)

    def show_results_error(self, cause: str) -> None:
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

    def target_configs(self) -> dict[str, TargetConfig]:
        """Built-in and configured targets, read on first use: a broken rvtune.toml does not stop a plain
        `pytest tests` that never uses a target."""
        if self._configs is None:
            from pytest_rvtune.targets.config import ConfigError, load_targets
            config_file = self.options.config_file
            try:
                configs = load_targets(self.rootdir, Path(config_file) if config_file else None)
            except ConfigError as exc:
                raise pytest.UsageError(f"target configuration: {exc}") from None
            unknown = [name for name in self.target_names if name not in configs]
            if unknown:
                raise pytest.UsageError(
                    f"--rvtune-target {', '.join(unknown)}: unknown target; known targets are "
                    f"{', '.join(sorted(configs))} (configure boards in rvtune.toml, see docs/targets.md)")
            self._configs = configs
        return self._configs

    def target(self, name: str) -> Target:
        """The live target ``name``, opened once per process; TargetUnavailable (cached) if it cannot be."""
        if name in self.target_errors:
            raise TargetUnavailable(name, self.target_errors[name])
        if name not in self.targets:
            from pytest_rvtune.targets.factory import make_target
            lease = self.place_leases.get(name)
            try:
                if lease is not None and "error" in lease:
                    raise RuntimeError(lease["error"])  # the controller could not take the place
                self.targets[name] = make_target(self.target_configs()[name], worker_id=self.worker_id,
                                                 with_timing_model=self.options.timing_model, lease=lease)
            except Exception as exc:  # one clear error per target and process, not one per item
                text = str(exc)
                self.target_errors[name] = text if f"target {name!r}" in text else \
                    f"target {name!r} is unavailable: {type(exc).__name__}: {text}"
                raise TargetUnavailable(name, self.target_errors[name]) from exc
        return self.targets[name]

    def default_case(self, target_name: str) -> str:
        cfg = self.target_configs().get(target_name)
        if cfg is not None and cfg.default_case:
            return cfg.default_case
        emulated = cfg is not None and cfg.timing_source == "emulated"
        return "emu" if emulated or target_name == "qemu" else "bench"

    def run_options(self, target: Target, num_threads: int | None = None) -> RunOptions:
        """The item's run options; ``num_threads``, a config's own (triton-cpu's ``num_threads=n``), wins over
        --rvtune-threads: the kernel's author tuned that config for that thread count."""
        defaults = default_run_options(emulated=target.timing_source == "emulated")
        options = self.options
        return dataclasses.replace(
            defaults,
            warmup=options.warmup if options.warmup is not None else defaults.warmup,
            runs=options.runs if options.runs is not None else defaults.runs,
            max_time=options.max_time if options.max_time is not None else defaults.max_time,
            threads=options.threads if num_threads is None else num_threads,
            timeout=self.timeout_for(target.name),
            timeout_setting=self.timeout_setting(target.name),
        )

    def timeout_for(self, target_name: str) -> float:
        """--rvtune-timeout, else the target's own `timeout` (a slow board may need more), else the default."""
        if self.options.timeout is not None:
            return self.options.timeout
        cfg = self.target_configs().get(target_name)
        return (cfg.timeout if cfg is not None else None) or DEFAULT_TIMEOUT

    def timeout_setting(self, target_name: str) -> str:
        """Where timeout_for's value comes from, as a timed-out item's message names it."""
        if self.options.timeout is not None:
            return "--rvtune-timeout"
        cfg = self.target_configs().get(target_name)
        if cfg is not None and cfg.timeout:
            return f"{cfg.where('timeout')} = {cfg.timeout:g}; --rvtune-timeout overrides it"
        return "the default; --rvtune-timeout N sets it"

    def take_places(self, on_wait: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
        """Controller: each target whose board comes from a farm (a labgrid place) is taken once, at the start,
        and its lease handed to every worker (pytest-xdist's: workers reserving on their own would wait for each
        other's whole session); ``on_wait`` is told when a place is held by others and the wait begins. A target
        that cannot be taken gets its error instead, which its items report."""
        from pytest_rvtune.targets.factory import take_place

        if not self.options.targets_given:  # the default target (qemu) is no farm's: rvtune.toml is not read here
            return dict(self.place_leases)
        for name in self.target_names:
            if name in self.place_leases:
                continue
            cfg = self.target_configs()[name]  # (checked at configure: targets asked for by name)
            try:
                taken = take_place(cfg, on_wait)
            except Exception as exc:
                text = str(exc)
                self.place_leases[name] = {"error": text if f"target {name!r}" in text else
                                           f"target {name!r} is unavailable: {type(exc).__name__}: {text}"}
                continue
            if taken is not None:
                self.held_places[name], self.place_leases[name] = taken
        return dict(self.place_leases)

    def files_for_workers(self) -> dict[str, list[Path]]:
        """Controller: the files the options name (resolved: `latest` is a file), per option field, for workers on
        other hosts; and the results file when it exists (earlier rounds to pool with)."""
        named: dict[str, list[Path]] = {}
        for name, path in (("compare", self.compare_base and self.compare_base.path), ("resume", self.resume_path),
                           ("shortlist", self.shortlist and self.shortlist.run.path)):
            if path:
                named[name] = [Path(path)]
        if self.options.noise:
            named["noise"] = [Path(p) for p in self.options.noise]
        if self.results_path.is_file():
            named["results"] = [self.results_path]
        return named

    def close(self) -> None:
        if self._shipped_dir is not None:
            shutil.rmtree(self._shipped_dir, ignore_errors=True)
        try:
            for target in self.targets.values():
                target.close()
        finally:
            for held in self.held_places.values():
                held.release()
            self.held_places.clear()

    # ----------------------------------------------------------------------------------- finished items
    def tally_report(self, report: pytest.TestReport) -> dict[str, Any] | None:
        """In the process that owns pytest-benchmark (xdist controller or the only process): count a finished
        item; returns its record when it has samples for pytest-benchmark."""
        if report.when != "call":
            if self._lost_with_its_worker(report):
                self.tally["lost"] += 1
                self.remote_workers.item_lost(worker_of(report), report.nodeid)
            return None
        # user_properties hold what item.py put there (a str, a record dict), sent by xdist from a worker
        error = next((value for key, value in report.user_properties if key == RESULTS_ERROR_KEY), None)
        record = next((value for key, value in report.user_properties if key == RECORD_KEY), None)
        if isinstance(record, dict) and worker_of(report) is not None:
            # From an xdist worker, here or on another host: workers leave the results file to the controller.
            record = self.from_worker(record, worker_of(report))
            error = self.write_record(record)
        if isinstance(error, str):
            self.results_errors.append(error)
            self.show_results_error(error)  # once, when it first happens (unless said at the start)
        if not isinstance(record, dict):
            return None
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
        if record.get("compared"):  # --rvtune-compare: what the comparison with BASE said (item.py)
            self.compared[str(record["compared"])] += 1
        if record.get("machine"):
            self.identities.setdefault(record["target"], record["machine"])
        self.cache_repairs.update(dict.fromkeys(str(r) for r in record.get("cache_repairs") or ()))
        if record["outcome"] == "passed" and confirmation and not confirmation["confirmed"]:
            self.unconfirmed.append(confirmation)
        self.finished_records.append(record)
        return record if record["outcome"] in ("passed", "regressed") and record.get("samples_ns") else None

    def from_worker(self, record: dict[str, Any], node: Any) -> dict[str, Any]:
        """A record an xdist worker sent: one from another host names it (worker_host) and carries the commit of
        the code it ran: the controller's when xdist copied the project there (--rsyncdir: the copy has no .git,
        and a git work tree around it would be another project's), else the host's own checkout's."""
        from pytest_rvtune.provenance import git_state
        host = node_host(node)
        if host is None:
            return record
        ours = git_state(self.rootdir)
        rsynced = bool(self.config.getoption("rsyncdir", None) or self.config.getini("rsyncdirs"))
        return (record | ours if rsynced else ours | record) | {"worker_host": host}

    def _lost_with_its_worker(self, report: pytest.TestReport) -> bool:
        """xdist's report of a kernel item whose worker died under it (killed, out of memory): no verdict came
        back and no record was written, but the item ran and must be counted."""
        # xdist's crash report says when="???", a value outside pytest's Literal (xdist ignores the same error)
        crashed = report.when == "???"  # type: ignore[comparison-overlap]
        if not (report.failed and crashed and "crashed while running" in str(report.longrepr)):
            return False
        return self.is_kernel_item(report.nodeid)

    def is_kernel_item(self, nodeid: str) -> bool:
        """Whether a node id is a kernel item: a module in the kernel directories, or a Triton_RVV project's
        rvtune.toml (collect.py); a user's own tests in the same session are not."""
        module = nodeid.split("::")[0]
        if module not in self._kernel_modules:
            path = (self.rootdir / module).resolve()
            self._kernel_modules[module] = path.name == "rvtune.toml" or any(
                path.is_relative_to(d) for d in self.kernel_dirs)
        return self._kernel_modules[module]

    def ranking_lines(self, benchmark_tables: bool) -> list[str]:
        """What the session's report starts with (before pytest-benchmark's tables): what --rvtune-shortlist kept,
        per kernel, case and problem the best configs by the ranking metric, and where the results are."""
        from pytest_rvtune.results.records import record_from_dict
        from pytest_rvtune.results.summary import ranking_lines, wrap
        lines: list[str] = []
        if self.shortlist is not None and self.finished_records:
            groups = [(r.kernel, r.case, r.problem_id) for r in map(record_from_dict, self.finished_records)]
            lines += [f"rvtune shortlist (--rvtune-shortlist {self.shortlist.run.path}):",
                      *self.shortlist.describe(groups)]
        ranking = ranking_lines(self.finished_records, rank_by=self.options.rank_by)
        if not ranking:
            return [*lines, *self.search_lines]
        lines += [*ranking, f"  all configs: rvtune report {self.results_path}"]
        emulated = [r for r in self.finished_records if r.get("timing_source") == "emulated" and r.get("samples_ns")]
        if benchmark_tables and any(modelled_ns(r) is not None for r in emulated):
            lines += wrap("  (pytest-benchmark's tables below show the modelled SpacemiT X60 time of emulated items, "
                          "x60_cycles at 1.6 GHz; --benchmark-json keeps every counter)")
        elif benchmark_tables and emulated:
            lines += wrap("  (pytest-benchmark's tables below show QEMU's emulated times, which are not performance; "
                          "--benchmark-json keeps every counter)")
        return [*lines, *self.search_lines]

    def summary_lines(self) -> list[str]:
        """The line the session ends with: the tally (and the regressions a confirmation refuted)."""
        tally = self.tally
        outcomes = (*OUTCOMES, "regressed", "lost")
        if not sum(tally[o] for o in outcomes):
            return []
        shown = [o for o in outcomes if o in SUMMARY_OUTCOMES or tally[o]]
        counts = ", ".join(f"{tally[o]} {o.replace('_', '-')}" for o in shown)
        if tally["lost"]:
            counts += " (xdist worker crashed mid-item: no verdict, no record)"
        resumed = f"; {tally['resumed']} resumed" if tally["resumed"] else ""
        if tally["counts_cached"]:  # an unchanged emulated run: its result came from the count cache
            resumed += f"; {tally['counts_cached']} runs reused (unchanged, QEMU not run)"
        lines: list[str] = []
        lost = (f"; {len(self.results_errors)} records NOT written: {self.results_errors[0]}"
                if self.results_errors else "")
        lines.append(
            f"rvtune: {counts}{resumed}; build cache {tally['cache_hit']} hits / {tally['cache_miss']} misses; "
            f"building {self.seconds['build']:.1f} s, running {self.seconds['run']:.1f} s; "
            f"results: {self.results_path}{lost}")
        if self.compare_base is not None:
            lines.append(self.comparison_line())
        lines += self.remote_workers.summary_lines()
        lines += repair_lines(list(self.cache_repairs))
        if self.cache_pruned:
            lines.append(self.cache_pruned)
        if self.unconfirmed:
            from pytest_rvtune.results.confirm import describe_unconfirmed
            lines.append(describe_unconfirmed(self.unconfirmed))
        return lines

    def comparison_line(self) -> str:
        """With --rvtune-compare BASE, always one line: the items compared and how many got each verdict (also
        when nothing regressed: silence read as "not compared")."""
        from pytest_rvtune.results.compare import ITEM_ORDER
        counts = self.compared
        shown = [s for s in ITEM_ORDER
                 if s not in ("new", "missing") and (counts[s] or s in ("regressed", "unchanged"))]
        compared = sum(counts[s] for s in counts if s != "not in base")
        valid = self.tally["passed"] + self.tally["regressed"]
        rest = []
        if counts["not in base"]:
            rest.append(f"{counts['not in base']} not in it")
        if self.tally_total() - valid:
            rest.append(f"{self.tally_total() - valid} without a valid result (not compared)")
        path = self.compare_base.path if self.compare_base is not None else ""
        return (f"rvtune: compared {compared} item{'' if compared == 1 else 's'} against {path}: "
                + ", ".join(f"{counts[s]} {s}" for s in shown) + (f"; {', '.join(rest)}" if rest else ""))

    def tally_total(self) -> int:
        return sum(self.tally[o] for o in (*OUTCOMES, "regressed"))

    def prune_cache(self) -> None:
        """At the session's end (controller): evict least recently used cache entries above the cap."""
        from pytest_rvtune.cache_limit import format_size, prune
        cap, where = self.cache_cap
        if cap is None or not sum(self.tally[o] for o in OUTCOMES):  # no cap, or no kernel item ran
            return
        pruned = prune(cap, keep_since=self.started - 2)  # 2 s: file times are coarser than time.time()
        if pruned.removed:
            self.cache_pruned = (
                f"rvtune: cache over its {format_size(cap)} cap ({where}): removed {pruned.removed} least recently "
                f"used entries ({format_size(pruned.freed)}), {format_size(pruned.after)} left; "
                "`rvtune cache info` lists it")

    # ----------------------------------------------------------------------------------- option rules
    def _cache_cap(self) -> tuple[int | None, str]:
        from pytest_rvtune.cache_limit import CAP_INI, CapError, resolve_cap
        try:
            return resolve_cap(self.config.getoption("rvtune_cache_max", None),
                               str(self.config.getini(CAP_INI) or "") or None)
        except CapError as exc:
            raise pytest.UsageError(f"the cache's size cap: {exc}") from None

    def _load_run_option(self, path: str | None, option: str) -> Run | None:
        if not path:
            return None
        from pytest_rvtune.results.records import RunFileError
        from pytest_rvtune.results.run_names import resolve
        try:  # latest, latest~N: never this session's own file
            named = resolve(path, exclude=self.results_path, directory=paths.results_dir(self.rootdir))
        except RunFileError as exc:
            raise pytest.UsageError(f"{option}: {exc}") from None
        return self._read_run(named, option)

    def _read_run(self, path: Path, option: str, allow_empty: bool = False, advice: str = "") -> Run:
        """runs.load_run for an option: an unreadable file is a UsageError, a skipped torn line a pytest
        warning."""
        from pytest_rvtune.results.records import RunFileError
        from pytest_rvtune.results.runs import RunFileWarning, load_run
        try:
            with warnings.catch_warnings(record=True) as skipped:
                warnings.simplefilter("always", RunFileWarning)
                run = load_run(path, allow_empty=allow_empty)
        except RunFileError as exc:
            raise pytest.UsageError(f"{option}: {exc}{advice}") from None
        for warning in skipped:  # torn lines: shown in the warnings summary, the rest of the file is used
            self.config.issue_config_time_warning(pytest.PytestWarning(f"{option}: {warning.message}"),
                                                  stacklevel=2)
        return run

    def _compare_thresholds(self) -> Thresholds | None:
        """--rvtune-threshold, --rvtune-noise and --rvtune-alpha as compare.Thresholds; a bad value is a usage
        error up front."""
        thresholds, noise, alpha = self.options.thresholds, self.options.noise, self.options.alpha
        base = self.compare_base
        if base is None:
            if thresholds or noise or alpha is not None:
                raise pytest.UsageError("--rvtune-threshold, --rvtune-noise and --rvtune-alpha tune "
                                        "--rvtune-compare BASE; give the base run too")
            return None
        from pytest_rvtune.results.compare import DEFAULT_ALPHA, Thresholds
        from pytest_rvtune.results.noise import load_noise_for
        try:
            parsed = Thresholds.parse(list(thresholds))
        except ValueError as exc:
            raise pytest.UsageError(f"--rvtune-threshold: {exc}") from None
        try:
            parsed = dataclasses.replace(parsed, alpha=DEFAULT_ALPHA if alpha is None else alpha)
        except ValueError as exc:
            raise pytest.UsageError(f"--rvtune-alpha: {exc}") from None
        if noise:
            try:
                parsed = dataclasses.replace(parsed, noise=load_noise_for(list(noise), base.records,
                                                                          parsed.statistic))
            except ValueError as exc:  # a NoiseFileError names the file
                raise pytest.UsageError(f"--rvtune-noise: {exc}") from None
        return parsed

    def _confirm_trials(self) -> int:
        """--rvtune-confirm: trial pairs; a usage error without --rvtune-compare, out of range, or too few to ever
        confirm anything at the compare's alpha."""
        trials = self.options.confirm
        if trials is None and self.compare_base is None:
            return 0  # nothing to confirm (and compare.py's imports are not every session's start-up cost)
        from pytest_rvtune.results.compare import DEFAULT_CONFIRM_TRIALS
        from pytest_rvtune.results.confirm import check_trials
        if trials is None:
            return DEFAULT_CONFIRM_TRIALS
        if self.compare_thresholds is None:  # no --rvtune-compare (it always gets thresholds)
            raise pytest.UsageError("--rvtune-confirm re-runs the regressions --rvtune-compare BASE finds; give a "
                                    "base")
        if not 0 <= trials <= 100:
            raise pytest.UsageError(f"--rvtune-confirm {trials}: interleaved trials per side, 0 (off) to 100")
        try:
            if trials:
                check_trials(trials, self.compare_thresholds.alpha)
        except ValueError as exc:
            raise pytest.UsageError(f"--rvtune-confirm: {exc}") from None
        return trials

    def _load_shortlist(self) -> Shortlist | None:
        """--rvtune-shortlist RUN as a results.shortlist.Shortlist (None without it); a bad size or file is a usage
        error."""
        size = self.options.shortlist_size
        run = self._load_run_option(self.options.shortlist, "--rvtune-shortlist")
        if run is None:
            if size is not None:
                raise pytest.UsageError("--rvtune-shortlist-size N sizes the shortlist of --rvtune-shortlist RUN; "
                                        "give the earlier run too")
            return None
        from pytest_rvtune.results.shortlist import DEFAULT_SIZE, Shortlist
        try:
            shortlist = Shortlist.of(run, DEFAULT_SIZE if size is None else size)
        except ValueError as exc:
            raise pytest.UsageError(f"--rvtune-shortlist-size: {exc}") from None
        if not shortlist.rankings:
            raise pytest.UsageError(f"--rvtune-shortlist {run.path}: no config in it passed with a figure to rank "
                                    "by; give a run whose items passed")
        return shortlist

    def _load_resume_index(self) -> dict[tuple[str, str], RunRecord]:
        run = self._load_run_option(self.options.resume, "--rvtune-resume")
        if run is None:
            return {}
        self.resume_path = run.path
        from pytest_rvtune.results.runs import RESUMABLE_OUTCOMES, completed_items
        done = completed_items(run)
        if not done:
            self.config.issue_config_time_warning(pytest.PytestWarning(
                f"--rvtune-resume {run.path}: none of its {len(run.records)} items can be resumed (only "
                f"{' or '.join(sorted(RESUMABLE_OUTCOMES))} items with a verdict key, which an older "
                "pytest-rvtune did not write): every item runs"), stacklevel=2)
        return done


def results_file_path(value: str) -> Path:
    """--rvtune-results PATH made absolute; a path that cannot be a file (a symlink loop, a directory, a path under a
    file) is a usage error naming the option, before anything runs (a loop was an INTERNALERROR traceback)."""
    try:
        path = Path(value).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: Python 3.11's "Symlink loop"
        raise pytest.UsageError(f"--rvtune-results {value}: cannot be resolved ({exc}); give a file path") from None
    if path.is_dir():
        raise pytest.UsageError(f"--rvtune-results {value}: {path} is a directory; give a file path (e.g. "
                                f"{path / 'run.jsonl'})")
    under = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if under is not None:
        raise pytest.UsageError(f"--rvtune-results {value}: {under} is a file, so it cannot hold {path.name}; give "
                                "another file path")
    return path


#: Damaged cache entries named one by one in the summary; more are counted.
REPAIRS_SHOWN = 5


def repair_lines(repaired: list[str]) -> list[str]:
    """The summary's lines on damaged cache entries that were removed and made again (never the kernel's fault)."""
    if not repaired:
        return []
    lines = [f"rvtune: {len(repaired)} damaged cache entr{'y' if len(repaired) == 1 else 'ies'} found and replaced "
             "(a disk fault or an edit under the cache; the items' verdicts are from fresh builds and runs; "
             "`rvtune cache verify` checks the whole cache):"]
    lines += [f"  {text}" for text in repaired[:REPAIRS_SHOWN]]
    if len(repaired) > REPAIRS_SHOWN:
        lines.append(f"  ... and {len(repaired) - REPAIRS_SHOWN} more (the records' cache_repairs field lists them)")
    return lines


SESSION_KEY = pytest.StashKey[RvtuneSession]()


def session_of(config: pytest.Config) -> RvtuneSession:
    """The RvtuneSession pytest_configure put in ``config.stash``."""
    return config.stash[SESSION_KEY]


def worker_of(report: pytest.TestReport) -> Any | None:
    """The xdist worker (its WorkerController) a report came from, in the controller; None without xdist."""
    return getattr(report, "node", None)


def is_controller(config: pytest.Config) -> bool:
    """The xdist controller, or the only process (no xdist)."""
    return not hasattr(config, "workerinput")
