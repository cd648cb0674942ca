"""pytest glue for pytest-rvtune: options, collection of kernel modules, fixtures, reporting.

Thin by design: building lives in build.py, running in targets/ and item_runner.py, records in results.py,
the pytest-benchmark hand-over in benchmark_bridge.py. This module only wires them to pytest's hooks.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from pytest_rvtune import paths
from pytest_rvtune.item_runner import ItemOutcome, ItemWork, RunOptions, build_failed, run_item
from pytest_rvtune.results import ResultsWriter, new_run_id
from pytest_rvtune.verdict import OUTCOMES

RECORD_KEY = "rvtune_record"
ITEM_KEY = pytest.StashKey["KernelItemInfo"]()
DEFAULT_TARGET = "qemu"


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
                    help="keep configs matching e.g. 'BLOCK_SIZE_M=16,32;BLOCK_SIZE_N=64' (repeatable: all apply)")
    group.addoption("--rvtune-timeout", type=float, default=300.0, metavar="SECONDS",
                    help="kill one ELF run after this long (default 300)")
    group.addoption("--rvtune-runs", type=int, default=None, metavar="N",
                    help="timed runs per item (default: 10 on real hardware, 2 under emulation)")
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
    group.addoption("--rvtune-resume", default=None, metavar="RUN",
                    help="reuse results of RUN for items whose ELF, golden data and target are unchanged")
    parser.addini("rvtune_kernels", type="paths", default=[],
                  help="directories holding kernel modules (default: kernels/)")


# --------------------------------------------------------------------------------------------- session state
class RvtuneSession:
    """Per-process state: targets (opened once), results file, counters for the summary line."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rootdir = Path(config.rootpath)
        self.target_names: list[str] = config.getoption("rvtune_target") or [DEFAULT_TARGET]
        self.cases: list[str] = config.getoption("rvtune_case")
        self.config_filters: list[str] = config.getoption("rvtune_config")
        kernel_dirs = config.getini("rvtune_kernels") or [self.rootdir / "kernels"]
        self.kernel_dirs = [Path(p).resolve() for p in kernel_dirs]
        self.targets: dict[str, Any] = {}
        self.target_errors: dict[str, str] = {}
        self.target_error_reported: set[str] = set()
        self.tally: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self._target_configs: dict[str, Any] | None = None
        workerinput = getattr(config, "workerinput", None)
        run_id = workerinput["rvtune_run_id"] if workerinput else new_run_id()
        self.run_id = run_id
        results = config.getoption("rvtune_results")
        self.results_path = (Path(results) if results
                             else self.rootdir / ".rvtune" / "results" / f"{run_id}.jsonl")
        self._writer: ResultsWriter | None = None
        self.worker_id = workerinput["workerid"] if workerinput else "main"
        self.compare_base = _load_compare_base(config.getoption("rvtune_compare"))
        self.resume_index = _load_resume_index(config.getoption("rvtune_resume"))

    @property
    def writer(self) -> ResultsWriter:
        if self._writer is None:  # created on first use, so plain test runs leave no results directory
            self._writer = ResultsWriter(self.results_path)
        return self._writer

    # Targets are opened lazily (collection on the controller needs only their names) and once per process.
    def target_configs(self) -> dict[str, Any]:
        if self._target_configs is None:
            config_file = self.config.getoption("rvtune_config_file")
            self._target_configs = _load_target_configs(self.rootdir, Path(config_file) if config_file else None)
        return self._target_configs

    def target(self, name: str) -> Any:
        if name in self.target_errors:
            raise _TargetUnavailable(name, self.target_errors[name])
        if name not in self.targets:
            configs = self.target_configs()
            if name not in configs:
                known = ", ".join(sorted(configs))
                self.target_errors[name] = (f"unknown target {name!r}: known targets are {known}; "
                                            "configure boards in rvtune.toml (see README: Configuring a board)")
                raise _TargetUnavailable(name, self.target_errors[name])
            try:
                self.targets[name] = _make_target(configs[name], self.worker_id)
            except Exception as exc:  # one clear error per target for the whole session
                self.target_errors[name] = f"target {name!r} is unavailable: {exc}"
                raise _TargetUnavailable(name, self.target_errors[name]) from exc
        return self.targets[name]

    def default_case(self, target_name: str) -> str:
        cfg = self.target_configs().get(target_name)
        timing = getattr(cfg, "timing_source", None)
        default = getattr(cfg, "default_case", None)
        if default:
            return default
        return "emu" if timing == "emulated" or target_name == "qemu" else "bench"

    def run_options(self, target: Any) -> RunOptions:
        emulated = target.timing_source == "emulated"
        runs = self.config.getoption("rvtune_runs")
        warmup = self.config.getoption("rvtune_warmup")
        return RunOptions(
            warmup=warmup if warmup is not None else (1 if emulated else 2),
            runs=runs if runs is not None else (2 if emulated else 10),
            threads=self.config.getoption("rvtune_threads"),
            timeout=self.config.getoption("rvtune_timeout"),
        )

    def close(self) -> None:
        for target in self.targets.values():
            target.close()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """In the process that owns pytest-benchmark (xdist controller or the only process): tally, merge."""
        if not _is_controller(self.config) or report.when != "call":
            return
        record = next((value for key, value in report.user_properties if key == RECORD_KEY), None)
        if record is None:
            return
        self.tally[record["outcome"]] += 1
        self.seconds["build"] += record.get("build_seconds", 0.0)
        self.seconds["run"] += record.get("run_seconds", 0.0)
        if "build_cache_hit" in record:
            self.tally["cache_hit" if record["build_cache_hit"] else "cache_miss"] += 1
        if record["outcome"] in ("passed", "regressed") and record.get("samples_ns"):
            _add_to_benchmark(self.config, record)


