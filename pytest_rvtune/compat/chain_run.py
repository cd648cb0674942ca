"""A chain of their kernels (compat/chain_scan.py) as one item: their launch function called for real with
recording kernels, every launch bound for our chain harness (harness/chain.py).

Their launch function (``benchmark_triton(Q, K, V)``) gets empty tensors shaped as the plan's input files say;
each ``kernel[grid](...)`` call it makes is recorded in order with its arguments, its grid for the config's META
and the function's local names of its tensors. A tensor argument is then one of the function's parameters (an
input file, or an output with an expected file), or a tensor the function made itself: an intermediate buffer
the harness allocates (zeroed before every run of the chain, as their ``torch.zeros`` / ``torch.empty``), or one
of the chain's final outputs, checked against its expected file (their Python reference's result). No kernel
runs in Python.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_rvtune.compat.generic_run import (
    GenericRunError,
    RecordedCall,
    Recorder,
    launch_grid,
    recording,
    scalar_argument,
    shape_of,
)
from pytest_rvtune.compat.project import RvvEntry, RvvVariant
from pytest_rvtune.compat.triton_rvv_module import RvvConfig
from pytest_rvtune.harness import chain as chain_c
from pytest_rvtune.spec import pointer_type


def record_chain(module: types.ModuleType, entry: RvvEntry, variant: RvvVariant, config: RvvConfig,
                 run_dir: Path) -> tuple[list[RecordedCall], dict[str, Any]]:
    """Call their launch function on empty tensors of the inputs' shapes: (its kernel calls in order, the
    parameter tensors by name)."""
    import torch

    from pytest_rvtune.compat.generic_run import is_int_file

    what = f"{entry.name} [{config.id}]: {entry.launch}()"
    host = vars(module).get(entry.launch or "")
    if not inspect.isfunction(host):
        raise GenericRunError(f"{what}: {entry.module} has no function {entry.launch}: set launch in "
                              f"[triton_rvv.kernels.{entry.name}] to the function that launches the chain")
    log: list[RecordedCall] = []
    recorders: dict[str, Recorder] = {}
    for function in dict.fromkeys(variant.chain):
        fn = vars(module).get(function)
        fn = getattr(fn, "fn", fn)
        if not inspect.isfunction(fn):
            raise GenericRunError(f"{what}: no kernel function {function} in {entry.module}")
        recorders[function] = Recorder(fn, log)
    tensors: dict[str, Any] = {}
    for param, rel in variant.args.items():
        if isinstance(rel, str):
            dtype = torch.int32 if is_int_file(run_dir / rel) else torch.float32
            tensors[param] = torch.zeros(shape_of(rel), dtype=dtype)
    call_args = {p: v for p, v in variant.args.items() if not isinstance(v, str)} | tensors
    try:
        with recording(module, recorders):
            inspect.signature(host).bind_partial(**call_args)
            host(**call_args)
    except TypeError as exc:
        raise GenericRunError(f"{what}: calling it with {', '.join(call_args)} failed: {exc}") from None
    except GenericRunError:
        raise
    except Exception as exc:
        raise GenericRunError(f"{what} failed: {type(exc).__name__}: {exc}") from exc
    order = [c.kernel for c in log]
    if order != list(variant.chain):
        raise GenericRunError(f"{what} launched {' -> '.join(order) or 'nothing'}, the plan says "
                              f"{' -> '.join(variant.chain)}: run `rvtune import` again")
    return log, tensors


def bind_chain(module: types.ModuleType, entry: RvvEntry, variant: RvvVariant, config: RvvConfig,
               log: list[RecordedCall], tensors: Mapping[str, Any], run_dir: Path) -> chain_c.Chain:
    """The chain harness's description: buffers (inputs from files, intermediates, outputs checked against their
    expected files) and each launch's arguments and grid."""
    by_id = {id(t): name for name, t in tensors.items()}
    buffers: dict[int, chain_c.Buffer] = {}
    launches: list[chain_c.Launch] = []
    for step, call in enumerate(log, 1):
        what = f"{entry.name} [{config.id}]: {entry.launch}()'s launch {step} ({call.kernel})"
        kernel_fn: Any = getattr(vars(module)[call.kernel], "fn", vars(module)[call.kernel])
        params = inspect.signature(kernel_fn).parameters
        merged = dict(call.kwargs)
        for k, v in config.values.items():
            if k in params and k not in merged:
                merged[k] = v
        try:
            bound = inspect.signature(kernel_fn).bind(*call.args, **merged)
        except TypeError as exc:
            raise GenericRunError(f"{what}: its call does not fit the kernel's parameters: {exc}") from None
        bound.apply_defaults()
        signature = entry.signatures[call.kernel]
        args: list[chain_c.Arg] = []
        for name, value in bound.arguments.items():
            if name not in signature:
                continue  # a constexpr
            ttype = signature[name]
            if hasattr(value, "data_ptr"):
                if not isinstance(ttype, str) or not ttype.startswith("*"):
                    raise GenericRunError(f"{what}: {name} is a tensor, the signature table says {ttype!r}")
                buffer = buffers.get(id(value))
                if buffer is None:
                    local = call.names.get(id(value), name)
                    taken = {b.label for b in buffers.values()}
                    if local in taken:  # a name bound again to another tensor (`tmp = torch.empty(...)` twice)
                        local = next(f"{local}_{n}" for n in range(2, len(taken) + 3) if f"{local}_{n}" not in taken)
                    buffer = buffers[id(value)] = _buffer(what, value, by_id.get(id(value)), local, ttype, variant,
                                                          run_dir)
                args.append(chain_c.Arg(name, ttype, buffer=buffer.label))
            else:
                number = scalar_argument(what, name, value, ttype)
                if number is not None:
                    args.append(chain_c.Arg(name, str(ttype), value=number))
        launches.append(chain_c.Launch(call.kernel, launch_grid(what, call.grid, bound.arguments),
                                       tuple(args)))
    missing = sorted(set(variant.expected) - {b.label for b in buffers.values() if b.role == "out"})
    if missing:
        raise GenericRunError(f"{entry.name} [{config.id}]: the plan checks {', '.join(missing)}, which no launch "
                              f"of {entry.launch}() writes: run `rvtune import` again")
    return chain_c.Chain(f"{entry.name}_chain", tuple(buffers.values()), tuple(launches))


def _buffer(what: str, tensor: Any, param: str | None, local: str, ttype: str, variant: RvvVariant,
            run_dir: Path) -> chain_c.Buffer:
    if pointer_type(tensor.dtype) != ttype:
        raise GenericRunError(f"{what}: {local} is a {tensor.dtype} tensor, the signature table says {ttype}")
    numel = int(tensor.numel())
    label = param or local
    expected = variant.expected.get(label)
    if expected is not None:
        path = Path(expected) if Path(expected).is_absolute() else run_dir / expected
        source = variant.args.get(label)
        inp = run_dir / source if isinstance(source, str) else None
        return chain_c.Buffer(label, ttype, numel, "inout" if inp is not None else "out", path, inp)
    if param is not None:
        source = variant.args.get(param)
        if not isinstance(source, str):
            raise GenericRunError(f"{what}: {param} is a tensor parameter with no data file in the plan")
        return chain_c.Buffer(label, ttype, numel, "in", None, run_dir / source)
    return chain_c.Buffer(label, ttype, numel, "temp", None, None)
