"""Read a Triton_RVV hand-written harness (C++) as text: its ``<kernel>_wrap`` calls, the C types of what it
passes, its argv fields, built-in sizes, and the data paths its ``getDB()`` calls build.

Nothing is compiled or run. The reader follows their harnesses' conventions (shared/reference/
triton-rvv-format.md, "Harness conventions") and evaluates the C it meets in a getDB() path the way the compiler
would, as far as it can: string literals, ``std::to_string(e)`` of integer literals, argv fields, locals assigned
once, object-like ``#define`` macros and the launcher's block constants (``<kernel>_BLOCK_SIZE_M``, a config value),
combined with ``+ - * / %``, casts and parentheses. Anything else (a helper call, a variable assigned twice, a
2-argument getDB) is an :class:`Unreadable` naming the line, the construct and what to do: never an exception, never
a guess. An argv field or config value stays a name in the path template (``{M}``, ``{M * TopK}``), evaluated per
case by compat/int_expr.py.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvtune.compat.int_expr import IntExprError, evaluate, names_in, normalise

#: C element types of their harness buffers -> Triton element types.
C_ELEMENT_TYPES = {
    "float": "fp32", "double": "fp64", "_Float16": "fp16", "__fp16": "fp16", "__bf16": "bf16",
    "int": "i32", "int32_t": "i32", "int64_t": "i64", "long": "i64", "int8_t": "i8", "uint8_t": "u8",
}

#: C scalar types -> the Triton type of a kernel argument. A Python float reaches triton-cpu's launcher as fp32
#: whatever the harness holds it in (a double is converted at the call), so every C floating type is fp32 here.
C_SCALAR_TYPES = {
    "float": "fp32", "double": "fp32", "_Float16": "fp32", "__fp16": "fp32", "__bf16": "fp32",
    "bool": "i1", "char": "i32", "short": "i32", "int": "i32", "int8_t": "i32", "int16_t": "i32", "int32_t": "i32",
    "uint8_t": "i32", "uint16_t": "i32", "unsigned": "u32", "uint32_t": "u32",
    "long": "i64", "long long": "i64", "int64_t": "i64", "size_t": "u64", "ssize_t": "i64", "uint64_t": "u64",
}

#: Arguments of `<kernel>_wrap` before the kernel's own: gridX, gridY, gridZ, num_threads, kernel_ptr.
_WRAP_PREFIX = 5

#: A declaration's type: qualifiers, then one C scalar type (the declarators follow).
_DECL_TYPE = re.compile(
    r"\b(?:(?:const|static|constexpr|volatile|register)\s+)*"
    r"(?P<type>unsigned\s+long\s+long|unsigned\s+long|unsigned\s+int|unsigned|long\s+long(?:\s+int)?|long(?:\s+int)?"
    r"|(?:std::)?u?int(?:8|16|32|64)_t|(?:std::)?s?size_t|short|int|float|double|char|bool|_Float16|__fp16|__bf16"
    r"|(?:std::)?string|auto)\b(?!\s*[(:<])")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_INT_LITERAL = re.compile(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]*")
_FLOAT_LITERAL = re.compile(r"(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?[fFlL]?")
_INT_CASTS = re.compile(r"(?:const\s+)?(?:unsigned\s+)?(?:long\s+long|long|int|short|(?:std::)?u?int(?:8|16|32|64)_t"
                        r"|(?:std::)?s?size_t|unsigned)")
_FLOAT_CASTS = re.compile(r"(?:const\s+)?(?:float|double|_Float16|__fp16|__bf16)")


@dataclass(frozen=True)
class Unreadable:
    """A construct the reader cannot evaluate: where, what, and what the user can do."""

    line: int
    construct: str
    why: str


@dataclass(frozen=True)
class Declaration:
    ctype: str  # normalised C type ("float", "int", "int64_t", "std::string", ...)
    pointer: bool
    init: str | None  # the initializer's text
    line: int
    pos: int  # offset of the initializer in the cleaned text (for error lines)


@dataclass
class HarnessInfo:
    wrap_calls: dict[str, list[str]]  # kernel function -> the arguments after kernel_ptr (first call)
    pointer_types: dict[str, str]  # C variable -> Triton element type, from `float *arg0 = ...`
    shape_names: list[str]  # argv[1] fields in order ("M", "N", "K", "RUN_COUNT")
    defaults: dict[str, int]  # `int M = 1024;`
    data: list[str]  # getDB paths as templates, "matmul/run/test_data/matrix_{M}x{K}_1.txt"
    scalar_types: dict[str, str] = field(default_factory=dict)  # C variable -> Triton scalar type
    wrap_lines: dict[str, int] = field(default_factory=dict)  # kernel function -> line of its first _wrap call
    unreadable: list[Unreadable] = field(default_factory=list)
    config_names: set[str] = field(default_factory=set)  # config values the data paths use (BLOCK_SIZE_M)

    def c_type_of(self, expr: str) -> str | None:
        """The Triton scalar type of an argument the harness passes: a declared variable, a literal, a cast, or
        arithmetic of those (float wins over int, as in C); None when it cannot be told."""
        return _c_type_of(expr, self.scalar_types)


# ------------------------------------------------------------------------------------------ text
def split_call_args(text: str, open_paren: int) -> tuple[list[str], int]:
    """The top-level comma-separated arguments of the call whose '(' is at ``open_paren``, and the index after
    its ')'."""
    depth, start, args = 0, open_paren + 1, list[str]()
    for i in range(open_paren, len(text)):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                last = text[start:i].strip()
                if last or args:
                    args.append(last)
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append(text[start:i].strip())
            start = i + 1
    raise ValueError("unbalanced parentheses")


def strip_comments(text: str) -> str:
    """The text with comments blanked (newlines kept, so offsets keep their line), string literals left alone."""
    out, i, n = list[str](), 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _preprocess(text: str) -> tuple[str, dict[str, str], set[str]]:
    """(the text with preprocessor lines blanked and `#if 0` blocks dropped, object-like macros, function-like
    macro names)."""
    lines = text.split("\n")
    macros: dict[str, str] = {}
    function_macros: set[str] = set()
    skipping = 0  # nesting depth inside `#if 0`
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped.startswith("#"):
            if skipping:
                lines[i] = ""
            i += 1
            continue
        start = i
        directive = stripped
        while lines[i].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            directive = directive.rstrip()[:-1] + " " + lines[i].strip()
        for k in range(start, i + 1):
            lines[k] = ""
        i += 1
        m = re.match(r"#\s*(\w+)\s*(.*)", directive)
        word, rest = (m.group(1), m.group(2).strip()) if m else ("", "")
        if word in ("if", "ifdef", "ifndef"):
            if skipping or (word == "if" and rest == "0"):
                skipping += 1
        elif word == "endif" and skipping:
            skipping -= 1
        elif word in ("else", "elif") and skipping == 1:
            skipping = 0
        elif word == "define" and not skipping:
            d = re.match(r"([A-Za-z_]\w*)(\()?\s*(.*)", rest)
            if d and d.group(2):
                function_macros.add(d.group(1))
            elif d:
                macros[d.group(1)] = d.group(3).strip()
    return "\n".join(lines), macros, function_macros


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def of(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos)


def _statement_end(text: str, start: int) -> int:
    """The offset of the ';' (or unbalanced ')' / '{') that ends the declaration starting at ``start``."""
    depth = 0
    i = start
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            j = i + 1
            while j < len(text) and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                return i
        elif (ch == "{" and depth == 0) or (ch == ";" and depth <= 0):
            return i
        i += 1
    return len(text)


def split_top(text: str, sep: str) -> list[tuple[str, int]]:
    """``text`` split at ``sep`` outside brackets and string literals, each part with its offset."""
    parts, depth, start, i = list[tuple[str, int]](), 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            j = i + 1
            while j < len(text) and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif text.startswith(sep, i) and depth == 0:
            parts.append((text[start:i], start))
            start = i + len(sep)
            i = start
            continue
        i += 1
    parts.append((text[start:], start))
    return parts


def _declarations(text: str, lines: _Lines) -> dict[str, list[Declaration]]:
    decls: dict[str, list[Declaration]] = {}
    for m in _DECL_TYPE.finditer(text):
        j = m.start() - 1
        while j >= 0 and text[j].isspace():
            j -= 1
        previous = text[j] if j >= 0 else ";"
        if previous not in ";{}(,:)" and text[max(0, j - 3):j + 1] != "else":
            continue  # `return int(...)`, a cast `(int)x`, a template argument...
        if previous == "(" and text[m.end():m.end() + 40].lstrip().startswith(")"):
            continue  # a cast
        ctype = re.sub(r"\s+", " ", m.group("type")).replace("std::", "")
        end = _statement_end(text, m.end())
        body = text[m.end():end]
        for part, offset in split_top(body, ","):
            d = re.fullmatch(r"\s*(\*?)\s*(&?)\s*([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*(?:=\s*(.*?))?\s*", part, re.S)
            if d is None:
                continue
            pos = m.end() + offset
            decls.setdefault(d.group(3), []).append(
                Declaration(ctype, bool(d.group(1)), d.group(4), lines.of(pos), pos + (d.start(4) if d.group(4)
                                                                                       else 0)))
    return decls


def _blank_strings(text: str) -> str:
    """String and character literals emptied (``"M=%d"`` is not an assignment of M), offsets kept."""
    return re.sub(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', lambda m: '"' + " " * (len(m.group(0)) - 2) + '"',
                  text)


def _assignment_counts(text: str) -> dict[str, int]:
    text = _blank_strings(text)
    counts: dict[str, int] = {}
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", text):
        prefix = text[max(0, m.start() - 1):m.start()]
        if prefix in (".", ">"):  # a member: x.y = 1, p->y = 1
            continue
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    for m in re.finditer(r"(?:\+\+|--)\s*([A-Za-z_]\w*)|\b([A-Za-z_]\w*)\s*(?:\+\+|--)", text):
        name = m.group(1) or m.group(2)
        counts[name] = counts.get(name, 0) + 1
    return counts


# ------------------------------------------------------------------------------------------ C expressions
class _CannotRead(Exception):
    def __init__(self, construct: str, why: str) -> None:
        super().__init__(why)
        self.construct, self.why = construct, why


_TOKEN = re.compile(r"\s*(?:(?P<str>\"(?:[^\"\\\n]|\\.)*\")|(?P<chr>'(?:[^'\\\n]|\\.)*')"
                    r"|(?P<num>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[a-zA-Z]*)"
                    r"|(?P<name>(?:::)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)|(?P<op>[-+*/%()<>,.]|\S))")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = list[tuple[str, str]](), 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        kind = m.lastgroup or "op"
        value = m.group(kind)
        out.append((kind, re.sub(r"\s+", "", value) if kind == "name" else value))
        pos = m.end()
    return out


class _Evaluator:
    """C expressions of a harness -> int_expr text (names kept for argv fields and config values) or a string
    template. Raises _CannotRead for anything else."""

    def __init__(self, reader: _HarnessReader) -> None:
        self.r = reader
        self.resolving: list[str] = []

    # ---- strings: "a" + std::to_string(e) + s
    def string(self, text: str) -> str:
        pieces = []
        for part, _ in split_top(text, "+"):
            part = part.strip()
            if not part:
                raise _CannotRead(text, "an empty operand of +")
            literal = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', part, re.S)
            call = re.fullmatch(r"(?:std\s*::\s*)?(to_string|string)\s*\((.*)\)", part, re.S)
            if literal:
                pieces.append(_unescape(literal.group(1)).replace("{", "{{").replace("}", "}}"))
            elif call and call.group(1) == "to_string":
                pieces.append(self.field(call.group(2)))
            elif call:
                pieces.append(self.string(call.group(2)))
            elif _IDENT.fullmatch(part):
                body = self.value_of(part, string=True)
                self.resolving.append(part)
                try:
                    pieces.append(self.string(body))
                finally:
                    self.resolving.pop()
            else:
                raise _CannotRead(part, "not a string literal, std::to_string(...) or a string variable")
        return "".join(pieces)

    def field(self, text: str) -> str:
        """std::to_string's argument as template text: digits when constant, else ``{expr}``."""
        expr = self.integer(text)
        try:
            if not names_in(expr):
                return str(evaluate(expr, {}))
        except IntExprError as exc:
            raise _CannotRead(text, str(exc)) from None
        return "{" + normalise(expr) + "}"

    # ---- integers: recursive descent over tokens
    def integer(self, text: str) -> str:
        tokens = _tokens(text)
        if not tokens:
            raise _CannotRead(text, "an empty expression")
        self.tokens, self.i, self.text = tokens, 0, text
        out = self._sum()
        if self.i != len(self.tokens):
            raise _CannotRead(text, f"cannot read {self.tokens[self.i][1]!r} here")
        return out

    def _peek(self) -> tuple[str, str]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")

    def _take(self, value: str) -> None:
        if self._peek()[1] != value:
            raise _CannotRead(self.text, f"expected {value!r}")
        self.i += 1

    def _sum(self) -> str:
        out = self._product()
        while self._peek()[1] in ("+", "-"):
            op = self._peek()[1]
            self.i += 1
            out = f"({out} {op} {self._product()})"
        return out

    def _product(self) -> str:
        out = self._unary()
        while self._peek()[1] in ("*", "/", "%"):
            op = self._peek()[1]
            self.i += 1
            out = f"({out} {op} {self._unary()})"
        return out

    def _unary(self) -> str:
        value = self._peek()[1]
        if value in ("-", "+"):
            self.i += 1
            return f"({value}{self._unary()})"
        if value == "(":
            cast = self._cast_at(self.i + 1)
            if cast is not None:
                self.i = cast
                return self._unary()
            self.i += 1
            inner = self._sum()
            self._take(")")
            return inner
        return self._primary()

    def _cast_at(self, start: int) -> int | None:
        """The index after ``(int)`` / ``(size_t)`` at ``start``; None when it is not an integer cast."""
        j, words = start, []
        while j < len(self.tokens) and self.tokens[j][0] == "name":
            words.append(self.tokens[j][1])
            j += 1
        if not words or j >= len(self.tokens) or self.tokens[j][1] != ")":
            return None
        spelled = " ".join(words)
        if _INT_CASTS.fullmatch(spelled):
            return j + 1
        if _FLOAT_CASTS.fullmatch(spelled):
            raise _CannotRead(self.text, f"a cast to {spelled}: not an integer")
        return None

    def _primary(self) -> str:
        kind, value = self._peek()
        self.i += 1
        if kind == "num":
            m = _INT_LITERAL.fullmatch(value)
            digits = m.group(1) if m else ""
            base = 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") and len(digits) > 1 else 10
            try:
                return str(int(digits, base))
            except ValueError:
                raise _CannotRead(value, "not an integer literal") from None
        if kind != "name":
            raise _CannotRead(self.text, f"cannot read {value!r} here")
        if value.endswith("static_cast"):
            self._take("<")
            while self._peek()[1] not in (">", ""):
                self.i += 1
            self._take(">")
            self._take("(")
            inner = self._sum()
            self._take(")")
            return inner
        if self._peek()[1] == "(":
            raise _CannotRead(self._call_text(value), f"a call of {value}(): the import does not run the "
                                                      "harness's functions")
        return self.name(value)

    def _call_text(self, name: str) -> str:
        depth, j = 0, self.i
        while j < len(self.tokens):
            depth += {"(": 1, ")": -1}.get(self.tokens[j][1], 0)
            j += 1
            if depth == 0:
                break
        return name + "".join(v for _, v in self.tokens[self.i:j])

    def name(self, name: str) -> str:
        r = self.r
        if name in r.shape_names:
            return name
        config = r.config_constant(name)
        if config is not None:
            r.config_names.add(config)
            return config
        decls = r.decls.get(name, [])
        if decls and decls[0].ctype in ("float", "double", "_Float16", "__fp16", "__bf16", "string", "std::string"):
            raise _CannotRead(name, f"{name} is declared {decls[0].ctype}, not an integer")
        text = self.value_of(name, string=False)
        saved = (self.tokens, self.i, self.text)
        self.resolving.append(name)
        try:
            return "(" + self.integer(text) + ")"
        finally:
            self.tokens, self.i, self.text = saved
            self.resolving.pop()

    def value_of(self, name: str, *, string: bool) -> str:
        """The text a name stands for: a macro's body, or the initializer of a local assigned once."""
        r = self.r
        if name in self.resolving or len(self.resolving) > 16:
            raise _CannotRead(name, f"{name} is defined in terms of itself")
        if name in r.function_macros:
            raise _CannotRead(name, f"{name} is a function-like macro")
        if name in r.macros:
            body = r.macros[name]
        else:
            decls = r.decls.get(name, [])
            kind = "string" if string else "integer"
            if not decls:
                raise _CannotRead(name, f"{name} is neither an argv field, a macro, nor a local {kind} declared in "
                                        "the harness")
            if len(decls) > 1 or r.assignments.get(name, 0) > 1:
                raise _CannotRead(name, f"{name} is assigned more than once: its value at the getDB() call "
                                        "depends on the control flow")
            if decls[0].init is None:
                raise _CannotRead(name, f"{name} is declared without a value")
            body = decls[0].init
        return body


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def _c_type_of(expr: str, scalar_types: dict[str, str]) -> str | None:
    expr = expr.strip()
    cast = re.match(r"\(\s*((?:const\s+)?[A-Za-z_][\w ]*?)\s*\)|static_cast\s*<\s*([\w ]+?)\s*>", expr)
    if cast:
        spelled = re.sub(r"\s+", " ", (cast.group(1) or cast.group(2)).replace("const ", "")).replace("std::", "")
        if spelled in C_SCALAR_TYPES:
            return C_SCALAR_TYPES[spelled]
    kinds = set()
    for kind, value in _tokens(expr):
        if kind == "num":
            if _INT_LITERAL.fullmatch(value):
                kinds.add("i64" if value.lower().endswith("l") else "i32")
            elif _FLOAT_LITERAL.fullmatch(value):
                kinds.add("fp32")
            else:
                return None
        elif kind == "name":
            if value in scalar_types:
                kinds.add(scalar_types[value])
            elif re.fullmatch(r"(?:std::)?(sqrtf?|expf?|logf?|powf?|fabsf?)", value):
                kinds.add("fp32")
            else:
                return None
        elif value not in "+-*/%()":
            return None
    if not kinds:
        return None
    for preferred in ("fp32", "u64", "i64", "u32", "i32", "i1"):
        if preferred in kinds:
            return preferred
    return None


