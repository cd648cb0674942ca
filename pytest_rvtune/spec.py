"""Kernel modules -> ``KernelSpec``: configs, cases, config ids, config filters, launch capture, interpreter.

A kernel module ``kernels/<name>.py`` defines (see docs/kernels.md):

- ``<name>_kernel``: the ``@triton.jit`` function (a plain function is jitted here, as triton-cpu scripts do);
- ``get_<name>_kernel_autotune_config()``: a list of ``triton.Config`` (int / bool constexprs only), optionally
  with triton-cpu's ``num_threads=n`` (0 = all harts, 1 = serial), accepted while the getter runs;
- ``CASES``: ``{"small": {...}, "emu": {...}, "bench": {...}}`` problem parameters per case;
- ``TOLERANCE``: ``dict(atol=..., rtol=...)`` (optional; default 1e-4 / 1e-4);
- ``VARIANT_KEYS``: config keys whose value changes the data (optional; e.g. fused MoE's BLOCK_SIZE_M).
  Their values are copied from the config into the case dict given to the three functions below;
- ``PROBLEM_KEYS``: config keys that define the problem rather than tune it (optional; e.g. flash attention's
  IS_CAUSAL): each value is a different problem, so configs are ranked only against configs of the same values;
- ``make_inputs(case, seed) -> dict[str, Tensor]``: seeded inputs and output buffers, by name;
- ``reference(inputs, case) -> dict[str, Tensor]``: the expected value of every output, by name;
- ``launch(kernel, inputs, case)``: ``kernel[grid](...)`` exactly as a Triton user writes it; the config's
  constexprs are added by whoever calls launch (as Triton's autotuner does);
- ``DEFAULT_CONFIG``: the kernel's untuned config (optional; a dict or ``triton.Config`` of one of the configs'
  values, problem keys left out; default: the first config of each problem), what reports measure tuning against;
- ``FLOPS(case)`` / ``BYTES(case)``: the floating-point operations and the bytes of memory traffic of one launch
  on a case (optional): reports turn them into FLOP/cycle, bytes/cycle and a roofline.

This module knows nothing of pytest: the plugin, the golden-data generator and the CLI all drive it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

ConfigValue = int | bool
Config = dict[str, ConfigValue]


class BlockConfig(dict):
    """One block config: the dict of its constexprs, in the order the module wrote them.

    ``.kwargs`` gives the same dict, so code written against ``triton.Config`` works unchanged.
    ``.num_threads`` is triton-cpu's thread count when the config gave one (None otherwise): an attribute,
    not a key, because it is no constexpr of the kernel.
    """

    def __init__(self, values: Mapping[str, ConfigValue] | None = None, num_threads: int | None = None) -> None:
        super().__init__(values or {})
        self.num_threads = num_threads

    @property
    def kwargs(self) -> dict[str, ConfigValue]:
        return self


def as_config(config: Any) -> dict[str, ConfigValue]:
    """A config as a plain dict, from a dict, a BlockConfig or a ``triton.Config``."""
    return dict(config.kwargs) if hasattr(config, "kwargs") else dict(config)


Scalar = int | float | bool

DEFAULT_TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
DEFAULT_SEED = 0

# torch dtype name -> Triton signature element type.
_TORCH_TO_TRITON = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "i1",
}


class KernelModuleError(Exception):
    """A kernel module that cannot be used; the message names the module and the cause."""


class LaunchError(KernelModuleError):
    """launch() did something the recording stand-in cannot turn into a kernel call."""


@dataclass(frozen=True)
class KernelArg:
    """One non-constexpr kernel argument, in kernel parameter order."""

    name: str  # the kernel's parameter name, e.g. "a_ptr"
    type: str  # Triton signature type: "*fp32", "*i32", "i32", "i64", "fp32", "i1"
    tensor: str | None = None  # the inputs-dict name of the tensor passed here (pointer args)
    value: Scalar | None = None  # the value passed here (scalar args)

    @property
    def is_pointer(self) -> bool:
        return self.tensor is not None


@dataclass(frozen=True)
class Launch:
    """One captured ``kernel[grid](...)`` call: everything needed to compile, build and run it."""

    kernel: str  # kernel function name, e.g. "matmul_kernel"
    args: tuple[KernelArg, ...]  # non-constexpr arguments, in parameter order
    kwargs_constexprs: dict[str, Any]  # constexprs passed by launch() itself (not from the config)
    constexprs: dict[str, Any]  # every constexpr (config + launch kwargs + defaults), in parameter order
    grid: tuple[int, int, int]
    signature: dict[str, str]  # for triton's ASTSource: every parameter, constexprs as "constexpr"

    @property
    def tensor_args(self) -> tuple[KernelArg, ...]:
        return tuple(a for a in self.args if a.is_pointer)

    @property
    def scalar_args(self) -> tuple[KernelArg, ...]:
        return tuple(a for a in self.args if not a.is_pointer)


def config_id(config: Mapping[str, ConfigValue]) -> str:
    """``BLOCK_SIZE_M=16-BLOCK_SIZE_N=64-...`` in the config's own key order (stable across runs).

    A config that gives triton-cpu's ``num_threads`` ends with ``-num_threads=<n>``; one that does not keeps
    the id it always had (pytest-benchmark matches history by name).
    """
    cid = "-".join(f"{k}={v}" for k, v in as_config(config).items())
    num_threads = getattr(config, "num_threads", None)
    return cid if num_threads is None else f"{cid}-num_threads={num_threads}"


def variant_id(variant: Mapping[str, ConfigValue]) -> str:
    """Id of a data variant ("" when the kernel has none), e.g. ``BLOCK_SIZE_M=16``."""
    return config_id(variant)


def _is_pow2(v: int) -> bool:
    return v > 0 and (v & (v - 1)) == 0


def _parse_value(text: str) -> ConfigValue:
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    return int(text)


def filter_configs(configs: Iterable[Any], spec: str) -> list[Any]:
    """Keep the configs matching ``"BLOCK_SIZE_M=16,32;BLOCK_SIZE_N=64"`` (values ORed, keys ANDed).

    Raises ValueError naming the bad clause or the unknown key (with the keys that exist).
    """
    configs = list(configs)
    wanted: dict[str, list[ConfigValue]] = {}  # lists: a set would merge True and 1
    for clause in filter(None, (c.strip() for c in spec.split(";"))):
        key, sep, values = clause.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise ValueError(f"config filter {spec!r}: clause {clause!r} is not KEY=V1,V2")
        try:
            wanted[key] = [_parse_value(v.strip()) for v in values.split(",") if v.strip()]
        except ValueError:
            raise ValueError(
                f"config filter {spec!r}: values of {key} must be integers or True/False, got {values!r}"
            ) from None
    known = {k for c in configs for k in as_config(c)}
    for key in wanted:
        if configs and key not in known:
            raise ValueError(f"config filter {spec!r}: no config has key {key}; keys are {sorted(known)}")

    # A bool compares equal to 0/1: compare with types so IS_CAUSAL=1 does not match True by accident.
    def matches(config: dict[str, ConfigValue]) -> bool:
        return all(any(type(config.get(k)) is type(v) and config.get(k) == v for v in vs) for k, vs in wanted.items())

    return [c for c in configs if matches(as_config(c))]


def filter_key_values(configs: Iterable[Any], spec: str) -> dict[str, list[str]]:
    """Per key a config filter names, the values the configs have for it, as a user types them (ints in
    numeric order, then True/False): what to show when the filter matched no config. Keys no config has are
    left out (filter_configs names those)."""
    keys = [c.partition("=")[0].strip() for c in spec.split(";") if c.strip()]
    values: dict[str, set[tuple[str, ConfigValue]]] = {}  # typed: True and 1 stay two values
    for config in configs:
        for key, value in as_config(config).items():
            if key in keys:
                values.setdefault(key, set()).add((type(value).__name__, value))
    return {key: [str(v) for _, v in sorted(values[key], key=lambda tv: (tv[0] == "bool", tv[1]))]
            for key in keys if key in values}


def _triton_type_of(value: Any, where: str) -> str:
    """Triton's signature type of a scalar argument (its own rules: bool i1, int i32 when it fits)."""
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return "i32"
        if -(2**63) <= value < 2**63:
            return "i64"
        if value < 2**64:
            return "u64"
        raise LaunchError(f"{where}: integer {value} does not fit 64 bits")
    if isinstance(value, float):
        return "fp32"
    raise LaunchError(f"{where}: unsupported argument type {type(value).__name__} (tensor, int, float or bool)")


