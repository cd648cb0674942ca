"""Element-wise ops as C expressions: one scalar element in, one out, with MLIR's exact semantics.

``emitter.py`` decides WHERE an expression is evaluated (once for a scalar, in a loop for a tensor); this
module decides WHAT the expression is. Integer arithmetic goes through unsigned types (wraps, never C UB);
f16/bf16 are uint16_t bit patterns computed in float and rounded back after every op.
"""

from __future__ import annotations

from collections.abc import Callable

from .libdevice import LibdeviceError, libdevice_expr
from .ttir import Op, Type

INT_WIDTH = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}
#: The 8-bit floats (Triton's float8e5, float8e4nv, float8e4b8, float8e5b16): uint8_t bit patterns computed in
#: float, converted by rvtune_fp8.h. Triton 3.9 gives float8e4b15 no MLIR float type (it is i8): not here.
FP8_TYPES = {"f8E5M2": "f8e5m2", "f8E4M3FN": "f8e4m3fn", "f8E4M3FNUZ": "f8e4m3fnuz", "f8E5M2FNUZ": "f8e5m2fnuz"}
FLOAT_TYPES = ("f16", "bf16", "f32", "f64", *FP8_TYPES)
C_SCALAR = {"i1": "uint8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
            "index": "int64_t", "f16": "uint16_t", "bf16": "uint16_t", "f32": "float", "f64": "double",
            **dict.fromkeys(FP8_TYPES, "uint8_t")}


class OpSemanticsError(Exception):
    """An element-wise op (or one of its type combinations) this module cannot express."""


def c_type(t: Type) -> str:
    """C type of one element of ``t`` (pointers become ``T *``)."""
    e = t.element
    if e.pointee is not None:
        return f"{c_type(e.pointee)} *"
    if e.elem not in C_SCALAR:
        raise OpSemanticsError(f"element type {e.elem} has no C representation")
    return C_SCALAR[e.elem]


def _width(t: Type) -> int:
    return INT_WIDTH[t.element.elem or ""]


def _u(w: int) -> str:
    return f"uint{max(w, 8)}_t"


def _s(w: int) -> str:
    return f"int{max(w, 8)}_t" if w > 1 else "uint8_t"


def _wide(w: int) -> str:
    """Unsigned type the arithmetic happens in: at least 32 bits so uint16 * uint16 is never signed int."""
    return "uint64_t" if w > 32 else "uint32_t"


def _sext(e: str, w: int) -> str:
    """The signed value of an element: i1 true is -1."""
    return f"(-(int32_t)({e} & 1))" if w == 1 else e


def to_float(e: str, ftype: str) -> str:
    if ftype in FP8_TYPES:
        return f"rv_{FP8_TYPES[ftype]}_to_f32({e})"
    return {"f16": f"rv_f16_to_f32({e})", "bf16": f"rv_bf16_to_f32({e})"}.get(ftype, e)


def from_float(e: str, ftype: str, rtz: bool = False) -> str:
    """``e`` (a float or double expression) rounded to ``ftype``'s storage: to nearest even, or toward zero."""
    if ftype in FP8_TYPES:
        return f"rv_f32_to_{FP8_TYPES[ftype]}{'_rtz' if rtz else ''}({e})"
    if rtz:
        return {"f16": f"rv_f32_to_f16_rtz({e})", "bf16": f"rv_f32_to_bf16_rtz({e})"}.get(ftype, e)
    return {"f16": f"rv_f32_to_f16({e})", "bf16": f"rv_f32_to_bf16({e})"}.get(ftype, e)


def _fn(name: str, ftype: str) -> str:
    """libm name: ``expf`` for float (and for f16/bf16, computed in float), ``exp`` for double."""
    return name if ftype == "f64" else name + "f"


