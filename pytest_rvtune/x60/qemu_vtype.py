"""QEMU's own vtype per executed block, to check the vtype dataflow (vtype.py) against: ``qemu-riscv64 -d
exec,nochain`` prints one line per executed translation block with its TB flags, and QEMU 7.2 ends a block at every
vsetvl*, so all of a block's vector instructions run under the flags its line shows.

TB flags in QEMU 7.2 (target/riscv/cpu.h): ``FIELD(TB_FLAGS, LMUL, 3, 3)`` and ``FIELD(TB_FLAGS, SEW, 6, 3)`` hold
vtype's vlmul and vsew fields, ``FIELD(TB_FLAGS, VILL, 12, 1)`` says no valid vtype. Used by tests/test_x60_vtype.py
and benchmarks/x60_vtype_check.py. Nothing here knows pytest.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

from pytest_rvtune.toolchain import qemu_command
from pytest_rvtune.x60.code import ElfCode
from pytest_rvtune.x60.insn import Insn, VType
from pytest_rvtune.x60.vtype import whole_register_vtype

_LMUL = {0: "m1", 1: "m2", 2: "m4", 3: "m8", 5: "mf8", 6: "mf4", 7: "mf2"}
_TRACE = re.compile(r"^Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/([0-9a-f]+)/")


class QemuTraceError(RuntimeError):
    """The program failed under QEMU; the message has the tail of its stderr."""


def qemu_block_vtypes(elf: Path, argv: list[str], log: Path) -> list[tuple[int, VType | None]]:
    """(block address, the vtype QEMU ran it under, None if vill) of every executed block."""
    proc = subprocess.run([*qemu_command(), "-d", "exec,nochain", "-D", str(log), str(elf), *argv],
                          capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise QemuTraceError(f"{elf} failed under QEMU (exit {proc.returncode}): {proc.stderr[-2000:]}")
    seen: list[tuple[int, VType | None]] = []
    with log.open() as f:
        for line in f:
            match = _TRACE.match(line)
            if match:
                flags = int(match.group(2), 16)
                vtype = None if (flags >> 12) & 1 else (8 << ((flags >> 6) & 7), _LMUL[(flags >> 3) & 7])
                seen.append((int(match.group(1), 16), vtype))
    return seen


def _ends_block(insn: Insn) -> bool:
    return insn.is_vset or insn.mnemonic in ("j", "jal", "jalr", "jr", "ret", "ecall") or (
        insn.mnemonic.startswith("b") and insn.operands.count(",") >= 1 and "0x" in insn.operands)


def compare(code: ElfCode, seen: list[tuple[int, VType | None]]) -> tuple[Counter[VType], list[str]]:
    """(executed vector instructions per vtype that agree, the disagreements), walking each executed block from
    its start to the first instruction that ends a translation block."""
    order = sorted(code.insns)
    position = {addr: k for k, addr in enumerate(order)}
    agree: Counter[VType] = Counter()
    wrong: list[str] = []
    for pc, vtype in set(seen):
        k = position.get(pc)
        while k is not None and k < len(order):
            insn = code.insns[order[k]]
            if _ends_block(insn):
                break
            if insn.is_vector and whole_register_vtype(insn.mnemonic) is None:  # those run under any vtype
                ours = code.vtypes.get(insn.addr)
                if ours is not None and ours == vtype:
                    agree[ours] += 1
                else:
                    wrong.append(f"{insn.addr:#x} {insn.mnemonic} {insn.operands}: ours {ours}, QEMU {vtype}")
            k += 1
    return agree, wrong
