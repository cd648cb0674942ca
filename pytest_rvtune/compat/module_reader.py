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
    #: kernel function -> per tensor whose ``.stride(i)`` its launch passes: (its rank or None, the evidence)
    launch_ranks: dict[str, dict[str, tuple[int | None, str]]] = field(default_factory=dict)
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
    ranks: dict[str, dict[str, tuple[int | None, str]]] = {}
    every: dict[str, list[tuple[ast.FunctionDef, ast.Call]]] = {}  # kernel -> each launch, in the order read
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
                if kernel:
                    every.setdefault(kernel, []).append((fn, sub))
                if kernel and kernel not in launches:
                    launches[kernel] = list(sub.args)
                    kinds[kernel] = [scopes.kind(a, fn) for a in sub.args]
    for kernel, calls in every.items():
        ranks[kernel] = _launch_ranks(scopes, calls)
    return ModuleInfo(kernels, getters, launches, kinds, ranks)


def _launch_ranks(scopes: _Scopes, calls: list[tuple[ast.FunctionDef, ast.Call]]) -> dict[str, tuple[int | None, str]]:
    """The rank of each tensor whose stride the first launch passes; one the module does not tell there is taken
    from another launch of the same kernel passing the same dimension's stride at the same place (their matmul's
    benchmark_triton() takes `a` from nobody, their matmul_triton() unpacks `M, K = a.shape`)."""
    (fn, call), others = calls[0], calls[1:]
    out: dict[str, tuple[int | None, str]] = {}
    for position, arg in enumerate(call.args):
        found = stride_call(arg)
        if found is None or out.get(ast.unparse(found[0]), (None, ))[0] is not None:
            continue
        tensor = ast.unparse(found[0])
        rank, evidence = scopes.rank(found[0], fn, call.lineno)
        for other_fn, other in others:
            if rank is not None:
                break
            same = stride_call(other.args[position]) if position < len(other.args) else None
            if same is not None and same[1] == found[1]:
                other_rank, other_evidence = scopes.rank(same[0], other_fn, other.lineno)
                if other_rank is not None:
                    rank, evidence = other_rank, f"{evidence}; {other_fn.name}()'s launch: {other_evidence}"
        out[tensor] = (rank, evidence)
    return out


def stride_call(arg: ast.expr) -> tuple[ast.expr, int] | None:
    """``(tensor, dimension)`` of a launch argument ``t.stride(i)`` with a literal i (also the value of
    ``t.stride(i) if t.dim() > 0 else 0``), else None."""
    if isinstance(arg, ast.IfExp):
        arg = arg.body
    if not (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "stride"
            and len(arg.args) == 1 and isinstance(arg.args[0], ast.Constant | ast.UnaryOp)):
        return None
    try:
        index = ast.literal_eval(arg.args[0])
    except (ValueError, TypeError, SyntaxError):  # `t.stride(-x)`: not a literal dimension
        return None
    return (arg.func.value, index) if type(index) is int else None


#: torch factories whose size is their positional arguments or one tuple: ``torch.randn(M, N)``, ``zeros((M, N))``.
_FACTORIES = {"randn", "rand", "empty", "zeros", "ones", "full", "randint", "empty_strided", "tensor"}
#: Tensor methods that keep the receiver's rank.
_SAME_RANK = {"contiguous", "to", "clone", "float", "half", "double", "bfloat16", "cpu", "cuda", "detach", "type",
              "t", "transpose", "permute", "abs", "exp", "requires_grad_", "fill_", "zero_", "normal_", "uniform_"}
#: ``torch.<x>_like(t)``: the rank of t.
_LIKE = re.compile(r"(?:torch\.)?\w+_like$")


_FLOAT_CALLS = re.compile(r"(?:math\.|np\.|numpy\.)?(?:sqrt|exp|log|log2|pow|float)$")
_INT_CALLS = re.compile(r"(?:\w+\.)*(?:int|len|cdiv|next_power_of_2|stride|size|numel|dim)$")


