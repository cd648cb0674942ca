"""Triton kernel -> TTIR with Triton's own frontend and TTIR passes (no GPU involved).

The options and frontend hooks (codegen functions, module map) are options.py's, the ones the registered
backend (compiler.py) gives ``triton.compile``. Triton is imported lazily: this module is imported while
Triton discovers backends (our entry point), when ``triton`` itself is still half initialised.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import os
import pathlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pytest_rvtune.compiler.options import RVTuneOptions, codegen_functions, module_map, rvtune_target

# Without it every compile prints a deprecation warning about the fp-fusion default.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

_lock = threading.Lock()


class FrontendError(ValueError):
    pass


def ttir_options() -> RVTuneOptions:
    """The options the frontend runs with: the backend's defaults (no overflow sanitizer, IEEE fp32 ``tl.dot``,
    our fp8 types)."""
    import triton

    # Triton's own knob for an fp32 tl.dot without input_precision (tf32 otherwise); we compute real fp32.
    triton.knobs.language.fp32_default = "ieee"
    return RVTuneOptions()


def run_ttir_passes(mod: Any) -> None:
    """Triton's own TTIR pass pipeline (what ``make_ttir`` runs for GPUs), in place."""
    from triton._C.libtriton import ir, passes

    pm = ir.pass_manager(mod.context)
    pm.enable_debug()
    passes.common.add_inliner(pm)
    passes.ttir.add_rewrite_tensor_descriptor_to_pointer(pm)
    passes.common.add_canonicalizer(pm)
    passes.ttir.add_combine(pm)
    passes.ttir.add_reorder_broadcast(pm)
    passes.common.add_cse(pm)
    passes.ttir.add_triton_licm(pm)
    passes.common.add_symbol_dce(pm)
    passes.ttir.add_loop_unroll(pm)
    pm.run(mod, "ttir")


#: MLIR's C++ function that registers the printer options (--mlir-print-op-generic...) as LLVM command-line
#: options, by its Itanium-mangled name: ``void mlir::registerAsmPrinterCLOptions()``. Triton 3.9's Python
#: bindings offer no way to print a module in generic form (``ir.module`` has only ``str``/``str_nodebug``/
#: ``dump``), so this one exported C++ symbol of libtriton is called through ctypes; tests/compiler/test_frontend.py
#: fails if it or the C API's ``LLVMParseCommandLineOptions`` goes away.
REGISTER_PRINTER_OPTIONS_SYMBOL = "_ZN4mlir27registerAsmPrinterCLOptionsEv"


class GenericPrintingUnavailable(FrontendError):
    """This Triton's libtriton does not export what generic-form printing needs (see set_generic_printing)."""


@functools.cache
def _command_line_options() -> Callable[[Sequence[bytes]], None]:
    """LLVM's command-line parser of libtriton, with MLIR's printer options registered (once per process)."""
    import triton

    path = pathlib.Path(triton.__file__).parent / "_C" / "libtriton.so"
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    try:
        register = getattr(lib, REGISTER_PRINTER_OPTIONS_SYMBOL)
        parse = lib.LLVMParseCommandLineOptions
    except AttributeError as e:
        raise GenericPrintingUnavailable(
            f"{path} (triton {triton.__version__}) does not export {e.args[0].split(': ')[-1]}, which rvtune "
            "needs to print TTIR in MLIR's generic form: install the triton version pyproject.toml names") from None
    register()
    parse.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p]

    def parse_flags(flags: Sequence[bytes]) -> None:
        argv = (b"rvtune", *flags)
        parse(len(argv), (ctypes.c_char_p * len(argv))(*argv), b"rvtune")
    return parse_flags


def set_generic_printing(on: bool) -> None:
    """Switch MLIR's printer (process-global) to the generic form with locations inline, or back.

    The only place rvtune reaches into libtriton below its Python bindings: see
    ``REGISTER_PRINTER_OPTIONS_SYMBOL``; raises GenericPrintingUnavailable when this Triton cannot.
    """
    value = b"true" if on else b"false"
    _command_line_options()([b"--mlir-print-op-generic=" + value, b"--mlir-print-local-scope=" + value])


_print_lock = threading.Lock()


