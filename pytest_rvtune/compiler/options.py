"""The compile options of rvtune: one frozen dataclass and the frontend hooks that go with it, shared by the
frontend (``frontend.kernel_to_ttir``) and the Triton backend Triton discovers (``compiler.RVTuneBackend``),
so a kernel traces the same way through either route.

Imports no Triton at module level: it is imported both before ``triton`` (by the frontend) and while
``triton`` discovers backends (by compiler.py), so Triton's modules are imported where they are used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pytest_rvtune.toolchain import ISAS, RISCV_ISA

if TYPE_CHECKING:
    from triton.backends.compiler import GPUTarget

#: ``GPUTarget.backend`` of every rvtune target; ``arch`` is one of toolchain.ISAS, warp_size is 1 (a program
#: is one CPU thread).
BACKEND_NAME = "riscv"
#: ``GPUTarget.backend`` the CPU driver reports (as triton-cpu's driver does): code that makes a torch device of it
#: (Triton's grouped-GEMM tutorial: ``torch.device(driver.active.get_current_target().backend)``) gets the CPU,
#: where the driver's tensors live. The backend accepts both names.
CPU_BACKEND_NAME = "cpu"


def rvtune_target(isa: str = RISCV_ISA) -> GPUTarget:
    """The GPUTarget that selects this backend for one ISA (``rv64gcv_zvl256b`` or ``host``)."""
    from triton.backends.compiler import GPUTarget

    if isa not in ISAS:
        raise ValueError(f"unknown ISA {isa!r}: expected one of {', '.join(ISAS)}")
    return GPUTarget(BACKEND_NAME, isa, 1)


@dataclass(frozen=True)
class RVTuneOptions:
    """Compile options. Field names the Triton frontend reads (num_warps, debug, sanitize_overflow, dot
    precisions, fp8 lists, arch...) must exist even where they mean nothing on a CPU."""

    num_warps: int = 1
    num_ctas: int = 1
    num_stages: int = 1
    warp_size: int = 1
    enable_fp_fusion: bool = True
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    # The lowering computes every fp32 dot in IEEE fp32, matching the interpreter oracle. The GPU
    # precisions (tf32, tf32x3, bf16x3, bf16x6: faster approximations of fp32) are accepted so kernels and
    # tests that ask for them compile; they get IEEE fp32, which is at least as accurate as each of them.
    default_dot_input_precision: str = "ieee"
    allowed_dot_input_precisions: tuple[str, ...] = ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6")
    max_num_imprecise_acc_default: int = 0
    # The fp8 types the lowering handles (uint8_t bit patterns, runtime/rvtune_fp8.h), and float8e4b15, which
    # Triton 3.9 types as i8 and converts with our codegen hook (fp8e4b15.py).
    supported_fp8_dtypes: tuple[str, ...] = ("fp8e5", "fp8e4nv", "fp8e4b8", "fp8e5b16", "fp8e4b15")
    deprecated_fp8_dot_operand_dtypes: tuple[str, ...] = ()
    extern_libs: tuple[tuple[str, str], ...] | None = None
    debug: bool = False
    # Overflow checks are dead code on our targets and bloat the IR (see reference/triton-frontend.md).
    sanitize_overflow: bool = False
    instrumentation_mode: str = ""
    # Passed by Triton 3.9's JIT on every launch (an fp sanitizer knob): accepted so ``kernel[grid](...)``
    # works through the CPU driver; meaningless here.
    fpsan_homomorphic_casts: bool = False
    # triton-cpu's launch option (``triton.Config(..., num_threads=n)``): 0 = all harts, 1 = serial, N = N
    # threads. Read by the CPU driver's launcher; the kernel C does not depend on it.
    num_threads: int = 0
    arch: str = RISCV_ISA
    backend_name: str = BACKEND_NAME

    def __post_init__(self) -> None:
        # Triton's rule for every backend's options (its test_num_warps_pow2 expects this AssertionError): a
        # kernel tuned here with num_warps=3 would not compile for a GPU either.
        assert self.num_warps > 0 and (self.num_warps & (self.num_warps - 1)) == 0, (
            f"num_warps must be a power of 2, not {self.num_warps}")

    def hash(self) -> str:
        key = "_".join(f"{name}-{value}" for name, value in sorted(self.__dict__.items()))
        return hashlib.sha256(key.encode()).hexdigest()


def parse_options(options: Mapping[str, Any], arch: str = RISCV_ISA) -> RVTuneOptions:
    """RVTuneOptions from Triton's option dict (launch keywords, ``triton.compile(options=...)``): names that
    are not fields are ignored, None means the default, sequences become tuples (the options are hashed)."""
    args: dict[str, Any] = {"arch": arch}
    fields = RVTuneOptions.__dataclass_fields__
    args.update({k: v for k, v in options.items() if k in fields and v is not None})
    for key in ("allowed_dot_input_precisions", "supported_fp8_dtypes", "deprecated_fp8_dot_operand_dtypes"):
        if key in args:
            args[key] = tuple(args[key])
    if isinstance(args.get("extern_libs"), dict):
        args["extern_libs"] = tuple(sorted(args["extern_libs"].items()))
    return RVTuneOptions(**args)


def min_dot_size(lhs_type: Any, rhs_type: Any) -> tuple[int, int, int]:
    # CUDA rejects small tiles (fp32 K < 8); a CPU loop nest has no such limit, so 4x16x4 tiles compile.
    return (1, 1, 1)


def codegen_functions(options: RVTuneOptions) -> dict[str, Any]:
    """The frontend's codegen hooks: ``min_dot_size``, and ``convert_custom_types`` for float8e4b15 (the other fp8
    types convert with tt.fp_to_fp)."""
    from pytest_rvtune.compiler.fp8e4b15 import convert_custom_types

    return {"min_dot_size": min_dot_size, "convert_custom_types": convert_custom_types}


def module_map(block_pointers: bool = True) -> dict[str, ModuleType]:
    """The frontend's module substitutions: ``tl.extra.libdevice`` is CUDA's (the lowering maps its ``__nv_*``
    functions to libm), and block pointers (removed from Triton 3.9) come from our ``triton.language``
    (block_ptr.py) unless ``block_pointers`` is False."""
    from triton.language.extra.cuda import libdevice

    from pytest_rvtune.compiler import block_ptr

    return {"triton.language.extra.libdevice": libdevice, **(block_ptr.module_map() if block_pointers else {})}


__all__ = ["BACKEND_NAME", "CPU_BACKEND_NAME", "RVTuneOptions", "codegen_functions", "min_dot_size", "module_map",
           "parse_options", "rvtune_target"]
