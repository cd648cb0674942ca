"""Read a Triton_RVV-style checkout and describe it as ``[triton_rvv]`` tables (what ``rvtune import`` writes).

Nothing here runs the users' scripts: kernel modules are read by module_reader.py (Python's ast), harnesses by
harness_reader.py (a few patterns for the C++ that follow their conventions), and the launch signature is derived
from both by launch_signature.py. This module finds the layout (checkout_layout.py), scans each kernel module,
pins the data each case reads, and collects the findings. A kernel whose scan fails in a way nobody foresaw
becomes one FIX line naming it and its file: the other kernels are imported all the same.

The result is a :class:`Scan`: the tables, plus one :class:`Finding` per thing found or not usable, each with why
and the fix, for the command to print.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvtune.compat.chain_plan import chain_reference, chain_signatures, merge_signatures, plan_chain
from pytest_rvtune.compat.chain_scan import ChainFound, find_chain
from pytest_rvtune.compat.checkout_layout import KNOWN_RUN, Layout, find_layout
from pytest_rvtune.compat.fixed_configs import static_block_values
from pytest_rvtune.compat.harness_reader import HarnessInfo, Unreadable, read_harness, strip_comments
from pytest_rvtune.compat.harness_values import HarnessData, read_data
from pytest_rvtune.compat.int_expr import IntExprError, names_in
from pytest_rvtune.compat.launch_signature import derive_signature
from pytest_rvtune.compat.module_reader import ModuleInfo, read_module
from pytest_rvtune.compat.project import TemplateError, format_template, template_fields
from pytest_rvtune.compat.python_reference import ReferenceFound, resolve_reference
from pytest_rvtune.compat.shape_cfg import cfg_for, read_shape_cfg
from pytest_rvtune.compat.support_format import read_support_format
from pytest_rvtune.compat.variants import VariantScan, case_plan, launch_parameters, plan_table, scan_variants

#: Their layout (shared/reference/triton-rvv-format.md), the default where the walk finds nothing better.
KERNELS_DIR = "benchmark/src/triton"
HARNESS_DIR = "benchmark/src/main"
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


@dataclass(frozen=True)
class CaseSpec:
    """A case asked for on the command line: for one kernel, or (kernel None) for every kernel whose harness
    argv has all of its fields (matmul's M,N,K do not fit jacobi's MxNxRUN_COUNT)."""

    name: str
    values: dict[str, int]
    kernel: str | None = None


def _unreadable_file(path: Path, exc: OSError) -> str:
    why = exc.strerror or str(exc)
    if path.is_symlink():
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        why += f" (a symbolic link to {target}: a loop or a dangling link)"
    return f"{path}: cannot read it: {why}; fix or remove it"


#: A space per kernel (entry name): config key -> the values to tune instead of the getter's (``--space``).
Spaces = dict[str, dict[str, list[int]]]


def scan(root: Path, cases: list[CaseSpec] | None = None, spaces: Spaces | None = None,
         references: dict[str, str] | None = None) -> Scan:
    """Describe the checkout at ``root``; ``cases`` replace the harness defaults as cases where they apply;
    ``spaces`` are written into the entries they name; ``references`` name an entry's Python reference function
    (rvtune.toml's ``reference``, where the import cannot tell it)."""
    root = root.resolve()
    result = Scan(root)
    layout = find_layout(root)
    for problem in layout.unreadable:
        result.problem("checkout", f"{problem}: skipped (fix its permissions, or remove it)")
    if layout.kernels_dir is None:
        result.problem(str(root), "no directory with Python modules defining *_kernel functions: not a "
                                  f"Triton_RVV-style checkout (their kernels are in {KERNELS_DIR}/<name>.py)")
        return result
    _check_layout(result, root, layout)
    result.found("layout", layout.describe())
    support_format = read_support_format(root, layout.include_dirs, layout.support_sources)
    for ok, message in support_format.findings:
        (result.found if ok else result.problem)("output format", message)
    result.table = {
        "run_dir": layout.run_dir or ".",
        "include_dirs": list(layout.include_dirs),
        "support_sources": list(layout.support_sources),
        "defines": ["TRITON_KERNEL_ENABLE", "CHECK_ACCURACY"],
        "output_format": support_format.name,
        "kernels": {},
    }
    for module in sorted((root / layout.kernels_dir).glob("*.py")):
        if module.name.startswith("_"):
            continue
        rel = module.relative_to(root).as_posix()
        try:
            entry = _scan_module(result, root, layout, module, cases, (spaces or {}).get(module.stem, {}),
                                 (references or {}).get(module.stem))
        except Exception as exc:  # a bug of ours on an input nobody foresaw: one kernel, never the whole import
            result.problem(module.stem, f"{rel}: the import failed on this kernel ({type(exc).__name__}: {exc}); "
                                        "it is left out, the others are imported. This is a bug of `rvtune import`:"
                                        " please report it with the module and its harness")
            continue
        if entry is not None:
            result.table["kernels"][module.stem] = entry
    return result


def _check_layout(result: Scan, root: Path, layout: Layout) -> None:
    if layout.harness_dir is None:
        result.problem("layout", "no *_kernel.cpp harness anywhere: write one per kernel (their format, e.g. "
                                 f"{HARNESS_DIR}/<name>_kernel.cpp)")
    if not layout.include_dirs:
        result.problem("layout", "no support/support.h anywhere: the harnesses include \"support/support.h\"; "
                                 "put their support library's header under an include directory")
    if not layout.support_sources:
        result.problem("layout", "no support.cpp anywhere: the harnesses link their support library")
    if layout.run_dir is None:
        known = next((d for d in KNOWN_RUN if (root / d).is_dir()), None)
        layout.run_dir = known
        where = f"{known}/" if known else "the checkout's root"
        result.problem("layout", f"no data directory (<kernel>/run/test_data/) anywhere: data paths are taken "
                                 f"relative to {where}; write the data there (their save_matrices_to_txt())")


def _harness_for(root: Path, layout: Layout, stem: str) -> Path | None:
    if layout.harness_dir is None:
        return None
    for candidate in (f"{stem}_kernel.cpp", f"{stem}.cpp"):
        path = root / layout.harness_dir / candidate
        if path.is_file():
            return path
    return None


def _scan_module(result: Scan, root: Path, layout: Layout, module: Path, cases: list[CaseSpec] | None,
                 space: dict[str, list[int]], reference: str | None = None) -> dict[str, Any] | None:
    stem, rel = module.stem, module.relative_to(root).as_posix()
    try:
        info = read_module(module)
    except OSError as exc:
        result.problem(stem, _unreadable_file(module, exc))
        return None
    if info.error:
        result.problem(stem, f"{rel}: {info.error}: fix the module")
        return None
    if not info.kernels:
        result.problem(stem, f"{rel}: no function named *_kernel: nothing to tune")
        return None
    getter = next((g for g in info.getters if g.startswith(f"get_{stem}")), next(iter(info.getters), None))
    fixed: list[dict[str, int]] | None = None
    if getter is None:  # fixed block sizes: one config, the values its launch uses (fixed_configs.py)
        kernel = next((k for k in info.kernels if k in info.launches), None)
        if kernel is None:
            result.problem(stem, f"{rel}: no get_<name>_kernel_autotune_config() and no kernel[grid](...) launch "
                                 "of its kernels: add a getter returning triton.Configs")
            return None
        names = [p for p, constexpr in info.kernels[kernel] if constexpr]
        values = static_block_values(module, kernel, names)
        fixed = [values] if values is not None else []  # [] : the import-time launch, read when loaded
    harness = _harness_for(root, layout, stem)
    if harness is None:
        result.problem(stem, f"no harness {layout.harness_dir or HARNESS_DIR}/{stem}_kernel.cpp: write one (their "
                             "format) or use pytest-rvtune's own kernel format")
        return None
    harness_rel = harness.relative_to(root).as_posix()
    try:
        hinfo = read_harness(harness)
        harness_text = strip_comments(harness.read_text(errors="replace"))  # read once: the plans below use it
    except OSError as exc:
        result.problem(stem, _unreadable_file(harness, exc))
        return None
    functions = [f for f in info.kernels if f in hinfo.wrap_calls] or list(info.kernels)
    unknown_wraps = sorted(set(hinfo.wrap_calls) - set(info.kernels))
    if unknown_wraps:
        why = (f"their harness cannot serve it ({harness_rel} calls {', '.join(w + '_wrap' for w in unknown_wraps)}"
               f", which {rel} does not define)")
        chain = find_chain(module, set(info.kernels))
        if chain is None:
            result.problem(stem, f"{harness_rel} calls {', '.join(w + '_wrap' for w in unknown_wraps)}, "
                                 f"but {rel} defines no such kernel ({', '.join(info.kernels)}), and no function of "
                                 "it launches its kernels as a chain: rename the kernels or the calls so they match "
                                 "(it cannot link as it is: not imported)")
            return None
        return _chain_entry(result, root, layout, module, info, hinfo, harness, harness_text, chain, why, getter,
                            cases, reference)
    for u in hinfo.unreadable:
        result.problem(stem, f"{harness_rel}:{u.line}: cannot read `{u.construct}`: {u.why}. The data it names is "
                             f"not placed for the run: make the line plain (string literals, std::to_string of argv "
                             f"fields, integers, locals assigned once, #define constants), or add the file to data "
                             f"of [triton_rvv.kernels.{stem}] in rvtune.toml")
    signatures = _signatures(result, stem, functions, info, hinfo)
    argv = ["x".join("{" + n + "}" for n in hinfo.shape_names)] if hinfo.shape_names else []
    needs = _case_names(info, getter, hinfo)
    chosen = _cases_for(result, stem, hinfo, needs, cases or [], harness)
    entry_cases = {}
    variants = _variants(result, root / (layout.run_dir or "."), module, info, functions, harness_text,
                         hinfo, signatures, space)
    unbuildable = [u for u in hinfo.unreadable if "does not compile" in u.why]
    launch = launch_parameters(module, functions[0]) if unbuildable and variants is None else None
    generic_data: HarnessData | None = None  # the generic plans' reads: the same for every case, read once
    found = None if launch is None else resolve_reference(module, launch[0], reference, stem)  # the same too
    for case_name, values in chosen.items():
        params = {**{n: hinfo.defaults.get(n, 0) for n in hinfo.shape_names}, **values}
        if unbuildable and variants is None:
            generic_data = generic_data or read_data(harness_text, stem)
            entry_cases[case_name] = {"params": params, "sha256": {},
                                      "generic": _generic_case(result, root, layout, module, harness, harness_text,
                                                               generic_data, signatures, hinfo, launch, case_name,
                                                               params, unbuildable[0], found)}
        elif variants is None:
            entry_cases[case_name] = {"params": params,
                                      "sha256": _pin_data(result, root, layout, stem, case_name, hinfo, params)}
        else:  # the files are per value (the plans): the harness's own unprefixed paths are not what runs
            entry_cases[case_name] = {"params": params, "sha256": {}, **variants}
    source = f"{getter}()" if getter else "its launch (no config getter: fixed block sizes, one config)"
    result.found(stem, f"{rel}: {len(functions)} kernel(s) ({', '.join(functions)}), configs from {source}, "
                       f"harness {harness_rel}, {len(hinfo.data)} data file(s) per case")
    entry: dict[str, Any] = {
        "module": rel,
        "functions": functions,
        "config_getter": getter or "",
        "harness": harness_rel,
        "argv": argv,
        "data": hinfo.data if variants is None else [],
        "num_threads": 1,
        "signature": signatures,
        "cases": entry_cases,
    }
    if fixed is not None:
        entry["configs"] = fixed
    if space:
        entry["space"] = space
    if variants is not None and any(v["harness"] == "generic" for v in variants["variants"].values()):
        launch = launch_parameters(module, functions[0])
    if launch is not None and (variants is not None or unbuildable):
        entry["launch"] = launch[0]
    if unbuildable and variants is None:
        entry["data"] = []  # their harness does not run: the generic plans name the files
    if reference:
        entry["reference"] = reference
    return entry


def _chain_entry(result: Scan, root: Path, layout: Layout, module: Path, info: ModuleInfo, hinfo: HarnessInfo,
                 harness: Path, text: str, chain: ChainFound, why: str, getter: str | None,
                 cases: list[CaseSpec] | None, reference: str | None) -> dict[str, Any] | None:
    """The entry of a chain their harness cannot serve (compat/chain_plan.py): one item per config runs every
    kernel of ``chain`` in their launch order in our chain harness."""
    stem, rel = module.stem, module.relative_to(root).as_posix()
    shared = chain.shared_getter()
    if shared is not None and shared != getter:
        getter = shared
    if getter is None:
        result.problem(stem, f"{rel}: the chain {chain.describe()} has no config getter: add one")
        return None
    run_dir = root / (layout.run_dir or ".")
    data = read_data(text, stem)
    found = chain_reference(module, chain, reference, stem)
    entry_cases: dict[str, Any] = {}
    recorded: list[dict[str, dict[str, str | int]]] = []
    for case_name, values in _cases_for(result, stem, hinfo, _case_names(info, getter, hinfo), cases or [],
                                        harness).items():
        params = {**{n: hinfo.defaults.get(n, 0) for n in hinfo.shape_names}, **values}
        plan = plan_chain(chain, why, data, text, params, run_dir, found, stem, case_name)
        for note in plan.notes:
            result.found(f"{stem}: plan", note)
        for problem in plan.problems:
            result.problem(stem, problem)
        if plan.table["args"]:  # each case's: an int 1 in one case only is not specialised (merge_signatures)
            try:
                recorded.append(chain_signatures(module, chain, info.kernels, plan.table["args"], run_dir))
            except Exception as exc:  # their module or launch function failed when recorded
                result.problem(stem, f"{rel}: recording {chain.function}() for the kernels' signatures failed "
                                     f"({type(exc).__name__}: {exc}): fix the module, or write "
                                     f"[triton_rvv.kernels.{stem}.signature.<kernel>] tables")
                return None
        files = [f for f in [*plan.table["args"].values(), *plan.table["expected"].values()]
                 if (run_dir / f).is_file()]
        plan.table["sha256"] = {f: sha256_of(run_dir / f) for f in files}
        entry_cases[case_name] = {"params": params, "sha256": {}, "generic": plan.table}
    signatures = merge_signatures(recorded)
    if not signatures:
        result.problem(stem, f"{rel}: no case binds an input of {chain.function}(): the kernels' signatures "
                             "cannot be recorded")
        return None
    result.found(stem, f"{rel}: {len(chain.kernels)} kernel(s) ({', '.join(chain.kernels)}) launched as a chain by "
                       f"{chain.function}(), configs from {getter}() (shared by every launch), harness "
                       f"{harness.relative_to(root).as_posix()} not used: {why}")
    entry: dict[str, Any] = {
        "module": rel,
        "functions": list(chain.kernels),
        "config_getter": getter,
        "harness": harness.relative_to(root).as_posix(),
        "argv": [],
        "data": [],
        "num_threads": 1,
        "launch": chain.function,
        "signature": signatures,
        "cases": entry_cases,
    }
    if reference:
        entry["reference"] = reference
    return entry


def _generic_case(result: Scan, root: Path, layout: Layout, module: Path, harness: Path, text: str,
                  data: HarnessData, signatures: dict[str, Any], hinfo: HarnessInfo,
                  launch: tuple[str, list[str], dict[str, str]] | None, case: str, params: dict[str, int],
                  unbuildable: Unreadable, found: ReferenceFound | None) -> dict[str, Any]:
    """The ``generic`` table of a case their harness cannot build: their kernel in our generic harness on their
    data for the case, the expected value from their file or their Python reference (variants.case_plan)."""
    stem = module.stem
    why = (f"their harness does not compile ({harness.relative_to(root).as_posix()}:{unbuildable.line}: "
           f"`{unbuildable.construct}`)")
    subject = f"{stem}: case {case}"
    if launch is None or found is None:
        result.problem(stem, f"case {case}: {why}, and no Python launch (kernel[grid](...)) to run its kernel in "
                             "the generic harness: add one")
        return {"harness": "none", "why": f"{why}; no Python launch function"}
    function = next(iter(signatures))
    runtime = [p for p, v in signatures[function].items() if v != 1]
    wrap_params = dict(zip(runtime, hinfo.wrap_calls.get(function, []), strict=False))
    run_dir = root / (layout.run_dir or ".")
    plan, problems = case_plan(why, data, text, params, run_dir, wrap_params, launch[2], found, subject, stem)
    for problem in problems:
        result.problem(stem, problem.removeprefix(f"{stem}: "))
    if plan.harness == "generic":
        inputs = ", ".join(f"{k} = {v}" for k, v in plan.args.items() if isinstance(v, str)) or "none"
        expected = ", ".join(f"{k} = {v}" for k, v in plan.expected.items()) or \
            f"{', '.join(plan.reference_outputs)} from their python reference {plan.reference}"
        result.found(f"{stem}: plan", f"case {case}: generic harness: {plan.why}; inputs {inputs}; expected "
                                      f"{expected}")
    pins = {f: sha256_of(run_dir / f) for f in plan.data_files() if (run_dir / f).is_file()}
    return plan_table(plan, pins)


def _variants(result: Scan, run_dir: Path, module: Path, info: ModuleInfo, functions: list[str], text: str,
              hinfo: HarnessInfo, signatures: dict[str, Any], space: dict[str, list[int]]) -> dict[str, Any] | None:
    """When the data is named by a config value: ``variant_key`` and ``variants`` (one plan per value: their
    harness or our generic one, compat/variants.py, every value's files pinned) for each case; else None.
    Checks the space's keys on the way."""
    stem = module.stem
    constexprs = {f: [p for p, constexpr in info.kernels[f] if constexpr] for f in functions}
    unknown = sorted(set(space) - {k for names in constexprs.values() for k in names})
    if unknown:
        result.problem(stem, f"--space {', '.join(unknown)}: not a tl.constexpr of {', '.join(functions)}: use "
                             "its config keys")
    found: VariantScan | None = scan_variants(run_dir, text, read_data(text), constexprs, space, module,
                                              hinfo.wrap_calls, signatures)
    if found is None:
        return None
    for note in found.notes:
        result.found(f"{stem}: data", note)
    for problem in found.problems:
        result.problem(f"{stem}: data", problem)
    pins = {f: sha256_of(run_dir / f) for plan in found.plans.values() for f in plan.data_files()
            if (run_dir / f).is_file()}
    return {"variant_key": found.key, "variants": {str(v): plan_table(p, pins) for v, p in found.plans.items()}}


def _signatures(result: Scan, stem: str, functions: list[str], info: ModuleInfo,
                hinfo: HarnessInfo) -> dict[str, dict[str, Any]]:
    signatures = {}
    for fn in functions:
        sig, problems = derive_signature(fn, info.kernels[fn], info.launches.get(fn), hinfo.wrap_calls.get(fn),
                                         hinfo.pointer_types, hinfo.c_type_of, info.launch_kinds.get(fn),
                                         info.launch_ranks.get(fn))
        signatures[fn] = sig
        for p in problems:
            result.problem(stem, f"{fn}: {p} ([triton_rvv.kernels.{stem}.signature.{fn}] in rvtune.toml)")
    return signatures


def _case_names(info: ModuleInfo, getter: str | None, hinfo: HarnessInfo) -> set[str]:
    """Every name a case may give: the harness's argv fields, the getter's parameters (their attention getter
    takes DMODEL, no argv field) and the names the data paths use."""
    names = set(hinfo.shape_names) | (set(info.getters.get(getter or "", [])) - {"num_threads"})
    for template in hinfo.data:
        names |= _fields(template)
    return names - hinfo.config_names


def _cases_for(result: Scan, stem: str, hinfo: HarnessInfo, accepted: set[str],
               cases: list[CaseSpec], harness: Path) -> dict[str, dict[str, int]]:
    """The cases of one kernel: those given (``--case``, rvtune.toml) that fit it, else its shapes file's
    (shape_cfg.py), else the harness's built-in sizes as ``default``."""
    chosen: dict[str, dict[str, int]] = {}
    for case in cases:
        unknown = sorted(set(case.values) - accepted)
        if case.kernel == stem and unknown:
            others = ", ".join(sorted(accepted - set(hinfo.shape_names))) or "none"
            result.problem(stem, f"case {case.name}: {', '.join(unknown)} is neither one of the harness's argv "
                                 f"fields ({'x'.join(hinfo.shape_names) or 'none'}) nor a parameter of the config "
                                 f"getter or the data paths ({others}): use those names")
        elif case.kernel == stem or (case.kernel is None and not unknown):
            chosen[case.name] = dict(case.values)
    if chosen:
        return chosen
    cfg = cfg_for(harness, stem)
    if cfg is not None:
        shown = cfg.relative_to(result.root).as_posix()
        read = read_shape_cfg(cfg, hinfo.shape_names, hinfo.defaults, shown)
        for problem in read.problems:
            result.problem(stem, problem)
        if read.cases:
            result.found(stem, f"cases from {shown}: {', '.join(read.cases)}")
            return read.cases
    return {"default": dict(hinfo.defaults)}


def _pin_data(result: Scan, root: Path, layout: Layout, stem: str, case: str, hinfo: HarnessInfo,
              params: dict[str, int]) -> dict[str, str]:
    pinned = {}
    run_dir = layout.run_dir or "."
    for template in hinfo.data:
        configs = sorted(hinfo.config_names & _fields(template))
        if configs:
            result.problem(f"{stem}: data", f"{template}: the harness builds this path from the config value(s) "
                                            f"{', '.join(configs)}, so it differs per config; data per config is "
                                            "not pinned by this import: its items will not find this file")
            continue
        try:
            rel = format_template(template, params)
        except TemplateError as exc:
            result.problem(f"{stem}: data", f"case {case}: {template}: {exc}: the harness builds this path from it;"
                                            f" give it in the case (rvtune import --case {stem}/{case}:...)")
            continue
        path = root / run_dir / rel
        try:
            if path.is_file():
                pinned[rel] = sha256_of(path)
                continue
        except OSError as exc:
            result.problem(f"{stem}: data", _unreadable_file(path, exc))
            continue
        result.problem(f"{stem}: data", f"case {case}: {run_dir}/{rel} is missing: the harness reads it. Write "
                                        "it with your module's save_matrices_to_txt() (inputs, then the "
                                        "expected output) and run `rvtune import` again to pin it")
    return pinned


def _fields(template: str) -> set[str]:
    names: set[str] = set()
    try:
        for f in template_fields(template):
            names |= {f} if f.isidentifier() else names_in(f)
    except (TemplateError, IntExprError):
        pass
    return names
