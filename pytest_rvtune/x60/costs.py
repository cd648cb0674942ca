"""The SpacemiT X60's instruction costs, looked up by mnemonic and vtype (data: ``x60_costs.json``).

``load_costs().vector("vle32.v", sew=32, lmul="m8", masked=False)`` gives a `Cost`: cycles per instruction
(reciprocal throughput, measured on the chip by rvv-bench), the result latency where LLVM's X60 scheduling model
states one, and ``stand_in``: None for a measured figure, else what stood in and why. The table's sources and
revisions are in ``CostTable.provenance`` (regenerate the file with ``scripts/x60_costs.py``).

Stand-in rules, tried in this order for a vector instruction (each says so in ``stand_in``):

1. Whole-register loads/stores (spills), which the page does not measure: the occupancy LLVM's X60 model gives
   their class (``WriteVLD8R``: 16 cycles; measured by its authors), else ``vl<n>re<eew>.v`` as the unit-stride
   load ``vle<eew>.v`` at e<eew>m<n> and ``vs<n>r.v`` as ``vse8.v`` at e8m<n>. A whole-register move
   ``vmv<n>r.v`` at a vtype the page skipped: its figure at LMUL m<n> (same SEW).
2. A blank cell of a load/store with the element width in its mnemonic: the same instruction at another vtype
   with the same EMUL (EEW/SEW x LMUL: the same registers and bytes), SEW = EEW preferred.
3. A blank cell, or a mnemonic the page lacks: the same operation in another operand form (.vf <-> .vv,
   .vx <-> .vv <-> .vi, .wx <-> .wv), then its family (e.g. every FP multiply-add costs as ``vfmacc``), at the
   same vtype and masking; for a blank cell, times the two rows' ratio at the nearest LMUL where both are
   measured (``vfnmsac.vf`` e32m8: ``vfmacc.vf``'s 8.0 x 1.25 = 10.0).
4. A masked form with no figure: the unmasked figure x 2 (the page's masked forms cost about twice).
5. A vtype the row does not measure: the nearest measured LMUL of the same SEW, scaled linearly by the LMUL
   ratio (never below the measured figure for a fractional LMUL: below m1 the unit is not faster), then another
   SEW at the same LMUL.
6. A mnemonic the page lacks with no kin on it: the occupancy LLVM's X60 model gives its class (e.g. indexed
   loads ``vluxei<n>.v``: VLMAX/2 cycles).
7. Otherwise: its class's representative (``isa.vector_class``; e.g. a segment load as the strided load).

Scalar instructions: ``add`` and ``mul`` are measured on the page (median over its vtypes); the others take
LLVM's model: occupancy / units of the resource they use (two integer ALUs, two load/store pipes, one FP unit,
divides occupy their unit for the stated cycles), latency as stated, or LLVM's default of 1 where the file
states none. An unknown scalar mnemonic costs as ``add`` (stand-in). vsetvli/vsetivli/vsetvl: LLVM's model
(one integer pipe, one per cycle); the page does not measure them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from pytest_rvtune.x60.isa import (
    base_mnemonic,
    is_vector,
    scalar_sched_write,
    vector_class,
    vector_sched_write,
)

LMULS = ("mf8", "mf4", "mf2", "m1", "m2", "m4", "m8")
LMUL_VALUE = {"mf8": 0.125, "mf4": 0.25, "mf2": 0.5, "m1": 1.0, "m2": 2.0, "m4": 4.0, "m8": 8.0}
SEWS = (8, 16, 32, 64)
DATA_FILE = "x60_costs.json"
MASKED_FACTOR = 2.0

# Representatives of each class for an unknown mnemonic ({sew}: the vtype's SEW).
_CLASS_DEFAULT = {
    "load_unit": "vle{sew}.v", "load_strided": "vlse{sew}.v", "load_indexed": "vlse{sew}.v",
    "load_segment": "vlse{sew}.v", "load_whole": "vle{sew}.v", "store_unit": "vse{sew}.v",
    "store_strided": "vsse{sew}.v", "store_indexed": "vsse{sew}.v", "store_segment": "vsse{sew}.v",
    "store_whole": "vse{sew}.v", "arith": "vadd.vv", "mul": "vmul.vv", "div": "vdiv.vv", "farith": "vfadd.vv",
    "fdiv": "vfdiv.vv", "reduction": "vredsum.vs", "permute": "vrgather.vv", "mask": "vmand.mm",
    "scalar_move": "vmv.x.s",
}

# Families whose members cost alike on the page (rule 3), by operation.
_FAMILIES = [
    ("vfmacc", "vfnmacc", "vfmsac", "vfnmsac", "vfmadd", "vfnmadd", "vfmsub", "vfnmsub"),
    ("vfwmacc", "vfwnmacc", "vfwmsac", "vfwnmsac"),
    ("vmacc", "vnmsac", "vmadd", "vnmsub"),
    ("vfadd", "vfsub", "vfrsub", "vfmin", "vfmax"),
    ("vfmul",),
    ("vfdiv", "vfrdiv"),
    ("vfsgnj", "vfsgnjn", "vfsgnjx"),
    ("vfredusum", "vfredosum", "vfredmin", "vfredmax"),
    ("vredsum", "vredand", "vredor", "vredxor", "vredmin", "vredminu", "vredmax", "vredmaxu"),
    ("vmfeq", "vmfne", "vmflt", "vmfle", "vmfgt", "vmfge"),
    ("vmseq", "vmsne", "vmslt", "vmsltu", "vmsle", "vmsleu", "vmsgt", "vmsgtu"),
    ("vadd", "vsub", "vrsub", "vand", "vor", "vxor", "vmin", "vminu", "vmax", "vmaxu"),
    ("vsll", "vsrl", "vsra"),
    ("vfcvt.f.x.v", "vfcvt.f.xu.v", "vfcvt.x.f.v", "vfcvt.xu.f.v", "vfcvt.rtz.x.f.v", "vfcvt.rtz.xu.f.v"),
]
# Scheduling classes LLVM renamed: the newer name (isa.vector_sched_write) -> the older one, for older model files.
_OLDER_WRITE_NAMES = {"WriteVSlideUpI": "WriteVSlideI", "WriteVSlideDownI": "WriteVSlideI",
                      "WriteVISlide1Up": "WriteVISlide1X", "WriteVISlide1Down": "WriteVISlide1X",
                      "WriteVFSlide1Up": "WriteVFSlide1F", "WriteVFSlide1Down": "WriteVFSlide1F"}
_FORM_ALTERNATIVES = {"vf": ("vv",), "vv": ("vx", "vf", "vi"), "vx": ("vv", "vi"), "vi": ("vx", "vv"),
                      "wx": ("wv",), "wv": ("wx",), "wf": ("wv",), "vxm": ("vvm",), "vim": ("vvm",),
                      "vfm": ("vvm",)}


@dataclass(frozen=True)
class Cost:
    cycles: float  # reciprocal throughput: cycles the unit is busy per instruction
    latency: float | None  # result latency in cycles, when known
    stand_in: str | None  # None when measured; else why/what stood in (e.g. "vl8re32.v: vle32.v e32m8")


class CostTableError(Exception):
    """The packaged cost table is missing or malformed."""


class CostTable:
    """Lookup over the X60 cost data (see the module docstring for the stand-in rules)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        try:
            self.provenance: dict[str, Any] = doc["provenance"]
            self._columns: dict[str, int] = {c: i for i, c in enumerate(doc["columns"])}
            self._rows: dict[str, dict[str, Any]] = doc["vector"]
            self._scalar_rows: dict[str, dict[str, Any]] = doc["scalar"]
            llvm = doc.get("llvm") or {}
            self._writes: dict[str, dict[str, Any]] = llvm.get("sched_writes", {})
            self._resources: dict[str, int] = llvm.get("resources", {})
        except (KeyError, TypeError) as exc:
            raise CostTableError(f"X60 cost table: missing or malformed section {exc}") from exc

    # --- public lookups -------------------------------------------------------------------------------------

    def mnemonics(self) -> list[str]:
        """The vector mnemonics the page measures (stride variants left out)."""
        return sorted(m for m in self._rows if "[" not in m)

    def vector(self, mnemonic: str, *, sew: int, lmul: str, masked: bool) -> Cost:
        """Cycles (and latency) of a vector instruction at vtype e<sew><lmul>; masked: executed with ``v0.t``."""
        if sew not in SEWS:
            raise ValueError(f"X60 cost lookup of {mnemonic!r}: SEW {sew} is not one of {SEWS}")
        if lmul not in LMUL_VALUE:
            raise ValueError(f"X60 cost lookup of {mnemonic!r}: LMUL {lmul!r} is not one of {LMULS}")
        m = base_mnemonic(mnemonic)
        if not is_vector(m):
            return self.scalar(m)
        if vector_class(m) == "config":
            return self._llvm_cost(m, vector_sched_write(m), vector=False)
        cycles, note = self._vector_cycles(m, sew, lmul, masked, depth=0)
        context = f"{m} e{sew}{lmul}{' masked' if masked else ''}"
        return Cost(cycles, self._vector_latency(m, sew, lmul), f"{context}: {note}" if note else None)

    def scalar(self, mnemonic: str) -> Cost:
        """Cycles and latency of a scalar instruction (compressed ones as their base instruction)."""
        m = base_mnemonic(mnemonic)
        if is_vector(m):
            raise ValueError(f"X60 cost lookup: {mnemonic!r} is a vector instruction: use vector() with its vtype")
        write = scalar_sched_write(m)
        kind = self._scalar_kind(write)
        row = next((r for r in self._scalar_rows.values() if r["class"] == kind), None) if kind else None
        if write is not None and row is not None:
            return Cost(float(row["cycles"]), self._scalar_latency(write), None)
        if write is not None and write in self._writes:
            return self._llvm_cost(m, write, vector=False)
        alu = self._scalar_rows.get("add")
        fallback = float(alu["cycles"]) if alu else 0.5
        return Cost(fallback, 1.0, f"{m}: unknown scalar instruction: the ALU figure (add) stood in")

    # --- vector ---------------------------------------------------------------------------------------------

    def _cell(self, m: str, sew: int, lmul: str, masked: bool) -> float | None:
        row = self._rows.get(m)
        column = self._columns.get(f"e{sew}{lmul}")
        if row is None or column is None:
            return None
        cells = row["masked" if masked else "unmasked"]
        return None if cells is None else cells[column]

    def _vector_cycles(self, m: str, sew: int, lmul: str, masked: bool, depth: int) -> tuple[float, str | None]:
        """(cycles, None) for a measured cell, else (cycles, what stood in) by the module's rules."""
        whole = self._whole_register(m)  # rule 1
        if whole is not None:
            kind = "store" if m.startswith("vs") else "load"
            llvm = self._llvm_occupancy(m, sew, lmul)
            if llvm is not None:
                return llvm[0], f"whole-register {kind}: LLVM X60 model's occupancy of {llvm[1]}"
            base, eew, n = whole
            base_value, note = self._vector_cycles(base, eew, f"m{n}", False, depth + 1)
            return base_value, f"whole-register {kind}: {base} e{eew}m{n}" + (f" ({note})" if note else "")
        value = self._cell(m, sew, lmul, masked)
        if value is not None:
            return value, None
        move = re.fullmatch(r"vmv(\d)r\.v", m)  # rule 1: a whole-register move, measured at LMUL = its count
        moved = None if move is None else self._cell(m, sew, f"m{move.group(1)}", masked)
        if moved is not None and move is not None:
            return moved, f"measured at e{sew}m{move.group(1)}"
        if m in self._rows:
            found = self._same_emul(m, sew, lmul, masked)  # rule 2
            if found is not None:
                return found
            for alt in self._alternatives(m):  # rule 3: a measured cell of the same form's kin
                alt_value = self._cell(alt, sew, lmul, masked)
                if alt_value is not None:
                    return self._kin_scaled(m, alt, alt_value, sew, lmul, masked)
            if masked:  # rule 4
                unmasked = self._cell(m, sew, lmul, False)
                if unmasked is not None:
                    return unmasked * MASKED_FACTOR, f"unmasked x {MASKED_FACTOR:g} (blank masked cell)"
            scaled = self._scaled(m, sew, lmul, masked)  # rule 5
            if scaled is not None:
                return scaled
        elif depth < 3:
            for alt in self._alternatives(m):  # rule 3 for a mnemonic the page lacks
                if alt in self._rows:
                    alt_value, alt_note = self._vector_cycles(alt, sew, lmul, masked, depth + 1)
                    return alt_value, f"not in the table: {alt} stood in" + (f" ({alt_note})" if alt_note else "")
            llvm = self._llvm_occupancy(m, sew, lmul)  # rule 6: LLVM's figure for the class
            if llvm is not None:
                return llvm[0], f"not in the table: LLVM X60 model's occupancy of {llvm[1]}"
            cls = vector_class(m)  # rule 7
            default = _CLASS_DEFAULT.get(cls, "vadd.vv").format(sew=sew)
            if default in self._rows:
                alt_value, alt_note = self._vector_cycles(default, sew, lmul, masked, depth + 1)
                return alt_value, f"not in the table: class {cls}, {default} stood in" + (
                    f" ({alt_note})" if alt_note else "")
        registers = max(LMUL_VALUE[lmul], 1.0)
        return registers, f"no figure: {registers:g} cycle(s), one per register of LMUL"

    def _kin_scaled(self, m: str, alt: str, alt_value: float, sew: int, lmul: str,
                    masked: bool) -> tuple[float, str]:
        """A blank cell from its kin's cell at the same vtype, times the two rows' ratio at the nearest LMUL where
        both are measured (``vfnmsac.vf`` runs 1.25x ``vfmacc.vf`` at e32 m1-m4, so its blank m8 is 1.25 x 8)."""
        target = LMUL_VALUE[lmul]
        for other in sorted(LMULS, key=lambda n: (abs(LMUL_VALUE[n] - target), -LMUL_VALUE[n])):
            own, kin = self._cell(m, sew, other, masked), self._cell(alt, sew, other, masked)
            if own is not None and kin:
                ratio = own / kin
                if ratio == 1:
                    break
                return alt_value * ratio, f"{alt} x {ratio:.3g} (rows' ratio at e{sew}{other}) stood in (blank cell)"
        return alt_value, f"{alt} stood in (blank cell)"

    @staticmethod
    def _whole_register(m: str) -> tuple[str, int, int] | None:
        load = re.fullmatch(r"vl(\d)re(\d+)\.v", m)  # vl<n>r.v is vl<n>re8.v (isa.base_mnemonic)
        if load:
            eew = int(load.group(2))
            return f"vle{eew}.v", eew, int(load.group(1))
        store = re.fullmatch(r"vs(\d)r\.v", m)
        if store:
            return "vse8.v", 8, int(store.group(1))
        return None

    def _same_emul(self, m: str, sew: int, lmul: str, masked: bool) -> tuple[float, str] | None:
        eew = re.fullmatch(r"v[ls]s?e(\d+)(ff)?\.v", m)
        if eew is None or m not in self._rows:
            return None
        emul = int(eew.group(1)) / sew * LMUL_VALUE[lmul]
        for other_sew in sorted(SEWS, key=lambda s: (s != int(eew.group(1)), s)):
            other_value = emul * other_sew / int(eew.group(1))
            other = next((name for name, v in LMUL_VALUE.items() if v == other_value), None)
            if other is None or other_sew == sew:
                continue
            value = self._cell(m, other_sew, other, masked)
            if value is not None:
                return value, f"same EMUL measured at e{other_sew}{other}"
        return None

    def _scaled(self, m: str, sew: int, lmul: str, masked: bool) -> tuple[float, str] | None:
        target = LMUL_VALUE[lmul]
        measured = [(name, self._cell(m, sew, name, masked)) for name in LMULS]
        candidates = [(name, v) for name, v in measured if v is not None]
        if candidates:
            name, nearest = min(candidates, key=lambda nv: (abs(LMUL_VALUE[nv[0]] - target), -LMUL_VALUE[nv[0]]))
            factor = max(target, 1.0) / max(LMUL_VALUE[name], 1.0)
            return nearest * factor, f"scaled from e{sew}{name} x {factor:g}"
        for other_sew in sorted(SEWS, key=lambda s: abs(s - sew)):
            other = self._cell(m, other_sew, lmul, masked)
            if other is not None:
                return other, f"measured at e{other_sew}{lmul}"
        return None

    @staticmethod
    def _alternatives(m: str) -> list[str]:
        op, _, form = m.partition(".")
        out = [f"{op}.{alt}" for alt in _FORM_ALTERNATIVES.get(form, ())]
        for family in _FAMILIES:
            if m in family:
                out += [member for member in family if member != m]
            elif op in family:
                forms = [form, *_FORM_ALTERNATIVES.get(form, ())]
                out += [f"{member}.{f}" for f in forms for member in family if member != op]
        return out

    def _vector_latency(self, m: str, sew: int, lmul: str) -> float | None:
        """LLVM's latency for the instruction's scheduling class at this vtype, or None where it states none."""
        write = self._vector_write(m)
        if write is None or write.get("latency_default"):
            return None
        return self._at_vtype(write.get("latency"), m, sew, lmul)

    def _llvm_occupancy(self, m: str, sew: int, lmul: str) -> tuple[float, str] | None:
        """LLVM's occupancy (ReleaseAtCycles on the class's one-unit vector resource) and the class's name."""
        write = self._vector_write(m)
        value = None if write is None else self._at_vtype(write.get("occupancy"), m, sew, lmul)
        return None if value is None else (value, vector_sched_write(m) or "")

    def _vector_write(self, m: str) -> dict[str, Any] | None:
        name = vector_sched_write(m) or ""
        return self._writes.get(name) or self._writes.get(_OLDER_WRITE_NAMES.get(name, ""))

    @staticmethod
    def _at_vtype(value: Any, m: str, sew: int, lmul: str) -> float | None:
        """A per-LMUL (and per-SEW) figure of LLVM's model at this vtype; a load/store naming its element width
        at its EMUL (LLVM's classes are by the data's register group)."""
        if isinstance(value, dict):
            eew = re.fullmatch(r"v[ls]s?e(\d+)(ff)?\.v", m)
            key = lmul.upper()
            if eew is not None:
                emul = int(eew.group(1)) / sew * LMUL_VALUE[lmul]
                key = next((n.upper() for n, v in LMUL_VALUE.items() if v == emul), key)
            value = value.get(key)
            if isinstance(value, dict):
                value = value.get(str(sew))
        return None if value is None else float(value)

    # --- scalar and LLVM-only figures -----------------------------------------------------------------------

    @staticmethod
    def _scalar_kind(write: str | None) -> str | None:
        if write in ("WriteIALU", "WriteIALU32", "WriteShiftReg", "WriteShiftImm", "WriteShiftReg32",
                     "WriteShiftImm32"):
            return "alu"
        if write in ("WriteIMul", "WriteIMul32"):
            return "mul"
        return None

    def _scalar_latency(self, write: str) -> float:
        entry = self._writes.get(write, {})
        latency = entry.get("latency")
        return 1.0 if latency is None else float(latency)

    def _llvm_cost(self, m: str, write: str | None, *, vector: bool) -> Cost:
        entry = self._writes.get(write or "")
        if entry is None:
            return Cost(1.0, None, f"{m}: not in LLVM's X60 model: 1 cycle stood in")
        units = min((self._resources.get(r, 1) for r in entry["resources"]), default=1)
        occupancy = entry.get("occupancy")
        occupancy = 1 if occupancy is None or isinstance(occupancy, dict) else occupancy
        latency = entry.get("latency")
        if isinstance(latency, dict):
            latency = None
        return Cost(float(occupancy) / units, None if latency is None and vector else float(latency or 1), None)


@cache
def load_costs() -> CostTable:
    """The packaged X60 cost table (read once)."""
    try:
        text = resources.files("pytest_rvtune.x60").joinpath(DATA_FILE).read_text()
        doc = json.loads(text)
    except (OSError, json.JSONDecodeError) as exc:
        raise CostTableError(f"X60 cost table pytest_rvtune/x60/{DATA_FILE} unreadable: {exc}; reinstall "
                             "pytest-rvtune or regenerate it with scripts/x60_costs.py") from exc
    return CostTable(doc)
