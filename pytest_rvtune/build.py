"""One item (kernel x case x config x ISA) -> a runnable ELF and the argv that runs it.

    kernel + launcher + per-config consts   (compiler.api.compile_kernel: cached by the compiler)
  + harness object                          (main_cpp/<name>.cpp, or the generated generic one; compiled
                                             once per kernel and ISA: sizes, scalars and grid are argv)
  -> link (static for rv64) into ``cache_dir()/elf/<key[:2]>/<key>/``, key = hash of every object linked
     and of the toolchain, so a second build of the same item does no compiler work at all.

Nothing here knows pytest. Errors name the kernel and the config and carry clang's message.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.compiler.runtime_object import KERNEL_HELPER_PREFIX
from pytest_rvtune.elf_symbols import ElfFormatError, read_symbols
from pytest_rvtune.harness import HEADER, HEADER_DIR
from pytest_rvtune.harness import generate as generic
from pytest_rvtune.hashing import sha256_file
from pytest_rvtune.paths import cache_dir
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain, ToolchainError, find_tool, tool_version

if TYPE_CHECKING:  # the compiler and golden data load triton and torch: imported where an item is built
    from pytest_rvtune.compiler.api import CompiledKernel
    from pytest_rvtune.golden import GoldenSet
    from pytest_rvtune.spec import ConfigValue, KernelSpec, Launch

HarnessKind = Literal["generic", "main_cpp"]

#: Bump when the way objects are combined changes (link flags, argv layout, harness generation).
BUILD_VERSION = "2"

#: Where custom harnesses live: ``main_cpp/<kernel module name>.cpp`` beside the kernels directory (the seeds'
#: convention), so each project brings its own.
MAIN_CPP_DIR_NAME = "main_cpp"

#: Extra flags for harness objects: C++17 for main_cpp files; warnings are errors nowhere (user code).
CXX_FLAGS = ("-std=c++17",)


class BuildError(RuntimeError):
    """A build that failed; the message names kernel and config and carries the compiler's output."""


@dataclass(frozen=True)
class Disassembly:
    """The .s of a linked ELF (llvm-objdump-19 of the kernels' functions and wrappers), made on first use in its
    own cache entry: a session never reads it, a kernel author does (an objdump run per config was 6 % of a cold
    build's CPU)."""

    tc: Toolchain
    elf: Path  # in its content-addressed cache entry: the path names the content
    shown: tuple[tuple[str, Path], ...]  # (kernel name, kernel object): each kernel's functions and its wrapper

    def symbols(self) -> list[str]:
        """The functions the .s shows: each kernel's, its wrapper, and the runtime object's GEMM panels the
        kernels call (their inner loops). Read from the symbol tables here, not at link time: a warm session
        links nothing and reads no .s, and listing symbols per item was a third of its build time."""
        symbols: dict[str, None] = {}
        for name, obj in self.shown:
            symbols.update(dict.fromkeys([name, *code_symbols(obj), f"{name}_wrap"]))
        symbols.update(dict.fromkeys(s for s in code_symbols(self.elf) if s.startswith(KERNEL_HELPER_PREFIX)))
        return list(symbols)

    def path(self) -> Path:
        symbols = self.symbols()
        key = cache_key(kind="asm", version=BUILD_VERSION, elf=str(self.elf), symbols=symbols,
                        objdump=tool_version(self.tc.objdump))
        name = f"{self.elf.name}.s"

        def build(tmp: Path) -> None:
            disassemble(self.tc, self.elf, symbols, tmp / name)

        entry, _ = _cache().get_or_build("asm", key, build)
        return entry / name


