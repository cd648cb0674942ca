"""What ``rvtune count`` must know about an ELF before it runs it: is it a static rv64 executable, which functions
it defines (the kernel, its launcher), and the block constants a kernel build left in it.

Read with ``struct`` from the file itself (no tool, no process): the ELF header, the program headers (a
``PT_INTERP`` means a dynamic executable, which qemu-user can only run with a riscv64 loader it would have to
find) and the symbol table (elf_symbols). Block constants are the ``const int <kernel>_<NAME>`` objects our launcher
(compiler/launcher.py, ``<name>_consts.c``) and Triton_RVV's triton-cpu launcher both emit per config.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvtune.elf_symbols import STT_FUNC, ElfFormatError, Symbol, read_symbols

EM_RISCV = 243
_PT_INTERP = 3

#: ELF machine numbers people meet, for "this is an x86-64 ELF, not rv64".
_MACHINES = {3: "i386", 40: "ARM", 62: "x86-64", 183: "AArch64", EM_RISCV: "RISC-V"}


class ElfError(ValueError):
    """An ELF ``rvtune count`` cannot run; the message names the file and what to do."""


@dataclass
class ElfInfo:
    path: Path
    functions: dict[str, Symbol] = field(default_factory=dict)
    objects: dict[str, Symbol] = field(default_factory=dict)
    #: section index -> (address, file offset, size) of sections with file contents, for reading objects
    sections: dict[int, tuple[int, int, int]] = field(default_factory=dict)

    def int_constants(self, prefix: str) -> dict[str, int]:
        """``{NAME: value}`` of every 4-byte object ``<prefix>_<NAME>`` with contents in the file: the block
        constants of kernel ``prefix`` (``fused_moe_kernel_BLOCK_SIZE_M`` -> ``BLOCK_SIZE_M``)."""
        data = self.path.read_bytes()
        constants = {}
        for name, sym in self.objects.items():
            if not name.startswith(prefix + "_") or sym.size != 4 or sym.section not in self.sections:
                continue
            address, offset, size = self.sections[sym.section]
            at = offset + sym.address - address
            if address <= sym.address and sym.address + 4 <= address + size and at + 4 <= len(data):
                constants[name[len(prefix) + 1:]] = struct.unpack_from("<i", data, at)[0]
        return constants

    def launcher_candidates(self) -> list[str]:
        """Functions that look like a kernel launcher, by their plain names: ``*_wrap``, also C++-mangled ones
        (``_Z21k_wrapjjj...`` is ``k_wrap``)."""
        return sorted({base for base in map(_wrap_base, self.functions) if base is not None})

    def find_launcher(self, wanted: str) -> str | None:
        """The function named ``wanted``, or the one C++ symbol whose unmangled name it is (their triton-cpu
        launchers are C++: ``fused_moe_kernel_wrap`` is ``_Z21fused_moe_kernel_wrapjjji...``)."""
        if wanted in self.functions:
            return wanted
        mangled = [name for name in self.functions if mangled_base(name) == wanted]
        return mangled[0] if len(mangled) == 1 else None


def mangled_base(name: str) -> str | None:
    """The plain name of an Itanium-mangled free function (``_Z<len><name>...``), else None."""
    if not name.startswith("_Z"):
        return None
    digits = ""
    for ch in name[2:]:
        if not ch.isdigit():
            break
        digits += ch
    if not digits:
        return None
    start = 2 + len(digits)
    base = name[start:start + int(digits)]
    return base if len(base) == int(digits) else None


def _wrap_base(name: str) -> str | None:
    plain = mangled_base(name) or name
    return plain if plain.endswith("_wrap") and len(plain) > len("_wrap") else None


def read_elf(path: Path) -> ElfInfo:
    """The ELF at ``path`` if it is a static rv64 executable; ElfError saying what it is otherwise."""
    if not path.is_file():
        raise ElfError(f"{path}: no such file (give the path of a static rv64 ELF)")
    data = path.read_bytes()
    if data[:4] != b"\x7fELF":
        raise ElfError(f"{path} is not an ELF file (it does not start with the ELF magic): give a static rv64 "
                       "executable, e.g. one built with clang-19 --target=riscv64-linux-gnu -march=rv64gcv -static")
    if data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path} is a {'32' if data[4] == 1 else '?'}-bit or big-endian ELF: rvtune count runs "
                       "64-bit little-endian RISC-V (rv64) ELFs only")
    if len(data) < 64:
        raise ElfError(f"{path}: truncated ELF header ({len(data)} bytes)")
    e_type, machine, _, _entry, phoff, _, _, _, phentsize, phnum = struct.unpack_from("<HHIQQQIHHH", data, 16)
    if machine != EM_RISCV:
        raise ElfError(f"{path} is an ELF for {_MACHINES.get(machine, f'machine {machine}')}, not rv64 RISC-V: "
                       "build it with --target=riscv64-linux-gnu")
    if e_type not in (2, 3):  # EXEC, DYN (static-pie)
        raise ElfError(f"{path} is not an executable (ELF type {e_type}: an object file or core?): link it")
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + 4 <= len(data) and struct.unpack_from("<I", data, at)[0] == _PT_INTERP:
            raise ElfError(f"{path} is dynamically linked (it asks for a program interpreter): rvtune count runs "
                           "static ELFs; link it with -static")
    info = ElfInfo(path=path)
    try:
        table = read_symbols(data)
    except ElfFormatError as exc:
        raise ElfError(f"{path}: unreadable section headers ({exc}): is the file truncated?") from exc
    info.sections.update(table.sections)
    for sym in table.symbols:
        (info.functions if sym.kind == STT_FUNC else info.objects).setdefault(sym.name, sym)
    if not info.functions:
        raise ElfError(f"{path} has no symbol table (stripped?): rvtune count finds the launch window by function "
                       "name; build it without -s / strip")
    return info


__all__ = ["ElfError", "ElfInfo", "Symbol", "mangled_base", "read_elf"]
