"""Which (SEW, LMUL) each vector instruction of an ELF runs under: a forward dataflow over the code's control flow.

An RVV instruction's cost on the X60 depends on the vector type in force (``vadd.vv`` e32: m1 1 cycle, m8 8),
which is set by the last vsetvli/vsetivli executed before it. QEMU 7.2 ends a translation block at every
vsetvl*, so the plugin's blocks never hold a vector instruction together with the vsetvli that set its type:
the type must come from the control flow. The analysis:

- the state at an instruction is a vtype, or UNKNOWN;
- a function's entry (a symbol of the ELF), the instruction after a call (``jal``/``jalr`` that links) and after
  an ``ecall`` are UNKNOWN: the RISC-V calling convention leaves vl/vtype unspecified across calls;
- ``vsetvli``/``vsetivli`` set the state from their immediate; ``vsetvl`` (vtype in a register) sets UNKNOWN;
- conditional branches flow to both sides, ``j`` to its target, ``jr``/``ret``/a ``jalr`` that does not link to
  nowhere known; where two paths meet with different types the state is UNKNOWN (no config of the suite has one);
- code no path from an entry reaches (a jump-table target) starts UNKNOWN.

Checked against QEMU's own per-block vtype (``-d exec,nochain``) in tests/test_x60_vtype.py. Nothing here knows
pytest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pytest_rvtune.x60.insn import Insn, VType

_UNKNOWN = "?"
_VTYPE = re.compile(r"\be(8|16|32|64)\s*,\s*(mf[248]|m[1248])\b")
_TARGET = re.compile(r"(?:^|[\s,])(0x[0-9a-f]+)(?:\s*<[^>]*>)?$")

_BRANCHES = frozenset({"beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez", "blez", "bgez", "bltz", "bgtz",
                       "bgt", "ble", "bgtu", "bleu"})


_WHOLE = re.compile(r"^v(?:l([1248])re(8|16|32|64)|l([1248])r|s([1248])r|mv([1248])r)\.v$")


def whole_register_vtype(mnemonic: str) -> VType | None:
    """The vtype a whole-register load, store or move (``vl8re32.v``, ``vs4r.v``, ``vmv2r.v``: spills and
    register copies) is priced at: its register count and element width are in the mnemonic, it runs whatever
    vtype is in force (so the dataflow's answer does not matter for it). None for any other instruction."""
    match = _WHOLE.match(mnemonic)
    if match is None:
        return None
    load_n, eew, plain_n, store_n, move_n = match.groups()
    return (int(eew or 8), f"m{load_n or plain_n or store_n or move_n}")


def decode_vset(insn: Insn) -> VType | None:
    """The vtype a vsetvli/vsetivli sets (``e32, m4, ta, ma``); None for vsetvl (a register) or a form not read."""
    if insn.mnemonic not in ("vsetvli", "vsetivli"):
        return None
    match = _VTYPE.search(insn.operands)
    return (int(match.group(1)), match.group(2)) if match else None


def _target(insn: Insn) -> int | None:
    match = _TARGET.search(insn.operands)
    return int(match.group(1), 16) if match else None


def _links(insn: Insn) -> bool:
    """A jal/jalr that writes a link register (a call): ``jal <f>``, ``jalr a5``, ``jalr ra, 0x0(a5)``; not ``j``,
    ``jr``, ``ret`` nor one whose destination is zero."""
    if insn.mnemonic not in ("jal", "jalr"):
        return False
    return not insn.operands.startswith("zero")


def _flow(insn: Insn, next_addr: int | None) -> tuple[list[int], bool]:
    """(successor addresses, whether the state after the instruction is UNKNOWN)."""
    mnemonic = insn.mnemonic
    fall = [next_addr] if next_addr is not None else []
    if mnemonic in _BRANCHES:
        target = _target(insn)
        return fall + ([target] if target is not None else []), False
    if mnemonic == "j" or (mnemonic == "jal" and not _links(insn)):
        target = _target(insn)
        return ([target] if target is not None else []), False
    if _links(insn) or mnemonic == "ecall":
        return fall, True
    if mnemonic in ("jr", "ret", "jalr", "mret", "sret", "unimp"):
        return [], False
    return fall, False


def attribute_vtypes(insns: Sequence[Insn], entries: Iterable[int]) -> dict[int, VType | None]:
    """Each vector instruction's address -> its vtype, None where the analysis cannot know it."""
    if not insns:
        return {}
    index = {insn.addr: k for k, insn in enumerate(insns)}
    n = len(insns)
    next_addr = [insns[k + 1].addr if k + 1 < n and insns[k + 1].addr == insns[k].addr + insns[k].size else None
                 for k in range(n)]
    flows = [_flow(insns[k], next_addr[k]) for k in range(n)]
    # Basic blocks: a leader is an entry, a target, or follows an instruction that can leave the straight line.
    leaders = {k for k in (index.get(e) for e in entries) if k is not None} | {0}
    for k, (succ, _) in enumerate(flows):
        if succ != [next_addr[k]] or flows[k][1]:
            leaders.update(index[s] for s in succ if s in index)
            if k + 1 < n:
                leaders.add(k + 1)
    starts = sorted(leaders)
    block_end = {s: (starts[i + 1] if i + 1 < len(starts) else n) for i, s in enumerate(starts)}

    state_in: dict[int, VType | str] = {}
    work: list[int] = []

    def merge(k: int, state: VType | str) -> None:
        old = state_in.get(k)
        new = state if old is None or old == state else _UNKNOWN
        if new != old:
            state_in[k] = new
            work.append(k)

    def run() -> None:
        while work:
            start = work.pop()
            state = state_in[start]
            for k in range(start, block_end[start]):
                insn = insns[k]
                if insn.is_vset:
                    state = decode_vset(insn) or _UNKNOWN
                succ, clobbers = flows[k]
                if clobbers:
                    state = _UNKNOWN
                if k + 1 == block_end[start] or succ != [next_addr[k]]:
                    for s in succ:
                        if s in index:
                            merge(index[s], state)

    for k in sorted(index[e] for e in entries if e in index):
        merge(k, _UNKNOWN)
    merge(0, _UNKNOWN)
    run()
    for start in starts:  # code no known path reaches (jump-table targets): its type is not known at its start
        if start not in state_in:
            merge(start, _UNKNOWN)
    run()

    vtypes: dict[int, VType | None] = {}
    for start in starts:
        state = state_in.get(start, _UNKNOWN)
        for k in range(start, block_end[start]):
            insn = insns[k]
            if insn.is_vector:
                vtypes[insn.addr] = state if isinstance(state, tuple) else None
            if insn.is_vset:
                state = decode_vset(insn) or _UNKNOWN
            if flows[k][1]:
                state = _UNKNOWN
    return vtypes
