"""What the lowering refuses, how it says so, and properties of the C it writes (names, comments, stack).

Unsupported ops must fail with UnsupportedOpError naming the op and the kernel's own file:line (never
silently wrong code); the generated C keeps the kernel's variable names and shows the source lines; the
live-tile arena of the suite's largest tiles stays far below a thread stack, and such a kernel really
runs on a default pthread stack, natively and under QEMU.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, assert_match, run_c_kernels

from pytest_rvtune.compiler import lower_ops
from pytest_rvtune.compiler.frontend import FrontendError, kernel_to_ttir
from pytest_rvtune.compiler.lower import MAX_ARENA_BYTES, LoweringError, UnsupportedOpError, lower_ttir
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA

THIS_FILE = Path(__file__).name


@triton.jit
def asm_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)  # here
    tl.store(x_ptr + offs, y)


@triton.jit
def named_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_bounds = offsets < n
    values = tl.load(src_ptr + offsets, mask=in_bounds)
    tl.store(dst_ptr + offsets, values * 2.0, mask=in_bounds)


@triton.jit
def tile_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(4):
        a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def _line_of(fn, text: str) -> int:
    lines, start = fn.src.splitlines(), fn.fn.__code__.co_firstlineno + 1  # + 1: the @triton.jit line
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_unsupported_op_names_op_and_kernel_line() -> None:
    ttir = kernel_to_ttir(asm_kernel, {"x_ptr": "*fp32"}, {"BLOCK": 8})
    with pytest.raises(UnsupportedOpError) as err:
        lower_ttir(ttir)
    msg = str(err.value)
    assert "tt.elementwise_inline_asm" in msg
    assert f"{THIS_FILE}:{_line_of(asm_kernel, '# here')}" in msg
    assert "asm_kernel" in msg


def test_unknown_op_in_ttir_is_unsupported_not_miscompiled() -> None:
    ttir = kernel_to_ttir(named_kernel, {"src_ptr": "*fp32", "dst_ptr": "*fp32", "n": "i32"}, {"BLOCK": 8})
    mutated = ttir.replace('"arith.mulf"', '"arith.frobnicate"')
    with pytest.raises(UnsupportedOpError, match=r"arith\.frobnicate.*" + re.escape(THIS_FILE)):
        lower_ttir(mutated)


def test_op_missing_an_attribute_names_op_and_line() -> None:
    ttir = kernel_to_ttir(named_kernel, {"src_ptr": "*fp32", "dst_ptr": "*fp32", "n": "i32"}, {"BLOCK": 8})
    broken = re.sub(r'"arith.cmpi"\((.*?)\) <\{predicate = \d+ : i64\}>', r'"arith.cmpi"(\1)', ttir)
    assert broken != ttir
    line = _line_of(named_kernel, "in_bounds = offsets < n")
    with pytest.raises(LoweringError, match=rf"arith\.cmpi at .*{re.escape(THIS_FILE)}:{line}.*predicate"):
        lower_ttir(broken)


def test_unreadable_ttir_is_a_lowering_error() -> None:
    with pytest.raises(LoweringError, match="cannot read the TTIR"):
        lower_ttir('"builtin.module"() ({ "tt.func"(%x) <{ : () -> ()')


def test_signature_errors_name_the_parameter() -> None:
    with pytest.raises(FrontendError, match="'n'"):
        kernel_to_ttir(named_kernel, {"src_ptr": "*fp32", "dst_ptr": "*fp32"}, {"BLOCK": 8})
    with pytest.raises(FrontendError, match="bogus"):
        kernel_to_ttir(named_kernel, {"src_ptr": "*fp32", "dst_ptr": "*fp32", "n": "i32", "bogus": "i32"},
                       {"BLOCK": 8})


def test_generated_c_is_readable() -> None:
    k = lower_ttir(kernel_to_ttir(named_kernel, {"src_ptr": "*fp32", "dst_ptr": "*fp32", "n": "i32"}, {"BLOCK": 8}))
    assert k.name == "named_kernel"
    assert [(p.name, p.c_type, p.triton_type) for p in k.params] == [
        ("src_ptr", "float*", "*fp32"), ("dst_ptr", "float*", "*fp32"), ("n", "int32_t", "i32")]
    assert re.search(r"void named_kernel\(float \*src_ptr, float \*dst_ptr, int32_t n, int32_t pid_x, "
                     r"int32_t pid_y, int32_t pid_z, uint32_t grid_x, uint32_t grid_y, uint32_t grid_z\)", k.c_source)
    assert re.search(r"\bvalues(_\d+)?\b", k.c_source)  # the kernel's variable names survive
    line = _line_of(named_kernel, "values = tl.load")
    assert f"/* {THIS_FILE}:{line}: values = tl.load(src_ptr + offsets, mask=in_bounds) */" in k.c_source


@pytest.mark.parametrize(("bm", "bn", "bk"), [(128, 128, 128), (64, 64, 64)])
def test_live_tiles_fit_far_below_a_thread_stack(bm: int, bn: int, bk: int) -> None:
    k = lower_ttir(kernel_to_ttir(tile_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"},
                                  {"BM": bm, "BN": bn, "BK": bk}))
    arena = int(re.search(r"rv_arena\[(\d+)\]", k.c_source).group(1))
    # The tiles of this kernel (pointer tensors, masks, A, B, acc, the dot result, the loop copies) add up
    # to far more; reuse by liveness keeps the peak to the tiles live at once.
    assert arena < MAX_ARENA_BYTES / 4
    assert arena <= 3 * (bm * bk + bk * bn) * (8 + 4) + 3 * bm * bn * 4


@triton.jit
def big_tile_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    acc = tl.dot(a, b)
    p = tl.exp(acc - tl.max(acc, axis=1)[:, None])  # flash-attention-like row softmax on the tile
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], p / tl.sum(p, axis=1)[:, None])


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_largest_tiles_run_on_a_default_pthread_stack(isa: str) -> None:
    """The suite's largest tiles (128x128x128 fp32) on a thread created with default attributes."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 128)).astype(np.float32) / 8
    b = rng.standard_normal((128, 128)).astype(np.float32) / 8
    call = KernelCall(big_tile_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"},
                      {"BM": 128, "BN": 128, "BK": 128}, [a, b, np.zeros((128, 128), np.float32)], (1,))
    got = run_c_kernels([call], isa, threaded=True)[0][2]
    s = a.astype(np.float64) @ b.astype(np.float64)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    assert_match([got], [(p / p.sum(axis=1, keepdims=True)).astype(np.float32)], rtol=1e-4, atol=1e-6)


def test_too_large_tiles_are_refused_with_advice() -> None:
    with pytest.raises(LoweringError, match="smaller BLOCK sizes"):
        lower_ttir(kernel_to_ttir(tile_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"},
                                  {"BM": 1024, "BN": 1024, "BK": 512}))


def test_unsupported_parameter_type_names_kernel_and_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The signature is lowered outside the per-op error handling. Every type the TTIR reader knows has a C type
    now, so one is taken away (f8E5M2) and the TTIR mutated to use it for a parameter."""
    monkeypatch.delitem(lower_ops.C_SCALAR, "f8E5M2")
    ttir = kernel_to_ttir(named_kernel, {"src_ptr": "*fp32", "dst_ptr": "*fp32", "n": "i32"}, {"BLOCK": 8})
    mutated = ttir.replace("%src_ptr: !tt.ptr<f32>", "%src_ptr: !tt.ptr<f8E5M2>", 1)
    assert mutated != ttir
    line = _line_of(named_kernel, "def named_kernel")  # the parameters sit on the def line
    with pytest.raises(LoweringError, match=rf"parameter src_ptr of kernel named_kernel at .*{THIS_FILE}:{line}"
                                            r".*f8E5M2 has no C representation"):
        lower_ttir(mutated)
