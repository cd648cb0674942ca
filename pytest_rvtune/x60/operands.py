"""The registers an instruction reads and writes, from its disassembly, for the X60 model's dependence latencies.

A vector register operand names a register group: at LMUL m it is m registers (``v8`` at m4 is v8-v11), so a
write of a group and a read of part of it meet. Widening and narrowing forms are approximated by the vtype's
LMUL (their doubled group is not modelled). Memory dependences (a store then a load of the same address) are not
modelled. Nothing here knows pytest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_REG = re.compile(r"(?<![\w.])(zero|ra|sp|gp|tp|t[0-6]|s1[01]|s[0-9]|a[0-7]|f[tsa]\d{1,2}|x\d{1,2}|v\d{1,2})(?![\w])")

#: Scalar stores, vector stores (unit, strided, indexed, whole-register: vse32.v, vsse32.v, vsuxei32.v, vs8r.v) and
#: branches read every operand.
_STORE = re.compile(r"^(sb|sh|sw|sd|fsh|fsw|fsd|vs(e|se|uxei|oxei|\d+r)\d*|vsm)\b")
_BRANCH = re.compile(r"^(b[a-z]+|j|jr|ret)$")

#: Vector forms whose destination is also an input (multiply-accumulate, slide-up keeps vd's head).
_ACCUMULATES = re.compile(r"^v(f?w?n?m(acc|sac|add|sub)|wmacc\w*|slideup|slide1up)")

_LMUL_REGS = {"mf8": 1, "mf4": 1, "mf2": 1, "m1": 1, "m2": 2, "m4": 4, "m8": 8}


@dataclass(frozen=True, slots=True)
class RegUse:
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    accumulator: tuple[str, ...] = ()  # of reads: the destination a multiply-accumulate also reads


def _group(reg: str, lmul: str | None, whole: int | None) -> list[str]:
    if not reg.startswith("v"):
        return [reg]
    base = int(reg[1:])
    size = whole if whole is not None else _LMUL_REGS.get(lmul or "m1", 1)
    return [f"v{r}" for r in range(base, min(base + size, 32))]


def _whole_register_count(mnemonic: str) -> int | None:
    """vl8re32.v / vs4r.v / vmv2r.v move whole registers: the count is in the mnemonic, not the vtype."""
    match = re.match(r"^v(?:l(\d)re\d+|s(\d)r|mv(\d)r)\.v$", mnemonic)
    if match is None:
        return None
    return int(next(g for g in match.groups() if g))


def register_use(mnemonic: str, operands: str, lmul: str | None = None) -> RegUse:
    """What the instruction reads and writes (``x0``/``zero`` never counts). ``v0.t`` (a mask) is read as v0."""
    names = [m.group(1) for m in _REG.finditer(operands)]
    masked = operands.rstrip().endswith("v0.t")
    if masked and names and names[-1] == "v0":
        names = names[:-1]
    whole = _whole_register_count(mnemonic)
    vector = mnemonic.startswith("v")
    reduction = vector and (".vs" in mnemonic)  # vredsum.vs vd, vs2, vs1: vd and vs1 are one register
    writes: list[str] = []
    reads: list[str] = []
    accumulator: list[str] = []
    if mnemonic in ("jal", "jalr") and (not names or names[0] not in ("zero",)):
        # jal <target> / jalr a5 write ra (LLVM prints the link register only when it is not ra)
        link = names[0] if mnemonic == "jal" and names else "ra"
        writes, reads = [link], names[1:] if mnemonic == "jal" else names[-1:]
    elif _STORE.match(mnemonic) or _BRANCH.match(mnemonic):
        reads = names
        if mnemonic == "ret":
            reads = ["ra"]
    elif names:
        writes, reads = names[:1], names[1:]
        if vector and _ACCUMULATES.match(mnemonic):
            reads = [*reads, names[0]]
            accumulator = _group(names[0], lmul, whole)
    if masked:
        reads.append("v0")
    expanded_reads: list[str] = []
    for i, reg in enumerate(reads):
        single = reduction and i == len(reads) - 1  # the scalar operand vs1 of a reduction
        expanded_reads += _group(reg, lmul, 1 if single else whole) if reg != "v0" or not masked else ["v0"]
    expanded_writes: list[str] = []
    for reg in writes:
        expanded_writes += _group(reg, lmul, 1 if reduction else whole)
    return RegUse(tuple(r for r in expanded_reads if r not in ("zero", "x0")),
                  tuple(r for r in expanded_writes if r not in ("zero", "x0")), tuple(accumulator))


_SCALAR_STORE = re.compile(r"^(sb|sh|sw|sd|fsh|fsw|fsd|sc\.[wd])\b")
_MEMORY = re.compile(r"^(l[bhwd]u?|fl[hwd]|s[bhwd]|fs[hwd]|lr\.|sc\.|amo)")


def scalar_unit(mnemonic: str) -> str:
    """The unit class of a scalar instruction (pipeline.UNITS): branch, mem, fp, muldiv, vset or alu."""
    if _BRANCH.match(mnemonic) or mnemonic in ("jal", "jalr"):
        return "branch"
    if _MEMORY.match(mnemonic):
        return "mem"
    if mnemonic.startswith("vset"):
        return "vset"
    if mnemonic.startswith("f") and not mnemonic.startswith("fence"):
        return "fp"
    if mnemonic.startswith(("mul", "div", "rem")):
        return "muldiv"
    return "alu"


def issue_reads(mnemonic: str, use: RegUse) -> tuple[str, ...]:
    """The registers a scalar instruction waits for at issue: a branch waits for none (it is predicted), a store
    not for its data (read late in an in-order pipe), only for its address."""
    if scalar_unit(mnemonic) == "branch":
        return ()
    if _SCALAR_STORE.match(mnemonic) and not mnemonic.startswith("sc."):
        return use.reads[1:]
    return use.reads
