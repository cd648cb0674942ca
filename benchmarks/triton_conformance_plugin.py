"""pytest plugin of benchmarks/triton_conformance.py: runs Triton's own language tests on the rvtune CPU driver.

Loaded with ``-p triton_conformance_plugin`` (the runner puts this directory on PYTHONPATH, so xdist workers
load it too). It activates the driver in every process, gives Triton's test files the fixtures their conftest
would (``device`` = "cpu", ``fresh_triton_cache``, ``fresh_knobs``, ``with_allocator``), samples the
collected items, classifies each result where the exception is still at hand (the worker) and hands the
verdict to the controller in the report's ``user_properties``, which writes one JSON file.

Verdicts: ``pass``; ``wrong`` (an AssertionError: Triton's tests compare results with numpy/torch asserts);
``refused`` (the rvtune compiler or driver, or Triton's frontend on our options, refused the kernel with a named
error); ``gpu stage`` (the kernel compiled and ran, then the test read a GPU compiler stage such as ``asm["ttgir"]``
or ``asm["ptx"]`` that a CPU backend has no counterpart of); ``other`` (any other failure, a crashed kernel
included: a crashed worker on the host, a ``KernelCrashError`` under QEMU); ``skipped`` (the test skipped itself).
An item *reached our lowering* when it compiled or launched a kernel through the driver, or our compiler or driver
refused it: the issue's pass rate is taken over those.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

VERDICT = "rvtune_verdict"
REACHED = "rvtune_reached_lowering"
REASON = "rvtune_reason"

#: Triton's ``CompiledKernel.asm`` raises this for a stage the backend does not have: the GPU stages here.
_GPU_STAGE = re.compile(r"Unknown key: '(ttgir|llir|ptx|sass|cubin|amdgcn|hsaco)'")

#: Frontend refusals that come from our backend's options (e.g. no fp8 types), not from a broken test.
_FRONTEND_REFUSALS = re.compile(
    r"not supported in this architecture|not supported by|unsupported|input_precision must be one of", re.I)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("triton-conformance")
    group.addoption("--conformance-target", choices=("host", "rv64"), default="host")
    group.addoption("--conformance-sample", type=int, default=0, help="run N items drawn at random (0: all)")
    group.addoption("--conformance-seed", type=int, default=0)
    group.addoption("--conformance-shuffle", action="store_true",
                    help="run the items in a random order (seeded): a run stopped early is then a random sample")
    group.addoption("--conformance-report", default=None, help="write the verdicts to this JSON file")
    group.addoption("--conformance-journal", default=None,
                    help="append each verdict to this JSON-lines file the moment it exists, and leave out the "
                         "items it already holds (a run of hours survives an interrupt and goes on)")
    group.addoption("--conformance-torch-cpu-matmul", action="store_true",
                    help="leave torch.matmul on CPU fp16/bf16 tensors as torch has it (fp32 sums in torch's "
                         "order) instead of exact (see exact_half_matmul)")


def pytest_configure(config: pytest.Config) -> None:
    import pytest_rvtune.cpu_driver as cpu_driver

    config.addinivalue_line("markers", "interpreter: the Triton interpreter supports the test")
    mode = cpu_driver.QEMU_MODE if config.getoption("--conformance-target") == "rv64" else cpu_driver.HOST_MODE
    cpu_driver.activate(mode)
    from triton import knobs

    knobs.compilation.listener = _count_compile
    if not config.getoption("--conformance-torch-cpu-matmul"):
        exact_half_matmul()
    config.stash[_RESULTS] = []
    journal = config.getoption("--conformance-journal")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        config.stash[_JOURNAL_START] = workerinput.get(_JOURNAL_START_KEY, 0)
    elif journal:  # the controller (or a run without xdist): what the journal held when this run began
        _end_torn_line(Path(journal))
        config.stash[_JOURNAL_START] = Path(journal).stat().st_size if Path(journal).exists() else 0
    global _config
    _config = config


_JOURNAL_START = pytest.StashKey[int]()
_JOURNAL_START_KEY = "conformance_journal_start"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: a worker (a restarted one too) leaves out only what the journal held when the run began, so every
    worker collects the same items."""
    node.workerinput[_JOURNAL_START_KEY] = node.config.stash.get(_JOURNAL_START, 0)


