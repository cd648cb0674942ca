"""Read a Triton_RVV-style checkout and describe it as ``[triton_rvv]`` tables (what ``rvtune import`` writes).

Nothing here runs the users' scripts: kernel modules are read by module_reader.py (Python's ast), harnesses by
harness_reader.py (a few patterns for the C++ that follow their conventions), and the launch signature is derived
from both by launch_signature.py. This module walks the checkout, pins the data each case reads, and collects the
findings.

The result is a :class:`Scan`: the tables, plus one :class:`Finding` per thing found or not usable, each with why
and the fix, for the command to print.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvtune.compat.harness_reader import HarnessInfo, read_harness
from pytest_rvtune.compat.launch_signature import derive_signature
from pytest_rvtune.compat.module_reader import read_module

#: Their layout (shared/reference/triton-rvv-format.md): kernels, harnesses, support library, data root.
KERNELS_DIR = "benchmark/src/triton"
HARNESS_DIR = "benchmark/src/main"
SUPPORT_SOURCES = ("benchmark/src/support/support.cpp",)
INCLUDE_DIRS = ("env_build/include",)
RUN_DIR = "benchmark/auto-tuner"


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
