"""The QEMU instruction-count plugin (qemu_plugin/icount.c) on real QEMU with real cross-built programs."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from pytest_rvtune import paths
from pytest_rvtune.counters import parse_icount
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain, qemu_command

# saxpy vectorizes to RVV with -march=rv64gcv (vle32/vfmacc/vse32) and stays scalar with -march=rv64gc.
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void saxpy(float *y, const float *x, float a, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (int i = 0; i < n; i++) { x[i] = i; y[i] = 1; }
    saxpy(y, x, 2.0f, n);
    printf("%g\n", y[n - 1]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("icount")
    src = tmp / "saxpy.c"
    src.write_text(PROGRAM)
    vector = Toolchain.for_isa(RISCV_ISA)
    # The same flags without V: -march=rv64gc, and no RVV vector-bits option (clang rejects it without V).
    scalar = dataclasses.replace(vector, cflags=tuple(
        "-march=rv64gc" if f.startswith("-march=") else f for f in vector.cflags if not f.startswith("-mrvv")))
    elves = {}
    for name, tc in (("vector", vector), ("scalar", scalar)):
        obj, elf = tmp / f"{name}.o", tmp / f"{name}.elf"
        tc.compile(src, obj)
        tc.link([obj], elf)
        elves[name] = elf
    return elves


def count(elf: Path, n: int, out: Path, symbol: str = "saxpy") -> dict[str, float]:
    plugin = paths.icount_plugin()
    assert plugin.is_file(), f"{plugin} missing: run `make setup`"
    proc = subprocess.run([*qemu_command(), "-plugin", f"{plugin},out={out},symbol={symbol}", str(elf), str(n)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout) == 1 + 2 * (n - 1)  # the program computed the right answer under the plugin
    return parse_icount(out.read_text(), source=str(out))


def test_vector_code_counts_vector_instructions(programs: dict[str, Path], tmp_path: Path) -> None:
    counts = count(programs["vector"], 1024, tmp_path / "v.txt")
    assert counts["vector_insns"] > 0
    assert counts["insns"] > counts["kernel_insns"] > 0
    # The loop body is vector code: most kernel instructions are vector instructions.
    assert counts["vector_insns"] >= counts["kernel_insns"] / 2


def test_scalar_build_has_no_vector_instructions(programs: dict[str, Path], tmp_path: Path) -> None:
    counts = count(programs["scalar"], 1024, tmp_path / "s.txt")
    assert counts["vector_insns"] == 0
    assert counts["kernel_insns"] > 1024  # at least one instruction per element


@pytest.mark.parametrize("kind", ["vector", "scalar"])
def test_symbol_count_scales_with_the_loop_and_repeats_exactly(programs: dict[str, Path], tmp_path: Path,
                                                               kind: str) -> None:
    k = [count(programs[kind], n, tmp_path / f"{n}.txt")["kernel_insns"] for n in (1024, 2048, 4096)]
    # Linear in n with a fixed prologue: each doubling adds twice what the previous one did.
    assert k[2] - k[1] == 2 * (k[1] - k[0]) > 0
    assert count(programs[kind], 2048, tmp_path / "again.txt")["kernel_insns"] == k[1]


def test_unknown_symbol_counts_nothing_in_the_kernel(programs: dict[str, Path], tmp_path: Path) -> None:
    counts = count(programs["vector"], 64, tmp_path / "x.txt", symbol="no_such_function")
    assert counts["kernel_insns"] == 0 and counts["insns"] > 0


def test_bad_plugin_argument_is_refused(programs: dict[str, Path], tmp_path: Path) -> None:
    plugin = paths.icount_plugin()
    proc = subprocess.run([*qemu_command(), "-plugin", f"{plugin},bogus=1", str(programs["vector"]), "4"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert "unknown argument 'bogus=1'" in proc.stderr
