"""The rvtune Triton backend as Triton itself sees it: entry-point discovery, target selection, options, stages,
and ``triton.compile`` producing TTIR and C with the real frontend and our lowering."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import triton
from triton.backends.compiler import GPUTarget, Language
from triton.compiler import ASTSource, make_backend

from pytest_rvtune.compiler.compiler import RVTuneBackend, RVTuneOptions, rvtune_target
from pytest_rvtune.compiler.driver import RVTuneDriver
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout these tests belong to

MATMUL = REPO_ROOT / "kernels" / "matmul.py"


@pytest.fixture(scope="module")
def matmul():
    from pytest_rvtune.spec import load_kernel_module

    return load_kernel_module(MATMUL)


def test_triton_discovers_backend_and_inactive_driver():
    found = triton.backends.backends["rvtune"]
    assert found.compiler is RVTuneBackend
    assert found.driver is RVTuneDriver
    assert RVTuneDriver.is_active() is False


def test_driver_never_hijacks_launches():
    # Our driver must never be the one kernel[grid](...) launches go to. Without a GPU (CI) that means
    # Triton still reports no active driver at all.
    from triton.runtime.driver import driver

    actives = [name for name, b in triton.backends.backends.items() if b.driver.is_active()]
    assert "rvtune" not in actives
    if not actives:
        with pytest.raises(RuntimeError, match="0 active drivers"):
            driver.active.get_current_target()


def test_import_order_does_not_matter():
    # Importing the backend module before triton must work (triton's discovery re-imports it).
    code = ("import pytest_rvtune.compiler.compiler as c, triton; "
            "assert triton.backends.backends['rvtune'].compiler is c.RVTuneBackend")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("isa", [RISCV_ISA, HOST_ISA])
def test_targets_select_this_backend(isa):
    assert rvtune_target(isa) == GPUTarget("riscv", isa, 1)
    assert isinstance(make_backend(rvtune_target(isa)), RVTuneBackend)


def test_other_targets_are_not_ours():
    assert not RVTuneBackend.supports_target(GPUTarget("riscv", "rv32gc", 1))
    assert not RVTuneBackend.supports_target(GPUTarget("cuda", 80, 32))
    with pytest.raises(ValueError, match="unknown ISA 'rv32gc'"):
        rvtune_target("rv32gc")


def test_options_frozen_ieee_no_sanitizer():
    be = make_backend(rvtune_target())
    opts = be.parse_options({"num_warps": 4, "unknown_option": 1, "allowed_dot_input_precisions": ["ieee"]})
    assert isinstance(opts, RVTuneOptions)
    assert (opts.num_warps, opts.sanitize_overflow, opts.default_dot_input_precision) == (4, False, "ieee")
    assert opts.allowed_dot_input_precisions == ("ieee",)
    assert opts.arch == RISCV_ISA
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.num_warps = 8  # type: ignore[misc]
    # an unknown option changes nothing (the hash included); a real option does
    assert opts.hash() == be.parse_options({"num_warps": 4, "allowed_dot_input_precisions": ["ieee"]}).hash()
    assert opts.hash() != be.parse_options({"num_warps": 2, "allowed_dot_input_precisions": ["ieee"]}).hash()
    # by default every GPU dot precision is accepted, and all of them compute IEEE fp32 here
    assert {"ieee", "tf32", "tf32x3"} <= set(be.parse_options({}).allowed_dot_input_precisions)
    # num_warps as every Triton backend takes it: a power of 2
    for bad in (3, 0, 6):
        with pytest.raises(AssertionError, match=f"num_warps must be a power of 2, not {bad}"):
            be.parse_options({"num_warps": bad})
    assert [be.parse_options({"num_warps": n}).num_warps for n in (1, 2, 8)] == [1, 2, 8]


def test_small_dots_allowed():
    be = make_backend(rvtune_target())
    assert be.get_codegen_implementation(be.parse_options({}))["min_dot_size"](None, None) == (1, 1, 1)


def test_stages_are_ttir_then_c():
    be = make_backend(rvtune_target())
    stages: dict = {}
    be.add_stages(stages, be.parse_options({}), Language.TRITON)
    assert list(stages) == ["ttir", "c"]
    assert be.binary_ext == "c"


def test_triton_compile_gives_ttir_and_c(matmul, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    # 4x16x4 fp32 tiles: K=4 < 8 is what CUDA's min_dot_size would reject.
    config = {"BLOCK_SIZE_M": 4, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 4, "GROUP_SIZE_M": 2}
    signature = matmul.capture_launch("small", {**matmul.configs[0], **config}).signature
    compiled = triton.compile(ASTSource(matmul.kernel, signature, config), target=rvtune_target(HOST_ISA))
    ttir = compiled.asm["ttir"]
    assert '"tt.dot"' in ttir or "tt.dot" in ttir
    assert "tensor<4x4xf32>" in ttir  # the constexprs reached the frontend
    c_source = compiled.asm["c"].decode()
    assert "void matmul_kernel(" in c_source
    assert compiled.metadata.name == "matmul_kernel"
    assert [p[0] for p in compiled.metadata.params] == [
        n for n, t in signature.items() if t != "constexpr"]

    # One lowering behind both entry points: the public build API produces the same C.
    from pytest_rvtune.compiler.api import compile_kernel

    ck = compile_kernel(matmul.kernel, signature, config, HOST_ISA, cache_root=tmp_path / "rvtune")
    assert ck.c_source == c_source


def test_driver_maps_types():
    drv = RVTuneDriver()
    assert drv.map_python_to_cpp_type("*fp32") == "float *"
    assert drv.map_python_to_cpp_type("i64") == "int64_t"
    assert drv.map_python_to_cpp_type("*fp8e4nv") == "uint8_t *"
    assert drv.map_python_to_cpp_type("*fp8e4b15") == "uint8_t *"  # Triton's i8-typed fp8: bytes too
    with pytest.raises(ValueError, match="'fp4'"):
        drv.map_python_to_cpp_type("fp4")
