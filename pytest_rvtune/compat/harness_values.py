"""What a Triton_RVV harness computes before it launches: its integer declarations, the files it reads and which
buffer each fills, and which buffer it checks against which.

Their harnesses hard-code sizes (``int M = 1000, E = 8, ...; int total_padded_tokens = 2008, expert_ids_size =
total_padded_tokens / fused_moe_kernel_BLOCK_SIZE_M;``) and build data paths from them with ``getDB(kernel,
std::to_string(M) + "x" + ..., idx)``. Knowing those values (C's integer arithmetic, compat/int_expr.py, with
the block constants of a config) says which files the harness opens for a config, and so whether it can serve it;
knowing which buffer each file fills, and which buffer ``check_tensor`` compares with which, maps their data onto
the kernel's parameters for our generic harness (compat/variants.py).

Read as text, like harness_reader.py (which evaluates its getDB paths with the values substituted; here the names
stay, so a file's name can say what a hard-coded size is for another config): a declaration outside the integer
subset is left out (its value is unknown), never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_rvtune.compat.harness_reader import split_call_args, split_top
from pytest_rvtune.compat.int_expr import IntExprError, evaluate

#: The harness's values are C integers.
Number = int

#: Declared types whose initialisers are read (``int M = 1000, E = 8;``).
_INT_TYPES = r"(?:const\s+)?(?:int|int32_t|int64_t|long|size_t|unsigned|uint32_t)"
_DECLARATION = re.compile(rf"\b{_INT_TYPES}\s+([^;(){{}}]+?);")


def _split_top(text: str, sep: str = ",") -> list[str]:
    """The non-empty parts of ``text`` between top-level ``sep`` (not inside brackets or string literals), stripped."""
    return [part.strip() for part, _ in split_top(text, sep) if part.strip()]


def declarations(text: str) -> list[tuple[str, str]]:
    """``(name, initialiser)`` of every integer declaration with an initialiser, in file order."""
    out: list[tuple[str, str]] = []
    for m in _DECLARATION.finditer(text):
        for part in _split_top(m.group(1)):
            name, eq, value = part.partition("=")
            name = name.strip().lstrip("*&").strip()
            if eq and re.fullmatch(r"[A-Za-z_]\w*", name) and "[" not in name:
                out.append((name, value.strip()))
    return out


def values(text: str, given: Mapping[str, Number], overrides: Mapping[str, Number] | None = None) -> dict[str, Number]:
    """The harness's integer variables: each declaration evaluated in order with ``given`` (block constants such as
    ``fused_moe_kernel_BLOCK_SIZE_M``) and the values declared before it. ``overrides`` replace a declaration's
    own initialiser (a size the data says, where the harness hard-codes another). A declaration that cannot be
    evaluated is left out, and so is any later one that uses it."""
    env: dict[str, Number] = dict(given)
    overrides = overrides or {}
    for name, init in declarations(text):
        if name in overrides:
            env[name] = overrides[name]
            continue
        try:
            env[name] = evaluate(init, env)
        except IntExprError:
            env.pop(name, None)  # a later redeclaration must not see a stale value
    return env


@dataclass(frozen=True)
class DataRead:
    """One ``getDB(kernel, shape, idx)`` of a harness, and the buffer ``readMatrix`` fills from it."""

    kernel_dir: str  # getDB's first argument: the path is <kernel_dir>/run/test_data/matrix_<shape>_<idx>.txt
    shape: tuple[tuple[str, str], ...]  # ("lit", "x") or ("expr", "M") parts of the shape string, in order
    index: int
    buffer: str | None  # the C variable readMatrix fills (None: no readMatrix of this file found)

    def shape_text(self, env: Mapping[str, Number]) -> str:
        """The shape part of the file name for these values; IntExprError when one is unknown."""
        out = []
        for kind, part in self.shape:
            if kind == "lit":
                out.append(part)
            else:
                out.append(str(evaluate(part, env)))
        return "".join(out)

    def path(self, env: Mapping[str, Number]) -> str:
        return f"{self.kernel_dir}/run/test_data/matrix_{self.shape_text(env)}_{self.index}.txt"

    def bind(self, shape_text: str, env: Mapping[str, Number]) -> dict[str, int] | None:
        """The variables that make this read's shape equal ``shape_text`` (e.g. ``1x2032`` against
        ``1x{total_padded_tokens}``): a part that is a bare name takes the number found there; any other part must
        evaluate to it. None when the shapes do not match."""
        pattern = "".join(re.escape(p) if k == "lit" else r"(\d+)" for k, p in self.shape)
        m = re.fullmatch(pattern, shape_text)
        if m is None:
            return None
        bound: dict[str, int] = {}
        exprs = [p for k, p in self.shape if k == "expr"]
        for part, found in zip(exprs, m.groups(), strict=True):
            number = int(found)
            if re.fullmatch(r"[A-Za-z_]\w*", part):
                if bound.get(part, number) != number:
                    return None
                bound[part] = number
                continue
            try:
                if evaluate(part, {**env, **bound}) != number:
                    return None
            except IntExprError:
                return None
        return bound


@dataclass(frozen=True)
class HarnessData:
    reads: tuple[DataRead, ...]
    checks: dict[str, str]  # buffer the kernel writes -> the buffer holding its expected values (check_tensor)
    declarations: tuple[tuple[str, str], ...]


def _shape_parts(expr: str, strings: Mapping[str, str] | None = None,
                 depth: int = 0) -> tuple[tuple[str, str], ...] | None:
    """The parts of a getDB shape: string literals, ``std::to_string(<int expr>)``, and string variables assigned
    once from such parts (``std::string shape_str = std::to_string(M) + "x" + ...;``)."""
    parts: list[tuple[str, str]] = []
    for term in _split_top(expr, "+"):
        m = re.fullmatch(r"std::to_string\(\s*(.+?)\s*\)", term, flags=re.S)
        if m:
            parts.append(("expr", m.group(1)))
        elif re.fullmatch(r'"[^"\\]*"', term):
            parts.append(("lit", term[1:-1]))
        elif strings and term in strings and depth < 4:
            inner = _shape_parts(strings[term], strings, depth + 1)
            if inner is None:
                return None
            parts.extend(inner)
        else:
            return None
    return tuple(parts)


def _string_variables(text: str) -> dict[str, str]:
    """``std::string x = <expr>;`` assigned once, other than from getDB (a name assigned twice is left out)."""
    found: dict[str, list[str]] = {}
    for m in re.finditer(r"\b(?:std::)?string\s+(\w+)\s*=\s*([^;]+);", text):
        if not m.group(2).lstrip().startswith("getDB"):
            found.setdefault(m.group(1), []).append(m.group(2).strip())
    for m in re.finditer(r"(?<![\w:])(\w+)\s*=\s*[^=;]+;", text):  # a later plain assignment: not once
        if m.group(1) in found and not re.search(rf"string\s+{m.group(1)}\s*=", text[max(0, m.start() - 20):m.end()]):
            found[m.group(1)].append("?")
    return {k: v[0] for k, v in found.items() if len(v) == 1}


def _call_args(text: str, start: int) -> list[str] | None:
    """The arguments of the call whose '(' is at ``start``, or None when its parentheses do not close."""
    try:
        return split_call_args(text, start)[0]
    except ValueError:
        return None


def _get_db(args: list[str] | None, default_dir: str | None,
            strings: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...], int] | None:
    """(kernel_dir, shape parts, index) of ``getDB("<kernel>", <shape>, <index>)``, or of the 2-argument
    ``getDB(<shape>, <index>)`` their July harnesses call (it does not compile against their support.h: its files
    are taken as the kernel's own, ``default_dir``, so that our generic harness can read them), else None."""
    if args and len(args) == 2 and default_dir is not None:
        args = [f'"{default_dir}"', *args]
    if not args or len(args) != 3 or not re.fullmatch(r'"\w+"', args[0]) or not args[2].isdigit():
        return None
    parts = _shape_parts(args[1], strings)
    return None if parts is None else (args[0][1:-1], parts, int(args[2]))


def read_data(text: str, default_dir: str | None = None) -> HarnessData:
    """The reads and checks of a harness (comments already stripped): ``std::string f = getDB(...)`` then
    ``readMatrix(f.c_str(), buffer, ...)``, or the getDB call inlined, ``readMatrix(getDB(...).c_str(), buffer)``."""
    files: dict[str, tuple[str, tuple[tuple[str, str], ...], int]] = {}
    strings = _string_variables(text)
    for m in re.finditer(r"\b(?:std::)?string\s+(\w+)\s*=\s*getDB\s*(?=\()", text):
        found = _get_db(_call_args(text, m.end()), default_dir, strings)
        if found is not None:
            files[m.group(1)] = found
    buffers: dict[str, str] = {}
    for m in re.finditer(r"\breadMatrix\s*(?=\()", text):
        args = _call_args(text, m.end())
        if args and len(args) >= 2:
            source = re.sub(r"\.c_str\(\)$", "", args[0].strip())
            inline = re.match(r"getDB\s*(?=\()", source)
            if inline:  # a read of its own: named by its position, which no C variable can take
                found = _get_db(_call_args(source, inline.end()), default_dir, strings)
                if found is None:
                    continue
                files[source] = found
            buffers.setdefault(source, args[1].strip())
    checks: dict[str, str] = {}
    for m in re.finditer(r"\bcheck_tensor\s*(?=\()", text):
        args = _call_args(text, m.end())
        if args and len(args) >= 2 and all(re.fullmatch(r"\w+", a) for a in args[:2]):
            checks.setdefault(args[1], args[0])
    reads = tuple(DataRead(d, parts, idx, buffers.get(var)) for var, (d, parts, idx) in files.items())
    return HarnessData(reads, checks, tuple(declarations(text)))
