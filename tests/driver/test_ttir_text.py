"""The TTIR text users see: ``compiled.asm["ttir"]`` of a driver launch is in MLIR's usual pretty form (Triton's own
tests grep it, e.g. for ``arith.constant ... : f32``), while our lowering and ``compile_kernel`` read the generic
form. The printer switch is process-global, so it must be on only while our code prints, in any order of use.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from pytest_rvtune.compiler.api import compile_kernel
from pytest_rvtune.toolchain import HOST_ISA

pytestmark = pytest.mark.usefixtures("active_driver")


@triton.jit
def store_big_constant(out_ptr):
    tl.store(out_ptr, 1e10)


@triton.jit
def store_scaled(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32) * 2.5)


def test_driver_ttir_is_pretty_after_a_generic_print_and_both_lowerings_agree(tmp_path: Path) -> None:
    # compile_kernel first: it prints the generic form (the global printer flag goes on, then off again).
    built = compile_kernel(store_scaled, {"out_ptr": "*fp32"}, {"BLOCK": 8}, HOST_ISA, cache_root=tmp_path)
    assert '"tt.func"' in built.ttir and '"arith.constant"' in built.ttir  # generic: what ttir.py parses

    out = torch.zeros(1)
    compiled = store_big_constant[(1,)](out)
    assert out.item() == 1e10  # lowered from the generic form, run on the tensor
    ttir = compiled.asm["ttir"]
    assert re.search(r"arith.constant .* : f32", ttir), ttir  # pretty form, as Triton prints it
    assert '"tt.func"' not in ttir

    scaled = torch.zeros(8)
    store_scaled[(1,)](scaled, BLOCK=8)
    assert scaled.tolist() == [2.5 * i for i in range(8)]
