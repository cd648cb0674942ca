"""RISC-V mnemonics as llvm-objdump 19 prints them: which are vector, their class, and LLVM's scheduling class.

Our own mapping (from the RVV 1.0 and base ISA specifications), used by the X60 cost lookup (`costs.py`) and the
cycle model. ``vector_class`` names:

==================  ===================================================================================
``config``          vsetvli, vsetivli, vsetvl
``load_unit``       unit-stride loads: vle<eew>.v, vle<eew>ff.v, vlm.v
``load_strided``    vlse<eew>.v
``load_indexed``    vluxei<eew>.v, vloxei<eew>.v
``load_segment``    vlseg/vlsseg/vluxseg/vloxseg (any nf)
``load_whole``      whole-register loads vl<n>re<eew>.v, vl<n>r.v (spill reloads)
``store_*``         the same five for stores (vse, vsse, vsuxei/vsoxei, vsseg..., vs<n>r.v)
``arith``           integer ALU, shifts, compares, merges, moves, extensions, narrowing, fixed-point
``mul``             integer multiply and multiply-add (also widening)
``div``             integer divide and remainder
``farith``          floating-point add/mul/fma/min/max/sign/compare/convert/move/estimate
``fdiv``            vfdiv, vfrdiv, vfsqrt
``reduction``       vred*, vwred*, vfred*, vfwred*
``permute``         vrgather*, vslide*, vcompress, whole-register moves vmv<n>r.v
``mask``            mask logical (.mm), vcpop.m, vfirst.m, vmsbf/vmsif/vmsof, viota.m, vid.v
``scalar_move``     vmv.x.s, vmv.s.x, vfmv.f.s, vfmv.s.f
``scalar``          not a vector instruction
==================  ===================================================================================
"""

from __future__ import annotations

import re

VECTOR_CLASSES = ("config", "load_unit", "load_strided", "load_indexed", "load_segment", "load_whole",
                  "store_unit", "store_strided", "store_indexed", "store_segment", "store_whole", "arith", "mul",
                  "div", "farith", "fdiv", "reduction", "permute", "mask", "scalar_move")

# Compressed instructions (`-M no-aliases` prints them with `c.`) are costed as the base instruction they expand to.
_COMPRESSED = {
    "c.addi16sp": "addi", "c.addi4spn": "addi", "c.nop": "addi", "c.li": "addi", "c.mv": "add", "c.beqz": "beq",
    "c.bnez": "bne", "c.j": "jal", "c.jal": "jal", "c.jr": "jalr", "c.jalr": "jalr", "c.lwsp": "lw",
    "c.ldsp": "ld", "c.swsp": "sw", "c.sdsp": "sd", "c.flwsp": "flw", "c.fldsp": "fld", "c.fswsp": "fsw",
    "c.fsdsp": "fsd", "c.ebreak": "ebreak",
}


# RVV assembler aliases (pseudoinstructions of the RVV 1.0 specification and older spellings) that llvm-objdump
# prints, as the instruction they stand for: the same instruction, so its measured figure applies.
_VECTOR_ALIASES = {
    "vneg.v": "vrsub.vx", "vnot.v": "vxor.vi", "vwcvt.x.x.v": "vwadd.vx", "vwcvtu.x.x.v": "vwaddu.vx",
    "vncvt.x.x.w": "vnsrl.wx", "vmsgt.vv": "vmslt.vv", "vmsgtu.vv": "vmsltu.vv", "vmsge.vv": "vmsle.vv",
    "vmsgeu.vv": "vmsleu.vv", "vmslt.vi": "vmsle.vi", "vmsltu.vi": "vmsleu.vi", "vmsge.vi": "vmsgt.vi",
    "vmsgeu.vi": "vmsgtu.vi", "vfneg.v": "vfsgnjn.vv", "vfabs.v": "vfsgnjx.vv", "vmmv.m": "vmand.mm",
    "vmcpy.m": "vmand.mm", "vmclr.m": "vmxor.mm", "vmset.m": "vmxnor.mm", "vmnot.m": "vmnand.mm",
    "vfredsum.vs": "vfredusum.vs", "vfwredsum.vs": "vfwredusum.vs", "vpopc.m": "vcpop.m",
    "vmandnot.mm": "vmandn.mm", "vmornot.mm": "vmorn.mm", "vle1.v": "vlm.v", "vse1.v": "vsm.v",
    **{f"vl{n}r.v": f"vl{n}re8.v" for n in (1, 2, 4, 8)},
}


