"""How a search chooses its next trial: random sampling, successive halving across problem sizes, and Optuna's
TPE sampler. Each is asked for a trial, told its value (the ranking metric, lower is better; None: the config
failed), and plans within the budget it is given (the engine also stops at it)."""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections import deque
from typing import TYPE_CHECKING, Any

from pytest_rvtune.search.space import SearchSpace, Trial

if TYPE_CHECKING:  # optuna is an optional extra, imported when the tpe strategy is made
    import optuna

#: Successive halving keeps the best 1/ETA of each size for the next (Jamieson & Talwalkar 2016; Hyperband's 3).
ETA = 3
#: Suggestions of configs already evaluated that the TPE strategy takes in a row before it falls back to an
#: unevaluated config at random: a sampler that has converged keeps proposing its best.
TPE_REPEATS = 20
EXTRA_HINT = "install pytest-rvtune's search extra: pip install 'pytest-rvtune[search]' (Optuna)"


class Strategy(ABC):
    """Chooses trials one at a time from what it was told."""

    name: str = ""

    def __init__(self, space: SearchSpace, budget: int, seed: int) -> None:
        self.space, self.budget, self.seed = space, budget, seed

    @abstractmethod
    def ask(self) -> Trial | None:
        """The next trial, or None when the strategy has nothing more to try."""

    def tell(self, trial: Trial, value: float | None) -> None:  # noqa: B027 (random sampling learns nothing)
        """The value of an asked trial (None: the config failed: built wrong, crashed, timed out)."""


