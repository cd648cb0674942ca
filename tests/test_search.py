"""The search engine without QEMU (search/): the strategies against a value function of our own, so budgets,
repeats, seeds and the spaces' shapes are checked in milliseconds; tests/plugin/test_plugin_search.py runs them on
real items."""

from __future__ import annotations

import itertools

import pytest

from pytest_rvtune.results.records import record_from_dict
from pytest_rvtune.search.engine import StopSearch, run_search
from pytest_rvtune.search.report import references, summary
from pytest_rvtune.search.space import SearchSpace, Trial, by_size
from pytest_rvtune.search.strategies import STRATEGIES, halving_sizes, make_strategy, split_budget

BLOCKS = [4, 8, 16, 32, 64]


def gemm_like(cases: tuple[str, ...] = ("M16", "M64"), blocks: list[int] = BLOCKS) -> SearchSpace:
    configs = [{"BM": m, "BN": n, "UNROLL": u} for m, n, u in itertools.product(blocks, blocks, (1, 2))]
    ids = [f"BM={c['BM']}-BN={c['BN']}-UNROLL={c['UNROLL']}" for c in configs]
    return SearchSpace(configs, ids, cases)


def value(space: SearchSpace, trial: Trial) -> float:
    """A bowl whose best block size grows with M (as a GEMM's does), UNROLL=2 a little better."""
    config = space.configs[trial.config]
    best_m = 8 if trial.case == "M16" else 32
    return (abs(BLOCKS.index(config["BM"]) - BLOCKS.index(best_m)) + abs(BLOCKS.index(config["BN"]) - 2)
            + (0.0 if config["UNROLL"] == 2 else 0.5) + 1.0)


def search(name: str, space: SearchSpace, budget: int, seed: int = 0) -> list[Trial]:
    outcome = run_search(space, make_strategy(name, space, budget, seed), budget, lambda t, _: value(space, t))
    return [e.trial for e in outcome.evaluations]


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_strategy_spends_its_budget_on_distinct_trials_and_repeats_itself_for_a_seed(name: str) -> None:
    space = gemm_like()
    chosen = search(name, space, 14)
    assert len(chosen) == 14 and len(set(chosen)) == 14
    assert search(name, space, 14) == chosen
    assert search(name, space, 14, seed=1) != chosen


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_budget_above_the_space_evaluates_every_trial_once_and_stops(name: str) -> None:
    space = gemm_like(("M16",), BLOCKS[:3])
    chosen = search(name, space, 500)
    # halving with one case is random sampling; tpe converges and then draws the configs it has not tried
    assert sorted(chosen) == sorted(Trial(i, "M16") for i in range(len(space)))


def test_halving_climbs_the_sizes_with_the_best_third_of_each() -> None:
    space = gemm_like(("M16", "M64"))
    chosen = search("halving", space, 40)
    small = [t for t in chosen if t.case == "M16"]
    big = [t for t in chosen if t.case == "M64"]
    assert chosen == small + big and len(small) == 30 and len(big) == 10
    best_small = sorted(small, key=lambda t: (value(space, t), t.config))[:10]
    assert sorted(t.config for t in big) == sorted(t.config for t in best_small)


def test_halving_sizes_fit_the_budget() -> None:
    assert halving_sizes(3000, 4, 1800) == [1215, 405, 135, 45]  # aiter's 3,000 x 4 M buckets at 15 %
    assert halving_sizes(5, 2, 4) == [3, 1]
    assert halving_sizes(10, 3, 25) == [10, 10, 5]  # every config fits the first size: more survivors after
    assert halving_sizes(100, 4, 2) == [1, 1]  # too small a budget for every size
    assert split_budget(10, 3, 100) == [3, 3, 4] and split_budget(10, 2, 3) == [3, 3]