class _TargetUnavailable(Exception):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def _load_target_configs(rootdir: Path, config_file: Path | None) -> dict[str, Any]:
    try:
        from pytest_rvtune.targets.config import load_targets
    except ImportError:  # the SSH target configuration is optional: fall back to the built-in targets
        from pytest_rvtune.targets.local import builtin_targets
        return dict(builtin_targets())
    return load_targets(rootdir, config_file)


def _make_target(cfg: Any, worker_id: str) -> Any:
    if callable(cfg) and not hasattr(cfg, "host"):
        return cfg()
    from pytest_rvtune.targets.config import make_target
    return make_target(cfg, worker_id=worker_id)


def _load_compare_base(path: str | None) -> Any:
    if not path:
        return None
    from pytest_rvtune.runs import load_run
    return load_run(Path(path))


def _load_resume_index(path: str | None) -> dict[Any, Any]:
    if not path:
        return {}
    from pytest_rvtune.runs import completed_items, load_run
    return completed_items(load_run(Path(path)))


def _session(config: pytest.Config) -> RvtuneSession:
    return config.stash[SESSION_KEY]


SESSION_KEY = pytest.StashKey[RvtuneSession]()

# pytest's -k grammar has no '=': a user's `-k "BLOCK_SIZE_M=16"` is rewritten to the keyword
# `BLOCK_SIZE_M:16`, which every item carries for each of its config values.
_KEY_EQ_VALUE = re.compile(r"\b([A-Za-z_]\w*)=([\w.]+)")


def _config_keywords(config: dict[str, Any]) -> set[str]:
    return {f"{key}:{value}" for key, value in config.items()}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rvtune: an item of the pytest-rvtune kernel suite")
    keyword = config.getoption("keyword", default="")
    if keyword and "=" in keyword:
        config.option.keyword = _KEY_EQ_VALUE.sub(r"\1:\2", keyword)
    session = config.stash[SESSION_KEY] = RvtuneSession(config)
    config.pluginmanager.register(session, "rvtune-session")


def pytest_configure_node(node: Any) -> None:
    """xdist controller: every worker appends to the controller's results file."""
    node.workerinput["rvtune_run_id"] = _session(node.config).run_id


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()


# --------------------------------------------------------------------------------------------- collection
class KernelItemInfo:
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
        from pytest_rvtune.spec import KernelModuleError, filter_configs, load_kernel_module
        session = _session(self.config)
        try:
            spec = load_kernel_module(self.path)
            configs = list(spec.configs)
            for config_filter in session.config_filters:
                configs = filter_configs(configs, config_filter)
        except KernelModuleError as exc:
            raise self.CollectError(str(exc)) from exc
        except Exception as exc:
            raise self.CollectError(f"kernel module {self.path}: {type(exc).__name__}: {exc}") from exc
        for marker in (spec.name, *spec.cases):  # per kernel and case, registered so --strict-markers works
            self.config.addinivalue_line("markers", f"{marker}: pytest-rvtune kernel or case {marker}")
        for target in session.target_names:
            cases = session.cases or [session.default_case(target)]
            unknown = [c for c in cases if c not in spec.cases]
            if unknown:
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
    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".py" or file_path.name.startswith("_") or file_path.name == "conftest.py":
        return None
    session = _session(parent.config)
    if not any(file_path.resolve().is_relative_to(d) for d in session.kernel_dirs):
        return None
    return KernelModule.from_parent(parent, path=file_path)