def split_budget(budget: int, cases: int, configs: int) -> list[int]:
    """``budget`` evaluations over ``cases`` searched one by one: equal shares, the rest to the biggest cases
    (last), none above ``configs``."""
    shares = [min(configs, budget // cases)] * cases
    left = budget - sum(shares)
    for i in reversed(range(cases)):
        extra = min(left, configs - shares[i])
        shares[i] += extra
        left -= extra
    return shares


class RandomSampling(Strategy):
    """Per case, its share of the budget as configs drawn uniformly without replacement."""

    name = "random"

    def __init__(self, space: SearchSpace, budget: int, seed: int) -> None:
        super().__init__(space, budget, seed)
        shares = split_budget(budget, len(space.cases), len(space))
        self.queue: deque[Trial] = deque()
        for case, share in zip(space.cases, shares, strict=True):
            rng = random.Random(f"{seed}:{case}")  # str seeds are hashed (SHA-512): the same draw everywhere
            self.queue.extend(Trial(i, case) for i in rng.sample(range(len(space)), share))

    def ask(self) -> Trial | None:
        return self.queue.popleft() if self.queue else None


def halving_sizes(configs: int, rungs: int, budget: int, eta: int = ETA) -> list[int]:
    """Configs evaluated at each size: as many as the budget allows at the first, then each size the best 1/eta
    of the one before; budget left when every config fits the first goes to more survivors. Fewer sizes than
    ``rungs`` when the budget cannot reach the last one."""
    def sizes_from(first: int) -> list[int]:
        sizes = [first]
        for _ in range(rungs - 1):
            sizes.append(max(1, math.ceil(sizes[-1] / eta)))
        return sizes

    first = min(configs, budget)
    while first > 1 and sum(sizes_from(first)) > budget:
        first -= 1
    sizes = sizes_from(first)
    while sum(sizes) > budget:  # a budget below the number of sizes: the biggest are not reached
        sizes.pop()
    left = budget - sum(sizes)
    for rung in range(1, len(sizes)):
        extra = min(left, sizes[rung - 1] - sizes[rung])
        sizes[rung] += extra
        left -= extra
    return sizes


class SuccessiveHalving(Strategy):
    """Successive halving across problem sizes: many configs on the cheapest case, the best 1/eta of them on the
    next bigger one, and so on up to the biggest. With one case it is random sampling."""

    name = "halving"

    def __init__(self, space: SearchSpace, budget: int, seed: int, eta: int = ETA) -> None:
        super().__init__(space, budget, seed)
        self.sizes = halving_sizes(len(space), len(space.cases), budget, eta)
        rng = random.Random(f"{seed}:halving")
        self.rung = 0
        self.queue = deque(Trial(i, space.cases[0]) for i in rng.sample(range(len(space)), self.sizes[0]))
        self.values: dict[int, float | None] = {}

    def ask(self) -> Trial | None:
        if not self.queue:
            self._promote()
        return self.queue.popleft() if self.queue else None

    def tell(self, trial: Trial, value: float | None) -> None:
        if trial.case == self.space.cases[self.rung]:
            self.values[trial.config] = value

    def _promote(self) -> None:
        """The survivors of the size just finished, onto the next size (failed configs never survive)."""
        if self.rung + 1 >= len(self.sizes):
            return
        ranked = sorted((value, config) for config, value in self.values.items() if value is not None)
        self.rung += 1
        self.values = {}
        case = self.space.cases[self.rung]
        self.queue.extend(Trial(config, case) for _, config in ranked[:self.sizes[self.rung]])


def import_optuna() -> Any:
    """Optuna, or an ImportError saying how to install it."""
    try:
        import optuna
    except ImportError:
        raise ImportError(f"the tpe strategy needs Optuna: {EXTRA_HINT}") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no INFO line per trial
    return optuna


class TpeSearch(Strategy):
    """Optuna's TPE sampler (Tree-structured Parzen Estimator, multivariate), one study per case with its share
    of the budget. Each config key is an integer axis over its sorted values (block sizes are ordered: TPE's
    Parzen estimators then model neighbourhoods); a suggestion that is not a config of the space is the nearest
    one; driven through Optuna's ask-and-tell interface, so evaluation stays ours."""

    name = "tpe"

    def __init__(self, space: SearchSpace, budget: int, seed: int) -> None:
        super().__init__(space, budget, seed)
        self.optuna = import_optuna()
        from optuna.distributions import BaseDistribution, IntDistribution
        self.shares = dict(zip(space.cases, split_budget(budget, len(space.cases), len(space)), strict=True))
        self.axes = [key for key in space.keys if len(space.values[key]) > 1]
        self.distributions: dict[str, BaseDistribution] = {
            key: IntDistribution(0, len(space.values[key]) - 1) for key in self.axes}
        self.studies: dict[str, optuna.Study] = {
            case: self.optuna.create_study(direction="minimize",
                                           sampler=self.optuna.samplers.TPESampler(seed=seed * 1000 + n))
            for n, case in enumerate(space.cases)}
        self.done: dict[str, dict[int, float | None]] = {case: {} for case in space.cases}
        self.pending: tuple[optuna.trial.Trial | None, int] | None = None
        self.rng = random.Random(f"{seed}:tpe")

    def _case(self) -> str | None:
        return next((c for c in self.space.cases if len(self.done[c]) < self.shares[c]), None)

    def ask(self) -> Trial | None:
        case = self._case()
        if case is None:
            return None
        study, done = self.studies[case], self.done[case]
        for _ in range(TPE_REPEATS):
            asked = study.ask(self.distributions)
            position = {key: asked.params[key] for key in self.axes}
            index = self.space.nearest([position.get(key, 0) for key in self.space.keys])
            if index not in done:
                self.pending = (asked, index)
                return Trial(index, case)
            self._tell(study, asked, done[index])  # known already: no evaluation, no budget
        untried = [i for i in range(len(self.space)) if i not in done]
        index = self.rng.choice(untried)
        self.pending = (None, index)
        return Trial(index, case)

    def _tell(self, study: optuna.Study, asked: optuna.trial.Trial, value: float | None) -> None:
        if value is None:
            study.tell(asked, state=self.optuna.trial.TrialState.FAIL)
        else:
            study.tell(asked, value)

    def tell(self, trial: Trial, value: float | None) -> None:
        if self.pending is None or self.pending[1] != trial.config:
            raise ValueError(f"told {trial}, which was not the trial asked")
        asked, index = self.pending
        self.pending = None
        self.done[trial.case][index] = value
        study = self.studies[trial.case]
        if asked is not None:
            self._tell(study, asked, value)
        elif value is not None:  # the random fallback: the sampler learns it as a finished trial
            coords = self.space.coordinates(index)
            params = {key: coords[self.space.keys.index(key)] for key in self.axes}
            study.add_trial(self.optuna.trial.create_trial(params=params, distributions=self.distributions,
                                                           value=value))


#: Strategy name -> its class, in the order --help lists them.
STRATEGIES: dict[str, type[Strategy]] = {s.name: s for s in (RandomSampling, SuccessiveHalving, TpeSearch)}


def make_strategy(name: str, space: SearchSpace, budget: int, seed: int) -> Strategy:
    """The strategy ``name``; ValueError naming the ones there are."""
    if name not in STRATEGIES:
        raise ValueError(f"search strategy {name!r}: expected one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](space, budget, seed)
