"""The X60 core as the model sees it: cycles of one execution of a basic block, in steady state.

The core (SpacemiT X60, K1): in order, dual issue, a vector unit (VLEN 256, DLEN 128) beside the scalar pipe.
What this module assumes, each one a figure or a rule a reader can check (benchmarks/x60_fidelity.py checks the
whole against the chip's measured kernels):

- **Issue.** Instructions issue in program order, at most ISSUE_WIDTH in one cycle (LLVM's X60 model: IssueWidth
  2). One issues when its source registers are ready and a unit of its class is free. A class has UNITS units
  (LLVM's X60 resources: two integer ALUs, two load/store pipes, one branch pipe, one FP unit, one multiply/divide
  pipe, one vsetvl pipe); an instruction occupies its unit for its measured reciprocal throughput x the units
  (``add`` 0.62 cycle with two ALUs: each busy 1.24 cycles), so a class's throughput is the table's.
- **What an instruction waits for.** Its source registers: ready ``latency`` cycles after their producer issued
  (the table's latency, from LLVM's X60 model; else DEFAULT_SCALAR_LATENCY for a scalar result and the
  instruction's own cycles for a vector one, model.py's VECTOR_FP_LATENCY at least for vector FP). Not: a
  branch's operands (branches are predicted, and a correctly predicted one holds nothing up in order), a store's
  data (an in-order pipe reads it late, at write-back: with these two rules the chip's scalar copy, fill and
  strlen loops come out within 12 % of their measured 3, 2 and 2.3 cycles a byte).
- **The vector unit.** A vector instruction takes an issue slot, then runs in the vector unit, one after another,
  each occupying it for its measured cycles (the cost table by mnemonic, SEW, LMUL and mask: ``vle32.v`` e32m8
  16.5); it starts when the unit is free and its vector sources are ready. At most VECTOR_QUEUE vector
  instructions wait issued but not started: a fuller queue stalls issue. A scalar result of a vector instruction
  (``vmv.x.s``, ``vcpop.m``) is ready when the instruction ends. A multiply-accumulate waits for its own
  accumulator only until the instruction producing it ends (accumulator forwarding: rvv-bench measured
  ``vfmacc.vf`` into one accumulator at its throughput, 1/2/4/8 cycles at m1..m8).
- **Steady state.** A block is priced by running it back to back with its registers carried over (as a loop body
  runs) until its cycles per repetition settle (STEADY_WINDOW, MAX_REPEATS), so a loop-carried chain (an FMA
  accumulator, a reduction) binds at its latency and independent work overlaps. Settled means both the issue of
  each repetition and the vector unit's progress advance alike over two windows, and the pace is the slower of
  the two: while the vector queue fills, issue runs ahead of a busier vector unit at a pace that looks steady
  (memset at e8m4: a trip issued every 6 cycles for 12 trips while the store keeps the unit busy 8.91 a trip;
  model version 1 priced it at 6). Blocks are priced alone: overlap across different blocks is not modelled.
- **What is not here.** Branch mispredictions and taken-branch bubbles, memory dependences, cache misses (added per
  launch by model.py from the cache model's counters), the doubled register groups of widening forms.

Nothing here knows pytest.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

ISSUE_WIDTH = 2
#: Units per instruction class (LLVM's SpacemiT-X60 model: SMX60_IEU 2, SMX60_LS 2, SMX60_FP 1; branches and
#: vsetvl on SMX60_IEUA, multiply/divide on SMX60_IEUB: one each).
UNITS = {"alu": 2, "mem": 2, "branch": 1, "fp": 1, "muldiv": 1, "vset": 1, "vector": ISSUE_WIDTH}
#: Vector instructions that may wait issued but not started before issue stalls.
VECTOR_QUEUE = 4
#: A scalar result's latency when the table gives none (a simple ALU operation).
DEFAULT_SCALAR_LATENCY = 1.0
#: A block runs back to back until two successive windows of STEADY_WINDOW repetitions take the same cycles (a
#: steady state: the vector queue filled, a chain settled), at most MAX_REPEATS times.
STEADY_WINDOW = 4
MAX_REPEATS = 64


@dataclass(frozen=True, slots=True)
class PricedInsn:
    """One instruction with its costs: ``cycles`` of throughput (of its class, or of the vector unit), the latency
    of its result, the registers it waits for (``reads``) and writes, and its unit class (UNITS)."""

    unit: str
    cycles: float
    latency: float
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    stand_in: bool = False
    accumulator: tuple[str, ...] = ()  # vector reads forwarded from a multiply-accumulate into the same register

    @property
    def vector(self) -> bool:
        return self.unit == "vector"


@dataclass(frozen=True)
class BlockCycles:
    cycles: float          # one execution in steady state
    vector_cycles: float   # vector unit busy cycles of one execution
    scalar_cycles: float   # scalar throughput cycles of one execution (the table's, summed)
    standin_cycles: float  # busy cycles priced by a stand-in


class _Core:
    """The state one block's repetitions carry: issue group, units, register readiness, vector unit."""

    def __init__(self) -> None:
        self.group_time = 0.0
        self.group_size = 0
        self.unit_free: dict[str, list[float]] = {u: [0.0] * n for u, n in UNITS.items()}
        self.ready: dict[str, float] = {}
        self.done: dict[str, float] = {}  # when a vector register's producer ends (accumulator forwarding)
        self.vector_free = 0.0
        self.waiting: deque[float] = deque()  # start times of the last VECTOR_QUEUE vector instructions

    def run(self, insn: PricedInsn) -> float:
        """Issue ``insn``; returns its issue time."""
        t = self.group_time
        for reg in insn.reads:
            if not reg.startswith("v"):
                t = max(t, self.ready.get(reg, 0.0))
        units = self.unit_free[insn.unit]
        unit = min(range(len(units)), key=units.__getitem__)
        t = max(t, units[unit])
        if insn.vector and len(self.waiting) == VECTOR_QUEUE:
            t = max(t, self.waiting.popleft())
        if t > self.group_time:
            self.group_time, self.group_size = t, 1
        elif self.group_size < ISSUE_WIDTH:
            self.group_size += 1
        else:
            self.group_time, self.group_size = t + 1.0, 1
            t += 1.0
        if insn.vector:
            start = max(t, self.vector_free)
            for reg in insn.reads:
                if reg in insn.accumulator:  # accumulator forwarding: wait for the producer's end only
                    start = max(start, self.done.get(reg, 0.0))
                elif reg.startswith("v"):
                    start = max(start, self.ready.get(reg, 0.0))
            self.vector_free = start + insn.cycles
            self.waiting.append(start)
            units[unit] = t + 1.0  # a vector instruction takes one issue slot
            done = start + insn.latency
            for reg in insn.writes:
                # a scalar destination (vmv.x.s) is ready when the instruction ends
                self.ready[reg] = done if reg.startswith("v") else max(done, start + insn.cycles)
                self.done[reg] = start + insn.cycles
        else:
            units[unit] = t + insn.cycles * UNITS[insn.unit]
            for reg in insn.writes:
                self.ready[reg] = t + insn.latency
        return t


