"""Their kernel, unchanged, in our generic harness (harness/generate.py) where their own harness cannot serve a
config: argument binding and grid from their Python launch function, data from their files for that config.

Their launch function (``benchmark_triton(a, b, c, sorted_token_ids, ...)``) is called for real, with its
tensor parameters bound to empty tensors shaped as the data files' names say and its number parameters to the
values the import found (compat/variants.py), while ``triton.jit`` / ``triton.runtime.Autotuner`` and the kernel
itself stand for a recorder: its ``kernel[grid](...)`` call gives every kernel argument (strides and sizes as
their code computes them) and the grid for the config's META. Each tensor argument is then known by identity as
one of the launch's parameters, so as one data file: an input, or an output checked against its expected file.
No kernel runs in Python: the recorded call is what the generic harness makes on the target.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvtune.compat.project import RvvEntry, RvvVariant
from pytest_rvtune.compat.triton_config import accepting_num_threads
from pytest_rvtune.compat.triton_rvv_module import RvvConfig, RvvModuleError
from pytest_rvtune.harness import generate as generic
from pytest_rvtune.spec import only_this_process

#: Their writer's file names: ``matrix_[<prefix>_]<d0>x<d1>..._<idx>.txt``; the shape is the tensor's own.
_SHAPE = re.compile(r"_(\d+(?:x\d+)*)_\d+\.txt$")


class GenericRunError(RvvModuleError):
    """Their launch cannot be bound for our generic harness: names the kernel, config and parameter."""


@dataclass(frozen=True)
class GenericLaunch:
    """One recorded call, bound: what to compile and the harness's argv."""

    args: tuple[generic.HarnessArg, ...]
    scalars: dict[str, int | float]  # kernel parameter -> value
    inputs: dict[str, Path]  # kernel parameter -> input file
    expected: dict[str, Path]  # kernel parameter -> expected output file
    grid: tuple[int, int, int]


def shape_of(path: str) -> tuple[int, ...]:
    m = _SHAPE.search(Path(path).name)
    if m is None:
        raise GenericRunError(f"{path}: the file name gives no shape (their writer names files "
                              "matrix_<d0>x<d1>..._<idx>.txt)")
    return tuple(int(d) for d in m.group(1).split("x"))


def is_int_file(path: Path) -> bool:
    """Their writer's ints are ``%d``, floats ``%.9f``: the first value row says which."""
    with path.open() as fh:
        fh.readline()
        row = fh.readline().split()
    return bool(row) and all(re.fullmatch(r"[+-]?\d+", t) for t in row)


@dataclass(frozen=True)
class RecordedCall:
    """One ``kernel[grid](...)`` call of a chain, with the launch function's local names of its tensors."""

    kernel: str
    grid: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    names: dict[int, str]  # id(tensor) -> the name it has in the launch function


class Recorder:
    """Stands for the kernel, ``triton.jit(kernel)`` and the Autotuner in their launch function."""

    def __init__(self, fn: Any, log: list[RecordedCall] | None = None) -> None:
        self.fn = fn
        self.arg_names = list(inspect.signature(fn).parameters)
        self.calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []
        self.log = log  # shared by the recorders of a chain: every kernel's calls in their launch order

    def __getitem__(self, grid: Any) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append((grid, args, kwargs))
            if self.log is not None:  # the caller's names of the tensors: a chain's intermediates are its locals
                caller = sys._getframe(1).f_locals
                names = {id(v): k for k, v in caller.items() if hasattr(v, "data_ptr")}
                self.log.append(RecordedCall(self.fn.__name__, grid, args, kwargs, names))
        return record

    def __call__(self, *args: Any, **kwargs: Any) -> Recorder:  # as a decorator or jit(fn)
        return self


class _Forward:
    """An object whose named attributes are replaced and every other attribute is the real one's."""

    def __init__(self, real: Any, **replaced: Any) -> None:
        self._real = real
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextlib.contextmanager
def recording(module: types.ModuleType, recorders: Mapping[str, Recorder]) -> Iterator[None]:
    """In the module's globals: each kernel (function name -> its recorder), ``triton`` and names bound to
    ``triton.jit`` / ``Autotuner``: ``jit(k)`` / ``Autotuner(k, ...)`` give k's recorder (k is the recorder
    already, as the kernel's global name is swapped)."""
    import triton
    import triton.runtime

    g = module.__dict__
    sole = next(iter(recorders.values())) if len(recorders) == 1 else None

    def make(*a: Any, **k: Any) -> Any:  # jit(fn), Autotuner(fn, ...), autotune(...)(fn)
        first = a[0] if a else k.get("fn")
        if isinstance(first, Recorder):
            return first
        if sole is not None:
            return sole
        found = recorders.get(getattr(first, "__name__", ""))
        if found is None:
            raise GenericRunError(f"{getattr(first, '__name__', first)!r} is launched but is not a kernel of "
                                  f"the chain ({', '.join(recorders)})")
        return found

    shim = _Forward(triton, jit=make, autotune=lambda *a, **k: make,
                    runtime=_Forward(triton.runtime, Autotuner=make))
    swaps: dict[str, Any] = {"triton": shim, **recorders}
    for name, value in list(g.items()):
        if value is triton.jit or value is getattr(triton.runtime, "Autotuner", None):
            swaps[name] = make
    saved = {name: g[name] for name in swaps if name in g}
    g.update(swaps)
    try:
        with accepting_num_threads(g), only_this_process():  # their getter may run inside the launch
            yield
    finally:
        for name in swaps:
            if name in saved:
                g[name] = saved[name]
            else:
                g.pop(name, None)


