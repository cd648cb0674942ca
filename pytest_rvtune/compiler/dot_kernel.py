"""``tt.dot`` on fp32 tiles as a call to the register-blocked micro-kernel of ``runtime/rvtune_dot.h``.

The operands are arena tiles: A may have any strides (a transposed view is fine: its elements are read as
scalars and broadcast), B must have contiguous rows (a transposed B is copied once), the result is a
contiguous tile. Buffer reuse: a loop-carried accumulator (``acc = tl.dot(a, b, acc)``) gets the result
placed in its own memory by lower_struct.assign, so nothing is copied per iteration. Other element types and
batched dots keep the generic i-k-j loops of lower_struct.op_dot.
"""

from __future__ import annotations

from .lower import _contig, _Func
from .ttir import Op


def lower_dot(f: _Func, op: Op) -> bool:
    t = op.result_types[0]
    types = [ty.element.elem for ty in op.operand_types[:3]]
    if types != ["f32", "f32", "f32"] or t.element.elem != "f32" or len(t.shape or ()) != 2:
        return False
    c_sym = f.values.get(op.operands[2])
    fused_c = c_sym is not None and hasattr(c_sym.sym, "code")  # fusion.Expr, e.g. ``acc * alpha[:, None]``
    a, b = (f.get(o) for o in op.operands[:2])
    c = c_sym if fused_c else f.get(op.operands[2])
    m, n = t.shape or ()
    k = (op.operand_types[0].shape or ())[-1]
    if a.kind != "buf":
        a = f.materialize(a, "dot_a")
    if b.kind != "buf" or b.strides[-1] != 1 or b.strides[0] == 0:
        b = f.materialize(b, "dot_b")
    if fused_c:  # the accumulator's chain is computed straight into the result tile
        out = c.sym.materialize(f, c, op.results[0])
    elif c.kind == "buf" and c.offset == 0 and c.strides == _contig(c.shape):
        # a loop-carried accumulator may get this result placed in its own memory (lower_struct.assign):
        # both pointers are arena constants, so clang drops whichever branch is dead
        out = f.new_buf(op.results[0], t)
        with f.block(f"if ({out.expr} != {c.expr})"):
            f.copy_into(out, c)
    else:
        out = f.new_buf(op.results[0], t)
        f.copy_into(out, c)
    a_ptr = a.expr if a.offset == 0 else f"{a.expr} + {a.offset}"
    b_ptr = b.expr if b.offset == 0 else f"{b.expr} + {b.offset}"
    f.emit(f"/* {out.expr} += dot({m}x{k}, {k}x{n}): register-blocked micro-kernel (rvtune_dot.h) */")
    f.emit(f"rv_dot_f32({m}, {n}, {k}, {a_ptr}, {a.strides[0]}, {a.strides[1]}, {b_ptr}, {b.strides[0]}, "
           f"{out.expr}, {n});")
    f.values[op.results[0]] = out
    return True
