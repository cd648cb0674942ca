"""The X60 core as the model sees it: cycles of one execution of a basic block, in steady state.

The core (SpacemiT X60, K1): in order, dual issue, a vector unit (VLEN 256, DLEN 128) beside the scalar pipe.
What this module assumes, each one a figure or a rule a reader can check:

- **Scalar issue.** Instructions leave the front end in program order. A scalar instruction occupies it for its
  measured reciprocal throughput (the cost table: ``add`` 0.5 cycle, i.e. two per cycle); a vector instruction
  for VECTOR_ISSUE_CYCLES (it takes an issue slot, then waits in the vector queue).
- **Dependences.** An instruction issues when its source registers are ready: a result is ready ``latency``
  cycles after its producer started (the table's latency, from LLVM's SpacemiT-X60 scheduling model; where it has
  none, the instruction's own cycles for a vector instruction and DEFAULT_SCALAR_LATENCY for a scalar one). In
  order: a stalled instruction stalls everything after it.
- **The vector unit.** Vector instructions run one after another, each occupying the unit for its measured cycles
  (the cost table by mnemonic, SEW, LMUL and mask: ``vle32.v`` e32m8 16.5); one starts when the unit is free and
  its vector sources are ready. At most VECTOR_QUEUE vector instructions wait issued but not started: a fuller
  queue stalls the front end (so a loop costs max(vector, scalar) only as far as the queue lets them overlap).
  ``vsetvl*`` runs in the scalar pipe at its table cost.
- **Steady state.** A block is priced by running it REPEATS times back to back with its registers carried over
  (as a loop body runs) and taking the cycles of the later half per repetition, so a loop-carried chain (an FMA
  accumulator, a reduction) binds at its latency and independent work overlaps. Blocks are priced alone: overlap
  across different blocks is not modelled.
- **What is not here.** Branch prediction and taken-branch bubbles, memory dependences, cache misses (added per
  launch by model.py from the cache model's counters), the doubled register groups of widening forms.

Nothing here knows pytest.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

#: Front-end cycles a vector instruction takes (an issue slot of the dual-issue front end).
VECTOR_ISSUE_CYCLES = 0.5
#: Vector instructions that may wait issued but not started before the front end stalls.
VECTOR_QUEUE = 4
#: A scalar result's latency when the table gives none (a simple ALU operation).
DEFAULT_SCALAR_LATENCY = 1.0
#: Back-to-back runs of a block; the later half is measured.
REPEATS = 8


@dataclass(frozen=True, slots=True)
class PricedInsn:
    """One instruction with its costs: ``cycles`` of the unit it occupies (front end or vector unit)."""

    vector: bool
    cycles: float
    latency: float
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    stand_in: bool = False


@dataclass(frozen=True)
class BlockCycles:
    cycles: float          # one execution in steady state
    vector_cycles: float   # vector unit busy cycles of one execution
    scalar_cycles: float   # front-end cycles of one execution (scalar instructions and vector issue slots)
    standin_cycles: float  # busy cycles priced by a stand-in


def block_cycles(insns: tuple[PricedInsn, ...]) -> BlockCycles:
    vector_busy = sum(i.cycles for i in insns if i.vector)
    scalar_busy = sum(VECTOR_ISSUE_CYCLES if i.vector else i.cycles for i in insns)
    standin = sum(i.cycles for i in insns if i.stand_in)
    if not insns:
        return BlockCycles(0.0, 0.0, 0.0, 0.0)
    front = 0.0
    vector_free = 0.0
    ready: dict[str, float] = {}
    waiting: deque[float] = deque()  # start times of the last VECTOR_QUEUE vector instructions
    finish: list[float] = []
    for _ in range(REPEATS):
        for insn in insns:
            issue = front
            for reg in insn.reads:
                if not reg.startswith("v"):
                    issue = max(issue, ready.get(reg, 0.0))
            if insn.vector:
                if len(waiting) == VECTOR_QUEUE:
                    issue = max(issue, waiting.popleft())
                start = max(issue, vector_free)
                for reg in insn.reads:
                    if reg.startswith("v"):
                        start = max(start, ready.get(reg, 0.0))
                vector_free = start + insn.cycles
                waiting.append(start)
                front = issue + VECTOR_ISSUE_CYCLES
            else:
                start = issue
                front = issue + insn.cycles
            for reg in insn.writes:
                ready[reg] = start + insn.latency
        finish.append(max(front, vector_free))
    half = REPEATS // 2
    cycles = (finish[-1] - finish[half - 1]) / (REPEATS - half)
    return BlockCycles(cycles, vector_busy, scalar_busy, standin)
