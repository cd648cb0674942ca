"""The runtime object: the C runtime's precompiled part, compiled once per toolchain and linked into every kernel
that compile_kernel builds.

The RVV GEMM column panels (runtime/rvtune_dot_panels.c) were about half of clang's time on a matmul config when
every kernel compiled its own copies; kernels built here are compiled with :data:`EXTERN_CFLAGS` and call the
copies in this object instead (so does the CPU driver's QEMU mode, whose kernels use the same flags). A kernel C
compiled without those flags keeps them inline.
Nothing here knows pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"

#: The runtime's C file (its headers are in RUNTIME_DIR too).
SOURCE_NAME = "rvtune_dot_panels.c"

#: Defined when compiling a kernel that links this object (rvtune_dot.h: calls instead of inline copies).
EXTERN_CFLAGS: tuple[str, ...] = ("-DRV_DOT_PANELS_EXTERN",)

#: Functions of this object start with this (rv_dot_panel_m8 ... as rvtune_dot.h declares them). Only kernels call
#: them, so the instruction counter counts them as the kernel's own (kernel_insns), as does the board's perf.
KERNEL_HELPER_PREFIX = "rv_dot_panel_"


def runtime_object(cache: BuildCache, tc: Toolchain, flags: Sequence[str], source_hash: str) -> Path | None:
    """The object for ``tc`` (built once, then from ``cache``), or None where there is nothing precompiled
    (the host: its GEMM tiles are specialised for each kernel's compile-time shapes and stay inline).
    ``source_hash`` identifies the runtime's text (compiler_source_hash covers every runtime file)."""
    if tc.isa != RISCV_ISA:
        return None
    key = cache_key(kind="runtime-object", toolchain=tc.fingerprint(), flags=list(flags), source=source_hash)
    obj_name = SOURCE_NAME.replace(".c", ".o")

    def build(tmp: Path) -> None:
        tc.compile(RUNTIME_DIR / SOURCE_NAME, tmp / obj_name, tuple(flags))

    entry, _ = cache.get_or_build("runtime-object", key, build)
    return entry / obj_name