def block_cycles(insns: tuple[PricedInsn, ...]) -> BlockCycles:
    vector_busy = sum(i.cycles for i in insns if i.vector)
    scalar_busy = sum(i.cycles for i in insns if not i.vector)
    standin = sum(i.cycles for i in insns if i.stand_in)
    if not insns:
        return BlockCycles(0.0, 0.0, 0.0, 0.0)
    core = _Core()
    starts: list[float] = []  # issue time of each repetition's first instruction
    drained: list[float] = []  # when the vector unit is free after each repetition
    window = STEADY_WINDOW
    cycles = 0.0
    for repetition in range(MAX_REPEATS + 1):
        starts.append(core.run(insns[0]))
        for insn in insns[1:]:
            core.run(insn)
        drained.append(core.vector_free)
        if repetition >= 2 * window:
            # Steady only when issue AND the vector unit advance alike over two windows: while the vector queue
            # fills, issue runs ahead of a busier vector unit at a steady-looking pace (memset e8m4: issue every
            # 6 cycles for 12 repetitions, the unit busy 8.91 a repetition), so the pace is the slower of the two.
            paces = []
            for times in (starts, drained):
                last = times[-1] - times[-1 - window]
                before = times[-1 - window] - times[-1 - 2 * window]
                paces.append((last, abs(last - before) < 1e-9 * max(1.0, last)))
            cycles = max(last for last, _ in paces) / window
            if all(steady for _, steady in paces):
                break  # the same cycles over the last two windows: steady
    return BlockCycles(cycles, vector_busy, scalar_busy, standin)