# --------------------------------------------------------------------------------------------- fixtures
@pytest.fixture
def rvtune_item(request: pytest.FixtureRequest) -> KernelItemInfo:
    """The kernel, case, config and target of the current kernel-suite item."""
    try:
        return request.node.stash[ITEM_KEY]
    except KeyError:
        raise pytest.UsageError("rvtune_item is only available in kernel-suite items") from None


@pytest.fixture(scope="session")
def rvtune_targets(request: pytest.FixtureRequest) -> RvtuneSession:
    """The session's targets, opened once per process: ``rvtune_targets.target("qemu")``."""
    return _session(request.config)


@pytest.fixture
def rvtune_target(request: pytest.FixtureRequest, rvtune_targets: RvtuneSession) -> Any:
    """The Target of this item (kernel items), or the first --rvtune-target (other tests)."""
    info = request.node.stash.get(ITEM_KEY, None)
    name = info.target if info else rvtune_targets.target_names[0]
    try:
        return rvtune_targets.target(name)
    except _TargetUnavailable as exc:
        if name in rvtune_targets.target_error_reported:
            pytest.skip(f"target {name!r} unavailable (reported once, above)")
        rvtune_targets.target_error_reported.add(name)
        pytest.fail(str(exc), pytrace=False)


class BuildOutcome:
    """The ELF of an item, or the build error (a build error fails the item, it does not error it)."""

    def __init__(self, artifact: Any = None, error: str | None = None, seconds: float = 0.0) -> None:
        self.artifact = artifact
        self.error = error
        self.seconds = seconds


@pytest.fixture
def rvtune_build(rvtune_item: KernelItemInfo, rvtune_target: Any) -> BuildOutcome:
    """Build (or fetch from the content-addressed cache) the ELF of this item for its target's ISA."""
    from pytest_rvtune.build import build_item
    started = time.perf_counter()
    try:
        artifact = build_item(rvtune_item.spec, rvtune_item.case, rvtune_item.config, rvtune_target.isa)
    except Exception as exc:  # BuildError and lowering errors alike: the message names kernel and config
        return BuildOutcome(error=str(exc), seconds=time.perf_counter() - started)
    return BuildOutcome(artifact, seconds=time.perf_counter() - started)


@pytest.fixture
def rvtune_golden(rvtune_item: KernelItemInfo) -> Any:
    """The golden data of this item (generated on demand, checked against the manifest)."""
    from pytest_rvtune.golden import golden_set
    return golden_set(rvtune_item.spec, rvtune_item.case, rvtune_item.config)


# --------------------------------------------------------------------------------------------- the item
def _kernel_item_test(request: pytest.FixtureRequest, rvtune_item: KernelItemInfo, rvtune_target: Any,
                      rvtune_build: BuildOutcome, rvtune_golden: Any) -> None:
    session = _session(request.config)
    info = rvtune_item
    work = ItemWork(request.node.nodeid, info.spec.name, info.case, info.config_values, info.config_id,
                    info.target)
    if rvtune_build.error is not None:
        outcome = build_failed(work, rvtune_target, rvtune_build.error, rvtune_build.seconds)
    else:
        outcome = _run_or_resume(session, work, rvtune_target, rvtune_build, rvtune_golden)
    _finish(request, session, outcome)


def _run_or_resume(session: RvtuneSession, work: ItemWork, target: Any, build: BuildOutcome,
                   golden: Any) -> ItemOutcome:
    artifact = build.artifact
    build_info = {"build_seconds": build.seconds, "build_cache_hit": bool(getattr(artifact, "cache_hit", False))}
    resumed = _resumed_record(session, artifact.elf_sha256, golden.sha256, target)
    if resumed is not None:
        from pytest_rvtune.verdict import Verdict
        record = dict(resumed) | {"nodeid": work.nodeid, "resumed_from": str(session.config.getoption(
            "rvtune_resume"))} | build_info
        return ItemOutcome(Verdict(record["outcome"], record.get("message") or f"{work.what}: resumed"),
                           record, timings={"build": build.seconds})
    options = session.run_options(target)
    target.prepare([p for p in artifact.argv if isinstance(p, Path)] + [artifact.elf])
    with _exclusive(target):
        return run_item(work, target, elf=artifact.elf, argv=list(artifact.argv),
                        elf_sha256=artifact.elf_sha256, golden_sha256=golden.sha256, options=options,
                        kernel_symbol=f"{work.kernel}_kernel", build_info=build_info)


