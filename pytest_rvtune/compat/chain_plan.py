"""The import's plan for a chain (compat/chain_scan.py) their harness cannot serve: one item per config running
every kernel of the chain, in their launch order, in our chain harness.

What the plan takes from where:

- the chain (kernels, order, intermediates, final outputs): their launch function's text;
- the configs: the getter every launch's Autotuner takes its configs from (one config per item, given to every
  kernel: their attention's four Autotuners all take ``get_attention_kernel_autotune_config(N_CTX, D_HEAD)``);
- the inputs: their harness's reads (``getDB(..., 1)`` into ``q_ptr``), each bound to the launch function's
  parameter of the same name (``q_ptr`` -> ``Q``), the file evaluated with the case's sizes;
- the expected final output: the harness's expected file where it exists, else their Python reference (the
  candidate called beside the launch function, else the module's only candidate);
- the signature of each kernel: their launch recorded once on empty tensors of the inputs' shapes (their module
  is imported for it), typed as Triton types them: a tensor's dtype, an int (an int equal to 1 specialised away,
  as triton-cpu did), a float.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvtune.compat.chain_scan import ChainFound
from pytest_rvtune.compat.harness_values import HarnessData
from pytest_rvtune.compat.int_expr import IntExprError
from pytest_rvtune.compat.python_reference import ReferenceFound, resolve_reference
from pytest_rvtune.spec import pointer_type


@dataclass
class ChainPlan:
    table: dict[str, Any]  # the case's ``generic`` table
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _stem(name: str) -> str:
    """``q_ptr`` / ``d_q`` / ``Q`` -> ``q``: how a harness buffer and a launch parameter are matched."""
    return re.sub(r"^(?:d|h|dev|host)_|_?ptr$", "", name.lower())


def chain_reference(module: Path, chain: ChainFound, chosen: str | None, entry: str) -> ReferenceFound:
    found = resolve_reference(module, chain.function, chosen, entry)
    if not chosen and found.name is None and len(found.candidates) == 1:
        return ReferenceFound(found.candidates[0], found.candidates,
                              f"the module's only reference function; {found.why}")
    return found


def plan_chain(chain: ChainFound, why: str, data: HarnessData, harness_text: str, params: dict[str, Any],
               run_dir: Path, reference: ReferenceFound, entry: str, case: str) -> ChainPlan:
    """The ``generic`` table of one case: the chain's inputs from the harness's reads, its final output(s)
    checked against the harness's expected file or their Python reference."""
    from pytest_rvtune.compat.harness_values import values

    env = values(harness_text, {}, {k: v for k, v in params.items() if isinstance(v, int)})
    reads: dict[str, str] = {}
    for read in data.reads:
        if not read.buffer:
            continue
        try:
            reads[read.buffer] = read.path(env)
        except IntExprError:
            continue
    by_stem = {_stem(b): b for b in reads}
    plan = ChainPlan({"harness": "generic", "chain": [launch.kernel for launch in chain.launches]})
    args: dict[str, str] = {}
    missing: list[str] = []
    for param in chain.params:
        buffer = by_stem.get(_stem(param))
        if buffer is None:
            plan.problems.append(f"case {case}: chain harness: {chain.function}()'s parameter {param} matches no "
                                 f"buffer their harness reads ({', '.join(reads) or 'none'}): no data for it")
            continue
        args[param] = reads[buffer]
        if not (run_dir / reads[buffer]).is_file():
            missing.append(f"{param} ({reads[buffer]})")
    expected: dict[str, str] = {}
    checked = [reads[e] for e in data.checks.values() if e in reads]
    if len(chain.outputs) == 1 and len(checked) == 1 and (run_dir / checked[0]).is_file():
        expected[chain.outputs[0]] = checked[0]
        source = f"expected: their file {checked[0]}"
    elif reference.name is not None and chain.outputs:
        plan.table["reference"] = reference.name
        plan.table["reference_outputs"] = list(chain.outputs)
        source = f"expected: their python reference {reference.name} ({reference.why})"
    else:
        plan.problems.append(f"case {case}: chain harness: no expected file for the chain's output "
                             f"({', '.join(chain.outputs) or 'none found'}) and no Python reference "
                             f"({reference.why}): set reference = \"<function of the module>\" in "
                             f"[triton_rvv.kernels.{entry}] of rvtune.toml and import again")
        source = "no expected value"
    if missing:
        plan.problems.append(f"case {case}: chain harness: no data of theirs for {', '.join(missing)}: write it "
                             "with their module's save_matrices_to_txt() and run `rvtune import` again")
    getter = chain.shared_getter()
    configs = (f"one config per item, given to every kernel ({getter}() gives every launch's configs)" if getter
               else "one config per item, given to every kernel")
    plan.table["why"] = (f"{why}; their {chain.function}() launches the chain {' -> '.join(plan.table['chain'])}: "
                         f"one ELF runs it in that order, {configs}, intermediates "
                         f"{', '.join(n for n in chain.made if n not in chain.outputs) or 'none'} allocated by the "
                         f"harness; {source}")
    plan.table["args"] = args
    plan.table["expected"] = expected
    inputs = ", ".join(f"{k} = {v}" for k, v in args.items()) or "none"
    if plan.problems:  # the FIX lines say why; its items fail saying the same
        plan.table["harness"] = "none"
        plan.table["why"] += "; " + "; ".join(plan.problems)
        plan.notes.append(f"case {case}: chain harness planned, cannot run yet (the FIX lines below); inputs "
                          f"{inputs}")
    else:
        plan.notes.append(f"case {case}: chain harness: {plan.table['why']}; inputs {inputs}")
    return plan


