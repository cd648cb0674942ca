"""The C emitter: ``FuncEmitter`` turns one ``tt.func`` into a C11 function, asking the lowering tiers for each op.

This module knows how values are reachable from C and how C is written (names, loops, the tile arena); which
C each op becomes is the tiers' job (``lower_struct``, ``ptr_analysis``, ``fusion``), composed in one ordered
list by ``lower.py``, which also holds the entry point ``lower_ttir``. The tiers import this module, never the
other way round.

Model: every TTIR tensor has a static shape. A tensor value is either a *buffer* (a flat row-major array in a
per-call stack arena, possibly seen through strides: broadcast / expand_dims / trans / split are free views),
a *splat* (a scalar C expression), or an *iota* (``tt.make_range``: an affine function of the index, no
memory). Each tensor op becomes one counted loop nest over flat arrays (clang vectorises those); scalars
become C locals. Buffers are placed in the arena by liveness (linear-scan over op positions, loop bodies
keep what they use alive to the end of the loop), so the stack use is the peak live tile bytes, not the
sum of all tiles. ``lower_ops.py`` holds the per-element semantics.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from . import libdevice, lower_ops
from .lower_ops import OpSemanticsError, c_type, scalar_expr
from .ttir import Block, Op, Region, TTIRParseError, Type

#: Bump whenever the generated C changes for the same TTIR (it is part of the compile cache key).
LOWERING_VERSION = "13"

#: Directory holding rvtune_rt.h: compile generated kernels with ``-I RUNTIME_DIR``.
RUNTIME_DIR = Path(__file__).parent / "runtime"

ARENA_ALIGN = 64
#: Refuse kernels whose live tiles exceed this: they would overflow an 8 MB thread stack.
MAX_ARENA_BYTES = 6 * 1024 * 1024


class LoweringError(Exception):
    """The TTIR cannot be turned into C; the message names the op and the kernel source file:line."""


class UnsupportedOpError(LoweringError):
    """An op (or an op/type combination) outside the supported set."""


@dataclass(frozen=True)
class Param:
    name: str  # the C name (a kernel parameter named like a C keyword or a libm function is renamed: cos_v)
    c_type: str
    triton_type: str
    source: str = ""  # the kernel's own parameter name ("" in metadata made before it was recorded)

    @property
    def user_name(self) -> str:
        return self.source or self.name


@dataclass(frozen=True)
class LoweredKernel:
    name: str
    c_source: str
    params: tuple[Param, ...]


_TRITON_TYPE = {"i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "f16": "fp16",
                "bf16": "bf16", "f32": "fp32", "f64": "fp64"}
_C_KEYWORDS = frozenset(" ".join("""
auto break case char const continue default do double else enum extern float for goto if inline int
long register restrict return short signed sizeof static struct switch typedef union unsigned void
volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic _Generic _Noreturn
_Static_assert _Thread_local bool true false NULL main
""".splitlines()).split())
_ABI_NAMES = {"pid_x", "pid_y", "pid_z", "grid_x", "grid_y", "grid_z"}
_LIBM = {n + s for n in ("trunc", "isnan", "isinf", "isfinite", "signbit", "memcpy", "fmod",
                         *lower_ops.FLOAT_CALL1.values(), *lower_ops.FLOAT_CALL2.values())
         for s in ("", "f")} | libdevice.C_NAMES


def arena_type(ct: str) -> str:
    """The may_alias twin (rvtune_rt.h) of an element type, for buffers in the reused arena."""
    return f"rv_{ct[:-1].strip()}_ptr" if ct.endswith("*") else f"rv_{ct}"


def pointer_to(ct: str) -> str:
    """``float`` -> ``float *``, ``float *`` -> ``float **`` (ready to prepend to a name)."""
    return ct + "*" if ct.endswith("*") else ct + " *"


def _triton_type(t: Type) -> str:
    if t.pointee is not None:
        return "*" + _triton_type(t.pointee)
    return _TRITON_TYPE.get(t.elem or "", t.elem or "?")


#: rv_fill_<suffix> (rvtune_dot.h) per C element type: tile fills without a libc memset call.
_FILL_SUFFIX = {"float": "f32", "double": "f64", "int8_t": "i8", "uint8_t": "u8", "int16_t": "i16",
                "uint16_t": "u16", "int32_t": "i32", "int64_t": "i64"}


def fill_stmt(t: Type, dst: str, value: str, count: str) -> str | None:
    """``count`` elements of type ``t``'s element at ``dst`` set to ``value`` (None: no helper for that type)."""
    suffix = _FILL_SUFFIX.get(c_type(t.element))
    return f"rv_fill_{suffix}({dst}, {value}, {count});" if suffix else None


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of a dense array of ``shape``: ``(4, 8)`` -> ``(8, 1)``."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def numel(shape: tuple[int, ...]) -> int:
    """The number of elements of a tensor of ``shape`` (1 for a scalar's ``()``)."""
    n = 1
    for d in shape:
        n *= d
    return n