def _resumed_record(session: RvtuneSession, elf_sha: str, golden_sha: str, target: Any) -> Any:
    if not session.resume_index:
        return None
    from pytest_rvtune.runs import identity_key
    return session.resume_index.get((elf_sha, golden_sha, identity_key(target.identity())))


class _exclusive:
    """Real timings on a local target never overlap across xdist workers; emulated ones may."""

    def __init__(self, target: Any) -> None:
        self.lock = None
        if target.timing_source == "real" and getattr(target, "local", True):
            lock_dir = paths.cache_dir() / "locks"
            lock_dir.mkdir(parents=True, exist_ok=True)
            self.lock = FileLock(str(lock_dir / f"{target.name}.lock"))

    def __enter__(self) -> None:
        if self.lock is not None:
            self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        if self.lock is not None:
            self.lock.release()


def _finish(request: pytest.FixtureRequest, session: RvtuneSession, outcome: ItemOutcome) -> None:
    record = outcome.record
    verdict = outcome.verdict
    if verdict.passed and session.compare_base is not None:
        verdict = _compare_with_base(session, record) or verdict
        record["outcome"], record["message"] = verdict.outcome, ("" if verdict.passed else verdict.message)
    session.writer.append(record)  # at once: a killed run loses nothing that finished
    request.node.user_properties.append((RECORD_KEY, record))
    if not verdict.passed:
        pytest.fail(verdict.message, pytrace=False)


def _compare_with_base(session: RvtuneSession, record: dict[str, Any]) -> Any:
    from pytest_rvtune.compare import compare_record
    from pytest_rvtune.runs import record_from_dict
    from pytest_rvtune.verdict import Verdict
    base = session.compare_base.find(record)
    if base is None:
        return None
    result = compare_record(base, record_from_dict(record), None)
    if result.regressed:
        return Verdict("regressed", f"{record['nodeid']}: regressed against the base run\n{result.message}")
    return None


# --------------------------------------------------------------------------------------------- reporting
def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def _add_to_benchmark(config: pytest.Config, record: dict[str, Any]) -> None:
    bench_session = config.pluginmanager.get_plugin("pytest-benchmark")
    if bench_session is None or config.getoption("benchmark_disable", False) or \
            config.getoption("benchmark_skip", False):
        return
    from pytest_rvtune.benchmark_bridge import add_benchmark
    nodeid = record["nodeid"]
    name = nodeid.rsplit("::", 1)[-1]
    param = name[name.index("[") + 1:-1] if "[" in name else ""
    extra = {key: record.get(key) for key in (
        "kernel", "case", "config", "config_id", "target", "machine", "counters", "timing_source",
        "elf_sha256", "golden_sha256", "samples_ns", "outcome")}
    add_benchmark(bench_session, nodeid=nodeid, name=name, param=param,
                  params={"case": record["case"], **record["config"], "target": record["target"]},
                  samples_ns=record["samples_ns"], extra_info=extra, group=f"{record['kernel']}-{record['case']}")


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_generate_machine_info(config: pytest.Config) -> dict[str, Any] | None:
    """Saved runs carry the identity of the targets measured, never only the host's."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return None
    identities = {}
    for name in session.target_names:
        try:
            identities[name] = session.target(name).identity()
        except _TargetUnavailable as exc:
            identities[name] = {"error": str(exc)}
    import platform
    return {"node": platform.node(), "machine": platform.machine(), "system": platform.system(),
            "python_version": platform.python_version(), "rvtune_targets": identities}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not _is_controller(config) or not sum(session.tally[o] for o in OUTCOMES):
        return
    tally = session.tally
    counts = ", ".join(f"{tally[o]} {o.replace('_', '-')}" for o in (*OUTCOMES, "regressed") if tally[o])
    terminalreporter.write_line(
        f"rvtune: {counts}; build cache {tally['cache_hit']} hits / {tally['cache_miss']} misses; "
        f"building {session.seconds['build']:.1f} s, running {session.seconds['run']:.1f} s; "
        f"results: {session.results_path}")