def base_mnemonic(mnemonic: str) -> str:
    """Lower case, no ``c.`` prefix (a compressed instruction as the base instruction it expands to), no atomic
    ordering suffix (``.aq``, ``.rl``, ``.aqrl``), an RVV alias as the instruction it stands for (``vfabs.v`` ->
    ``vfsgnjx.vv``)."""
    m = mnemonic.strip().lower()
    if m.startswith("c."):
        m = _COMPRESSED.get(m, m[2:])
    m = re.sub(r"\.(aqrl|aq|rl)$", "", m)
    return _VECTOR_ALIASES.get(m, m)


def is_vector(mnemonic: str) -> bool:
    """Every RVV mnemonic starts with ``v``; no base, M, A, F, D or C mnemonic does."""
    return base_mnemonic(mnemonic).startswith("v")


_MEMORY = [  # (pattern, class) in order: the first match wins
    (r"vl\d+re\d+\.v|vl\d+r\.v", "load_whole"),
    (r"vs\d+r\.v", "store_whole"),
    (r"vl(s|ux|ox)?seg\d+(e|ei)\d+(ff)?\.v", "load_segment"),
    (r"vs(s|ux|ox)?seg\d+(e|ei)\d+\.v", "store_segment"),
    (r"vle\d+(ff)?\.v|vlm\.v", "load_unit"),
    (r"vse\d+\.v|vsm\.v", "store_unit"),
    (r"vlse\d+\.v", "load_strided"),
    (r"vsse\d+\.v", "store_strided"),
    (r"vl(ux|ox)ei\d+\.v", "load_indexed"),
    (r"vs(ux|ox)ei\d+\.v", "store_indexed"),
]


def vector_class(mnemonic: str) -> str:
    """The class of a mnemonic (see the module docstring); ``scalar`` for a non-vector one."""
    m = base_mnemonic(mnemonic)
    if not m.startswith("v"):
        return "scalar"
    if m in ("vsetvli", "vsetivli", "vsetvl"):
        return "config"
    for pattern, cls in _MEMORY:
        if re.fullmatch(pattern, m):
            return cls
    op = m.split(".")[0]
    if m in ("vmv.x.s", "vmv.s.x", "vfmv.f.s", "vfmv.s.f"):
        return "scalar_move"
    if re.fullmatch(r"v(f|fw|w)?red\w*", op):
        return "reduction"
    if op in ("vfdiv", "vfrdiv", "vfsqrt"):
        return "fdiv"
    if op in ("vdiv", "vdivu", "vrem", "vremu"):
        return "div"
    if op.startswith(("vrgather", "vslide", "vfslide", "vcompress")) or re.fullmatch(r"vmv\dr", op):
        return "permute"
    if m.endswith(".mm") or op in ("vcpop", "vfirst", "vmsbf", "vmsif", "vmsof", "viota", "vid"):
        return "mask"
    if op.startswith("vf") or op.startswith("vmf"):
        return "farith"
    if re.fullmatch(r"v(w)?(mul|mulh|mulhu|mulhsu|mulu|mulsu|macc|maccu|maccsu|maccus|nmsac|madd|nmsub)", op):
        return "mul"
    return "arith"


# --- LLVM scheduling classes (SchedWrite names of llvm/lib/Target/RISCV/RISCVSchedule*.td) -----------------------

