"""A chain of kernels in their Python launch code, read with ast (nothing runs): several kernels of one module
launched one after the other in one function, each consuming tensors an earlier launch wrote.

Their August attention is such a chain: ``benchmark_triton(Q, K, V)`` launches ``atten_transpose_kernel`` (K ->
K_t), ``atten_matmul_0_kernel`` (Q, K_t -> S), ``softmax_kernel`` (S -> P) and ``atten_matmul_1_kernel`` (P, V ->
Output), every intermediate made there with ``torch.empty``/``torch.zeros``, and every launch's Autotuner takes
``configs=get_attention_kernel_autotune_config(N_CTX, D_HEAD)``. When their harness cannot run the kernels (theirs
calls kernels attention.py does not define), the chain is one item per config in our generic harness
(compat/chain_run.py, harness/chain.py); this module finds the launch order, what the chain consumes and makes,
and how the configs map across it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

#: Calls that make a tensor inside the launch function: an intermediate buffer of the chain (or its output).
_MAKERS = ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like", "randn", "rand")


@dataclass(frozen=True)
class ChainLaunch:
    kernel: str
    line: int
    getter: str | None  # the config getter its Autotuner's ``configs=`` calls (None: a plain jit launch)
    names: tuple[str, ...]  # the names it passes, in order


@dataclass(frozen=True)
class ChainFound:
    function: str  # their launch function
    params: tuple[str, ...]  # its parameters
    launches: tuple[ChainLaunch, ...]  # in their launch order
    made: tuple[str, ...]  # tensors the function makes itself (intermediates and outputs), in order
    outputs: tuple[str, ...]  # of those, the ones no later launch consumes: the chain's final output(s)

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(launch.kernel for launch in self.launches))

    def shared_getter(self) -> str | None:
        """The getter every launch takes its configs from, when it is one and the same (one config per item,
        applied to every kernel of the chain); None otherwise."""
        getters = {launch.getter for launch in self.launches}
        return getters.pop() if len(getters) == 1 else None

    def describe(self) -> str:
        return " -> ".join(f"{launch.kernel} (line {launch.line})" for launch in self.launches)


def _kernel_of(expr: ast.expr, kernels: set[str], aliases: dict[str, tuple[str, str | None]]
               ) -> tuple[str, str | None] | None:
    """(kernel, its getter) that ``expr`` stands for: the kernel itself, a name bound to it, ``triton.jit(k)``,
    ``Autotuner(k, ..., configs=getter(...))``."""
    if isinstance(expr, ast.Name):
        if expr.id in aliases:
            return aliases[expr.id]
        return (expr.id, None) if expr.id in kernels else None
    if isinstance(expr, ast.Call) and ast.unparse(expr.func).endswith(("jit", "Autotuner", "autotune")):
        first = expr.args[0] if expr.args else next((k.value for k in expr.keywords if k.arg == "fn"), None)
        inner = _kernel_of(first, kernels, aliases) if first is not None else None
        if inner is None:
            return None
        configs = next((k.value for k in expr.keywords if k.arg == "configs"), None)
        if isinstance(configs, ast.Call) and isinstance(configs.func, ast.Name):
            return inner[0], configs.func.id
        return inner
    return None


def _makes_tensor(value: ast.expr) -> bool:
    return isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in _MAKERS


def _in_order(host: ast.FunctionDef) -> list[ast.AST]:
    nodes = [n for n in ast.walk(host) if isinstance(n, ast.Assign | ast.Call)]
    return sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def chain_in(host: ast.FunctionDef, kernels: set[str]) -> ChainFound | None:
    """The chain ``host`` launches, or None (fewer than two launches, or none consuming another's output)."""
    aliases: dict[str, tuple[str, str | None]] = {}
    made: list[str] = []
    launches: list[ChainLaunch] = []
    for node in _in_order(host):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
            found = _kernel_of(node.value, kernels, aliases)
            if found is not None:
                aliases[target] = found  # `matmul_jit = triton.jit(atten_matmul_1_kernel)` rebinds the name
            else:
                aliases.pop(target, None)
            if _makes_tensor(node.value) and target not in made:
                made.append(target)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            found = _kernel_of(node.func.value, kernels, aliases)
            if found is not None:
                names = tuple(a.id for a in [*node.args, *(k.value for k in node.keywords)] if isinstance(a, ast.Name))
                launches.append(ChainLaunch(found[0], node.lineno, found[1], names))
    if len(launches) < 2:
        return None
    uses = {name: sum(name in launch.names for launch in launches) for name in made}
    if not any(n >= 2 for n in uses.values()):
        return None  # no launch consumes what another wrote: independent launches, not a chain
    outputs = tuple(name for name in made if uses[name] == 1
                    and any(name in launch.names for launch in launches[1:]))
    return ChainFound(host.name, tuple(a.arg for a in host.args.args), tuple(launches),
                      tuple(n for n in made if uses[n] >= 1), outputs)


def find_chain(module_path: Path, kernels: set[str]) -> ChainFound | None:
    """The first chain of ``kernels`` launched in one function of the module (``benchmark_triton`` first, as
    their generic harness plans look there first), or None."""
    tree = ast.parse(module_path.read_text(errors="replace"))
    hosts = sorted((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in kernels),
                   key=lambda n: n.name != "benchmark_triton")
    for host in hosts:
        found = chain_in(host, kernels)
        if found is not None:
            return found
    return None
