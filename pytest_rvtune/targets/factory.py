"""Live targets from their configuration: one opener per target kind, in one table.

Separate from config.py, which only reads and checks configuration: the SSH target needs that configuration's
types, so opening targets there would tie the two modules into an import circle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pytest_rvtune.targets.base import Target
from pytest_rvtune.targets.config import TargetConfig


class HeldPlace(Protocol):
    """A board taken from a farm for the whole session (a labgrid place), shared with every worker."""

    def release(self) -> None: ...


def open_builtin(cfg: TargetConfig, *, worker_id: str, with_timing_model: bool = False,
                 lease: Mapping[str, Any] | None = None) -> Target:
    from pytest_rvtune.targets.local import builtin_targets

    return builtin_targets()[cfg.name](with_timing_model=with_timing_model)


def open_board(cfg: TargetConfig, *, worker_id: str, with_timing_model: bool = False,
               lease: Mapping[str, Any] | None = None) -> Target:
    """Boards connect here, so an unreachable board raises BoardError once, up front."""
    from pytest_rvtune.targets.ssh import connect_board

    return connect_board(cfg, worker_id=worker_id)


def open_labgrid(cfg: TargetConfig, *, worker_id: str, with_timing_model: bool = False,
                 lease: Mapping[str, Any] | None = None) -> Target:
    """The board of a labgrid place: the one ``lease`` names (taken by the xdist controller), else a place
    reserved and acquired now and released when the target closes."""
    from pytest_rvtune.targets.labgrid_farm import open_labgrid_board

    return open_labgrid_board(cfg, lease)


#: Target kind (TargetConfig.kind) -> how to open one.
OPENERS: dict[str, Callable[..., Target]] = {"builtin": open_builtin, "ssh": open_board, "labgrid": open_labgrid}


def make_target(cfg: TargetConfig, *, worker_id: str, with_timing_model: bool = False,
                lease: Mapping[str, Any] | None = None) -> Target:
    """A live target. Boards connect here, so an unreachable board raises BoardError once, up front.
    ``with_timing_model``: emulated targets also record est_cycles and cache-model misses (boards have real time).
    ``lease``: the place a session-wide hold (take_place) took, for a labgrid target."""
    return OPENERS[cfg.kind](cfg, worker_id=worker_id, with_timing_model=with_timing_model, lease=lease)


def take_place(cfg: TargetConfig, on_wait: Callable[[str], None] | None = None
               ) -> tuple[HeldPlace, dict[str, Any]] | None:
    """For a target whose board is taken from a farm once per session (kind "labgrid"): take it now, waiting
    while others hold it (``on_wait`` is told when that starts); the hold (release it at the end) and its lease,
    plain data for make_target in any process. None for other kinds."""
    if cfg.kind != "labgrid":
        return None
    from pytest_rvtune.targets.labgrid_farm import hold_place

    hold = hold_place(cfg, on_wait)
    assert hold.lease is not None
    return hold, hold.lease.as_dict()