def pointer_type(dtype: Any) -> str | None:
    """Triton's signature type of a pointer to a torch tensor of ``dtype`` ("*fp32"), None for a dtype without one."""
    element = _TORCH_TO_TRITON.get(str(dtype).removeprefix("torch."))
    return None if element is None else "*" + element


def _tensor_type(tensor: Any, where: str) -> str:
    ptype = pointer_type(tensor.dtype)
    if ptype is None:
        raise LaunchError(f"{where}: unsupported tensor dtype {tensor.dtype}")
    return ptype


class _Recorder:
    """Stands in for the kernel in launch(): ``kernel[grid](*args, **kwargs)`` records one call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, tuple, dict]] = []

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append((grid, args, kwargs))

        return record

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise LaunchError("launch() called the kernel directly; write kernel[grid](...)")


class _Configured:
    """The real kernel with the config's constexprs added to every ``kernel[grid](...)`` call."""

    def __init__(self, kernel: Any, config: Config) -> None:
        self.kernel = kernel
        self.config = config

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.kernel[grid](*args, **kwargs, **self.config)


@dataclass
class KernelSpec:
    """A loaded, validated kernel module."""

    name: str
    path: Path
    module: Any
    kernel: Any  # triton JITFunction (or InterpretedFunction when TRITON_INTERPRET=1 was set at import)
    configs: list[BlockConfig]
    cases: dict[str, dict[str, Any]]
    tolerance: dict[str, float]
    variant_keys: tuple[str, ...]
    problem_keys: tuple[str, ...] = ()
    seed: int = DEFAULT_SEED
    inout: frozenset[str] | None = None  # INOUT: outputs updated in place (None: inferred from the kernel)
    expect_nan: bool = False  # EXPECT_NAN: reference() may put NaN into an output (the kernel must match it)
    default_config: dict[str, ConfigValue] | None = None  # DEFAULT_CONFIG's values (None: the first config)
    _inputs_cache: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, repr=False)

    # ---- parameters of the kernel -------------------------------------------------------------
    @cached_property
    def fn(self) -> Callable[..., Any]:
        """The undecorated Python function."""
        return self.kernel.fn

    @cached_property
    def param_names(self) -> list[str]:
        return list(inspect.signature(self.fn).parameters)

    @cached_property
    def constexpr_names(self) -> list[str]:
        from triton.runtime.jit import JITFunction

        jit = self.kernel if isinstance(self.kernel, JITFunction) else JITFunction(self.fn)
        return [p.name for p in jit.params if p.is_constexpr]

    @property
    def kernel_name(self) -> str:
        """The JIT function's own name: the compiler names the C symbols (launcher, constants) after it,
        so ``rvv_matmul_kernel = triton.jit(matmul_kernel)`` builds ``matmul_kernel``."""
        return self.fn.__name__

    # ---- cases and variants -------------------------------------------------------------------
    def config_id(self, config: Mapping[str, ConfigValue]) -> str:
        return config_id(config)

    def variant_of(self, config: Mapping[str, ConfigValue]) -> Config:
        config = as_config(config)
        return {k: config[k] for k in self.variant_keys}

    def problem_of(self, config: Mapping[str, ConfigValue]) -> Config:
        """The problem-key values of a config, in PROBLEM_KEYS order ({} when the kernel has none)."""
        config = as_config(config)
        return {k: config[k] for k in self.problem_keys}

    def default_config_id(self, problem: Mapping[str, ConfigValue]) -> str:
        """The id of the kernel's untuned config for one problem: the config matching DEFAULT_CONFIG's values
        (its problem keys, if it names them, are ignored), else the first config of that problem."""
        mine = [c for c in self.configs if self.problem_of(c) == dict(problem)] or self.configs
        if self.default_config is not None:
            wanted = {k: v for k, v in self.default_config.items() if k not in self.problem_keys}
            mine = [c for c in mine if all(c.get(k) == v for k, v in wanted.items())] or mine
        return config_id(mine[0])

    def work_of(self, case_name: str, variant: Mapping[str, ConfigValue] | None = None) -> dict[str, float]:
        """``{"flops": FLOPS(case), "bytes": BYTES(case)}`` of one launch, for what the module declares ({}:
        neither); KernelModuleError naming the function if one fails or gives no positive number."""
        work = {}
        for fn_name, key in (("FLOPS", "flops"), ("BYTES", "bytes")):
            if callable(getattr(self.module, fn_name, None)):
                value = self._call(fn_name, self.case(case_name, variant))
                if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or \
                        not math.isfinite(value):
                    raise KernelModuleError(f"kernel module {self.path}: {fn_name}(case) must return a positive "
                                            f"number (per launch), got {value!r} for case {case_name!r}")
                work[key] = float(value)
        return work

    def variants(self) -> list[Config]:
        """The distinct data variants of the config space, in config order."""
        seen: dict[str, Config] = {}
        for c in self.configs:
            seen.setdefault(variant_id(self.variant_of(c)), self.variant_of(c))
        return list(seen.values())

    def case(self, case_name: str, variant: Mapping[str, ConfigValue] | None = None) -> dict[str, Any]:
        """The case's parameters, with the variant's values merged in (what make_inputs etc. receive)."""
        if case_name not in self.cases:
            raise KernelModuleError(f"kernel module {self.path}: no case {case_name!r}; cases are {sorted(self.cases)}")
        return {**self.cases[case_name], **(variant or {})}

    def make_inputs(self, case_name: str, variant: Mapping[str, ConfigValue] | None = None) -> dict[str, Any]:
        """Fresh seeded inputs (and output buffers) of a case / variant."""
        case = self.case(case_name, variant)
        inputs = self._call("make_inputs", case, self.seed)
        if not isinstance(inputs, dict) or not inputs:
            raise KernelModuleError(f"kernel module {self.path}: make_inputs must return a dict of named tensors")
        return inputs

    def reference(self, inputs: Mapping[str, Any], case_name: str, variant: Mapping[str, ConfigValue] | None = None):
        """Expected outputs by name (each name must be a tensor of ``inputs``: the buffer it is written to)."""
        outputs = self._call("reference", dict(inputs), self.case(case_name, variant))
        if not isinstance(outputs, dict) or not outputs:
            raise KernelModuleError(f"kernel module {self.path}: reference must return a dict of named tensors")
        for out in outputs:
            if out not in inputs:
                raise KernelModuleError(
                    f"kernel module {self.path}: reference output {out!r} has no buffer of that name in "
                    f"make_inputs (names: {sorted(inputs)})"
                )
        return outputs

    def _call(self, fn_name: str, *args: Any) -> Any:
        try:
            return getattr(self.module, fn_name)(*args)
        except KernelModuleError:
            raise
        except Exception as e:
            raise KernelModuleError(f"kernel module {self.path}: {fn_name}() failed: {type(e).__name__}: {e}") from e

    def _cached_inputs(self, case_name: str, variant: Config) -> dict[str, Any]:
        key = (case_name, variant_id(variant))
        if key not in self._inputs_cache:
            self._inputs_cache[key] = self.make_inputs(case_name, variant)
        return self._inputs_cache[key]

    # ---- launch capture -----------------------------------------------------------------------
    def capture_launch(
        self, case_name: str, config: Mapping[str, ConfigValue], inputs: Mapping[str, Any] | None = None
    ) -> Launch:
        """Run the module's launch() against a recorder: arguments, constexprs and grid of the call."""
        config = as_config(config)
        variant = self.variant_of(config)
        if inputs is None:
            inputs = self._cached_inputs(case_name, variant)
        case = self.case(case_name, variant)
        recorder = _Recorder()
        where = f"kernel module {self.path} (case {case_name}, config {config_id(config)})"
        try:
            self.module.launch(recorder, dict(inputs), case)
        except LaunchError as e:
            raise LaunchError(f"{where}: {e}") from e
        except Exception as e:
            raise LaunchError(f"{where}: launch() failed: {type(e).__name__}: {e}") from e
        if len(recorder.calls) != 1:
            raise LaunchError(
                f"{where}: launch() must call kernel[grid](...) exactly once, it did {len(recorder.calls)}"
            )
        grid, args, kwargs = recorder.calls[0]
        return self._bind(where, grid, args, kwargs, config, inputs, f"kernel module {self.path} (case {case_name})")

    def _bind(self, where, grid, args, kwargs, config, inputs, case_where: str = "") -> Launch:
        clash = sorted(set(kwargs) & set(config))
        if clash:
            raise LaunchError(
                f"{where}: launch() passes {clash}, which the config also sets (conflicting meta-parameters)"
            )
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs, **config)
        except TypeError as e:
            raise LaunchError(f"{where}: arguments do not match {self.kernel_name}'s parameters: {e}") from None
        bound.apply_defaults()
        constexpr_names = set(self.constexpr_names)
        by_id = {id(t): n for n, t in inputs.items()}
        kernel_args: list[KernelArg] = []
        constexprs: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if name in constexpr_names:
                constexprs[name] = value
            elif value is None:
                # As Triton does: None (e.g. vLLM's unused bias pointer) specialises the parameter to a
                # constexpr None, compiled away; it is no run-time argument.
                constexprs[name] = None
            elif hasattr(value, "data_ptr"):
                tensor_name = by_id.get(id(value))
                if tensor_name is None:
                    raise LaunchError(
                        f"{where}: argument {name} is a tensor that is not one of make_inputs' tensors "
                        f"({sorted(inputs)}); pass inputs[...] itself, not a view or a copy"
                    )
                if not value.is_contiguous():  # make_inputs' fault, the same for every config: name none
                    raise LaunchError(
                        f"{case_where or where}: make_inputs() tensor {tensor_name!r} (argument {name}) is not "
                        f"contiguous (shape {tuple(value.shape)}, strides {tuple(value.stride())}): the kernel "
                        "reads it as one dense block; return a contiguous tensor (e.g. .contiguous())")
                kernel_args.append(
                    KernelArg(name, _tensor_type(value, f"{where}: argument {name}"), tensor=tensor_name)
                )
            else:
                kernel_args.append(KernelArg(name, _triton_type_of(value, f"{where}: argument {name}"), value=value))
        kw_constexprs = {k: v for k, v in constexprs.items() if k not in config}
        # Triton hands the grid callable every argument by name, constexprs included.
        meta = dict(bound.arguments)
        try:
            g = grid(meta) if callable(grid) else grid
            g = tuple(int(x) for x in g)
        except Exception as e:
            raise LaunchError(f"{where}: evaluating the grid failed: {type(e).__name__}: {e}") from e
        if not 1 <= len(g) <= 3 or any(x < 0 for x in g):
            raise LaunchError(f"{where}: grid must be 1 to 3 non-negative ints, got {g}")
        signature = {n: ("constexpr" if n in constexprs else "") for n in self.param_names}
        for a in kernel_args:
            signature[a.name] = a.type
        grid_x, grid_y, grid_z = (*g, 1, 1)[:3]  # a 1- or 2-D grid padded with 1s
        return Launch(
            kernel=self.kernel_name,
            args=tuple(kernel_args),
            kwargs_constexprs=kw_constexprs,
            constexprs=constexprs,
            grid=(grid_x, grid_y, grid_z),
            signature=signature,
        )

    def signature(self, case_name: str, config: Mapping[str, ConfigValue]) -> dict[str, str]:
        """The signature dict Triton's ASTSource wants for this case and config."""
        return self.capture_launch(case_name, config).signature

    # ---- the Triton interpreter ---------------------------------------------------------------
    def run_interpreter(
        self, case_name: str, config: Mapping[str, ConfigValue], inputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Run the real kernel under Triton's interpreter on copies of ``inputs``; return every tensor by name."""
        return self.run_interpreter_batch(case_name, [(config, inputs)])[0]

    def run_interpreter_batch(
        self, case_name: str, runs: list[tuple[Mapping[str, ConfigValue], Mapping[str, Any]]]
    ) -> list[dict[str, Any]]:
        """Several interpreter runs in one child process (its start-up, ~2 s, dominates small runs).

        A child process with TRITON_INTERPRET=1: Triton decides at import time whether ``@triton.jit``
        (its own ``tl.cdiv``, ``tl.max``... included) makes interpretable functions, so an in-process
        interpreter would mean patching Triton's internals.
        """
        import subprocess
        import tempfile

        import torch

        with tempfile.TemporaryDirectory(prefix="rvtune-interp-") as tmp:
            job = Path(tmp) / "job.pt"
            result = Path(tmp) / "result.pt"
            torch.save(
                {"path": str(self.path), "case": case_name, "runs": [(as_config(c), dict(i)) for c, i in runs]}, job
            )
            env = {**os.environ, "TRITON_INTERPRET": "1"}
            proc = subprocess.run(
                [sys.executable, "-m", "pytest_rvtune.spec", str(job), str(result)],
                env=env,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise KernelModuleError(
                    f"kernel module {self.path}: interpreter run of case {case_name} failed:\n"
                    f"{proc.stderr.strip()[-4000:]}"
                )
            return torch.load(result)


def _interpret_main(job_path: str, result_path: str) -> None:
    """Child side of run_interpreter_batch (runs with TRITON_INTERPRET=1)."""
    import numpy as np
    import torch

    job = torch.load(job_path)
    spec = load_kernel_module(job["path"])
    results = []
    for config, inputs in job["runs"]:
        work = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in inputs.items()}
        case = spec.case(job["case"], spec.variant_of(config))
        # Masked-off lanes may compute inf - inf (numpy warns; those values are never stored).
        with np.errstate(all="ignore"):
            try:
                spec.module.launch(_Configured(spec.kernel, config), work, case)
            except Exception as e:
                sys.exit(f"config {config_id(config)}: {type(e).__name__}: {e}")
        results.append(work)
    torch.save(results, result_path)


# ---- loading and validation -------------------------------------------------------------------
def _arange_constexprs(fn: Callable[..., Any]) -> set[str]:
    """Constexpr names used as a ``tl.arange`` bound: Triton needs those to be powers of two."""
    try:
        src = inspect.getsource(fn)
    except OSError:
        return set()
    return set(re.findall(r"arange\(\s*0\s*,\s*([A-Za-z_]\w*)\s*\)", src))


def block_config(cfg: Any, where: str) -> BlockConfig:
    """One ``triton.Config`` (anything with ``.kwargs``) checked and copied: int / bool values, and triton-cpu's
    ``num_threads`` an int >= 0 when given. ``where`` names the config in errors (module and index)."""
    kw = getattr(cfg, "kwargs", None)
    if not isinstance(kw, dict) or not kw:
        raise KernelModuleError(f"{where} is not a triton.Config with kwargs")
    where = f"{where} ({config_id(kw)})"
    for k, v in kw.items():
        if not isinstance(v, int):  # bool is an int
            raise KernelModuleError(f"{where}: {k}={v!r} must be an int or a bool")
    num_threads = getattr(cfg, "num_threads", None)
    if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)
                                    or num_threads < 0):
        raise KernelModuleError(
            f"{where}: num_threads={num_threads!r} must be an int >= 0 (0 = all harts, 1 = serial, N = N threads)"
        )
    return BlockConfig(kw, num_threads=num_threads)


