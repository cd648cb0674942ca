"""Hand samples measured on a target to pytest-benchmark, through its public per-item timer route.

pytest-benchmark has no API for times measured elsewhere. Its `pedantic(fn, rounds=N, iterations=1)` reads the
timer once before and once after each call of fn, and never calibrates; with a timer that is a fake clock that
fn advances by one board-measured sample, every round's duration is exactly that sample. Tables, JSON,
autosave, --benchmark-compare(-fail) and `pytest-benchmark compare` then work unchanged.

The stats are always built in the process that owns pytest-benchmark's session (the xdist controller, or the
only process): pytest-benchmark disables itself inside xdist workers, so workers send their samples over with
the test report and the controller merges them here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_benchmark.fixture import BenchmarkFixture
from pytest_benchmark.utils import NameWrapper

if TYPE_CHECKING:
    import pytest
    from pytest_benchmark.session import BenchmarkSession


class ReplayClock:
    """A monotonic clock (seconds) that only moves when ``advance`` is called."""

    __name__ = "rvtune_target_clock"  # pytest-benchmark prints the timer's name in its JSON

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class _CallSpec:
    id: str
    params: dict[str, Any]


@dataclass
class _Node:
    """The parts of a pytest item BenchmarkFixture reads (name, nodeid, callspec)."""

    name: str
    nodeid: str
    callspec: _CallSpec = field(default_factory=lambda: _CallSpec("", {}))


def add_benchmark(
    session: BenchmarkSession,
    *,
    nodeid: str,
    name: str,
    param: str,
    params: dict[str, Any],
    samples_ns: Sequence[float],
    extra_info: dict[str, Any],
    group: str | None = None,
) -> None:
    """Record ``samples_ns`` as the stats of one item in pytest-benchmark's session ``session``."""
    if not samples_ns:
        raise ValueError(f"{nodeid}: no timing samples to record")
    clock = ReplayClock()
    options = dict(session.options)
    options["timer"] = NameWrapper(clock)
    fixture = BenchmarkFixture(
        _Node(name, nodeid, _CallSpec(param, params)),
        add_stats=session.benchmarks.append,
        logger=session.logger,
        warner=lambda *args, **kwargs: None,
        disabled=False,
        group=group,
        **options,
    )
    samples = iter(samples_ns)
    fixture.pedantic(lambda: clock.advance(next(samples) * 1e-9), rounds=len(samples_ns), iterations=1)
    fixture.extra_info.update(extra_info)


#: Record fields carried into pytest-benchmark's extra_info (the JSON keeps them; the table does not show them).
EXTRA_INFO_FIELDS = ("kernel", "case", "case_params", "problem", "config", "config_id", "target", "machine",
                     "counters", "timing_source", "elf_sha256", "golden_sha256", "samples_ns", "outcome", "nodeid",
                     "kernel_default", "flops", "bytes")


def benchmark_tables(config: pytest.Config) -> bool:
    """Whether records go to pytest-benchmark (its tables and JSON). Under xdist pytest-benchmark marks itself
    disabled on the controller too: that is exactly the case we merge for, so only the user's own
    --benchmark-disable / --benchmark-skip stop us."""
    return config.pluginmanager.get_plugin("pytest-benchmark") is not None and not (
        config.getoption("benchmark_disable", False) or config.getoption("benchmark_skip", False))


#: pytest-benchmark's columns for a session whose every target is emulated: the modelled time of one launch is
#: exact, so min = max = mean = median and the spread columns (stddev, iqr, outliers) are always 0, rounds and
#: iterations always 1: the table shows the time that ranks, and operations per second, in ~60 columns.
EMULATED_COLUMNS = ["min", "ops"]
#: ... and on real hardware (the host, boards): the median ranks, min is the repeatable figure, IQR and outliers
#: say how noisy the samples were; iterations is always 1 (each sample is one timed launch or mean of several, as
#: the harness took it), and max, mean and stddev follow the outliers: ~115 columns, where all ten took ~190.
REAL_COLUMNS = ["min", "median", "iqr", "outliers", "rounds"]


def table_columns(config: pytest.Config, target_names: list[str]) -> None:
    """pytest-benchmark's table columns for our items, unless the user chose them (--benchmark-columns): under
    emulation only (every target QEMU) EMULATED_COLUMNS, else REAL_COLUMNS. Called at configure, before
    pytest-benchmark reads its options."""
    if getattr(config.option, "benchmark_columns", "absent") is not None:
        return
    emulated = bool(target_names) and all(name == "qemu" for name in target_names)
    config.option.benchmark_columns = list(EMULATED_COLUMNS if emulated else REAL_COLUMNS)


#: Names longer than this get their config keys abbreviated in pytest-benchmark's table: with its two emulated
#: columns (~45 wide) the table then stays within 120 columns.
MAX_TABLE_NAME = 64