def exact_half_matmul() -> None:
    """``torch.matmul`` of two CPU fp16 or bf16 tensors: the exact product (float64 sums of the exactly
    representable products) rounded once to their dtype.

    Triton's tests compute references with ``torch.matmul`` on the test's device and were written for GPUs, where
    the reference's fp32 sums (cuBLAS) and the kernel's (MMA) add in similar orders. On the CPU torch sums fp32 in
    another order, and on test_scaled_dot's data (strong cancellation) that lands farther from the exact value
    than the test's tolerance: over the whole file, torch's references were 120.0 (exact 121.5195, terms up to
    1.0e7), 1.25 (exact 1.2314, terms up to 2.0e5) and 0.011536 (exact 0.011832, terms up to 2150), where our
    results were the exact values rounded to the kernels' output types. An exact reference is stricter than any
    fp32 one: it can fail a result of ours that an fp32 order would pass, never pass one that is far from the
    true product. ``--conformance-torch-cpu-matmul`` turns it off."""
    import torch

    if getattr(torch.matmul, "_rvtune_exact", False):
        return
    original = torch.matmul

    def matmul(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        if (not args and not kwargs and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.device.type == "cpu" and b.device.type == "cpu" and a.dtype == b.dtype
                and a.dtype in (torch.float16, torch.bfloat16)):
            return original(a.double(), b.double()).to(a.dtype)
        return original(a, b, *args, **kwargs)

    matmul._rvtune_exact = True  # type: ignore[attr-defined]
    torch.matmul = matmul


_RESULTS = pytest.StashKey[list]()
_USED_DRIVER = pytest.StashKey[bool]()
_compiles = 0  # triton.compile calls that finished (through our backend: the driver is the only one)


def _count_compile(**_: Any) -> None:
    global _compiles
    _compiles += 1


def _activity() -> tuple[int, int]:
    from pytest_rvtune.cpu_driver.launch import launches

    return _compiles, launches()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Note whether the item compiled or launched anything through our backend and driver."""
    before = _activity()
    yield
    item.stash[_USED_DRIVER] = _activity() != before
_config: pytest.Config | None = None  # logreport hooks get no config argument


def read_journal(path: Path, upto: int | None = None) -> list[dict[str, Any]]:
    """The verdicts a journal holds (in its first ``upto`` bytes), the last one per item; a torn last line (the
    run was killed while writing it) is left out, and that item runs again."""
    if not path.exists():
        return []
    by_item: dict[str, dict[str, Any]] = {}
    for line in path.read_bytes()[:upto].decode(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        by_item[entry["nodeid"]] = entry
    return list(by_item.values())


def _end_torn_line(path: Path) -> None:
    """A journal whose last line was torn by a kill gets its newline, so the next verdict is a line of its own."""
    if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
        with open(path, "a") as out:
            out.write("\n")


@pytest.hookimpl(trylast=True)  # after -k / -m deselected theirs: the sample is drawn from what is left
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    n = config.getoption("--conformance-sample")
    if 0 < n < len(items):
        keep = set(random.Random(config.getoption("--conformance-seed")).sample(range(len(items)), n))
        items[:] = [item for i, item in enumerate(items) if i in keep]
    if config.getoption("--conformance-shuffle"):
        random.Random(config.getoption("--conformance-seed")).shuffle(items)
    journal = config.getoption("--conformance-journal")
    if journal:  # the sample and order are drawn first, so a resumed run finishes the same sample
        done = {entry["nodeid"] for entry in read_journal(Path(journal), config.stash.get(_JOURNAL_START, 0))}
        items[:] = [item for item in items if item.nodeid not in done]


@pytest.fixture
def device() -> str:
    return "cpu"


@pytest.fixture
def fresh_triton_cache() -> Iterator[str]:
    from triton import knobs

    with tempfile.TemporaryDirectory() as tmpdir, knobs.cache.scope():
        knobs.cache.dir = tmpdir
        yield tmpdir


@pytest.fixture
def fresh_knobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Every knob set of ``triton.knobs`` at its defaults for the test (the rvtune cache and driver variables
    stay: the driver is already active), restored afterwards."""
    from triton import knobs

    for name, knobset in list(vars(knobs).items()):
        if isinstance(knobset, knobs.base_knobs) and knobset is not knobs.base_knobs:
            monkeypatch.setattr(knobs, name, knobset.copy().reset())
    yield knobs


@pytest.fixture
def with_allocator() -> Iterator[None]:
    import torch
    import triton
    from triton.runtime._allocation import NullAllocator

    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8))
    try:
        yield
    finally:
        triton.set_allocator(NullAllocator())


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def reason_of(exc: BaseException) -> str:
    """A short line saying why: our errors' first line; Triton's CompilationError's last (the message after
    the source excerpt); an assertion's first two (numpy puts the tolerance and the mismatch count there)."""
    from triton.compiler.errors import CompilationError

    from pytest_rvtune.cpu_driver.launch import KernelCrashError

    # A test that catches every exception and asserts may hide the crash that made it fail: show the crash.
    exc = next((e for e in _chain(exc) if isinstance(e, KernelCrashError)), exc)
    lines = _lines(str(exc))
    if isinstance(exc, CompilationError):
        text = lines[-1] if lines else ""
    elif isinstance(exc, AssertionError):
        text = " ".join(lines[:3])
    else:
        text = lines[0] if lines else ""
    return f"{type(exc).__name__}: {text}"[:300]


