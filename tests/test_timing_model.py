"""The timing model (timing_model.py: llvm-mca per executed block x its count) and the K1 cache model, fed by
the QEMU plugin's launch window: real qemu-riscv64, real llvm-mca, real cross-built programs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_rvtune import paths, timing_model
from pytest_rvtune.counters import parse_icount
from pytest_rvtune.targets.local import QemuTarget, plugin_argument
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain, qemu_command

# A launcher `work_wrap` (named like ours) running `reps` passes of one of three loops over n floats:
# saxpy (vector code), a chain of adds, or the same chain of divides (one instruction each, so the same count).
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void saxpy(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += 2.0f * x[i];
}

__attribute__((noinline)) float chain_add(float v, float w, int n) {
    for (int i = 0; i < n; i++) __asm__ volatile("fadd.s %0, %0, %1" : "+f"(v) : "f"(w));
    return v;
}

__attribute__((noinline)) float chain_div(float v, float w, int n) {
    for (int i = 0; i < n; i++) __asm__ volatile("fdiv.s %0, %0, %1" : "+f"(v) : "f"(w));
    return v;
}

volatile float sink;

__attribute__((noinline)) void work_wrap(const char *kind, float *y, const float *x, int n, int reps) {
    for (int r = 0; r < reps; r++) {
        if (kind[0] == 's') saxpy(y, x, n);
        else if (kind[0] == 'a') sink = chain_add(1.0f, 1.0f, n);
        else sink = chain_div(1.0f, 1.0f, n);
    }
}

int main(int argc, char **argv) {
    int n = atoi(argv[2]), reps = atoi(argv[3]), launches = atoi(argv[4]);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (int i = 0; i < n; i++) { x[i] = 1; y[i] = 0; }
    for (int l = 0; l < launches; l++) work_wrap(argv[1], y, x, n, reps);
    printf("%g\n", y[n - 1]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("timing")
    src, obj, elf = tmp / "work.c", tmp / "work.o", tmp / "work.elf"
    src.write_text(PROGRAM)
    tc = Toolchain.for_isa(RISCV_ISA)
    tc.compile(src, obj)
    tc.link([obj], elf)
    return elf


def run(elf: Path, tmp: Path, kind: str, n: int, reps: int, launches: int = 1) -> tuple[dict[str, float], Path]:
    """(the plugin's counters, its blocks file) of one run with the timing and cache models on."""
    out, blocks = tmp / f"{kind}-{n}-{reps}.txt", tmp / f"{kind}-{n}-{reps}.blocks"
    plugin = plugin_argument(paths.icount_plugin(), out, "work", blocks, with_timing_model=True)
    proc = subprocess.run([*qemu_command(), "-plugin", plugin, str(elf), kind, str(n), str(reps), str(launches)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return parse_icount(out.read_text(), source=str(out)), blocks


def est(blocks: Path) -> float:
    return timing_model.estimate(timing_model.read_blocks(blocks), timing_model.riscv_core_model()).cycles


def test_the_blocks_cover_exactly_the_launch_window(program: Path, tmp_path: Path) -> None:
    counts, blocks = run(program, tmp_path, "s", 4096, 3, launches=2)
    executed = sum(b.count * len(b.insns) for b in timing_model.read_blocks(blocks))
    assert counts["launches"] == 2
    assert executed == counts["launch_insns"]  # every instruction of the launches, none outside


def test_est_cycles_is_the_sum_of_block_estimates_times_counts(program: Path, tmp_path: Path) -> None:
    _, blocks = run(program, tmp_path, "s", 4096, 3)
    model = timing_model.riscv_core_model()
    read = timing_model.read_blocks(blocks)
    per_block = []
    for block in read:  # each block alone, once: the batched run must give each block its own estimate
        alone = timing_model.Block(block.vaddr, 1, block.insns)
        per_block.append(timing_model.estimate([alone], model).cycles)
    total = timing_model.estimate(timing_model.read_blocks(blocks), model).cycles
    assert total == pytest.approx(sum(c * b.count for c, b in zip(per_block, read, strict=True)))
    assert all(c > 0 for c in per_block)


def test_est_cycles_scales_linearly_with_a_known_loop_count(program: Path, tmp_path: Path) -> None:
    cycles = [est(run(program, tmp_path, "s", 4096, reps)[1]) for reps in (1, 2, 4)]
    per_pass = cycles[1] - cycles[0]
    assert per_pass > 0
    assert cycles[2] - cycles[1] == pytest.approx(2 * per_pass)  # exact counts: exactly linear


def test_a_long_latency_op_costs_more_than_a_cheap_one(program: Path, tmp_path: Path) -> None:
    add_counts, add_blocks = run(program, tmp_path, "a", 10000, 1)
    div_counts, div_blocks = run(program, tmp_path, "d", 10000, 1)
    # the same instructions but the op (and the two-instruction longer dispatch to it)
    assert abs(add_counts["launch_insns"] - div_counts["launch_insns"]) <= 4
    # a dependent chain: fdiv.s has a far longer latency than fadd.s in the model (27 vs ~5 cycles on the X280)
    assert est(div_blocks) > 3 * est(add_blocks)


def test_cache_misses_grow_when_the_working_set_exceeds_the_l1d(program: Path, tmp_path: Path) -> None:
    # x and y: 8 bytes per element. 1024 elements (8 KiB) stay in the 32 KiB L1D across 8 passes; 32768
    # (256 KiB) do not, but stay in the 512 KiB L2.
    small, _ = run(program, tmp_path, "s", 1024, 8)
    large, _ = run(program, tmp_path, "s", 32768, 8)
    lines = {n: 2 * n * 4 // timing_model.K1_L1D.line for n in (1024, 32768)}
    few = 16  # the stack, the kind string, arrays not line-aligned
    assert lines[1024] <= small["l1d_misses"] <= lines[1024] + few  # compulsory misses only, in the first pass
    assert large["l1d_misses"] >= 8 * lines[32768]  # every pass misses every line
    assert lines[32768] <= large["l2_misses"] <= lines[32768] + few  # fits in L2: compulsory only
    assert lines[1024] <= small["l2_misses"] <= lines[1024] + few


def test_the_qemu_target_records_the_models_per_launch(program: Path) -> None:
    result = QemuTarget(with_timing_model=True).run(program, ["s", "4096", "2", "3"], 120, kernel_symbol="work")
    assert result.returncode == 0, result.stderr
    c = result.counters
    assert c["launches"] == 3
    assert c["est_cycles"] > 0 and c["l1d_misses"] > 0 and c["l2_misses"] > 0
    assert c["l1d_accesses"] >= 3 * 2 * 3 * 4096  # x and y read, y written, per element, pass and launch


def test_the_timing_model_is_asked_for_not_default(program: Path, tmp_path: Path) -> None:
    # the model costs QEMU time and llvm-mca runs: a plain emulated run records counts and the X60 model's
    # cycles (from the per-block counts, which are cheap) only; its cycles have no DRAM part without the cache model
    plain = QemuTarget().run(program, ["s", "4096", "2", "3"], 120, kernel_symbol="work")
    assert plain.returncode == 0, plain.stderr
    assert plain.counters["launches"] == 3 and plain.counters["launch_insns"] > 0
    assert plain.counters["x60_cycles"] > 0 and plain.counters["x60_memory_stall_cycles"] == 0
    assert not {"est_cycles", "l1d_misses", "l2_misses", "l1d_accesses"} & set(plain.counters)
    plugin, out, blocks = Path("libicount.so"), tmp_path / "o.txt", tmp_path / "b.txt"
    assert f"blocks={blocks}" in plugin_argument(plugin, out, "work", blocks)
    assert "l1d=" not in plugin_argument(plugin, out, "work", blocks)
    assert "l1d=" in plugin_argument(plugin, out, "work", blocks, with_timing_model=True)
    # the pytest option reaches the target the session opens
    from pytest_rvtune.targets.config import TargetConfig
    from pytest_rvtune.targets.factory import make_target

    cfg = TargetConfig(name="qemu", kind="builtin")
    assert make_target(cfg, worker_id="master", with_timing_model=True).with_timing_model
    assert not make_target(cfg, worker_id="master").with_timing_model


def test_a_block_without_its_own_vector_type_inherits_the_one_before_it() -> None:
    model = timing_model.riscv_core_model()
    before = timing_model.Block(0x100, 1, [], asm=["vsetvli a0, a1, e16, m8, ta, ma"])
    loop = timing_model.Block(0x200, 1, [], asm=["vfadd.vv v8, v8, v16", "bnez a0, -4"])
    inherited = timing_model._last_vtype(before.asm)
    assert inherited == ("e16", "m8")
    text = timing_model._region_text(model, loop, inherited)
    assert "# LLVM-MCA-RISCV-SEW E16" in text and "# LLVM-MCA-RISCV-LMUL M8" in text
    # and the vector type changes the estimate: LMUL 8 costs more than LMUL 1
    m1 = timing_model._run_mca(model, [timing_model._region_text(model, loop, ("e16", "m1"))])[0]
    m8 = timing_model._run_mca(model, [text])[0]
    assert m1 is not None and m8 is not None and m8 > 2 * m1


def test_the_core_model_says_which_scheduling_model_is_used() -> None:
    model = timing_model.riscv_core_model()
    # LLVM 19 has no SpacemiT X60 model: the fallback is named as such
    assert model.mcpu in ("spacemit-x60", "sifive-x280")
    assert model.name.startswith(model.mcpu)
    assert model.identity()["mca_model"] == model.name


@pytest.mark.parametrize("spec", ["32768:3:64", "32768:4:48", "x", "100:4:64"])
def test_a_bad_cache_geometry_is_refused(program: Path, tmp_path: Path, spec: str) -> None:
    plugin = f"{paths.icount_plugin()},out={tmp_path / 'o.txt'},l1d={spec},l2=524288:8:64"
    proc = subprocess.run([*qemu_command(), "-plugin", plugin, str(program), "s", "8", "1", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert f"l1d={spec}" in proc.stderr
