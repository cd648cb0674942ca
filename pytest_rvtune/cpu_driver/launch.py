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
import struct
from collections.abc import Callable
from typing import Any

from pytest_rvtune.compiler.lower import Param
from pytest_rvtune.cpu_driver import loader


class LaunchError(TypeError):
    """An argument the CPU driver cannot pass to the kernel; names the kernel and the parameter."""


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


def _pointer_converter(kernel: str, param: str) -> Callable[[Any], int]:
    def convert(arg: Any) -> int:
        data_ptr = getattr(arg, "data_ptr", None)
        if data_ptr is None:
            raise LaunchError(f"kernel {kernel}: argument {param!r} is a pointer parameter but got "
                              f"{type(arg).__name__}; pass a CPU tensor")
        device = getattr(arg, "device", None)
        if device is not None and getattr(device, "type", "cpu") != "cpu":
            raise LaunchError(f"kernel {kernel}: argument {param!r} is on device {device}; the rvtune CPU "
                              "driver runs kernels on CPU tensors (move it with .cpu())")
        return data_ptr()
    return convert


class CPULauncher:
    """``launcher_cls`` of the rvtune driver: one per compiled kernel (specialisation)."""

    def __init__(self, src: Any, metadata: Any) -> None:
        self.name: str = metadata.name
        self.num_threads: int = int(getattr(metadata, "num_threads", 0))
        signature: dict[str, Any] = dict(src.signature)
        runtime = [(i, n, t) for i, (n, t) in enumerate(signature.items()) if t != "constexpr"]
        for _, param_name, ty in runtime:
            if not isinstance(ty, str) or ty.startswith("tensordesc"):
                raise LaunchError(f"kernel {self.name}: parameter {param_name!r} has type {ty}; the rvtune CPU "
                                  "driver passes tensors and scalars only (no tuples, no tensor descriptors)")
        params = tuple(Param(*p) for p in metadata.params)
        if [p.name for p in params] != [n for _, n, _ in runtime]:
            raise LaunchError(f"kernel {self.name}: the compiled kernel takes {[p.name for p in params]} but the "
                              f"launch passes {[n for _, n, _ in runtime]}")
        self.arg_indices = [i for i, _, _ in runtime]
        self.converters: list[Callable[[Any], Any]] = []
        argtypes: list[Any] = [ctypes.c_uint32] * 3 + [ctypes.c_int, ctypes.c_void_p]
        for _, param_name, ty in runtime:
            if ty.startswith("*"):
                argtypes.append(ctypes.c_void_p)
                self.converters.append(_pointer_converter(self.name, param_name))
            elif ty in _SCALARS:
                c_type, convert = _SCALARS[ty]
                argtypes.append(c_type)
                self.converters.append(convert)
            else:
                raise LaunchError(f"kernel {self.name}: parameter {param_name!r} has type {ty}, which the rvtune "
                                  "CPU driver cannot pass")
        lib = loader.load_launcher(self.name, params)
        self.wrap = getattr(lib, f"{self.name}_wrap")
        self.wrap.argtypes = argtypes
        self.wrap.restype = None

    def __call__(self, grid_x: int, grid_y: int, grid_z: int, stream: Any, function: int, packed_metadata: Any,
                 launch_metadata: Any, enter_hook: Any, exit_hook: Any, *args: Any) -> None:
        if enter_hook is not None:
            enter_hook(launch_metadata)
        values = [convert(args[i]) for i, convert in zip(self.arg_indices, self.converters, strict=True)]
        for axis, size in zip("xyz", (grid_x, grid_y, grid_z), strict=True):
            if not 0 <= size < 2**32:
                raise LaunchError(f"kernel {self.name}: grid size {axis}={size} is outside 0..2**32-1")
        # ctypes releases the GIL for the call: other Python threads run while the kernel does.
        self.wrap(grid_x, grid_y, grid_z, self.num_threads, function, *values)
        if exit_hook is not None:
            exit_hook(launch_metadata)
