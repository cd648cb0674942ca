"""Read a Triton_RVV kernel module with Python's ast (nothing of it runs): its ``*_kernel`` functions and their
parameters, its ``get_*_autotune_config`` getters, and the arguments of each kernel's Python launch."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ModuleInfo:
    kernels: dict[str, list[tuple[str, bool]]]  # function -> [(parameter, is_constexpr)]
    getters: dict[str, list[str]]  # get_*_autotune_config -> its parameter names
    launches: dict[str, list[ast.expr]]  # kernel function -> the arguments of its first `x[grid](...)` launch


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation)


def _launched_kernel(expr: ast.expr, aliases: dict[str, str]) -> str | None:
    """The kernel function an expression stands for: ``fn``, ``triton.jit(fn)``, ``Autotuner(fn_jit, ...)``."""
    if isinstance(expr, ast.Name):
        return aliases.get(expr.id)
    if isinstance(expr, ast.Call) and expr.args:
        callee = ast.unparse(expr.func)
        if callee.endswith("jit") or callee.endswith("Autotuner") or callee.endswith("autotune"):
            return _launched_kernel(expr.args[0], aliases)
    return None


def read_module(path: Path) -> ModuleInfo:
    tree = ast.parse(path.read_text(errors="replace"), filename=str(path))
    kernels, getters = {}, {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_kernel"):
            kernels[node.name] = [(a.arg, _is_constexpr(a)) for a in node.args.args]
        elif isinstance(node, ast.FunctionDef) and re.fullmatch(r"get_\w+_autotune_config", node.name):
            getters[node.name] = [a.arg for a in node.args.args]
    launches: dict[str, list[ast.expr]] = {}
    # Prefer the autotuned launches of benchmark_triton (what their build script runs), then any other.
    functions = sorted((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in kernels),
                       key=lambda n: n.name != "benchmark_triton")
    for fn in functions:
        aliases = {k: k for k in kernels}
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                kernel = _launched_kernel(sub.value, aliases)
                if kernel:
                    aliases[sub.targets[0].id] = kernel
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Subscript):
                kernel = _launched_kernel(sub.func.value, aliases)
                if kernel and kernel not in launches:
                    launches[kernel] = list(sub.args)
    return ModuleInfo(kernels, getters, launches)
