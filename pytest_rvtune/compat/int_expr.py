"""Integer expressions over named values, as C evaluates them: what a data path template may hold in a field.

Their harnesses build data paths from arithmetic (``std::to_string(M * TopK)``); the import keeps such a path as
the template field ``{M*TopK}``, evaluated per case. Only integers, names, parentheses and ``+ - * / %`` (C's
truncating division and remainder) are allowed: a template is data from a file, never code to run.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping


class IntExprError(ValueError):
    """An expression that is not plain integer arithmetic, names a value not given, or divides by zero."""


_ALLOWED = (ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.USub, ast.UAdd,
            ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
#: Longer expressions are refused rather than parsed: Python's parser recurses on nesting.
_MAX_LENGTH = 400


def _tree(text: str) -> ast.expr:
    if len(text) > _MAX_LENGTH:
        raise IntExprError(f"{text[:40]!r}...: longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise IntExprError(f"{text!r} is not an integer expression (names, integers, + - * / % and parentheses)"
                           ) from None
    for node in ast.walk(tree):
        ok = (isinstance(node, _ALLOWED)
              or (isinstance(node, ast.Constant) and type(node.value) is int))
        if not ok:
            raise IntExprError(f"{text!r}: {ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__}"
                               " is not allowed (names, integers, + - * / % and parentheses only)")
    return tree


def names_in(text: str) -> set[str]:
    """The names an expression uses."""
    return {n.id for n in ast.walk(_tree(text)) if isinstance(n, ast.Name)}


def normalise(text: str) -> str:
    """The expression as Python spells it, with no redundant parentheses: ``((M * TopK))`` -> ``M * TopK``."""
    return ast.unparse(_tree(text))


def evaluate(text: str, values: Mapping[str, object]) -> int:
    """The value of ``text`` with ``values`` for its names (each an int; C semantics for / and %)."""
    return _eval(_tree(text), values, text)


def _eval(node: ast.expr, values: Mapping[str, object], text: str) -> int:
    if isinstance(node, ast.Constant):
        assert type(node.value) is int  # _tree allows no other constant
        return node.value
    if isinstance(node, ast.Name):
        value = values.get(node.id)
        if value is None:
            raise IntExprError(f"{text!r}: {node.id} is not given")
        if isinstance(value, bool) or not isinstance(value, int):
            raise IntExprError(f"{text!r}: {node.id} = {value!r} is not an integer")
        return value
    if isinstance(node, ast.UnaryOp):
        inner = _eval(node.operand, values, text)
        return -inner if isinstance(node.op, ast.USub) else inner
    assert isinstance(node, ast.BinOp)
    left, right = _eval(node.left, values, text), _eval(node.right, values, text)
    if isinstance(node.op, ast.Add):
        return left + right
    if isinstance(node.op, ast.Sub):
        return left - right
    if isinstance(node.op, ast.Mult):
        return left * right
    if right == 0:
        raise IntExprError(f"{text!r}: division by zero")
    quotient = abs(left) // abs(right) * (1 if (left >= 0) == (right >= 0) else -1)  # C truncates toward zero
    return quotient if isinstance(node.op, ast.Div | ast.FloorDiv) else left - quotient * right