_FORM = {"vv": "V", "vx": "X", "vi": "I", "vf": "F", "wv": "V", "wx": "X", "wi": "I", "wf": "F", "vvm": "V",
         "vxm": "X", "vim": "I", "vfm": "F", "vs": "V", "v": "V", "vm": "V", "m": "V"}

_VECTOR_WRITE = {  # op -> SchedWrite stem; the operand form's letter (V/X/I/F) is appended where the stem ends in "*"
    **dict.fromkeys(("vadd", "vsub", "vrsub", "vand", "vor", "vxor"), "WriteVIALU*"),
    **dict.fromkeys(("vmin", "vminu", "vmax", "vmaxu"), "WriteVIMinMax*"),
    **dict.fromkeys(("vsll", "vsrl", "vsra"), "WriteVShift*"),
    **dict.fromkeys(("vmul", "vmulh", "vmulhu", "vmulhsu"), "WriteVIMul*"),
    **dict.fromkeys(("vmacc", "vnmsac", "vmadd", "vnmsub"), "WriteVIMulAdd*"),
    **dict.fromkeys(("vdiv", "vdivu", "vrem", "vremu"), "WriteVIDiv*"),
    **dict.fromkeys(("vmseq", "vmsne", "vmslt", "vmsltu", "vmsle", "vmsleu", "vmsgt", "vmsgtu"), "WriteVICmp*"),
    **dict.fromkeys(("vadc", "vsbc"), "WriteVICALU*"),
    **dict.fromkeys(("vmadc", "vmsbc"), "WriteVICALUM*"),
    "vmerge": "WriteVIMerge*",
    **dict.fromkeys(("vzext", "vsext"), "WriteVExtV"),
    **dict.fromkeys(("vwadd", "vwaddu", "vwsub", "vwsubu"), "WriteVIWALU*"),
    **dict.fromkeys(("vwmul", "vwmulu", "vwmulsu"), "WriteVIWMul*"),
    **dict.fromkeys(("vwmacc", "vwmaccu", "vwmaccsu", "vwmaccus"), "WriteVIWMulAdd*"),
    **dict.fromkeys(("vnsrl", "vnsra"), "WriteVNShift*"),
    **dict.fromkeys(("vnclip", "vnclipu"), "WriteVNClip*"),
    **dict.fromkeys(("vsadd", "vsaddu", "vssub", "vssubu"), "WriteVSALU*"),
    **dict.fromkeys(("vaadd", "vaaddu", "vasub", "vasubu"), "WriteVAALU*"),
    "vsmul": "WriteVSMul*",
    **dict.fromkeys(("vssrl", "vssra"), "WriteVSShift*"),
    **dict.fromkeys(("vfadd", "vfsub", "vfrsub"), "WriteVFALU*"),
    "vfmul": "WriteVFMul*",
    **dict.fromkeys(("vfmacc", "vfnmacc", "vfmsac", "vfnmsac", "vfmadd", "vfnmadd", "vfmsub", "vfnmsub"),
                    "WriteVFMulAdd*"),
    **dict.fromkeys(("vfdiv", "vfrdiv"), "WriteVFDiv*"),
    "vfsqrt": "WriteVFSqrtV",
    **dict.fromkeys(("vfrec7", "vfrsqrt7"), "WriteVFRecpV"),
    **dict.fromkeys(("vfmin", "vfmax"), "WriteVFMinMax*"),
    **dict.fromkeys(("vfsgnj", "vfsgnjn", "vfsgnjx"), "WriteVFSgnj*"),
    **dict.fromkeys(("vmfeq", "vmfne", "vmflt", "vmfle", "vmfgt", "vmfge"), "WriteVFCmp*"),
    "vfclass": "WriteVFClassV",
    "vfmerge": "WriteVFMergeV",
    **dict.fromkeys(("vfwadd", "vfwsub"), "WriteVFWALU*"),
    "vfwmul": "WriteVFWMul*",
    **dict.fromkeys(("vfwmacc", "vfwnmacc", "vfwmsac", "vfwnmsac"), "WriteVFWMulAdd*"),
    **dict.fromkeys(("vredsum", "vredand", "vredor", "vredxor"), "WriteVIRedV_From"),
    **dict.fromkeys(("vredmin", "vredminu", "vredmax", "vredmaxu"), "WriteVIRedMinMaxV_From"),
    **dict.fromkeys(("vwredsum", "vwredsumu"), "WriteVIWRedV_From"),
    "vfredusum": "WriteVFRedV_From",
    "vfredosum": "WriteVFRedOV_From",
    **dict.fromkeys(("vfredmin", "vfredmax"), "WriteVFRedMinMaxV_From"),
    "vfwredusum": "WriteVFWRedV_From",
    "vfwredosum": "WriteVFWRedOV_From",
    "vcpop": "WriteVMPopV",
    "vfirst": "WriteVMFFSV",
    **dict.fromkeys(("vmsbf", "vmsif", "vmsof"), "WriteVMSFSV"),
    "viota": "WriteVIotaV",
    "vid": "WriteVIdxV",
    "vslide1up": "WriteVISlide1Up", "vslide1down": "WriteVISlide1Down",
    "vfslide1up": "WriteVFSlide1Up", "vfslide1down": "WriteVFSlide1Down",
    "vrgatherei16": "WriteVRGatherEI16VV",
    "vcompress": "WriteVCompressV",
}

