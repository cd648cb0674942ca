"""The rvtune Triton backend: ``triton.compile(ASTSource(...), target=GPUTarget("riscv", ISA, 1))``.

Triton finds this module through the ``triton.backends: rvtune`` entry point and requires exactly one concrete
``BaseBackend`` subclass in it. Stages are ``ttir`` (Triton's own TTIR passes) then ``c`` (our lowering). The
C source is this backend's "binary" (``binary_ext = "c"``), so Triton stores it as bytes:
``compiled.asm["c"]`` is UTF-8 bytes, ``compiled.asm["ttir"]`` is text.

This module is imported while ``triton`` itself is being imported (backend discovery), so it must only import
``triton.backends.compiler`` and ``triton._C`` at module level; the lowering is imported when a stage runs.
The options, target and frontend hooks are options.py's, the same ones the frontend (frontend.py) uses.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

if "triton" not in sys.modules:
    # Imported before triton: importing triton now would run its backend discovery, which imports this
    # module again and finds it half-executed (no backend class yet). So step aside and let discovery import
    # a complete copy; importlib hands that copy (what sys.modules holds at the end) to our importer.
    del sys.modules[__name__]
    importlib.import_module("triton")

from triton.backends.compiler import BaseBackend, GPUTarget, Language

from pytest_rvtune.compiler import options as rvtune_options
from pytest_rvtune.compiler.options import BACKEND_NAME, CPU_BACKEND_NAME, RVTuneOptions, rvtune_target
from pytest_rvtune.toolchain import ISAS


class RVTuneBackend(BaseBackend):
    """TTIR -> C for RISC-V (rv64gcv) or the host; C -> objects happens in api.py with clang-19."""

    binary_ext = "c"

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend in (BACKEND_NAME, CPU_BACKEND_NAME) and target.arch in ISAS

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        self.binary_ext = "c"

    def hash(self) -> str:
        from pytest_rvtune.compiler.api import compiler_source_hash
        from pytest_rvtune.compiler.lower import LOWERING_VERSION

        return f"rvtune-{LOWERING_VERSION}-{compiler_source_hash()}-{self.target.arch}"

    def parse_options(self, options: dict) -> RVTuneOptions:
        return rvtune_options.parse_options(options, self.target.arch)

    def pack_metadata(self, metadata: Any) -> tuple[int, ...]:
        return (metadata.num_warps, metadata.num_ctas, metadata.shared)

    def get_codegen_implementation(self, options: RVTuneOptions) -> dict[str, Any]:
        return rvtune_options.codegen_functions(options)

    def get_module_map(self) -> dict[str, ModuleType]:
        return rvtune_options.module_map()

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
        metadata["params"] = [[p.name, p.c_type, p.triton_type, p.source] for p in lowered.params]
        return lowered.c_source.encode()


__all__ = ["BACKEND_NAME", "RVTuneBackend", "RVTuneOptions", "rvtune_target"]
