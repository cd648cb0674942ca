#!/usr/bin/env python3
"""Write pytest_rvtune/x60/x60_costs.json: the SpacemiT X60's measured instruction costs, with their provenance.

Two public sources, read here and reduced to figures (nothing of their text or code is kept):

- camel-cdr/rvv-bench-results, ``spacemit_x60/index.html``: cycles per instruction of every RVV instruction form
  at every vtype (SEW x LMUL), measured on the chip by looping over unrolled independent instructions (reciprocal
  throughput). We keep the tab ``tblMaa`` (vl=VLMAX, tail and mask agnostic). At the page's newest revision the
  floating-point rows of that tab are empty; those rows are taken from ``tblMaa`` of an earlier revision of the
  same page (``--fp-rev``), or, failing that, from ``tblMau`` (mask undisturbed) of the newest one; the JSON says
  which, per row.
- LLVM's scheduling model ``llvm/lib/Target/RISCV/RISCVSchedSpacemitX60.td``: per scheduling class (SchedWrite)
  the latency (per LMUL for vector classes), the resources it occupies and for how long. Read with a small
  reader of the few forms that file uses (``let Latency = ... in {``, ``WriteRes``, ``LMULWriteResMX``, helper
  classes ``Name<mx>.c`` with ``!cond``, ``defvar``, ``!mul``); an expression it cannot evaluate is listed under
  ``llvm.unparsed`` in the output, never guessed.

    python scripts/x60_costs.py --results /path/to/rvv-bench-results --td /path/to/RISCVSchedSpacemitX60.td \\
        --td-commit <llvm commit> [--rev HEAD] [--fp-rev 6438d64] [--out pytest_rvtune/x60/x60_costs.json]

``--results`` is a checkout or a bare clone (what the ``fetch`` tool gives); pages are read with ``git show``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

PAGE = "spacemit_x60/index.html"
TABLE = "tblMaa"
FALLBACK_TABLE = "tblMau"
LMULS = ("MF8", "MF4", "MF2", "M1", "M2", "M4", "M8")
SCALAR_ROWS = {"add": "alu", "mul": "mul"}  # scalar rows the page measures beside the vector ones
MASK_SUFFIX = ",v0.t"


# ---------------------------------------------------------------------------------------------------------------
# The page's tables


@dataclass
class Table:
    """One ``<table id="tbl...">``: its column heads (``e8mf8`` ..) and rows (the instruction text, then cells)."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[str, list[float | None]]] = field(default_factory=list)


class _TableReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, Table] = {}
        self._table: Table | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            ident = dict(attrs).get("id") or ""
            self._table = Table() if ident.startswith("tbl") else None
            if self._table is not None:
                self.tables[ident] = self._table
        elif self._table is not None and tag == "tr":
            self._row = []
        elif self._row is not None and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            if not self._table.columns:
                self._table.columns = self._row[1:]
            elif self._row:
                self._table.rows.append((self._row[0], [parse_cell(c) for c in self._row[1:]]))
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse_cell(text: str) -> float | None:
    """A cell's cycles, or None for a blank one (a vtype the page did not measure)."""
    text = text.strip()
    return float(text) if text else None


def parse_tables(html: str) -> dict[str, Table]:
    """Every ``tbl*`` table of an rvv-bench results page, by id."""
    reader = _TableReader()
    reader.feed(html)
    return reader.tables


def row_key(text: str) -> tuple[str, bool, str]:
    """(mnemonic, masked, variant) of a row's instruction text, e.g. ``vlse32.v v8,(t2),x0,v0.t`` ->
    ``("vlse32.v", True, "stride=0")``. Strided rows come with three strides: a register (the usual case,
    variant ""), ``x0`` (zero stride) and a negative one (``t1/*-1*/``)."""
    masked = text.endswith(MASK_SUFFIX)
    body = text[: -len(MASK_SUFFIX)] if masked else text
    mnemonic, _, operands = body.partition(" ")
    variant = ""
    if re.match(r"v[ls]s(seg\d)?e\d+\.v$", mnemonic):
        stride = operands.rsplit(",", 1)[-1]
        variant = {"x0": "stride=0"}.get(stride, "stride<0" if "-" in stride else "")
    return mnemonic, masked, variant