def keep_out_of_carried_home(out: Val, leaves: Iterable[Val]) -> None:
    """A tile computed from leaves read at other indices (a transposed or broadcast view) is never placed in the
    loop-carried home of such a leaf (it would overwrite elements still to be read): lower_struct's in-place
    check sees only the defining op's direct operands, and a fused chain or pointer block can read the home
    through such a view deeper down. Recorded in ``viewed``; other homes stay possible (``acc + d * m[:, None]``
    is computed in acc's memory)."""
    if out.storage is not None:
        out.storage.viewed += [x.storage for x in leaves if x.storage is not None and (
            x.shape != out.shape or x.offset != 0 or x.strides != contiguous_strides(out.shape))]


def _elem_bytes(t: Type) -> int:
    e = t.element
    if e.pointee is not None:
        return 8
    return {"i1": 1, "i8": 1, "i16": 2, "f16": 2, "bf16": 2, "i32": 4, "f32": 4,
            **dict.fromkeys(lower_ops.FP8_TYPES, 1)}.get(e.elem or "", 8)


@dataclass
class _Storage:
    id: int
    nbytes: int
    start: int
    def_op: Op | None = None  # the op whose lowering created (and wrote) the buffer
    uses: list[int] = field(default_factory=list)
    offset: int = -1
    #: computed directly in another buffer's memory (a loop-carried home: the yield copy is skipped)
    alias: _Storage | None = None
    #: buffers its computation read through a view (keep_out_of_carried_home): never computed in their memory
    viewed: list[_Storage] = field(default_factory=list)


@dataclass
class _CFG:
    blocks: dict[str, Block]  # label -> block
    labels: dict[str, str]  # label -> C label
    start: dict[str, int]  # label -> position of its first op (set once emitted: later branches go back)


class SymbolicBlock(Protocol):
    """A tensor a tier keeps symbolic (ptr_analysis.Affine and Bounds, fusion.Expr): what the emitter asks of it."""

    def parts(self) -> list[Val]:
        """The ordinary values it reads (kept alive while it is)."""
        ...

    def materialize(self, f: FuncEmitter, v: Val) -> Val:
        """It computed into a buffer, for an op that does not know it."""
        ...


#: How a value is reachable: a C scalar, a buffer, one scalar standing for a whole tensor, a make_range, or a
#: block kept symbolic (see ``Val.sym``).
ValKind = Literal["scalar", "buf", "splat", "iota", "sym"]


@dataclass
class Val:
    """How one SSA value is reachable from C (see the module docstring)."""

    type: Type
    kind: ValKind
    expr: str = ""  # scalar / splat: a C expression; buf: the C pointer name
    strides: tuple[int, ...] = ()
    offset: int = 0  # buf: element offset into the buffer; iota: the start value
    storage: _Storage | None = None
    #: kind "sym": a pointer/index block or a mask kept symbolic (ptr_analysis.Affine / Bounds)
    sym: SymbolicBlock | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape or ()