_VECTOR_WRITE_EXACT = {
    "vsetvli": "WriteVSETVLI", "vsetivli": "WriteVSETIVLI", "vsetvl": "WriteVSETVL",
    "vmv.v.v": "WriteVIMovV", "vmv.v.x": "WriteVIMovX", "vmv.v.i": "WriteVIMovI", "vfmv.v.f": "WriteVFMovV",
    "vmv.x.s": "WriteVMovXS", "vmv.s.x": "WriteVMovSX", "vfmv.f.s": "WriteVMovFS", "vfmv.s.f": "WriteVMovSF",
    "vslideup.vi": "WriteVSlideUpI", "vslidedown.vi": "WriteVSlideDownI", "vslideup.vx": "WriteVSlideUpX",
    "vslidedown.vx": "WriteVSlideDownX", "vlm.v": "WriteVLDM", "vsm.v": "WriteVSTM",
    "vrgather.vv": "WriteVRGatherVV", "vrgather.vx": "WriteVRGatherVX", "vrgather.vi": "WriteVRGatherVI",
}


def vector_sched_write(mnemonic: str) -> str | None:
    """LLVM's SchedWrite of a vector mnemonic (``vadd.vv`` -> ``WriteVIALUV``), or None if we do not map it."""
    m = base_mnemonic(mnemonic)
    if m in _VECTOR_WRITE_EXACT:
        return _VECTOR_WRITE_EXACT[m]
    if m.endswith(".mm"):
        return "WriteVMALUV"
    memory = [
        (r"vle(\d+)\.v", "WriteVLDE"), (r"vle(\d+)ff\.v", "WriteVLDFF"), (r"vse(\d+)\.v", "WriteVSTE"),
        (r"vlse(\d+)\.v", "WriteVLDS{}"), (r"vsse(\d+)\.v", "WriteVSTS{}"), (r"vluxei(\d+)\.v", "WriteVLDUX{}"),
        (r"vloxei(\d+)\.v", "WriteVLDOX{}"), (r"vsuxei(\d+)\.v", "WriteVSTUX{}"), (r"vsoxei(\d+)\.v", "WriteVSTOX{}"),
        (r"vl(\d)re\d+\.v", "WriteVLD{}R"), (r"vl(\d)r\.v", "WriteVLD{}R"), (r"vs(\d)r\.v", "WriteVST{}R"),
        (r"vmv(\d)r\.v", "WriteVMov{}V"),
        (r"vlseg(\d)e(\d+)\.v", "WriteVLSEG{}e{}"), (r"vlseg(\d)e(\d+)ff\.v", "WriteVLSEGFF{}e{}"),
        (r"vsseg(\d)e(\d+)\.v", "WriteVSSEG{}e{}"), (r"vlsseg(\d)e(\d+)\.v", "WriteVLSSEG{}e{}"),
        (r"vssseg(\d)e(\d+)\.v", "WriteVSSSEG{}e{}"), (r"vluxseg(\d)ei(\d+)\.v", "WriteVLUXSEG{}e{}"),
        (r"vloxseg(\d)ei(\d+)\.v", "WriteVLOXSEG{}e{}"), (r"vsuxseg(\d)ei(\d+)\.v", "WriteVSUXSEG{}e{}"),
        (r"vsoxseg(\d)ei(\d+)\.v", "WriteVSOXSEG{}e{}"),
    ]
    for pattern, template in memory:
        found = re.fullmatch(pattern, m)
        if found:
            return template.format(*found.groups()[:template.count("{}")])
    op, _, form = m.partition(".")
    if op.startswith("vfcvt") or op.startswith("vfwcvt") or op.startswith("vfncvt"):
        width = {"vfcvt": "", "vfwcvt": "W", "vfncvt": "N"}[op]
        kind = "IToF" if form.startswith("f.x") else "FToF" if form.startswith(("f.f", "rod.f.f")) else "FToI"
        return f"WriteVF{width}Cvt{kind}V"
    stem = _VECTOR_WRITE.get(op)
    if stem is None:
        return None
    if stem.endswith("*"):  # the operand form's letter, e.g. WriteVIALU* + .vx -> WriteVIALUX
        letter = _FORM.get(form)
        return None if letter is None else stem[:-1] + letter
    return stem


