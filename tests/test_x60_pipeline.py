"""The X60 model's parts that need no chip table: the plugin's blocks file (per-hart counts) and the in-order
pipeline's steady state (x60/pipeline.py) on instructions whose costs the test gives."""

from __future__ import annotations

import pytest

from pytest_rvtune.x60.blocks import BlocksFileError, parse_blocks
from pytest_rvtune.x60.operands import issue_reads, register_use, scalar_unit
from pytest_rvtune.x60.pipeline import VECTOR_QUEUE, PricedInsn, block_cycles


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


def insn(text: str, cycles: float, latency: float, vector: bool = False, lmul: str = "m1") -> PricedInsn:
    mnemonic, _, operands = text.partition(" ")
    use = register_use(mnemonic, operands, lmul if vector else None)
    if vector:
        return PricedInsn("vector", cycles, latency, use.reads, use.writes, accumulator=use.accumulator)
    return PricedInsn(scalar_unit(mnemonic), cycles, latency, issue_reads(mnemonic, use), use.writes)


def test_alu_instructions_issue_at_the_tables_throughput():
    adds = tuple(insn(f"addi a{i}, a{i}, 1", 0.5, 1) for i in range(6))
    assert block_cycles(adds).cycles == pytest.approx(3.0)  # two ALUs, two a cycle
    slower = tuple(insn(f"addi a{i}, a{i}, 1", 0.62, 1) for i in range(6))
    assert block_cycles(slower).cycles == pytest.approx(6 * 0.62)


def test_two_a_cycle_from_different_units_and_a_branch_waits_for_nothing():
    # the chip's scalar fill loop: sb / addi, then mv / bnez: 2 cycles a trip (rvv-bench memset scalar: 0.5 B/cycle)
    fill = (insn("sb a1, 0x0(a0)", 0.5, 1), insn("addi a3, a0, 0x1", 0.62, 1), insn("mv a0, a3", 0.62, 1),
            insn("bne a3, a2, 0x100", 1.0, 1))
    assert block_cycles(fill).cycles == pytest.approx(2.0)


def test_a_store_does_not_wait_for_its_data_but_a_dependence_chain_binds():
    copy = (insn("lbu a3, 0x0(a1)", 0.5, 4), insn("sb a3, 0x0(a0)", 0.5, 1), insn("addi a1, a1, 0x1", 0.62, 1),
            insn("addi a3, a0, 0x1", 0.62, 1), insn("mv a0, a3", 0.62, 1), insn("bne a3, a2, 0x100", 1.0, 1))
    assert block_cycles(copy).cycles == pytest.approx(3.24)  # 3 ALU ops at 1.24 on 2 ALUs; the chip: 3.0
    chain = (insn("fadd.s fa0, fa0, fa1", 1.0, 4), insn("fadd.s fa0, fa0, fa1", 1.0, 4))
    assert block_cycles(chain).cycles == pytest.approx(8.0)


def test_independent_vector_instructions_cost_their_table_cycles_and_hide_scalar_work():
    body = (insn("vle32.v v8, (a0)", 16.5, 16.5, True, "m8"), insn("vse32.v v8, (a1)", 19.7, 19.7, True, "m8"),
            insn("addi a0, a0, 256", 0.62, 1), insn("addi a1, a1, 256", 0.62, 1), insn("bnez a2, 0x100", 1, 1))
    result = block_cycles(body)
    assert result.cycles == pytest.approx(16.5 + 19.7)
    assert result.vector_cycles == pytest.approx(36.2)
    assert result.scalar_cycles == pytest.approx(2.24)


def test_a_vector_dependence_binds_at_its_latency_an_accumulator_at_its_throughput():
    chain = insn("vfadd.vv v8, v8, v16", 1, 5, True)
    assert block_cycles((chain,)).cycles == pytest.approx(5.0)
    fma = insn("vfmacc.vf v8, fa0, v16", 8, 16, True, "m8")
    assert block_cycles((fma,)).cycles == pytest.approx(8.0)  # the chip: vfmacc.vf e32m8 into one register, 8


def test_a_full_vector_queue_stalls_issue():
    # more vector instructions than the queue holds, then scalar work: the scalar work waits for queue room
    vectors = tuple(insn(f"vadd.vv v{8 + i}, v1, v2", 4, 4, True) for i in range(VECTOR_QUEUE + 2))
    scalar = tuple(insn(f"addi a{i % 8}, a{i % 8}, 1", 0.5, 1) for i in range(60))  # 30 cycles of issue
    alone = block_cycles(vectors).cycles
    together = block_cycles(vectors + scalar).cycles
    assert alone == pytest.approx(4 * (VECTOR_QUEUE + 2))
    # the last two vector instructions wait for queue room (until 4 cycles in), then the scalar work issues
    assert together == pytest.approx(4 + 30)


def test_a_loop_whose_vector_unit_falls_behind_issue_is_priced_at_the_units_pace():
    # the chip's memset at e8m4: the scalar chain vsetvli -> sub -> vsetvli issues a trip every 5 + 1 = 6 cycles,
    # the store keeps the vector unit busy 8.91 a trip; issue runs ahead until the vector queue is full (12 trips
    # in), which looks steady before it is: the loop's pace is the unit's
    fill = (insn("vsetvli t0, a2, e8, m4, ta, ma", 1.0, 5), insn("vse8.v v8, (a0)", 8.91, 8, True, "m4"),
            insn("sub a2, a2, t0", 0.62, 1), insn("add a0, a0, t0", 0.62, 1), insn("bnez a2, 0x100", 1.0, 1))
    assert block_cycles(fill).cycles == pytest.approx(8.91)
    narrow = (fill[0], insn("vse8.v v8, (a0)", 3.08, 3, True), *fill[2:])  # e8m1: the chain binds, not the unit
    assert block_cycles(narrow).cycles == pytest.approx(6.0)