def _blank(cells: list[float | None]) -> bool:
    return all(c is None for c in cells)


def throughput_rows(main: Table, fallbacks: list[tuple[str, Table]], main_label: str) -> dict[str, Any]:
    """Rows of the main table keyed by mnemonic (``[variant]`` appended for the stride variants), each with its
    unmasked and masked cells in column order and the table it came from: a row blank in the main table is taken
    from the first fallback table that has it with figures."""
    fallback_rows = [(label, {text: cells for text, cells in table.rows}) for label, table in fallbacks]
    out: dict[str, Any] = {}
    for text, cells in main.rows:
        source = main_label
        if _blank(cells):
            for label, rows in fallback_rows:
                if text in rows and not _blank(rows[text]):
                    cells, source = rows[text], label
                    break
        mnemonic, masked, variant = row_key(text)
        if mnemonic in SCALAR_ROWS:
            continue
        key = f"{mnemonic}[{variant}]" if variant else mnemonic
        entry = out.setdefault(key, {"unmasked": None, "masked": None, "source": {}})
        entry["masked" if masked else "unmasked"] = cells
        entry["source"]["masked" if masked else "unmasked"] = source
    for entry in out.values():  # one source string when both forms share it (the common case)
        sources = set(entry["source"].values())
        entry["source"] = sources.pop() if len(sources) == 1 else entry["source"]
    return out


def scalar_rows(main: Table) -> dict[str, Any]:
    """The scalar instructions the page measures beside the vector ones (``add``, ``mul``): their cycles at
    every vtype (they do not depend on it; the spread is the measurement's) and the median we use."""
    out: dict[str, Any] = {}
    for text, cells in main.rows:
        mnemonic, masked, _ = row_key(text)
        if mnemonic in SCALAR_ROWS and not masked:
            values = [c for c in cells if c is not None]
            out[mnemonic] = {"class": SCALAR_ROWS[mnemonic], "cycles": statistics.median(values),
                             "min": min(values), "max": max(values), "cells": len(values)}
    return out


# ---------------------------------------------------------------------------------------------------------------
# LLVM's scheduling model: a reader of the part of TableGen that RISCVSchedSpacemitX60.td uses


@dataclass
class SchedModel:
    resources: dict[str, int] = field(default_factory=dict)  # resource -> units (a group: the sum of its members)
    machine: dict[str, int] = field(default_factory=dict)  # IssueWidth, LoadLatency, ...
    writes: dict[str, dict[str, Any]] = field(default_factory=dict)  # SchedWrite -> resources, latency, occupancy
    unparsed: list[str] = field(default_factory=list)


class TdError(Exception):
    """An expression the reader cannot evaluate (an unknown class or name, an unsupported operator)."""


_TOKEN = re.compile(r'\s*(?:(-?\d+)|("[^"]*")|(![a-z]+)|([A-Za-z_]\w*)|(.))', re.S)
_SCHED_LMULS = {"SchedMxList": LMULS, "SchedMxListW": LMULS[:-1], "SchedMxListF": LMULS[1:],
                "SchedMxListFW": LMULS[1:-1], "SchedMxListWRed": LMULS[:-1], "SchedMxListFWRed": LMULS[1:-1]}
SEW_VALUES = (8, 16, 32, 64)


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for number, string, bang, ident, punct in _TOKEN.findall(text):
        if number:
            out.append(("int", int(number)))
        elif string:
            out.append(("str", string[1:-1]))
        elif bang:
            out.append(("bang", bang[1:]))
        elif ident:
            out.append(("id", ident))
        elif punct.strip():
            out.append(("p", punct))
    return out


@dataclass
class TdClass:
    params: list[tuple[str, str | None]]  # (name, default text)
    body: str
    params_env: dict[str, Any] = field(default_factory=dict)  # only for GLOBALS: the file's top-level defvars