def unique_configs(configs: Iterable[BlockConfig], where: str) -> list[BlockConfig]:
    """The configs, refusing one listed twice (same id: same values and num_threads)."""
    configs = list(configs)
    seen: set[str] = set()
    for config in configs:
        cid = config_id(config)
        if cid in seen:
            raise KernelModuleError(f"{where}: config {cid} is listed twice")
        seen.add(cid)
    return configs


def _validate_configs(path: Path, raw: Any, getter: str, kernel: str, constexprs: list[str],
                      fn: Callable) -> list[BlockConfig]:
    if not isinstance(raw, list | tuple) or not raw:
        raise KernelModuleError(
            f"kernel module {path}: {getter}() returned no configs (a non-empty list of triton.Config)"
        )
    pow2_keys = _arange_constexprs(fn)
    configs: list[BlockConfig] = []
    for i, cfg in enumerate(raw):
        config = block_config(cfg, f"kernel module {path}: config {i}")
        where = f"kernel module {path}: config {i} ({config_id(config)})"
        for k, v in config.items():
            if k not in constexprs:
                raise KernelModuleError(
                    f"{where}: {k} is not a tl.constexpr parameter of {kernel} (constexprs: {constexprs})"
                )
            if k in pow2_keys and not isinstance(v, bool) and not _is_pow2(v):
                raise KernelModuleError(f"{where}: {k}={v} is used as a tl.arange length: it must be a power of two")
        configs.append(config)
    return unique_configs(configs, f"kernel module {path}")


