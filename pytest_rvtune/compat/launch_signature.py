"""The launch signature of a kernel as their patched triton-cpu built it, from the module's Python launch and the
harness's ``<kernel>_wrap(...)`` call.

triton-cpu specialises integer arguments equal to 1 into constants, so the harness passes fewer arguments than the
kernel has. The Python launch says which (``t.stride(last)`` of a contiguous tensor is 1, "last" as the module says
t's rank: ``torch.randn(M, N)``, ``M, N = t.shape``); the harness's call says how many remain and, from its C
declarations, the element type of each pointer and the type of each scalar. A scalar's type is checked against the
Python launch (a float there, ``1.0 / math.sqrt(D)``, made triton-cpu's launcher take a float). When the two
disagree, or neither tells, the problem says so and the user edits the signature table: never a silent i32.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_rvtune.compat.module_reader import stride_call

#: The Python launch's kinds -> the Triton type triton-cpu gives such an argument.
_PYTHON_TYPES = {"float": "fp32", "int": "i32"}


def _specialised_by_launch(runtime: list[str], args: list[ast.expr],
                           ranks: Mapping[str, tuple[int | None, str]]) -> tuple[set[str], list[str]]:
    """(parameters the Python launch passes the last dimension's stride for: 1 for a contiguous tensor, so
    specialised; problems). ``t.stride(-1)`` is the last; ``t.stride(i)`` is when t has i + 1 dimensions, which
    ``ranks`` says (how the module makes t: ``torch.randn(M, N)``, ``.view(...)``, ``M, N = t.shape``). Their
    softmax passes only ``x.stride(0)`` of a 2-D x: not its last dimension, so not 1. A tensor whose rank the module
    does not tell is not specialised, and said."""
    out: set[str] = set()
    unknown: dict[str, list[str]] = {}  # tensor -> `param (dim i)` of its strides, when its rank is not told
    for param, arg in zip(runtime, args, strict=False):
        found = stride_call(arg)
        if found is None:
            continue
        tensor, index = ast.unparse(found[0]), found[1]
        rank = ranks.get(tensor, (None, ""))[0]
        if index == -1 or (rank is not None and index == rank - 1):
            out.add(param)
        elif rank is None:
            unknown.setdefault(tensor, []).append(f"{param} = {tensor}.stride({index})")
    problems = [f"the module does not tell how many dimensions {tensor} has ({ranks.get(tensor, (0, f'`{tensor}`'))[1]}"
                f"; made by `torch.randn(M, N)`, `.view(...)`, `M, N = {tensor}.shape`, ... would tell), so which of "
                f"{', '.join(uses)} is its last dimension's stride (1 for a contiguous tensor, specialised away by "
                "triton-cpu): none is taken as 1; set that parameter = 1 in the signature table"
                for tensor, uses in unknown.items()]
    return out, problems


def derive_signature(function: str, params: list[tuple[str, bool]], launch: list[ast.expr] | None,
                     wrap_args: list[str] | None, pointer_types: dict[str, str],
                     scalar_type_of: Callable[[str], str | None] | None = None,
                     launch_kinds: Sequence[tuple[str | None, str]] | None = None,
                     launch_ranks: Mapping[str, tuple[int | None, str]] | None = None
                     ) -> tuple[dict[str, Any], list[str]]:
    """(signature table, problems) of one kernel function; see the module docstring for the method.

    ``scalar_type_of`` gives the Triton type of an argument the harness passes (HarnessInfo.c_type_of);
    ``launch_kinds`` the Python launch's kind of each argument (ModuleInfo.launch_kinds); ``launch_ranks`` the
    rank of each tensor whose stride it passes (ModuleInfo.launch_ranks)."""
    runtime = [p for p, constexpr in params if not constexpr]
    problems: list[str] = []
    specialised: set[str] = set()
    if launch:
        specialised, problems = _specialised_by_launch(runtime, launch, launch_ranks or {})
    if launch is None:
        problems.append(f"no Python launch of {function} found (a `kernel[grid](...)` call): strides are "
                        "assumed not specialised")
    remaining = [p for p in runtime if p not in specialised]
    if wrap_args is not None and len(wrap_args) != len(remaining):
        problems.append(f"the harness calls {function}_wrap with {len(wrap_args)} kernel arguments, the Python "
                        f"launch leaves {len(remaining)} ({', '.join(remaining)}) after specialising "
                        f"{', '.join(sorted(specialised)) or 'none'}: edit the signature table")
    by_param = dict(zip(remaining, wrap_args, strict=False)) if wrap_args else {}
    kinds = dict(zip(runtime, launch_kinds, strict=False)) if launch_kinds else {}
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
            problems.append(f"{p}: the element type is not told by the harness (it passes {c_arg or 'nothing'!r}, "
                            "not a pointer declared as `float *x = ...`): *fp32 assumed; set it in the signature "
                            "table if wrong")
        else:
            table[p], problem = _scalar_type(p, c_arg, scalar_type_of, kinds.get(p))
            if problem:
                problems.append(problem)
    return table, problems


def _scalar_type(param: str, c_arg: str, scalar_type_of: Callable[[str], str | None] | None,
                 python: tuple[str | None, str] | None) -> tuple[str, str | None]:
    """(the Triton type of a scalar parameter, a problem or None): the harness's C type, checked against the
    Python launch's."""
    c_type = scalar_type_of(c_arg) if (scalar_type_of and c_arg) else None
    py_kind, py_where = python if python else (None, "")
    py_type = _PYTHON_TYPES.get(py_kind or "")
    if c_type and py_type and (c_type.startswith("fp") != py_type.startswith("fp")):
        return c_type, (f"{param}: the harness passes `{c_arg}` ({c_type}) where the Python launch passes "
                        f"{py_where} ({py_kind}, {py_type} in triton-cpu's launcher): typed {c_type} as the harness "
                        f"passes it; if the kernel takes {py_type}, set {param} = \"{py_type}\" in the signature table")
    if c_type:
        return c_type, None
    if py_type:
        return py_type, None
    told = f"the harness passes `{c_arg}`" if c_arg else "the harness passes nothing for it"
    launched = f", the Python launch {py_where}" if py_where else ""
    return "i32", (f"{param}: cannot tell its type ({told}, not a declared variable or literal{launched}): "
                   "i32 assumed; set it (\"fp32\", \"i64\", ...) in the signature table if wrong")