_INT_BIN: dict[str, str] = {"arith.addi": "+", "arith.subi": "-", "arith.muli": "*"}
_BIT_BIN: dict[str, str] = {"arith.andi": "&", "arith.ori": "|", "arith.xori": "^"}
_INT_HELPER = {"arith.divsi": "divsi", "arith.remsi": "remsi", "arith.divui": "divui", "arith.remui": "remui",
               "arith.floordivsi": "floordivsi", "arith.ceildivsi": "ceildivsi", "arith.ceildivui": "ceildivui",
               "arith.shli": "shli", "arith.shrui": "shrui", "arith.shrsi": "shrsi", "math.absi": "absi",
               "tt.mulhiui": "mulhiui"}
_CMPI = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">=", 6: "<", 7: "<=", 8: ">", 9: ">="}
# cmpf predicates: MLIR's arith::CmpFPredicate numbering.
_CMPF: dict[int, Callable[[str, str], str]] = {
    0: lambda a, b: "0",
    1: lambda a, b: f"({a} == {b})",
    2: lambda a, b: f"({a} > {b})",
    3: lambda a, b: f"({a} >= {b})",
    4: lambda a, b: f"({a} < {b})",
    5: lambda a, b: f"({a} <= {b})",
    6: lambda a, b: f"({a} < {b} || {a} > {b})",
    7: lambda a, b: f"({a} == {a} && {b} == {b})",
    8: lambda a, b: f"!({a} < {b} || {a} > {b})",
    9: lambda a, b: f"!({a} <= {b})",
    10: lambda a, b: f"!({a} < {b})",
    11: lambda a, b: f"!({a} >= {b})",
    12: lambda a, b: f"!({a} > {b})",
    13: lambda a, b: f"({a} != {b})",
    14: lambda a, b: f"({a} != {a} || {b} != {b})",
    15: lambda a, b: "1",
}
_FLOAT_BIN = {"arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/",
              "tt.precise_divf": "/"}
FLOAT_CALL2 = {"arith.remf": "rv_fmod",  # rv_fmod: see rvtune_rt.h (QEMU 7.2 and vfcvt.rtz)
                "arith.maxnumf": "fmax", "arith.minnumf": "fmin",
                "math.copysign": "copysign", "math.powf": "pow", "math.atan2": "atan2"}
FLOAT_CALL1 = {"math.exp": "exp", "math.exp2": "exp2", "math.log": "log", "math.log2": "log2",
                "math.log10": "log10", "math.log1p": "log1p", "math.expm1": "expm1", "math.sqrt": "sqrt",
                "tt.precise_sqrt": "sqrt", "math.absf": "fabs", "math.floor": "floor", "math.ceil": "ceil",
                "math.round": "round", "math.roundeven": "rint", "math.sin": "sin",
                "math.cos": "cos", "math.tan": "tan", "math.asin": "asin", "math.acos": "acos",
                "math.atan": "atan", "math.sinh": "sinh", "math.cosh": "cosh", "math.tanh": "tanh",
                "math.asinh": "asinh", "math.acosh": "acosh", "math.atanh": "atanh", "math.erf": "erf",
                "math.erfc": "erfc", "math.cbrt": "cbrt"}
_CAST_SI = {"arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui"}


def _c_double(value: float) -> str:
    import math

    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "-INFINITY" if value < 0 else "INFINITY"
    return float(value).hex()


def float_literal(value: float, ftype: str) -> str:
    """Exact C spelling of a constant of type ``ftype`` (hex floats; bit patterns for 16-bit types)."""
    import numpy as np

    if ftype in FP8_TYPES:  # a constant expression clang folds; the rounding is rvtune_fp8.h's
        return f"rv_f32_to_{FP8_TYPES[ftype]}({_c_double(value)})"
    if ftype == "f16":
        return f"((uint16_t)0x{int(np.float16(value).view(np.uint16)):04x}u)"
    if ftype == "bf16":
        bits = int(np.float32(value).view(np.uint32))
        if (bits & 0x7FFFFFFF) > 0x7F800000:
            return f"((uint16_t)0x{(bits >> 16) | 0x40:04x}u)"
        return f"((uint16_t)0x{((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF:04x}u)"
    if ftype == "f32":
        f = np.float32(value)
        if not np.isfinite(f):
            return f"rv_bits_f32(0x{int(f.view(np.uint32)):08x}u)"
        return float(f).hex() + "f"
    if not np.isfinite(value):
        return f"rv_bits_f64(0x{int(np.float64(value).view(np.uint64)):016x}ull)"
    return float(value).hex()


