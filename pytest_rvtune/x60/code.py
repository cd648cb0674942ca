"""The instructions of a static rv64 ELF, read once: address, size, mnemonic, operands, and the (SEW, LMUL) each
vector instruction runs under (vtype.py), cached per ELF content.

The X60 model prices every instruction a launch executed. The QEMU plugin says which blocks ran and how often
(their addresses and bytes); this module says what the instructions at those addresses are. A static ELF's code
does not change while it runs, so the disassembly of the file (llvm-objdump-19, the toolchain's disassembler) is
the disassembly of what ran; an address that is not in the file's code (a signal trampoline QEMU made) is decoded
from the block's own bytes by the caller.

The record is cached under ``<cache>/x60/code/<sha256[:2]>/<sha256>.json`` (an ELF is read once, whatever
config, case or run uses it); CODE_VERSION is part of the record, so a change in how it is made is never mixed
with an old one. Nothing here knows pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from pytest_rvtune import paths
from pytest_rvtune.hashing import sha256_file
from pytest_rvtune.toolchain import find_tool, tool_version
from pytest_rvtune.x60.insn import Insn, VType, parse_objdump
from pytest_rvtune.x60.vtype import attribute_vtypes

#: Bump when the record's content or the vtype analysis changes: older records are then not read.
CODE_VERSION = 1

#: Every extension the toolchain's -march can emit (rv64gcv and the bit-manipulation ones clang may use).
DISASSEMBLE_MATTR = "+v,+c,+m,+a,+f,+d,+zfh,+zvfh,+zba,+zbb,+zbs,+zicond"



class CodeError(RuntimeError):
    """The ELF cannot be read or disassembled; the message names the file."""


@dataclass
class ElfCode:
    """An ELF's instructions by address, its function entries, and each vector instruction's vtype (None:
    not known statically, see vtype.py)."""

    sha256: str
    insns: dict[int, Insn]
    entries: frozenset[int]
    vtypes: dict[int, VType | None]


def function_entries(elf: Path) -> frozenset[int]:
    """Addresses of the ELF's functions (its symbol table's STT_FUNC symbols)."""
    try:
        with elf.open("rb") as f:
            table = ELFFile(f).get_section_by_name(".symtab")
            if not isinstance(table, SymbolTableSection):
                return frozenset()
            return frozenset(s["st_value"] for s in table.iter_symbols()
                             if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF")
    except (OSError, ELFError) as exc:
        raise CodeError(f"reading the symbols of {elf} failed: {exc}") from exc


def disassemble(elf: Path) -> list[Insn]:
    objdump = find_tool("llvm-objdump-19")
    proc = subprocess.run([objdump, "-d", f"--mattr={DISASSEMBLE_MATTR}", str(elf)], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise CodeError(f"disassembling {elf} failed (llvm-objdump-19 -d): {proc.stderr.strip()[:500]}")
    return parse_objdump(proc.stdout)


def _entry(sha: str) -> Path:
    return paths.cache_dir() / "x60" / "code" / sha[:2] / f"{sha}.json"


def _version() -> str:
    return f"{CODE_VERSION}/{tool_version(find_tool('llvm-objdump-19'))}"


def _load(sha: str) -> ElfCode | None:
    try:
        data = json.loads(_entry(sha).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if data.get("version") != _version():
        return None
    insns: dict[int, Insn] = {}
    vtypes: dict[int, VType | None] = {}
    for addr, size, mnemonic, operands, sew, lmul in data["insns"]:
        insns[addr] = Insn(addr, size, mnemonic, operands)
        if sew >= 0:
            vtypes[addr] = (sew, lmul) if sew else None
    return ElfCode(sha, insns, frozenset(data["entries"]), vtypes)


def _store(code: ElfCode) -> None:
    rows = []
    for insn in code.insns.values():
        vtype = code.vtypes.get(insn.addr, None)
        sew, lmul = (vtype if vtype is not None else (0 if insn.addr in code.vtypes else -1, ""))
        rows.append([insn.addr, insn.size, insn.mnemonic, insn.operands, sew, lmul])
    entry = _entry(code.sha256)
    entry.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"version": _version(), "entries": sorted(code.entries), "insns": rows}, f,
                      separators=(",", ":"))
        os.replace(tmp, entry)  # published whole: a reader never sees half a record
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: ELFs read in this process (a session runs the same ELF for several cases): sha256 -> code.
_memo: dict[str, ElfCode] = {}


def elf_code(elf: Path) -> ElfCode:
    """The ELF's instructions and vector types, from the cache when it has them."""
    if not elf.is_file():
        raise CodeError(f"{elf}: no such ELF")
    sha = sha256_file(elf)
    if sha in _memo:
        return _memo[sha]
    code = _load(sha)
    if code is None:
        insns = disassemble(elf)
        entries = function_entries(elf)
        code = ElfCode(sha, {i.addr: i for i in insns}, entries, attribute_vtypes(insns, entries))
        _store(code)
    _memo[sha] = code
    return code
