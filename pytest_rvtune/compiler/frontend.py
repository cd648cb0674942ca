"""Triton kernel -> TTIR with Triton's own frontend and TTIR passes (no GPU involved).

The CUDA backend object only supplies the frontend hooks (codegen functions, module map, option parsing);
nothing is compiled for a GPU. Triton is imported lazily: this module is imported while Triton discovers
backends (our entry point), when ``triton`` itself is still half initialised.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import os
import pathlib
import threading
from typing import Any

# Without it every compile prints a deprecation warning about the fp-fusion default.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

_lock = threading.Lock()


class FrontendError(ValueError):
    pass


@functools.cache
def _target() -> Any:
    from triton.backends.compiler import GPUTarget

    # Only selects the frontend hooks: sm_80 has every dtype our kernels use (bf16, ieee fp32 dot).
    return GPUTarget("cuda", 80, 32)


@functools.cache
def _backend() -> Any:
    from triton.compiler import make_backend

    return make_backend(_target())


#: The fp8 types the lowering handles: none (no C representation). Triton's frontend then refuses an fp8 kernel
#: where the user wrote it, as the CPU driver's backend options do, instead of the lowering failing later.
SUPPORTED_FP8_DTYPES: tuple[str, ...] = ()


def ttir_options() -> Any:
    """The backend options the frontend runs with: no overflow sanitizer, IEEE fp32 ``tl.dot``, no fp8."""
    import triton

    # fp32 tl.dot defaults to tf32 on this target; we compute real fp32 on the CPU.
    triton.knobs.language.fp32_default = "ieee"
    return _backend().parse_options({"sanitize_overflow": False, "default_dot_input_precision": "ieee",
                                     "supported_fp8_dtypes": SUPPORTED_FP8_DTYPES,
                                     "deprecated_fp8_dot_operand_dtypes": ()})


def codegen_functions(options: Any) -> dict[str, Any]:
    """The frontend's codegen hooks with ``min_dot_size`` lifted so 4x4x4 ``tl.dot`` tiles compile."""
    cg = dict(_backend().get_codegen_implementation(options))
    cg["min_dot_size"] = lambda lhs_type, rhs_type: (1, 1, 1)
    return cg


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


@functools.cache
def _printer_options() -> Any:
    """libtriton with MLIR's printer options registered as LLVM command-line options (once per process)."""
    import triton

    lib = ctypes.CDLL(str(pathlib.Path(triton.__file__).parent / "_C" / "libtriton.so"), mode=ctypes.RTLD_GLOBAL)
    lib._ZN4mlir27registerAsmPrinterCLOptionsEv()
    lib.LLVMParseCommandLineOptions.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p]
    return lib


def _set_generic_printing(on: bool) -> None:
    value = b"true" if on else b"false"
    flags = (b"rvtune", b"--mlir-print-op-generic=" + value, b"--mlir-print-local-scope=" + value)
    _printer_options().LLVMParseCommandLineOptions(len(flags), (ctypes.c_char_p * len(flags))(*flags), b"rvtune")


_print_lock = threading.Lock()


def generic_text(mod: Any) -> str:
    """``mod`` in MLIR's generic form with locations inline (the only form ttir.py parses).

    The printer flags are process-global, so they are on only while this prints: everything else (Triton's
    ``compiled.asm["ttir"]``, which users and Triton's own tests read) keeps MLIR's usual pretty form.
    """
    with _print_lock:
        _set_generic_printing(True)
        try:
            return mod.str()
        finally:
            _set_generic_printing(False)


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


def module_map(block_pointers: bool = True) -> dict[str, Any]:
    """The frontend's module substitutions: the backend's, plus block-pointer support (block_ptr.py)."""
    from pytest_rvtune.compiler import block_ptr

    return {**_backend().get_module_map(), **(block_ptr.module_map() if block_pointers else {})}


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
    if "not supported in this architecture" in str(err) and "fp8" in str(err):
        return ("\nthe rvtune backend has no fp8 types: load fp16/bf16/fp32 data (convert fp8 tensors with "
                "torch's .to() before the launch)")
    return ""


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
        ir.load_dialects(ctx)
        _backend().load_dialects(ctx)
        src = ASTSource(fn=fn, signature=sig, constexprs=dict(constexprs))
        try:
            mod = src.make_ir(_target(), options, codegen_functions(options), module_map(block_pointers), ctx)
        except CompilationError as e:
            raise FrontendError(f"{_where(fn, e)}in {getattr(fn, '__name__', 'kernel')}: {e}{_advice(e)}") from e
        run_ttir_passes(mod)
        return generic_text(mod)
