"""The launcher Triton's ``CompiledKernel`` calls: Python arguments -> ``<name>_wrap`` through ctypes.

Triton's JIT (runtime/jit.py) compiles once per specialisation key and then calls
``driver.active.launcher_cls(src, metadata)(gridX, gridY, gridZ, stream, function, packed_metadata,
launch_metadata, enter_hook, exit_hook, *all_args)``. This class is that callable for the CPU: it drops the
constexpr arguments (the signature marks them, including ints specialised to 1), turns tensors into their
``data_ptr()`` (the kernel writes the tensors' memory in place) and scalars into the C types of the kernel
ABI, and calls the wrapper, which walks the grid on ``num_threads`` threads.
"""

from __future__ import annotations

import ctypes
import functools
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_rvtune.compiler.lower import Param
from pytest_rvtune.cpu_driver import loader

_launches = 0  # kernel launches run by this process's launchers (either mode)


def launches() -> int:
    """How many launches the CPU driver's launchers have run in this process."""
    return _launches


def count_launch() -> None:
    global _launches
    _launches += 1


class LaunchError(RuntimeError):
    """An argument the CPU driver cannot pass to the kernel; names the kernel and the parameter."""


class KernelCrashError(LaunchError):
    """The kernel itself died while running (a signal, e.g. an out-of-bounds access, or no end in time): not a
    refusal of the driver but a failure of this launch. Only the QEMU mode can report it; in the host mode the
    crash takes the process with it."""


def _fp16_bits(value: float) -> int:
    return struct.unpack("<H", struct.pack("<e", value))[0]


def _bf16_bits(value: float) -> int:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF  # round to nearest even, as torch does


# Triton scalar type -> (ctypes type, Python value -> C value)
_SCALARS: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    "i1": (ctypes.c_int8, int), "u1": (ctypes.c_uint8, int),
    "i8": (ctypes.c_int8, int), "i16": (ctypes.c_int16, int),
    "i32": (ctypes.c_int32, int), "i64": (ctypes.c_int64, int),
    "u8": (ctypes.c_uint8, int), "u16": (ctypes.c_uint16, int),
    "u32": (ctypes.c_uint32, int), "u64": (ctypes.c_uint64, int),
    "fp16": (ctypes.c_uint16, _fp16_bits), "bf16": (ctypes.c_uint16, _bf16_bits),
    "fp32": (ctypes.c_float, float), "fp64": (ctypes.c_double, float),
}


def checked_tensor(kernel: str, param: str, arg: Any) -> Any:
    """``arg`` if it is a CPU tensor (anything with ``data_ptr()`` on the CPU); else a LaunchError."""
    if getattr(arg, "data_ptr", None) is None:
        raise LaunchError(f"kernel {kernel}: argument {param!r} is a pointer parameter but got "
                          f"{type(arg).__name__}; pass a CPU tensor")
    device = getattr(arg, "device", None)
    if device is not None and getattr(device, "type", "cpu") != "cpu":
        raise LaunchError(f"kernel {kernel}: argument {param!r} is on device {device}; the rvtune CPU "
                          "driver runs kernels on CPU tensors (move it with .cpu())")
    return arg


def _tensor_pointer(kernel: str, param: str, arg: Any) -> int:
    """The address a pointer parameter passes: the CPU tensor's data."""
    return int(checked_tensor(kernel, param, arg).data_ptr())


_DESCRIPTOR = re.compile(r"tensordesc<(\w+)\[([^\]]*)\]>")


def descriptor_parts(kernel: str, param: str, arg: Any) -> list[Any]:
    """A host tensor descriptor as Triton's launchers decompose it without TMA (backends/driver.py
    ``decompose_descriptor``): base tensor, shape, strides, padding is NaN, round to tf32, then shape and
    strides again (the kernel reads them once from the lowered descriptor and once as its own arguments)."""
    if not all(hasattr(arg, a) for a in ("base", "shape", "strides", "padding")):
        raise LaunchError(f"kernel {kernel}: argument {param!r} is a tensor descriptor parameter but got "
                          f"{type(arg).__name__}; pass triton.tools.tensor_descriptor.TensorDescriptor")
    shape, strides = [int(n) for n in arg.shape], [int(n) for n in arg.strides]
    return [arg.base, *shape, *strides, arg.padding == "nan", bool(getattr(arg, "round_f32_to_tf32", False)),
            *shape, *strides]


def _descriptor_args(index: int, name: str, triton_type: str) -> list[RuntimeArg]:
    """The C arguments one tensor descriptor parameter becomes, named as the TTIR names them."""
    match = _DESCRIPTOR.fullmatch(triton_type.replace(" ", ""))
    if match is None:  # e.g. tensordesc_im2col, a GPU-only mode
        raise LaunchError(f"kernel {name}: parameter {name!r} has type {triton_type}; the rvtune CPU driver "
                          "passes tiled tensor descriptors, tensors and scalars only")
    dtype, rank = match.group(1), match.group(2).count(",") + 1
    dims = range(rank)
    parts = [(name, "*" + dtype), *((f"{name}.shape.{i}", "i64") for i in dims),
             *((f"{name}.stride.{i}", "i64") for i in dims), (f"{name}.padding", "i1"),
             (f"{name}.roundF32ToTF32", "i1"), *((f"{name}.shape.{i}", "i32") for i in dims),
             *((f"{name}.stride.{i}", "i64") for i in dims)]
    return [RuntimeArg(index, n, t, part) for part, (n, t) in enumerate(parts)]


