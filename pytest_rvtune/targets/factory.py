"""Live targets from their configuration: one opener per target kind, in one table.

Separate from config.py, which only reads and checks configuration: the SSH target needs that configuration's
types, so opening targets there would tie the two modules into an import circle.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_rvtune.targets.base import Target
from pytest_rvtune.targets.config import TargetConfig


def open_builtin(cfg: TargetConfig, *, worker_id: str, with_timing_model: bool = False) -> Target:
    from pytest_rvtune.targets.local import builtin_targets

    return builtin_targets()[cfg.name](with_timing_model=with_timing_model)


def open_board(cfg: TargetConfig, *, worker_id: str, with_timing_model: bool = False) -> Target:
    """Boards connect here, so an unreachable board raises BoardError once, up front."""
    from pytest_rvtune.targets.ssh import connect_board

    return connect_board(cfg, worker_id=worker_id)


#: Target kind (TargetConfig.kind) -> how to open one.
OPENERS: dict[str, Callable[..., Target]] = {"builtin": open_builtin, "ssh": open_board}


def make_target(cfg: TargetConfig, *, worker_id: str, with_timing_model: bool = False) -> Target:
    """A live target. Boards connect here, so an unreachable board raises BoardError once, up front.
    ``with_timing_model``: emulated targets also record est_cycles and cache-model misses (boards have real time)."""
    return OPENERS[cfg.kind](cfg, worker_id=worker_id, with_timing_model=with_timing_model)
