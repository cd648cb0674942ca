"""``x60_cycles``: what a launch window would cost on a SpacemiT X60 core (K1), from what QEMU executed.

Inputs: the QEMU plugin's ``blocks=`` file (every block executed inside the launches, how often, on which guest
thread: blocks.py), the ELF (its instructions and each vector instruction's SEW/LMUL by a dataflow over its
control flow: code.py, vtype.py), the chip's measured costs (costs.py: rvv-bench's X60 cycles per instruction
by mnemonic x SEW x LMUL x mask, LLVM's X60 latencies) and, when the plugin ran its cache model, its counts.

The model, each part an assumption written down:

1. **Per block** (pipeline.py): the cycles of one execution in steady state on an in-order dual-issue core with a
   vector unit beside the scalar pipe; times the block's executions.
2. **Per hart**: each guest thread's blocks (the plugin's per-vCPU counts); the launch takes as long as its
   slowest hart (the launcher joins its workers). No cost is added for starting threads beyond the instructions
   they execute.
3. **Memory**: the plugin's K1 cache model (32 KiB L1D, 512 KiB L2, 64 B lines, one shared cache for all harts)
   counts the lines that miss L2; they come from DRAM at DRAM_BYTES_PER_CYCLE (the K1's LPDDR4X, 10.66 GB/s
   theoretical, at 1.6 GHz: 6.66 B/cycle, shared by all harts). The launch is bounded below by that transfer time:
   ``x60_memory_stall_cycles`` = max(0, DRAM time - slowest hart's core cycles), i.e. latency is assumed hidden
   and only bandwidth binds. Misses that hit L2 cost nothing extra (the per-instruction table was measured with
   data in L1, and no L2 latency or bandwidth of the K1 is published). Without the cache model's counters the
   memory part is 0.

Counters returned (whole launch windows: the caller divides by the launches):
``x60_cycles`` (slowest hart + memory stall), ``x60_vector_cycles`` / ``x60_scalar_cycles`` (the slowest hart's
vector-unit and front-end busy cycles: they overlap, so they need not add up to x60_cycles),
``x60_memory_stall_cycles``, ``x60_standin_share`` (share of the busy cycles priced by a stand-in: an instruction
or vtype the table lacks, a vector instruction whose vtype the dataflow could not tell), ``x60_harts`` (guest
threads that executed inside the launches). Nothing here knows pytest.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvtune.x60.blocks import ExecutedBlock, read_blocks
from pytest_rvtune.x60.code import CODE_VERSION, ElfCode, elf_code
from pytest_rvtune.x60.insn import Insn, VType
from pytest_rvtune.x60.operands import register_use
from pytest_rvtune.x60.pipeline import (
    DEFAULT_SCALAR_LATENCY,
    BlockCycles,
    PricedInsn,
    block_cycles,
)
from pytest_rvtune.x60.vtype import whole_register_vtype

#: Bump when what the model computes changes: part of the count cache's key (targets/local.py).
MODEL_VERSION = 1

X60_HZ = 1.6e9
DRAM_BYTES_PER_S = 10.66e9
DRAM_BYTES_PER_CYCLE = DRAM_BYTES_PER_S / X60_HZ
LINE_BYTES = 64

#: The vtype a vector instruction is priced at when the dataflow could not tell (counted as a stand-in).
UNKNOWN_VTYPE: VType = (32, "m1")
#: Cycles of an instruction the ELF does not hold (code QEMU made, e.g. a signal trampoline): a scalar stand-in.
UNKNOWN_INSN_CYCLES = 0.5

X60_CYCLES = "x60_cycles"
X60_COUNTERS = (X60_CYCLES, "x60_vector_cycles", "x60_scalar_cycles", "x60_memory_stall_cycles",
                "x60_standin_share", "x60_harts")
#: Counters that describe the launch rather than add up over launches: never divided per launch.
X60_RATIO_COUNTERS = ("x60_standin_share", "x60_harts")


@functools.cache
def identity() -> dict[str, str]:
    """What decides the model's output besides its inputs (for the count cache's key): this model's version and
    the cost table's content."""
    digest = hashlib.sha256()
    for path in sorted(Path(_costs_module().__file__).parent.glob("*.json")):
        digest.update(path.read_bytes())
    return {"x60_model": str(MODEL_VERSION), "x60_code": str(CODE_VERSION), "x60_costs": digest.hexdigest()[:16]}


