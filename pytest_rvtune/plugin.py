"""pytest glue for pytest-rvtune: the hooks, and nothing else.

Options and session state live in session.py, -k rewriting in selection.py, collection in collect.py, the item
pipeline in item.py, fixtures in fixtures.py and the pytest-benchmark hand-over in benchmark_bridge.py.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rvtune import collect, paths
from pytest_rvtune.benchmark_bridge import (
    add_record,
    benchmark_tables,
    compared_machine_error,
    short_table_names,
    table_columns,
)
from pytest_rvtune.collect import ITEM_KEY
from pytest_rvtune.fixtures import rvtune_build, rvtune_golden, rvtune_item, rvtune_target, rvtune_targets
from pytest_rvtune.progress import DEFAULT_INTERVAL as DEFAULT_PROGRESS_INTERVAL
from pytest_rvtune.progress import ProgressReporter
from pytest_rvtune.remote_workers import SHIPPED_KEY, node_host, pack_files
from pytest_rvtune.run_options import DEFAULT_MAX_TIME
from pytest_rvtune.selection import case_notes, filter_errors, keyword_hint, pasted_item_hint, rewrite_keyword
from pytest_rvtune.session import (
    PLACES_KEY,
    RECORD_KEY,
    RENAMED_INI,
    SESSION_KEY,
    RvtuneSession,
    TargetUnavailable,
    is_controller,
    session_of,
)
from pytest_rvtune.stop_signals import StopOnSignal, make_interruptible

if TYPE_CHECKING:
    from pytest_benchmark.session import BenchmarkSession
    from xdist.workermanage import WorkerController

#: The fixtures this plugin provides (imported here so pytest registers them with the plugin module).
FIXTURES = (rvtune_item, rvtune_targets, rvtune_target, rvtune_build, rvtune_golden)
#: The project root that was in force before this session set its own (paths.set_project_root).
_OUTER_ROOT_KEY = pytest.StashKey["Path | None"]()
#: The SIGTERM/SIGHUP handlers of this session (stop_signals.py), restored at unconfigure.
_STOP_KEY = pytest.StashKey[StopOnSignal]()
#: pytest's session: --benchmark-compare-fail's regression sets its exit status (pytest_terminal_summary).
_PYTEST_SESSION_KEY = pytest.StashKey[pytest.Session]()
#: The -k expression as typed (config.option.keyword holds it rewritten: selection.rewrite_keyword).
_KEYWORD_KEY = pytest.StashKey[str]()
#: Kernel items a -k deselected, as (node id, name, target): what a pasted id that selected nothing names.
_DESELECTED_KEY = pytest.StashKey["list[tuple[str, str, str]]"]()


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
                    help="timed runs per item (default: 10 on real hardware, 1 under emulation)")
    group.addoption("--rvtune-max-time", type=float, default=None, metavar="SECONDS",
                    help="on real hardware, sample each item for this long (at least --rvtune-runs samples, "
                         f"at most 200): a shared machine's slow and fast spells both show (default "
                         f"{DEFAULT_MAX_TIME}; 0 under emulation, whose time is not gated)")
    group.addoption("--rvtune-warmup", type=int, default=None, metavar="N",
                    help="warm-up runs per item (default: 2 on real hardware, 0 under emulation)")
    group.addoption("--rvtune-threads", type=int, default=1, metavar="N",
                    help="launcher threads (0 = all harts, default 1: serial)")
    group.addoption("--rvtune-results", default=None, metavar="PATH",
                    help="results file (JSON lines) to append to; default .rvtune/results/<run id>.jsonl")
    group.addoption("--rvtune-rank-by", default=None, metavar="METRIC",
                    help="rank the session-end summary by this metric where recorded (e.g. launch_insns, "
                         "x60_cycles, kernel_insns, l1d_misses); default: x60_cycles under emulation (the X60 "
                         "model), time on real hardware")
    group.addoption("--rvtune-timing-model", action="store_true", default=False,
                    help="under QEMU also record est_cycles (llvm-mca per basic block x its count) and the K1 "
                         "cache model's l1d/l2 misses, which give x60_cycles its DRAM-bandwidth part; slower "
                         "(about 1.5x QEMU time, llvm-mca per new block)")
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
    group.addoption("--rvtune-shortlist", default=None, metavar="RUN",
                    help="run only the best configs of an earlier run RUN (results file or benchmark JSON), per "
                         "kernel, case and problem by its ranking metric (x60_cycles under emulation): rank on "
                         "QEMU, then time the shortlist on a board")
    group.addoption("--rvtune-shortlist-size", type=int, default=None, metavar="N",
                    help="with --rvtune-shortlist: distinct results kept per kernel, case and problem (default 3)")
    group.addoption("--rvtune-search", default=None, metavar="STRATEGY",
                    help="search each kernel's configs instead of running them all: random, halving (successive "
                         "halving across the cases, cheapest first) or tpe (Optuna's TPE sampler); the strategy "
                         "chooses each next item from the results so far (docs/scaling.md). One process: no -n")
    group.addoption("--rvtune-budget", type=int, default=None, metavar="N",
                    help="with --rvtune-search: the (config, case) items to run per kernel, target and problem")
    group.addoption("--rvtune-search-seed", type=int, default=0, metavar="SEED",
                    help="with --rvtune-search: the seed of its random draws (default 0: the same search each time)")
    group.addoption("--rvtune-search-reference", default=None, metavar="RUN",
                    help="with --rvtune-search: an earlier run of the same space (an exhaustive one) whose best the "
                         "search's best is measured against")
    group.addoption("--rvtune-progress", type=float, default=DEFAULT_PROGRESS_INTERVAL, metavar="SECONDS",
                    help="builds and runs done, elapsed time and ETA: one status line updated in place on a "
                         "terminal, else a line every SECONDS (default %(default)g; 0: none)")
    group.addoption("--rvtune-cache-max", default=None, metavar="SIZE",
                    help="cap the cache at SIZE (4GB, 500MB, 2GiB; off: no cap): at the session's end the least "
                         "recently used entries above it are removed, never one this session used (default: "
                         "$RVTUNE_CACHE_MAX, else the rvtune_cache_max ini value, else 4GB)")
    group.addoption("--rvtune", action="store_true", default=False,
                    help="collect the kernel modules of kernels/ in a project whose configuration names no "
                         "rvtune_kernel_dirs")
    parser.addini("rvtune_kernel_dirs", type="paths", default=[],
                  help="directories holding kernel modules: naming them is what makes pytest-rvtune collect "
                       "this project's kernels (without it, only with --rvtune, from kernels/)")
    parser.addini("rvtune_cache_max", default="",
                  help="the cache's size cap (4GB, 500MB, off), when neither --rvtune-cache-max nor "
                       "RVTUNE_CACHE_MAX gives one (default 4GB)")
    parser.addini(RENAMED_INI, type="paths", default=[], help="renamed: use rvtune_kernel_dirs")
    parser.addini("rvtune_golden", type="paths", default=[],
                  help="golden data directory (default: golden/ beside the first kernels directory); "
                       "the RVTUNE_GOLDEN_DIR environment variable wins over both")


# --------------------------------------------------------------------------------------------- configure
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rvtune: an item of the pytest-rvtune kernel suite")
    keyword = config.getoption("keyword", default="")
    if keyword:
        config.option.keyword = rewrite_keyword(keyword)
        config.stash[_KEYWORD_KEY] = keyword
    # The project's state (.rvtune/: results, caches) lives under pytest's rootdir, whatever the working directory.
    config.stash[_OUTER_ROOT_KEY] = paths.set_project_root(Path(config.rootpath))
    stop = config.stash[_STOP_KEY] = StopOnSignal()  # SIGTERM/SIGHUP: as Ctrl-C, passed on to the workers
    stop.install()
    if is_controller(config):
        limit_worker_restarts(config)
    else:
        make_interruptible()  # an xdist worker: execnet's SIGINT must reach it even from a background session
    session = config.stash[SESSION_KEY] = RvtuneSession(config)
    table_columns(config, session.target_names)
    config.pluginmanager.register(ReportHooks(config), "rvtune-session")
    if is_controller(config):
        config.pluginmanager.register(ProgressReporter(config, session.is_kernel_item, RECORD_KEY,
                                                       session.options.progress), "rvtune-progress")


def limit_worker_restarts(config: pytest.Config) -> None:
    """With --tx (no -n) xdist restarts a crashed worker without limit, so a worker that cannot start on a host (a
    bad option there, a missing package) was restarted forever; -n's own limit applies instead: 4 per worker.
    Runs before xdist's pytest_configure, which reads it."""
    tx = config.getoption("tx", None) or []
    if not tx or config.getoption("numprocesses", None) or config.getoption("maxworkerrestart", None) is not None:
        return
    workers = sum(int(spec.split("*", 1)[0]) if spec.split("*", 1)[0].isdigit() else 1 for spec in tx)
    config.option.maxworkerrestart = str(4 * workers)