@dataclass(frozen=True)
class RuntimeArg:
    """A kernel argument the launch passes to C: its position among the launch's arguments, name, type, and
    for a part of a tensor descriptor argument, which part (``descriptor_parts``)."""

    index: int
    name: str
    triton_type: str
    part: int | None = None

    @property
    def is_pointer(self) -> bool:
        return self.triton_type.startswith("*")

    def scalar(self, kernel: str) -> tuple[Any, Callable[[Any], Any]]:
        """(ctypes type, Python value -> C value) of a scalar argument."""
        try:
            return _SCALARS[self.triton_type]
        except KeyError:
            raise LaunchError(f"kernel {kernel}: parameter {self.name!r} has type {self.triton_type}, which the "
                              "rvtune CPU driver cannot pass") from None


@dataclass(frozen=True)
class KernelCall:
    """What every launcher needs of a compiled kernel: its C parameters and which launch arguments feed them
    (the signature marks constexprs, including ints Triton specialised to 1; those are not passed)."""

    name: str
    num_threads: int
    params: tuple[Param, ...]
    args: tuple[RuntimeArg, ...]

    @classmethod
    def of(cls, src: Any, metadata: Any) -> KernelCall:
        name = metadata.name
        args: list[RuntimeArg] = []
        for i, (n, t) in enumerate(dict(src.signature).items()):
            if t == "constexpr":
                continue
            if not isinstance(t, str):
                raise LaunchError(f"kernel {name}: parameter {n!r} has type {t}; the rvtune CPU driver passes "
                                  "tensors, tensor descriptors and scalars only (no tuples)")
            args += _descriptor_args(i, n, t) if t.startswith("tensordesc") else [RuntimeArg(i, n, t)]
        params = tuple(Param(*p) for p in metadata.params)
        if [p.user_name for p in params] != [a.name for a in args]:
            raise LaunchError(f"kernel {name}: the compiled kernel takes {[p.user_name for p in params]} but the "
                              f"launch passes {[a.name for a in args]}")
        num_threads = int(getattr(metadata, "num_threads", 0))
        if num_threads < 0:  # the C wrapper would abort the whole process
            raise LaunchError(f"kernel {name}: num_threads={num_threads} is negative (0 = all harts, 1 = serial, "
                              "N = N threads)")
        return cls(name, num_threads, params, tuple(args))

    def values(self, args: tuple[Any, ...]) -> list[Any]:
        """The Python value of each C argument from the launch's arguments (a tensor descriptor decomposed once)."""
        parts: dict[int, list[Any]] = {}
        values = []
        for arg in self.args:
            if arg.part is None:
                values.append(args[arg.index])
                continue
            if arg.index not in parts:
                parts[arg.index] = descriptor_parts(self.name, arg.name, args[arg.index])
            values.append(parts[arg.index][arg.part])
        return values

    def check_grid(self, grid: tuple[int, int, int]) -> None:
        for axis, size in zip("xyz", grid, strict=True):
            if not 0 <= size < 2**32:
                raise LaunchError(f"kernel {self.name}: grid size {axis}={size} is outside 0..2**32-1")


class CPULauncher:
    """``launcher_cls`` of the rvtune driver in host mode: one per compiled kernel (specialisation)."""

    def __init__(self, src: Any, metadata: Any) -> None:
        self.call = KernelCall.of(src, metadata)
        name = self.call.name
        self.converters: list[Callable[[Any], Any]] = []
        argtypes: list[Any] = [ctypes.c_uint32] * 3 + [ctypes.c_int, ctypes.c_void_p]
        for arg in self.call.args:
            if arg.is_pointer:
                argtypes.append(ctypes.c_void_p)
                self.converters.append(functools.partial(_tensor_pointer, name, arg.name))
            else:
                c_type, convert = arg.scalar(name)
                argtypes.append(c_type)
                self.converters.append(convert)
        lib = loader.load_launcher(name, self.call.params)
        self.wrap = getattr(lib, f"{name}_wrap")
        self.wrap.argtypes = argtypes
        self.wrap.restype = None

    def __call__(self, grid_x: int, grid_y: int, grid_z: int, stream: Any, function: int, packed_metadata: Any,
                 launch_metadata: Any, enter_hook: Any, exit_hook: Any, *args: Any) -> None:
        if enter_hook is not None:
            enter_hook(launch_metadata)
        values = [convert(v) for v, convert in zip(self.call.values(args), self.converters, strict=True)]
        self.call.check_grid((grid_x, grid_y, grid_z))
        # ctypes releases the GIL for the call: other Python threads run while the kernel does.
        self.wrap(grid_x, grid_y, grid_z, self.call.num_threads, function, *values)
        count_launch()
        if exit_hook is not None:
            exit_hook(launch_metadata)
