"""A fused element-wise chain holding an ``exp`` as RVV intrinsics: one strip-mined loop at LMUL 8 whose
values stay in vector registers from the loads through the exp to the store.

Why: clang vectorises the scalar C of a chain (fusion.Expr) well until the chain holds a transcendental.
rv_expf's dozen constants are then hoisted into vector registers, which spill at LMUL 8 (a measured 70
instructions per 64 lanes for ``exp(x - m)`` stored and summed). So an fp32 exp used to end a chain: the chain
below it was written to a tile, rv_exp_f32 ran there in place, and the ops above it read that tile again (a
store and a reload per element, and a loop of its own, for each of the three). Written here instead, the
exp's constants are scalar operands (``.vf``), made once before the loop (rv_exp_consts_opaque), and the
chain is computed in registers: ``__riscv_vle32`` of each tile or memory row, ``vfsub.vf`` by a per-row
scalar, ``rv_vexp_f32m8`` (rvtune_exp.h), ``vse32`` to the destination.

The C stays portable: the loop is emitted under ``#if defined(__riscv_v)`` with the scalar loop (rv_expf)
after ``#else``, and both give the same bits: the same exp, and a multiply feeding an add contracted into one
fused multiply-add where clang contracts the scalar C's ``a * b + c`` (fp-contract=on, the left operand
first). Chains it cannot write (a mask left in them, a select, an op or a type without a form below) are
refused by ``vector_form`` and keep the scalar loop alone.

One loop may compute several outputs (``emit_loop``): a value with two element-wise consumers (softmax's
``e``, stored and summed) is stored to its tile and used from its register by the other (fusion._siblings).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .emitter import FuncEmitter, Val
from .lower_ops import scalar_expr

if TYPE_CHECKING:
    from .ttir import Op


class Expr(Protocol):
    """What this module reads of a chain (fusion.Expr has it): the op at its root and its operands, values or
    chains. A protocol, so that the chain's own module, which calls this one, is not imported back."""

    @property
    def op(self) -> Op: ...

    @property
    def children(self) -> Sequence[Val | Expr]: ...

#: Binary ops: (the intrinsic, the one taking the scalar on the left: s - v is vfrsub, s / v is vfrdiv).
_BINARY = {"arith.addf": ("vfadd", "vfadd"), "arith.subf": ("vfsub", "vfrsub"), "arith.mulf": ("vfmul", "vfmul"),
           "arith.divf": ("vfdiv", "vfrdiv"), "tt.precise_divf": ("vfdiv", "vfrdiv"),
           "arith.maxnumf": ("vfmax", "vfmax"), "arith.minnumf": ("vfmin", "vfmin")}
_UNARY = {"arith.negf": "vfneg_v", "math.absf": "vfabs_v", "math.sqrt": "vfsqrt_v", "tt.precise_sqrt": "vfsqrt_v"}
#: a * b + c as one rounding, the way clang contracts the scalar C (fmuladd): the accumulator form of each.
_FMA = {("arith.addf", 0): "vfmacc", ("arith.addf", 1): "vfmacc",  # a * b + c, c + a * b
        ("arith.subf", 0): "vfmsac",  # a * b - c
        ("arith.subf", 1): "vfnmsac"}  # c - a * b
_T = "f32m8"
#: Lanes of an LMUL 8 fp32 vector at the least VLEN the vector loops are built for (_RVV: zvl256b).
_LANES = 64
_RVV = "defined(__riscv_v) && __riscv_v_min_vlen >= 256"
_VT = "vfloat32m8_t"


@dataclass
class _Operand:
    """A chain value in the loop: a vector register value (``vector``) or a scalar C expression."""

    code: str
    vector: bool


def _f32(v: Val) -> bool:
    return v.type.element.elem == "f32"


def has_exp(chain: Expr) -> bool:
    return chain.op.name == "math.exp" or any(has_exp(c) for c in chain.children if not isinstance(c, Val))