_SCALAR_WRITE = {
    **dict.fromkeys(("add", "addi", "sub", "and", "andi", "or", "ori", "xor", "xori", "slt", "slti", "sltu", "sltiu",
                     "lui", "auipc", "mv", "li", "neg", "not", "seqz", "snez", "sltz", "sgtz", "nop", "zext.b",
                     "sext.b", "sext.h", "zext.h"), "WriteIALU"),
    **dict.fromkeys(("addw", "addiw", "subw", "negw", "sext.w"), "WriteIALU32"),
    **dict.fromkeys(("sll", "srl", "sra"), "WriteShiftReg"),
    **dict.fromkeys(("slli", "srli", "srai"), "WriteShiftImm"),
    **dict.fromkeys(("sllw", "srlw", "sraw"), "WriteShiftReg32"),
    **dict.fromkeys(("slliw", "srliw", "sraiw"), "WriteShiftImm32"),
    **dict.fromkeys(("sh1add", "sh2add", "sh3add", "sh1add.uw", "sh2add.uw", "sh3add.uw", "add.uw", "zext.w"),
                    "WriteSHXADD"),
    **dict.fromkeys(("mul", "mulh", "mulhu", "mulhsu"), "WriteIMul"),
    "mulw": "WriteIMul32",
    **dict.fromkeys(("div", "divu"), "WriteIDiv"),
    **dict.fromkeys(("rem", "remu"), "WriteIRem"),
    **dict.fromkeys(("divw", "divuw"), "WriteIDiv32"),
    **dict.fromkeys(("remw", "remuw"), "WriteIRem32"),
    **dict.fromkeys(("lb", "lbu"), "WriteLDB"), **dict.fromkeys(("lh", "lhu"), "WriteLDH"),
    **dict.fromkeys(("lw", "lwu"), "WriteLDW"), "ld": "WriteLDD",
    "sb": "WriteSTB", "sh": "WriteSTH", "sw": "WriteSTW", "sd": "WriteSTD",
    "flh": "WriteFLD16", "flw": "WriteFLD32", "fld": "WriteFLD64",
    "fsh": "WriteFST16", "fsw": "WriteFST32", "fsd": "WriteFST64",
    **dict.fromkeys(("beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez", "blez", "bgez", "bltz", "bgtz",
                     "bgt", "ble", "bgtu", "bleu"), "WriteJmp"),
    **dict.fromkeys(("j", "jal", "call", "tail"), "WriteJal"),
    **dict.fromkeys(("jr", "jalr", "ret"), "WriteJalr"),
    **dict.fromkeys(("csrr", "csrw", "csrs", "csrc", "csrrw", "csrrs", "csrrc", "csrrwi", "csrrsi", "csrrci",
                     "csrwi", "csrsi", "csrci", "frrm", "fsrm", "fsrmi", "frflags", "fsflags", "fsflagsi", "frcsr",
                     "fscsr", "rdcycle", "rdtime", "rdinstret"), "WriteCSR"),
    **dict.fromkeys(("lr.w", "lr.d"), "WriteAtomicLDW"),
    **dict.fromkeys(("sc.w", "sc.d"), "WriteAtomicSTW"),
}
_FP_WIDTH = {"h": "16", "s": "32", "d": "64"}
_FP_OPS = {"fadd": "WriteFAdd", "fsub": "WriteFAdd", "fmul": "WriteFMul", "fdiv": "WriteFDiv",
           "fsqrt": "WriteFSqrt", "fmin": "WriteFMinMax", "fmax": "WriteFMinMax", "fsgnj": "WriteFSGNJ",
           "fsgnjn": "WriteFSGNJ", "fsgnjx": "WriteFSGNJ", "fmv": "WriteFSGNJ", "fneg": "WriteFSGNJ",
           "fabs": "WriteFSGNJ", "fmadd": "WriteFMA", "fmsub": "WriteFMA", "fnmadd": "WriteFMA",
           "fnmsub": "WriteFMA", "feq": "WriteFCmp", "flt": "WriteFCmp", "fle": "WriteFCmp", "fgt": "WriteFCmp",
           "fge": "WriteFCmp", "fclass": "WriteFClass"}
