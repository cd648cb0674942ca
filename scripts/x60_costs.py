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
# LLVM's scheduling model


@dataclass
class SchedModel:
    resources: dict[str, int] = field(default_factory=dict)  # resource -> units (a group: the sum of its members)
    machine: dict[str, int] = field(default_factory=dict)  # IssueWidth, LoadLatency, ...
    writes: dict[str, dict[str, Any]] = field(default_factory=dict)  # SchedWrite -> resources, latency, occupancy
    unparsed: list[str] = field(default_factory=list)


_COND_ENTRY = re.compile(r'!eq\(\s*mx\s*,\s*"(\w+)"\s*\)\s*:\s*(-?\d+)')
_COND_DEFAULT = re.compile(r"true\s*:\s*(-?\d+)")


def _cond_table(body: str) -> dict[str, int] | None:
    """An ``!cond(!eq(mx, "M2") : 2, ..., true: 1)`` as a value per LMUL, or None when it is not that shape."""
    default = _COND_DEFAULT.search(body)
    if default is None:
        return None
    values = {mx: int(default.group(1)) for mx in LMULS}
    values.update({mx: int(v) for mx, v in _COND_ENTRY.findall(body)})
    return values


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
    return parts


class _Evaluator:
    """Evaluates the latency expressions the file uses, per LMUL: an integer, ``Helper<mx>.c``, a ``defvar``
    name, ``!mul(a, b)``. Anything else gives None (reported, not guessed)."""

    def __init__(self, helpers: dict[str, dict[str, int]]) -> None:
        self.helpers = helpers
        self.defvars: dict[str, dict[str, int]] = {}

    def value(self, expr: str, mx: str) -> int | None:
        expr = expr.strip()
        if re.fullmatch(r"-?\d+", expr):
            return int(expr)
        helper = re.fullmatch(r"(\w+)<\s*mx\s*>\.c", expr)
        if helper and helper.group(1) in self.helpers:
            return self.helpers[helper.group(1)][mx]
        if expr in self.defvars:
            return self.defvars[expr][mx]
        mul = re.fullmatch(r"!mul\((.*)\)", expr, re.S)
        if mul:
            factors = [self.value(arg, mx) for arg in _split_args(mul.group(1))]
            if all(f is not None for f in factors):
                product = 1
                for f in factors:
                    product *= f  # type: ignore[operator]
                return product
        return None

    def per_lmul(self, expr: str) -> dict[str, int] | None:
        values = {mx: self.value(expr, mx) for mx in LMULS}
        if any(v is None for v in values.values()):
            return None
        return values  # type: ignore[return-value]


def _let_bindings(text: str) -> dict[str, str]:
    """``Latency = X, ReleaseAtCycles = [Y]`` -> {"Latency": "X", "ReleaseAtCycles": "Y"}."""
    out = {}
    for part in _split_args(text):
        name, _, value = part.partition("=")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1].strip()
        out[name.strip()] = value
    return out


_WRITE_RES = re.compile(r"def\s*:\s*WriteRes<\s*(\w+)\s*,\s*\[([\w\s,]*)\]\s*>\s*(\{([^}]*)\})?")
_LMUL_WRITE_RES = re.compile(
    r'defm\s*""\s*:\s*LMUL(?:SEW)?WriteResMX(?:SEW)?<\s*"(\w+)"\s*(#\s*\w+\s*)?,\s*\[([\w\s,]*)\]'
)