class _Writer:
    """Writes one chain's loop body: a statement per vector op, named ``v<k>_`` (scoped to the loop's block)."""

    def __init__(self, f: FuncEmitter, at: Callable[[Val], str], unit_stride: Callable[[Val], bool]) -> None:
        self.f, self.at, self.unit_stride = f, at, unit_stride
        self.count = 0
        self.known: dict[int, _Operand] = {}  # id(leaf) -> its value, computed in this loop already

    def value(self, code: str) -> _Operand:
        name = f"v{self.count}_"
        self.count += 1
        self.f.emit(f"const {_VT} {name} = {code};")
        return _Operand(name, True)

    def splat(self, x: _Operand) -> str:
        return x.code if x.vector else f"__riscv_vfmv_v_f_{_T}({x.code}, vl_)"

    def leaf(self, x: Val) -> _Operand:
        if id(x) in self.known:
            return self.known[id(x)]
        if x.kind in ("scalar", "splat"):
            return _Operand(x.expr, False)
        if self.unit_stride(x):
            return self.value(f"__riscv_vle32_v_{_T}(&{self.at(x)}, vl_)")
        return _Operand(self.at(x), False)  # a broadcast along the row: one element, a scalar operand

    def is_vector(self, c: Val | Expr) -> bool:
        """Does ``c`` vary along the row (a unit-stride leaf under it)?"""
        if isinstance(c, Val):
            return c.kind not in ("scalar", "splat") and self.unit_stride(c)
        kids = c.children[1:] if c.op.name == "arith.select" else c.children
        return any(self.is_vector(k) for k in kids)

    def chain(self, e: Expr) -> _Operand:
        name = e.op.name
        if name == "arith.select":  # only ``select(1, a, b)`` is written (vector_form): an unmasked version
            return self.operand(e.children[1])
        if name in ("arith.addf", "arith.subf") and self.is_vector(e):
            k = next((k for k in (0, 1) if not isinstance(e.children[k], Val)
                      and e.children[k].op.name == "arith.mulf"), None)  # type: ignore[union-attr]
            if k is not None:
                return self.multiply_add(e, k)
        args = [self.operand(c) for c in e.children]
        if not any(a.vector for a in args):  # all scalars: one C expression, as the scalar loop has it
            if name == "math.exp":
                return _Operand(f"rv_expf({args[0].code})", False)
            return _Operand(scalar_expr(e.op, [a.code for a in args]), False)
        if name == "math.exp":
            return self.value(f"rv_vexp_f32m8({args[0].code}, vl_, &exp_k_)")
        if name in _UNARY:
            return self.value(f"__riscv_{_UNARY[name]}_{_T}({args[0].code}, vl_)")
        if name == "math.fma":
            a, b, c = args
            return self.value(f"__riscv_vfmacc_vv_{_T}({self.splat(c)}, {self.splat(a)}, {self.splat(b)}, vl_)")
        left, right = args
        op, swapped = _BINARY[name]
        if left.vector and right.vector:
            return self.value(f"__riscv_{op}_vv_{_T}({left.code}, {right.code}, vl_)")
        if left.vector:
            return self.value(f"__riscv_{op}_vf_{_T}({left.code}, {right.code}, vl_)")
        return self.value(f"__riscv_{swapped}_vf_{_T}({right.code}, {left.code}, vl_)")

    def multiply_add(self, e: Expr, k: int) -> _Operand:
        """``a * b + c``, ``c + a * b``, ``a * b - c`` or ``c - a * b`` (the product is child ``k``) as one fused
        multiply-add: vfmacc / vfmsac / vfnmsac, whose accumulator is ``c``."""
        mul = e.children[k]
        assert not isinstance(mul, Val)
        a, b = (self.operand(c) for c in mul.children)
        acc = self.splat(self.operand(e.children[1 - k]))
        form = _FMA[(e.op.name, k)]
        if a.vector and not b.vector:
            a, b = b, a  # the .vf form takes the scalar factor first
        if b.vector and not a.vector:
            return self.value(f"__riscv_{form}_vf_{_T}({acc}, {a.code}, {b.code}, vl_)")
        return self.value(f"__riscv_{form}_vv_{_T}({acc}, {self.splat(a)}, {self.splat(b)}, vl_)")

    def operand(self, c: Val | Expr) -> _Operand:
        return self.leaf(c) if isinstance(c, Val) else self.chain(c)