def int_literal(value: int, t: Type) -> str:
    w = _width(t)
    if w == 1:
        return f"((uint8_t){value & 1})"
    value &= (1 << w) - 1
    if value >= 1 << (w - 1):
        value -= 1 << w
    if w == 64:
        # -2^63 cannot be written as a literal directly.
        return f"((int64_t){value + 1}ll - 1)" if value == -(1 << 63) else f"((int64_t){value}ll)"
    return f"(({_s(w)}){value})"


def scalar_expr(op: Op, args: list[str]) -> str:
    """C expression of ``op`` applied to one element of each operand (given as C expressions)."""
    name = op.name
    ty = [t.element for t in op.operand_types]
    if not op.result_types:  # callers lower ops that compute a value; one without a result has no expression
        raise OpSemanticsError(f"{name} has no result, so it has no scalar expression")
    rt = op.result_types[0].element
    t0 = ty[0].elem if ty else None

    if name in _INT_BIN or name in _BIT_BIN:
        w = _width(ty[0])
        if w == 1:  # i1 arithmetic is arithmetic mod 2
            sym = {"+": "^", "-": "^", "*": "&"}.get(_INT_BIN.get(name, ""), _BIT_BIN.get(name))
            return f"((uint8_t)(({args[0]} {sym} {args[1]}) & 1))"
        if name in _BIT_BIN:
            return f"(({_s(w)})({args[0]} {_BIT_BIN[name]} {args[1]}))"
        wide, u = _wide(w), _u(w)
        if wide == u:
            return f"(({_s(w)})(({u}){args[0]} {_INT_BIN[name]} ({u}){args[1]}))"
        return f"(({_s(w)})({u})(({wide})({u}){args[0]} {_INT_BIN[name]} ({wide})({u}){args[1]}))"
    if name in _INT_HELPER:
        w = _width(ty[0])
        if w == 1 or (name == "tt.mulhiui" and w not in (32, 64)):
            raise OpSemanticsError(f"{name} on {t0} is not supported")
        return f"rv_{_INT_HELPER[name]}{w}({', '.join(args)})"
    if name in ("arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui"):
        w = _width(ty[0])
        sym = "<" if "min" in name else ">"
        a, b = (args[0], args[1]) if name.endswith("ui") else (_sext(args[0], w), _sext(args[1], w))
        if name.endswith("ui"):
            a, b = f"({_u(w)}){a}", f"({_u(w)}){b}"
        return f"({a} {sym} {b} ? {args[0]} : {args[1]})"
    if name == "arith.cmpi":
        pred, w = op.int_attr("predicate"), _width(ty[0])
        a, b = args
        if ty[0].pointee is not None:
            a, b = f"(uintptr_t){a}", f"(uintptr_t){b}"
        elif pred >= 6:
            a, b = f"({_u(w)}){a}", f"({_u(w)}){b}"
        elif pred >= 2:
            a, b = _sext(a, w), _sext(b, w)
        return f"((uint8_t)({a} {_CMPI[pred]} {b}))"
    if name == "arith.select":
        return f"({args[0]} ? {args[1]} : {args[2]})"
    if name in _CAST_SI:
        return _int_cast(name, ty[0], rt, args[0])
    if name in ("arith.sitofp", "arith.uitofp"):
        w, ft = _width(ty[0]), rt.elem or ""
        src = _sext(args[0], w) if name == "arith.sitofp" else f"({_u(w)}){args[0]}"
        inner = "double" if ft == "f64" else "float"
        return from_float(f"({inner}){src}", ft)
    if name in ("arith.fptosi", "arith.fptoui"):
        w = _width(rt)
        src = to_float(args[0], t0 or "")
        if w == 1:
            return f"((uint8_t)(rv_{name[6:]}8({src}) & 1))"
        return f"rv_{name[6:]}{w}({src})"
    if name in ("arith.extf", "arith.truncf", "tt.fp_to_fp"):
        return _float_cast(op, t0 or "", rt.elem or "", args[0])
    if name == "arith.bitcast" or (name == "tt.bitcast" and rt.pointee is None):
        return _bitcast(ty[0], rt, args[0])
    if name == "tt.bitcast":
        return f"(({c_type(rt)}){args[0]})"
    if name in ("tt.int_to_ptr",):
        return f"(({c_type(rt)})(uintptr_t){args[0]})"
    if name in ("tt.ptr_to_int",):
        return f"(({c_type(rt)})(uintptr_t){args[0]})"
    if name in ("math.ctpop", "math.ctlz", "math.cttz"):
        w = _width(ty[0])
        if w not in (32, 64):
            raise OpSemanticsError(f"{name} on {t0} is not supported")
        sfx, u = ("ll", "uint64_t") if w == 64 else ("", "uint32_t")
        if name == "math.ctpop":
            return f"(({_s(w)})__builtin_popcount{sfx}(({u}){args[0]}))"
        builtin = "__builtin_clz" if name == "math.ctlz" else "__builtin_ctz"
        return f"(({u}){args[0]} == 0 ? {w} : ({_s(w)}){builtin}{sfx}(({u}){args[0]}))"
    if name == "tt.extern_elementwise":
        return _extern(op, args, ty, rt)
    if name == "tt.addptr":
        return f"({args[0]} + (int64_t){args[1]})"

    # Float ops: compute in float (or double), round back for 16-bit storage types.
    if t0 in FLOAT_TYPES:
        return _float_op(op, t0, [to_float(a, t0) for a in args], rt.elem or "")
    raise OpSemanticsError(f"{name} on {t0} is not supported")


