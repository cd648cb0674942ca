"""The X60 model's parts that need no chip table: the plugin's blocks file (per-hart counts) and the in-order
pipeline's steady state (x60/pipeline.py) on instructions whose costs the test gives."""

from __future__ import annotations

import pytest

from pytest_rvtune.x60.blocks import BlocksFileError, parse_blocks
from pytest_rvtune.x60.operands import register_use
from pytest_rvtune.x60.pipeline import VECTOR_ISSUE_CYCLES, VECTOR_QUEUE, PricedInsn, block_cycles


def test_blocks_file_with_and_without_per_hart_counts():
    one, two = parse_blocks("1067e 3 6350a008\n10682 7 8142:b7070040 h=4,0,3\n")
    assert (one.vaddr, one.count, one.insns, one.per_hart) == (0x1067E, 3, (bytes.fromhex("6350a008"),), (3,))
    assert two.per_hart == (4, 0, 3) and len(two.insns) == 2


@pytest.mark.parametrize("line, says", [
    ("10682 7 8142 h=4,2", "do not sum"),
    ("10682 7", "expected"),
    ("10682 x 8142", "invalid literal"),
    ("10682 7 8142 k=1", "expected"),
])
def test_blocks_file_errors_name_the_line(line: str, says: str):
    with pytest.raises(BlocksFileError, match=rf"run\.blocks:2: .*{says}"):
        parse_blocks(f"1 1 13\n{line}\n", "run.blocks")


def insn(text: str, cycles: float, latency: float, vector: bool, lmul: str = "m1") -> PricedInsn:
    mnemonic, _, operands = text.partition(" ")
    use = register_use(mnemonic, operands, lmul if vector else None)
    return PricedInsn(vector, cycles, latency, use.reads, use.writes)


def test_scalar_instructions_issue_two_a_cycle():
    adds = tuple(insn(f"addi a{i}, a{i}, 1", 0.5, 1, False) for i in range(6))
    assert block_cycles(adds).cycles == pytest.approx(3.0)


def test_a_dependence_chain_binds_at_its_latency():
    chain = (insn("fadd.s fa0, fa0, fa1", 0.5, 4, False), insn("fadd.s fa0, fa0, fa1", 0.5, 4, False))
    assert block_cycles(chain).cycles == pytest.approx(8.0)


def test_independent_vector_instructions_cost_their_table_cycles_and_hide_scalar_work():
    body = (insn("vle32.v v8, (a0)", 16.5, 16.5, True, "m8"), insn("vse32.v v8, (a1)", 19.7, 19.7, True, "m8"),
            insn("addi a0, a0, 256", 0.5, 1, False), insn("addi a1, a1, 256", 0.5, 1, False),
            insn("bnez a2, 0x100", 0.5, 1, False))
    result = block_cycles(body)
    assert result.cycles == pytest.approx(16.5 + 19.7)
    assert result.vector_cycles == pytest.approx(36.2)
    assert result.scalar_cycles == pytest.approx(2 * VECTOR_ISSUE_CYCLES + 1.5)


def test_a_vector_accumulator_carried_across_iterations_binds_at_its_latency():
    # vfmacc.vf at e32m8: 8 cycles of the unit, its result 12 cycles later: one chain -> 12 per iteration
    fma = insn("vfmacc.vf v8, fa0, v16", 8, 12, True, "m8")
    assert block_cycles((fma,)).cycles == pytest.approx(12.0)
    # two independent accumulators fill the unit: 16 cycles of work per iteration, the latency hidden
    two = (fma, insn("vfmacc.vf v24, fa0, v16", 8, 12, True, "m8"))
    assert block_cycles(two).cycles == pytest.approx(16.0)


def test_a_full_vector_queue_stalls_the_scalar_pipe():
    # more vector instructions than the queue holds, then scalar work: the scalar work waits for queue room
    vectors = tuple(insn(f"vadd.vv v{8 + i}, v1, v2", 4, 4, True) for i in range(VECTOR_QUEUE + 2))
    scalar = tuple(insn(f"addi a{i % 8}, a{i % 8}, 1", 0.5, 1, False) for i in range(40))
    alone = block_cycles(vectors).cycles
    together = block_cycles(vectors + scalar).cycles
    assert alone == pytest.approx(4 * (VECTOR_QUEUE + 2))
    assert alone < together < alone + 20  # partly hidden behind the vector unit, not wholly
