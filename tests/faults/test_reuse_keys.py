"""A result is reused only while everything that decided its verdict is unchanged (issue 28, bad case 1 and the
weak timeout case): ``--rvtune-resume`` and the count cache key on the ELF, the golden data, the harness's whole
argv (run options, tolerance) and the target, and a stored run that would not fit the timeout now in force is
run again. Each test changes one of them and shows the earlier result is not reused.

Real parts: a tiny kernel (tests/plugin/plugin_helpers.py) built by our compiler and clang-19, run under QEMU.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import kernel_source, read_results

SMALL = ("--rvtune-case", "small", "-p", "no:cacheprovider")


def _run(project: pytest.Pytester, name: str, *args: str) -> tuple[pytest.RunResult, dict]:
    out = project.path / f"{name}.jsonl"
    result = project.runpytest(*SMALL, f"--rvtune-results={out}", *args)
    (record,) = read_results(out)
    return result, record


def test_resume_runs_again_what_a_changed_tolerance_timeout_or_run_option_decides(
        project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    # y = x * 1.1 in float32 against the reference in double: within 1e-6, not exact
    source = kernel_source("frk_resume", configs=(16,)).replace("mask=mask) + 1.0", "mask=mask) * 1.1")
    module = add_kernel("frk_resume", source=source.replace('return {"y": x + 1.0}', 'return {"y": x.double() * 1.1}'))
    first, record = _run(project, "first")
    first.assert_outcomes(passed=1)
    assert record["verdict_key"] and record["wall_s"] > 0
    same, resumed = _run(project, "same", "--rvtune-resume", "first.jsonl")
    same.assert_outcomes(passed=1)
    assert resumed["resumed_from"] == "first.jsonl"  # nothing changed: reused

    # a longer run: its argv (--runs 2) decides the samples, so the earlier record is not this run's
    more, record = _run(project, "more", "--rvtune-resume", "first.jsonl", "--rvtune-runs", "2")
    more.assert_outcomes(passed=1)
    assert "resumed_from" not in record and len(record["samples_ns"]) == 2

    # a timeout the earlier run would not fit in: before, "passed; 1 resumed"
    short, record = _run(project, "short", "--rvtune-resume", "first.jsonl", "--rvtune-timeout", "1e-9")
    short.assert_outcomes(failed=1)
    assert record["outcome"] == "timeout" and "resumed_from" not in record

    # the module's TOLERANCE tightened to exact: the float32 kernel is off the double reference by an ulp.
    # Before: "1 passed; 1 resumed", exit 0 (the resume key left the tolerance out)
    module.write_text(module.read_text().replace("TOLERANCE = dict(atol=1e-6, rtol=1e-6)",
                                                 "TOLERANCE = dict(atol=0.0, rtol=0.0)"))
    tight, record = _run(project, "tight", "--rvtune-resume", "first.jsonl")
    tight.assert_outcomes(failed=1)
    assert record["outcome"] == "wrong" and "resumed_from" not in record
    assert record["elf_sha256"] == resumed["elf_sha256"]  # the same ELF and data: only the tolerance changed


def test_resume_runs_again_when_the_golden_data_changed(project: pytest.Pytester,
                                                        add_kernel: Callable[..., Path]) -> None:
    module = add_kernel("frk_golden", configs=(16,))
    _run(project, "first")[0].assert_outcomes(passed=1)
    module.write_text(module.read_text().replace('return {"y": x + 1.0}', 'return {"y": x + 2.0}'))
    changed, record = _run(project, "changed", "--rvtune-resume", "first.jsonl")
    changed.assert_outcomes(failed=1)  # the new reference disagrees with the kernel: found by running it
    assert record["outcome"] == "wrong" and "resumed_from" not in record


def test_a_counted_run_is_not_reused_past_a_timeout_it_would_not_fit(project: pytest.Pytester,
                                                                      add_kernel: Callable[..., Path]) -> None:
    add_kernel("frk_counts", configs=(16,))
    _run(project, "first")[0].assert_outcomes(passed=1)
    _, record = _run(project, "again")
    assert record["counts_cached"] is True  # unchanged: QEMU did not run
    short, record = _run(project, "short", "--rvtune-timeout", "1e-9")
    short.assert_outcomes(failed=1)  # before: passed, from the count cache
    assert record["outcome"] == "timeout" and record["counts_cached"] is False
    roomy, record = _run(project, "roomy", "--rvtune-timeout", "100")
    roomy.assert_outcomes(passed=1)  # a changed timeout the run fits in keeps the stored result
    assert record["counts_cached"] is True
