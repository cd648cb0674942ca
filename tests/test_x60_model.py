"""The X60 model on hand-written loops: real clang-19 assembly, run under real QEMU with our plugin, priced by the
packaged table. Each loop's cost per trip follows from the table by hand (the model's rules in x60/pipeline.py);
the test takes it as the difference of x60_cycles between two trip counts, so the code around the loop (entry,
exit, the first trip) cancels out."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_rvtune import paths
from pytest_rvtune.counters import parse_icount
from pytest_rvtune.targets.local import plugin_argument
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain, qemu_command
from pytest_rvtune.x60.costs import load_costs
from pytest_rvtune.x60.model import VECTOR_FP_LATENCY, x60_counters

# Each snippet is its own launcher `<name>_wrap(trips a0, data a1)`; main calls the one named on argv once.
SNIPPETS = r"""
#define FUNC(name) .globl name; .type name, @function; name:

/* a unit-stride load and an FP add at e32m8: the vector unit runs one after the other */
FUNC(load_add_m8_wrap)
    vsetvli t0, zero, e32, m8, ta, ma
1:  vle32.v v8, (a1)
    vfadd.vv v16, v8, v8
    addi a0, a0, -1
    bnez a0, 1b
    ret

/* the same bytes at e32m4: two loads and two adds a trip */
FUNC(load_add_m4_wrap)
    vsetvli t0, zero, e32, m4, ta, ma
1:  vle32.v v8, (a1)
    vfadd.vv v16, v8, v8
    vle32.v v12, (a1)
    vfadd.vv v20, v12, v12
    addi a0, a0, -1
    bnez a0, 1b
    ret

/* one accumulator: vfmacc forwards it, so a trip costs the instruction's throughput (at e32m4: more than the
   1.5 cycles the trip's three instructions take to issue two a cycle) */
FUNC(fmacc_chain_wrap)
    vsetvli t0, zero, e32, m4, ta, ma
1:  vfmacc.vv v8, v16, v24
    addi a0, a0, -1
    bnez a0, 1b
    ret

/* a dependent chain of FP adds at e32m1: a trip costs the vector FP latency (more than its issue, 1.5) */
FUNC(fadd_chain_wrap)
    vsetvli t0, zero, e32, m1, ta, ma
1:  vfadd.vv v8, v8, v16
    addi a0, a0, -1
    bnez a0, 1b
    ret

/* a scalar FP chain: four dependent fadd.s a trip */
FUNC(scalar_chain_wrap)
1:  fadd.s fa0, fa0, fa1
    fadd.s fa0, fa0, fa1
    fadd.s fa0, fa0, fa1
    fadd.s fa0, fa0, fa1
    addi a0, a0, -1
    bnez a0, 1b
    ret
