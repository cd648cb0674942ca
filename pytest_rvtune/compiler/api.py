"""The public build entry: ``compile_kernel(fn, signature, constexprs, isa) -> CompiledKernel``.

Kernel + config -> TTIR (frontend.py) -> C (lower.py) -> objects (clang-19), plus the launcher and the
per-config constants (launcher.py), all in the on-disk cache (cache.py) under ``paths.cache_dir()/compile``:

- ``kernel/<key>``: TTIR, kernel C + object, the config's constants C + object, blk_constants.json. The key
  covers the kernel source and its callees (``fn.cache_key``), signature, constexpr values, LOWERING_VERSION,
  the compiler package's sources, the toolchain fingerprint and our flags.
- ``launcher/<key>``: header, wrapper C + object, keyed by the generated text and the toolchain, so every
  config of a kernel shares one header path (a harness compiled once links against any config).

A cache hit runs no frontend, no lowering and no compiler.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvtune import paths
from pytest_rvtune.compiler import launcher, pch, runtime_object
from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.toolchain import ISAS, RISCV_ISA, Toolchain

#: The compiler package: its sources are part of every cache key.
COMPILER_DIR = Path(__file__).resolve().parent

#: The C runtime header the generated kernels include (rvtune_rt.h).
RUNTIME_DIR = COMPILER_DIR / "runtime"

#: Flags added to the toolchain's for generated code. No -fwrapv: the lowering computes integer ops in
#: unsigned types (defined wrap-around), and -fwrapv would stop clang widening 32-bit loop indices.
KERNEL_CFLAGS: tuple[str, ...] = ("-I", str(RUNTIME_DIR), *runtime_object.EXTERN_CFLAGS)

#: Warnings are noise for generated code (unused values after CSE etc.); clang errors still fail the build.
_QUIET = ("-w",)


@functools.cache
def compiler_source_hash() -> str:
    """Hash of the compiler package sources (Python and the C runtime: its headers and its precompiled part).

    Part of every cache key (and of the Triton backend's hash), so editing the lowering invalidates cached
    builds even when nobody remembered to bump LOWERING_VERSION.
    """
    digest = hashlib.sha256()
    for path in sorted([*COMPILER_DIR.glob("*.py"), *RUNTIME_DIR.glob("*.h"), *RUNTIME_DIR.glob("*.c")]):
        digest.update(path.relative_to(COMPILER_DIR).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class CompileError(RuntimeError):
    """A kernel that cannot be built: names the kernel, the config, the ISA and the failing stage."""


@dataclass(frozen=True)
class CompiledKernel:
    name: str  # the kernel function, e.g. "matmul_kernel"
    isa: str
    config: dict[str, Any]  # the constexpr values built in
    ttir: str = field(repr=False)
    c_source: str = field(repr=False)
    kernel_obj: Path
    launcher_obj: Path
    consts_obj: Path | None  # None when not asked for (compile_kernel's consts_object=False)
    runtime_obj: Path | None  # the runtime's precompiled part (runtime_object.py), None on the host
    header: Path  # <name>_launcher.h: prototypes, wrap, extern block constants (config-independent)
    blk_constants: Path  # blk_constants.json of this config
    params: tuple[Any, ...]  # lower.Param of each non-constexpr argument, in order
    cache_hit: bool  # True when nothing at all had to be built
    kernel_dir: Path = field(repr=False)
    launcher_dir: Path = field(repr=False)

    @property
    def include_dir(self) -> Path:
        """Add with -I when compiling a harness: holds the launcher header."""
        return self.header.parent

    @property
    def objects(self) -> list[Path]:
        """Everything to link with a harness object into an ELF."""
        return [self.kernel_obj, self.launcher_obj, *([self.consts_obj] if self.consts_obj else []),
                *([self.runtime_obj] if self.runtime_obj else [])]


def config_label(constexprs: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in constexprs.items()) or "no constexprs"


def _fail(name: str, constexprs: Mapping[str, Any], isa: str, stage: str, err: Exception) -> CompileError:
    return CompileError(f"kernel {name} [{config_label(constexprs)}] for {isa}: {stage} failed: {err}")


def _kernel_object(cache: BuildCache, tc: Toolchain, name: str, c_source: str) -> Path:
    """The object of one kernel C text with this runtime (rvtune_*.h), compiled once: configs whose lowered C is
    the same (a constexpr the kernel ignores, or one that folds away) share it instead of each running clang."""
    # the runtime headers the C includes are part of the object: compiler_source_hash covers them
    key = cache_key(kind="kernel-object", name=name, c=c_source, toolchain=tc.fingerprint(),
                    flags=[*KERNEL_CFLAGS, *_QUIET], compiler=compiler_source_hash())

    def build(tmp: Path) -> None:
        (tmp / f"{name}.c").write_text(c_source)
        # with the runtime headers precompiled once (pch.py): the same object, a third less of clang's time
        pch.compile_kernel_c(cache, tc, tmp / f"{name}.c", tmp / f"{name}.o", (*KERNEL_CFLAGS, *_QUIET),
                             RUNTIME_DIR)

    entry, _ = cache.get_or_build("kernel-object", key, build)
    return entry / f"{name}.o"


def _consts_object(cache: BuildCache, tc: Toolchain, name: str, constexprs: Mapping[str, Any]) -> tuple[Path, bool]:
    """The object defining a config's block constants (``const int <name>_<CONSTEXPR>``), compiled once."""
    source = launcher.consts_source(name, constexprs)
    key = cache_key(kind="consts", name=name, c=source, toolchain=tc.fingerprint())

    def build(tmp: Path) -> None:
        (tmp / f"{name}_consts.c").write_text(source)
        tc.compile(tmp / f"{name}_consts.c", tmp / f"{name}_consts.o")

    entry, hit = cache.get_or_build("consts", key, build)
    return entry / f"{name}_consts.o", hit


def runtime_object_for(isa: str, cache_root: Path | None = None) -> Path | None:
    """The runtime object every kernel compiled with KERNEL_CFLAGS for ``isa`` links (runtime_object.py; built
    once in the compile cache), or None where there is none (the host)."""
    cache = BuildCache((cache_root or paths.cache_dir()) / "compile")
    return runtime_object.runtime_object(cache, Toolchain.for_isa(isa), (*KERNEL_CFLAGS, *_QUIET),
                                         compiler_source_hash())


def compile_kernel(fn: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any],
                   isa: str = RISCV_ISA, *, cache_root: Path | None = None,
                   consts_object: bool = True) -> CompiledKernel:
    """Build (or fetch from the cache) the objects of ``fn`` specialised on ``constexprs`` for ``isa``.

    ``signature`` gives the Triton type of every non-constexpr parameter (``'*fp32'``, ``'i32'``, ...).
    ``consts_object=False``: no object of the block constants (a harness that never reads them saves a clang
    run per config, and configs whose code is the same then link the same ELF).
    """
    from pytest_rvtune.compiler.frontend import FrontendError, full_signature, kernel_to_ttir
    from pytest_rvtune.compiler.lower import LOWERING_VERSION, LoweringError, Param, lower_ttir

    name = getattr(fn, "__name__", repr(fn))
    constexprs = dict(constexprs)
    if isa not in ISAS:
        raise CompileError(f"kernel {name}: unknown ISA {isa!r}: expected one of {', '.join(ISAS)}")
    try:
        sig = full_signature(fn, dict(signature), constexprs)
    except FrontendError as e:
        raise _fail(name, constexprs, isa, "checking the signature", e) from e
    try:
        consts = launcher.int_constexprs(name, constexprs)
    except launcher.LauncherError as e:
        raise _fail(name, constexprs, isa, "the block constants", e) from e
    tc = Toolchain.for_isa(isa)
    cache = BuildCache((cache_root or paths.cache_dir()) / "compile")

    kernel_key = cache_key(
        kind="kernel", name=name, isa=isa, fn=fn.cache_key, signature=sig,
        constexprs={k: repr(v) for k, v in constexprs.items()},
        lowering=LOWERING_VERSION, compiler=compiler_source_hash(),
        toolchain=tc.fingerprint(), flags=[*KERNEL_CFLAGS, *_QUIET],
    )

    def build_kernel(tmp: Path) -> None:
        try:
            ttir = kernel_to_ttir(fn, dict(signature), constexprs)
        except Exception as e:  # the frontend raises CompilationError, AssertionError, ... on bad kernels
            raise _fail(name, constexprs, isa, "the Triton frontend", e) from e
        (tmp / f"{name}.ttir").write_text(ttir)
        try:
            lowered = lower_ttir(ttir)
        except LoweringError as e:
            raise _fail(name, constexprs, isa, "lowering TTIR to C", e) from e
        if lowered.name != name:  # the launcher and the constants are named after the Python function
            raise _fail(name, constexprs, isa, "lowering TTIR to C",
                        ValueError(f"the lowered kernel is named {lowered.name!r}, not {name!r}"))
        c_file = tmp / f"{name}.c"
        c_file.write_text(lowered.c_source)
        (tmp / f"{name}_consts.c").write_text(launcher.consts_source(name, constexprs))
        (tmp / "blk_constants.json").write_text(launcher.blk_constants_json(name, constexprs))
        try:
            shutil.copyfile(_kernel_object(cache, tc, name, lowered.c_source), tmp / f"{name}.o")
        except Exception as e:
            raise _fail(name, constexprs, isa, "compiling the kernel C", e) from e
        meta = {"params": [[p.name, p.c_type, p.triton_type, p.source] for p in lowered.params]}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    kernel_dir, kernel_hit = cache.get_or_build("kernel", kernel_key, build_kernel)
    meta = json.loads((kernel_dir / "meta.json").read_text())
    params = tuple(Param(*p) for p in meta["params"])

    sources = launcher.launcher_sources(name, params, list(consts))
    launcher_key = cache_key(kind="launcher", isa=isa, header=sources.header, c=sources.launcher_c,
                             toolchain=tc.fingerprint())

    def build_launcher(tmp: Path) -> None:
        (tmp / sources.header_name).write_text(sources.header)
        (tmp / sources.launcher_name).write_text(sources.launcher_c)
        try:
            tc.compile(tmp / sources.launcher_name, tmp / f"{name}_launcher.o")
        except Exception as e:
            raise _fail(name, constexprs, isa, "compiling the launcher", e) from e

    launcher_dir, launcher_hit = cache.get_or_build("launcher", launcher_key, build_launcher)
    consts_obj, consts_hit = None, True
    if consts_object:
        try:
            consts_obj, consts_hit = _consts_object(cache, tc, name, constexprs)
        except Exception as e:
            raise _fail(name, constexprs, isa, "compiling the block constants", e) from e
    try:
        runtime_obj = runtime_object_for(isa, cache_root)
    except Exception as e:
        raise _fail(name, constexprs, isa, f"compiling the runtime ({runtime_object.SOURCE_NAME})", e) from e
    return CompiledKernel(
        name=name, isa=isa, config=constexprs,
        ttir=(kernel_dir / f"{name}.ttir").read_text(),
        c_source=(kernel_dir / f"{name}.c").read_text(),
        kernel_obj=kernel_dir / f"{name}.o",
        launcher_obj=launcher_dir / f"{name}_launcher.o",
        consts_obj=consts_obj,
        runtime_obj=runtime_obj,
        header=launcher_dir / sources.header_name,
        blk_constants=kernel_dir / "blk_constants.json",
        params=params,
        cache_hit=kernel_hit and launcher_hit and consts_hit,
        kernel_dir=kernel_dir, launcher_dir=launcher_dir,
    )
