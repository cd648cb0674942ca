"""Read a Triton_RVV-style checkout and describe it as ``[triton_rvv]`` tables (what ``rvtune import`` writes).

Nothing here runs the users' scripts: kernel modules and harnesses are read as text (Python's ast for the modules,
a few patterns for the C++ that follow their harnesses' conventions), and every conclusion is checked against a
second source where one exists. The launch signature is the delicate part: triton-cpu specialises integer
arguments equal to 1 into constants, so the harness passes fewer arguments than the kernel has. The Python launch
in their module says which (``t.stride(last)`` of a contiguous tensor is 1); the harness's ``<kernel>_wrap(...)``
call says how many remain and, from its C declarations, the element type of each pointer. When the two disagree
the finding says so and the user edits the signature table.

The result is a :class:`Scan`: the tables, plus one :class:`Finding` per thing found or not usable, each with why
and the fix, for the command to print.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Their layout (shared/reference/triton-rvv-format.md): kernels, harnesses, support library, data root.
KERNELS_DIR = "benchmark/src/triton"
HARNESS_DIR = "benchmark/src/main"
SUPPORT_SOURCES = ("benchmark/src/support/support.cpp",)
INCLUDE_DIRS = ("env_build/include",)
RUN_DIR = "benchmark/auto-tuner"

#: C element types of their harness buffers -> Triton element types.
_C_ELEMENT_TYPES = {
    "float": "fp32", "double": "fp64", "_Float16": "fp16", "__fp16": "fp16", "__bf16": "bf16",
    "int": "i32", "int32_t": "i32", "int64_t": "i64", "long": "i64", "int8_t": "i8", "uint8_t": "u8",
}

#: Arguments of `<kernel>_wrap` before the kernel's own: gridX, gridY, gridZ, num_threads, kernel_ptr.
_WRAP_PREFIX = 5


@dataclass
class Finding:
    subject: str  # "matmul", "matmul: data", "jacobi.py" ...
    ok: bool
    message: str  # what was found, or why it cannot be used and the fix


@dataclass
class Scan:
    root: Path
    table: dict[str, Any] = field(default_factory=dict)  # the [triton_rvv] table
    findings: list[Finding] = field(default_factory=list)

    def found(self, subject: str, message: str) -> None:
        self.findings.append(Finding(subject, True, message))

    def problem(self, subject: str, message: str) -> None:
        self.findings.append(Finding(subject, False, message))


# ------------------------------------------------------------------------------------------ C++ harnesses
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
        if m.group(1) in _C_ELEMENT_TYPES:
            pointer_types[m.group(2)] = _C_ELEMENT_TYPES[m.group(1)]
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


# ------------------------------------------------------------------------------------------ kernel modules
@dataclass
class ModuleInfo:
    kernels: dict[str, list[tuple[str, bool]]]  # function -> [(parameter, is_constexpr)]
    getters: dict[str, list[str]]  # get_*_autotune_config -> its parameter names
    launches: dict[str, list[ast.expr]]  # kernel function -> the arguments of its first `x[grid](...)` launch


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation)


def _launched_kernel(expr: ast.expr, aliases: dict[str, str]) -> str | None:
    """The kernel function an expression stands for: ``fn``, ``triton.jit(fn)``, ``Autotuner(fn_jit, ...)``."""
    if isinstance(expr, ast.Name):
        return aliases.get(expr.id)
    if isinstance(expr, ast.Call) and expr.args:
        callee = ast.unparse(expr.func)
        if callee.endswith("jit") or callee.endswith("Autotuner") or callee.endswith("autotune"):
            return _launched_kernel(expr.args[0], aliases)
    return None


def read_module(path: Path) -> ModuleInfo:
    tree = ast.parse(path.read_text(errors="replace"), filename=str(path))
    kernels, getters = {}, {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_kernel"):
            kernels[node.name] = [(a.arg, _is_constexpr(a)) for a in node.args.args]
        elif isinstance(node, ast.FunctionDef) and re.fullmatch(r"get_\w+_autotune_config", node.name):
            getters[node.name] = [a.arg for a in node.args.args]
    launches: dict[str, list[ast.expr]] = {}
    # Prefer the autotuned launches of benchmark_triton (what their build script runs), then any other.
    functions = sorted((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in kernels),
                       key=lambda n: n.name != "benchmark_triton")
    for fn in functions:
        aliases = {k: k for k in kernels}
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                kernel = _launched_kernel(sub.value, aliases)
                if kernel:
                    aliases[sub.targets[0].id] = kernel
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Subscript):
                kernel = _launched_kernel(sub.func.value, aliases)
                if kernel and kernel not in launches:
                    launches[kernel] = list(sub.args)
    return ModuleInfo(kernels, getters, launches)


def _specialised_by_launch(runtime: list[str], args: list[ast.expr]) -> set[str]:
    """Parameters the Python launch passes ``t.stride(last)`` for: 1 for a contiguous tensor, so specialised."""
    strides: dict[str, list[tuple[str, int]]] = {}
    for param, arg in zip(runtime, args, strict=False):
        if (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "stride"
                and len(arg.args) == 1 and isinstance(arg.args[0], ast.Constant | ast.UnaryOp)):
            index = ast.literal_eval(arg.args[0])
            strides.setdefault(ast.unparse(arg.func.value), []).append((param, int(index)))
    out: set[str] = set()
    for uses in strides.values():
        last = max(i for _, i in uses)
        out.update(p for p, i in uses if i == last or i == -1)
    return out


def derive_signature(function: str, params: list[tuple[str, bool]], launch: list[ast.expr] | None,
                     wrap_args: list[str] | None, pointer_types: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """(signature table, problems) of one kernel function; see the module docstring for the method."""
    runtime = [p for p, constexpr in params if not constexpr]
    problems: list[str] = []
    specialised = _specialised_by_launch(runtime, launch) if launch else set()
    if launch is None:
        problems.append(f"no Python launch of {function} found (a `kernel[grid](...)` call): strides are "
                        "assumed not specialised")
    remaining = [p for p in runtime if p not in specialised]
    if wrap_args is not None and len(wrap_args) != len(remaining):
        problems.append(f"the harness calls {function}_wrap with {len(wrap_args)} kernel arguments, the Python "
                        f"launch leaves {len(remaining)} ({', '.join(remaining)}) after specialising "
                        f"{', '.join(sorted(specialised)) or 'none'}: edit the signature table")
    by_param = dict(zip(remaining, wrap_args, strict=False)) if wrap_args else {}
    table: dict[str, Any] = {}
    for p in runtime:
        if p in specialised:
            table[p] = 1
            continue
        c_arg = by_param.get(p, "")
        if c_arg in pointer_types:
            table[p] = "*" + pointer_types[c_arg]
        elif "ptr" in p.lower():
            table[p] = "*fp32"
        else:
            table[p] = "i32"
    return table, problems


# ------------------------------------------------------------------------------------------ the whole checkout
def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _harness_for(root: Path, stem: str) -> Path | None:
    for candidate in (f"{stem}_kernel.cpp", f"{stem}.cpp"):
        path = root / HARNESS_DIR / candidate
        if path.is_file():
            return path
    return None


@dataclass(frozen=True)
class CaseSpec:
    """A case asked for on the command line: for one kernel, or (kernel None) for every kernel whose harness
    argv has all of its fields (matmul's M,N,K do not fit jacobi's MxNxRUN_COUNT)."""

    name: str
    values: dict[str, int]
    kernel: str | None = None


def scan(root: Path, cases: list[CaseSpec] | None = None) -> Scan:
    """Describe the checkout at ``root``; ``cases`` replace the harness defaults as cases where they apply."""
    root = root.resolve()
    result = Scan(root)
    kernels_dir = root / KERNELS_DIR
    if not kernels_dir.is_dir():
        result.problem(str(root), f"no {KERNELS_DIR}/: not a Triton_RVV-style checkout (kernels are expected in "
                                  f"{KERNELS_DIR}/<name>.py)")
        return result
    missing_dirs = [d for d in (*INCLUDE_DIRS, RUN_DIR) if not (root / d).is_dir()]
    for d in missing_dirs:
        result.problem(d, f"directory {d}/ is missing: create it (the harnesses need it)")
    support = [s for s in SUPPORT_SOURCES if (root / s).is_file()]
    result.table = {
        "run_dir": RUN_DIR,
        "include_dirs": list(INCLUDE_DIRS),
        "support_sources": support,
        "defines": ["TRITON_KERNEL_ENABLE", "CHECK_ACCURACY"],
        "output_format": "triton-rvv",
        "kernels": {},
    }
    for module in sorted(kernels_dir.glob("*.py")):
        if module.name.startswith("_"):
            continue
        entry = _scan_module(result, root, module, cases)
        if entry is not None:
            result.table["kernels"][module.stem] = entry
    return result


def _scan_module(result: Scan, root: Path, module: Path, cases: list[CaseSpec] | None) -> dict[str, Any] | None:
    stem, rel = module.stem, module.relative_to(root).as_posix()
    try:
        info = read_module(module)
    except SyntaxError as exc:
        result.problem(stem, f"{rel}:{exc.lineno}: syntax error ({exc.msg}): fix the module")
        return None
    if not info.kernels:
        result.problem(stem, f"{rel}: no function named *_kernel: nothing to tune")
        return None
    getter = next((g for g in info.getters if g.startswith(f"get_{stem}")), next(iter(info.getters), None))
    if getter is None:
        result.problem(stem, f"{rel}: no get_<name>_kernel_autotune_config(): add one returning triton.Configs")
        return None
    harness = _harness_for(root, stem)
    if harness is None:
        result.problem(stem, f"no harness {HARNESS_DIR}/{stem}_kernel.cpp: write one (their format) or use "
                             "pytest-rvtune's own kernel format")
        return None
    hinfo = read_harness(harness)
    functions = [f for f in info.kernels if f in hinfo.wrap_calls] or list(info.kernels)
    unknown_wraps = sorted(set(hinfo.wrap_calls) - set(info.kernels))
    if unknown_wraps:
        result.problem(stem, f"{harness.relative_to(root)} calls {', '.join(w + '_wrap' for w in unknown_wraps)}, "
                             f"but {rel} defines no such kernel ({', '.join(info.kernels)}): rename the kernels or "
                             "the calls so they match (it cannot link as it is: not imported)")
        return None
    signatures = {}
    for fn in functions:
        sig, problems = derive_signature(fn, info.kernels[fn], info.launches.get(fn), hinfo.wrap_calls.get(fn),
                                         hinfo.pointer_types)
        signatures[fn] = sig
        for p in problems:
            result.problem(stem, f"{fn}: {p} ([triton_rvv.kernels.{stem}.signature.{fn}] in rvtune.toml)")
    argv = ["x".join("{" + n + "}" for n in hinfo.shape_names)] if hinfo.shape_names else []
    chosen = _cases_for(result, stem, hinfo, cases or [])
    entry_cases = {}
    for case_name, values in chosen.items():
        params = {**{n: hinfo.defaults.get(n, 0) for n in hinfo.shape_names}, **values}
        entry_cases[case_name] = {"params": params, "sha256": _pin_data(result, root, stem, case_name, hinfo, params)}
    result.found(stem, f"{rel}: {len(functions)} kernel(s) ({', '.join(functions)}), configs from {getter}(), "
                       f"harness {harness.relative_to(root)}, {len(hinfo.data)} data file(s) per case")
    return {
        "module": rel,
        "functions": functions,
        "config_getter": getter,
        "harness": harness.relative_to(root).as_posix(),
        "argv": argv,
        "data": hinfo.data,
        "num_threads": 1,
        "signature": signatures,
        "cases": entry_cases,
    }


def _cases_for(result: Scan, stem: str, hinfo: HarnessInfo, cases: list[CaseSpec]) -> dict[str, dict[str, int]]:
    fields = set(hinfo.shape_names)
    chosen: dict[str, dict[str, int]] = {}
    for case in cases:
        unknown = sorted(set(case.values) - fields)
        if case.kernel == stem and unknown:
            result.problem(stem, f"case {case.name}: {', '.join(unknown)} not among the harness's argv fields "
                                 f"({'x'.join(hinfo.shape_names) or 'none'}): use those names")
        elif case.kernel == stem or (case.kernel is None and not unknown):
            chosen[case.name] = dict(case.values)
    return chosen or {"default": dict(hinfo.defaults)}


def _pin_data(result: Scan, root: Path, stem: str, case: str, hinfo: HarnessInfo,
              params: dict[str, int]) -> dict[str, str]:
    pinned = {}
    for template in hinfo.data:
        try:
            rel = template.format(**params)
        except KeyError as exc:
            result.problem(f"{stem}: data", f"{template}: the harness builds this path from {exc}, which is not "
                                            f"an argv field; add it to the case's params")
            continue
        path = root / RUN_DIR / rel
        if path.is_file():
            pinned[rel] = sha256_of(path)
        else:
            result.problem(f"{stem}: data", f"case {case}: {RUN_DIR}/{rel} is missing: the harness reads it. Write "
                                            "it with your module's save_matrices_to_txt() (inputs, then the "
                                            "expected output) and run `rvtune import` again to pin it")
    return pinned