class _Scopes:
    """Whether a launch argument is a float or an int, following names to their assignments, parameters to the
    arguments of the calls that pass them (``benchmark_triton(q, k, v, sm_scale)`` under ``__main__``)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self._line: tuple[str, int] = ("", 0)

    def rank(self, expr: ast.expr, scope: ast.FunctionDef | None, line: int) -> tuple[int | None, str]:
        """(the number of dimensions of a tensor expression used at ``line`` of ``scope``, the evidence), following
        names as :meth:`kind` does; None when the module does not tell (never guessed)."""
        self._line = (scope.name if scope else "", line)  # assignments after the use do not count
        try:
            return self._rank(expr, scope, _MAX_HOPS, frozenset())
        except RecursionError:
            return None, _where(expr)

    def _rank(self, expr: ast.expr, scope: ast.FunctionDef | None, hops: int,
              seen: frozenset[tuple[str, str]]) -> tuple[int | None, str]:
        where = _where(expr)
        if isinstance(expr, ast.Name):
            return self._rank_of_name(expr.id, scope, hops, seen, where) if hops > 0 else (None, where)
        if isinstance(expr, ast.BinOp):  # broadcasting: the larger rank of the tensor operands
            found = [self._rank(e, scope, hops, seen) for e in (expr.left, expr.right)
                     if not isinstance(e, ast.Constant)]
            ranks = [r for r, _ in found if r is not None]
            return (max(ranks), where) if ranks and len(ranks) == len(found) else (None, where)
        if not isinstance(expr, ast.Call):
            return None, where
        callee = ast.unparse(expr.func)
        name = callee.rsplit(".", 1)[-1]
        receiver = expr.func.value if isinstance(expr.func, ast.Attribute) else None
        if callee.startswith("torch.") and name in _FACTORIES:
            size = next((k.value for k in expr.keywords if k.arg == "size"), None)
            positional = expr.args[2:] if name == "randint" else expr.args[:1] if name in ("full", "tensor") \
                else expr.args
            if size is None and len(positional) == 1 and isinstance(positional[0], ast.Tuple | ast.List):
                size = positional[0]
            if isinstance(size, ast.Tuple | ast.List):
                return len(size.elts), where
            if name == "tensor" or name == "full":
                return None, where
            if positional and all(self._kind(a, scope, hops)[0] == "int" for a in positional):
                return len(positional), where
            return None, where
        if _LIKE.search(callee) and callee.startswith("torch.") and expr.args:
            return self._rank(expr.args[0], scope, hops, seen)
        if receiver is not None and name in ("view", "reshape") and expr.args:
            if len(expr.args) == 1 and isinstance(expr.args[0], ast.Tuple | ast.List):
                return len(expr.args[0].elts), where
            if all(not isinstance(a, ast.Starred) for a in expr.args) and len(expr.args) > 1:
                return len(expr.args), where
            return None, where
        if receiver is not None and name == "flatten" and not expr.args:
            return 1, where
        if receiver is not None and name in _SAME_RANK:
            return self._rank(receiver, scope, hops, seen)
        return None, where

    def _rank_of_name(self, name: str, scope: ast.FunctionDef | None, hops: int,
                      seen: frozenset[tuple[str, str]], where: str) -> tuple[int | None, str]:
        key = (scope.name if scope else "", name)
        body: list[ast.AST] = [scope] if scope is not None else [s for s in self.tree.body
                                                                 if not isinstance(s, ast.FunctionDef)]
        told = {r for node in body for r in _told_rank(node, name)}
        if len(told) == 1:
            return next(iter(told)), f"{where} ({name}'s shape unpacked or checked with {next(iter(told))} dims)"
        if told:
            return None, f"{where} (its shape is used with {sorted(told)} dims)"
        values = [] if key in seen else [v for node in body for v in _assigned(node, name)
                                         if not _keeps_rank(v, name)
                                         and (key[0] != self._line[0] or getattr(v, "lineno", 0) < self._line[1])]
        seen = seen | {key}
        if values:
            found = [self._rank(v, scope, hops - 1, seen) for v in values]
            ranks = {r for r, _ in found}
            return (found[0][0], found[0][1]) if len(ranks) == 1 else (None, where)
        if scope is None:
            return None, where
        params = [a.arg for a in scope.args.args]
        if name not in params:
            return self._rank_of_name(name, None, hops - 1, seen, where)
        found = [self._rank(arg, caller, hops - 1, seen) for caller, arg in self._passed(scope, name)]
        ranks = {r for r, _ in found}
        return found[0] if len(ranks) == 1 and found else (None, where)

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
        found = [self._kind(arg, caller, hops) for caller, arg in self._passed(scope, name)]
        kinds = {k for k, _ in found}
        return found[0] if len(kinds) == 1 and found else (None, where)

    def _passed(self, scope: ast.FunctionDef, name: str) -> list[tuple[ast.FunctionDef | None, ast.expr]]:
        """(caller, argument) for parameter ``name`` of ``scope`` at each call site that passes it."""
        index = [a.arg for a in scope.args.args].index(name)
        out: list[tuple[ast.FunctionDef | None, ast.expr]] = []
        for caller, call in self._calls_of(scope.name):
            arg = next((k.value for k in call.keywords if k.arg == name), None)
            if arg is None and index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args):
                arg = call.args[index]
            if arg is not None:
                out.append((caller, arg))
        return out

    def _calls_of(self, function: str) -> list[tuple[ast.FunctionDef | None, ast.Call]]:
        out: list[tuple[ast.FunctionDef | None, ast.Call]] = []
        for top in self.tree.body:
            caller = top if isinstance(top, ast.FunctionDef) else None
            for sub in ast.walk(top):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == function:
                    out.append((caller, sub))
        return out


def _told_rank(node: ast.AST, name: str) -> list[int]:
    """Ranks the code states for ``name``: ``M, N = name.shape``, ``name.shape == (N,)``, ``name.dim() == 2``,
    ``name.ndim == 2``."""
    out: list[int] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "shape" \
                and ast.unparse(sub.value.value) == name:
            out += [len(t.elts) for t in sub.targets if isinstance(t, ast.Tuple) and
                    not any(isinstance(e, ast.Starred) for e in t.elts)]
        elif isinstance(sub, ast.Compare) and all(isinstance(op, ast.Eq) for op in sub.ops):
            subjects = [ast.unparse(e) for e in (sub.left, *sub.comparators[:-1])]
            last = sub.comparators[-1]
            if f"{name}.shape" in subjects and isinstance(last, ast.Tuple):
                out.append(len(last.elts))  # `x.shape == (N,)`
            elif isinstance(last, ast.Constant) and type(last.value) is int and any(
                    s in subjects for s in (f"{name}.dim()", f"{name}.ndim", f"{name}.ndimension()",
                                            f"len({name}.shape)")):
                out.append(last.value)  # `Q.dim() == K.dim() == 4`
    return out


def _keeps_rank(value: ast.expr, name: str) -> bool:
    """``name = name.contiguous().to(...)``: an assignment that tells nothing new about name's rank."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _SAME_RANK:
        value = value.func.value
    return isinstance(value, ast.Name) and value.id == name


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
