"""Their Python reference of a kernel: the function whose result their code compares the kernel's with, where no
expected TXT file exists (their July softmax and layer_norm have no data; their attention's reference is
``torch_attention_reference``). Read with ast, nothing runs.

A candidate is a module-level function named ``torch_*``, ``pytorch_*``, ``naive_*``, ``ref_*`` or ``*_reference``;
the reference is the one candidate called in the same function (or module-level code, ``__main__``) as their
launch function: what their test compares against. None called there, or several, is ambiguous: the caller says
which candidates there are and which table key names the reference.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

_CANDIDATE = re.compile(r"(?:torch|pytorch|naive|ref)_\w+|\w+_reference")


@dataclass(frozen=True)
class ReferenceFound:
    name: str | None  # the reference, when one candidate is compared with the launch
    candidates: tuple[str, ...]  # every candidate function of the module
    why: str  # how it was found, or why none was


def _called(node: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def find_reference(module_path: Path, launch: str) -> ReferenceFound:
    tree = ast.parse(module_path.read_text(errors="replace"))
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    candidates = tuple(f.name for f in functions if _CANDIDATE.fullmatch(f.name))
    scopes: list[tuple[str, list[ast.AST]]] = [("module-level code", [n for n in tree.body
                                                                     if not isinstance(n, ast.FunctionDef)])]
    scopes += [(f"{f.name}()", [f]) for f in functions if f.name not in candidates]
    compared: dict[str, str] = {}
    for where, body in scopes:
        called = set().union(*(_called(n) for n in body)) if body else set()
        if launch in called:
            for name in sorted(called & set(candidates)):
                compared.setdefault(name, where)
    if len(compared) == 1:
        name, where = next(iter(compared.items()))
        return ReferenceFound(name, candidates, f"{where} calls it beside {launch}()")
    if compared:
        return ReferenceFound(None, candidates, f"several are called beside {launch}(): {', '.join(compared)}")
    if candidates:
        return ReferenceFound(None, candidates, f"none of {', '.join(candidates)} is called beside {launch}()")
    return ReferenceFound(None, (), "the module has no torch_*/pytorch_*/naive_*/ref_*/*_reference function")



def resolve_reference(module_path: Path, launch: str, chosen: str | None, entry: str) -> ReferenceFound:
    """``find_reference``, unless the user named the reference in rvtune.toml (``chosen``): then that one."""
    found = find_reference(module_path, launch)
    if chosen:
        return ReferenceFound(chosen, found.candidates, f"reference in [triton_rvv.kernels.{entry}]")
    return found
