"""``x60_cycles``: what a launch window would cost on a SpacemiT X60 core (K1), from what QEMU executed.

Inputs: the QEMU plugin's ``blocks=`` file (every block executed inside the launches, how often, on which guest
thread: blocks.py), the ELF (its instructions and each vector instruction's SEW/LMUL by a dataflow over its
control flow: code.py, vtype.py), the chip's measured costs (costs.py: rvv-bench's X60 cycles per instruction
by mnemonic x SEW x LMUL x mask, LLVM's X60 latencies) and, when the plugin ran its cache model, its counts.

The model, each part an assumption written down:

1. **Per run of blocks** (pipeline.py, runs_of_blocks): the cycles of one execution in steady state on an in-order
   dual-issue core with a vector unit beside the scalar pipe, times its executions. A run is a block and the
   blocks it falls through into (QEMU ends a block after every vsetvl*, so a strip-mined loop body is several
   blocks; priced apart, the chain through its vsetvli would be lost). Overlap between runs is not modelled.
2. **Per hart**: each guest thread's blocks (the plugin's per-thread counts, ``h=``); the launch takes as long as
   its slowest hart (the launcher joins its workers). No cost is added for starting threads beyond the
   instructions they execute.
3. **Memory**: the plugin's K1 cache model (32 KiB L1D, 512 KiB L2, 64 B lines, one shared cache for all harts)
   counts the lines that miss L2; they come from DRAM at DRAM_BYTES_PER_CYCLE (the K1's LPDDR4X, 10.66 GB/s
   theoretical, at 1.6 GHz: 6.66 B/cycle, shared by all harts). The launch is bounded below by that transfer time:
   ``x60_memory_stall_cycles`` = max(0, DRAM time - slowest hart's core cycles), i.e. latency is assumed hidden
   and only bandwidth binds. Misses that hit L2 cost nothing extra (the per-instruction table was measured with
   data in L1, and no L2 latency or bandwidth of the K1 is published). Without the cache model's counters the
   memory part is 0.

Counters returned (whole launch windows: the caller divides by the launches):
``x60_cycles`` (slowest hart + memory stall), ``x60_vector_cycles`` / ``x60_scalar_cycles`` (the slowest hart's
vector-unit busy cycles and its scalar instructions' table cycles: they overlap, so they need not add up to
x60_cycles),
``x60_memory_stall_cycles``, ``x60_standin_share`` (share of the busy cycles priced by a stand-in: an instruction
or vtype the table lacks, a vector instruction whose vtype the dataflow could not tell), ``x60_harts`` (guest
threads that executed inside the launches, the launching thread included). Nothing here knows pytest.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pytest_rvtune.counters import UNDIVIDED_COUNTERS, X60_CYCLES, X60_KEYS
from pytest_rvtune.x60.blocks import ExecutedBlock, read_blocks
from pytest_rvtune.x60.code import CODE_VERSION, ElfCode, elf_code
from pytest_rvtune.x60.costs import DATA_FILE, load_costs
from pytest_rvtune.x60.insn import Insn, VType
from pytest_rvtune.x60.isa import vector_class
from pytest_rvtune.x60.operands import issue_reads, register_use, scalar_unit
from pytest_rvtune.x60.pipeline import (
    DEFAULT_SCALAR_LATENCY,
    BlockCycles,
    PricedInsn,
    block_cycles,
)
from pytest_rvtune.x60.vtype import whole_register_vtype

#: Bump when what the model computes changes: part of the count cache's key (targets/local.py).
MODEL_VERSION = 2

X60_HZ = 1.6e9
DRAM_BYTES_PER_S = 10.66e9
DRAM_BYTES_PER_CYCLE = DRAM_BYTES_PER_S / X60_HZ
LINE_BYTES = 64

#: Cycles from a vsetvli/vsetivli to the use of its result (the new vl) by a scalar instruction. LLVM's X60 model
#: states none; fitted to the chip: a strip-mined loop (vsetvli t0, a2 -> sub a2, a2, t0 -> vsetvli) runs no faster
#: than 6.1-6.2 cycles per trip whatever it stores (rvv-bench memset rvv_m1 and rvv_m2 on the X60).
VSETVL_LATENCY = 5.0
#: A vector floating-point result's latency floor where the table states none (LLVM's X60 model states one for
#: nearly every form since llvm-project afdc8ee's figures were taken in: vfadd/vfmul 4, vfmacc 5 at e32m1). Fitted
#: to the chip's mandelbrot when the table had none (chains of vfmul, vfadd, vfsub: 5 brought rvv_f32_m1/m2 and
#: rvv_f64_m2 to 0.95-1.05x), as the scalar FP latency of the same model (4-5 cycles).
VECTOR_FP_LATENCY = 5.0

#: The vtype a vector instruction is priced at when the dataflow could not tell (counted as a stand-in).
UNKNOWN_VTYPE: VType = (32, "m1")
#: Cycles of an instruction the ELF does not hold (code QEMU made, e.g. a signal trampoline): a scalar stand-in.
UNKNOWN_INSN_CYCLES = 0.5

#: The counters x60_counters returns (counters.py names them for the rest of the package), and those that describe
#: the launch rather than add up over launches (never divided per launch).
X60_COUNTERS = X60_KEYS
X60_RATIO_COUNTERS = UNDIVIDED_COUNTERS


@functools.cache
def identity() -> dict[str, str]:
    """What decides the model's output besides its inputs (for the count cache's key): this model's version, the
    cost table's content, and the model's own code (x60/*.py: a changed rule or figure is a new model even if
    MODEL_VERSION was not bumped)."""
    package = resources.files("pytest_rvtune.x60")
    costs = hashlib.sha256(package.joinpath(DATA_FILE).read_bytes())
    source = hashlib.sha256()
    for name in sorted(p.name for p in package.iterdir() if p.name.endswith(".py")):
        source.update(name.encode() + b"\0" + package.joinpath(name).read_bytes())
    return {"x60_model": str(MODEL_VERSION), "x60_code": str(CODE_VERSION), "x60_costs": costs.hexdigest()[:16],
            "x60_source": source.hexdigest()[:16]}



def _masked(insn: Insn) -> bool:
    return insn.operands.rstrip().endswith("v0.t")


def price(insn: Insn, vtype: VType | None) -> PricedInsn:
    """One instruction with its table costs, unit and registers."""
    table = load_costs()
    if insn.is_vset:  # LLVM's model: an integer pipe; the vtype does not change its cost
        cost = table.vector(insn.mnemonic, sew=UNKNOWN_VTYPE[0], lmul=UNKNOWN_VTYPE[1], masked=False)
        use = register_use(insn.mnemonic, insn.operands)
        return PricedInsn("vset", cost.cycles, VSETVL_LATENCY, use.reads, use.writes,
                          stand_in=cost.stand_in is not None)
    if insn.is_vector:
        vtype = whole_register_vtype(insn.mnemonic) or vtype
        sew, lmul = vtype or UNKNOWN_VTYPE
        cost = table.vector(insn.mnemonic, sew=sew, lmul=lmul, masked=_masked(insn))
        use = register_use(insn.mnemonic, insn.operands, lmul)
        latency = cost.latency
        if latency is None:
            floor = VECTOR_FP_LATENCY if vector_class(insn.mnemonic) == "farith" else 0.0
            latency = max(cost.cycles, floor)
        return PricedInsn("vector", cost.cycles, latency, use.reads, use.writes,
                          stand_in=cost.stand_in is not None or vtype is None, accumulator=use.accumulator)
    cost = table.scalar(insn.mnemonic)
    use = register_use(insn.mnemonic, insn.operands)
    latency = cost.latency if cost.latency is not None else max(DEFAULT_SCALAR_LATENCY, cost.cycles)
    return PricedInsn(scalar_unit(insn.mnemonic), cost.cycles, latency, issue_reads(insn.mnemonic, use), use.writes,
                      stand_in=cost.stand_in is not None)


_UNKNOWN_INSN = PricedInsn("alu", UNKNOWN_INSN_CYCLES, DEFAULT_SCALAR_LATENCY, (), (), stand_in=True)


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


def _addresses(blocks: list[ExecutedBlock]) -> set[int]:
    addresses = set()
    for block in blocks:
        addr = block.vaddr
        for raw in block.insns:
            addresses.add(addr)
            addr += len(raw)
    return addresses


def _falls_through(block: ExecutedBlock, code: ElfCode) -> bool:
    """Whether the block ended without a control transfer (QEMU ended it after a vsetvl*, or at its size limit):
    it then always continues at the next address."""
    last = block.vaddr + sum(len(raw) for raw in block.insns[:-1])
    insn = code.insns.get(last)
    return insn is not None and scalar_unit(insn.mnemonic) != "branch" and insn.mnemonic != "ecall"


@dataclass(frozen=True)
class PricedRun:
    """Blocks priced together, and how often the run executed on each hart."""

    first: int  # address of its first block
    per_hart: tuple[int, ...]
    insns: tuple[PricedInsn, ...]


def runs_of_blocks(blocks: list[ExecutedBlock], code: ElfCode) -> list[PricedRun]:
    """The blocks as the model prices them: straight runs through the blocks that fall through into the next.

    QEMU ends a block at every vsetvl*, so a strip-mined loop's body (``vsetvli t0, a2`` / loads, stores,
    ``sub a2, a2, t0``, branch back) is two or more blocks; priced apart, the loop-carried chain through the
    vsetvli would be lost. A block that falls through (ends without a control transfer) always continues at the
    next address, so each of its executions is priced as a run with its successor's (and on, while they fall
    through); a block's executions that no predecessor fell into (its residual count) start a run of their own.
    Every execution of every block is priced exactly once."""
    by_address = {b.vaddr: b for b in blocks}
    successor: dict[int, ExecutedBlock] = {}
    residual: dict[int, list[int]] = {b.vaddr: list(b.per_hart) for b in blocks}
    for block in blocks:
        nxt = by_address.get(block.vaddr + sum(len(raw) for raw in block.insns))
        if nxt is not None and _falls_through(block, code):
            successor[block.vaddr] = nxt
            left = residual[nxt.vaddr]
            for hart, n in enumerate(block.per_hart):
                if hart < len(left):
                    left[hart] = max(0, left[hart] - n)
    runs = []
    for block in blocks:
        per_hart = tuple(residual[block.vaddr])
        if not any(per_hart):
            continue
        insns = list(_block_insns(block, code))
        current = block
        while current.vaddr in successor:
            current = successor[current.vaddr]
            insns += _block_insns(current, code)
        runs.append(PricedRun(block.vaddr, per_hart, tuple(insns)))
    return runs


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


def x60_counters(blocks: Path | Sequence[ExecutedBlock], elf: Path, *,
                 cache: Mapping[str, float] | None = None) -> dict[str, float]:
    """The X60 model's counters for the launch windows of one run (see the module docstring).

    ``blocks``: the plugin's blocks file, or its blocks when the caller read them already; ``elf``: the static
    ELF that ran; ``cache``: the plugin's cache-model counters (``l1d_accesses``, ``l1d_misses``, ``l2_misses``)
    when it ran them. Raises BlocksFileError or CodeError (naming the file) for a missing or malformed input."""
    executed = read_blocks(blocks) if isinstance(blocks, Path) else list(blocks)
    code = elf_code(elf, _addresses(executed))
    harts: list[_Hart] = []
    for run in runs_of_blocks(executed, code):
        cost = _cycles_of(run.insns)
        while len(harts) < len(run.per_hart):
            harts.append(_Hart())
        for hart, n in zip(harts, run.per_hart, strict=False):
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