def _float_op(op: Op, ft: str, a: list[str], rt: str) -> str:
    name = op.name
    if name == "arith.cmpf":
        return f"((uint8_t){_CMPF[op.int_attr('predicate')](a[0], a[1])})"
    if name in _FLOAT_BIN:
        e = f"({a[0]} {_FLOAT_BIN[name]} {a[1]})"
    elif name == "arith.negf":
        e = f"(-{a[0]})"
    elif name in FLOAT_CALL2:
        e = f"{_fn(FLOAT_CALL2[name], ft)}({a[0]}, {a[1]})"
    elif name in ("arith.maximumf", "arith.minimumf"):
        e = f"rv_{name[6:13]}{'' if ft == 'f64' else 'f'}({a[0]}, {a[1]})"
    elif name in FLOAT_CALL1:
        e = f"{_fn(FLOAT_CALL1[name], ft)}({a[0]})"
    elif name == "math.trunc":  # not libm truncf: see rv_truncf in rvtune_rt.h (QEMU 7.2 and vfcvt.rtz)
        e = f"rv_trunc{'' if ft == 'f64' else 'f'}({a[0]})"
    elif name == "math.rsqrt":
        one = "1.0" if ft == "f64" else "1.0f"
        e = f"({one} / {_fn('sqrt', ft)}({a[0]}))"
    elif name == "math.fma":
        e = f"{_fn('fma', ft)}({a[0]}, {a[1]}, {a[2]})"
    elif name == "tt.clampf":
        if ft == "f64":
            raise OpSemanticsError(f"tt.clampf on {ft} is not supported")
        # f16/bf16 operands arrive widened to float: clamping is exact there and rounds back losslessly
        e = f"rv_clampf({a[0]}, {a[1]}, {a[2]}, {op.int_attr('propagateNan') if op.attr('propagateNan') else 0})"
    elif name in ("math.isnan", "math.isinf", "math.isfinite"):
        return f"((uint8_t){name[5:]}({a[0]}))"
    else:
        raise OpSemanticsError(f"{name} on {ft} is not supported")
    return from_float(e, rt if rt in FLOAT_TYPES else ft)