def with_reference_expected(module: types.ModuleType, entry: RvvEntry, variant: RvvVariant, run_dir: Path,
                            out_dir: Path) -> RvvVariant:
    """The variant with an expected file for each of its ``reference_outputs``: their Python reference function
    (``naive_softmax(x)``, ``torch_attention_reference(Q, K, V)``) called on the variant's input files, its
    parameters bound by name to their launch function's, and its result written as their writer would
    (``matrix_<shape>_0.txt``, rows of the last dimension). Where their data has no expected file, this is it."""
    import torch

    from pytest_rvtune.golden import write_txt

    if not variant.reference_outputs:
        return variant
    what = f"{entry.name}: their Python reference {variant.reference}()"
    fn = vars(module).get(variant.reference)
    if not inspect.isfunction(fn):
        raise GenericRunError(f"{what}: {entry.module} has no such function: set reference in "
                              f"[triton_rvv.kernels.{entry.name}.cases.<case>.generic] to the function computing "
                              "the expected output")
    inputs: dict[str, Any] = {}
    for param, value in variant.args.items():
        if isinstance(value, str):
            path = run_dir / value
            dtype = torch.int32 if is_int_file(path) else torch.float32
            flat = [float(t) for line in path.read_text().splitlines()[1:] for t in line.split()]
            inputs[param] = torch.tensor(flat, dtype=dtype).reshape(shape_of(value))
        else:
            inputs[param] = value
    wanted = [p for p in inspect.signature(fn).parameters if p in inputs]
    if not wanted:
        raise GenericRunError(f"{what}: none of its parameters ({', '.join(inspect.signature(fn).parameters)}) "
                              f"is an input of {entry.launch}() ({', '.join(inputs)}): it cannot be called")
    try:
        with only_this_process():
            result = fn(**{p: inputs[p] for p in wanted})
    except Exception as exc:
        raise GenericRunError(f"{what} failed: {type(exc).__name__}: {exc}") from exc
    results = list(result) if isinstance(result, tuple | list) else [result]
    if len(results) != len(variant.reference_outputs) or not all(hasattr(r, "shape") for r in results):
        raise GenericRunError(f"{what} returned {len(results)} value(s), not {len(variant.reference_outputs)} "
                              f"tensor(s) for {', '.join(variant.reference_outputs)}")
    expected = dict(variant.expected)
    for param, tensor in zip(variant.reference_outputs, results, strict=True):
        array = tensor.detach().to(torch.float32).numpy()
        shape = "x".join(str(d) for d in array.shape) or "1"
        path = out_dir / param / f"matrix_{shape}_0.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_txt(path, array.reshape(-1, array.shape[-1]) if array.ndim > 1 else array.reshape(1, -1))
        expected[param] = str(path)  # absolute: run_dir / path is path
    return dataclasses.replace(variant, expected=expected)


def record_launch(module: types.ModuleType, entry: RvvEntry, function: str, variant: RvvVariant,
                  config: RvvConfig, run_dir: Path) -> GenericLaunch:
    """Call their launch function on the variant's data (empty tensors of the files' shapes) and bind the kernel
    call it makes for ``config``."""
    import torch

    what = f"{entry.name} [{config.id}]: {entry.launch}()"
    host = vars(module).get(entry.launch or "")
    if not inspect.isfunction(host):
        raise GenericRunError(f"{what}: {entry.module} has no function {entry.launch}: set launch in "
                              f"[triton_rvv.kernels.{entry.name}] to the function that calls kernel[grid](...)")
    kernel_fn = vars(module).get(function)
    kernel_fn = getattr(kernel_fn, "fn", kernel_fn)
    if not inspect.isfunction(kernel_fn):
        raise GenericRunError(f"{what}: no kernel function {function} in {entry.module}")
    in_files = {p: v for p, v in variant.args.items() if isinstance(v, str)}
    files = in_files | dict(variant.expected)
    tensors: dict[str, Any] = {}
    for param, rel in files.items():
        path = run_dir / rel
        dtype = torch.int32 if is_int_file(path) else torch.float32
        tensors[param] = torch.zeros(shape_of(rel), dtype=dtype)
    call_args = {p: v for p, v in variant.args.items() if not isinstance(v, str)} | tensors
    recorder = Recorder(kernel_fn)
    try:
        with recording(module, {function: recorder}):
            inspect.signature(host).bind_partial(**call_args)
            host(**call_args)
    except TypeError as exc:
        raise GenericRunError(f"{what}: cannot be called with {', '.join(call_args)}: {exc}") from None
    except Exception as exc:
        raise GenericRunError(f"{what} failed: {type(exc).__name__}: {exc}") from exc
    if not recorder.calls:
        raise GenericRunError(f"{what} made no {function}[grid](...) call")
    grid, args, kwargs = recorder.calls[0]
    # a buffer with an input file and an expected file is updated in place (their harness reads it, the kernel
    # writes it, check_tensor compares it): the generic harness restores it from its input before every run
    return _bind(what, entry, function, kernel_fn, grid, args, kwargs, config, tensors, run_dir, files,
                 set(variant.expected), in_files)


