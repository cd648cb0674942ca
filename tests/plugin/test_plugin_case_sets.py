"""--rvtune-case over kernel modules with different case sets (issue 29): a module without the asked case is left
out of it with one note (a skipped collection, its text under -rs), an error only when no module has the case."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import kernel_source


def two_kernels(add_kernel: Callable[..., Path]) -> None:
    add_kernel("mc_plain", configs=(16,))  # cases small, emu
    wide = kernel_source("mc_wide", configs=(16, 32)).replace('"emu": dict(n=300)', '"wide": dict(n=900)')
    add_kernel("mc_wide", source=wide)  # cases small, wide


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_case_only_some_modules_have_selects_those(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                                     workers: list[str]) -> None:
    two_kernels(add_kernel)
    result = project.runpytest("--rvtune-case", "wide", "--collect-only", "-q", "-rs", *workers)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["kernels/mc_wide.py::mc_wide[[]wide-BLOCK=16[]]",
                                 "kernels/mc_wide.py::mc_wide[[]wide-BLOCK=32[]]"])
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] kernels/mc_plain.py:1: kernel mc_plain has no case wide (its cases: "
                                 "small, emu): left out of it"])
    assert result.stdout.str().count("has no case wide") == 1  # once, also from two workers
    assert "mc_plain[" not in result.stdout.str()


def test_cases_run_where_they_exist_and_a_case_no_module_has_is_an_error(project: pytest.Pytester,
                                                                         add_kernel: Callable[..., Path]) -> None:
    two_kernels(add_kernel)
    result = project.runpytest("--rvtune-case", "emu", "--rvtune-case", "wide", "--collect-only", "-q")
    assert result.ret == 0
    assert {line.split("::")[1] for line in result.stdout.lines if "::" in line} == {
        "mc_plain[emu-BLOCK=16]", "mc_wide[wide-BLOCK=16]", "mc_wide[wide-BLOCK=32]"}
    result = project.runpytest("--rvtune-case", "huge", "--collect-only", "-q")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*--rvtune-case huge: no kernel has it; the cases that exist are emu, small, wide*"])


def test_without_a_case_a_module_lacking_the_targets_default_is_left_out_with_a_note(
        project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    two_kernels(add_kernel)  # the QEMU target's default case is emu, which mc_wide lacks
    result = project.runpytest("--collect-only", "-q", "-rs")
    assert result.ret == 0, result.stdout.str()
    assert {line.split("::")[1] for line in result.stdout.lines if "::" in line} == {"mc_plain[emu-BLOCK=16]"}
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] kernels/mc_wide.py:1: kernel mc_wide has no case emu (its cases: "
                                 "small, wide): left out of it; run it with --rvtune-case small"])
    (project.path / "kernels" / "mc_plain.py").unlink()  # now no module has emu: an error, saying what to do
    result = project.runpytest("--collect-only", "-q")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*the target's default case emu: no kernel has it; choose one with --rvtune-case: "
                                 "the cases that exist are small, wide*"])
