"""The block values a kernel without a config getter is launched with (their layer_norm, softmax, cross_entropy at
the July 2025 revision use fixed block sizes): one config, so one item per case.

Two sources, the first that gives every constexpr of the kernel:

- the module's text: the constexprs passed by keyword in its ``kernel[grid](..., BLOCK_SIZE=BLOCK_SIZE)`` call, each
  an integer literal or a module-level name assigned one (``BLOCK_SIZE = 64``);
- the launches its import-time code made (their softmax.py runs its kernel when imported; the loader records the
  call instead of running it, compat/triton_rvv_module.py): the values as their code computed them
  (``BLOCK_SIZE_N = triton.next_power_of_2(N)``).
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

from pytest_rvtune.compat.triton_rvv_module import import_launches


def _module_constants(tree: ast.Module) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Constant) and type(value.value) is int:
                out[node.targets[0].id] = value.value
            else:
                out.pop(node.targets[0].id, None)  # reassigned to something else: not a constant
    return out


def static_block_values(module_path: Path, function: str, constexprs: list[str]) -> dict[str, int] | None:
    """The constexprs of the first ``function[grid](...)`` call in the module's text, when each is a literal or a
    module-level constant (None otherwise)."""
    tree = ast.parse(module_path.read_text(errors="replace"))
    constants = _module_constants(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == function):
            continue
        values: dict[str, int] = {}
        for keyword in node.keywords:
            if keyword.arg not in constexprs:
                continue
            v = keyword.value
            if isinstance(v, ast.Constant) and type(v.value) is int:
                values[keyword.arg] = v.value
            elif isinstance(v, ast.Name) and v.id in constants:
                values[keyword.arg] = constants[v.id]
        return values if set(values) == set(constexprs) else None
    return None


def recorded_block_values(module: types.ModuleType, function: str, constexprs: list[str]) -> dict[str, int] | None:
    """The constexprs of ``function``'s first import-time launch (None when it made none, or left one out)."""
    for launch in import_launches(module):
        if launch.kernel == function:
            values = {k: v for k, v in launch.kwargs.items() if k in constexprs}
            if set(values) == set(constexprs) and all(type(v) is int for v in values.values()):
                return values
            return None
    return None