@contextlib.contextmanager
def only_this_process() -> Iterator[None]:
    """Around a module's import-time code: a process it forked ends here, silently, instead of running the rest
    of the session a second time (duplicate items, duplicate records)."""
    pid = os.getpid()
    try:
        yield
    finally:
        if os.getpid() != pid:
            os._exit(0)  # the fork's copy of the session: nothing it would do is wanted (no cleanup either)


def load_kernel_module(path: str | Path) -> KernelSpec:
    """Import ``kernels/<name>.py`` and check it against the kernel-module contract."""
    path = Path(path).resolve()
    name = path.stem
    if not path.is_file():
        raise KernelModuleError(f"kernel module {path}: no such file")
    mod_name = f"rvtune_kernels.{name}"
    try:
        import_spec = importlib.util.spec_from_file_location(mod_name, path)
        assert import_spec is not None and import_spec.loader is not None
        module = importlib.util.module_from_spec(import_spec)
        sys.modules[mod_name] = module  # triton and inspect look functions' modules up by name
        with only_this_process():
            import_spec.loader.exec_module(module)
    except KeyboardInterrupt:
        sys.modules.pop(mod_name, None)
        raise
    except BaseException as e:  # sys.exit() in one module is that module's error, not the session's end
        sys.modules.pop(mod_name, None)
        raise KernelModuleError(f"kernel module {path}: import failed: {_describe(e)}") from e

    kernel = getattr(module, f"{name}_kernel", None)
    if inspect.isfunction(kernel):  # undecorated, as triton-cpu scripts write it: jit it as they do
        import triton

        kernel = triton.jit(kernel)
    if kernel is None or not callable(getattr(kernel, "fn", None)):
        raise KernelModuleError(
            f"kernel module {path}: no kernel function {name}_kernel (@triton.jit or plain; the kernel is "
            "named after its file)"
        )
    getter = getattr(module, f"get_{name}_kernel_autotune_config", None)
    if not callable(getter):
        raise KernelModuleError(
            f"kernel module {path}: no get_{name}_kernel_autotune_config() returning triton.Configs"
        )
    for fn_name, nparams in (("make_inputs", 2), ("reference", 2), ("launch", 3)):
        f = getattr(module, fn_name, None)
        if not callable(f):
            raise KernelModuleError(f"kernel module {path}: no function {fn_name}() (see docs/kernels.md)")
        try:
            inspect.signature(f).bind(*range(nparams))
        except TypeError:
            raise KernelModuleError(
                f"kernel module {path}: {fn_name}() must take {nparams} positional arguments"
            ) from None

    cases = getattr(module, "CASES", None)
    if not isinstance(cases, dict) or not cases or not all(isinstance(c, dict) for c in cases.values()):
        raise KernelModuleError(
            f"kernel module {path}: CASES must be a non-empty dict of case name -> dict of parameters"
        )
    tolerance = {**DEFAULT_TOLERANCE, **dict(getattr(module, "TOLERANCE", {}))}
    if set(tolerance) != {"atol", "rtol"} or not all(
        isinstance(v, int | float) and v >= 0 and math.isfinite(v) for v in tolerance.values()
    ):
        raise KernelModuleError(
            f"kernel module {path}: TOLERANCE must be dict(atol=<float>, rtol=<float>), got {tolerance}"
        )

    spec = KernelSpec(
        name=name,
        path=path,
        module=module,
        kernel=kernel,
        configs=[],
        cases={k: dict(v) for k, v in cases.items()},
        tolerance={k: float(v) for k, v in tolerance.items()},
        variant_keys=_key_names(path, module, "VARIANT_KEYS"),
        problem_keys=_key_names(path, module, "PROBLEM_KEYS"),
        seed=int(getattr(module, "SEED", DEFAULT_SEED)),
        inout=_inout_names(path, module),
        expect_nan=getattr(module, "EXPECT_NAN", False) is True,
    )
    from pytest_rvtune.compat.triton_config import accepting_num_threads

    try:
        with accepting_num_threads(module.__dict__):
            raw = getter()
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        raise KernelModuleError(
            f"kernel module {path}: get_{name}_kernel_autotune_config() failed: {_describe(e)}"
        ) from e
    spec.configs = _validate_configs(path, raw, getter.__name__, spec.kernel_name, spec.constexpr_names, spec.fn)
    spec.default_config = _default_config(path, module, spec.configs, spec.problem_keys)
    for fn_name in ("FLOPS", "BYTES"):
        f = getattr(module, fn_name, None)
        if f is not None and (not callable(f) or not _takes(f, 1)):
            raise KernelModuleError(f"kernel module {path}: {fn_name} must be a function of the case dict, "
                                    f"FLOPS(case) -> number (per launch), got {f!r}")
    for attr, keys in (("VARIANT_KEYS", spec.variant_keys), ("PROBLEM_KEYS", spec.problem_keys)):
        for key in keys:
            unset = next((c for c in spec.configs if key not in c), None)
            if unset is not None:
                raise KernelModuleError(
                    f"kernel module {path}: {attr} names {key}, which not every config sets (config "
                    f"{config_id(unset)} does not); set it in every config or drop it from {attr}"
                )
    return spec


