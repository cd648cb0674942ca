#!/usr/bin/env python3
"""Check the package's import structure: no import circles and no private name used across modules.

Walks every module of pytest_rvtune with ``ast`` and builds the graph of imports between its modules, counting
every import statement wherever it stands (module level or inside a function: a function-local import still
ties the two modules together, it only hides the circle until the function runs), imports under
``if TYPE_CHECKING:`` too: they never run, but a circle through a type imported for annotations is a type living in
the wrong module (two modules that need each other's names), and it becomes a real circle the day the type is
needed at run time. Put the type in the module that owns it, or where both can import it.

Reports each import circle (one per strongly connected component, shown as a closed path) and each use of a
private name (leading underscore, not a dunder) of one module by another: ``from m import _x``, ``m._x`` on an
imported module, and ``Name._x`` on a name imported from another module of the package. Exit 1 if any.

    python scripts/check_layout.py [package_dir]
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "pytest_rvtune"


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: set[str] = field(default_factory=set)


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def discover(package_dir: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = Module(".".join(parts), path, is_package)
    return modules


def resolve_relative(module: Module, level: int, target: str | None) -> str:
    base = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


@dataclass
class Problems:
    private_uses: list[str] = field(default_factory=list)


def scan(module: Module, modules: dict[str, Module], problems: Problems) -> None:
    tree = ast.parse(module.path.read_text(), filename=str(module.path))
    # Local names bound to something another module of the package defines (a module or an object in it).
    foreign: dict[str, str] = {}
    where = f"{module.path}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    if alias.name in modules:
                        module.imports.add(alias.name)
                    if alias.asname:
                        foreign[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = resolve_relative(module, node.level, node.module) if node.level else (node.module or "")
            if not (source == PACKAGE or source.startswith(PACKAGE + ".")):
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in modules:
                    module.imports.add(submodule)
                elif source in modules:
                    module.imports.add(source)
                    if is_private(alias.name) and source != module.name:
                        problems.private_uses.append(
                            f"{where}:{node.lineno}: imports private name {alias.name} from {source}")
                foreign[alias.asname or alias.name] = submodule
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and is_private(node.attr) and isinstance(node.value, ast.Name)
                and node.value.id in foreign):
            owner = foreign[node.value.id]
            if owner != module.name and not owner.startswith(module.name + "."):
                problems.private_uses.append(
                    f"{where}:{node.lineno}: uses private name {node.value.id}.{node.attr} (from {owner})")
    module.imports.discard(module.name)


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module, each shown as one closed path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0

    def strongconnect(start: str) -> None:
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(modules[start].imports)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(modules[child].imports))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for name in sorted(modules):
        if name not in index:
            strongconnect(name)
    return [closed_path(component, modules) for component in sorted(components)]


def closed_path(component: list[str], modules: dict[str, Module]) -> list[str]:
    """A shortest path from the component's first module back to itself (breadth-first within the component)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(modules[node].imports & members):
                if child == start:
                    path = [start]
                    while node != start:
                        path.append(node)
                        node = previous[node]
                    return [start, *reversed(path[1:]), start] if len(path) > 1 else [start, start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return component


def main(argv: list[str]) -> int:
    package_dir = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / PACKAGE
    modules = discover(package_dir)
    problems = Problems()
    for module in modules.values():
        scan(module, modules, problems)
    found = cycles(modules)
    for path in found:
        print("import circle: " + " -> ".join(path))
    for line in problems.private_uses:
        print(line)
    print(f"{len(modules)} modules: {len(found)} import circle(s), "
          f"{len(problems.private_uses)} private name use(s) across modules")
    return 1 if found or problems.private_uses else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
