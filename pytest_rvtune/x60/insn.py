"""One disassembled instruction of an ELF, and llvm-objdump-19's text read into them. Nothing here knows pytest."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: (SEW in bits, LMUL as written: "mf8".."m8").
VType = tuple[int, str]


@dataclass(frozen=True, slots=True)
class Insn:
    addr: int
    size: int
    mnemonic: str
    operands: str

    @property
    def is_vector(self) -> bool:
        """An RVV instruction other than vsetvl*: every RVV mnemonic starts with v, no scalar one does."""
        return self.mnemonic.startswith("v") and not self.mnemonic.startswith("vset")

    @property
    def is_vset(self) -> bool:
        return self.mnemonic in ("vsetvli", "vsetivli", "vsetvl")


_LINE = re.compile(r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{2})+)\s+\t([^\t]+)(?:\t(.*))?$")


def parse_objdump(text: str) -> list[Insn]:
    """llvm-objdump-19 ``-d`` lines ``<addr>: <raw hex> \\t<mnemonic>\\t<operands>`` -> instructions in address
    order (the raw hex is one little-endian word, 4 hex digits for a compressed instruction)."""
    insns = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        addr, raw, mnemonic, operands = match.groups()
        insns.append(Insn(int(addr, 16), len(raw) // 2, mnemonic.strip(), (operands or "").strip()))
    insns.sort(key=lambda i: i.addr)
    return insns
