"""The SpacemiT X60's roofline: what one core can do at most, in the units of the X60 model (per cycle).

- Peak: 20 fp32 FLOP/cycle, the measured peak of one core (32 GFLOP/s at 1.6 GHz with ``vfmacc.vv``, cpufp; the
  figure /work/shared/reference/x60-measurements.md gives, "The chip", read 2026-11-27). The cost table the model
  prices instructions with has ``vfmacc.vf`` e32m8 at 8 cycles, 16 FLOP/cycle from one stream: a kernel the model
  prices can come near the roof, never above it.
- Bandwidth: the K1's LPDDR4X, 10.66 GB/s theoretical at 1.6 GHz, 6.66 bytes/cycle: the figure the X60 model
  bounds DRAM traffic with (x60/model.py DRAM_BYTES_PER_S, X60_HZ; the K1 datasheet via the same reference).

A kernel's point: arithmetic intensity FLOPS(case) / BYTES(case) (its module's figures of one launch, the
records' ``flops`` / ``bytes``) against FLOP/cycle (flops / x60_cycles). Nothing here knows pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_rvtune.results.records import RunRecord
from pytest_rvtune.results.report import ranked, work_of
from pytest_rvtune.x60.model import DRAM_BYTES_PER_S, X60_HZ

#: fp32 FLOP per cycle of one X60 core at most (measured: cpufp, vfmacc.vv; see the module's docstring).
PEAK_FLOP_PER_CYCLE = 20.0
#: DRAM bytes per core cycle (the K1's LPDDR4X at the X60's clock; x60/model.py).
BYTES_PER_CYCLE = DRAM_BYTES_PER_S / X60_HZ
#: The metric the roofline's y axis divides by.
METRIC = "x60_cycles"


@dataclass(frozen=True)
class RoofPoint:
    record: RunRecord
    intensity: float  # FLOP per byte
    flop_per_cycle: float
    best: bool  # the group's winner


def roof_points(groups: Sequence[Sequence[RunRecord]]) -> list[RoofPoint]:
    """Every valid record ranked by the X60 model whose kernel declares FLOPS and BYTES, each group's winner
    marked; [] when none does."""
    points = []
    for group in groups:
        order = ranked(group, METRIC)
        for index, record in enumerate(order):
            flops, moved = work_of(record, "flops"), work_of(record, "bytes")
            cycles = record.counters.get(METRIC)
            if flops and moved and cycles:
                points.append(RoofPoint(record, flops / moved, flops / cycles, index == 0))
    return points