def classify(exc: BaseException) -> tuple[str, bool]:
    """(verdict, whether the compiler or driver itself raised it) of a failed test's exception."""
    from triton.compiler.errors import CompilationError

    from pytest_rvtune.compiler.api import CompileError
    from pytest_rvtune.compiler.lower import LoweringError
    from pytest_rvtune.compiler.lower_ops import OpSemanticsError
    from pytest_rvtune.cpu_driver.launch import KernelCrashError, LaunchError
    from pytest_rvtune.cpu_driver.loader import LoadError

    chain = list(_chain(exc))
    if any(isinstance(e, KernelCrashError) for e in chain):  # as a crashed worker on the host: not a refusal
        return "other", True
    if any(isinstance(e, LoweringError | OpSemanticsError) for e in chain):
        return "refused", True
    if any(isinstance(e, LaunchError | LoadError | CompileError) for e in chain):
        return "refused", True
    if any(isinstance(e, CompilationError) and _FRONTEND_REFUSALS.search(str(e)) for e in chain):
        return "refused", False
    if isinstance(exc, KeyError) and _GPU_STAGE.search(str(exc)):
        return "gpu stage", False
    if isinstance(exc, AssertionError) and not _torch_internal(exc):
        return "wrong", False
    return "other", False


def _torch_internal(exc: BaseException) -> bool:
    """An assert inside torch itself (``Torch not compiled with CUDA enabled``), not a comparison of results
    (``torch.testing`` raises its mismatches from inside torch too: those stay comparisons)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = tb.tb_frame.f_code.co_filename.replace("\\", "/") if tb is not None else ""
    return "/torch/" in where and "/torch/testing/" not in where


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and not report.passed):
        reason = ""
        used_driver = item.stash.get(_USED_DRIVER, False)
        if report.passed:
            verdict, reached = "pass", used_driver
        elif report.skipped:
            verdict, reached = "skipped", False
        elif call.excinfo is not None:
            verdict, refused_by_lowering = classify(call.excinfo.value)
            reached = used_driver or refused_by_lowering
            reason = reason_of(call.excinfo.value)
        else:
            verdict, reached = "other", False
        report.user_properties += [(VERDICT, verdict), (REACHED, reached), (REASON, reason)]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    props = dict(report.user_properties)
    if VERDICT in props:
        verdict, reached, reason = props[VERDICT], props[REACHED], props[REASON]
    elif report.when == "call" or (report.failed and report.when != "teardown"):
        # a crashed xdist worker: no verdict came back
        verdict, reached, reason = "other", False, "the test process crashed"
    else:
        return
    if _config is None:
        return
    entry = {
        "nodeid": report.nodeid, "function": report.nodeid.split("::")[-1].split("[")[0],
        "verdict": verdict, "reached_lowering": reached,
        "message": reason, "seconds": round(report.duration, 3),
    }
    _config.stash[_RESULTS].append(entry)
    journal = _config.getoption("--conformance-journal")
    if journal and not hasattr(_config, "workerinput"):
        with open(journal, "a") as out:  # one line, flushed on close: an interrupt loses at most this item
            out.write(json.dumps(entry) + "\n")


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--conformance-report")
    if path and not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        Path(path).write_text(json.dumps(session.config.stash[_RESULTS], indent=1) + "\n")