@dataclass(frozen=True)
class BuildArtifact:
    """A built item: what a target needs to run it and what a report needs to describe it."""

    elf: Path
    elf_sha256: str
    harness_kind: HarnessKind
    argv: list[str | Path]  # after the run options; Path = a golden file the ELF reads
    cache_hit: bool  # the ELF came from the cache (no compile, no link)
    seconds: float  # wall time build_item spent
    disassembly: Disassembly = dataclasses.field(repr=False, compare=False)
    kernel_symbol: str  # e.g. "matmul_kernel": the QEMU counter plugin's symbol
    c_source: Path | None = None  # the kernel's generated C, in the compiler's cache entry

    def code_field(self) -> dict[str, str]:
        """The record's ``code`` field: where the kernel's C is and what makes its .s later (code_files)."""
        field = {"elf": str(self.elf), "kernel_symbol": self.kernel_symbol,
                 "kernel_obj": str(self.disassembly.shown[0][1])}
        return field | ({"c": str(self.c_source)} if self.c_source else {})

    @property
    def asm(self) -> Path:
        """llvm-objdump-19 disassembly of the kernel's functions and its wrapper in the linked ELF (made now if no
        one asked before)."""
        return self.disassembly.path()


def disassembly_of(elf: Path, kernel_symbol: str, kernel_obj: Path) -> Path:
    """The .s of an ELF built here earlier (a record's ``code`` field), made now if no one asked before: what
    ``BuildArtifact.asm`` gives, for a report made after the session. ToolchainError or OSError if the ELF or
    the object is gone (a cleaned cache) or llvm-objdump-19 is missing."""
    isa = RISCV_ISA if elf.name.endswith(".rv64.elf") else HOST_ISA
    if not elf.is_file() or not kernel_obj.is_file():
        raise FileNotFoundError(f"{elf if not elf.is_file() else kernel_obj} is gone (build cache cleaned?)")
    return Disassembly(Toolchain.for_isa(isa), elf, ((kernel_symbol, kernel_obj),)).path()


def _cache() -> BuildCache:
    return BuildCache(cache_dir())


# ------------------------------------------------------------------------------------------ harness argv
def harness_args_of(launch: Launch, inputs: Mapping[str, Path],
                    expected: Mapping[str, Path]) -> list[generic.HarnessArg]:
    """The launch's non-constexpr args with their role: a tensor with an expected file is written by the
    kernel ("out", or "inout" when it also has an input file); other tensors are read ("in")."""
    out: list[generic.HarnessArg] = []
    seen: dict[str, generic.HarnessArg] = {}  # tensor -> the argument it was passed to first
    for a in launch.args:
        tensor = a.tensor  # None: a scalar argument
        if tensor is None:
            out.append(generic.HarnessArg(a.name, a.type, "scalar"))
            continue
        if tensor in seen:  # passed twice (updated in place through a second parameter): one buffer
            first = seen[tensor]
            if first.ttype != a.type:
                raise generic.HarnessError(
                    f"tensor {tensor!r} is passed to {first.name} as {first.ttype} and to {a.name} as {a.type}: "
                    f"the generic harness cannot reinterpret a buffer; write main_cpp/<kernel>.cpp for this kernel")
            out.append(generic.HarnessArg(a.name, a.type, "alias", label=tensor))
            continue
        written, read = tensor in expected, tensor in inputs
        if not (written or read):
            raise generic.HarnessError(f"tensor {tensor!r} (argument {a.name}) has no golden file: "
                                       "regenerate the golden data (`rvtune golden generate`)")
        role: generic.Role = ("inout" if read else "out") if written else "in"
        seen[tensor] = generic.HarnessArg(a.name, a.type, role, label=tensor)
        out.append(seen[tensor])
    return out


def main_cpp_argv(harness_args: Sequence[generic.HarnessArg], inputs: Mapping[str, Path],
                  expected: Mapping[str, Path], tolerance: Mapping[str, float]) -> list[str | Path]:
    """argv of a main_cpp harness: tolerances, then input files in kernel parameter order, then expected
    files in kernel parameter order (docs/contracts.md, "Harness")."""
    ins = [Path(inputs[a.shown]) for a in harness_args if a.role in ("in", "inout")]
    exps = [Path(expected[a.shown]) for a in harness_args if a.role in ("out", "inout")]
    return ["--atol", repr(float(tolerance["atol"])), "--rtol", repr(float(tolerance["rtol"])), *ins, *exps]


