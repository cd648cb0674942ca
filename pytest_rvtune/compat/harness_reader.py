"""Read a Triton_RVV hand-written harness (C++) as text: its ``<kernel>_wrap`` calls, buffer types, argv fields,
built-in sizes and the data paths its ``getDB()`` calls build.

Nothing is compiled or run: a few patterns that follow their harnesses' conventions
(shared/reference/triton-rvv-format.md, "Harness conventions").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: C element types of their harness buffers -> Triton element types.
C_ELEMENT_TYPES = {
    "float": "fp32", "double": "fp64", "_Float16": "fp16", "__fp16": "fp16", "__bf16": "bf16",
    "int": "i32", "int32_t": "i32", "int64_t": "i64", "long": "i64", "int8_t": "i8", "uint8_t": "u8",
}

#: Arguments of `<kernel>_wrap` before the kernel's own: gridX, gridY, gridZ, num_threads, kernel_ptr.
_WRAP_PREFIX = 5


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


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


@dataclass
class HarnessInfo:
    wrap_calls: dict[str, list[str]]  # kernel function -> the arguments after kernel_ptr (first call)
    pointer_types: dict[str, str]  # C variable -> Triton element type, from `float *arg0 = ...`
    shape_names: list[str]  # argv[1] fields in order ("M", "N", "K", "RUN_COUNT")
    defaults: dict[str, int]  # `int M = 1024;`
    data: list[str]  # getDB paths as templates, "matmul/run/test_data/matrix_{M}x{K}_1.txt"


def _getdb_template(shape_expr: str) -> str | None:
    """``std::to_string(M) + "x" + std::to_string(K)`` -> ``{M}x{K}`` (None for other expressions)."""
    parts = []
    for term in (t.strip() for t in shape_expr.split("+")):
        m = re.fullmatch(r"std::to_string\(\s*(\w+)\s*\)", term)
        if m:
            parts.append("{" + m.group(1) + "}")
        elif re.fullmatch(r'"[^"{}]*"', term):
            parts.append(term[1:-1])
        else:
            return None
    return "".join(parts)


def read_harness(path: Path) -> HarnessInfo:
    text = _strip_comments(path.read_text(errors="replace"))
    wrap_calls: dict[str, list[str]] = {}
    for m in re.finditer(r"\b(\w+)_wrap\s*\(", text):
        try:
            args, _ = split_call_args(text, m.end() - 1)
        except ValueError:
            continue
        wrap_calls.setdefault(m.group(1), args[_WRAP_PREFIX:])
    pointer_types = {}
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\*\s*(\w+)\s*=", text):
        if m.group(1) in C_ELEMENT_TYPES:
            pointer_types[m.group(2)] = C_ELEMENT_TYPES[m.group(1)]
    at = {int(i): name for name, i in re.findall(r"\b(\w+)\s*=\s*Shape\.at\(\s*(\d+)\s*\)", text)}
    size = re.search(r"Shape\.size\(\)\s*==\s*(\d+)", text)
    count = int(size.group(1)) if size else (max(at) + 1 if at else 0)
    shape_names = [at.get(i, f"ARG{i}") for i in range(count)]
    defaults = {n: int(v) for n, v in re.findall(r"\bint\s+(\w+)\s*=\s*(-?\d+)\s*;", text) if n in shape_names}
    data = []
    for m in re.finditer(r"\bgetDB\s*\(", text):
        try:
            args, _ = split_call_args(text, m.end() - 1)
        except ValueError:
            continue
        if len(args) != 3 or not re.fullmatch(r'"\w+"', args[0]) or not args[2].isdigit():
            continue
        shape = _getdb_template(args[1])
        if shape is not None:
            # support.cpp's getDB: kernel_name + "/run/test_data/matrix_" + Shape + "_" + index + ".txt"
            data.append(f"{args[0][1:-1]}/run/test_data/matrix_{shape}_{args[2]}.txt")
    return HarnessInfo(wrap_calls, pointer_types, shape_names, defaults, list(dict.fromkeys(data)))
