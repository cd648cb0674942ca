"""``tt.print`` (``tl.device_print``, and ``print`` inside a kernel) as printf to the process's stdout.

One line per element, as Triton's GPU backends print: ``pid (x, y, z) idx (i, j) <prefix><value>`` (no idx
for a scalar; ``(operand k)`` when several values are printed at once). Integers print signed or unsigned as
Triton marks them, or in hex with ``hex=True``; floats print with ``%f`` (16- and 8-bit floats widened first),
or as their bit pattern with ``hex=True``; pointers with ``%p``. stdout is flushed after every print, so the
lines appear before the launch returns even though Python's own stdout is a different buffer.
"""

from __future__ import annotations

import contextlib
import json

from .emitter import FuncEmitter, Handler, Tier, handles_into
from .lower_ops import FLOAT_TYPES, INT_WIDTH, to_float
from .ttir import Op, Type, parse_int_array

#: The handlers of this tier (one: tt.print); lower.TIERS places it.
HANDLERS: dict[str, Handler] = {}
handles = handles_into(HANDLERS)

#: Declared in the function body, so kernels that do not print keep compiling without <stdio.h>.
_DECLS = "extern int printf(const char *, ...); extern int fflush(void *);"


def _c_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a C string literal (passed to printf's %s, never its format)


def _value(t: Type, expr: str, hex_: bool, signed: bool) -> tuple[str, str]:
    """(printf conversion, argument) for one element of type ``t``."""
    e = t.element
    if e.pointee is not None:
        return "%p", f"(void *){expr}"
    elem = e.elem or ""
    if elem in INT_WIDTH:
        w = INT_WIDTH[elem]
        if hex_:
            mask = (1 << w) - 1 if w < 64 else None
            value = f"(unsigned long long){expr}" + (f" & 0x{mask:x}ull" if mask is not None else "")
            return "0x%llx", f"({value})"
        if w == 1:
            return "%d", f"(int)({expr} & 1)"
        return ("%lld", f"(long long){expr}") if signed else ("%llu", f"(unsigned long long)(uint{max(w, 8)}_t){expr}")
    if elem in FLOAT_TYPES:
        if hex_:
            bits = {"f32": f"rv_f32_bits({expr})", "f64": f"rv_f64_bits({expr})"}.get(elem, expr)
            return "0x%llx", f"(unsigned long long){bits}"
        return "%f", f"(double){to_float(expr, elem)}"
    raise ValueError(f"cannot print a value of type {t}")


@handles("tt.print")
def op_print(f: FuncEmitter, op: Op) -> None:
    prefix = (op.attr("prefix") or '""').strip()
    prefix = json.loads(prefix) if prefix.startswith('"') else prefix
    hex_ = (op.attr("hex") or "false").split(":")[0].strip() == "true"
    signed = parse_int_array(op.attr("isSigned") or "array<i32>")
    with f.block(""):
        f.emit(_DECLS)
        if not op.operands:
            f.emit(f'printf("pid (%d, %d, %d) %s\\n", pid_x, pid_y, pid_z, {_c_string(prefix)});')
        for k, (ssa, t) in enumerate(zip(op.operands, op.operand_types, strict=True)):
            v = f.get(ssa)
            try:
                conv, _ = _value(t, "x", hex_, bool(signed[k]) if k < len(signed) else True)
            except ValueError as e:
                raise f.unsupported(str(e)) from None
            operand = f" (operand {k})" if len(op.operands) > 1 else ""
            shape = t.shape or ()
            idx = [f"p{d}_" for d in range(len(shape))]
            with contextlib.ExitStack() as stack:
                for i, n in zip(idx, shape, strict=True):
                    stack.enter_context(f.block(f"for (int32_t {i} = 0; {i} < {n}; ++{i})"))
                at = f.access(v, idx, "") if shape else v.expr
                _, arg = _value(t, at, hex_, bool(signed[k]) if k < len(signed) else True)
                where = "pid (%d, %d, %d)" + (f" idx ({', '.join(['%d'] * len(shape))})" if shape else "")
                fmt = f'"{where}{operand} %s{conv}\\n"'
                f.emit(f"printf({fmt}, pid_x, pid_y, pid_z, {''.join(i + ', ' for i in idx)}"
                       f"{_c_string(prefix)}, {arg});")
        f.emit("fflush(0);")


TIER = Tier("lower_print", handlers=HANDLERS)