def generic_argv(launch: Launch, harness_args: Sequence[generic.HarnessArg], inputs: Mapping[str, Path],
                 expected: Mapping[str, Path], tolerance: Mapping[str, float]) -> list[str | Path]:
    scalars = {a.name: a.value for a in launch.args if not a.is_pointer}
    by_param_in = {a.name: inputs[a.shown] for a in harness_args if a.role in ("in", "inout")}
    by_param_exp = {a.name: expected[a.shown] for a in harness_args if a.role in ("out", "inout")}
    return generic.argv(harness_args, launch.grid, scalars, by_param_in, by_param_exp,
                        tolerance["atol"], tolerance["rtol"])


# ------------------------------------------------------------------------------------------ objects
def compile_object(tc: Toolchain, kind: str, key: str, source_name: str, source_text: str,
                   include_dirs: Sequence[Path], extra: tuple[str, ...] = ()) -> tuple[Path, bool]:
    """Compile one source text to ``<entry>/obj.o`` in the cache (entry keyed by ``key``, which must cover
    everything the object depends on: the text, the headers it includes, the toolchain, the flags)."""

    def build(tmp: Path) -> None:
        src = tmp / source_name
        src.write_text(source_text)
        flags = (*extra, *(f"-I{d}" for d in include_dirs))
        tc.compile(src, tmp / "obj.o", flags)

    entry, hit = _cache().get_or_build(kind, key, build)
    return entry / "obj.o", hit


def cxx_toolchain(tc: Toolchain) -> Toolchain:
    """The same flags with clang++-19 as driver: C++ sources, and links that need libstdc++."""
    return dataclasses.replace(tc, cc=find_tool("clang++-19"))


def harness_object(tc: Toolchain, symbol: str, launcher_header: Path, main_cpp: Path | None,
                   harness_args: Sequence[generic.HarnessArg]) -> tuple[Path, bool]:
    """The harness object of a kernel for one ISA: built once, whatever the config or case."""
    header_text = launcher_header.read_text()
    extra: tuple[str, ...]
    if main_cpp is not None:
        source, name, driver, extra = main_cpp.read_text(), main_cpp.name, cxx_toolchain(tc), CXX_FLAGS
    else:
        source, name, driver, extra = generic.generate(symbol, harness_args), f"{symbol}_harness.c", tc, ()
    key = cache_key(kind="harness", version=BUILD_VERSION, source=source, name=name,
                    support=HEADER.read_text(), launcher_header=header_text, toolchain=tc.fingerprint(),
                    driver=driver.cc, extra=extra)
    return compile_object(driver, "harness", key, name, source, [HEADER_DIR, launcher_header.parent], extra)


