"""Issue 15, start-up and collection faults: run options out of range, a config filter whose value no config
has, a kernel module with a syntax error. Each is one clear message naming the thing; the rest still runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import kernel_source


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and not line.startswith(("ERROR", "FAILED"))]


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--rvtune-runs", "0", "--rvtune-runs 0: timed runs per item, from 1 to 1000000"),
    ("--rvtune-runs", "-1", "--rvtune-runs -1: timed runs per item, from 1 to 1000000"),
    ("--rvtune-warmup", "-1", "--rvtune-warmup -1: warm-up runs per item, from 0 to 1000000"),
    ("--rvtune-threads", "-1", "--rvtune-threads -1: launcher threads (0 = all harts, 1 = serial), from 0 to 4096"),
    ("--rvtune-threads", "5000", "--rvtune-threads 5000: launcher threads (0 = all harts, 1 = serial), from 0 to 4096"),
    ("--rvtune-timeout", "0", "--rvtune-timeout 0: seconds one ELF run may take, a number above 0"),
    ("--rvtune-timeout", "-1", "--rvtune-timeout -1: seconds one ELF run may take, a number above 0"),
    ("--rvtune-timeout", "nan", "--rvtune-timeout nan: seconds one ELF run may take, a number above 0"),
])
def test_a_run_option_out_of_range_is_one_usage_error_at_start(project: pytest.Pytester,
                                                                add_kernel: Callable[..., Path],
                                                                option: str, value: str, message: str) -> None:
    add_kernel("fo_opts", configs=(16,))
    result = project.runpytest("--co", "-q", f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert collected(result) == []  # refused before anything was collected, let alone built or run


def test_the_edges_of_the_ranges_are_accepted(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("fo_edges", configs=(16,))
    result = project.runpytest("--rvtune-case", "small", "--rvtune-threads", "0", "--rvtune-warmup", "0",
                               "--rvtune-runs", "1", "--rvtune-timeout", "60", "-p", "no:randomly")
    result.assert_outcomes(passed=1)  # 0 threads = all harts, no warm-up, one sample


def test_a_config_value_no_config_has_names_the_values_that_exist(project: pytest.Pytester,
                                                                   add_kernel: Callable[..., Path]) -> None:
    add_kernel("fo_vals_a", configs=(16, 32))
    add_kernel("fo_vals_b", configs=(64,))
    result = project.runpytest("--co", "-q", "--rvtune-config", "BLOCK=3")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error, not "no tests ran"
    result.stdout.fnmatch_lines(["*--rvtune-config BLOCK=3: no config of any kernel matches it; the values that "
                                 "exist are BLOCK: 16, 32, 64*"])
    # a value one kernel has is no error: it selects that kernel's config, the other kernel has none
    result = project.runpytest("--co", "-q", "--rvtune-config", "BLOCK=64")
    assert result.ret == pytest.ExitCode.OK
    assert collected(result) == ["kernels/fo_vals_b.py::fo_vals_b[emu-BLOCK=64]"]
    # two filters, each matching something: no error either
    result = project.runpytest("--co", "-q", "--rvtune-config", "BLOCK=16", "--rvtune-config", "BLOCK=16,64")
    assert collected(result) == ["kernels/fo_vals_a.py::fo_vals_a[emu-BLOCK=16]"]


@pytest.mark.parametrize("named", [False, True])  # a directory run, or the files named on the command line
def test_a_syntax_error_is_one_collection_error_naming_file_and_line(project: pytest.Pytester,
                                                                      add_kernel: Callable[..., Path],
                                                                      named: bool) -> None:
    good = add_kernel("fo_fine", configs=(16,))
    broken = kernel_source("fo_syntax", configs=(16,)).replace("def launch(kernel, inputs, case):",
                                                                "def launch(kernel, inputs, case:")
    bad = add_kernel("fo_syntax", source=broken)
    line = broken.splitlines().index("def launch(kernel, inputs, case:") + 1
    paths = [str(good), str(bad)] if named else []
    result = project.runpytest("--rvtune-case", "small", "-p", "no:randomly", *paths)
    result.assert_outcomes(passed=1, errors=1)  # the other kernel still runs
    result.stdout.fnmatch_lines([f"*kernel module {bad}: import failed: SyntaxError at {bad}:{line}: *",
                                 "    def launch(kernel, inputs, case:"])
    text = result.stdout.str()
    assert text.count("ERROR collecting") == 1, text
    assert "importtestmodule" not in text and "Traceback" not in text
