"""Data named by a config value (``matrix_BLOCK_SIZE_M_<v>_<shape>_<idx>.txt``), and per value which harness can
run it: theirs, or our generic one.

Their fused MoE pads its token list per BLOCK_SIZE_M, so each value has its own sorted_token_ids, expert_ids and
expected output, saved by their writer with a ``matrix_BLOCK_SIZE_M_<v>`` prefix. Their harness hard-codes one
padded size (EM = 2008, right for BLOCK_SIZE_M = 4) and reads unprefixed names. Per value of the variant key:

- **theirs**: every file the harness opens for that value (its getDB paths, evaluated with its own hard-coded
  sizes and the value's block constant) exists, as the value's prefixed file or as a shared one: the run
  directory gets each at the path the harness opens (``files``: harness path -> data file).
- **generic**: some file it would open does not exist for that value (the harness's size is not the data's).
  Their kernel then runs in our generic harness on the value's files: each kernel parameter's file or number
  comes from the harness's reads (``readMatrix(file, buffer)``, ``check_tensor(expected, out)``) and the
  sizes the data's file names say (``1x2032`` against ``1x{total_padded_tokens}``), bound to the parameters of
  their Python launch function (``benchmark_triton``), which the item runs to get the call and grid per config.
- **none**: the value has no data at all (the fix names the files to write).

Nothing here runs their code: file names, the harness's text and the module's syntax tree.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pytest_rvtune.compat.harness_values import DataRead, HarnessData, Number, values
from pytest_rvtune.compat.int_expr import IntExprError, evaluate
from pytest_rvtune.compat.python_reference import ReferenceFound

#: ``matrix_<KEY>_<value>_<shape>_<idx>.txt`` (their writer's ``prefix=f"matrix_BLOCK_SIZE_M_{bm}"``).
VARIANT_FILE = re.compile(r"matrix_([A-Za-z_]\w*?)_(-?\d+)_(\d+(?:x\d+)*)_(\d+)\.txt")

HarnessKind = Literal["theirs", "generic", "none"]


@dataclass
class ValuePlan:
    """How the items of one value of the variant key run, and on which files (paths relative to run_dir)."""

    value: int
    harness: HarnessKind
    why: str = ""
    files: dict[str, str] = field(default_factory=dict)  # theirs: path the harness opens -> data file
    args: dict[str, str | Number] = field(default_factory=dict)  # generic: launch parameter -> data file or number
    expected: dict[str, str] = field(default_factory=dict)  # generic: launch parameter -> its expected output file
    reference: str = ""  # generic, no expected file: their Python reference function computes it
    reference_outputs: tuple[str, ...] = ()

    def data_files(self) -> list[str]:
        if self.harness == "theirs":
            return sorted(set(self.files.values()))
        return sorted({v for v in self.args.values() if isinstance(v, str)} | set(self.expected.values()))


def variant_files(run_dir: Path, dirs: set[str], keys: set[str]) -> dict[str, dict[int, dict[int, str]]]:
    """Per config key, per value, per data index: the prefixed file (relative to run_dir) in ``dirs``."""
    found: dict[str, dict[int, dict[int, str]]] = {}
    for d in sorted(dirs):
        directory = run_dir / d
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            m = VARIANT_FILE.fullmatch(path.name)
            if m and m.group(1) in keys:
                found.setdefault(m.group(1), {}).setdefault(int(m.group(2)), {})[int(m.group(4))] = \
                    f"{d}/{path.name}"
    return found


def _shape_of(rel: str) -> str:
    m = VARIANT_FILE.fullmatch(Path(rel).name)
    if m:
        return m.group(3)
    return Path(rel).name.removeprefix("matrix_").rsplit("_", 1)[0]


def plan_value(data: HarnessData, harness_text: str, block_constant: str, key: str, value: int,
               prefixed: Mapping[int, str], run_dir: Path) -> ValuePlan:
    """The plan of one value (see the module docstring)."""
    env = values(harness_text, {block_constant: value})
    missing, files = [], {}
    for read in data.reads:
        try:
            path = read.path(env)
        except IntExprError as exc:
            missing.append(f"getDB index {read.index}: {exc}")
            continue
        own = prefixed.get(read.index)
        name = Path(path).name
        if own is not None and Path(own).name == f"matrix_{key}_{value}_{name.removeprefix('matrix_')}":
            files[path] = own
        elif own is None and (run_dir / path).is_file():
            files[path] = path
        else:
            have = f"{key}={value}'s is {Path(own).name}" if own else "no such file"
            missing.append(f"it opens {name} ({have})")
    if not missing:
        return ValuePlan(value, "theirs", files=files)
    if not prefixed:
        return ValuePlan(value, "none", why=f"no data for {key}={value}: write matrix_{key}_{value}_<shape>_<idx>"
                                              ".txt files with your module's save_matrices_to_txt(prefix=...)")
    return ValuePlan(value, "generic", why="their harness cannot serve it (sizes hard-coded): " + "; ".join(missing))


def generic_binding(plan: ValuePlan, data: HarnessData, harness_text: str, block_constant: str, key: str,
                    prefixed: Mapping[int, str], run_dir: Path, wrap_params: Mapping[str, str],
                    launch_params: Mapping[str, str]) -> list[str]:
    """Fill ``plan.args`` / ``plan.expected`` for our generic harness; the problems (empty when complete).

    ``wrap_params``: kernel parameter -> the C expression the harness passes for it (its ``_wrap`` call).
    ``launch_params``: kernel parameter -> the parameter of their Python launch function passed there as is.
    """
    problems: list[str] = []
    base = values(harness_text, {block_constant: plan.value})
    by_buffer: dict[str, tuple[DataRead, str]] = {}
    bound: dict[str, int] = {}
    for read in data.reads:
        own = prefixed.get(read.index)
        if own is not None:
            binding = read.bind(_shape_of(own), base)
            if binding is None:
                problems.append(f"{own} does not fit the harness's getDB index {read.index} shape")
                continue
            bound.update(binding)
            rel = own
        else:
            try:
                rel = read.path(base)
            except IntExprError as exc:
                problems.append(f"getDB index {read.index}: {exc}")
                continue
            if not (run_dir / rel).is_file():
                problems.append(f"{rel} is missing (getDB index {read.index})")
                continue
        if read.buffer:
            by_buffer[read.buffer] = (read, rel)
    env = values(harness_text, {block_constant: plan.value}, bound)
    for param, c_arg in wrap_params.items():
        target = launch_params.get(param)
        if target is None:
            continue  # the launch computes it (a stride, a shape): the item takes it from the launch itself
        if c_arg in data.checks and data.checks[c_arg] in by_buffer:
            plan.expected[target] = by_buffer[data.checks[c_arg]][1]
            if c_arg in by_buffer:  # also read from a file before the launch: updated in place (input and expected)
                plan.args[target] = by_buffer[c_arg][1]
        elif c_arg in by_buffer:
            plan.args[target] = by_buffer[c_arg][1]
        else:
            try:
                plan.args[target] = evaluate(c_arg, env)
            except IntExprError as exc:
                problems.append(f"{param} = {c_arg}: {exc}")
    if not plan.expected:
        problems.append("no output with an expected file (their check_tensor(expected, out, ...) of a buffer the "
                        "kernel writes)")
    return problems


def launch_parameters(module_path: Path, function: str) -> tuple[str, list[str], dict[str, str]] | None:
    """``(launch function, its parameters, kernel parameter -> launch parameter passed as is)`` of the first
    ``kernel[grid](...)`` of ``function`` in their module (``benchmark_triton`` first), or None."""
    tree = ast.parse(module_path.read_text(errors="replace"))
    kernels = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function}
    if function not in kernels:
        return None
    params = [a.arg for a in kernels[function].args.args]
    hosts = sorted((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name != function),
                   key=lambda n: n.name != "benchmark_triton")
    for host in hosts:
        aliases = {function}
        host_params = [a.arg for a in host.args.args]
        for sub in ast.walk(host):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name) \
                    and _stands_for(sub.value, aliases):
                aliases.add(sub.targets[0].id)
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Subscript) \
                    and _stands_for(sub.func.value, aliases):
                passed: dict[str, ast.expr] = dict(zip(params, sub.args, strict=False))
                passed |= {k.arg: k.value for k in sub.keywords if k.arg}
                binding = {p: e.id for p, e in passed.items() if isinstance(e, ast.Name) and e.id in host_params}
                return host.name, host_params, binding
    return None


def _stands_for(expr: ast.expr, aliases: set[str]) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in aliases
    if isinstance(expr, ast.Call):
        callee = ast.unparse(expr.func)
        if callee.endswith(("jit", "Autotuner", "autotune")):
            first = expr.args[0] if expr.args else next((k.value for k in expr.keywords if k.arg == "fn"), None)
            return first is not None and _stands_for(first, aliases)
    return False


def plan_table(plan: ValuePlan, sha256: Mapping[str, str]) -> dict[str, Any]:
    """The ``[...cases.<case>.variants.<value>]`` table of a plan."""
    table: dict[str, Any] = {"harness": plan.harness}
    if plan.why:
        table["why"] = plan.why
    if plan.harness == "theirs":
        table["files"] = dict(plan.files)
    elif plan.harness == "generic":
        table["args"] = dict(plan.args)
        table["expected"] = dict(plan.expected)
        if plan.reference:
            table["reference"] = plan.reference
            table["reference_outputs"] = list(plan.reference_outputs)
    table["sha256"] = {f: sha256[f] for f in plan.data_files() if f in sha256}
    return table


@dataclass
class VariantScan:
    """The per-value plans of one case of an entry, and what to tell the user."""

    key: str
    plans: dict[int, ValuePlan]
    notes: list[str]  # one line each: which values have data, which harness runs them and why
    problems: list[str]  # what keeps a value from running, with the fix


def scan_variants(run_dir: Path, harness_text: str, data: HarnessData, functions: Mapping[str, list[str]],
                  space: Mapping[str, list[int]], module_path: Path,
                  wrap_args: Mapping[str, list[str]], signatures: Mapping[str, Mapping[str, Any]]
                  ) -> VariantScan | None:
    """Plans for every value of the entry's variant key that has data or is in the space (None: the data is not
    named by a config value). ``functions``: kernel function -> its constexpr names."""
    keys = {k for names in functions.values() for k in names}
    dirs = {f"{r.kernel_dir}/run/test_data" for r in data.reads}
    found = variant_files(run_dir, dirs, keys)
    if not found:
        return None
    key = sorted(found, key=lambda k: (-len(found[k]), k))[0]
    function = next(f for f, names in functions.items() if key in names)
    constant = f"{function}_{key}"
    wanted = sorted(set(found[key]) | set(space.get(key, [])))
    notes = [f"data named by {key}: values {', '.join(map(str, sorted(found[key])))}"]
    if key in space:
        without = [v for v in space[key] if v not in found[key]]
        notes.append(f"space {key} = {', '.join(map(str, space[key]))}"
                     + (f"; no data for {', '.join(map(str, without))}" if without else "; every value has data"))
    launch = launch_parameters(module_path, function)
    runtime = [p for p, v in signatures.get(function, {}).items() if v != 1]
    wrap_params = dict(zip(runtime, wrap_args.get(function, []), strict=False))
    plans: dict[int, ValuePlan] = {}
    problems: list[str] = []
    for value in wanted:
        prefixed = found[key].get(value, {})
        plan = plan_value(data, harness_text, constant, key, value, prefixed, run_dir)
        if plan.harness == "generic":
            if launch is None:
                problems.append(f"{key}={value}: {plan.why}; and no Python launch (kernel[grid](...)) of "
                                f"{function} to run it in the generic harness: add one")
                plan = ValuePlan(value, "none", why=plan.why)
            else:
                plan_problems = generic_binding(plan, data, harness_text, constant, key, prefixed, run_dir, wrap_params,
                                                launch[2])
                if plan_problems:
                    problems.append(f"{key}={value}: generic harness: " + "; ".join(plan_problems))
        elif plan.harness == "none":
            problems.append(f"{key}={value}: {plan.why}")
        plans[value] = plan
    theirs = [v for v, p in plans.items() if p.harness == "theirs"]
    generic = [v for v, p in plans.items() if p.harness == "generic"]
    if theirs:
        notes.append(f"their harness for {key}={','.join(map(str, theirs))}")
    if generic:
        why = plans[generic[0]].why
        notes.append(f"generic harness for {key}={','.join(map(str, generic))}: {why}")
    return VariantScan(key, plans, notes, problems)



def case_plan(why: str, data: HarnessData, harness_text: str, params: Mapping[str, Number], run_dir: Path,
              wrap_params: Mapping[str, str], launch_params: Mapping[str, str], reference: ReferenceFound,
              subject: str, entry: str) -> tuple[ValuePlan, list[str]]:
    """The generic plan of one case of a kernel their harness cannot run (``why``; no variant key): each kernel
    parameter's data file from the harness's reads evaluated with the case's sizes, or its number; an output
    with no expected file takes its expected value from their Python reference. (plan, problems); a plan that
    cannot run is ``none`` with why."""
    env = values(harness_text, {}, {k: v for k, v in params.items() if isinstance(v, int)})
    by_buffer: dict[str, str] = {}
    absent: dict[str, str] = {}
    for read in data.reads:
        try:
            rel = read.path(env)
        except IntExprError:
            continue
        if read.buffer:
            (by_buffer if (run_dir / rel).is_file() else absent)[read.buffer] = rel
    plan = ValuePlan(0, "generic", why=why)
    missing: list[str] = []
    outputs: list[str] = []
    made_inside: list[str] = []
    for param, c_arg in wrap_params.items():
        target = launch_params.get(param)
        if target is None:
            if c_arg in data.checks or c_arg in by_buffer or c_arg in absent:
                made_inside.append(param)  # a buffer, but their launch makes the tensor itself
            continue  # else computed by their launch (a stride, a shape)
        if c_arg in data.checks:
            expected = data.checks[c_arg]
            if expected in by_buffer:
                plan.expected[target] = by_buffer[expected]
            else:
                outputs.append(target)
        elif c_arg in by_buffer:
            plan.args[target] = by_buffer[c_arg]
        elif c_arg in absent:
            missing.append(f"{target} ({absent[c_arg]})")
        else:
            try:
                plan.args[target] = evaluate(c_arg, env)
            except IntExprError as exc:
                missing.append(f"{target} = {c_arg} ({exc})")
    problems: list[str] = []
    if made_inside:
        problems.append(f"{subject}: generic harness: their launch function makes the tensor of "
                        f"{', '.join(made_inside)} itself (not one of its parameters): no data file can be given "
                        "for it")
    if missing:
        problems.append(f"{subject}: generic harness: no data of theirs for {', '.join(missing)}: write it with "
                        "their module's save_matrices_to_txt() and run `rvtune import` again")
    if outputs and reference.name is None:
        problems.append(f"{subject}: generic harness: no expected file for {', '.join(outputs)} and no Python "
                        f"reference ({reference.why}): set reference = \"<function of the module>\" in "
                        f"[triton_rvv.kernels.{entry}] of rvtune.toml and import again"
                        + (f" (candidates: {', '.join(reference.candidates)})" if reference.candidates else ""))
    if outputs and reference.name is not None:
        plan.reference, plan.reference_outputs = reference.name, tuple(outputs)
        plan.why += f"; expected: their python reference {reference.name} ({reference.why})"
    if not outputs and not plan.expected and not made_inside:
        problems.append(f"{subject}: generic harness: no output checked (their check_tensor(expected, out, ...))")
    if problems:
        return ValuePlan(0, "none", why=f"{why}; " + "; ".join(problems)), problems
    return plan, []
