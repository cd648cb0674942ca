"""Block pointers (``tl.make_block_ptr``, ``tl.advance``, ``tl.load``/``tl.store`` on them) on Triton 3.9.

Triton 3.9's frontend refuses block pointers ("removed in favor of the tensor descriptor API"), but the
users' kernels (Triton_RVV matmul, jacobi, attention) use them. Here they become plain pointer arithmetic
and masks at trace time, through our own versions of those four builtins and a block-pointer value.

Why this route and not the alternatives:

- Triton's own ``module_map`` hook (what backends use to swap ``libdevice``) installs it. The frontend
  replaces every module of the kernel's globals, and every ``triton.language`` reached through an
  attribute, by the module the map gives for its name, in the kernel and in every ``@triton.jit`` callee.
  We map ``triton.language`` to a module that is ``triton.language`` except for ``make_block_ptr``,
  ``advance``, ``load`` and ``store``. Nothing of the user's function is rewritten, so its source, its
  ``cache_key``, the file and lines in TTIR locations and in error messages stay the user's own.
- Tensor descriptors do not carry block-pointer semantics: a descriptor masks every dimension, while a
  block-pointer access without ``boundary_check`` is unmasked and one with ``boundary_check=(1,)`` masks
  dimension 1 only; a descriptor pads with zeros only, not NaN.
- An AST rewrite would have to find every spelling of the calls and keep lines and the cache key right
  by hand; the module map resolves names exactly as Triton does.

Semantics (as Triton's block pointers were): ``make_block_ptr`` takes shape and strides as int64 and
offsets as int32 (int64 offsets stay int64); ``advance`` adds to the offsets (negative steps allowed).
The element ``[i_0, ..., i_{r-1}]`` of the block is at ``base + sum_d (offset_d + i_d) * stride_d``.
``load``/``store`` without ``boundary_check`` are unmasked; with it, only the listed dimensions are masked
against ``[0, shape_d)``; masked loads give 0 (``padding_option`` "zero" or none) or NaN ("nan").
``order`` is checked to be a permutation and does not change any value. The pointer arithmetic has the
shape of a hand-written ``base + offs_m[:, None] * stride_m + offs_n[None, :] * stride_n``, which our
pointer analysis turns into row loads. Kernels without block pointers trace to exactly the same ops:
our ``load``/``store`` call Triton's for anything that is not a block pointer.

Limitation: names imported straight from ``triton.language`` (``from triton.language import load``) are
not replaced; use ``tl.``.
"""

from __future__ import annotations

import math
import types
from collections.abc import Sequence
from typing import Any

import triton.language as tl
from triton.language import core

#: Padding values of a masked block-pointer load, by ``padding_option``.
_PADDING: dict[str, float] = {"": 0.0, "zero": 0.0, "nan": math.nan}


class BlockPointerError(ValueError):
    """A block-pointer call the kernel cannot make (Triton wraps it with the kernel's line)."""


def _value(x: Any) -> Any:
    """The Python value of a constexpr argument, anything else as it is."""
    return x.value if isinstance(x, core.constexpr) else x


def _items(value: Any, what: str) -> list[Any]:
    """The elements of a tuple/list argument (``(M, K)``, ``[0, BLOCK_K]``, a constexpr tuple)."""
    value = _value(value)
    if isinstance(value, core.tuple):
        return list(value.values)
    if isinstance(value, (tuple, list)):
        return list(value)
    raise BlockPointerError(f"{what} must be a tuple or list, got {type(value).__name__}")


def _ints(value: Any, what: str) -> tuple[int, ...]:
    """Compile-time integers (block_shape, order, boundary_check)."""
    out = []
    for v in _items(value, what):
        v = _value(v)
        if not isinstance(v, int) or isinstance(v, bool):
            raise BlockPointerError(f"{what} must hold compile-time integers (constexpr), got {v!r}")
        out.append(v)
    return tuple(out)


def _scalar_int(value: Any, dtype: core.dtype, what: str, semantic: Any) -> core.tensor:
    """An integer scalar as a tensor of ``dtype`` (int64 values stay int64 when ``dtype`` is int32)."""
    t = semantic.to_tensor(_value(value))
    if t.type.is_block() or not t.dtype.is_int():
        raise BlockPointerError(f"{what} must hold integer scalars, got {t.type}")
    if t.dtype == dtype or (dtype == tl.int32 and t.dtype == tl.int64):
        return t
    return semantic.cast(t, dtype)