GLOBALS = " globals"  # a pseudo-class holding the top-level defvars that class bodies may use


class _Expr:
    """Recursive-descent evaluation of a TableGen value: integers, strings, lists, names, ``Class<args>.field``,
    ``list[index]``, ``a # b`` and the operators ``!mul !div !add !sub !if !eq !ne !lt !le !gt !ge !cond !size``."""

    def __init__(self, classes: dict[str, TdClass], text: str, env: dict[str, Any]) -> None:
        self.classes, self.toks, self.pos, self.env = classes, _tokens(text), 0, env
        self.globals: dict[str, Any] = classes.get(GLOBALS, TdClass([], "")).params_env

    def value(self) -> Any:
        result = self._concat()
        if self.pos != len(self.toks):
            raise TdError(f"unexpected {self.toks[self.pos][1]!r}")
        return result

    def _peek(self, value: str) -> bool:
        return self.pos < len(self.toks) and self.toks[self.pos] == ("p", value)

    def _expect(self, value: str) -> None:
        if not self._peek(value):
            raise TdError(f"expected {value!r}")
        self.pos += 1

    def _concat(self) -> Any:
        result = self._primary()
        while self._peek("#"):
            self.pos += 1
            result = f"{result}{self._primary()}"
        return result

    def _args(self, close: str) -> list[Any]:
        args: list[Any] = []
        while not self._peek(close):
            args.append(self._concat())
            if self._peek(":"):  # a !cond pair
                self.pos += 1
                args.append(self._concat())
            if self._peek(","):
                self.pos += 1
        self._expect(close)
        return args

    def _primary(self) -> Any:
        if self.pos >= len(self.toks):
            raise TdError("unexpected end")
        kind, tok = self.toks[self.pos]
        self.pos += 1
        if kind in ("int", "str"):
            result: Any = tok
        elif kind == "p" and tok == "[":
            result = self._args("]")
        elif kind == "bang":
            self._expect("(")
            result = self._operator(tok)
        elif kind == "id" and self._peek("<"):
            self.pos += 1
            args = self._args(">")
            self._expect(".")
            field_name = self.toks[self.pos][1]
            self.pos += 1
            result = self._instance(tok, args, field_name)
        elif kind == "id":
            result = self._name(tok)
        else:
            raise TdError(f"unexpected {tok!r}")
        while self._peek("["):
            self.pos += 1
            index = self._concat()
            self._expect("]")
            if not isinstance(result, list) or not 0 <= index < len(result):
                raise TdError("index out of range")
            result = result[index]
        return result

    def _name(self, name: str) -> Any:
        if name == "true":
            return 1
        if name == "false":
            return 0
        if name not in self.env:
            raise TdError(f"unknown name {name}")
        value = self.env[name]
        if isinstance(value, _Lazy):
            return value.get(self.classes)
        return value

    def _operator(self, op: str) -> Any:
        if op == "if":
            cond = self._concat()
            self._expect(",")
            start = self.pos
            if cond:
                result = self._concat()
                self._skip_to_close()
            else:
                self._skip_to_comma(start)
                result = self._concat()
                self._expect(")")
            return result
        args = self._args(")")
        if op == "cond":
            for i in range(0, len(args) - 1, 2):
                if args[i]:
                    return args[i + 1]
            raise TdError("!cond: no case holds")
        ops = {"mul": lambda a: math.prod(a), "add": lambda a: sum(a), "sub": lambda a: a[0] - a[1],
               "div": lambda a: a[0] // a[1], "eq": lambda a: int(a[0] == a[1]), "ne": lambda a: int(a[0] != a[1]),
               "lt": lambda a: int(a[0] < a[1]), "le": lambda a: int(a[0] <= a[1]),
               "gt": lambda a: int(a[0] > a[1]), "ge": lambda a: int(a[0] >= a[1]), "size": lambda a: len(a[0])}
        if op not in ops:
            raise TdError(f"operator !{op}")
        return ops[op](args)

    def _skip_to_comma(self, start: int) -> None:  # skip the untaken branch of !if (it may not evaluate)
        depth = 0
        self.pos = start
        while self.pos < len(self.toks):
            kind, tok = self.toks[self.pos]
            if kind == "p" and tok in "([<":
                depth += 1
            elif kind == "p" and tok in ")]>":
                depth -= 1
            elif kind == "p" and tok == "," and depth == 0:
                self.pos += 1
                return
            self.pos += 1
        raise TdError("!if without else")

    def _skip_to_close(self) -> None:
        depth = 0
        while self.pos < len(self.toks):
            kind, tok = self.toks[self.pos]
            self.pos += 1
            if kind == "p" and tok in "([<":
                depth += 1
            elif kind == "p" and tok in ")]>":
                if depth == 0:
                    return
                depth -= 1
        raise TdError("unclosed !if")

    def _instance(self, name: str, args: list[Any], field_name: str) -> Any:
        cls = self.classes.get(name)
        if cls is None:
            raise TdError(f"unknown class {name}")
        env: dict[str, Any] = dict(self.globals)
        for i, (param, default) in enumerate(cls.params):
            if i < len(args):
                env[param] = args[i]
            elif default is not None:
                env[param] = _Lazy(default, env)
            else:
                raise TdError(f"{name}: missing argument {param}")
        for statement in cls.body.split(";"):
            found = re.match(r"\s*(?:defvar|int|bit|string|list<\w+>)\s+(\w+)\s*=\s*(.*)", statement, re.S)
            if found:
                env[found.group(1)] = _Lazy(found.group(2), env)
        if field_name not in env:
            raise TdError(f"{name} has no field {field_name}")
        return _Expr(self.classes, "", env)._name(field_name)