def pytest_configure_node(node: WorkerController) -> None:
    """xdist controller: every worker's records carry the controller's run id (the controller writes them), and
    runs on the boards the controller took from a farm for the session (a labgrid place: reserved once, here,
    before any worker runs)."""
    session = session_of(node.config)
    node.workerinput["rvtune_run_id"] = session.run_id
    node.workerinput[PLACES_KEY] = session.take_places(_terminal_line(node.config))  # once, before any worker runs
    session.remote_workers.configured(node)
    if node_host(node) is not None:  # another host cannot read the files our options name: they go with it
        node.workerinput[SHIPPED_KEY] = pack_files(session.files_for_workers())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: Sequence[Any]) -> None:
    """xdist controller, before any worker starts: a --tx ssh= host that does not answer, or whose python lacks
    pytest-rvtune, is one clear error naming it (xdist stopped at the first such host with an execnet HostNotFound
    traceback)."""
    from pytest_rvtune.remote_workers import unfit_at_start
    problems = unfit_at_start(specs)
    if problems:
        pytest.exit("rvtune: " + "; ".join(problems) + " (check a host with `ssh HOST true`, or leave its --tx out)",
                    returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: WorkerController, error: object | None) -> None:
    """xdist controller: a remote worker whose host no longer answers loses only its in-flight item; the
    replacement worker xdist starts goes to a host that answers (remote_workers.py)."""
    lost = session_of(node.config).remote_workers.went_down(node, error)
    if lost is not None:
        _terminal_line(node.config)(f"host {lost.host} went away ({lost.cause}); its worker is replaced on "
                                    f"{lost.moved_to}")


