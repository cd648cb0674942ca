"""The launch signature of a kernel as their patched triton-cpu built it, from the module's Python launch and the
harness's ``<kernel>_wrap(...)`` call.

triton-cpu specialises integer arguments equal to 1 into constants, so the harness passes fewer arguments than the
kernel has. The Python launch says which (``t.stride(last)`` of a contiguous tensor is 1); the harness's call says
how many remain and, from its C declarations, the element type of each pointer. When the two disagree the problem
says so and the user edits the signature table.
"""

from __future__ import annotations

import ast
from typing import Any


def _specialised_by_launch(runtime: list[str], args: list[ast.expr]) -> set[str]:
    """Parameters the Python launch passes ``t.stride(last)`` for: 1 for a contiguous tensor, so specialised."""
    strides: dict[str, list[tuple[str, int]]] = {}
    for param, arg in zip(runtime, args, strict=False):
        if (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "stride"
                and len(arg.args) == 1 and isinstance(arg.args[0], ast.Constant | ast.UnaryOp)):
            index = ast.literal_eval(arg.args[0])
            strides.setdefault(ast.unparse(arg.func.value), []).append((param, int(index)))
    out: set[str] = set()
    for uses in strides.values():
        last = max(i for _, i in uses)
        out.update(p for p, i in uses if i == last or i == -1)
    return out


def derive_signature(function: str, params: list[tuple[str, bool]], launch: list[ast.expr] | None,
                     wrap_args: list[str] | None, pointer_types: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """(signature table, problems) of one kernel function; see the module docstring for the method."""
    runtime = [p for p, constexpr in params if not constexpr]
    problems: list[str] = []
    specialised = _specialised_by_launch(runtime, launch) if launch else set()
    if launch is None:
        problems.append(f"no Python launch of {function} found (a `kernel[grid](...)` call): strides are "
                        "assumed not specialised")
    remaining = [p for p in runtime if p not in specialised]
    if wrap_args is not None and len(wrap_args) != len(remaining):
        problems.append(f"the harness calls {function}_wrap with {len(wrap_args)} kernel arguments, the Python "
                        f"launch leaves {len(remaining)} ({', '.join(remaining)}) after specialising "
                        f"{', '.join(sorted(specialised)) or 'none'}: edit the signature table")
    by_param = dict(zip(remaining, wrap_args, strict=False)) if wrap_args else {}
    table: dict[str, Any] = {}
    for p in runtime:
        if p in specialised:
            table[p] = 1
            continue
        c_arg = by_param.get(p, "")
        if c_arg in pointer_types:
            table[p] = "*" + pointer_types[c_arg]
        elif "ptr" in p.lower():
            table[p] = "*fp32"
        else:
            table[p] = "i32"
    return table, problems