def _bind(what: str, entry: RvvEntry, function: str, kernel_fn: Any, grid: Any, args: tuple[Any, ...],
          kwargs: Mapping[str, Any], config: RvvConfig, tensors: Mapping[str, Any], run_dir: Path,
          files: Mapping[str, str], outputs: set[str], in_files: Mapping[str, str]) -> GenericLaunch:
    params = inspect.signature(kernel_fn).parameters
    merged = dict(kwargs)
    for k, v in config.values.items():
        if k in merged and merged[k] != v:
            raise GenericRunError(f"{what} passes {k}={merged[k]!r}, the config says {v!r}")
        if k in params:
            merged[k] = v
    try:
        bound = inspect.signature(kernel_fn).bind(*args, **merged)
    except TypeError as exc:
        raise GenericRunError(f"{what}: its call does not fit {function}'s parameters: {exc}") from None
    bound.apply_defaults()
    by_id = {id(t): name for name, t in tensors.items()}
    signature = entry.signatures[function]
    harness_args: list[generic.HarnessArg] = []
    scalars: dict[str, int | float] = {}
    inputs: dict[str, Path] = {}
    expected: dict[str, Path] = {}
    for name, value in bound.arguments.items():
        if name not in signature:
            continue  # a constexpr
        ttype = signature[name]
        if hasattr(value, "data_ptr"):
            source = by_id.get(id(value))
            if source is None:
                raise GenericRunError(f"{what}: {function}'s {name} gets a tensor made inside {entry.launch}(), "
                                      "not one of its parameters: no data file is known for it")
            role: generic.Role = ("inout" if source in in_files else "out") if source in outputs else "in"
            if ttype == 1 or not isinstance(ttype, str) or not ttype.startswith("*"):
                raise GenericRunError(f"{what}: {name} is a tensor, the signature table says {ttype!r}")
            if role == "inout":
                inputs[name], expected[name] = run_dir / in_files[source], run_dir / files[source]
            else:
                (expected if role == "out" else inputs)[name] = run_dir / files[source]
            harness_args.append(generic.HarnessArg(name, ttype, role, label=source))
        else:
            number = scalar_argument(what, name, value, ttype)
            if number is not None:
                scalars[name] = number
                harness_args.append(generic.HarnessArg(name, str(ttype), "scalar"))
    full = launch_grid(what, grid, bound.arguments)
    return GenericLaunch(tuple(harness_args), scalars, inputs, expected, full)


def scalar_argument(what: str, name: str, value: Any, ttype: str | int) -> int | float | None:
    """A recorded non-tensor argument as the harness passes it: its number, or None for one the signature table
    specialises to 1 (then it must be 1)."""
    if ttype == 1:
        if value != 1:
            raise GenericRunError(f"{what}: {name} = {value!r}, but the signature table specialises it to 1 "
                                  "(as triton-cpu did): fix the table")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GenericRunError(f"{what}: {name} = {value!r} is neither a tensor nor a number")
    return value


def launch_grid(what: str, grid: Any, arguments: Mapping[str, Any]) -> tuple[int, int, int]:
    """A recorded launch's grid for its bound arguments (a callable grid is their ``lambda META: ...``)."""
    try:
        g = grid(dict(arguments)) if callable(grid) else grid
        dims = tuple(int(x) for x in g)
    except Exception as exc:
        raise GenericRunError(f"{what}: evaluating its grid failed: {type(exc).__name__}: {exc}") from exc
    if not 1 <= len(dims) <= 3 or any(d < 0 for d in dims):
        raise GenericRunError(f"{what}: grid {dims} is not 1 to 3 non-negative ints")
    full = (*dims, 1, 1, 1)[:3]
    return full[0], full[1], full[2]
