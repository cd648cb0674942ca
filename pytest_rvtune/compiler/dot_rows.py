"""The rows of a ``tt.dot`` worth computing: A loaded under a row mask is +0.0 past the mask's last true row.

Fused MoE loads its A tile as ``tl.load(a_ptrs, mask=token_mask[:, None] & ..., other=0.0)``: the padding
slots of an expert's block (``moe_align_block_size`` puts them after its valid slots) are rows of zeros, and
up to half of a BLOCK_SIZE_M = 32 block can be padding. ``c + A @ B`` for such a row is ``c`` plus products
``+0.0 * b``, which are zeros while b is finite (a NaN or infinity in B makes them NaN). So the dot runs over
rows ``[0, last kept row]`` when every element of the B block is finite (checked at run time, only when
rows would be skipped) and over all rows otherwise: the same values as the whole product either way, short
of the sign of a zero (-0.0 + +0.0 is +0.0: a -0.0 accumulator element of a skipped row stays -0.0).
"""

from __future__ import annotations

import re

from .emitter import FuncEmitter
from .ttir import Block, Op

#: Narrower B blocks keep the dot whole: clang turns their finiteness check into scalar code (fused MoE with
#: BLOCK_SIZE_N = 32 took 25% more instructions with the rows skipped than without).
MIN_COLUMNS = 64
#: ``arith.constant`` of a +0.0 float splat (the ``other=0.0`` of a masked load).
_POSITIVE_ZERO = re.compile(r"dense<0\.0+e\+00>\s*:")


def _enclosing(root: Op, target: Op) -> list[tuple[Block, int]] | None:
    """The blocks from ``root`` down to the one holding ``target``, each with the index of the op on the way."""
    for region in root.regions:
        for block in region.blocks:
            for i, op in enumerate(block.ops):
                if op is target:
                    return [(block, i)]
                inner = _enclosing(op, target)
                if inner is not None:
                    return [(block, i), *inner]
    return None


def _definer(path: list[tuple[Block, int]], ssa: str, top: list[Block]) -> Op | None:
    """The op defining ``ssa`` before the op at the end of ``path`` (innermost block first), else in another
    block of the function's own region ``top`` (a kernel with an early return is several blocks); None for
    block arguments (loop-carried values) and anything not found."""
    for block, i in reversed(path):
        if any(arg == ssa for arg, _t, _l in block.args):
            return None
        for op in reversed(block.ops[:i]):
            if ssa in op.results:
                return op
    for block in top:
        for op in block.ops:
            if ssa in op.results:
                return op
    return None


def _row_mask(path: list[tuple[Block, int]], mask: str, rows: int, top: list[Block]) -> str | None:
    """The SSA name of an [rows, 1] i1 value whose row i false makes row i of ``mask`` all false, or None."""
    op = _definer(path, mask, top)
    if op is None:
        return None
    if op.name == "arith.andi":  # either side's row mask clears the row
        for side in op.operands:
            found = _row_mask(path, side, rows, top)
            if found is not None:
                return found
        return None
    if op.name == "tt.broadcast" and (op.operand_types[0].shape or ()) == (rows, 1):
        return op.operands[0]
    return None


def live_rows(f: FuncEmitter, dot: Op, b_ptr: str, ldb: str, k: int, n: int) -> str | None:
    """A C int naming how many rows of ``dot``'s A to compute (code emitted here), or None when A is not a
    tile loaded as +0.0 under a row mask."""
    m = (dot.result_types[0].shape or ())[0]
    if n < MIN_COLUMNS:
        return None
    path = _enclosing(f.func, dot)
    if path is None or not f.func.regions:
        return None
    top = f.func.regions[0].blocks
    load = _definer(path, dot.operands[0], top)
    if load is None or load.name != "tt.load" or len(load.operands) != 3:
        return None
    other = _definer(path, load.operands[2], top)
    if other is None or other.name != "arith.constant" or not _POSITIVE_ZERO.match(other.props.get("value", "")):
        return None
    row_mask = _row_mask(path, load.operands[1], m, top)
    keep = f.values.get(row_mask) if row_mask is not None else None
    # a tile in memory (fused MoE's token_mask, computed from loaded ids) is read where it lies; a symbolic
    # mask (ptr_analysis' ``offs_m[:, None] < M`` of matmul and flash attention) would be rebuilt per dot
    # and already keeps the dot's rows in bounds: left alone (also a mask not lowered in a scope seen here)
    if keep is None or keep.kind != "buf" or keep.sym is not None:
        return None
    f.touch(keep)
    rows, zero = f.temp("dot_rows"), f.temp("zero_products")
    tile = _tile_rows(n)
    f.emit("/* rows of A past the last one its row mask keeps are +0.0: skipped while B is finite (dot_rows.py) */")
    f.emit(f"int32_t {rows} = {m};")
    f.emit(f"while ({rows} > 0 && !{f.access(keep, [f'({rows} - 1)', '0'], '')}) --{rows};")
    # whole register tiles only (rows computed beyond the last kept one are exact too): no run-time tile height
    f.emit("#if defined(__riscv_v)")
    f.emit(f"{rows} = ({rows} + {tile - 1}) / {tile} * {tile};")
    f.emit("#else")
    f.emit(f"{rows} = ({rows} + {HOST_TILE_ROWS - 1}) / {HOST_TILE_ROWS} * {HOST_TILE_ROWS};")
    f.emit("#endif")
    with f.block(f"if ({rows} < {m})"):
        # 0 * b summed per column: NaN exactly where a skipped row's products would not all be zeros
        f.emit(f"float {zero}[{n}] = {{0}};")
        f.emit("int32_t bad_ = 0;")
        with f.block(f"for (int32_t k_ = 0; k_ < {k}; ++k_)"):
            f.emit("RV_VECTORIZE_FUSED")
            with f.block(f"for (int32_t n_ = 0; n_ < {n}; ++n_)"):
                f.emit(f"{zero}[n_] += 0.0f * ({b_ptr})[k_ * ({ldb}) + n_];")
        with f.block(f"for (int32_t n_ = 0; n_ < {n}; ++n_)"):
            f.emit(f"bad_ |= {zero}[n_] != {zero}[n_];")
        f.emit(f"if (bad_) {rows} = {m};")
    f.emit(f"if ({rows} > {m}) {rows} = {m};")
    return rows


#: rv_dot_f32's tile height on the host: 8 rows (AVX-512), 4 (plain C): a multiple of both.
HOST_TILE_ROWS = 8


def _tile_rows(n: int) -> int:
    """The row height of rv_dot_f32's register tile for an N-column dot on RVV (rvtune_dot.h's RV_DOT_PANELS:
    3 rows x 64 columns, 6 x 32, 8 x 16 or 8): a multiple of it keeps every tile a full one."""
    return 3 if n >= 64 else 6 if n >= 32 else 8


__all__ = ["HOST_TILE_ROWS", "MIN_COLUMNS", "live_rows"]
