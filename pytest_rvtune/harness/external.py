"""Build an ELF from a user's own C++ harness, unchanged (the Triton_RVV ``main/<x>_kernel.cpp`` style).

Their harness includes ``<kernel>_launcher.h`` and their support header, calls ``<kernel>_wrap`` and reads
``<kernel>_<CONSTEXPR>`` block constants; we give it one or several compiled kernels (each with its own
config's constants), compile it and its support sources with clang++-19 for the ISA, and link everything.

Objects and the ELF go to the same content-addressed cache as build.py's items. A source's object is keyed by
its *preprocessed* text (with line markers), so an edit to any header it includes, found on any include path,
makes a new object, and a second build of an unchanged harness compiles nothing. The object is compiled from
that same text, so what was keyed is what was built; the line markers keep clang's messages pointing at the
user's files.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytest_rvtune.build import BUILD_VERSION, CXX_FLAGS, compile_object, cxx_toolchain, link_elf
from pytest_rvtune.compiler.cache import cache_key
from pytest_rvtune.compiler.launcher import header_name
from pytest_rvtune.hashing import sha256_file
from pytest_rvtune.toolchain import Toolchain, ToolchainError

#: ``-D NAME`` or ``-D NAME=VALUE`` with a C identifier and no whitespace (a define is one argv word).
_DEFINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(=\S*)?")

_MISSING_HEADER = re.compile(r"fatal error: '([^']+)' file not found")


class ExternalBuildError(RuntimeError):
    """A user harness that does not build: names the harness file and carries clang's message."""


class KernelObjects(Protocol):
    """What this module needs of compiler.api.CompiledKernel (read-only: CompiledKernel is frozen)."""

    @property
    def name(self) -> str: ...

    @property
    def isa(self) -> str: ...

    @property
    def header(self) -> Path: ...

    @property
    def kernel_obj(self) -> Path: ...

    @property
    def cache_hit(self) -> bool: ...

    @property
    def objects(self) -> list[Path]: ...


@dataclass(frozen=True)
class ExternalElf:
    elf: Path
    asm: Path  # disassembly of every kernel's functions and wrapper, as linked
    cache_hit: bool  # nothing at all was compiled or linked
    sha256: str


def _check_inputs(isa: str, kernels: Sequence[KernelObjects], main_cpp: Path, support_sources: Sequence[Path],
                  include_dirs: Sequence[Path], defines: Sequence[str]) -> None:
    where = f"harness {main_cpp}"
    if not main_cpp.is_file():
        raise ExternalBuildError(f"{where}: no such file")
    for src in support_sources:
        if not Path(src).is_file():
            raise ExternalBuildError(f"{where}: support source {src} does not exist")
    for d in include_dirs:
        if not Path(d).is_dir():
            raise ExternalBuildError(f"{where}: include directory {d} does not exist")
    for define in defines:
        if not _DEFINE.fullmatch(define):
            raise ExternalBuildError(f"{where}: define {define!r} is not NAME or NAME=VALUE (no spaces, no -D)")
    seen: set[str] = set()
    for k in kernels:
        if k.isa != isa:
            raise ExternalBuildError(f"{where}: kernel {k.name} was compiled for {k.isa}, not {isa}")
        if k.name in seen:  # two configs of one kernel define the same symbols: the link would fail
            raise ExternalBuildError(f"{where}: kernel {k.name} is given twice; one ELF holds one config of "
                                     "each kernel")
        seen.add(k.name)


def _missing_header_hint(stderr: str, kernels: Sequence[KernelObjects]) -> str:
    launchers = {header_name(k.name): k.name for k in kernels}
    hints = []
    for header in dict.fromkeys(_MISSING_HEADER.findall(stderr)):
        if header.endswith("_launcher.h") and header not in launchers:
            have = ", ".join(launchers.values()) or "none"
            hints.append(f"{header} not found: the harness calls kernel {header[:-len('_launcher.h')]}, which is "
                         f"not among the kernels given (given: {have})")
        else:
            hints.append(f"{header} not found: add its directory to include_dirs")
    return "".join(f"\n{h}" for h in hints)


def _preprocess(cxx: Toolchain, src: Path, flags: Sequence[str], where: str,
                kernels: Sequence[KernelObjects]) -> str:
    cmd = [cxx.cc, *cxx.cflags, *CXX_FLAGS, *flags, "-E", str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ExternalBuildError(f"{where}: preprocessing {src} failed:{_missing_header_hint(proc.stderr, kernels)}"
                                 f"\n{proc.stderr.strip()}")
    return proc.stdout


def _source_object(tc: Toolchain, src: Path, flags: Sequence[str], where: str,
                   kernels: Sequence[KernelObjects]) -> tuple[Path, bool]:
    cxx = cxx_toolchain(tc)
    text = _preprocess(cxx, src, flags, where, kernels)
    key = cache_key(kind="external", version=BUILD_VERSION, text=text, toolchain=tc.fingerprint(), driver=cxx.cc,
                    extra=CXX_FLAGS)
    try:
        return compile_object(cxx, "external", key, f"{src.stem}.ii", text, [], CXX_FLAGS)
    except ToolchainError as exc:
        raise ExternalBuildError(f"{where}: compiling {src} failed: {exc}") from None


def build_external_elf(isa: str, kernels: Sequence[KernelObjects], main_cpp: Path,
                       support_sources: Sequence[Path] = (), include_dirs: Sequence[Path] = (),
                       defines: Sequence[str] = ()) -> ExternalElf:
    """Compile ``main_cpp`` and ``support_sources`` (C++17, clang++-19, ``-I`` every kernel's launcher header
    directory then ``include_dirs``, ``-D`` each of ``defines``) and link them with every kernel's objects
    into ``<main_cpp stem>.<rv64|host>.elf`` (static for rv64). Raises ExternalBuildError naming the harness."""
    main_cpp = Path(main_cpp).resolve()
    where = f"harness {main_cpp}"
    _check_inputs(isa, kernels, main_cpp, support_sources, include_dirs, defines)
    try:
        tc = Toolchain.for_isa(isa)
    except ToolchainError as exc:
        raise ExternalBuildError(f"{where}: {exc}") from None
    dirs = dict.fromkeys([*(Path(k.header).parent for k in kernels), *(Path(d).resolve() for d in include_dirs)])
    flags = [*(f"-I{d}" for d in dirs), *(f"-D{d}" for d in defines)]
    objects: list[Path] = []
    hits: list[bool] = []
    for src in [main_cpp, *(Path(s).resolve() for s in support_sources)]:
        obj, hit = _source_object(tc, src, flags, where, kernels)
        objects.append(obj)
        hits.append(hit)
    # each kernel's objects, the runtime object they share once (two copies would be duplicate symbols)
    kernel_objects = list(dict.fromkeys(o for k in kernels for o in k.objects))
    try:
        elf, disassembly, hit = link_elf(tc, [*kernel_objects, *objects], main_cpp.stem, cxx=True,
                                         kernels=[(k.name, k.kernel_obj) for k in kernels])
    except ToolchainError as exc:
        hint = ""
        if "undefined symbol" in str(exc):
            hint = ("\nthe harness uses a symbol no object defines: a kernel not given, a block constant its "
                    "config lacks, or a function of a support source not given")
        raise ExternalBuildError(f"{where}: linking failed: {exc}{hint}") from None
    return ExternalElf(elf=elf, asm=disassembly.path(),
                       cache_hit=hit and all(hits) and all(k.cache_hit for k in kernels), sha256=sha256_file(elf))