def vector_form(chain: Expr, unit_stride: Callable[[Val], bool], broadcast: Callable[[Val], bool]) -> bool:
    """Can this chain be written as RVV intrinsics? Every op fp32 with a form above (a select only when its
    condition is the constant 1), every leaf an fp32 scalar, a unit-stride row (``unit_stride``) or one element
    per row (``broadcast``)."""
    op = chain.op
    if not op.result_types or op.result_types[0].element.elem != "f32":
        return False
    if op.name == "arith.select":
        cond = chain.children[0]
        if not (isinstance(cond, Val) and cond.kind == "splat" and cond.expr == "1"):
            return False
        children = chain.children[1:]
    elif op.name in _BINARY or op.name in _UNARY or op.name in ("math.exp", "math.fma"):
        children = chain.children
    else:
        return False
    for c in children:
        if isinstance(c, Val):
            if not _f32(c) or not (c.kind in ("scalar", "splat") or unit_stride(c) or broadcast(c)):
                return False
        elif not vector_form(c, unit_stride, broadcast):
            return False
    return True


def emit_loop(f: FuncEmitter, outputs: Sequence[tuple[Expr, str, Val | None]], first: str, end: str, index: str,
              at: Callable[[Val], str], unit_stride: Callable[[Val], bool]) -> None:
    """The strip-mined loop over ``index`` in [first, end) computing each output ``(chain, dest, tile)``: the
    chain's value at each lane (``at(leaf)``: the C lvalue of the leaf's element at ``index``) stored by
    ``vse32`` to ``&dest`` (the C lvalue of the destination's element at ``index``, unit-stride in it as every
    ``unit_stride`` leaf is). A later output's leaf that is an earlier one's ``tile`` is read from the register
    holding it (an op with two consumers: its value stored, and used by the other in the same loop)."""
    def body() -> None:
        writer = _Writer(f, at, unit_stride)
        for chain, dest, tile in outputs:
            value = writer.chain(chain)
            f.emit(f"__riscv_vse32_v_{_T}(&{dest}, {writer.splat(value)}, vl_);")
            if tile is not None:
                writer.known[id(tile)] = value
    if first == "0" and end.isdigit() and int(end) <= _LANES:  # one vector: no loop to step (a row of a tile)
        f.emit("{")
        f.depth += 1
        f.emit(f"const int64_t {index} = 0;")
        # opaque: with a constant vl, the exp's vfmv.v.f splats of its constants would be hoisted out of the
        # loop around this one and spill (a loop-varying vl keeps them next to their use)
        f.emit(f"size_t vl_ = {end};")
        f.emit('__asm__ volatile("" : "+r"(vl_));')
        body()
        f.depth -= 1
        f.emit("}")
        return
    with f.block(f"for (int64_t {index} = {first}, vl_; {index} < {end}; {index} += vl_)"):
        f.emit(f"vl_ = (int64_t)__riscv_vsetvl_e32m8((size_t)({end} - {index}));")
        body()


def emit_versions(f: FuncEmitter, chains: Sequence[Expr], vector: Callable[[], None],
                  scalar: Callable[[], None]) -> None:
    """``vector()`` (which calls emit_loop) under ``#if defined(__riscv_v)``; ``scalar()``, the same loop in
    scalar C, after ``#else``."""
    if any(has_exp(c) for c in chains):  # once per call: made in the loop around this one, reloaded every time
        f.prologue([f"#if {_RVV}", "const rv_exp_consts exp_k_ = rv_exp_consts_opaque();", "#endif"])
    f.emit(f"#if {_RVV} /* the chain in vector registers: rvv_chain.py */")
    vector()
    f.emit("#else")
    scalar()
    f.emit("#endif")
