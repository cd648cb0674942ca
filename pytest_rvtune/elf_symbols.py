"""The defined symbols of a 64-bit little-endian ELF file (an rv64 or x86-64 object or executable), read with
``struct`` from its bytes: no tool, no process, and no pyelftools symbol objects (0.8 s for a static ELF's 2,500
symbols). The one symbol-table reader of the project: ``rvtune count`` (elf_info), the X60 model's function table
(x60/code) and the build's list of a kernel object's functions (build.code_symbols) all read it here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_SHT_SYMTAB = 2
_SHT_NOBITS = 8
STT_OBJECT = 1
STT_FUNC = 2
_SHN_UNDEF = 0
_SHN_LORESERVE = 0xFF00
_SECTION = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym: st_name, st_info, st_other, st_shndx, st_value, st_size


class ElfFormatError(ValueError):
    """Bytes that are not a 64-bit little-endian ELF; the caller names the file."""


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: int  # STT_FUNC or STT_OBJECT
    address: int
    size: int
    section: int


@dataclass(frozen=True)
class ElfSymbols:
    symbols: list[Symbol]
    #: section index -> (address, file offset, size) of allocated sections with file contents
    sections: dict[int, tuple[int, int, int]]

    def functions(self) -> list[Symbol]:
        return [s for s in self.symbols if s.kind == STT_FUNC]


def read_symbols(data: bytes) -> ElfSymbols:
    """Every named, defined function and object symbol of the ELF in ``data``, in symbol-table order (aliases
    and duplicates kept: callers choose). ElfFormatError when ``data`` is not an ELF64 little-endian file."""
    if data[:4] != b"\x7fELF" or len(data) < 64:
        raise ElfFormatError("not an ELF file (no ELF magic, or shorter than an ELF header)")
    if data[4] != 2 or data[5] != 1:
        raise ElfFormatError("not a 64-bit little-endian ELF")
    shoff, shentsize, shnum = struct.unpack_from("<Q", data, 40)[0], *struct.unpack_from("<HH", data, 58)
    if shentsize < _SECTION.size and shnum:
        raise ElfFormatError(f"section headers of {shentsize} bytes (an ELF64 one has {_SECTION.size})")
    sections = [_SECTION.unpack_from(data, shoff + i * shentsize)
                for i in range(shnum) if shoff + i * shentsize + _SECTION.size <= len(data)]
    placed = {index: (s[3], s[4], s[5]) for index, s in enumerate(sections) if s[1] != _SHT_NOBITS and s[3]}
    symbols: list[Symbol] = []
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != _SHT_SYMTAB or link >= len(sections) or entsize < _SYMBOL.size:
            continue
        str_off, str_size = sections[link][4], sections[link][5]
        for at in range(offset, min(offset + size, len(data)) - entsize + 1, entsize):
            st_name, st_info, _, shndx, value, sym_size = _SYMBOL.unpack_from(data, at)
            kind = st_info & 0xF
            if kind not in (STT_FUNC, STT_OBJECT) or shndx == _SHN_UNDEF or shndx >= _SHN_LORESERVE or not st_name:
                continue
            start = str_off + st_name
            end = data.find(b"\0", start, str_off + str_size)
            name = data[start:end if end >= 0 else str_off + str_size].decode("utf-8", "replace")
            if name:
                symbols.append(Symbol(name, kind, value, sym_size, shndx))
    return ElfSymbols(symbols, placed)


__all__ = ["STT_FUNC", "STT_OBJECT", "ElfFormatError", "ElfSymbols", "Symbol", "read_symbols"]
