"""Flash-attention code paths of the lowering (issue 17): the loop-carried accumulator of
``acc = tl.dot(p, v, acc * alpha[:, None])`` is computed in its own home (no tile copy per iteration), and an
accumulator read through another view (transposed) is never. Differential against Triton's interpreter on the
host and under QEMU, and the C checked for the copy."""

from __future__ import annotations

import re

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, lower_kernel, run_and_match, run_interpreter_many

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA


@triton.jit
def rescaled_acc_kernel(p_ptr, v_ptr, s_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr, STEPS: tl.constexpr):
    """Flash attention's update: per step the running tile is rescaled row by row, then a dot adds to it."""
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32)
    for step in range(STEPS):
        p = tl.load(p_ptr + step * BM * BN + rm[:, None] * BN + rn[None, :])
        v = tl.load(v_ptr + step * BN * BN + rn[:, None] * BN + rn[None, :])
        alpha = tl.load(s_ptr + step * BM + rm)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="ieee")
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def transposed_acc_kernel(p_ptr, v_ptr, s_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr, STEPS: tl.constexpr):
    """The accumulator's chain reads it transposed: computing the result in its home would overwrite elements
    the chain still has to read (BM == BN)."""
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32) + 1.0
    for step in range(STEPS):
        p = tl.load(p_ptr + step * BM * BN + rm[:, None] * BN + rn[None, :])
        v = tl.load(v_ptr + step * BN * BN + rn[:, None] * BN + rn[None, :])
        alpha = tl.load(s_ptr + step * BM + rm)
        acc = tl.dot(p, v, tl.trans(acc) * alpha[:, None], input_precision="ieee")
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)


_SIG = {"p_ptr": "*fp32", "v_ptr": "*fp32", "s_ptr": "*fp32", "out_ptr": "*fp32"}
_STEPS = 3


def _call(fn, bm: int, bn: int, rng: np.random.Generator) -> KernelCall:
    p = rng.standard_normal((_STEPS, bm, bn)).astype(np.float32)
    v = rng.standard_normal((_STEPS, bn, bn)).astype(np.float32)
    s = rng.uniform(0.25, 1.5, (_STEPS, bm)).astype(np.float32)
    return KernelCall(fn, _SIG, {"BM": bm, "BN": bn, "STEPS": _STEPS}, [p, v, s, np.zeros((bm, bn), np.float32)],
                      (1,))


@pytest.fixture(scope="module")
def launches() -> dict[str, KernelCall]:
    rng = np.random.default_rng(15)
    return {"rescaled 16x32": _call(rescaled_acc_kernel, 16, 32, rng),
            "rescaled 8x64": _call(rescaled_acc_kernel, 8, 64, rng),
            "transposed 16x16": _call(transposed_acc_kernel, 16, 16, rng)}


@pytest.fixture(scope="module")
def expected(launches: dict[str, KernelCall]) -> list[list[np.ndarray]]:
    """Triton's interpreter on every launch, once for both ISAs."""
    return run_interpreter_many(list(launches.values()))


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_carried_accumulators_match_interpreter(isa: str, launches: dict[str, KernelCall],
                                                expected: list[list[np.ndarray]]) -> None:
    run_and_match(launches, expected, isa, rtol=2e-5, atol=1e-4)


def _home_and_result(c: str) -> tuple[str, str]:
    """(the arena offset of the loop's carried acc, the offset of the dot's result tile)."""
    carried = re.search(r"rv_float \*(acc_\w+) = \(rv_float \*\)\(rv_arena \+ (\d+)\);.*\n\s*rv_fill_f32\(\1,", c)
    dot = re.search(r"/\* (\w+) \+= dot\(", c)
    assert carried and dot, c
    result = re.search(rf"rv_float \*{dot.group(1)} = \(rv_float \*\)\(rv_arena \+ (\d+)\);", c)
    assert result, c
    return carried.group(2), result.group(1)


def test_rescaled_accumulator_is_computed_in_its_home() -> None:
    c = lower_kernel(rescaled_acc_kernel, _SIG, {"BM": 16, "BN": 32, "STEPS": _STEPS}).c_source
    home, result = _home_and_result(c)
    assert home == result  # acc * alpha[:, None] and the dot write the carried tile itself
    carried = re.search(r"rv_float \*(acc_\w+) = \(rv_float \*\)\(rv_arena \+ \d+\);.*\n\s*rv_fill_f32", c)
    assert carried and not re.search(rf"{carried.group(1)}\[i_\] = \w+\[i_\];", c)  # no copy back per iteration


def test_accumulator_read_transposed_is_not_computed_in_its_home() -> None:
    c = lower_kernel(transposed_acc_kernel, _SIG, {"BM": 16, "BN": 16, "STEPS": _STEPS}).c_source
    home, result = _home_and_result(c)
    assert home != result