def pytest_unconfigure(config: pytest.Config) -> None:
    stop = config.stash.get(_STOP_KEY, None)
    if stop is not None:
        stop.restore()
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()
    if _OUTER_ROOT_KEY in config.stash:  # a session run inside another (pytester) gives the outer its root back
        paths.set_project_root(config.stash[_OUTER_ROOT_KEY])


def _terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """Say a line of ours on the terminal now (outside any item: e.g. that a farm's board is taken by others
    and the session waits for it)."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")

    def say(text: str) -> None:
        if terminal is not None:
            terminal.ensure_newline()
            terminal.write_line(f"rvtune: {text}")
    return say


@pytest.hookimpl(trylast=True)  # after the terminal's header: the first thing under it
def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_PYTEST_SESSION_KEY] = session  # its exit status, set from the terminal summary
    rvtune = session.config.stash.get(SESSION_KEY, None)
    if rvtune is not None:
        short_table_names(session.config)
        rvtune.check_results_writable()
        if rvtune.is_controller and rvtune.options.targets_given and not session.config.option.collectonly:
            rvtune.take_places(_terminal_line(session.config))  # (xdist's workers may have taken them already)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Under pytest-benchmark's header, whose defaults (timer, min_rounds, max_time, calibration) are those of its
    own fixture: kernel items are timed on the target by the harness, with our options."""
    if config.pluginmanager.get_plugin("pytest-benchmark") is None or SESSION_KEY not in config.stash \
            or not session_of(config).kernel_dirs:  # a project that collects no kernels
        return []
    # Not "rvtune: ...": that prefix marks the session's summary line, which users and tests pick out by it.
    return ["rvtune timing: kernel items are timed by their harness on the target (--rvtune-runs, --rvtune-warmup, "
            "--rvtune-max-time); pytest-benchmark's defaults apply to tests using its benchmark fixture"]


