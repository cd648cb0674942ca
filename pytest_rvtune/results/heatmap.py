"""What a heatmap of one group shows, whatever draws it (plots.py's PNG, the HTML report's SVG).

Rows x columns are BLOCK_SIZE_M x BLOCK_SIZE_N when both vary, else the two parameters with the most distinct
values (one row when only one varies). A cell holds the best config among those with that cell's two values
(the other parameters at their best for it). Problem keys (e.g. IS_CAUSAL) are constant within a group: never an
axis, never an "other parameter at its best". Nothing here draws or knows pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_rvtune.results.records import RunRecord
from pytest_rvtune.results.report import ranked
from pytest_rvtune.results.runs import metric_value, rank_metric

Cell = tuple[int, int]


def axes_params(records: Sequence[RunRecord]) -> list[str]:
    """The (at most two) parameters to plot, rows first."""
    params = list(dict.fromkeys(k for r in records for k in r.config))
    varied = [p for p in params if len({str(r.config.get(p)) for r in records}) > 1]
    if "BLOCK_SIZE_M" in varied and "BLOCK_SIZE_N" in varied:
        return ["BLOCK_SIZE_M", "BLOCK_SIZE_N"]
    return sorted(varied, key=lambda p: -len({str(r.config.get(p)) for r in records}))[:2]


def sorted_values(values: Iterable[Any]) -> list[Any]:
    """Numbers in numeric order, then anything else as text (a config value may be a string)."""
    return sorted(set(values), key=lambda v: (not isinstance(v, int | float), v if isinstance(v, int | float)
                                              else str(v)))


@dataclass(frozen=True)
class HeatmapGrid:
    """One group's heatmap: axis parameters and values, each cell's best record, the group's winner."""

    metric: str  # what the cells hold: "time" (median ns) or a counter, the group's rank metric
    row_param: str
    col_param: str | None  # None: only one parameter varies (one column)
    rows: list[Any]
    cols: list[Any]  # [None] when col_param is None
    best_in_cell: dict[Cell, RunRecord]
    tried: frozenset[Cell]  # cells with at least one config (valid or not); tried but not in best_in_cell = failed
    best: Cell
    others: list[str]  # the parameters shown at their best in each cell

    def value(self, cell: Cell) -> float | None:
        record = self.best_in_cell.get(cell)
        return None if record is None else metric_value(record, self.metric)

    @property
    def winner(self) -> RunRecord:
        return self.best_in_cell[self.best]


def heatmap_grid(group: Sequence[RunRecord], rank_by: str | None = None) -> HeatmapGrid | None:
    """The grid of one group (target, kernel, case, problem); None when no parameter varies or none is valid."""
    params = axes_params(group)
    if not params:
        return None
    metric = rank_metric(group, rank_by)
    order = ranked(group, metric)
    if not order:
        return None
    row_p = params[0]
    col_p = params[1] if len(params) > 1 else None
    rows = sorted_values(r.config.get(row_p) for r in group)
    cols = sorted_values(r.config.get(col_p) for r in group) if col_p else [None]

    def cell(record: RunRecord) -> Cell:
        return rows.index(record.config.get(row_p)), cols.index(record.config.get(col_p) if col_p else None)

    best_in_cell: dict[Cell, RunRecord] = {}
    for record in order:  # best first: the first record seen per cell is that cell's best
        best_in_cell.setdefault(cell(record), record)
    problem = group[0].problem
    others = [p for p in dict.fromkeys(k for r in group for k in r.config) if p not in params and p not in problem]
    return HeatmapGrid(metric, row_p, col_p, rows, cols, best_in_cell, frozenset(cell(r) for r in group),
                       cell(order[0]), others)