def _takes(fn: Callable[..., Any], nparams: int) -> bool:
    try:
        inspect.signature(fn).bind(*range(nparams))
    except (TypeError, ValueError):
        return False
    return True


def _default_config(path: Path, module: Any, configs: Sequence[BlockConfig],
                    problem_keys: Sequence[str]) -> dict[str, ConfigValue] | None:
    """DEFAULT_CONFIG's values (a dict or a triton.Config), checked to name one of the configs; None without it."""
    raw = getattr(module, "DEFAULT_CONFIG", None)
    if raw is None:
        return None
    values = getattr(raw, "kwargs", raw)
    if not isinstance(values, dict) or not values:
        raise KernelModuleError(f"kernel module {path}: DEFAULT_CONFIG must be a dict of config values (or a "
                                f"triton.Config), e.g. {{\"BLOCK\": 32}}, got {raw!r}")
    wanted = {k: v for k, v in values.items() if k not in problem_keys}
    if not any(all(c.get(k) == v for k, v in wanted.items()) for c in configs):
        raise KernelModuleError(f"kernel module {path}: DEFAULT_CONFIG {config_id(values)} is none of the "
                                "kernel's configs; name the values of one of them (the untuned config reports "
                                "compare the tuned ones with)")
    return dict(values)


def _describe(exc: BaseException) -> str:
    """``Type: message``; for sys.exit() ``SystemExit: 3 (sys.exit() while importing)``, which is clearer."""
    if isinstance(exc, SystemExit):
        return f"SystemExit: {exc.code} (the module called sys.exit(); a kernel module must not exit)"
    if isinstance(exc, SyntaxError) and exc.lineno:  # file:line first, then the line itself: what an editor needs
        line = f"\n    {exc.text.strip()}" if exc.text and exc.text.strip() else ""
        return f"{type(exc).__name__} at {exc.filename}:{exc.lineno}: {exc.msg}{line}"
    return f"{type(exc).__name__}: {exc}"


