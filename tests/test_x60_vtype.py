"""vtype attribution (x60/vtype.py, x60/code.py) against QEMU's own: every vector instruction of every executed
block gets the (SEW, LMUL) that QEMU 7.2 translated the block under.

QEMU's ``-d exec,nochain`` prints one line per executed translation block with its TB flags. In QEMU 7.2
(target/riscv/cpu.h): ``FIELD(TB_FLAGS, LMUL, 3, 3)`` and ``FIELD(TB_FLAGS, SEW, 6, 3)`` hold vtype's vlmul and vsew
fields, ``FIELD(TB_FLAGS, VILL, 12, 1)`` says no valid vtype. A block ends at every vsetvl*, so all of a block's
vector instructions run under the flags its line shows. Real clang-19 builds, real QEMU, real kernels of the suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rvtune import build
from pytest_rvtune.spec import load_kernel_module
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain
from pytest_rvtune.x60.code import elf_code
from pytest_rvtune.x60.insn import parse_objdump
from pytest_rvtune.x60.qemu_vtype import compare, qemu_block_vtypes
from pytest_rvtune.x60.vtype import attribute_vtypes

REPO_ROOT = Path(__file__).resolve().parents[1]

# Loops with several vtypes each, a call inside a vector loop (vtype unknown after it: the compiler sets it
# again), an if/else whose arms set different types, and a loop whose body is split by a vsetvli.
PROGRAM = r"""
#include <riscv_vector.h>
#include <stdint.h>
#include <stdio.h>

__attribute__((noinline)) float helper(const float *p) { return p[0] * 0.5f; }

__attribute__((noinline)) void mix(int n, const float *a, float *b, int16_t *c, const double *d, int8_t *e) {
  for (int i = 0; i < n;) {
    size_t vl = __riscv_vsetvl_e32m4(n - i);
    vfloat32m4_t x = __riscv_vle32_v_f32m4(a + i, vl);
    x = __riscv_vfmul_vf_f32m4(x, helper(a + i), vl);
    __riscv_vse32_v_f32m4(b + i, x, vl);
    size_t vl2 = __riscv_vsetvl_e16m2(n - i);
    vint16m2_t z = __riscv_vle16_v_i16m2(c + i, vl2);
    z = __riscv_vadd_vx_i16m2(z, 3, vl2);
    __riscv_vse16_v_i16m2(c + i, z, vl2);
    size_t vl3 = __riscv_vsetvl_e8mf2(n - i);
    vint8mf2_t w = __riscv_vle8_v_i8mf2(e + i, vl3);
    __riscv_vse8_v_i8mf2(e + i, __riscv_vadd_vx_i8mf2(w, 1, vl3), vl3);
    size_t step = vl < vl2 ? vl : vl2;
    i += step < vl3 ? step : vl3;
  }
  vfloat64m1_t acc = __riscv_vfmv_v_f_f64m1(0.0, 1);
  for (int i = 0; i < n;) {
    size_t vl = __riscv_vsetvl_e64m8(n - i);
    vfloat64m8_t v = __riscv_vle64_v_f64m8(d + i, vl);
    acc = __riscv_vfredusum_vs_f64m8_f64m1(v, acc, vl);
    i += vl;
  }
  if (n & 1) {
    size_t vl = __riscv_vsetvl_e32m1(4);
    __riscv_vse32_v_f32m1(b, __riscv_vfmv_v_f_f32m1(1.0f, vl), vl);
  } else {
    size_t vl = __riscv_vsetvl_e16mf4(4);
    __riscv_vse16_v_i16mf4(c, __riscv_vmv_v_x_i16mf4(7, vl), vl);
  }
  b[1] += (float)__riscv_vfmv_f_s_f64m1_f64(acc);
}

float A[1000], B[1000]; int16_t C[1000]; double D[1000]; int8_t E[1000];
int main(void) {
  for (int n = 999; n <= 1000; n++) mix(n, A, B, C, D, E);
  printf("%f %d\n", B[1], C[0]);
  return 0;
}
"""


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RVTUNE_CACHE_DIR", str(tmp_path_factory.mktemp("rvtune_cache")))
        yield


def test_hand_written_loops_agree_with_qemu(tmp_path: Path, private_cache: None):
    src, obj, elf = tmp_path / "mix.c", tmp_path / "mix.o", tmp_path / "mix.elf"
    src.write_text(PROGRAM)
    tc = Toolchain.for_isa(RISCV_ISA)
    tc.compile(src, obj)
    tc.link([obj], elf)
    seen = qemu_block_vtypes(elf, [], tmp_path / "exec.log")
    code = elf_code(elf, [pc for pc, _ in seen])
    agree, wrong = compare(code, seen)
    assert not wrong, "\n".join(wrong[:20])
    # every vtype the program sets was seen and agreed on (e32m4, e16m2, e8mf2, e64m8 and one of the arms)
    assert {(32, "m4"), (16, "m2"), (8, "mf2"), (64, "m8")} <= set(agree)
    assert {(32, "m1"), (16, "mf4")} & set(agree)


def test_unknown_after_calls_and_from_vsetvl():
    text = """
   10000: 0d2577d7     	vsetvli	a5, a0, e32, m4, ta, ma
   10004: 0205e607     	vle32.v	v12, (a1)
   10008: 0f0000ef     	jal	0x100f8 <f>
   1000c: 0205e607     	vle32.v	v12, (a1)
   10010: 80b57557     	vsetvl	a0, a0, a1
   10014: 0205e607     	vle32.v	v12, (a1)
   10018: 0d8577d7     	vsetvli	a5, a0, e64, m1, ta, ma
   1001c: 00050463     	beqz	a0, 0x10024 <g+0x24>
   10020: 0d2577d7     	vsetvli	a5, a0, e32, m4, ta, ma
   10024: 0205e607     	vle32.v	v12, (a1)
   10028: 00008067     	ret
"""
    insns = parse_objdump(text)
    vtypes = attribute_vtypes(insns, [0x10000])
    assert vtypes[0x10004] == (32, "m4")
    assert vtypes[0x1000C] is None  # after a call
    assert vtypes[0x10014] is None  # vsetvl: vtype from a register
    assert vtypes[0x10024] is None  # e64m1 and e32m4 meet


@pytest.mark.parametrize("kernel, config", [
    ("softmax", {"BLOCK_SIZE_M": 2, "BLOCK_SIZE_N": 64}),
    ("layer_norm", None),
    ("matmul", {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 8}),
])
def test_suite_kernels_agree_with_qemu(kernel: str, config: dict | None, tmp_path: Path, private_cache: None):
    spec = load_kernel_module(REPO_ROOT / "kernels" / f"{kernel}.py")
    chosen = config or dict(spec.configs[0])
    art = build.build_item(spec, "small", chosen, RISCV_ISA)
    argv = ["--warmup", "0", "--runs", "1", *map(str, art.argv)]
    seen = qemu_block_vtypes(art.elf, argv, tmp_path / "exec.log")
    code = elf_code(art.elf, [pc for pc, _ in seen])
    agree, wrong = compare(code, seen)
    assert not wrong, "\n".join(wrong[:20])
    assert sum(agree.values()) > 20 and len(agree) >= 2, agree