# --------------------------------------------------------------------------------------------- collection
@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path,
                        parent: pytest.Collector) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
    others: list[pytest.Collector] = yield
    return collect.collect_file(file_path, parent, others)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("benchmark_skip", False) and not config.getoption("benchmark_only", False):
        # Kernel items are benchmarks (without pytest-benchmark's fixture, which is how it finds its own):
        # --benchmark-skip skips them as it skips every test that benchmarks, and the user's other tests run.
        skip = pytest.mark.skip(reason="Skipping benchmark (--benchmark-skip active): a kernel item is a benchmark")
        for item in items:
            if ITEM_KEY in item.stash:
                item.add_marker(skip)
    if config.getoption("benchmark_only", False):
        # Kernel items are benchmarks even though they do not request pytest-benchmark's fixture (their stats
        # come from the target's samples): --benchmark-only keeps them and skips the rest.
        for item in items:
            if ITEM_KEY in item.stash:
                item.own_markers = [m for m in item.own_markers
                                    if not (m.name == "skip" and "benchmark-only" in str(m.kwargs.get("reason")))]
    session = session_of(config)
    if session.shortlist is not None:
        dropped = collect.left_out_by_shortlist(items, session.shortlist)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            gone = {id(item) for item in dropped}
            items[:] = [item for item in items if id(item) not in gone]
    for message in filter_errors(session.filter_keys_unknown, session.kernel_modules, session.filter_values,
                                 session.filters_matched):
        # A collection error rather than a UsageError: xdist workers forward it to the controller, which
        # shows it (a UsageError raised in a worker is lost and the run just "collects nothing").
        config.hook.pytest_collectreport(report=pytest.CollectReport(
            nodeid="rvtune-config", outcome="failed", longrepr=message, result=[]))
    notes, errors = case_notes(session.cases or sorted(session.cases_asked), session.cases_found,
                               session.cases_left_out, default=not session.cases)
    for message in errors:
        config.hook.pytest_collectreport(report=pytest.CollectReport(
            nodeid="rvtune-case", outcome="failed", longrepr=message, result=[]))
    if not errors:
        # Skipped collection reports: counted in pytest's summary, the text under -rs; xdist forwards them from
        # its workers and shows each text once.
        for (nodeid, message), (_, path, *_) in zip(notes, session.cases_left_out, strict=True):
            config.hook.pytest_collectreport(report=pytest.CollectReport(
                nodeid=nodeid, outcome="skipped", longrepr=(path, 1, message), result=[]))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """--rvtune-search: the kernel items a search strategy chooses, one at a time (search_loop.py)."""
    rvtune = session.config.stash.get(SESSION_KEY, None)
    if rvtune is None or rvtune.options.search is None:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} error{'s' if session.testsfailed != 1 else ''} "
                                  "during collection")
    if session.config.option.collectonly:
        return True
    from pytest_rvtune.search_loop import run_searches
    run_searches(session, rvtune)
    return True


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    """Keep the kernel items a -k left out (their ids): a pasted id that selected nothing is named from them."""
    for item in items:
        if ITEM_KEY in item.stash and item.config.stash.get(_KEYWORD_KEY, ""):
            info = item.stash[ITEM_KEY]
            item.config.stash.setdefault(_DESELECTED_KEY, []).append((item.nodeid, item.name, info.target))


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    if any(ITEM_KEY in item.stash for item in items):
        return []
    keyword = config.stash.get(_KEYWORD_KEY, "")
    deselected: list[tuple[str, str, str]] = config.stash.get(_DESELECTED_KEY, [])
    pasted = pasted_item_hint(keyword, config.option.keyword, deselected) if keyword else None
    if pasted:  # an item id pasted in a form -k cannot match: the node id that runs it
        return [pasted]
    if "=" in keyword and session_of(config).kernel_modules:  # KEY=VALUE terms that matched no kernel item
        return [keyword_hint(keyword, config.option.keyword)]
    return collect.unimported_checkout_hint(Path(config.rootpath), Path(config.invocation_params.dir))


