"""The frontend's two seams with Triton: the options it traces with (the registered backend's, one object) and
generic-form printing (the one libtriton symbol rvtune calls below Triton's Python bindings)."""

from __future__ import annotations

import pytest
import triton
import triton.language as tl
from triton._C.libtriton import ir
from triton.compiler import ASTSource, make_backend
from triton.language.extra import libdevice

from pytest_rvtune.compiler import frontend, options
from pytest_rvtune.compiler.frontend import GenericPrintingUnavailable, generic_text, kernel_to_ttir
from pytest_rvtune.toolchain import HOST_ISA


@triton.jit
def tanh_kernel(x_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, libdevice.tanh(tl.load(x_ptr + offs)))


SIGNATURE = {"x_ptr": "*fp32", "o_ptr": "*fp32"}


def test_frontend_traces_with_the_backends_options():
    backend = make_backend(options.rvtune_target())
    assert frontend.ttir_options() == backend.parse_options({})
    assert frontend.codegen_functions(frontend.ttir_options()) == backend.get_codegen_implementation(
        backend.parse_options({}))
    ours, theirs = frontend.module_map(), backend.get_module_map()  # block_ptr builds a fresh tl module per call
    assert ours.keys() == theirs.keys() == {"triton.language", "triton.language.extra.libdevice"}
    assert ours["triton.language.extra.libdevice"] is theirs["triton.language.extra.libdevice"]


def test_triton_compile_and_the_frontend_give_the_same_ttir(tmp_path, monkeypatch):
    # libdevice needs the module map the frontend always had; through triton.compile it used to be missing.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    compiled = triton.compile(ASTSource(tanh_kernel, {**SIGNATURE, "BLOCK": "constexpr"}, {"BLOCK": 8}),
                              target=options.rvtune_target(HOST_ISA))
    assert "tanhf(" in compiled.asm["c"].decode()
    ours = kernel_to_ttir(tanh_kernel, SIGNATURE, {"BLOCK": 8})
    assert '"tt.extern_elementwise"' in ours
    path = tmp_path / "k.ttir"
    path.write_text(ours)
    ctx = ir.context()
    ir.load_dialects(ctx)
    assert generic_text(ir.parse_mlir_module(str(path), ctx)) == ours


def test_generic_printing_is_on_only_while_printing(tmp_path):
    text = kernel_to_ttir(tanh_kernel, SIGNATURE, {"BLOCK": 8})
    assert '"tt.func"() <{' in text and 'loc("' in text  # generic form, locations inline
    path = tmp_path / "k.ttir"
    path.write_text(text)
    ctx = ir.context()
    ir.load_dialects(ctx)
    mod = ir.parse_mlir_module(str(path), ctx)
    assert "tt.func public @tanh_kernel" in mod.str()  # everyone else still gets MLIR's pretty form
    assert generic_text(mod) == text
    assert '"tt.func"' not in mod.str()


def test_missing_libtriton_symbol_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(frontend, "REGISTER_PRINTER_OPTIONS_SYMBOL", "_ZN4mlir17noSuchSymbolForTestEv")
    frontend._command_line_options.cache_clear()
    try:
        with pytest.raises(GenericPrintingUnavailable, match=r"libtriton\.so \(triton 3\.\d+\.\d+\) does not "
                                                             r"export _ZN4mlir17noSuchSymbolForTestEv"):
            frontend.set_generic_printing(True)
    finally:
        frontend._command_line_options.cache_clear()  # the real symbol again for the next test