def generic_text(mod: Any) -> str:
    """``mod`` in MLIR's generic form with locations inline (the only form ttir.py parses).

    The printer flags are process-global, so they are on only while this prints: everything else (Triton's
    ``compiled.asm["ttir"]``, which users and Triton's own tests read) keeps MLIR's usual pretty form.
    """
    with _print_lock:
        set_generic_printing(True)
        try:
            return mod.str()
        finally:
            set_generic_printing(False)


def full_signature(fn: Any, signature: dict[str, str], constexprs: dict[str, object]) -> dict[str, str]:
    """Every parameter of the kernel in order, constexprs marked ``constexpr``; names the missing ones."""
    names = list(getattr(fn, "arg_names", None) or inspect.signature(getattr(fn, "fn", fn)).parameters)
    kernel = getattr(fn, "__name__", "kernel")
    unknown = set(signature) - set(names) | set(constexprs) - set(names)
    if unknown:
        raise FrontendError(f"{kernel}: no parameter(s) named {', '.join(sorted(unknown))}; it has {names}")
    full: dict[str, str] = {}
    for name in names:
        if name in constexprs:
            full[name] = "constexpr"
        elif name in signature and signature[name] != "constexpr":
            full[name] = signature[name]
        else:
            raise FrontendError(f"{kernel}: parameter {name!r} has neither a type in the signature nor a "
                                "constexpr value: add it to one of them")
    return full


def _where(fn: Any, err: Any) -> str:
    """``file:line`` of a frontend error in the user's kernel (Triton's own message counts lines from the
    ``def``); empty when the error carries no line."""
    lineno = getattr(getattr(err, "node", None), "lineno", None)
    first = getattr(fn, "def_file_line_number", None)
    if lineno is None or first is None:
        return ""
    return f"{getattr(fn, 'file_name', '?')}:{first + lineno - 1}: "


def _advice(err: Any) -> str:
    """What to do about a frontend refusal our options cause (fp8 types); empty for any other error."""
    text = str(err)
    # an fp8 type outside our options, or a conversion Triton leaves to a codegen hook that has none for it
    if ("not supported in this architecture" in text and "fp8" in text) or "provide conversion for this type" in text:
        return (f"\nthe rvtune backend's fp8 types are {', '.join(RVTuneOptions().supported_fp8_dtypes)}: load one "
                "of those or fp16/bf16/fp32 data (convert other tensors with torch's .to() before the launch)")
    return ""


def _causes(err: BaseException) -> str:
    """What Triton's chained exceptions say that its message does not: its message stops at the caret of the
    call into a helper (whose own error, a static_assert's, is the cause) or holds a bare ``str()`` of the
    cause (a KeyError's key). Empty when there is no cause."""
    from triton.compiler.errors import CompilationError

    chain: list[BaseException] = []
    cause = err.__cause__
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__
    parts = []
    inner = [c for c in chain if isinstance(c, CompilationError) and str(c) != str(err)]
    if inner:  # the innermost error of Triton's: where in a helper, and what
        parts.append(f"{type(inner[-1]).__name__}: {inner[-1]}")
    if chain and not isinstance(chain[-1], CompilationError):  # the Python error under it all
        parts.append(f"{type(chain[-1]).__name__}: {chain[-1]}")
    return "".join(f"\ncaused by {p}" for p in parts)


def kernel_to_ttir(fn: Any, signature: dict[str, str], constexprs: dict[str, object], *,
                   block_pointers: bool = True) -> str:
    """Generic-form TTIR text of ``fn`` specialised on ``constexprs``, with loc info (kernel lines).

    ``block_pointers=False`` traces with Triton's own ``tl.make_block_ptr``/``load``/``store`` (which refuse
    block pointers): kernels without block pointers give the same TTIR either way.
    """
    from triton._C.libtriton import ir
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError

    sig = full_signature(fn, signature, constexprs)
    with _lock:  # the MLIR context and knobs are process-global state
        options = ttir_options()
        ctx = ir.context()
        ir.load_dialects(ctx)  # TTIR needs only the core dialects (the backend loads no others either)
        src = ASTSource(fn=fn, signature=sig, constexprs=dict(constexprs))
        try:
            mod = src.make_ir(rvtune_target(), options, codegen_functions(options), module_map(block_pointers), ctx)
        except CompilationError as e:
            raise FrontendError(f"{_where(fn, e)}in {getattr(fn, '__name__', 'kernel')}: {e}{_causes(e)}"
                                f"{_advice(e)}") from e
        run_ttir_passes(mod)
        return generic_text(mod)