def _boundary_dims(boundary_check: Any, call: str) -> tuple[int, ...]:
    """``boundary_check`` as a tuple of dimensions: None or () for none, one int, or a tuple/list of ints."""
    value = _value(boundary_check)
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    return _ints(value, f"{call}: boundary_check")


def _full(t: core.tensor, shape: tuple[int, ...], semantic: Any) -> core.tensor:
    """``t`` broadcast to ``shape`` (no op when it has that shape already)."""
    return t if tuple(t.shape) == shape else semantic.broadcast_impl_shape(t, list(shape))


class BlockPointerType(core.base_type):
    """The frontend type of a block pointer: its IR parts are base, shape, strides and offsets scalars."""

    def __init__(self, base: core.pointer_type, shape: Sequence[core.dtype], strides: Sequence[core.dtype],
                 offsets: Sequence[core.dtype], block_shape: tuple[int, ...], order: tuple[int, ...]) -> None:
        self.base = base
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offsets = tuple(offsets)
        self.block_shape = block_shape
        self.order = order

    def _scalars(self) -> list[core.dtype]:
        return [self.base, *self.shape, *self.strides, *self.offsets]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BlockPointerType) and self._scalars() == other._scalars() \
            and self.block_shape == other.block_shape and self.order == other.order

    def __str__(self) -> str:
        return f"BlockPointer<{self.base.element_ty}{list(self.block_shape)}>"

    def mangle(self) -> str:
        parts = "_".join(t.mangle() for t in self._scalars())
        return f"BP{parts}_{'x'.join(map(str, self.block_shape))}_o{''.join(map(str, self.order))}BP"

    def _flatten_ir_types(self, builder: Any, out: list[Any]) -> None:
        for t in self._scalars():
            t._flatten_ir_types(builder, out)

    def _unflatten_ir(self, handles: list[Any], cursor: int) -> tuple[BlockPointer, int]:
        values = []
        for t in self._scalars():
            v, cursor = t._unflatten_ir(handles, cursor)
            values.append(v)
        r = len(self.block_shape)
        return BlockPointer(values[0], values[1:1 + r], values[1 + r:1 + 2 * r], values[1 + 2 * r:],
                             self.block_shape, self.order), cursor


class BlockPointer(core.base_value):
    """A block pointer: scalar base pointer, shape/strides/offsets scalars, compile-time block shape."""

    def __init__(self, base: core.tensor, shape: Sequence[core.tensor], strides: Sequence[core.tensor],
                 offsets: Sequence[core.tensor], block_shape: tuple[int, ...], order: tuple[int, ...]) -> None:
        self.base = base
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offsets = tuple(offsets)
        self.block_shape = block_shape
        self.order = order
        self.type = BlockPointerType(base.type, [t.dtype for t in self.shape], [t.dtype for t in self.strides],
                                       [t.dtype for t in self.offsets], block_shape, order)

    def _set_name(self, builder: Any, name: str) -> None:
        # No names on the parts: the base is often the kernel argument itself, whose name must stay.
        return

    def _flatten_ir(self, handles: list[Any]) -> None:
        for v in (self.base, *self.shape, *self.strides, *self.offsets):
            v._flatten_ir(handles)

    @core.must_use_result("tl.advance returns the moved block pointer: assign it (p = tl.advance(p, ...)).")
    @core.builtin
    def advance(self, offsets: Any, _semantic: Any = None) -> BlockPointer:
        return advance(self, offsets, _semantic=_semantic)

    def indices(self, semantic: Any) -> list[core.tensor]:
        """Per dimension d: ``offset_d + arange(block_shape[d])`` expanded to rank r along axis d."""
        rank = len(self.block_shape)
        out = []
        for d, (off, size) in enumerate(zip(self.offsets, self.block_shape, strict=True)):
            idx = semantic.add(off, semantic.arange(0, size), True)
            for axis in range(rank):
                if axis != d:
                    idx = semantic.expand_dims(idx, axis)
            out.append(idx)
        return out

    def pointers(self, indices: list[core.tensor], semantic: Any) -> core.tensor:
        """``base + sum_d indices_d * stride_d``: the tensor of pointers of the whole block."""
        offset = None
        for idx, stride in zip(indices, self.strides, strict=True):
            term = semantic.mul(idx, stride, True)
            offset = term if offset is None else semantic.add(offset, term, True)
        assert offset is not None
        return _full(semantic.add(self.base, offset, True), self.block_shape, semantic)

    def mask(self, indices: list[core.tensor], boundary_check: tuple[int, ...], semantic: Any) -> core.tensor:
        """``0 <= index_d < shape_d`` for the checked dimensions, broadcast to the block."""
        mask = None
        for d in boundary_check:
            inside = semantic.and_(semantic.greater_equal(indices[d], 0), semantic.less_than(indices[d],
                                                                                           self.shape[d]))
            mask = inside if mask is None else semantic.and_(mask, inside)
        assert mask is not None
        return _full(mask, self.block_shape, semantic)

    def checked_dims(self, boundary_check: Any, call: str) -> tuple[int, ...]:
        """The dimensions ``boundary_check`` names, checked against this block pointer's rank."""
        dims = _boundary_dims(boundary_check, call)
        rank = len(self.block_shape)
        bad = [d for d in dims if not 0 <= d < rank]
        if bad or len(set(dims)) != len(dims):
            raise BlockPointerError(f"{call}: boundary_check={dims} must name distinct dimensions of this "
                                    f"{rank}-D block pointer (0..{rank - 1})")
        return dims


