"""The search loop: ask the strategy for a trial, evaluate it (the caller's function: a pytest item, or a build
and run of our own), tell the strategy, until the budget is spent or the strategy has nothing more to try."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_rvtune.search.space import SearchSpace, Trial
from pytest_rvtune.search.strategies import Strategy

#: Trials already evaluated that a strategy may ask again in a row (told their value, free) before the search
#: ends: a strategy that only repeats itself has nothing more to try.
MAX_REPEATS = 1000


class StopSearch(Exception):
    """Raised by an evaluation to end the search there (the session is stopping): what was evaluated is kept."""


@dataclass(frozen=True)
class Evaluation:
    """One evaluated trial: its value by the ranking metric (None: the config failed) and its place in order."""

    trial: Trial
    value: float | None
    step: int


@dataclass
class SearchOutcome:
    space: SearchSpace
    strategy: str
    budget: int
    seed: int
    evaluations: list[Evaluation] = field(default_factory=list)
    stopped: bool = False  # ended by StopSearch before its budget or its strategy was done

    def of_case(self, case: str) -> list[Evaluation]:
        return [e for e in self.evaluations if e.trial.case == case]

    def best(self, case: str) -> Evaluation | None:
        """The best evaluation on ``case`` (the first of equal values), or None when none succeeded."""
        succeeded = [e for e in self.of_case(case) if e.value is not None]
        return min(succeeded, key=lambda e: (e.value, e.step)) if succeeded else None


def run_search(space: SearchSpace, strategy: Strategy, budget: int,
               evaluate: Callable[[Trial, int], float | None]) -> SearchOutcome:
    """Evaluate at most ``budget`` distinct trials chosen by ``strategy``. ``evaluate(trial, step)`` returns the
    trial's value by the ranking metric, lower is better, or None when the config failed; StopSearch from it ends
    the search with what was evaluated before (any other exception propagates)."""
    if budget < 1:
        raise ValueError(f"search budget {budget}: evaluations to spend, at least 1")
    outcome = SearchOutcome(space, strategy.name, budget, strategy.seed)
    seen: dict[Trial, float | None] = {}
    repeats = 0
    while len(outcome.evaluations) < budget:
        trial = strategy.ask()
        if trial is None:
            break
        if trial in seen:
            repeats += 1
            if repeats > MAX_REPEATS:
                break
            strategy.tell(trial, seen[trial])
            continue
        repeats = 0
        step = len(outcome.evaluations)
        try:
            value = evaluate(trial, step)
        except StopSearch:
            outcome.stopped = True
            break
        seen[trial] = value
        outcome.evaluations.append(Evaluation(trial, value, step))
        strategy.tell(trial, value)
    return outcome