class FuncEmitter:
    """Emits one tt.func as a C function.

    ``tiers`` lower the ops, tried in order (see ``Tier``); what they call back here is this class's public
    interface: values (``get``, ``new_buf``, ``scalar``, ``view``, ``materialize``), text (``emit``, ``block``,
    ``temp``), loops (``loop``, ``copy_into``), nested regions (``lower_ops``, ``lower_blocks``) and errors
    (``unsupported``, ``fail``, ``where``).
    """

    def __init__(self, func: Op, kernel_name: str, c_name: str | None = None,
                 callees: dict[str, tuple[str, list[Type]]] | None = None, *, tiers: Sequence[Tier]) -> None:
        self.func = func
        self.tiers = tuple(tiers)
        self.kernel = kernel_name  # the public kernel (named in messages)
        self.c_name = c_name or kernel_name  # this function's C symbol
        self.helper = c_name is not None  # a noinline function called by tt.call
        #: tt.call targets: symbol -> (C name, result types)
        self.callees = callees or {}
        self.returns: list[str] = []  # a helper's out-pointer parameters
        #: lines set up once at the top of the function (``prologue``), for the loops below to share
        self.prologue_lines: list[str] = []
        self.lines: list[str] = []
        self.depth = 1
        # SSA names are unique per region only (sibling regions reuse them): one map per open region.
        self.values: ChainMap[str, Val] = ChainMap()
        self.names: set[str] = set()
        self.pos = 0
        self.loops: list[tuple[int, int]] = []
        self.storages: list[_Storage] = []
        self.last_line: tuple[str | None, int | None] = (None, None)
        self.op: Op = func
        #: the block structure of each region being lowered with labels (cf.br / cf.cond_br targets)
        self.cfgs: list[_CFG] = []
        self.pending_comment = ""
        self.arena_bytes = 0
        #: loaded tiles a tt.dot may read in place in global memory (dot_kernel.InPlaceB), by SSA name
        self.in_place_b: dict[str, Any] = {}
        #: loaded tiles zero outside their first rows/columns (dot_kernel.ZeroTail), by SSA name
        self.zero_tail: dict[str, Any] = {}

    # ---- errors ---------------------------------------------------------------------------------------
    def where(self, op: Op | None = None) -> str:
        op = op or self.op
        loc = op.loc if op.loc.file else self.func.loc
        return f"{loc.where()} (kernel {self.kernel})"

    def unsupported(self, what: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{what} at {self.where()}: rvtune cannot lower it to C yet; rewrite that "
                                  "line with supported tl operations or report it")

    def fail(self, what: str) -> LoweringError:
        return LoweringError(f"{self.op.name} at {self.where()}: {what}")

    # ---- names and text -------------------------------------------------------------------------------
    def cname(self, ssa: str) -> str:
        """A fresh C identifier for one definition of ``ssa`` (its Python variable name where Triton kept it)."""
        base = re.sub(r"[^0-9A-Za-z_]", "_", ssa.lstrip("%").replace("#", "_r"))
        if not base or base[0].isdigit():
            base = "v" + base
        if base.endswith("_"):  # names ending in "_" are ours (loop indices, temporaries)
            base += "v"
        if base in _C_KEYWORDS or base in _ABI_NAMES or base in _LIBM or base.startswith("rv_"):
            base += "_v"
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def temp(self, hint: str) -> str:
        name, k = f"{hint}_", 1
        while name in self.names:
            name, k = f"{hint}{k}_", k + 1
        self.names.add(name)
        return name

    def emit(self, line: str) -> None:
        if self.pending_comment:  # the source line is shown above the first C it produced
            self.lines.append("    " * self.depth + self.pending_comment)
            self.pending_comment = ""
        self.lines.append("    " * self.depth + line)

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.emit(header + " {")
        self.depth += 1
        yield
        self.depth -= 1
        self.emit("}")

    def comment_source(self, op: Op) -> None:
        loc = op.loc
        if not loc.file or (loc.file, loc.line) == self.last_line or (op.name == "tt.return" and not op.operands):
            return
        self.last_line = (loc.file, loc.line)
        text = linecache.getline(loc.file, loc.line or 0).strip().replace("*/", "* /")
        self.pending_comment = f"/* {os.path.basename(loc.file)}:{loc.line}{': ' + text if text else ''} */"

    @contextlib.contextmanager
    def region_scope(self) -> Iterator[None]:
        """Values defined inside a region (block arguments included) are invisible after it."""
        self.values = self.values.new_child()
        yield
        self.values = self.values.parents

    # ---- values and storage ---------------------------------------------------------------------------
    def get(self, ssa: str) -> Val:
        try:
            v = self.values[ssa]
        except KeyError:
            raise self.fail(f"uses {ssa} before its definition") from None
        self.touch(v)
        if v.sym is not None:  # a symbolic block (ptr_analysis): ops that do not know it get a buffer
            return v.sym.materialize(self, v)
        return v

    def touch(self, v: Val) -> None:
        if v.storage is not None:
            v.storage.uses.append(self.pos)

    def new_buf(self, ssa: str | None, t: Type, hint: str = "tmp") -> Val:
        nbytes = numel(t.shape or ()) * _elem_bytes(t)
        st = _Storage(len(self.storages), nbytes, self.pos, self.op)
        self.storages.append(st)
        name = self.cname(ssa) if ssa else self.temp(hint)
        pt = arena_type(c_type(t)) + " *"
        self.emit(f"{pt}{name} = ({pt})(rv_arena + @OFF{st.id}@); /* {t} */")
        return Val(t, "buf", name, contiguous_strides(t.shape or ()), 0, st)

    def scalar(self, ssa: str, t: Type, expr: str) -> Val:
        name = self.cname(ssa)
        self.emit(f"{c_type(t)} {name} = {expr};")
        return Val(t, "scalar", name)

    # ---- element access and loops ---------------------------------------------------------------------
    @staticmethod
    def flat_ok(v: Val, shape: tuple[int, ...]) -> bool:
        if v.kind in ("scalar", "splat"):
            return True
        return v.shape == shape and v.strides == contiguous_strides(shape)

    @staticmethod
    def access(v: Val, idx: list[str] | None, flat: str) -> str:
        """C expression for element ``idx`` (or, in a flat loop, flat index ``flat``) of ``v``; a symbolic mask
        (ptr_analysis.Bounds, a leaf of a fused chain) is its condition on ``idx``, a deferred load
        (ptr_analysis.BlockLoad) its masked read of memory."""
        if v.kind in ("scalar", "splat"):
            return v.expr
        if v.kind == "sym":
            cond_expr = getattr(v.sym, "cond_expr", None)
            element_expr = getattr(v.sym, "element_expr", None)
            if idx is None and (cond_expr or element_expr):
                raise AssertionError("a symbolic leaf is read in a flat loop: flat_ok should have refused it")
            if cond_expr is not None:
                return f"({cond_expr(idx)})"
            if element_expr is not None:
                return str(element_expr(idx))
        if idx is None:
            lin = flat if v.offset == 0 else f"{v.offset} + {flat}"
        else:
            terms = [i if s == 1 else f"{i} * {s}" for i, s in zip(idx, v.strides, strict=True) if s != 0]
            if v.offset or not terms:
                terms.insert(0, str(v.offset))
            lin = " + ".join(terms)
        if v.kind == "iota":
            return f"(({c_type(v.type)})({lin}))"
        return f"{v.expr}[{lin}]"

    def loop(self, shape: tuple[int, ...], vals: list[Val], body: Callable[[Callable[[Val], str], str], str]) -> None:
        """Emit a loop nest over ``shape``; ``body(at, flat)`` returns the statement for one element."""
        if all(self.flat_ok(v, shape) for v in vals):
            with self.block(f"for (int32_t i_ = 0; i_ < {numel(shape)}; ++i_)"):
                self.emit(body(lambda v: self.access(v, None, "i_"), "i_"))
            return
        if len(shape) == 1:  # one strided operand (a broadcast, a split half...): index it through strides
            with self.block(f"for (int32_t i_ = 0; i_ < {shape[0]}; ++i_)"):
                self.emit(body(lambda v: self.access(v, ["i_"], "i_"), "i_"))
            return
        idx = [f"i{d}_" for d in range(len(shape))]
        flat = " + ".join(f"{i} * {s}" if s != 1 else i for i, s in zip(idx, contiguous_strides(shape), strict=True))
        with contextlib.ExitStack() as stack:
            for i, n in zip(idx, shape, strict=True):
                stack.enter_context(self.block(f"for (int32_t {i} = 0; {i} < {n}; ++{i})"))
            self.emit(body(lambda v: self.access(v, idx, flat), flat))

    def copy_into(self, dst: Val, src: Val) -> None:
        if src.kind in ("scalar", "splat") and dst.kind == "buf" and dst.strides == contiguous_strides(dst.shape):
            start = dst.expr if dst.offset == 0 else f"{dst.expr} + {dst.offset}"
            fill = fill_stmt(dst.type, start, src.expr, str(numel(dst.shape)))
            if fill is not None:
                self.emit(fill)
                return
        self.loop(dst.shape, [dst, src], lambda at, flat: f"{at(dst)} = {at(src)};")

    def materialize(self, v: Val, hint: str = "tmp") -> Val:
        """A contiguous buffer holding ``v`` (``v`` itself when it already is one)."""
        if v.kind == "buf" and v.strides == contiguous_strides(v.shape):
            return v
        out = self.new_buf(None, v.type, hint)
        self.copy_into(out, v)
        return out

    def view(self, v: Val, t: Type, strides: tuple[int, ...], offset: int | None = None) -> Val:
        return Val(t, v.kind, v.expr, strides, v.offset if offset is None else offset, v.storage)

    # ---- driver ---------------------------------------------------------------------------------------
    def lower(self) -> tuple[str, tuple[Param, ...]]:
        func = self.func
        region = func.regions[0]
        entry = region.blocks[0]
        params: list[Param] = []
        c_params: list[str] = []
        for ssa, t, loc in entry.args:
            name = self.cname(ssa)
            ct = self.signature_type(t, f"parameter {loc.name or ssa.lstrip('%')}")
            params.append(Param(name, ct.replace(" *", "*"), _triton_type(t), loc.name or ssa.lstrip("%")))
            c_params.append(f"{ct}{'' if ct.endswith('*') else ' '}{name}")
            self.values[ssa] = Val(t, "scalar", name)
        c_params += ["int32_t pid_x", "int32_t pid_y", "int32_t pid_z",
                     "uint32_t grid_x", "uint32_t grid_y", "uint32_t grid_z"]
        if self.helper:  # results come back through out pointers (tensors: a caller-owned buffer)
            for k, t in enumerate(self.callees[self.func.props["sym_name"].strip('"@')][1]):
                self.returns.append(f"ret{k}_")
                elem = self.signature_type(t, f"result {k}")
                ct = arena_type(elem) + " *" if t.is_tensor else pointer_to(elem)
                c_params.append(f"{ct}ret{k}_")
        self.signature = ", ".join(c_params)
        self.lower_region_cfg(region)
        self.pos += 1
        body = self.allocate()
        loc = func.loc
        what = f"noinline function {self.func.props['sym_name']} of {self.kernel}" if self.helper else self.kernel
        head = [f"/* {what}: generated by rvtune lowering v{LOWERING_VERSION} from "
                f"{os.path.basename(loc.file or '?')}. Do not edit. */",
                f"{'static ' if self.helper else ''}void {self.c_name}({self.signature}) {{"]
        if self.arena_bytes:
            head.append(f"    /* live tiles, placed by liveness: {self.arena_bytes} bytes of stack */")
            head.append(f"    _Alignas({ARENA_ALIGN}) unsigned char rv_arena[{self.arena_bytes}];")
        head.append("    (void)pid_x; (void)pid_y; (void)pid_z; (void)grid_x; (void)grid_y; (void)grid_z;")
        head += ["    " + line for line in self.prologue_lines]
        return "\n".join([*head, *body, "}"]) + "\n", tuple(params)

    def prologue(self, lines: list[str]) -> None:
        """Put ``lines`` at the top of the function, once however often asked (constants made once for every
        loop: rvv_chain's exp constants)."""
        if lines and lines[0] not in self.prologue_lines:
            self.prologue_lines += lines

    def signature_type(self, t: Type, what: str) -> str:
        """The C type of a parameter or result of this function; a LoweringError naming both when none.

        The signature is lowered outside any op's error handling, so the OpSemanticsError of c_type would
        otherwise escape without the kernel's name.
        """
        try:
            return c_type(t)
        except OpSemanticsError as e:
            func = f"function {self.func.props['sym_name']} of " if self.helper else ""
            raise LoweringError(f"{what} of {func}kernel {self.kernel} at {self.func.loc.where()}: {e}; "
                                "rvtune lowers i1/i8/i16/i32/i64, f16/bf16/f32/f64 and pointers to them") from None

    def allocate(self) -> list[str]:
        """Give each buffer an arena offset: linear scan over [first def, last use] intervals."""
        ends: dict[int, int] = {}
        for st in self.storages:
            end = st.start
            for u in st.uses:
                end = max(end, u)
                for s, e in self.loops:  # used in a loop it was not defined in: alive for the whole loop
                    if s <= u <= e and not s <= st.start <= e:
                        end = max(end, e)
            ends[st.id] = end
        active: list[_Storage] = []
        peak = 0
        for st in sorted((s for s in self.storages if s.alias is None), key=lambda s: (s.start, s.id)):
            active = [a for a in active if ends[a.id] >= st.start]
            size = -(-st.nbytes // ARENA_ALIGN) * ARENA_ALIGN
            offset = 0
            for a in sorted(active, key=lambda a: a.offset):
                if offset + size <= a.offset:
                    break
                offset = max(offset, a.offset + (-(-a.nbytes // ARENA_ALIGN) * ARENA_ALIGN))
            st.offset = offset
            peak = max(peak, offset + size)
            active.append(st)
        if peak > MAX_ARENA_BYTES:
            raise LoweringError(f"kernel {self.kernel} ({self.where(self.func)}) keeps {peak} bytes of tiles "
                                f"live at once, more than {MAX_ARENA_BYTES} fit safely on a thread stack: "
                                "use smaller BLOCK sizes for this config")
        self.arena_bytes = peak
        for st in self.storages:
            root = st
            while root.alias is not None:
                root = root.alias
            st.offset = root.offset
        offsets = {st.id: st.offset for st in self.storages}
        return [re.sub(r"@OFF(\d+)@", lambda m: str(offsets[int(m.group(1))]), line) for line in self.lines]

    def lower_region_cfg(self, region: Region) -> None:
        """The function body."""
        self.lower_blocks(region.blocks)

    def lower_blocks(self, blocks: list[Block], terminators: dict[str, Callable[[Op], None]] | None = None) -> None:
        """A region's blocks: one block is straight-line code; several become labels and gotos.

        ``terminators`` handles region-specific terminators (e.g. tt.map_elementwise.return); cf.br and
        cf.cond_br find their targets in the innermost region (block labels repeat between regions).
        """
        cfg = _CFG({b.label: b for b in blocks}, {}, {})
        for b in blocks[1:]:
            cfg.labels[b.label] = self.temp(b.label.lstrip("^"))
            for ssa, t, _loc in b.args:
                if t.is_tensor:
                    v = self.new_buf(ssa, t)
                    assert v.storage is not None  # new_buf gives every buffer its storage
                    v.storage.uses.append(10**9)  # cf block arguments stay alive for the whole function
                else:
                    name = self.cname(ssa)
                    self.emit(f"{c_type(t)} {name};")
                    v = Val(t, "scalar", name)
                self.values[ssa] = v
        self.cfgs.append(cfg)
        for i, b in enumerate(blocks):
            if i > 0:
                self.lines.append(f"{cfg.labels[b.label]}:;")
            cfg.start[b.label] = self.pos + 1
            for op in b.ops:
                if terminators and op.name in terminators:
                    self.pos += 1
                    self.op = op
                    terminators[op.name](op)
                else:
                    self.lower_op(op)
        self.cfgs.pop()

    def lower_ops(self, ops: list[Op]) -> None:
        for op in ops:
            self.lower_op(op)

    def lower_op(self, op: Op) -> None:
        self.pos += 1
        self.op = op
        self.comment_source(op)
        try:
            if not any(tier.lower(self, op) for tier in self.tiers):
                if lower_ops.is_elementwise(op.name):
                    self.op_elementwise(op)
                else:
                    raise self.unsupported(f"operation {op.name}")
        except OpSemanticsError as e:
            raise self.unsupported(str(e)) from None
        except (TTIRParseError, KeyError) as e:  # an attribute missing or unreadable: name the op and line
            raise self.fail(f"cannot read the op ({type(e).__name__}: {e})") from None
        finally:
            self.op = op

    # ---- element-wise ---------------------------------------------------------------------------------
    def op_elementwise(self, op: Op) -> None:
        if any(tier.elementwise is not None and tier.elementwise(self, op) for tier in self.tiers):
            return
        vals = [self.get(o) for o in op.operands]
        rt = op.result_types[0]
        if not rt.is_tensor or all(v.kind in ("scalar", "splat") for v in vals):
            # all-splat tensor ops are computed once: a splat of the scalar result
            v = self.scalar(op.results[0], rt.element, scalar_expr(op, [v.expr for v in vals]))
            self.values[op.results[0]] = Val(rt, "splat", v.expr) if rt.is_tensor else v
            return
        out = self.new_buf(op.results[0], rt)
        self.loop(rt.shape or (), [out, *vals],
                  lambda at, flat: f"{out.expr}[{flat}] = {scalar_expr(op, [at(v) for v in vals])};")
        self.values[op.results[0]] = out


#: Lowers one op: defines its results in the emitter.
Handler = Callable[[FuncEmitter, Op], None]
#: May lower one op: True when it did; False when it emitted nothing and leaves the op to the next tier.
OptionalHandler = Callable[[FuncEmitter, Op], bool]


@dataclass(frozen=True)
class Tier:
    """One lowering tier: the ops one module lowers, by op name. ``lower.TIERS`` lists the tiers in order.

    For each op the emitter asks the tiers in that order; within a tier ``handlers`` always lower the ops they
    name and ``optional`` handlers (fast paths) may decline. An op no tier took is element-wise or unsupported:
    element-wise ops go to each tier's ``elementwise`` handler in order (which may decline too), then to the
    emitter's plain loop.
    """

    name: str
    handlers: Mapping[str, Handler] = field(default_factory=dict)
    optional: Mapping[str, OptionalHandler] = field(default_factory=dict)
    elementwise: OptionalHandler | None = None

    def lower(self, f: FuncEmitter, op: Op) -> bool:
        """True when this tier lowered ``op`` (by name: element-wise fallbacks are the emitter's call)."""
        handler = self.handlers.get(op.name)
        if handler is not None:
            handler(f, op)
            return True
        optional = self.optional.get(op.name)
        return optional is not None and optional(f, op)


AnyHandler = TypeVar("AnyHandler", Handler, OptionalHandler)


def handles_into(table: dict[str, AnyHandler]) -> Callable[..., Callable[[AnyHandler], AnyHandler]]:
    """A ``@handles("op.name", ...)`` decorator that puts the decorated function into ``table`` (a tier's own
    handler table) under each name and returns it unchanged."""
    def handles(*names: str) -> Callable[[AnyHandler], AnyHandler]:
        def register(fn: AnyHandler) -> AnyHandler:
            for n in names:
                if n in table:
                    raise ValueError(f"two handlers for {n}: {table[n].__qualname__} and {fn.__qualname__}")
                table[n] = fn
            return fn
        return register
    return handles