"""

MAIN = r"""
#include <stdlib.h>
#include <string.h>
void load_add_m8_wrap(long, float *); void load_add_m4_wrap(long, float *); void fmacc_chain_wrap(long, float *);
void fadd_chain_wrap(long, float *); void scalar_chain_wrap(long, float *);
static float data[64];
int main(int argc, char **argv) {
    long trips = atol(argv[2]);
    if (!strcmp(argv[1], "load_add_m8")) load_add_m8_wrap(trips, data);
    else if (!strcmp(argv[1], "load_add_m4")) load_add_m4_wrap(trips, data);
    else if (!strcmp(argv[1], "fmacc_chain")) fmacc_chain_wrap(trips, data);
    else if (!strcmp(argv[1], "fadd_chain")) fadd_chain_wrap(trips, data);
    else if (!strcmp(argv[1], "scalar_chain")) scalar_chain_wrap(trips, data);
    else return 2;
    return 0;
}
"""


@pytest.fixture(scope="module")
def snippets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("x60_snippets")
    (tmp / "snippets.S").write_text(SNIPPETS)
    (tmp / "main.c").write_text(MAIN)
    tc = Toolchain.for_isa(RISCV_ISA)
    tc.compile(tmp / "snippets.S", tmp / "snippets.o")
    tc.compile(tmp / "main.c", tmp / "main.o")
    tc.link([tmp / "main.o", tmp / "snippets.o"], tmp / "snippets.elf")
    return tmp / "snippets.elf"


def x60(elf: Path, name: str, trips: int, tmp: Path) -> dict[str, float]:
    out, blocks = tmp / f"{name}-{trips}.txt", tmp / f"{name}-{trips}.blocks"
    # the launcher is <name>_wrap: its "kernel" symbol is <name>
    plugin = plugin_argument(paths.icount_plugin(), out, name, blocks)
    proc = subprocess.run([*qemu_command(), "-plugin", plugin, str(elf), name, str(trips)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert parse_icount(out.read_text())["launches"] == 1
    return x60_counters(blocks, elf)


def per_trip(elf: Path, name: str, tmp: Path) -> float:
    return (x60(elf, name, 60, tmp)["x60_cycles"] - x60(elf, name, 20, tmp)["x60_cycles"]) / 40


def test_vector_unit_runs_the_table_cycles_of_a_loop(snippets: Path, tmp_path: Path):
    table = load_costs()
    by_hand = (table.vector("vle32.v", sew=32, lmul="m8", masked=False).cycles
               + table.vector("vfadd.vv", sew=32, lmul="m8", masked=False).cycles)
    assert per_trip(snippets, "load_add_m8", tmp_path) == pytest.approx(by_hand, rel=1e-6)
    m4 = 2 * (table.vector("vle32.v", sew=32, lmul="m4", masked=False).cycles
              + table.vector("vfadd.vv", sew=32, lmul="m4", masked=False).cycles)
    assert per_trip(snippets, "load_add_m4", tmp_path) == pytest.approx(m4, rel=1e-6)


def test_an_accumulator_chain_costs_throughput_and_an_add_chain_its_latency(snippets: Path, tmp_path: Path):
    table = load_costs()
    fmacc = table.vector("vfmacc.vv", sew=32, lmul="m4", masked=False).cycles
    assert per_trip(snippets, "fmacc_chain", tmp_path) == pytest.approx(fmacc, rel=1e-6)
    fadd = table.vector("vfadd.vv", sew=32, lmul="m1", masked=False)
    latency = fadd.latency if fadd.latency is not None else VECTOR_FP_LATENCY  # the model's floor where none
    assert latency > 1.5  # else the trip's issue (3 instructions, two a cycle) would bind, not the chain
    assert per_trip(snippets, "fadd_chain", tmp_path) == pytest.approx(max(fadd.cycles, latency))


def test_a_scalar_dependence_chain_binds_at_the_table_latency(snippets: Path, tmp_path: Path):
    latency = load_costs().scalar("fadd.s").latency
    assert latency is not None
    assert per_trip(snippets, "scalar_chain", tmp_path) == pytest.approx(4 * latency)


def test_counters_of_one_run(snippets: Path, tmp_path: Path):
    counters = x60(snippets, "load_add_m8", 20, tmp_path)
    assert counters["x60_harts"] == 1 and counters["x60_standin_share"] == 0
    assert counters["x60_memory_stall_cycles"] == 0  # no cache-model counters given
    assert counters["x60_vector_cycles"] <= counters["x60_cycles"] < counters["x60_vector_cycles"] + counters[
        "x60_scalar_cycles"]


def test_dram_bandwidth_bounds_the_launch_when_the_cache_model_says_so(snippets: Path, tmp_path: Path):
    out, blocks = tmp_path / "o.txt", tmp_path / "b.blocks"
    plugin = plugin_argument(paths.icount_plugin(), out, "load_add_m8", blocks)
    proc = subprocess.run([*qemu_command(), "-plugin", plugin, str(snippets), "load_add_m8", "20"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    core = x60_counters(blocks, snippets)["x60_cycles"]
    # few misses: the DRAM time (64 B a line at 10.66 GB/s, 1.6 GHz) stays under the core's cycles
    assert x60_counters(blocks, snippets, cache={"l2_misses": 10.0})["x60_cycles"] == pytest.approx(core)
    # many: the launch takes the DRAM time, the difference reported as the memory stall
    misses = 10 * core
    bounded = x60_counters(blocks, snippets, cache={"l2_misses": misses, "l1d_misses": misses})
    dram = misses * 64 / (10.66e9 / 1.6e9)
    assert bounded["x60_cycles"] == pytest.approx(dram)
    assert bounded["x60_memory_stall_cycles"] == pytest.approx(dram - core)