def disassemble(tc: Toolchain, elf: Path, symbols: Sequence[str], out: Path) -> None:
    """The kernel's code as linked, for a kernel author (the whole static ELF would be megabytes of libc)."""
    cmd = [tc.objdump, "-d", "--no-show-raw-insn", f"--disassemble-symbols={','.join(symbols)}", str(elf)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolchainError(f"disassembling {elf} failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
    out.write_text(proc.stdout)


def code_symbols(obj: Path) -> list[str]:
    """Functions an object defines (global and static): the kernel and any helper the lowering emitted. Read
    from its symbol table in process (an llvm-nm-19 run per config was 3 % of a cold build's CPU)."""
    try:
        return list(dict.fromkeys(s.name for s in read_symbols(obj.read_bytes()).functions()))
    except (OSError, ElfFormatError) as exc:
        raise ToolchainError(f"listing the symbols of {obj} failed: {exc}") from exc


def link_elf(tc: Toolchain, objects: Sequence[Path], symbol: str, cxx: bool,
             kernels: Sequence[tuple[str, Path]] | None = None) -> tuple[Path, Disassembly, bool]:
    """Link objects into the content-addressed ELF cache as ``<symbol>.<rv64|host>.elf``: (elf, its disassembly
    (made on first use), cache_hit). ``kernels`` (kernel name, kernel object) are what the .s shows: each
    kernel's functions and its wrapper; by default the one kernel ``symbol`` whose object is objects[0]."""
    linker = cxx_toolchain(tc) if cxx else tc
    shown = [(symbol, objects[0])] if kernels is None else list(kernels)
    key = cache_key(kind="elf", version=BUILD_VERSION, objects=[sha256_file(o) for o in objects],
                    toolchain=tc.fingerprint(), linker=linker.cc, name=symbol,
                    shown=[[name, sha256_file(obj)] for name, obj in shown])
    elf_name = f"{symbol}.{'rv64' if tc.isa == RISCV_ISA else 'host'}.elf"

    def build(tmp: Path) -> None:
        # objects are read from their own cache entries, which are immutable once published
        linker.link(list(objects), tmp / elf_name)

    entry, hit = _cache().get_or_build("elf", key, build)
    return entry / elf_name, Disassembly(tc, entry / elf_name, tuple(shown)), hit


# ------------------------------------------------------------------------------------------ the item
def _golden_files(golden: GoldenSet) -> tuple[dict[str, Path], dict[str, Path]]:
    """(input files, expected files) by tensor name, from a golden.GoldenSet."""
    inputs: dict[str, Path] = {}
    expected: dict[str, Path] = {}
    for f in golden.files:
        (expected if f.role == "expected" else inputs)[f.tensor] = Path(f.path)
    return inputs, expected


def _compiled_objects(ck: CompiledKernel) -> tuple[list[Path], Path]:
    """(objects to link, launcher header) of a compiler.api.CompiledKernel."""
    return list(ck.objects), Path(ck.header)


def main_cpp_path(spec: KernelSpec) -> Path:
    """``<project>/main_cpp/<name>.cpp`` for ``<project>/kernels/<name>.py``."""
    return Path(spec.path).resolve().parent.parent / MAIN_CPP_DIR_NAME / f"{spec.name}.cpp"


def build_item(spec: KernelSpec, case_name: str, config: Mapping[str, ConfigValue], isa: str = RISCV_ISA,
               golden_root: Path | None = None) -> BuildArtifact:
    """Build (or fetch) the ELF of one item; raises BuildError naming kernel and config.

    ``golden_root``: the committed golden tree (default: golden/ beside the kernel's directory)."""
    from pytest_rvtune.compiler.api import compile_kernel
    from pytest_rvtune.golden import Store, golden_set

    started = time.perf_counter()
    config = dict(getattr(config, "kwargs", config))  # a triton.Config or its kwargs dict
    what = f"kernel {spec.name} [case {case_name}, config {spec.config_id(config)}, ISA {isa}]"
    try:
        tc = Toolchain.for_isa(isa)
        launch = spec.capture_launch(case_name, config)
        store = Store(root=golden_root) if golden_root is not None else None
        inputs, expected = _golden_files(golden_set(spec, case_name, config, store=store))
        harness_args = harness_args_of(launch, inputs, expected)
        main_cpp = main_cpp_path(spec)
        custom = main_cpp.is_file()
        # The generic harness never reads the config's block constants (a main_cpp harness may): without them,
        # configs whose kernel code is identical (a constexpr the kernel ignores) link the same ELF, from the
        # cache, and the count cache runs it once for all of them.
        ck = compile_kernel(spec.kernel, launch.signature, launch.constexprs, isa, consts_object=custom)
        objects, launcher_header = _compiled_objects(ck)
        harness_obj, _ = harness_object(tc, launch.kernel, launcher_header, main_cpp if custom else None,
                                        harness_args)
        elf, disassembly, hit = link_elf(tc, [*objects, harness_obj], launch.kernel, cxx=custom)
        if custom:
            argv = main_cpp_argv(harness_args, inputs, expected, spec.tolerance)
        else:
            argv = generic_argv(launch, harness_args, inputs, expected, spec.tolerance)
    except Exception as exc:  # lowering, launch capture, golden data, clang: all fail this item's build
        raise BuildError(f"{what}: {type(exc).__name__}: {exc}") from exc
    return BuildArtifact(elf=elf, elf_sha256=sha256_file(elf), harness_kind="main_cpp" if custom else "generic",
                         argv=argv, cache_hit=hit and bool(getattr(ck, "cache_hit", True)),
                         seconds=time.perf_counter() - started, disassembly=disassembly,
                         kernel_symbol=launch.kernel, c_source=ck.kernel_dir / f"{ck.name}.c")