_INT_WIDTH = {"w": "32", "wu": "32", "l": "64", "lu": "64"}


def scalar_sched_write(mnemonic: str) -> str | None:
    """LLVM's SchedWrite of a scalar mnemonic (``fmadd.s`` -> ``WriteFMA32``), or None if we do not map it."""
    m = base_mnemonic(mnemonic)
    if m in _SCALAR_WRITE:
        return _SCALAR_WRITE[m]
    if re.fullmatch(r"amo\w+\.[wd]", m):
        return "WriteAtomicW" if m.endswith(".w") else "WriteAtomicD"
    parts = m.split(".")
    if parts[0] == "fcvt" and len(parts) == 3:  # fcvt.<to>.<from>
        to, frm = parts[1], parts[2]
        if to in _FP_WIDTH and frm in _FP_WIDTH:
            return f"WriteFCvtF{_FP_WIDTH[frm]}ToF{_FP_WIDTH[to]}"
        if to in _FP_WIDTH and frm in _INT_WIDTH:
            return f"WriteFCvtI{_INT_WIDTH[frm]}ToF{_FP_WIDTH[to]}"
        if frm in _FP_WIDTH and to in _INT_WIDTH:
            return f"WriteFCvtF{_FP_WIDTH[frm]}ToI{_INT_WIDTH[to]}"
        return None
    if parts[0] == "fmv" and len(parts) == 3:  # fmv.x.w, fmv.w.x, fmv.x.d, fmv.d.x, fmv.x.h, fmv.h.x
        to, frm = parts[1], parts[2]
        width = {"w": "32", "d": "64", "h": "16"}
        if to == "x" and frm in width:
            return f"WriteFMovF{width[frm]}ToI{width[frm]}"
        if frm == "x" and to in width:
            return f"WriteFMovI{width[to]}ToF{width[to]}"
        return None
    if len(parts) == 2 and parts[0] in _FP_OPS and parts[1] in _FP_WIDTH:
        return _FP_OPS[parts[0]] + _FP_WIDTH[parts[1]]
    return None
