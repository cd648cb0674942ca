"""The rvtune Triton backend: ``triton.compile(ASTSource(...), target=GPUTarget("riscv", ISA, 1))``.

Triton finds this module through the ``triton.backends: rvtune`` entry point and requires exactly one concrete
``BaseBackend`` subclass in it. Stages are ``ttir`` (Triton's own TTIR passes) then ``c`` (our lowering). The
C source is this backend's "binary" (``binary_ext = "c"``), so Triton stores it as bytes:
``compiled.asm["c"]`` is UTF-8 bytes, ``compiled.asm["ttir"]`` is text.

This module is imported while ``triton`` itself is being imported (backend discovery), so it must only import
``triton.backends.compiler`` and ``triton._C`` at module level; the lowering is imported when a stage runs.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

if "triton" not in sys.modules:
    # Imported before triton: importing triton now would run its backend discovery, which imports this
    # module again and finds it half-executed (no backend class yet). So step aside and let discovery import
    # a complete copy; importlib hands that copy (what sys.modules holds at the end) to our importer.
    del sys.modules[__name__]
    importlib.import_module("triton")

from triton.backends.compiler import BaseBackend, GPUTarget, Language

from pytest_rvtune.toolchain import ISAS, RISCV_ISA

#: ``GPUTarget.backend`` of every rvtune target; ``arch`` is one of toolchain.ISAS, warp_size is 1 (a program
#: is one CPU thread).
BACKEND_NAME = "riscv"


def rvtune_target(isa: str = RISCV_ISA) -> GPUTarget:
    """The GPUTarget that selects this backend for one ISA (``rv64gcv_zvl256b`` or ``host``)."""
    if isa not in ISAS:
        raise ValueError(f"unknown ISA {isa!r}: expected one of {', '.join(ISAS)}")
    return GPUTarget(BACKEND_NAME, isa, 1)


def _min_dot_size(lhs_type: Any, rhs_type: Any) -> tuple[int, int, int]:
    # CUDA rejects small tiles (fp32 K < 8); a CPU loop nest has no such limit, so 4x16x4 tiles compile.
    return (1, 1, 1)


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
    supported_fp8_dtypes: tuple[str, ...] = ()
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

    def hash(self) -> str:
        key = "_".join(f"{name}-{value}" for name, value in sorted(self.__dict__.items()))
        return hashlib.sha256(key.encode()).hexdigest()


class RVTuneBackend(BaseBackend):
    """TTIR -> C for RISC-V (rv64gcv) or the host; C -> objects happens in api.py with clang-19."""

    binary_ext = "c"

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == BACKEND_NAME and target.arch in ISAS

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        self.binary_ext = "c"

    def hash(self) -> str:
        from pytest_rvtune.compiler.api import compiler_source_hash
        from pytest_rvtune.compiler.lower import LOWERING_VERSION

        return f"rvtune-{LOWERING_VERSION}-{compiler_source_hash()}-{self.target.arch}"

    def parse_options(self, options: dict) -> RVTuneOptions:
        args: dict[str, Any] = {"arch": self.target.arch}
        fields = RVTuneOptions.__dataclass_fields__
        args.update({k: v for k, v in options.items() if k in fields and v is not None})
        for key in ("allowed_dot_input_precisions", "supported_fp8_dtypes",
                    "deprecated_fp8_dot_operand_dtypes"):
            if key in args:
                args[key] = tuple(args[key])
        if isinstance(args.get("extern_libs"), dict):
            args["extern_libs"] = tuple(sorted(args["extern_libs"].items()))
        return RVTuneOptions(**args)

    def pack_metadata(self, metadata: Any) -> tuple[int, ...]:
        return (metadata.num_warps, metadata.num_ctas, metadata.shared)

    def get_codegen_implementation(self, options: RVTuneOptions) -> dict[str, Any]:
        return {"min_dot_size": _min_dot_size}

    def get_module_map(self) -> dict[str, ModuleType]:
        # Block pointers (removed from Triton 3.9's frontend) through our triton.language (block_ptr.py).
        from pytest_rvtune.compiler.block_ptr import module_map

        return module_map()

    def load_dialects(self, context: Any) -> None:
        # TTIR needs only the core dialects, which triton.compile loads itself.
        pass

    def add_stages(self, stages: dict, options: RVTuneOptions, language: Language) -> None:
        if language != Language.TRITON:
            raise ValueError(f"the rvtune backend compiles Triton kernels only, not {language.name}")
        stages["ttir"] = lambda src, metadata: self.make_ttir(src, metadata, options)
        stages["c"] = lambda src, metadata: self.make_c(src, metadata, options)

    @staticmethod
    def make_ttir(mod: Any, metadata: dict, options: RVTuneOptions) -> Any:
        from pytest_rvtune.compiler.frontend import run_ttir_passes

        run_ttir_passes(mod)
        return mod

    @staticmethod
    def make_c(mod: Any, metadata: dict, options: RVTuneOptions) -> bytes:
        from pytest_rvtune.compiler.frontend import generic_text
        from pytest_rvtune.compiler.lower import lower_ttir

        # The lowering reads MLIR's generic form (with locations); the frontend owns that printer switch.
        lowered = lower_ttir(generic_text(mod))
        metadata["name"] = lowered.name
        metadata["shared"] = 0
        metadata["params"] = [[p.name, p.c_type, p.triton_type] for p in lowered.params]
        return lowered.c_source.encode()
