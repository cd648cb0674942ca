"""The lowering tiers are composed in one ordered list (lower.TIERS), never by import side effects: any import
order gives the same C, and the list, not the modules loaded, decides which tier lowers an op."""

from __future__ import annotations

import hashlib
import itertools
import subprocess
import sys

import pytest
import triton
import triton.language as tl

from pytest_rvtune.compiler import fusion, lower_print, lower_scaled, lower_struct, ptr_analysis
from pytest_rvtune.compiler.emitter import Tier
from pytest_rvtune.compiler.frontend import kernel_to_ttir
from pytest_rvtune.compiler.lower import TIERS, UnsupportedOpError, lower_ttir


@triton.jit
def scaled_rows_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
    mask = rows < n
    x = tl.load(x_ptr + rows, mask=mask, other=0.0)
    tl.store(o_ptr + rows, tl.exp(x * 2.0) + 1.0, mask=mask)


@pytest.fixture(scope="module")
def ttir() -> str:
    return kernel_to_ttir(scaled_rows_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32", "n": "i32"}, {"BLOCK": 16})


def test_tiers_in_order():
    assert [t.name for t in TIERS] == ["ptr_analysis", "lower_struct", "lower_scaled", "lower_print", "fusion"]
    assert TIERS == (ptr_analysis.TIER, lower_struct.TIER, lower_scaled.TIER, lower_print.TIER, fusion.TIER)


def test_any_import_order_gives_the_same_c(ttir, tmp_path):
    path = tmp_path / "k.ttir"
    path.write_text(ttir)
    expected = hashlib.sha256(lower_ttir(ttir).c_source.encode()).hexdigest()
    modules = ["fusion", "ptr_analysis", "lower_struct", "emitter", "lower"]
    for order in [*itertools.islice(itertools.permutations(modules), 0, None, 30), modules[::-1]]:
        imports = "; ".join(f"import pytest_rvtune.compiler.{m}" for m in order)
        code = (f"{imports}; import hashlib, pathlib; from pytest_rvtune.compiler.lower import lower_ttir; "
                f"print(hashlib.sha256(lower_ttir(pathlib.Path({str(path)!r}).read_text()).c_source.encode())"
                ".hexdigest())")
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == expected, order


def test_the_list_decides_which_tier_lowers(ttir):
    full = lower_ttir(ttir).c_source
    # Without the fast paths, the general tier lowers the loads and stores (through pointer tiles).
    general = lower_ttir(ttir, (lower_struct.TIER, fusion.TIER)).c_source
    assert general != full
    assert "void scaled_rows_kernel(" in general
    # Without fusion, exp(x * 2) + 1 takes one loop per op instead of one fused loop.
    assert lower_ttir(ttir, (ptr_analysis.TIER, lower_struct.TIER)).c_source.count("for (") > full.count("for (")


def test_an_op_no_tier_lowers_is_named(ttir):
    named = r"operation \w+\.\w+ at .*test_tiers\.py:\d+ \(kernel scaled_rows_kernel\): rvtune cannot"
    with pytest.raises(UnsupportedOpError, match=named):
        lower_ttir(ttir, (Tier("empty"),))


def test_two_handlers_for_one_op_are_refused():
    from pytest_rvtune.compiler.emitter import handles_into

    handles = handles_into({})
    handles("tt.load")(lambda f, op: None)
    with pytest.raises(ValueError, match=r"two handlers for tt\.load"):
        handles("tt.load")(lambda f, op: None)