def _inout_names(path: Path, module: Any) -> frozenset[str] | None:
    """INOUT of a module: names of make_inputs tensors that are updated in place (input data and expected data);
    None when the module has none (golden.py then infers them)."""
    names = getattr(module, "INOUT", None)
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, set | frozenset | tuple | list) or \
            not all(isinstance(n, str) for n in names):
        raise KernelModuleError(f"kernel module {path}: INOUT must be a set of make_inputs tensor names, "
                                f"e.g. {{\"x\"}}, got {names!r}")
    return frozenset(names)


def _key_names(path: Path, module: Any, attr: str) -> tuple[str, ...]:
    """VARIANT_KEYS / PROBLEM_KEYS of a module: a tuple of config key names (a bare string is a common slip)."""
    keys = getattr(module, attr, ())
    if not isinstance(keys, tuple | list) or not all(isinstance(k, str) for k in keys):
        raise KernelModuleError(f"kernel module {path}: {attr} must be a tuple of config key names, "
                                f"e.g. (\"IS_CAUSAL\",), got {keys!r}")
    return tuple(keys)


def discover(kernels_dir: str | Path) -> list[Path]:
    """The kernel modules of a directory (``*.py`` not starting with ``_``), sorted by name."""
    return sorted(p for p in Path(kernels_dir).glob("*.py") if not p.name.startswith("_"))


if __name__ == "__main__":
    _interpret_main(sys.argv[1], sys.argv[2])