def _extern(op: Op, args: list[str], ty: list[Type], rt: Type) -> str:
    """A libdevice function (compiler/libdevice.py): its overloads take and give fp32 / fp64 / i32 / i64."""
    symbol = (op.attr("symbol") or "").strip('"')
    if any(t.elem not in ("f32", "f64", "i32", "i64") for t in (*ty, rt)):
        raise OpSemanticsError(f"tt.extern_elementwise {symbol} on {', '.join(str(t) for t in ty)}: libdevice "
                               "functions take fp32, fp64, int32 and int64 values")
    try:
        return libdevice_expr(symbol, args)
    except LibdeviceError as e:
        raise OpSemanticsError(str(e)) from None


def _int_cast(name: str, src: Type, dst: Type, a: str) -> str:
    ws, wd = _width(src), _width(dst)
    if wd == 1:
        return f"((uint8_t)({a} & 1))"
    if name == "arith.extsi" or (name == "arith.index_cast" and wd > ws):
        return f"(({_s(wd)}){_sext(a, ws)})"
    if name in ("arith.extui", "arith.index_castui") and wd > ws:
        return f"(({_s(wd)})({_u(ws)}){a})"
    return f"(({_s(wd)})({_u(wd)})({_u(ws)}){a})"


def _float_cast(op: Op, src: str, dst: str, a: str) -> str:
    if src not in FLOAT_TYPES or dst not in FLOAT_TYPES:
        raise OpSemanticsError(f"{op.name} from {src} to {dst} is not supported (only fp8/f16/bf16/f32/f64)")
    f = to_float(a, src)
    if dst == "f64":
        return f"((double){f})"
    if src == "f64" and dst not in FP8_TYPES:  # the fp8 encoders take the double: one rounding, not two
        f = f"((float){f})"
    rounding = op.attr("rounding") if op.name == "tt.fp_to_fp" else None
    rtz = rounding is not None and ("rtz" in rounding or rounding.split(":")[0].strip() == "0")
    return from_float(f, dst, rtz)


def _bitcast(src: Type, dst: Type, a: str) -> str:
    s, d = src.elem or "", dst.elem or ""
    if s == d:
        return a
    if s == "f32":
        return f"((int32_t)rv_f32_bits({a}))"
    if d == "f32":
        return f"rv_bits_f32((uint32_t){a})"
    if s == "f64":
        return f"((int64_t)rv_f64_bits({a}))"
    if d == "f64":
        return f"rv_bits_f64((uint64_t){a})"
    if {s, d} <= {"f16", "bf16", "i16"} or {s, d} <= {"i8", *FP8_TYPES}:  # same-width bit patterns
        return f"(({C_SCALAR[d]}){a})"
    raise OpSemanticsError(f"bitcast from {s} to {d} is not supported")


def is_elementwise(name: str) -> bool:
    return (name in _INT_BIN or name in _BIT_BIN or name in _INT_HELPER or name in _CAST_SI
            or name in _FLOAT_BIN or name in FLOAT_CALL1 or name in FLOAT_CALL2 or name in {
                "arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui", "arith.cmpi", "arith.cmpf",
                "arith.select", "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui", "arith.extf",
                "arith.truncf", "tt.fp_to_fp", "arith.bitcast", "tt.bitcast", "tt.int_to_ptr",
                "tt.ptr_to_int", "tt.addptr", "arith.negf", "arith.maximumf", "arith.minimumf",
                "math.rsqrt", "math.trunc", "math.fma", "math.ctpop", "math.ctlz", "math.cttz",
                "tt.extern_elementwise", "tt.clampf", "math.isnan", "math.isinf", "math.isfinite"})