def _ttype(value: Any) -> str | int:
    if hasattr(value, "data_ptr"):
        ptype = pointer_type(value.dtype)
        if ptype is None:
            raise ValueError(f"a {value.dtype} tensor: no Triton pointer type for it")
        return ptype
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return 1 if value == 1 else ("i32" if -2**31 <= value < 2**31 else "i64")
    if isinstance(value, float):
        return "fp32"
    raise ValueError(f"{value!r} is neither a tensor nor a number")


def chain_signatures(module_path: Path, chain: ChainFound, kernels: dict[str, list[tuple[str, bool]]],
                     args: dict[str, str], run_dir: Path) -> dict[str, dict[str, str | int]]:
    """Each kernel's signature table from one recorded run of their launch function on empty tensors shaped as
    the inputs' file names say (raises with the reason when it cannot be recorded)."""
    import inspect

    import torch

    from pytest_rvtune.compat.generic_run import RecordedCall, Recorder, is_int_file, recording, shape_of
    from pytest_rvtune.compat.triton_rvv_module import load_rvv_module

    with contextlib.redirect_stdout(io.StringIO()):
        module = load_rvv_module(module_path)
    log: list[RecordedCall] = []
    recorders = {k: Recorder(getattr(vars(module)[k], "fn", vars(module)[k]), log) for k in chain.kernels}
    tensors = {p: torch.zeros(shape_of(rel), dtype=torch.int32 if (run_dir / rel).is_file()
                              and is_int_file(run_dir / rel) else torch.float32) for p, rel in args.items()}
    host = vars(module)[chain.function]
    with recording(module, recorders), contextlib.redirect_stdout(io.StringIO()):
        host(**tensors)
    out: dict[str, dict[str, str | int]] = {}
    for call in log:
        if call.kernel in out:
            continue
        constexprs = {p for p, c in kernels[call.kernel] if c}
        fn = recorders[call.kernel].fn
        bound = inspect.signature(fn).bind_partial(*call.args, **call.kwargs)
        out[call.kernel] = {name: _ttype(value) for name, value in bound.arguments.items() if name not in constexprs}
    return out


def merge_signatures(found: list[dict[str, dict[str, str | int]]]) -> dict[str, dict[str, str | int]]:
    """One signature table per kernel from the tables several cases recorded: an int specialised to 1 in one case
    (Z = 1) but passed as a number in another (Z = 2) stays a number, so every case can run on the same table."""
    merged: dict[str, dict[str, str | int]] = {}
    for table in found:
        for kernel, params in table.items():
            into = merged.setdefault(kernel, {})
            for name, ttype in params.items():
                if name not in into or into[name] == 1:
                    into[name] = ttype
    return merged
