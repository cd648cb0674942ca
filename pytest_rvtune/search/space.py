"""A search space: the configs of one kernel (their keys and each key's values) times its problem cases, which a
search visits as trials (one config on one case)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class Trial:
    """One evaluation: the config at index ``config`` of the space, on problem case ``case``."""

    config: int
    case: str


def _value_order(value: Any) -> tuple[int, Any]:
    """None first, then numbers (bools as 0/1) in order, then anything else by its text."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool | int | float):
        return (1, float(value))
    return (2, str(value))


class SearchSpace:
    """The configs (in the kernel's own order), their ids, and the cases ordered cheapest first."""

    def __init__(self, configs: Sequence[Mapping[str, Any]], ids: Sequence[str], cases: Sequence[str]) -> None:
        if not configs:
            raise ValueError("a search space needs at least one config")
        if not cases:
            raise ValueError("a search space needs at least one case")
        if len(ids) != len(configs):
            raise ValueError(f"{len(configs)} configs but {len(ids)} ids")
        self.configs = [dict(c) for c in configs]
        self.ids = list(ids)
        self.cases = list(cases)
        self.keys = list(dict.fromkeys(k for c in self.configs for k in c))
        # Each key's values in order: the model-based strategy sees a key as an ordered axis (block sizes are).
        self.values: dict[str, list[Any]] = {
            key: sorted({c.get(key) for c in self.configs}, key=_value_order) for key in self.keys}
        self._coords = [self._coordinates_of(c) for c in self.configs]
        self._by_coords: dict[tuple[int, ...], int] = {}
        for index, coords in enumerate(self._coords):
            self._by_coords.setdefault(coords, index)

    def __len__(self) -> int:
        return len(self.configs)

    @property
    def trials(self) -> int:
        """Every (config, case): what an exhaustive run evaluates."""
        return len(self.configs) * len(self.cases)

    def _coordinates_of(self, config: Mapping[str, Any]) -> tuple[int, ...]:
        return tuple(self.values[key].index(config.get(key)) for key in self.keys)

    def coordinates(self, index: int) -> tuple[int, ...]:
        """The config at ``index`` as the position of each of its values among its key's values."""
        return self._coords[index]

    def nearest(self, coords: Sequence[int]) -> int:
        """The config at ``coords``, or the one nearest to them (fewest value steps; the first on a tie): a
        kernel's configs need not be every combination of its keys' values."""
        exact = self._by_coords.get(tuple(coords))
        if exact is not None:
            return exact
        return min(range(len(self._coords)),
                   key=lambda i: sum(abs(a - b) for a, b in zip(self._coords[i], coords, strict=True)))


def by_size(cases: Sequence[str], params: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``cases`` cheapest first: by the product of their numeric parameters (M x N x K for a GEMM), ties in the
    order given. What successive halving climbs."""
    def size(case: str) -> float:
        numbers = [abs(float(v)) for v in params.get(case, {}).values()
                   if isinstance(v, int | float) and not isinstance(v, bool) and v]
        return math.prod(numbers) if numbers else 0.0
    return sorted(cases, key=lambda c: (size(c), cases.index(c)))
