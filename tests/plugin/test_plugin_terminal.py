"""What a pytest-benchmark user sees at the end of a QEMU session: the table with the modelled time that ranks and
no columns that are always 0 or 1, one comparison line with --rvtune-compare whatever it found, and
--benchmark-skip skipping kernel items (they are benchmarks) while the project's other tests run. The real
plugin, compiler, clang and QEMU."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def test_the_emulated_table_the_comparison_line_and_benchmark_skip(
        project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("term_axpy", configs=(16, 32))
    first = project.runpytest("--rvtune-case", "small")
    first.assert_outcomes(passed=2)
    # (pytest-benchmark's own "benchmark: ... (defaults: ...)" header is not printed in every in-process run: ours is)
    first.stdout.fnmatch_lines(["rvtune timing: kernel items are timed by their harness on the target "
                                "(--rvtune-runs, *); pytest-benchmark's defaults apply to tests using its benchmark "
                                "fixture"])
    assert not any(line.startswith("rvtune: ") for line in first.stdout.lines[:10])  # the summary's prefix is its own
    header = next(line for line in first.stdout.lines if line.startswith("Name (time in "))
    assert header.split(")", 1)[1].split()[:2] == ["Min", "OPS"]  # the time that ranks, and launches per second
    assert "StdDev" not in first.stdout.str() and "Rounds" not in first.stdout.str()
    assert max(len(line) for line in first.stdout.lines if "term_axpy[" in line) <= 120
    # on real hardware (here the host): what ranks and how noisy it was, no column that is always 1
    host = project.runpytest("--rvtune-case", "small", "--rvtune-target", "host")
    host.assert_outcomes(passed=2)
    header = next(line for line in host.stdout.lines if line.startswith("Name (time in "))
    assert header.split(")", 1)[1].split() == ["Min", "Median", "IQR", "Outliers", "Rounds"]
    assert max(len(line) for line in host.stdout.lines if "term_axpy[" in line) <= 120
    # the user's own choice of columns stands
    chosen = project.runpytest("--rvtune-case", "small", "--benchmark-columns=min,max,rounds")
    assert any(line.startswith("Name (time in ") and "Rounds" in line for line in chosen.stdout.lines)

    again = project.runpytest("--rvtune-case", "small", "--rvtune-compare", "latest")
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["rvtune: compared 2 items against */.rvtune/results/*.jsonl: 0 regressed, "
                                "2 unchanged"])

    (project.path / "unit").mkdir()
    (project.path / "unit" / "test_units.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    skipped = project.runpytest("--rvtune-case", "small", "--benchmark-skip", "-rs", "kernels", "unit")
    skipped.assert_outcomes(passed=1, skipped=2)
    skipped.stdout.fnmatch_lines(["*--benchmark-skip active*a kernel item is a benchmark*"])


def test_benchmark_compare_fail_fails_the_session_in_one_line(project: pytest.Pytester,
                                                              add_kernel: Callable[..., Path]) -> None:
    kernel = add_kernel("term_slow", configs=(16,))
    saved = project.runpytest("--rvtune-case", "small", "--benchmark-autosave")
    saved.assert_outcomes(passed=1)
    # the same answer with more work per element: more modelled cycles, so a slower modelled time
    load = "tl.load(x_ptr + offs, mask=mask)"
    kernel.write_text(kernel.read_text().replace(f"{load} + 1.0", f"{load} + 1.0 + {load} * 0.0 + {load} * 0.0"))
    slower = project.runpytest("--rvtune-case", "small", "--benchmark-compare", "--benchmark-compare-fail=min:5%")
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    assert "Traceback" not in slower.stdout.str() + slower.stderr.str()
    text = slower.stdout.str() + slower.stderr.str()
    assert "Performance has regressed" in text and "term_slow[small-BLOCK=16]" in text  # pytest-benchmark's list
    slower.stdout.fnmatch_lines(["rvtune: --benchmark-compare-fail: performance regressed (pytest-benchmark's list "
                                 "above): the session fails"])