def short_table_names(config: pytest.Config) -> None:
    """pytest-benchmark's table names an item by its pytest name, ``fused_moe[default-BLOCK_SIZE_M=4-...]``: a
    six-key Triton_RVV config made it 130 columns wide. Long names are shown with their config keys abbreviated
    by the summary's scheme (``BLOCK_SIZE_M=4`` -> ``BSM=4``, summary.short_item_name); only in the table: the
    saved JSON and ``--benchmark-compare`` keep the full names. Call after pytest-benchmark's configure."""
    from pytest_rvtune.results.summary import short_item_name

    bench_session = config.pluginmanager.get_plugin("pytest-benchmark")
    base = getattr(bench_session, "name_format", None)
    if base is None or getattr(base, "shortens", False):
        return

    def name_format(bench: dict[str, Any]) -> str:
        name = str(base(bench))
        return short_item_name(name) if len(name) > MAX_TABLE_NAME else name

    name_format.shortens = True  # type: ignore[attr-defined]
    bench_session.name_format = name_format  # type: ignore[union-attr]


def add_record(config: pytest.Config, record: dict[str, Any]) -> None:
    """Hand one finished item's samples to pytest-benchmark, unless the user turned it off."""
    bench_session = config.pluginmanager.get_plugin("pytest-benchmark")
    if bench_session is None or not benchmark_tables(config):
        return
    nodeid = record["nodeid"]
    name = nodeid.rsplit("::", 1)[-1]
    param = name[name.index("[") + 1:-1] if "[" in name else ""
    extra = {key: record.get(key) for key in EXTRA_INFO_FIELDS}
    add_benchmark(bench_session, nodeid=nodeid, name=name, param=param,
                  params={"case": record["case"], **record["config"], "target": record["target"]},
                  samples_ns=benchmark_samples(record), extra_info=extra, group=benchmark_group(record))


#: The X60's clock (SpacemiT K1, 1.6 GHz): modelled cycles -> modelled time.
X60_HZ = 1.6e9


def modelled_ns(record: dict[str, Any]) -> float | None:
    """The modelled X60 time of one launch (x60_cycles / 1.6 GHz) of an emulated record, None without the model."""
    cycles = (record.get("counters") or {}).get("x60_cycles")
    if record.get("timing_source") != "emulated" or cycles is None:
        return None
    return float(cycles) / X60_HZ * 1e9


def benchmark_samples(record: dict[str, Any]) -> list[float]:
    """What pytest-benchmark gets as the item's samples: the measured ones, or under QEMU the modelled X60 time
    (exact, so one value per measured sample: its table, --benchmark-compare and --benchmark-compare-fail then
    act on the modelled chip, not on QEMU's wall time)."""
    modelled = modelled_ns(record)
    if modelled is None:
        return list(record["samples_ns"])
    return [modelled] * max(1, len(record["samples_ns"]))


def benchmark_group(record: dict[str, Any]) -> str:
    """One pytest-benchmark table per kernel, case and problem (causal and non-causal never share one); a table
    of emulated items says what its times are: the modelled X60's, or QEMU's (not performance)."""
    problem = "-".join(f"{key}={value}" for key, value in (record.get("problem") or {}).items())
    group = "-".join(part for part in (record["kernel"], record["case"], problem) if part)
    if record.get("timing_source") != "emulated":
        return group
    if modelled_ns(record) is not None:
        return f"{group} (modelled SpacemiT X60 time: x60_cycles at 1.6 GHz, not measured)"
    return f"{group} (QEMU: emulated time, not performance)"


#: The identity fields that name the machine measured (not the toolchain: comparing compilers is legitimate).
BOARD_IDENTITY_KEYS = ("isa", "vlen", "board", "arch", "cpu")


def compared_machine_error(machine_info: dict[str, Any], compared_benchmark: dict[str, Any]) -> str | None:
    """Why a saved run cannot be compared with this one (another target or another board), or None."""
    ours = machine_info.get("rvtune_targets") or {}
    theirs = (compared_benchmark.get("machine_info") or {}).get("rvtune_targets")
    if theirs is None:
        return None  # not an rvtune run: pytest-benchmark's own warning applies
    for name, identity in ours.items():
        saved = theirs.get(name)
        if saved is None:
            return (f"--benchmark-compare: the saved run measured target(s) {', '.join(sorted(theirs))}, not "
                    f"{name!r}; compare runs of the same target (rvtune compare A B compares any two runs item by "
                    "item)")
        differs = {k: (saved.get(k), identity.get(k)) for k in BOARD_IDENTITY_KEYS if saved.get(k) != identity.get(k)}
        if differs:
            detail = ", ".join(f"{k} {a!r} vs {b!r}" for k, (a, b) in differs.items())
            return (f"--benchmark-compare: the saved run of target {name!r} was measured on another "
                    f"machine ({detail}); compare runs of the same board")
    return None