def _costs_module() -> Any:
    # costs.py (the chip's table) is built beside this model; imported by name until both are on main
    return importlib.import_module("pytest_rvtune.x60.costs")


@functools.cache
def _costs() -> Any:
    return _costs_module().load_costs()


def _masked(insn: Insn) -> bool:
    return insn.operands.rstrip().endswith("v0.t")


def price(insn: Insn, vtype: VType | None) -> PricedInsn:
    """One instruction with its table costs and registers."""
    table = _costs()
    if insn.is_vector:
        vtype = whole_register_vtype(insn.mnemonic) or vtype
        sew, lmul = vtype or UNKNOWN_VTYPE
        cost = table.vector(insn.mnemonic, sew=sew, lmul=lmul, masked=_masked(insn))
        use = register_use(insn.mnemonic, insn.operands, lmul)
        latency = cost.latency if cost.latency is not None else cost.cycles
        return PricedInsn(True, cost.cycles, latency, use.reads, use.writes,
                          stand_in=cost.stand_in is not None or vtype is None)
    cost = table.scalar(insn.mnemonic)
    use = register_use(insn.mnemonic, insn.operands)
    latency = cost.latency if cost.latency is not None else max(DEFAULT_SCALAR_LATENCY, cost.cycles)
    return PricedInsn(False, cost.cycles, latency, use.reads, use.writes, stand_in=cost.stand_in is not None)


_UNKNOWN_INSN = PricedInsn(False, UNKNOWN_INSN_CYCLES, DEFAULT_SCALAR_LATENCY, (), (), stand_in=True)


def _block_insns(block: ExecutedBlock, code: ElfCode) -> tuple[PricedInsn, ...]:
    priced = []
    addr = block.vaddr
    for raw in block.insns:
        insn = code.insns.get(addr)
        if insn is None or insn.size != len(raw):
            priced.append(_UNKNOWN_INSN)
        else:
            priced.append(price(insn, code.vtypes.get(addr)))
        addr += len(raw)
    return tuple(priced)


_block_memo: dict[tuple[PricedInsn, ...], BlockCycles] = {}


def _cycles_of(insns: tuple[PricedInsn, ...]) -> BlockCycles:
    if insns not in _block_memo:
        _block_memo[insns] = block_cycles(insns)
    return _block_memo[insns]


@dataclass
class _Hart:
    cycles: float = 0.0
    vector: float = 0.0
    scalar: float = 0.0
    standin: float = 0.0


def x60_counters(blocks: Path, elf: Path, *, cache: Mapping[str, float] | None = None) -> dict[str, float]:
    """The X60 model's counters for the launch windows of one run (see the module docstring).

    ``blocks``: the plugin's blocks file; ``elf``: the static ELF that ran; ``cache``: the plugin's cache-model
    counters (``l1d_accesses``, ``l1d_misses``, ``l2_misses``) when it ran them. Raises BlocksFileError or
    CodeError (naming the file) for a missing or malformed input."""
    code = elf_code(elf)
    harts: list[_Hart] = []
    for block in read_blocks(blocks):
        cost = _cycles_of(_block_insns(block, code))
        while len(harts) < len(block.per_hart):
            harts.append(_Hart())
        for hart, n in zip(harts, block.per_hart, strict=False):
            if n:
                hart.cycles += cost.cycles * n
                hart.vector += cost.vector_cycles * n
                hart.scalar += cost.scalar_cycles * n
                hart.standin += cost.standin_cycles * n
    active = [h for h in harts if h.cycles > 0]
    slowest = max(active, key=lambda h: h.cycles, default=_Hart())
    dram_cycles = (cache or {}).get("l2_misses", 0.0) * LINE_BYTES / DRAM_BYTES_PER_CYCLE
    stall = max(0.0, dram_cycles - slowest.cycles)
    busy = sum(h.vector + h.scalar for h in active)
    return {
        X60_CYCLES: slowest.cycles + stall,
        "x60_vector_cycles": slowest.vector,
        "x60_scalar_cycles": slowest.scalar,
        "x60_memory_stall_cycles": stall,
        "x60_standin_share": sum(h.standin for h in active) / busy if busy else 0.0,
        "x60_harts": float(len(active)),
    }
