"""compiler/reads.py: which pointer arguments' initial data a kernel reads, from its real TTIR (Triton's frontend)."""

from __future__ import annotations

import triton
import triton.language as tl

from pytest_rvtune.compiler.frontend import kernel_to_ttir
from pytest_rvtune.compiler.reads import read_before_written


def reads(kernel, signature: dict[str, str], **constexprs) -> set[str]:
    return read_before_written(kernel_to_ttir(kernel, signature, constexprs))


@triton.jit
def loop_kernel(x_ptr, o_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = x_ptr + offs
    o = o_ptr + offs
    acc = tl.zeros([BLOCK], tl.float32)
    for _ in range(n):  # two loop-carried pointers: only the one loaded through is read
        acc += tl.load(a)
        tl.store(o, acc)
        a += BLOCK
        o += BLOCK
    tl.atomic_add(y_ptr + offs, acc)  # an atomic update reads what is there


@triton.jit
def written_first_kernel(x_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.exp(tl.load(x_ptr + offs)))  # softmax's shape: written, then read back
    e = tl.load(o_ptr + offs)
    tl.store(o_ptr + offs, e / tl.sum(e, 0))


@triton.jit
def branch_written_kernel(x_ptr, y_ptr, ignore, BLOCK: tl.constexpr):
    # Liger's cross entropy: an ignored row is zeroed and the program returns; any other row reads its logits and
    # writes its gradient there. The store in one branch does not make the other branch's read a read-back.
    offs = tl.arange(0, BLOCK)
    if tl.load(y_ptr) == ignore:
        tl.store(x_ptr + offs, 0.0)
        return
    tl.store(x_ptr + offs, tl.exp(tl.load(x_ptr + offs)))


@triton.jit
def _rotate(p, offs):
    tl.store(p + offs, -tl.load(p + offs))


@triton.jit
def helper_block_ptr_kernel(q_ptr, k_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    _rotate(q_ptr, offs)  # in place through a helper (inlined in the TTIR)
    kb = tl.make_block_ptr(k_ptr, (BLOCK,), (1,), (0,), (BLOCK,), (0,))
    ob = tl.make_block_ptr(out_ptr, (BLOCK,), (1,), (0,), (BLOCK,), (0,))
    tl.store(ob, tl.load(kb) * 2)


def test_loads_and_atomics_read_loop_carried_pointers_followed_one_by_one():
    sig = {"x_ptr": "*fp32", "o_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
    assert reads(loop_kernel, sig, BLOCK=16) == {"x_ptr", "y_ptr"}


def test_a_buffer_written_before_it_is_read_is_no_input():
    assert reads(written_first_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32"}, BLOCK=16) == {"x_ptr"}


def test_a_store_in_one_branch_does_not_hide_a_read_in_the_other():
    assert reads(branch_written_kernel, {"x_ptr": "*fp32", "y_ptr": "*i32", "ignore": "i32"}, BLOCK=16) == {
        "x_ptr", "y_ptr"}


def test_helpers_and_block_pointers():
    sig = {"q_ptr": "*fp32", "k_ptr": "*fp32", "out_ptr": "*fp32"}
    assert reads(helper_block_ptr_kernel, sig, BLOCK=16) == {"q_ptr", "k_ptr"}
