"""pytest's own re-run options and -k on kernel items (issue 28, bad case 6 and a weak case): --lf reruns only
the items that failed, --ff runs them first, --sw steps from the first failure (pytest's cacheprovider, as a user
runs it); -k with a pasted config id or item name selects that item, and a -k that selects no kernel item says how
config values are matched.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

CASE = ("--rvtune-case", "small", "--benchmark-disable")


def _ran(result: pytest.RunResult) -> list[str]:
    """The item names in the order they ran (-v lines)."""
    return [line.split("::")[1].split()[0] for line in result.outlines
            if line.startswith("kernels/") and ("PASSED" in line or "FAILED" in line)]


def test_last_failed_failed_first_and_stepwise_rerun_the_failures(project: pytest.Pytester,
                                                                   add_kernel: Callable[..., Path]) -> None:
    add_kernel("fsel_bad", "wrong")  # both configs: wrong answer
    add_kernel("fsel_good")
    first = project.runpytest(*CASE, "-v", "-p", "no:randomly")
    first.assert_outcomes(passed=2, failed=2)
    last_failed = project.runpytest(*CASE, "-v", "--lf")
    # before: "run-last-failure: 2 known failures not in selected tests", then all 4 items ran
    last_failed.stdout.fnmatch_lines(["run-last-failure: rerun previous 2 failures*"])
    last_failed.assert_outcomes(failed=2)
    assert sorted(_ran(last_failed)) == ["fsel_bad[small-BLOCK=16]", "fsel_bad[small-BLOCK=32]"]
    failed_first = project.runpytest(*CASE, "-v", "--ff")
    failed_first.assert_outcomes(passed=2, failed=2)
    assert _ran(failed_first)[:2] == ["fsel_bad[small-BLOCK=16]", "fsel_bad[small-BLOCK=32]"]
    stepwise = project.runpytest(*CASE, "-v", "--sw")
    stepwise.assert_outcomes(failed=1)  # stops at the first failure
    again = project.runpytest(*CASE, "-v", "--sw")
    assert _ran(again)[0] == _ran(stepwise)[-1]  # and starts from it next time


def test_k_takes_a_pasted_item_name_or_config_id_and_says_how_when_nothing_matches(
        project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("fsel_k", configs=(16, 32, 64))
    pasted = project.runpytest(*CASE, "--co", "-q", "-k", "fsel_k[small-BLOCK=32]")
    pasted.stdout.fnmatch_lines(["kernels/fsel_k.py::fsel_k[[]small-BLOCK=32]", "1/3 tests collected (2 deselected)*"])
    config_id = project.runpytest(*CASE, "--co", "-q", "-k", "small-BLOCK=64")
    config_id.stdout.fnmatch_lines(["kernels/fsel_k.py::fsel_k[[]small-BLOCK=64]", "1/3 tests collected*"])
    nothing = project.runpytest(*CASE, "--co", "-q", "-k", "BLOCK=128")
    # before: "no tests collected (3 deselected)" and nothing else
    nothing.stdout.fnmatch_lines(["rvtune: -k 'BLOCK=128' (read as ':BLOCK:128:') selected no kernel item. Config "
                                  "values are matched as KEY=VALUE terms*`pytest --collect-only -q` lists the items"])


def test_k_takes_a_multi_target_item_id_or_a_report_label_and_names_the_node_id_of_one_it_cannot_read(
        project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    from plugin_helpers import kernel_source
    add_kernel("fsel_m", configs=(16, 32))
    two = (*CASE, "--rvtune-target", "qemu", "--rvtune-target", "host", "--co", "-q")
    pasted = project.runpytest(*two, "-k", "fsel_m[small-BLOCK=32-host]")  # as the terminal prints it
    pasted.stdout.fnmatch_lines(["kernels/fsel_m.py::fsel_m[[]small-BLOCK=32-host]",
                                 "1/4 tests collected (3 deselected)*"])
    label = project.runpytest(*two, "-k", "fsel_m[small-BLOCK=16] on qemu")  # as report and compare name it
    label.stdout.fnmatch_lines(["kernels/fsel_m.py::fsel_m[[]small-BLOCK=16-qemu]", "1/4 tests collected*"])
    # a case name the KEY=VALUE reading cannot split ('+' before the '-'): the hint gives the node id, which selects it
    add_kernel("fsel_e", source=kernel_source("fsel_e", "good", (16,)).replace('"small": dict', '"x+": dict'))
    item = "kernels/fsel_e.py::fsel_e[x+-BLOCK=16]"
    odd = project.runpytest("--rvtune-case", "x+", "--co", "-q", "-k", item)
    odd.stdout.fnmatch_lines([f"rvtune: -k '{item}' (read as *) selected nothing, but it names 1 item: give the "
                              f"node id instead of -k: pytest '{item}'".replace("[", "[[]")])
    project.runpytest("--rvtune-case", "x+", "--co", "-q", item).stdout.fnmatch_lines(
        [item.replace("[", "[[]"), "1 test collected*"])