class _Lazy:
    """A value's text, evaluated (in the environment it was written in) when first needed."""

    def __init__(self, text: str, env: dict[str, Any]) -> None:
        self.text, self.env = text, env

    def get(self, classes: dict[str, TdClass]) -> Any:
        return _Expr(classes, self.text, self.env).value()


def _strip_comments(td: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", td, flags=re.S))


def _matching_brace(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise TdError("unbalanced braces")


def _params(text: str) -> list[tuple[str, str | None]]:
    out = []
    for part in _split_args(text):
        found = re.match(r"\s*(?:[\w<>]+)\s+(\w+)\s*(?:=\s*(.*))?$", part, re.S)
        if found:
            out.append((found.group(1), found.group(2)))
    return out


def _split_args(text: str) -> list[str]:
    depth, start, parts = 0, 0, []
    for i, ch in enumerate(text):
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _resource_name(name: str) -> str:
    """``SMX60_VLS``, ``_VLS`` (a multiclass's prefixed def) -> ``VLS``."""
    return name.split("_", 1)[1] if "_" in name else name


_WRITE_RES = re.compile(r"def\s*:\s*WriteRes<\s*(.+?)\s*,\s*\[([\w\s,]*)\]\s*>\s*(\{([^}]*)\})?\s*$", re.S)
_LMUL_WRITE_RES = re.compile(r'defm\s*""\s*:\s*LMUL(SEW)?WriteResMX(?:SEW)?<\s*(.+?)\s*,\s*\[([\w\s,]*)\]', re.S)


def parse_sched_model(td: str) -> SchedModel:
    """The SchedWrites of a RISC-V scheduling model file: resources, latency and occupancy (ReleaseAtCycles),
    as an int, or per LMUL (``{"M1": 4, ...}``), or per LMUL and SEW (``{"M1": {"32": 5, "64": 7}}``). A WriteRes
    with no Latency has LLVM's default (1): recorded as ``"latency": null`` with ``"latency_default": true``,
    since for a vector class that default is no measurement. Expressions it cannot evaluate go to ``unparsed``."""
    model = SchedModel()
    td = _strip_comments(td)
    classes: dict[str, TdClass] = {}
    for found in re.finditer(r"\b(?:class|multiclass)\s+(\w+)\s*<(.*?)>\s*(?::[^{;]*)?\{", td, re.S):
        close = _matching_brace(td, found.end() - 1)
        classes[found.group(1)] = TdClass(_params(found.group(2)), td[found.end() : close])
    for name, units in re.findall(r"def\s+(\w+)\s*:\s*ProcResource<(\d+)>", td):
        model.resources[_resource_name(name)] = int(units)
    for name, members in re.findall(r"def\s+(\w+)\s*:\s*ProcResGroup<\[(.*?)\]>", td, re.S):
        names = re.findall(r'"(\w+)"', members) or [m.strip() for m in members.split(",")]
        model.resources[_resource_name(name)] = sum(model.resources.get(_resource_name(m), 1) for m in names)
    for key in ("IssueWidth", "MicroOpBufferSize", "LoadLatency", "MispredictPenalty"):
        found = re.search(rf"let\s+{key}\s*=\s*(\d+)", td)
        if found:
            model.machine[key] = int(found.group(1))

    scopes: list[dict[str, Any]] = [{"env": {}, "lets": {}, "loops": {}}]
    buf: list[str] = []
    i = 0
    while i < len(td):
        ch = td[i]
        if ch == ";":
            _statement(model, classes, "".join(buf), scopes)
            buf = []
        elif ch == "{":
            head = "".join(buf).strip()
            buf = []
            if "WriteRes<" in head:  # `def : WriteRes<..> { let Latency = N; }`: one statement with its body
                close = td.index("}", i)
                _statement(model, classes, head + td[i : close + 1], scopes)
                i = close + 1
                continue
            if re.match(r"(class|def)\b", head):  # a class body (read above) or a record's: not statements
                i = _matching_brace(td, i) + 1
                continue
            scopes.append(_scope(head, classes, scopes))
        elif ch == "}":
            _statement(model, classes, "".join(buf), scopes)
            buf = []
            if len(scopes) > 1:
                scopes.pop()
        else:
            buf.append(ch)
        i += 1
    return model


def _scope(head: str, classes: dict[str, TdClass], scopes: list[dict[str, Any]]) -> dict[str, Any]:
    scope: dict[str, Any] = {"env": {}, "lets": {}, "loops": {}}
    let = re.search(r"let\s+(.*?)\s+in\s*$", head, re.S)
    if let:
        for part in _split_args(let.group(1)):
            name, _, value = part.partition("=")
            scope["lets"][name.strip()] = value.strip()
    loop = re.search(r"foreach\s+(\w+)\s*=\s*(.*?)\s+in\s*$", head, re.S)
    if loop:
        var, source = loop.group(1), loop.group(2).strip()
        if source in _SCHED_LMULS:
            scope["loops"][var] = list(_SCHED_LMULS[source])
        elif source.startswith("SchedSEWSet"):
            scope["loops"][var] = _sew_set(source)
        elif re.fullmatch(r"\d+\s*-\s*\d+", source):
            low, high = (int(x) for x in source.split("-"))
            scope["loops"][var] = list(range(low, high + 1))
        else:
            scope["loops"][var] = _Expr(classes, source, _bind(_env(scopes))).value()
    multi = re.match(r"multiclass\s+(\w+)", head)
    if multi and multi.group(1) in classes:  # its parameters at their defaults (how the file instantiates it)
        for name, default in classes[multi.group(1)].params:
            if default is not None:
                scope["env"][name] = _Lazy(default, scope["env"])
    return scope


class _Defvar(str):
    """A ``defvar``'s text inside a loop body: its value depends on the loop variables."""


def _bind(env: dict[str, Any]) -> dict[str, Any]:
    """The environment with each defvar's text made a lazy value evaluated in it (with its loop values)."""
    for name, value in list(env.items()):
        if isinstance(value, _Defvar):
            env[name] = _Lazy(str(value), env)
    return env


class _SewSet:
    """``SchedSEWSet<mx, isF, isWidening>``: the SEWs LLVM defines a class for at each LMUL (SEW <= 64 x LMUL;
    no e8 for floating point; no widening from e64)."""

    def __init__(self, is_f: bool, widening: bool) -> None:
        self.is_f, self.widening = is_f, widening

    def at(self, mx: str | None) -> list[int]:
        fraction = {"MF8": 8, "MF4": 4, "MF2": 2}.get(mx or "", 1)
        sews = [s for s in SEW_VALUES if s * fraction <= 64 and not (self.is_f and s == 8)]
        return sews[:-1] if self.widening and sews and sews[-1] == 64 else sews


def _sew_set(source: str) -> _SewSet:
    args = _split_args(source[source.index("<") + 1 : source.rindex(">")])[1:]
    flags = {"isF": False, "isWidening": False}
    for position, arg in enumerate(args):
        name, _, value = arg.partition("=")
        key = name.strip() if value else ("isF", "isWidening")[position]
        flags[key] = (value or name).strip() == "1"
    return _SewSet(flags["isF"], flags["isWidening"])


def _env(scopes: list[dict[str, Any]]) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for scope in scopes:
        env.update(scope["env"])
    return env


def _statement(model: SchedModel, classes: dict[str, TdClass], stmt: str, scopes: list[dict[str, Any]]) -> None:
    stmt = stmt.strip()
    defvar = re.match(r"defvar\s+(\w+)\s*=\s*(.*)$", stmt, re.S)
    if defvar:
        scopes[-1]["env"][defvar.group(1)] = _Defvar(defvar.group(2))  # evaluated with the loop values at each use
        if len(scopes) == 1:  # a top-level defvar: class bodies see it too
            top = classes.setdefault(GLOBALS, TdClass([], ""))
            top.params_env[defvar.group(1)] = _Lazy(defvar.group(2), top.params_env)
        return
    single = _WRITE_RES.search(stmt)
    multi = None if single else _LMUL_WRITE_RES.search(stmt)
    if not single and not multi:
        return
    lets: dict[str, str] = {}
    loops: dict[str, list[Any]] = {}
    for scope in scopes:
        lets.update(scope["lets"])
        loops.update(scope["loops"])
    if single:
        body = re.search(r"let\s+Latency\s*=\s*([^;}]+)", single.group(4) or "")
        if body:
            lets["Latency"] = body.group(1)
        name_expr, resources, per_mx, per_sew = single.group(1), single.group(2), False, False
        cast = re.fullmatch(r"!cast<SchedWrite>\((.*)\)", name_expr, re.S)
        name_expr = cast.group(1) if cast else f'"{name_expr}"'
    else:
        assert multi is not None
        name_expr, resources, per_mx, per_sew = multi.group(2), multi.group(3), True, bool(multi.group(1))
    # loop variables the name uses (eew, nf, LMul) give one SchedWrite each; mx and sew give its per-LMUL values
    name_vars = [v for v in loops if v not in ("mx", "sew") and re.search(rf"\b{v}\b", name_expr)]
    combos: list[dict[str, Any]] = [{}]
    for var in name_vars:
        combos = [{**c, var: value} for c in combos for value in loops[var]]
    for combo in combos:
        env = {**_env(scopes), **combo}
        try:
            name = str(_Expr(classes, name_expr, _bind(dict(env))).value())
        except TdError as exc:
            model.unparsed.append(f"{' '.join(stmt.split())[:80]}: {exc}")
            continue
        entry: dict[str, Any] = {"resources": [_resource_name(r.strip()) for r in resources.split(",") if r.strip()]}
        for key, let_name in (("latency", "Latency"), ("occupancy", "ReleaseAtCycles")):
            text = lets.get(let_name)
            if text is None:
                entry[key] = None
                continue
            text = text[1:-1] if text.startswith("[") and text.endswith("]") else text
            entry[key] = _evaluate(classes, text, env, loops if per_mx else {}, per_sew)
            if entry[key] is None:
                model.unparsed.append(f"{name}: {key} = {' '.join(text.split())}")
        entry["latency_default"] = "Latency" not in lets
        model.writes.setdefault(name, entry)


def _evaluate(classes: dict[str, TdClass], text: str, env: dict[str, Any], loops: dict[str, list[Any]],
              per_sew: bool) -> Any:
    """The value at every LMUL (and SEW) the enclosing loops run over, folded where it does not vary."""
    mxs = loops.get("mx", [None])
    sew_loop = loops.get("sew")
    values: dict[str, dict[str, int]] = {}
    for mx in mxs:
        sews = sew_loop.at(mx) if per_sew and isinstance(sew_loop, _SewSet) else [None]
        for sew in sews:
            local = _bind({**env, **({"mx": mx} if mx else {}), **({"sew": sew} if sew else {})})
            try:
                result = _Expr(classes, text, local).value()
            except (TdError, ZeroDivisionError, TypeError, RecursionError):
                continue  # not defined at this LMUL/SEW (e.g. a widening class at M8)
            if isinstance(result, list):
                result = result[0] if result else None
            values.setdefault(str(mx), {})[str(sew)] = result
    if not values:
        return None
    folded: dict[str, Any] = {mx: (next(iter(v.values())) if len(set(v.values())) == 1 else v)
                              for mx, v in values.items()}
    if mxs == [None]:
        return folded["None"]
    if all(not isinstance(v, dict) for v in folded.values()) and len(set(folded.values())) == 1 and \
            len(folded) == len(mxs):
        return next(iter(folded.values()))
    return folded


# ---------------------------------------------------------------------------------------------------------------
# Putting it together


def git_show(repo: Path, rev: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def git_commit(repo: Path, rev: str, path: str | None = None) -> tuple[str, str]:
    """(full commit id, ISO date) of `rev`, or of the last commit before `rev` that changed `path`."""
    cmd = ["git", "-C", str(repo), "log", "-1", "--format=%H %cI", rev]
    if path:
        cmd += ["--", path]
    commit, date = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
    return commit, date


def build(page_html: str, fp_page_html: str | None, td_text: str | None, provenance: dict[str, Any]) -> dict[str, Any]:
    """The JSON document from the page (and the earlier page for the blank rows, and LLVM's model)."""
    tables = parse_tables(page_html)
    if TABLE not in tables:
        raise SystemExit(f"x60_costs: the page has no table {TABLE!r} (tables: {sorted(tables)})")
    main = tables[TABLE]
    rev = provenance["throughput"]["page_commit"][:7]
    fallbacks: list[tuple[str, Table]] = []
    if fp_page_html is not None:
        old = parse_tables(fp_page_html)
        if TABLE in old:
            fallbacks.append((f"{TABLE}@{provenance['throughput']['fp_rows_commit'][:7]}", old[TABLE]))
    if FALLBACK_TABLE in tables:
        fallbacks.append((f"{FALLBACK_TABLE}@{rev}", tables[FALLBACK_TABLE]))
    rows = throughput_rows(main, fallbacks, f"{TABLE}@{rev}")
    doc: dict[str, Any] = {
        "format": 1,
        "provenance": provenance,
        "columns": main.columns,
        "vector": dict(sorted(rows.items())),
        "scalar": scalar_rows(main),
    }
    cells = sum(1 for r in rows.values() for form in ("unmasked", "masked") for c in (r[form] or []) if c is not None)
    sources: dict[str, int] = {}
    for r in rows.values():
        for s in (r["source"].values() if isinstance(r["source"], dict) else [r["source"]]):
            sources[s] = sources.get(s, 0) + 1
    provenance["throughput"]["rows"] = len(rows)
    provenance["throughput"]["cells"] = cells
    provenance["throughput"]["row_forms_by_source"] = dict(sorted(sources.items()))
    if td_text is not None:
        model = parse_sched_model(td_text)
        doc["llvm"] = {"machine": model.machine, "resources": model.resources,
                       "sched_writes": dict(sorted(model.writes.items())), "unparsed": model.unparsed}
    return doc


def dump(doc: dict[str, Any]) -> str:
    """JSON with each innermost list or small object on one line (a row of cells reads as a row, and diffs of a
    regenerated table show the changed rows)."""
    text = json.dumps(doc, indent=1)
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    return re.sub(r"\{\s+([^\[\]{}]*?)\s+\}", lambda m: "{" + " ".join(m.group(1).split()) + "}", text) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, required=True, help="rvv-bench-results checkout or bare clone")
    ap.add_argument("--rev", default="HEAD", help="revision of rvv-bench-results to read (default HEAD)")
    ap.add_argument("--fp-rev", default="6438d64", help="earlier revision whose tblMaa has the FP rows")
    ap.add_argument("--td", type=Path, help="RISCVSchedSpacemitX60.td (LLVM 21+)")
    ap.add_argument("--td-commit", default="", help="commit the .td file is from")
    ap.add_argument("--td-repo", default="llvm/llvm-project", help="GitHub repository of --td-commit")
    ap.add_argument("--td-note", default="", help="how the .td text was obtained")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "pytest_rvtune" / "x60"
                    / "x60_costs.json")
    args = ap.parse_args(argv)
    try:
        repo_commit, repo_date = git_commit(args.results, args.rev)
        page_commit, page_date = git_commit(args.results, args.rev, PAGE)
        page = git_show(args.results, args.rev, PAGE)
        fp_commit, fp_date = git_commit(args.results, args.fp_rev)
        fp_page = git_show(args.results, args.fp_rev, PAGE)
    except subprocess.CalledProcessError as exc:
        print(f"x60_costs: reading {PAGE} from {args.results} failed: {exc.stderr.strip()}", file=sys.stderr)
        return 1
    bench = re.search(r"rvv-bench/commit/([0-9a-f]{40})", page)
    provenance: dict[str, Any] = {
        "throughput": {
            "source": "https://github.com/camel-cdr/rvv-bench-results",
            "repo_commit": repo_commit,
            "repo_date": repo_date,
            "page": PAGE,
            "page_commit": page_commit,
            "page_date": page_date,
            "rvv_bench_commit": bench.group(1) if bench else None,
            "chip": "SpacemiT X60 (K1, BPI-F3), VLEN 256, 1.6 GHz",
            "table": f"{TABLE}: vl=VLMAX, tail agnostic, mask agnostic",
            "measured": "cycles per instruction (rdcycle) over a loop of unrolled independent instructions of "
                        "one form: reciprocal throughput, not latency; operands hold ordinary values",
            "columns": "the vtype set before the instruction (SEW x LMUL); loads/stores whose mnemonic names "
                       "an EEW run at EMUL = EEW/SEW x LMUL; a blank cell is a vtype the page did not measure",
            "fp_rows_commit": fp_commit,
            "fp_rows_date": fp_date,
            "fp_rows": f"rows blank in {TABLE} at {page_commit[:7]} (the floating-point ones) are taken from "
                       f"{TABLE} of the same page at {fp_commit[:7]} (same policy; {FALLBACK_TABLE} of the newest "
                       "revision agrees with it to about 0.15 %)",
        },
        "latency": {
            "source": f"https://github.com/{args.td_repo}",
            "file": "llvm/lib/Target/RISCV/RISCVSchedSpacemitX60.td",
            "commit": args.td_commit or None,
            "note": args.td_note or None,
            "what": "LLVM's SpacemiT-X60 scheduling model (its authors: C908 documentation and measurements on a "
                    "BPI-F3): latency per scheduling class, resources and occupancy; classes without a Latency "
                    "have LLVM's default (not a measurement)",
        } if args.td else None,
        "generated_by": "scripts/x60_costs.py",
        "generated": dt.date.today().isoformat(),
    }
    doc = build(page, fp_page, args.td.read_text() if args.td else None, provenance)
    args.out.write_text(dump(doc))
    tp = provenance["throughput"]
    print(f"x60_costs: {tp['rows']} instruction forms, {tp['cells']} cells -> {args.out}")
    if "llvm" in doc:
        print(f"x60_costs: {len(doc['llvm']['sched_writes'])} LLVM scheduling classes, "
              f"{len(doc['llvm']['unparsed'])} expressions not evaluated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
