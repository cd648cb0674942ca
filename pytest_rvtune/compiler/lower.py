"""TTIR (generic form, with loc info) -> plain C11 for one kernel: the lowering tiers, composed in one place.

``emitter.FuncEmitter`` writes the C of one ``tt.func``; for each op it asks ``TIERS`` in order, so which
module lowers an op is decided here, by this list, and never by the order modules happen to be imported in.
"""

from __future__ import annotations

import re

from . import fusion, lower_print, lower_scaled, lower_struct, ptr_analysis
from .emitter import (
    LOWERING_VERSION,
    MAX_ARENA_BYTES,
    RUNTIME_DIR,
    FuncEmitter,
    LoweredKernel,
    LoweringError,
    Param,
    Tier,
    UnsupportedOpError,
)
from .ttir import TTIRParseError, Type, parse_function_type, parse_module

#: The lowering tiers, most specific first: the first tier that lowers an op defines its results.
#: ptr_analysis: pointer/mask blocks kept symbolic, block loads/stores, the dot micro-kernel (may decline);
#: lower_struct: every structural op (loads, stores, dot, reduce, control flow...), the general lowering;
#: lower_scaled: tt.dot_scaled (operands decoded to fp32); lower_print: tt.print (printf);
#: fusion: float element-wise chains in one loop (element-wise ops only; others take the plain loop).
TIERS: tuple[Tier, ...] = (ptr_analysis.TIER, lower_struct.TIER, lower_scaled.TIER, lower_print.TIER,
                             fusion.TIER)


def lower_ttir(ttir: str, tiers: tuple[Tier, ...] = TIERS) -> LoweredKernel:
    """Lower the public ``tt.func`` of a TTIR module to C (see emitter.py's docstring for the model)."""
    try:
        funcs = parse_module(ttir)
    except TTIRParseError as e:
        raise LoweringError(f"cannot read the TTIR: {e}") from None
    funcs = [f for f in funcs if f.name == "tt.func"]
    kernels = [f for f in funcs if f.props.get("sym_visibility", '"public"') != '"private"']
    if len(kernels) != 1:
        raise LoweringError(f"expected exactly one public tt.func in the TTIR, found {len(kernels)}")
    kernel = kernels[0]
    name = kernel.props.get("sym_name", '"kernel"').strip('"')
    # noinline functions (tt.call targets) become static C functions before the kernel
    callees: dict[str, tuple[str, list[Type]]] = {}
    for f in funcs:
        if f is not kernel:
            sym = f.props.get("sym_name", '"?"').strip('"')
            results = parse_function_type(f.props.get("function_type", "() -> ()"))[1]
            callees[sym] = (f"rvh_{re.sub(r'[^0-9A-Za-z_]', '_', sym)}", results)
    helpers = [FuncEmitter(f, name, callees[f.props["sym_name"].strip('"')][0], callees, tiers=tiers)
               for f in funcs if f is not kernel]
    bodies = [h.lower()[0] for h in helpers]
    protos = [f"static void {h.c_name}({h.signature});" for h in helpers]
    body, params = FuncEmitter(kernel, name, None, callees, tiers=tiers).lower()
    parts = [f'/* Kernel {name} lowered from Triton IR by pytest-rvtune. */\n'
             '#include "rvtune_rt.h"\n#include "rvtune_dot.h"\n',
             *([("\n".join(protos) + "\n")] if protos else []), *bodies, body]
    return LoweredKernel(name, "\n".join(parts), params)


__all__ = ["LOWERING_VERSION", "MAX_ARENA_BYTES", "RUNTIME_DIR", "TIERS", "LoweredKernel", "LoweringError",
           "Param", "UnsupportedOpError", "lower_ttir"]
