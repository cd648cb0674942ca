"""--rvtune-shortlist: rank every config on QEMU, then time only the best few on a real target (the host here:
the board this machine has)."""

from __future__ import annotations

import json
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

import pytest
from plugin_helpers import read_results

from pytest_rvtune.cli import main
from pytest_rvtune.results.report import ranked
from pytest_rvtune.results.runs import load_run
from pytest_rvtune.results.summary import distinct_results


def _ranked_configs(path: Path) -> list[str]:
    run = load_run(path)
    return [result[0].config_id for result in distinct_results(ranked(run.records, "x60_cycles"))]


def test_the_host_times_only_the_best_configs_of_the_emulated_run(project: pytest.Pytester,
                                                                   add_kernel: Callable[..., Path],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    add_kernel("ps_short", configs=(8, 16, 32, 64, 128))
    emulated = project.runpytest("--rvtune-case", "small", "--rvtune-results", "emu.jsonl", "--benchmark-disable")
    emulated.assert_outcomes(passed=5)
    order = _ranked_configs(project.path / "emu.jsonl")
    assert len(order) == 5  # five different builds, five results

    timed = project.runpytest("--rvtune-target", "host", "--rvtune-case", "small", "--rvtune-shortlist", "emu.jsonl",
                              "--rvtune-shortlist-size", "2", "--rvtune-results", "host.jsonl", "--benchmark-disable",
                              "--rvtune-max-time", "0")
    timed.assert_outcomes(passed=2, deselected=3)
    records = read_results(project.path / "host.jsonl")
    assert sorted(r["config_id"] for r in records) == sorted(order[:2])
    assert all(r["target"] == "host" and r["timing_source"] == "real" for r in records)
    timed.stdout.fnmatch_lines([
        "rvtune shortlist (--rvtune-shortlist emu.jsonl):",
        f"  ps_short / small: 2 of 5 configs (5 distinct) by x60_cycles: {order[0]}, {order[1]}",
        "rvtune ranking, by time (median time on the target):",
    ])

    # ranked at another case: used, and said (winners move with problem size)
    other = project.runpytest("--rvtune-target", "host", "--rvtune-case", "emu", "--rvtune-shortlist", "emu.jsonl",
                              "--rvtune-results", "host-emu.jsonl", "--benchmark-disable", "--rvtune-max-time", "0")
    other.assert_outcomes(passed=3, deselected=2)
    other.stdout.fnmatch_lines(["  ps_short / emu: 3 of 5 configs (5 distinct) by x60_cycles (ranked at case small, "
                                "not emu: winners move with size): *"])

    # ... and said again long after the session, by report and export-best, naming both sizes
    shortlisted = read_results(project.path / "host-emu.jsonl")
    assert all(r["shortlisted_by"]["case"] == "small" and r["shortlisted_by"]["case_params"] == {"n": 75}
               for r in shortlisted)
    note = ("note: ps_short / emu (n=300): ranked among 3 of 5 configs shortlisted by x60_cycles at case small "
            "(n=75) in emu.jsonl: a ranking made at another size*")
    out = project.path / "out"
    for command in (["report", "host-emu.jsonl", "--no-plots", "--out", str(out / "r")],
                    ["export-best", "host-emu.jsonl", "--out", str(out / "e")]):
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(project.path)
            assert main(command) == 0
        printed = capsys.readouterr().out
        assert any(fnmatch(line.strip(), note) for line in printed.splitlines()), printed
    exported = json.loads((out / "e" / "host" / "ps_short.json").read_text())
    assert exported["cases"]["emu"]["shortlisted_by"]["case_params"] == {"n": 75}
    assert "(n=300)" in exported["cases"]["emu"]["size_note"]
    # the same case's shortlist is no ranking at another size: no note
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(project.path)
        assert main(["report", "host.jsonl", "--no-plots", "--out", str(out / "same")]) == 0
        assert main(["export-best", "host.jsonl", "--out", str(out / "same-e")]) == 0
    assert "note:" not in capsys.readouterr().out
    assert "size_note" not in (out / "same-e" / "host" / "ps_short.json").read_text()


def test_a_kernel_the_run_never_ranked_keeps_every_config(project: pytest.Pytester,
                                                          add_kernel: Callable[..., Path]) -> None:
    add_kernel("ps_ranked", configs=(16, 32))
    project.runpytest("--rvtune-case", "small", "--rvtune-results", "emu.jsonl",
                      "--benchmark-disable").assert_outcomes(passed=2)
    add_kernel("ps_new", configs=(16, 32))
    result = project.runpytest("--rvtune-case", "small", "--rvtune-shortlist", "emu.jsonl", "--rvtune-shortlist-size",
                               "1", "--rvtune-results", "again.jsonl", "--benchmark-disable")
    result.assert_outcomes(passed=3, deselected=1)
    result.stdout.fnmatch_lines(["  ps_new / small: not ranked in emu.jsonl: every config runs"])


@pytest.mark.parametrize("args, message", [
    (["--rvtune-shortlist-size", "2"], "*--rvtune-shortlist-size N sizes the shortlist of --rvtune-shortlist RUN*"),
    (["--rvtune-shortlist", "nothing.jsonl"], "*--rvtune-shortlist: nothing.jsonl: no such results file*"),
    (["--rvtune-shortlist", "run.jsonl", "--rvtune-shortlist-size", "0"], "*keep at least 1 config per group*"),
])
def test_bad_shortlist_options_are_usage_errors(project: pytest.Pytester, args: list[str], message: str) -> None:
    (project.path / "run.jsonl").write_text(
        '{"kernel": "k", "case": "small", "config": {"B": 1}, "config_id": "B=1", "target": "qemu", '
        '"outcome": "passed", "counters": {"launch_insns": 5}, "timing_source": "emulated"}\n')
    result = project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