def test_a_space_that_is_not_every_combination_takes_the_nearest_config() -> None:
    configs = [{"BM": m, "BN": n} for m, n in itertools.product(BLOCKS, BLOCKS) if m * n <= 256]  # 4x64 yes, 64x64 no
    space = SearchSpace(configs, [str(c) for c in configs], ["c"])
    # (64, 64) is no config: the nearest are those one value step away, the first of them taken
    far_corner = (BLOCKS.index(64), BLOCKS.index(64))
    nearest = configs[space.nearest(far_corner)]
    assert nearest["BM"] * nearest["BN"] <= 256 and far_corner not in [space.coordinates(i) for i in range(len(space))]
    assert all(space.nearest(space.coordinates(i)) == i for i in range(len(space)))
    outcome = run_search(space, make_strategy("tpe", space, len(space), 0), len(space),
                         lambda t, _: float(space.configs[t.config]["BM"] + space.configs[t.config]["BN"]))
    assert sorted(e.trial.config for e in outcome.evaluations) == list(range(len(space)))


def test_a_stopped_search_keeps_what_it_evaluated() -> None:
    space = gemm_like()

    def evaluate(trial: Trial, step: int) -> float:
        if step == 3:
            raise StopSearch
        return value(space, trial)

    outcome = run_search(space, make_strategy("random", space, 10, 0), 10, evaluate)
    assert outcome.stopped and len(outcome.evaluations) == 3


def test_cases_climb_by_size_and_bad_input_is_named() -> None:
    params = {"big": {"M": 128, "N": 64}, "small": {"M": 16, "N": 64}, "mid": {"M": 32, "N": 64}}
    assert by_size(["big", "small", "mid"], params) == ["small", "mid", "big"]
    with pytest.raises(ValueError, match="search strategy 'grid': expected one of random, halving, tpe"):
        make_strategy("grid", gemm_like(), 3, 0)
    with pytest.raises(ValueError, match="search budget 0"):
        run_search(gemm_like(), make_strategy("random", gemm_like(), 1, 0), 0, lambda t, _: 1.0)


def test_the_gap_is_to_the_reference_best_and_exhaustive_only_when_it_holds_every_config() -> None:
    space = gemm_like(("M16",))
    outcome = run_search(space, make_strategy("random", space, 5, 0), 5, lambda t, _: value(space, t))

    def record(config_id: str, x60: float) -> dict:
        return {"kernel": "k", "case": "M16", "config_id": config_id, "target": "qemu", "outcome": "passed",
                "timing_source": "emulated", "samples_ns": [1.0], "counters": {"x60_cycles": x60}}

    every = [record(i, value(space, Trial(n, "M16"))) for n, i in enumerate(space.ids)]
    known = references([record_from_dict(r) for r in every], kernel="k", target="qemu", problem_id="",
                       ids=space.ids, cases=space.cases, rank_by=None, source="all.jsonl")
    assert known["M16"].exhaustive and known["M16"].value == 1.0
    (case,) = summary(outcome, kernel="k", target="qemu", problem_id="", metric="x60_cycles", known=known)["cases"]
    best = outcome.best("M16")
    assert best is not None and case["gap"] == pytest.approx(best.value / 1.0 - 1)
    partial = references([record_from_dict(r) for r in every[:10]], kernel="k", target="qemu", problem_id="",
                         ids=space.ids, cases=space.cases, rank_by=None, source="some.jsonl")
    assert not partial["M16"].exhaustive and partial["M16"].configs == 10


def test_rvtune_tune_names_bad_input(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_rvtune.cli import main
    assert main(["tune", str(tmp_path / "nope.py"), "--strategy", "random", "--budget", "3"]) == 2
    assert f"rvtune tune: {tmp_path / 'nope.py'}: no such kernel module" in capsys.readouterr().err
    assert main(["tune", str(tmp_path / "nope.py"), "--strategy", "random", "--budget", "0"]) == 2
    assert "--budget 0: evaluations to spend, at least 1" in capsys.readouterr().err
