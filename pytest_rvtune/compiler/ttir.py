"""Parse Triton IR printed in MLIR's generic form into a small Python tree.

Triton's Python bindings do not expose attribute lists, dense constants or block iteration, so the lowering
reads the module's text instead: ``"dialect.op"(%a, %b)[^succ] <{props}> ({regions}) {attrs} : (T) -> T loc(...)``.
Only what the lowering needs is interpreted (types, locations, a few attribute shapes); other attribute
values are kept as their raw text so nothing is lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SCALAR_TYPES = frozenset({"i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "index",
                          "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ"})


class TTIRParseError(ValueError):
    pass


@dataclass(frozen=True)
class Type:
    """An MLIR type: a scalar (``elem`` only), a pointer (``pointee``) or a tensor (``shape`` + element)."""

    elem: str | None = None  # scalar name, e.g. "f32"; None for pointers
    pointee: Type | None = None  # for !tt.ptr<T>
    shape: tuple[int, ...] | None = None  # set for tensors; the element is elem/pointee

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    @property
    def is_ptr(self) -> bool:
        return self.pointee is not None

    @property
    def element(self) -> Type:
        """The element type of a tensor (or the type itself for scalars and pointers)."""
        return Type(self.elem, self.pointee) if self.shape is not None else self

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape or ():
            n *= d
        return n

    def __str__(self) -> str:
        base = f"!tt.ptr<{self.pointee}>" if self.pointee is not None else str(self.elem)
        if self.shape is None:
            return base
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + base + ">"


@dataclass(frozen=True)
class Loc:
    """Where an op comes from: the name Triton gave it (a Python variable) and the kernel file:line."""

    name: str | None = None
    file: str | None = None
    line: int | None = None

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "<unknown location>"


@dataclass
class Block:
    label: str
    args: list[tuple[str, Type, Loc]]
    ops: list[Op] = field(default_factory=list)


@dataclass
class Region:
    blocks: list[Block]


@dataclass
class Op:
    name: str
    results: list[str]  # value names, multi-results expanded as "%r#0", "%r#1", ...
    operands: list[str]
    operand_types: list[Type]
    result_types: list[Type]
    props: dict[str, str]  # raw attribute text, e.g. {"predicate": "2 : i64"}
    attrs: dict[str, str]
    regions: list[Region]
    successors: list[str]
    loc: Loc

    def attr(self, key: str) -> str | None:
        return self.props.get(key, self.attrs.get(key))

    def int_attr(self, key: str) -> int:
        raw = self.attr(key)
        if raw is None:
            raise TTIRParseError(f"{self.name} at {self.loc.where()}: missing attribute {key}")
        return parse_int_attr(raw)


def parse_int_attr(raw: str) -> int:
    text = raw.split(":")[0].strip()
    if text in ("true", "false"):
        return int(text == "true")
    return int(text, 0)


def parse_int_array(raw: str) -> list[int]:
    """``array<i32: 1, 0>`` or ``[1, 0]`` -> [1, 0]."""
    body = raw.strip()
    if body.startswith("array<"):
        body = body[len("array<"):-1]
        body = body.split(":", 1)[1] if ":" in body else ""
    body = body.strip("[] ")
    return [int(x) for x in body.split(",") if x.strip()]


_FILE_LINE = re.compile(r'"([^"]*)":(\d+):(\d+)')
_NAME = re.compile(r'^"([^"]*)"\(')


def parse_loc(raw: str) -> Loc:
    name_match = _NAME.match(raw)
    spots = _FILE_LINE.findall(raw)
    if not spots:
        return Loc(name_match.group(1) if name_match else None)
    # In callsite(callee at caller) the caller comes last: that is the kernel's own line.
    file, line, _ = spots[-1]
    return Loc(name_match.group(1) if name_match else None, file, int(line))


def parse_type(text: str) -> Type:
    t = text.strip()
    if t.startswith("!tt.ptr<") and t.endswith(">"):
        inner = _split_top(t[len("!tt.ptr<"):-1], ",")[0]
        return Type(pointee=parse_type(inner))
    if t.startswith("tensor<") and t.endswith(">"):
        body = t[len("tensor<"):-1]
        dims: list[int] = []
        while True:
            m = re.match(r"(\d+)x", body)
            if not m:
                break
            dims.append(int(m.group(1)))
            body = body[m.end():]
        elem = parse_type(body)
        return Type(elem.elem, elem.pointee, tuple(dims))
    if t in SCALAR_TYPES:
        return Type(t)
    raise TTIRParseError(f"unsupported type {t!r}")


def parse_function_type(text: str) -> tuple[list[Type], list[Type]]:
    """``(T, T) -> (T, T)`` / ``(T) -> T`` / ``() -> ()`` -> (argument types, result types)."""
    args, _, results = text.partition("->")
    results = results.strip()
    if results.startswith("(") and results.endswith(")"):
        results = results[1:-1]
    return ([parse_type(t) for t in _split_top(args.strip()[1:-1], ",")],
            [parse_type(t) for t in _split_top(results, ",")])


def _split_top(text: str, sep: str) -> list[str]:
    """Split at top-level separators, ignoring ones nested in brackets or strings (``->`` is not a bracket). MLIR's
    grammar, not C's (compat/harness_reader.split_top): ``<...>`` nests here (``!tt.ptr<f32, 1>``)."""
    parts, depth, start, i, n = [], 0, 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i = text.index('"', i + 1) if text.find('"', i + 1) >= 0 else n
        elif c == "-" and i + 1 < n and text[i + 1] == ">":
            i += 1
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p for p in (x.strip() for x in parts) if p]


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def error(self, msg: str) -> TTIRParseError:
        line = self.s.count("\n", 0, self.i) + 1
        return TTIRParseError(f"TTIR line {line}: {msg}: {self.s[self.i:self.i + 60]!r}")

    def ws(self) -> None:
        """Skip whitespace and ``// ...`` comments (MLIR prints ``// pred: ^bb0`` above blocks)."""
        while self.i < len(self.s):
            if self.s[self.i] in " \t\r\n":
                self.i += 1
            elif self.s.startswith("//", self.i):
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
            else:
                break

    def peek(self, lit: str) -> bool:
        self.ws()
        return self.s.startswith(lit, self.i)

    def accept(self, lit: str) -> bool:
        if self.peek(lit):
            self.i += len(lit)
            return True
        return False

    def expect(self, lit: str) -> None:
        if not self.accept(lit):
            raise self.error(f"expected {lit!r}")

    def regex(self, pattern: str) -> str:
        self.ws()
        m = re.compile(pattern).match(self.s, self.i)
        if not m:
            raise self.error(f"expected {pattern}")
        self.i = m.end()
        return m.group(0)

    def balanced(self, open_: str, close: str) -> str:
        """Text between an opening bracket at the cursor and its match (exclusive), cursor moved past it."""
        self.expect(open_)
        start, depth = self.i, 1
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == '"':
                self.i = self.s.index('"', self.i + 1)
            elif c == "-" and self.s.startswith("->", self.i):
                self.i += 1
            elif c in "([{<":
                depth += 1
            elif c in ")]}>":
                depth -= 1
                if depth == 0:
                    self.i += 1
                    return self.s[start:self.i - 1]
            self.i += 1
        raise self.error(f"unbalanced {open_}")

    def attr_dict(self, body: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for entry in _split_top(body, ","):
            key, _, value = entry.partition("=")
            out[key.strip().strip('"')] = value.strip() if value else "unit"
        return out

    def loc(self) -> Loc:
        if self.peek("loc("):
            self.expect("loc")
            return parse_loc(self.balanced("(", ")").strip())
        return Loc()

    def value(self) -> str:
        return self.regex(r"%[\w$.\-]+(#\d+)?")

    def region(self) -> Region:
        self.expect("{")
        blocks: list[Block] = []
        current: Block | None = None
        while not self.accept("}"):
            if self.peek("^"):
                label = self.regex(r"\^[\w$.\-]+")
                args: list[tuple[str, Type, Loc]] = []
                if self.accept("("):
                    while not self.accept(")"):
                        name = self.value()
                        self.expect(":")
                        ty = parse_type(self._type_token())
                        args.append((name, ty, self.loc()))
                        self.accept(",")
                self.expect(":")
                current = Block(label, args)
                blocks.append(current)
                continue
            if current is None:
                current = Block("^entry", [])
                blocks.append(current)
            current.ops.append(self.op())
        return Region(blocks)

    def types_list(self) -> list[Type]:
        if self.peek("("):
            return [parse_type(t) for t in _split_top(self.balanced("(", ")"), ",")]
        return [parse_type(self._type_token())]

    def _type_token(self) -> str:
        self.ws()
        m = re.compile(r"(!tt\.ptr<|tensor<)").match(self.s, self.i)
        if m:
            start = self.i
            self.i = m.end() - 1
            self.balanced("<", ">")
            return self.s[start:self.i]
        return self.regex(r"[\w]+")

    def op(self) -> Op:
        results: list[str] = []
        if self.peek("%"):
            while True:
                name = self.regex(r"%[\w$.\-]+")
                if self.accept(":"):
                    count = int(self.regex(r"\d+"))
                    results.extend(f"{name}#{k}" for k in range(count))
                else:
                    results.append(name)
                if not self.accept(","):
                    break
            self.expect("=")
        self.ws()
        name = self.regex(r'"[^"]+"')[1:-1]
        self.expect("(")
        operands: list[str] = []
        while not self.accept(")"):
            operands.append(self.value())
            self.accept(",")
        successors: list[str] = []
        if self.accept("["):
            while not self.accept("]"):
                successors.append(self.regex(r"\^[\w$.\-]+"))
                self.accept(",")
        props: dict[str, str] = {}
        if self.peek("<{"):
            self.expect("<")
            props = self.attr_dict(self.balanced("{", "}"))
            self.expect(">")
        regions: list[Region] = []
        if self.peek("({"):
            self.expect("(")
            while True:
                regions.append(self.region())
                if not self.accept(","):
                    break
            self.expect(")")
        attrs: dict[str, str] = {}
        if self.peek("{"):
            attrs = self.attr_dict(self.balanced("{", "}"))
        self.expect(":")
        operand_types = [parse_type(t) for t in _split_top(self.balanced("(", ")"), ",")]
        self.expect("->")
        result_types = self.types_list()
        loc = self.loc()
        if len(result_types) != len(results):
            raise self.error(f"{name}: {len(results)} results but {len(result_types)} result types")
        return Op(name, results, operands, operand_types, result_types, props, attrs, regions, successors, loc)


def parse_module(text: str) -> list[Op]:
    """The top-level ops of a generic-form module (normally ``tt.func`` ops)."""
    p = _Parser(text)
    top = p.op()
    if top.name != "builtin.module":
        raise TTIRParseError(f"expected a builtin.module, got {top.name}")
    if not top.regions:
        return []
    return [op for block in top.regions[0].blocks for op in block.ops]