@core.builtin
def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any,
                   _semantic: Any = None) -> BlockPointer:
    """Triton's ``tl.make_block_ptr``: a block of ``block_shape`` at ``offsets`` in a ``shape`` tensor."""
    if not isinstance(base, core.tensor) or base.type.is_block() or not base.dtype.is_ptr():
        raise BlockPointerError(f"tl.make_block_ptr: base must be a scalar pointer, got "
                                f"{getattr(base, 'type', type(base).__name__)}")
    if base.dtype.element_ty == tl.int1:  # as tl.load does: i1 lives in memory as i8
        base = _semantic.cast(base, tl.pointer_type(tl.int8, base.dtype.address_space))
    block = _ints(block_shape, "tl.make_block_ptr: block_shape")
    perm = _ints(order, "tl.make_block_ptr: order")
    parts = {"shape": _items(shape, "tl.make_block_ptr: shape"),
             "strides": _items(strides, "tl.make_block_ptr: strides"),
             "offsets": _items(offsets, "tl.make_block_ptr: offsets"), "order": perm}
    wrong = {k: len(v) for k, v in parts.items() if len(v) != len(block)}
    if wrong:
        raise BlockPointerError(f"tl.make_block_ptr: block_shape has {len(block)} dimensions but "
                                + ", ".join(f"{k} has {n}" for k, n in wrong.items()))
    if sorted(perm) != list(range(len(block))):
        raise BlockPointerError(f"tl.make_block_ptr: order={perm} must be a permutation of 0..{len(block) - 1}")
    return BlockPointer(
        base,
        [_scalar_int(v, tl.int64, "tl.make_block_ptr: shape", _semantic) for v in parts["shape"]],
        [_scalar_int(v, tl.int64, "tl.make_block_ptr: strides", _semantic) for v in parts["strides"]],
        [_scalar_int(v, tl.int32, "tl.make_block_ptr: offsets", _semantic) for v in parts["offsets"]],
        block, perm)


@core.must_use_result("tl.advance returns the moved block pointer: assign it (p = tl.advance(p, ...)).")
@core.builtin
def advance(base: Any, offsets: Any, _semantic: Any = None) -> BlockPointer:
    """Triton's ``tl.advance``: the block pointer moved by ``offsets`` elements per dimension."""
    if not isinstance(base, BlockPointer):
        raise BlockPointerError(f"tl.advance: expects a block pointer from tl.make_block_ptr, got "
                                f"{getattr(base, 'type', type(base).__name__)}")
    deltas = _items(offsets, "tl.advance: offsets")
    if len(deltas) != len(base.offsets):
        raise BlockPointerError(f"tl.advance: {len(deltas)} offsets for a {len(base.offsets)}-D block pointer")
    moved = []
    for off, delta in zip(base.offsets, deltas, strict=True):
        step = _scalar_int(delta, off.dtype, "tl.advance: offsets", _semantic)
        moved.append(_semantic.add(off, _semantic.cast(step, off.dtype), True))
    return BlockPointer(base.base, base.shape, base.strides, moved, base.block_shape, base.order)


