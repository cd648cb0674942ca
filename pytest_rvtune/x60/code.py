"""The instructions of a static rv64 ELF's executed functions: address, size, mnemonic, operands, and the (SEW, LMUL)
each vector instruction runs under (vtype.py), cached per ELF content.

The X60 model prices every instruction a launch executed. The QEMU plugin says which blocks ran and how often
(their addresses and bytes); this module says what the instructions at those addresses are. A static ELF's code
does not change while it runs, so the disassembly of the file (llvm-objdump-19, the toolchain's disassembler) is
the disassembly of what ran. Only the functions (the symbol table's) holding executed addresses are read: the
vtype dataflow is local to a function (unknown at its entry and after calls), and a launch runs a few dozen of a
static ELF's thousand-odd functions (disassembling and analysing them all took 3-6 s an ELF, these 0.3 s).

What was read is cached under ``<cache>/x60/code/<sha256[:2]>/<sha256>.json`` per function, and extended when a
later run of the same ELF executes more of it; CODE_VERSION and the disassembler's version are part of the record,
so a change in how it is made is never mixed with an old one. Nothing here knows pytest.
"""

from __future__ import annotations

import bisect
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.elf_symbols import ElfFormatError, read_symbols
from pytest_rvtune.hashing import sha256_file
from pytest_rvtune.toolchain import find_tool, tool_version
from pytest_rvtune.x60.insn import Insn, VType, parse_objdump
from pytest_rvtune.x60.vtype import attribute_vtypes

#: Bump when the record's content or the vtype analysis changes: older records are then not read.
CODE_VERSION = 2

#: Every extension the toolchain's -march can emit (rv64gcv and the bit-manipulation ones clang may use).
DISASSEMBLE_MATTR = "+v,+c,+m,+a,+f,+d,+zfh,+zvfh,+zba,+zbb,+zbs,+zicond"


class CodeError(RuntimeError):
    """The ELF cannot be read or disassembled; the message names the file."""


@dataclass(frozen=True)
class Function:
    start: int
    end: int  # its symbol's size, or up to the next function when the symbol has none
    name: str


@dataclass
class ElfCode:
    """An ELF's instructions by address (of the functions read so far) and each vector instruction's vtype (None:
    not known statically, see vtype.py)."""

    sha256: str
    insns: dict[int, Insn] = field(default_factory=dict)
    vtypes: dict[int, VType | None] = field(default_factory=dict)
    functions: list[Function] = field(default_factory=list)  # every function of the ELF, by address
    read: set[int] = field(default_factory=set)  # starts of the functions whose code is in insns
    _starts: list[int] = field(default_factory=list, repr=False)

    def function_at(self, addr: int) -> Function | None:
        if len(self._starts) != len(self.functions):
            self._starts = [f.start for f in self.functions]
        k = bisect.bisect_right(self._starts, addr) - 1
        if k >= 0 and self.functions[k].start <= addr < self.functions[k].end:
            return self.functions[k]
        return None


def function_table(elf: Path) -> list[Function]:
    """The ELF's functions (symbol table STT_FUNC symbols), by address, one per address."""
    try:
        table = read_symbols(elf.read_bytes())
    except (OSError, ElfFormatError) as exc:
        raise CodeError(f"reading the symbols of {elf} failed: {exc}") from exc
    symbols = sorted({(s.address, s.size, s.name) for s in table.functions()})
    functions: list[Function] = []
    for k, (start, size, name) in enumerate(symbols):
        if functions and functions[-1].start == start:
            continue  # an alias (memcpy / __memcpy): one function
        following = next((s for s, _, _ in symbols[k + 1:] if s > start), start + max(size, 2))
        functions.append(Function(start, start + size if size else following, name))
    return functions


def disassemble(elf: Path, functions: Iterable[Function]) -> list[Insn]:
    names = sorted({f.name for f in functions})
    if not names:
        return []
    objdump = find_tool("llvm-objdump-19")
    proc = subprocess.run([objdump, "-d", f"--mattr={DISASSEMBLE_MATTR}", f"--disassemble-symbols={','.join(names)}",
                           str(elf)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CodeError(f"disassembling {elf} failed (llvm-objdump-19 -d): {proc.stderr.strip()[:500]}")
    return parse_objdump(proc.stdout)


def _entry(sha: str) -> Path:
    return paths.cache_dir() / "x60" / "code" / sha[:2] / f"{sha}.json"


def _version() -> str:
    return f"{CODE_VERSION}/{tool_version(find_tool('llvm-objdump-19'))}"


def _load(code: ElfCode) -> None:
    """Add the cached functions of the ELF to ``code``."""
    try:
        data = json.loads(_entry(code.sha256).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return
    if data.get("version") != _version():
        return
    for start, rows in data["functions"].items():
        _add_rows(code, rows)
        code.read.add(int(start))


def _add_rows(code: ElfCode, rows: list[list]) -> None:
    for addr, size, mnemonic, operands, sew, lmul in rows:
        code.insns[addr] = Insn(addr, size, mnemonic, operands)
        if sew >= 0:
            code.vtypes[addr] = (sew, lmul) if sew else None


def _rows(code: ElfCode, function: Function) -> list[list]:
    rows = []
    for addr in sorted(a for a in code.insns if function.start <= a < function.end):
        insn = code.insns[addr]
        vtype = code.vtypes.get(addr)
        sew, lmul = vtype if vtype is not None else (0 if addr in code.vtypes else -1, "")
        rows.append([addr, insn.size, insn.mnemonic, insn.operands, sew, lmul])
    return rows


def _store(code: ElfCode) -> None:
    functions = {f.start: f for f in code.functions}
    record = {"version": _version(),
              "functions": {str(start): _rows(code, functions[start]) for start in sorted(code.read)}}
    entry = _entry(code.sha256)
    entry.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, separators=(",", ":"))
        os.replace(tmp, entry)  # published whole: a reader never sees half a record (the last writer's is kept)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: ELFs read in this process (a session runs the same ELF for several cases): sha256 -> code.
_memo: dict[str, ElfCode] = {}


def elf_code(elf: Path, addresses: Iterable[int], *, reuse: bool = True) -> ElfCode:
    """The ELF's code covering ``addresses`` (the functions holding them, read, analysed and cached if they were
    not yet). ``reuse``: also from this process's memory, where an ELF read once stays."""
    if not elf.is_file():
        raise CodeError(f"{elf}: no such ELF")
    sha = sha256_file(elf)
    code = _memo.get(sha) if reuse else None
    if code is None:
        code = ElfCode(sha, functions=function_table(elf))
        _load(code)
        _memo[sha] = code
    found = (code.function_at(a) for a in addresses)
    needed = {f.start: f for f in found if f is not None and f.start not in code.read}
    if needed:
        insns = [i for i in disassemble(elf, needed.values()) if code.function_at(i.addr) in needed.values()]
        code.insns.update((i.addr, i) for i in insns)
        code.vtypes.update(attribute_vtypes(insns, needed))
        code.read.update(needed)
        _store(code)
    return code
