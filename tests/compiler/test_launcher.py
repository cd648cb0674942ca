"""The generated launcher, built with real clang-19 and run natively and under qemu-riscv64.

A hand-written probe kernel with the kernel ABI records which program ran, in which order and on which
thread, so the tests see the grid walk, the thread count and the thread stack size the launcher gives.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_rvtune.compiler import launcher
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain, qemu_command


@dataclass(frozen=True)
class P:
    name: str
    c_type: str


PARAMS = [P("visits", "int32_t *restrict"), P("order", "int32_t *"), P("threads", "uint64_t *"),
          P("rendezvous", "int32_t"), P("big_stack", "int32_t")]

# The probe kernel: counts visits per program, logs the visit order and the thread of each program.
# `rendezvous` > 0: the first programs wait until that many distinct programs are running at once, which
# only happens if the launcher really runs that many threads. `big_stack`: use 10 MB of stack, more than
# glibc's default thread stack (RLIMIT_STACK, 8 MB here), so it only passes with the launcher's own size.
KERNEL_C = r"""
#include "probe_kernel_launcher.h"
#include <pthread.h>
#include <time.h>
static int32_t seq;
/* Its own noinline frame: inlined, the 10 MB array would be in every program's frame. */
__attribute__((noinline)) static int use_big_stack(void) {
  volatile char buf[10 << 20];
  for (int i = 0; i < (10 << 20); i += 4096) buf[i] = (char)(i >> 12);
  return buf[4096] - 1;
}
static int32_t arrived;
void probe_kernel(int32_t *visits, int32_t *order, uint64_t *threads, int32_t rendezvous,
                  int32_t big_stack, int32_t pid_x, int32_t pid_y, int32_t pid_z,
                  uint32_t grid_x, uint32_t grid_y, uint32_t grid_z) {
  int32_t lin = pid_x + (int32_t)grid_x * (pid_y + (int32_t)grid_y * pid_z);
  __atomic_fetch_add(&visits[lin], 1, __ATOMIC_SEQ_CST);
  order[__atomic_fetch_add(&seq, 1, __ATOMIC_SEQ_CST)] = lin;
  threads[lin] = (uint64_t)pthread_self();
  if (rendezvous > 0 && lin < rendezvous) {
    __atomic_fetch_add(&arrived, 1, __ATOMIC_SEQ_CST);
    time_t start = time(0);
    while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < rendezvous && time(0) - start < 20) {}
  }
  if (big_stack) visits[lin] += use_big_stack();
}
"""

MAIN_C = r"""
#include "probe_kernel_launcher.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
  uint32_t gx = atoi(argv[1]), gy = atoi(argv[2]), gz = atoi(argv[3]);
  int nt = atoi(argv[4]), rendezvous = atoi(argv[5]), big = atoi(argv[6]);
  if (rendezvous < 0) rendezvous = (int)sysconf(_SC_NPROCESSORS_ONLN);
  uint32_t n = gx * gy * gz;
  int32_t *visits = calloc(n, sizeof(int32_t)), *order = calloc(n, sizeof(int32_t));
  uint64_t *threads = calloc(n, sizeof(uint64_t));
  probe_kernel_wrap(gx, gy, gz, nt, probe_kernel, visits, order, threads, rendezvous, big);
  printf("{\"block\": %d, \"flag\": %d, \"harts\": %ld, \"main\": %llu, \"visits\": [", probe_kernel_BLOCK,
         probe_kernel_FLAG, sysconf(_SC_NPROCESSORS_ONLN), (unsigned long long)pthread_self());
  for (uint32_t i = 0; i < n; ++i) printf("%s%d", i ? ", " : "", visits[i]);
  printf("], \"order\": [");
  for (uint32_t i = 0; i < n; ++i) printf("%s%d", i ? ", " : "", order[i]);
  printf("], \"threads\": [");
  for (uint32_t i = 0; i < n; ++i) printf("%s%llu", i ? ", " : "", (unsigned long long)threads[i]);
  printf("]}\n");
  return 0;
}
"""


def _build(isa: str, out: Path, constexprs: dict) -> Path:
    src = launcher.launcher_sources("probe_kernel", PARAMS, list(launcher.int_constexprs("probe_kernel",
                                                                                            constexprs)))
    (out / src.header_name).write_text(src.header)
    files = {src.launcher_name: src.launcher_c, "probe_kernel.c": KERNEL_C, "main.c": MAIN_C,
             "probe_kernel_consts.c": launcher.consts_source("probe_kernel", constexprs)}
    tc = Toolchain.for_isa(isa)
    objects = []
    for name, text in files.items():
        (out / name).write_text(text)
        obj = out / (name + ".o")
        # -Werror: the generated C must compile without warnings too.
        tc.compile(out / name, obj, extra=("-Wall", "-Werror", "-Wno-unused-but-set-variable"))
        objects.append(obj)
    elf = out / "probe.elf"
    tc.link(objects, elf)
    return elf


@pytest.fixture(scope="module", params=[HOST_ISA, RISCV_ISA])
def probe(request, tmp_path_factory):
    isa = request.param
    elf = _build(isa, tmp_path_factory.mktemp(isa), {"BLOCK": 32, "FLAG": True, "SCALE": 0.5})
    prefix = qemu_command() if isa == RISCV_ISA else []

    def run(gx: int, gy: int, gz: int, threads: int, rendezvous: int = 0, big: int = 0) -> dict:
        cmd = [*prefix, str(elf), *map(str, (gx, gy, gz, threads, rendezvous, big))]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, f"{cmd} exited {proc.returncode}: {proc.stderr}"
        return json.loads(proc.stdout)

    return run


def test_serial_walks_grid_x_fastest_on_calling_thread(probe):
    out = probe(3, 2, 2, 1)
    assert out["order"] == list(range(12))
    assert out["visits"] == [1] * 12
    assert set(out["threads"]) == {out["main"]}


def test_block_constants_reach_c_bool_as_int(probe):
    out = probe(1, 1, 1, 1)
    assert (out["block"], out["flag"]) == (32, 1)


@pytest.mark.parametrize("threads", [2, 3])
def test_n_threads_run_every_program_once(probe, threads):
    out = probe(5, 3, 2, threads, rendezvous=threads)
    assert out["visits"] == [1] * 30
    # The rendezvous only completes if `threads` threads run at once; none of them is the caller.
    assert len(set(out["threads"])) == threads
    assert out["main"] not in out["threads"]


def test_zero_threads_means_all_harts(probe):
    out = probe(4, 4, 1, 0, rendezvous=-1)
    assert out["visits"] == [1] * 16
    assert len(set(out["threads"])) == min(out["harts"], 16)


def test_more_threads_than_programs_and_empty_grid(probe):
    assert probe(2, 1, 1, 8)["visits"] == [1, 1]
    assert probe(0, 3, 1, 2)["visits"] == []


def test_thread_stack_holds_large_tiles(probe):
    # 10 MB of locals in each program: overflows a default 8 MB thread stack, fits the launcher's 16 MB.
    assert probe(2, 1, 1, 2, big=1)["visits"] == [1, 1]


def test_header_is_config_independent():
    a = launcher.launcher_sources("k_kernel", PARAMS, ["BLOCK", "FLAG"])
    b = launcher.launcher_sources("k_kernel", PARAMS, ["BLOCK", "FLAG"])
    assert a == b
    assert "extern const int k_kernel_BLOCK;" in a.header
    assert "restrict" not in a.header  # the header must also compile as C++
    assert "void k_kernel_wrap(uint32_t gridX, uint32_t gridY, uint32_t gridZ, int num_threads, " \
           "k_kernel_fn_t kernel_ptr, int32_t *visits," in a.header


def test_consts_and_json_per_config():
    consts = launcher.consts_source("k_kernel", {"BLOCK_SIZE_M": 16, "EVEN_K": False, "ACT": "relu"})
    assert "const int k_kernel_BLOCK_SIZE_M = 16;" in consts
    assert "const int k_kernel_EVEN_K = 0;" in consts
    assert "ACT" not in consts
    assert json.loads(launcher.blk_constants_json("k_kernel", {"B": 4, "F": True})) == {"B": 4, "F": 1}


def test_bad_names_and_values_are_named_in_errors():
    with pytest.raises(launcher.LauncherError, match=r"k_kernel: constexpr BIG=4294967296"):
        launcher.consts_source("k_kernel", {"BIG": 2**32})
    with pytest.raises(launcher.LauncherError, match=r"parameter 'a-b'"):
        launcher.launcher_sources("k_kernel", [P("a-b", "float *")], [])


def test_header_compiles_as_cpp(tmp_path):
    # main_cpp/<name>.cpp harnesses include the header from C++ (extern "C", no `restrict`).
    src = launcher.launcher_sources("probe_kernel", PARAMS, ["BLOCK"])
    (tmp_path / src.header_name).write_text(src.header)
    main = tmp_path / "main.cpp"
    main.write_text(f'#include "{src.header_name}"\nint main() {{ return probe_kernel_BLOCK == 0; }}\n')
    tc = Toolchain.for_isa(HOST_ISA)
    proc = subprocess.run([tc.cc.replace("clang-19", "clang++-19"), "-fsyntax-only", "-Wall", "-Werror",
                           f"-I{tmp_path}", str(main)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
