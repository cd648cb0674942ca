"""--rvtune-search and `rvtune tune`: each strategy on a tiny real space (4 configs x 2 cases, built with our
compiler and run under QEMU), within its budget, every evaluated item a normal record, the same search again for the
same seed (the CLI repeats pytest's search), and the gap to an exhaustive run's best."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import read_results

from pytest_rvtune import paths
from pytest_rvtune.cli import main

CONFIGS = (16, 32, 64, 128)
STRATEGIES = ("random", "halving", "tpe")


def trials(records: list[dict]) -> list[tuple[str, str]]:
    """(case, config) in the order the search evaluated them."""
    return [(r["case"], r["config_id"]) for r in sorted(records, key=lambda r: r["search"]["step"])]


def test_each_strategy_runs_its_budget_as_normal_items_against_an_exhaustive_reference(
        project: pytest.Pytester, add_kernel: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    add_kernel("ps_search", configs=CONFIGS)
    every = project.runpytest("--rvtune-case", "small", "--rvtune-case", "emu", "--rvtune-results", "all.jsonl",
                              "--benchmark-disable")
    every.assert_outcomes(passed=8)
    exhaustive = read_results(project.path / "all.jsonl")
    best = {case: min((r["counters"]["x60_cycles"], r["config_id"]) for r in exhaustive if r["case"] == case)
            for case in ("small", "emu")}

    # a second kernel module: each search's items may follow another module's (pytest's fixtures of a module
    # must be torn down before an item of another is set up)
    add_kernel("ps_search_other", configs=(64,))
    for strategy in STRATEGIES:
        results = f"{strategy}.jsonl"
        searched = project.runpytest("--rvtune-case", "small", "--rvtune-case", "emu", "--rvtune-search", strategy,
                                     "--rvtune-budget", "3", "--rvtune-search-seed", "3", "--rvtune-results", results,
                                     "--rvtune-search-reference", "all.jsonl", "--benchmark-disable")
        # the budget, as normal items, per kernel (the other kernel has 2 items); the rest never ran
        searched.assert_outcomes(passed=5, deselected=5)
        both = read_results(project.path / results)
        assert sorted(r["case"] for r in both if r["kernel"] == "ps_search_other") == ["emu", "small"]
        records = [r for r in both if r["kernel"] == "ps_search"]
        assert [r["search"]["step"] for r in records] == [0, 1, 2]
        assert all(r["search"]["strategy"] == strategy and r["outcome"] == "passed" for r in records)
        assert len(set(trials(records))) == 3  # never the same item twice
        written = json.loads((project.path / f"{results}.search.json").read_text())
        summaries = {found["kernel"]: found for found in written}
        assert summaries["ps_search_other"]["evaluated"] == 2  # its whole space: fewer items than the budget
        summary = summaries["ps_search"]
        assert summary["evaluated"] == 3 and summary["trials"] == 8 and summary["strategy"] == strategy
        for case in summary["cases"]:
            mine = [r for r in records if r["case"] == case["case"]]
            assert case["evaluated"] == len(mine)
            if not mine:
                continue
            value, config_id = min((r["counters"]["x60_cycles"], r["config_id"]) for r in mine)
            assert case["best"] == {"config_id": config_id, "value": value, "step": case["best"]["step"]}
            reference = case["reference"]
            assert reference["exhaustive"] and reference["value"] == best[case["case"]][0]
            assert case["gap"] == pytest.approx(value / best[case["case"]][0] - 1)
        said = " ".join(line.strip() for line in searched.stdout.lines)  # the summary is wrapped at 120 columns
        assert (f"rvtune search ({strategy}, seed 3, budget 3): ps_search on qemu, 3 of 8 (config, case) trials "
                "evaluated (37.5%), ranked by x60_cycles") in said
        assert f"exhaustive best in all.jsonl: {best['emu'][1]}" in said
        if strategy == "halving":  # 2 configs on the cheap case, the better of them on the bigger one
            small = sorted((r["counters"]["x60_cycles"], r["config_id"]) for r in records if r["case"] == "small")
            assert len(small) == 2 and [r["config_id"] for r in records if r["case"] == "emu"] == [small[0][1]]

        # the same seed, the same search: by `rvtune tune` (the engine without pytest), in the project's root
        capsys.readouterr()
        outer_root = paths.set_project_root(project.path)
        try:
            code = main(["tune", str(project.path / "kernels" / "ps_search.py"), "--case", "small", "--case", "emu",
                         "--strategy", strategy, "--budget", "3", "--seed", "3", "--results",
                         str(project.path / f"{strategy}-cli.jsonl")])
        finally:
            paths.set_project_root(outer_root)
        assert code == 0
        cli = read_results(project.path / f"{strategy}-cli.jsonl")
        assert trials(cli) == trials(records)
        assert [r["nodeid"] for r in cli] == [r["nodeid"] for r in sorted(records, key=lambda r: r["search"]["step"])]
        assert "rvtune search (" in capsys.readouterr().out


def test_search_options_are_checked_before_anything_runs(project: pytest.Pytester,
                                                         add_kernel: Callable[..., Path]) -> None:
    add_kernel("ps_search", configs=CONFIGS)
    for args, message in (
        (["--rvtune-budget", "3"], "*--rvtune-budget without --rvtune-search STRATEGY*random, halving, tpe*"),
        (["--rvtune-search", "grid", "--rvtune-budget", "3"], "*--rvtune-search grid: unknown strategy*"),
        (["--rvtune-search", "random", "--rvtune-budget", "3", "-n", "2"], "*without -n / --dist*"),
    ):
        result = project.runpytest(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        result.stderr.fnmatch_lines([message])