@core.builtin
def load(pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (), padding_option: Any = "",
         cache_modifier: str = "", eviction_policy: str = "", volatile: bool = False,
         _semantic: Any = None) -> core.tensor:
    """Triton's ``tl.load``, plus block pointers with ``boundary_check`` and ``padding_option``."""
    padding = _value(padding_option) or ""
    if not isinstance(pointer, BlockPointer):
        if _boundary_dims(boundary_check, "tl.load") or padding:
            raise BlockPointerError("tl.load: boundary_check and padding_option apply to block pointers "
                                    "(tl.make_block_ptr) only; use mask= and other= with a tensor of pointers")
        return core.load(pointer, mask, other, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                         volatile=volatile, _semantic=_semantic)
    if _value(mask) is not None or _value(other) is not None:
        raise BlockPointerError("tl.load: a block pointer takes boundary_check= and padding_option=, "
                                "not mask= or other=")
    if padding not in _PADDING:
        raise BlockPointerError(f"tl.load: padding_option={padding!r}: expected 'zero' or 'nan'")
    elem = pointer.base.dtype.element_ty
    if padding == "nan" and not elem.is_floating():
        raise BlockPointerError(f"tl.load: padding_option='nan' needs a floating-point block, this one is {elem}")
    dims = pointer.checked_dims(boundary_check, "tl.load")
    indices = pointer.indices(_semantic)
    ptrs = pointer.pointers(indices, _semantic)
    if not dims:
        return core.load(ptrs, cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile,
                         _semantic=_semantic)
    fill = _PADDING[padding]
    return core.load(ptrs, pointer.mask(indices, dims, _semantic), fill if elem.is_floating() else int(fill),
                     cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile,
                     _semantic=_semantic)


@core.builtin
def store(pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (), cache_modifier: str = "",
          eviction_policy: str = "", _semantic: Any = None) -> core.tensor:
    """Triton's ``tl.store``, plus block pointers with ``boundary_check``."""
    if not isinstance(pointer, BlockPointer):
        if _boundary_dims(boundary_check, "tl.store"):
            raise BlockPointerError("tl.store: boundary_check applies to block pointers (tl.make_block_ptr) "
                                    "only; use mask= with a tensor of pointers")
        return core.store(pointer, value, mask, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                          _semantic=_semantic)
    if _value(mask) is not None:
        raise BlockPointerError("tl.store: a block pointer takes boundary_check=, not mask=")
    value = _semantic.to_tensor(_value(value))
    if value.type.is_block() and tuple(value.shape) != pointer.block_shape:
        raise BlockPointerError(f"tl.store: value of shape {list(value.shape)} into a block pointer of "
                                f"block_shape {list(pointer.block_shape)}")
    dims = pointer.checked_dims(boundary_check, "tl.store")
    indices = pointer.indices(_semantic)
    ptrs = pointer.pointers(indices, _semantic)
    guard = pointer.mask(indices, dims, _semantic) if dims else None
    return core.store(ptrs, value, guard, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                      _semantic=_semantic)


def language_module() -> types.ModuleType:
    """``triton.language`` with the four block-pointer builtins above; every other name is Triton's object.

    A plain module (the frontend accepts globals whose type *is* ModuleType), named "triton.language" so
    the frontend's module-map walk stops at it. Built per call: a snapshot of ``triton.language`` now.
    """
    module = types.ModuleType(tl.__name__, tl.__doc__)
    module.__dict__.update({k: v for k, v in vars(tl).items() if k not in ("__name__", "__doc__")})
    module.__dict__.update(make_block_ptr=make_block_ptr, advance=advance, load=load, store=store)
    return module


def module_map() -> dict[str, types.ModuleType]:
    """The entries to add to the frontend's module map (``ASTSource.make_ir``) to enable block pointers."""
    return {tl.__name__: language_module()}


__all__ = ["BlockPointer", "BlockPointerError", "BlockPointerType", "advance", "language_module", "load",
           "make_block_ptr", "module_map", "store"]
