"""Kernel C and launcher C -> host shared objects (clang-19 -shared -fPIC), loaded with ctypes.

Two libraries per kernel, as Triton's GPU drivers have a module and a launcher: the kernel library (the C
our backend produced, one per specialisation) and the launcher library (``<name>_wrap``, which depends only on
the kernel's parameters, so every config of a kernel shares one). Both live in the content-addressed build
cache under ``paths.cache_dir()/cpu_driver``: a second process loads them without running clang.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_rvtune import paths
from pytest_rvtune.compiler import launcher
from pytest_rvtune.compiler.api import KERNEL_CFLAGS
from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.toolchain import HOST_ISA, Toolchain

#: Generated C is full of harmless warnings (unused values after CSE); clang errors still fail the build.
QUIET = ("-w",)
#: Flags for the kernel C our backend emits (it includes rvtune_rt.h).
KERNEL_C_FLAGS = (*KERNEL_CFLAGS, *QUIET)

_lock = threading.Lock()
_loaded: dict[Path, ctypes.CDLL] = {}
_builds = 0  # binaries this process had to build (cache misses)


class LoadError(RuntimeError):
    """A kernel or launcher that could not be built or loaded; names the kernel."""


def binaries_built() -> int:
    """How many binaries (shared objects, objects, ELFs) this process built with clang; cache hits do not
    count."""
    return _builds


def build_cached(kind: str, name: str, build: Callable[[Path], None], **key_parts: Any) -> Path:
    """The cache entry of a ``kind`` of binary (e.g. ``kernel.so``) for kernel ``name``, keyed by
    ``key_parts``; ``build(tmp_dir)`` fills it on a miss (and counts)."""

    def counted(tmp: Path) -> None:
        global _builds
        try:
            build(tmp)
        except LoadError:
            raise
        except Exception as e:
            raise LoadError(f"kernel {name}: building the {kind} failed: {e}") from e
        _builds += 1

    entry, _ = BuildCache(paths.cache_dir() / "cpu_driver").get_or_build(
        kind, cache_key(kind=kind, name=name, **key_parts), counted)
    return entry


def compile_sources(tc: Toolchain, tmp: Path, files: dict[str, str], main: str, obj: Path,
                    extra_cflags: Sequence[str]) -> None:
    """Write ``files`` into ``tmp`` and compile ``main`` (one of them) to ``obj``."""
    for file_name, text in files.items():
        (tmp / file_name).write_text(text)
    tc.compile(tmp / main, obj, extra=("-I", str(tmp), *extra_cflags))


def _build_shared_object(kind: str, name: str, files: dict[str, str], main: str,
                         extra_cflags: Sequence[str]) -> Path:
    """Compile ``main`` (one of ``files``) for the host and link it into ``lib<name>_<kind>.so``."""
    tc = Toolchain.for_isa(HOST_ISA)
    so_name = f"lib{name}_{kind}.so"
    obj = f"{name}_{kind}.o"

    def build(tmp: Path) -> None:
        compile_sources(tc, tmp, files, main, tmp / obj, extra_cflags)
        # -shared on the link line: the objects are already -fPIC (toolchain.py's host flags).
        tc.link([tmp / obj], tmp / so_name, libs=("-shared", "-lm", "-lpthread"))

    return build_cached(f"{kind}.so", name, build, files=files, cflags=list(extra_cflags),
                        toolchain=tc.fingerprint()) / so_name


def _load(path: Path) -> ctypes.CDLL:
    with _lock:  # one handle per library: dlopen of the same path again would only bump a refcount
        lib = _loaded.get(path)
        if lib is None:
            lib = _loaded[path] = ctypes.CDLL(str(path))
        return lib


def load_kernel(name: str, c_source: str) -> tuple[ctypes.CDLL, int]:
    """The kernel library and the address of its ``<name>`` function (the launcher's ``kernel_ptr``)."""
    c_file = f"{name}.c"
    lib = _load(_build_shared_object("kernel", name, {c_file: c_source}, c_file, KERNEL_C_FLAGS))
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise LoadError(f"kernel {name}: the compiled C defines no function {name!r}") from None
    address = ctypes.cast(fn, ctypes.c_void_p).value
    assert address is not None
    return lib, address


def load_launcher(name: str, params: Sequence[launcher.KernelParam]) -> ctypes.CDLL:
    """The library holding ``<name>_wrap(gridX, gridY, gridZ, num_threads, kernel_ptr, args...)``."""
    try:
        # No constexpr names: the block constants are baked into the kernel C; only harnesses read them.
        sources = launcher.launcher_sources(name, params, [])
    except launcher.LauncherError as e:
        raise LoadError(str(e)) from e
    files = {sources.header_name: sources.header, sources.launcher_name: sources.launcher_c}
    return _load(_build_shared_object("launcher", name, files, sources.launcher_name, QUIET))
