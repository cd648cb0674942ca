"""Read a Triton_RVV kernel module with Python's ast (nothing of it runs): its ``*_kernel`` functions and their
parameters, its ``get_*_autotune_config`` getters, the arguments of each kernel's Python launch, and whether each
scalar argument there is a float or an int (what triton-cpu typed the launcher's parameter from).

Reading never raises: a module Python cannot parse gives a ModuleInfo whose ``error`` says where and why.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

#: How far a launch argument is followed through names, parameters and call sites before giving up.
_MAX_HOPS = 6


@dataclass
class ModuleInfo:
    kernels: dict[str, list[tuple[str, bool]]]  # function -> [(parameter, is_constexpr)]
    getters: dict[str, list[str]]  # get_*_autotune_config -> its parameter names
    launches: dict[str, list[ast.expr]]  # kernel function -> the arguments of its first `x[grid](...)` launch
    #: kernel function -> per launch argument: ("float" | "int" | None, the evidence: expression and line)
    launch_kinds: dict[str, list[tuple[str | None, str]]] = field(default_factory=dict)
    error: str | None = None  # "line N: why" when Python cannot parse the module


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation)


def _launched_kernel(expr: ast.expr, aliases: dict[str, str]) -> str | None:
    """The kernel function an expression stands for: ``fn``, ``triton.jit(fn)``, ``Autotuner(fn_jit, ...)``."""
    if isinstance(expr, ast.Name):
        return aliases.get(expr.id)
    if isinstance(expr, ast.Call):
        callee = ast.unparse(expr.func)
        if callee.endswith("jit") or callee.endswith("Autotuner") or callee.endswith("autotune"):
            first = expr.args[0] if expr.args else next((k.value for k in expr.keywords if k.arg == "fn"), None)
            return _launched_kernel(first, aliases) if first is not None else None
    return None


def read_module(path: Path) -> ModuleInfo:
    """:func:`parse_module` of a file (OSError when it cannot be read: the caller names the file)."""
    return parse_module(path.read_text(errors="replace"), str(path))


def parse_module(text: str, filename: str = "<module>") -> ModuleInfo:
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as exc:
        if exc.lineno is None:
            return ModuleInfo({}, {}, {}, error=f"Python cannot parse it ({exc.msg})")
        return ModuleInfo({}, {}, {}, error=f"line {exc.lineno}: syntax error ({exc.msg})")
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes; nesting deeper than the parser takes
        return ModuleInfo({}, {}, {}, error=f"Python cannot parse it ({type(exc).__name__}: {exc})")
    try:
        return _read_tree(tree)
    except RecursionError:
        return ModuleInfo({}, {}, {}, error="nested too deeply to read")


def _read_tree(tree: ast.Module) -> ModuleInfo:
    kernels, getters = {}, {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_kernel"):
            kernels[node.name] = [(a.arg, _is_constexpr(a)) for a in node.args.args]
        elif isinstance(node, ast.FunctionDef) and re.fullmatch(r"get_\w+_autotune_config", node.name):
            getters[node.name] = [a.arg for a in node.args.args]
    launches: dict[str, list[ast.expr]] = {}
    kinds: dict[str, list[tuple[str | None, str]]] = {}
    scopes = _Scopes(tree)
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
                    kinds[kernel] = [scopes.kind(a, fn) for a in sub.args]
    return ModuleInfo(kernels, getters, launches, kinds)


_FLOAT_CALLS = re.compile(r"(?:math\.|np\.|numpy\.)?(?:sqrt|exp|log|log2|pow|float)$")
_INT_CALLS = re.compile(r"(?:\w+\.)*(?:int|len|cdiv|next_power_of_2|stride|size|numel|dim)$")


class _Scopes:
    """Whether a launch argument is a float or an int, following names to their assignments, parameters to the
    arguments of the calls that pass them (``benchmark_triton(q, k, v, sm_scale)`` under ``__main__``)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    def kind(self, expr: ast.expr, scope: ast.FunctionDef | None) -> tuple[str | None, str]:
        try:
            return self._kind(expr, scope, _MAX_HOPS)
        except RecursionError:
            return None, _where(expr)

    def _kind(self, expr: ast.expr, scope: ast.FunctionDef | None, hops: int) -> tuple[str | None, str]:
        where = _where(expr)
        if isinstance(expr, ast.Constant):
            if isinstance(expr.value, float):
                return "float", where
            return ("int", where) if isinstance(expr.value, int) else (None, where)
        if isinstance(expr, ast.UnaryOp):
            return self._kind(expr.operand, scope, hops)
        if isinstance(expr, ast.BinOp):
            if isinstance(expr.op, ast.Div):
                return "float", where
            left, right = self._kind(expr.left, scope, hops)[0], self._kind(expr.right, scope, hops)[0]
            if "float" in (left, right):
                return "float", where
            return ("int" if left == right == "int" else None), where
        if isinstance(expr, ast.Call):
            callee = ast.unparse(expr.func)
            if _FLOAT_CALLS.search(callee):
                return "float", where
            if _INT_CALLS.search(callee):
                return "int", where
            return None, where
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape":
            return "int", where
        if isinstance(expr, ast.Name) and hops > 0:
            return self._name(expr.id, scope, hops - 1, where)
        return None, where

    def _name(self, name: str, scope: ast.FunctionDef | None, hops: int, where: str) -> tuple[str | None, str]:
        body: list[ast.AST] = [scope] if scope is not None else [s for s in self.tree.body
                                                                 if not isinstance(s, ast.FunctionDef)]
        values = [v for node in body for v in _assigned(node, name)]
        if values:
            found = [self._kind(v, scope, hops) for v in values]
            kinds = {k for k, _ in found}
            return (found[0] if len(kinds) == 1 else (None, where))
        if scope is None:
            return None, where
        params = [a.arg for a in scope.args.args]
        if name not in params:
            return self._name(name, None, hops, where)  # a module-level name
        index = params.index(name)
        found = []
        for caller, call in self._calls_of(scope.name):
            arg = next((k.value for k in call.keywords if k.arg == name), None)
            if arg is None and index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args):
                arg = call.args[index]
            if arg is not None:
                found.append(self._kind(arg, caller, hops))
        kinds = {k for k, _ in found}
        return found[0] if len(kinds) == 1 and found else (None, where)

    def _calls_of(self, function: str) -> list[tuple[ast.FunctionDef | None, ast.Call]]:
        out: list[tuple[ast.FunctionDef | None, ast.Call]] = []
        for top in self.tree.body:
            caller = top if isinstance(top, ast.FunctionDef) else None
            for sub in ast.walk(top):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == function:
                    out.append((caller, sub))
        return out


def _assigned(node: ast.AST, name: str) -> list[ast.expr]:
    """The values ``name`` is assigned in ``node`` (tuple unpacking of ``x.shape`` counts as ints)."""
    out: list[ast.expr] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign):
            for target in sub.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    out.append(sub.value)
                elif isinstance(target, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == name
                                                           for e in target.elts):
                    if isinstance(sub.value, ast.Attribute) and sub.value.attr == "shape":
                        out.append(ast.Subscript(sub.value, ast.Constant(0), lineno=sub.lineno))
                    elif isinstance(sub.value, ast.Tuple) and len(sub.value.elts) == len(target.elts):
                        i = next(i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id == name)
                        out.append(sub.value.elts[i])
                    else:
                        out.append(sub.value)
        elif isinstance(sub, ast.AnnAssign | ast.AugAssign) and isinstance(sub.target, ast.Name) \
                and sub.target.id == name and sub.value is not None:
            out.append(sub.value)
    return out


def _where(expr: ast.expr) -> str:
    line = getattr(expr, "lineno", None)
    text = ast.unparse(expr)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"`{text}` (line {line})" if line else f"`{text}`"