# --------------------------------------------------------------------------------------------- reporting
class ReportHooks:
    """The hooks that need the session but get no config from pytest (registered per config at configure)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """In the process that owns pytest-benchmark (xdist controller or the only process): tally, merge."""
        if not is_controller(self.config):
            return
        record = session_of(self.config).tally_report(report)
        if record is not None:
            add_record(self.config, record)

    @pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's tables: the ranking is what people look for
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not is_controller(self.config):
            return
        lines = session_of(self.config).ranking_lines(benchmark_tables(self.config))
        if lines:
            terminalreporter.ensure_newline()
        for line in lines:
            terminalreporter.write_line(line)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Records that could not be written fail the run, even when every item passed: a CI gate or a later
    compare would otherwise read a green run whose results are gone."""
    rvtune = session.config.stash.get(SESSION_KEY, None)
    if rvtune is not None and rvtune.results_errors and is_controller(session.config) \
            and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if rvtune is not None and is_controller(session.config):
        rvtune.prune_cache()  # before the terminal's summary, which says what it removed


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # firstresult: ours, not pytest-benchmark's host info
def pytest_benchmark_generate_machine_info(config: pytest.Config) -> dict[str, Any] | None:
    """Saved runs carry the identity of the targets measured, never only the host's.

    Identities come from the finished items where there are any (no extra connection to a board from the
    xdist controller); otherwise the target is opened here (pytest-benchmark asks at start-up to compare)."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return None
    identities: dict[str, dict[str, str]] = {}
    for name in session.target_names:
        if name in session.identities:
            identities[name] = session.identities[name]
            continue
        try:
            identities[name] = session.target(name).identity()
        except TargetUnavailable as exc:
            identities[name] = {"target": name, "error": str(exc)}
    return {"node": platform.node(), "machine": platform.machine(), "system": platform.system(),
            "python_version": platform.python_version(), "rvtune_targets": identities}


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_compare_machine_info(config: pytest.Config, benchmarksession: BenchmarkSession,
                                          machine_info: dict[str, Any],
                                          compared_benchmark: dict[str, Any]) -> None:
    """--benchmark-compare against a run of another board is an error, not a warning: its numbers are not
    comparable. pytest-benchmark files saved runs by host, so such a run can sit right beside ours."""
    error = compared_machine_error(machine_info, compared_benchmark)
    if error is not None:
        raise pytest.UsageError(error)


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> Iterator[None]:
    # A wrapper, so the line comes last and still comes when pytest-benchmark raises PerformanceRegression
    # (--benchmark-compare-fail) from its own summary. That exception, raised from a report hook, ended the
    # session in a traceback; pytest-benchmark has already listed the regressions, so it becomes one line and a
    # failed session (exit 1), as a failed test would.
    regressed = False
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ != "PerformanceRegression" or _PYTEST_SESSION_KEY not in config.stash:
            raise
        regressed = True
        config.stash[_PYTEST_SESSION_KEY].exitstatus = pytest.ExitCode.TESTS_FAILED
    finally:
        session = config.stash.get(SESSION_KEY, None)
        if session is not None and is_controller(config):
            for line in session.summary_lines():
                terminalreporter.write_line(line)
    if regressed:
        terminalreporter.write_line("rvtune: --benchmark-compare-fail: performance regressed (pytest-benchmark's "
                                    "list above): the session fails", red=True)