def parse_sched_model(td: str) -> SchedModel:
    """The SchedWrites of a RISC-V scheduling model file: resources, latency (an int, or per LMUL) and occupancy
    (ReleaseAtCycles). A WriteRes with no Latency has LLVM's default (1): recorded as ``"latency": null`` with
    ``"latency_default": true``, since for vector classes that default is no measurement."""
    model = SchedModel()
    td = re.sub(r"//[^\n]*", "", td)
    helpers: dict[str, dict[str, int]] = {}
    for name, body in re.findall(r"class\s+(\w+)<string\s+mx>\s*\{\s*int\s+c\s*=\s*!cond\((.*?)\);\s*\}", td, re.S):
        table = _cond_table(body)
        if table is not None:
            helpers[name] = table
    ev = _Evaluator(helpers)
    for name, units in re.findall(r"def\s+(\w+)\s*:\s*ProcResource<(\d+)>", td):
        model.resources[name] = int(units)
    for name, members in re.findall(r"def\s+(\w+)\s*:\s*ProcResGroup<\[([\w\s,]*)\]>", td):
        model.resources[name] = sum(model.resources.get(m.strip(), 1) for m in members.split(","))
    for key in ("IssueWidth", "MicroOpBufferSize", "LoadLatency", "MispredictPenalty"):
        found = re.search(rf"let\s+{key}\s*=\s*(\d+)", td)
        if found:
            model.machine[key] = int(found.group(1))

    # Walk the statements in order, keeping the enclosing `let ... in {` bindings and foreach lists.
    scopes: list[tuple[dict[str, str], dict[str, list[str]]]] = []
    buf: list[str] = []
    i = 0
    while i < len(td):
        ch = td[i]
        if ch == ";":
            _statement(model, ev, "".join(buf), scopes)
            buf = []
        elif ch == "{":
            head = "".join(buf)
            if "WriteRes<" in head:  # `def : WriteRes<..> { let Latency = N; }`: one statement with its body
                close = td.index("}", i)
                _statement(model, ev, head + td[i : close + 1], scopes)
                buf, i = [], close + 1
                continue
            let = re.search(r"let\s+(.*?)\s+in\s*$", head, re.S)
            loop = re.search(r"foreach\s+(\w+)\s*=\s*\[([^\]]*)\]\s*in\s*$", head)
            scopes.append((_let_bindings(let.group(1)) if let else {},
                           {loop.group(1): [v.strip() for v in loop.group(2).split(",")]} if loop else {}))
            buf = []
        elif ch == "}":
            _statement(model, ev, "".join(buf), scopes)
            buf = []
            if scopes:
                scopes.pop()
        else:
            buf.append(ch)
        i += 1
    return model


def _statement(model: SchedModel, ev: _Evaluator, stmt: str, scopes: list) -> None:
    stmt = stmt.strip()
    if not stmt:
        return
    defvar = re.match(r"defvar\s+(\w+)\s*=\s*!cond\((.*)\)\s*$", stmt, re.S)
    if defvar:
        table = _cond_table(defvar.group(2))
        if table is not None:
            ev.defvars[defvar.group(1)] = table
        return
    lets: dict[str, str] = {}
    loops: dict[str, list[str]] = {}
    for scope_lets, scope_loops in scopes:
        lets.update(scope_lets)
        loops.update(scope_loops)
    body_latency = re.search(r"let\s+Latency\s*=\s*(\d+)", stmt)
    single = _WRITE_RES.search(stmt)
    if single or "!cast<SchedWrite>" in stmt:
        if single:
            names = [single.group(1)]
            resources = single.group(2)
        else:
            cast = re.search(r'!cast<SchedWrite>\("(\w+)"\s*#\s*(\w+)\s*#\s*"(\w+)"\)\s*,\s*\[([\w\s,]*)\]', stmt)
            if cast is None:
                model.unparsed.append(" ".join(stmt.split()))
                return
            names = [cast.group(1) + v + cast.group(3) for v in loops.get(cast.group(2), [])]
            resources = cast.group(4)
        latency_expr = body_latency.group(1) if body_latency else lets.get("Latency")
        for name in names:
            _record(model, ev, name, resources, latency_expr, lets.get("ReleaseAtCycles"), per_lmul=False, stmt=stmt)
        return
    multi = _LMUL_WRITE_RES.search(stmt)
    if multi:
        name = multi.group(1)
        if multi.group(2):  # "WriteVLDS" # eew: one class per value of the loop variable
            var = multi.group(2).strip("# \t")
            names = [name + v for v in loops.get(var, [])]
        else:
            names = [name]
        for each in names:
            _record(model, ev, each, multi.group(3), lets.get("Latency"), lets.get("ReleaseAtCycles"),
                    per_lmul=True, stmt=stmt)


def _record(model: SchedModel, ev: _Evaluator, name: str, resources: str, latency_expr: str | None,
            occupancy_expr: str | None, *, per_lmul: bool, stmt: str) -> None:
    entry: dict[str, Any] = {"resources": [r.strip() for r in resources.split(",") if r.strip()]}
    for key, expr in (("latency", latency_expr), ("occupancy", occupancy_expr)):
        if expr is None:
            entry[key] = None
            continue
        value: int | dict[str, int] | None = ev.per_lmul(expr) if per_lmul else ev.value(expr, "M1")
        if per_lmul and value is not None and len(set(value.values())) == 1:  # type: ignore[union-attr]
            value = next(iter(value.values()))  # type: ignore[union-attr]
        if value is None:
            model.unparsed.append(f"{name}: {key} = {' '.join(expr.split())}")
        entry[key] = value
    entry["latency_default"] = latency_expr is None
    model.writes.setdefault(name, entry)


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
    ap.add_argument("--td-commit", default="", help="llvm-project commit the .td file is from")
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
            "source": "https://github.com/llvm/llvm-project",
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