# ------------------------------------------------------------------------------------------ the reader
class _HarnessReader:
    def __init__(self, text: str) -> None:
        cleaned, self.macros, self.function_macros = _preprocess(strip_comments(text))
        self.text = cleaned
        self.lines = _Lines(cleaned)
        self.decls = _declarations(cleaned, self.lines)
        self.assignments = _assignment_counts(cleaned)
        self.unreadable: list[Unreadable] = []
        self.config_names: set[str] = set()
        self.wrap_calls: dict[str, list[str]] = {}
        self.wrap_lines: dict[str, int] = {}
        for m in re.finditer(r"\b(\w+)_wrap\s*\(", cleaned):
            try:
                args, _ = split_call_args(cleaned, m.end() - 1)
            except ValueError:
                self.unreadable.append(Unreadable(self.lines.of(m.start()), m.group(0),
                                                  "unbalanced parentheses in the call"))
                continue
            if m.group(1) not in self.wrap_calls:
                self.wrap_calls[m.group(1)] = args[_WRAP_PREFIX:]
                self.wrap_lines[m.group(1)] = self.lines.of(m.start())
        at: dict[int, str] = {}
        for name, index in re.findall(r"\b(\w+)\s*=\s*Shape\s*\.\s*at\s*\(\s*(\d+)\s*\)", cleaned):
            if int(index) < 64:
                at[int(index)] = name
        size = re.search(r"Shape\s*\.\s*size\s*\(\s*\)\s*==\s*(\d+)", cleaned)
        count = int(size.group(1)) if size and int(size.group(1)) < 64 else (max(at) + 1 if at else 0)
        self.shape_names = [at.get(i, f"ARG{i}") for i in range(count)]

    def config_constant(self, name: str) -> str | None:
        """``matmul_kernel_BLOCK_SIZE_M`` (the launcher's extern constant) -> ``BLOCK_SIZE_M``."""
        for fn in self.wrap_calls:
            if name.startswith(fn + "_") and len(name) > len(fn) + 1:
                return name[len(fn) + 1:]
        return None

    def defaults(self) -> dict[str, int]:
        out = {}
        for name in self.shape_names:
            decls = self.decls.get(name, [])
            if len(decls) == 1 and decls[0].init is not None and re.fullmatch(r"-?\d+", decls[0].init.strip()):
                out[name] = int(decls[0].init)
        return out

    def types(self) -> tuple[dict[str, str], dict[str, str]]:
        pointers, scalars = {}, {}
        for name, decls in self.decls.items():
            if len({(d.ctype, d.pointer) for d in decls}) != 1:
                continue  # declared with different types in different scopes: not told
            d = decls[0]
            if d.pointer and d.ctype in C_ELEMENT_TYPES:
                pointers[name] = C_ELEMENT_TYPES[d.ctype]
            elif not d.pointer and d.ctype in C_SCALAR_TYPES:
                scalars[name] = C_SCALAR_TYPES[d.ctype]
        return pointers, scalars

    def data(self) -> list[str]:
        out = []
        for m in re.finditer(r"\bgetDB\s*\(", self.text):
            line = self.lines.of(m.start())
            try:
                args, end = split_call_args(self.text, m.end() - 1)
            except ValueError:
                self.unreadable.append(Unreadable(line, "getDB(", "unbalanced parentheses in the call"))
                continue
            call = re.sub(r"\s+", " ", self.text[m.start():end])
            if len(args) != 3:
                self.unreadable.append(Unreadable(
                    line, _short(call), f"getDB with {len(args)} argument(s): their support library declares "
                    "getDB(kernel_name, Shape, index), so this harness does not compile against it; call "
                    'getDB("<kernel>", <shape>, <index>) as their matmul harness does'))
                continue
            evaluator = _Evaluator(self)
            try:
                kernel = evaluator.string(args[0])
                shape = evaluator.string(args[1])
                index = evaluator.field(args[2])
            except _CannotRead as exc:
                self.unreadable.append(Unreadable(line, _short(exc.construct), exc.why))
                continue
            except (RecursionError, IntExprError) as exc:
                self.unreadable.append(Unreadable(line, _short(call), f"too deep or not plain arithmetic: {exc}"))
                continue
            # support.cpp's getDB: kernel_name + "/run/test_data/matrix_" + Shape + "_" + index + ".txt"
            out.append(f"{kernel}/run/test_data/matrix_{shape}_{index}.txt")
        return list(dict.fromkeys(out))


def _short(text: str, limit: int = 120) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[:limit - 3] + "..."


def parse_harness(text: str) -> HarnessInfo:
    """Everything the import needs from a harness's text; never raises (what it cannot read is in
    ``unreadable``)."""
    reader = _HarnessReader(text)
    data = reader.data()
    pointers, scalars = reader.types()
    return HarnessInfo(
        wrap_calls=reader.wrap_calls, pointer_types=pointers, shape_names=reader.shape_names,
        defaults=reader.defaults(), data=data, scalar_types=scalars, wrap_lines=reader.wrap_lines,
        unreadable=reader.unreadable, config_names=reader.config_names)


def read_harness(path: Path) -> HarnessInfo:
    """:func:`parse_harness` of a file (OSError when it cannot be read: the caller names the file)."""
    return parse_harness(path.read_text(errors="replace"))
