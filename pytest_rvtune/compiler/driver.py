"""The rvtune Triton driver: inactive unless the user asks for the CPU driver (pytest_rvtune.cpu_driver).

By default rvtune kernels are not launched from Python (the ELF runs on QEMU, the host or a board), so
``is_active()`` is False and this driver never takes ``kernel[grid](...)`` launches from another driver. After
``pytest_rvtune.cpu_driver.activate()`` or with ``RVTUNE_CPU_DRIVER=1`` it is active: Triton's JIT compiles for
the host through our backend and launches through the CPU launcher (mode ``qemu``: for rv64gcv, each launch an
ELF under QEMU). The runtime parts are imported lazily: this module is imported while ``triton`` discovers
backends.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

if "triton" not in sys.modules:
    # Imported before triton: as in compiler.py, let triton's backend discovery import a complete copy of
    # this module (importing triton from here would find this one half-executed, without the driver class).
    del sys.modules[__name__]
    importlib.import_module("triton")

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from pytest_rvtune.compiler.options import CPU_BACKEND_NAME
from pytest_rvtune.cpu_driver.activation import HOST_MODE, QEMU_MODE, requested_mode
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA

# Triton type string -> C type of the kernel ABI (docs/contracts.md).
_SCALAR_C_TYPES = {
    "i1": "int8_t",
    "i8": "int8_t",
    "i16": "int16_t",
    "i32": "int32_t",
    "i64": "int64_t",
    "u1": "uint8_t",
    "u8": "uint8_t",
    "u16": "uint16_t",
    "u32": "uint32_t",
    "u64": "uint64_t",
    # 16-bit floats are bit patterns in the kernel ABI (computed in float by rvtune_rt.h)
    "fp16": "uint16_t",
    "bf16": "uint16_t",
    "fp32": "float",
    "f32": "float",
    "fp64": "double",
    # 8-bit floats too (rvtune_fp8.h; fp8e4b15, which Triton 3.9 types as i8, converts in the frontend)
    "fp8e5": "uint8_t",
    "fp8e4b15": "uint8_t",
    "fp8e4nv": "uint8_t",
    "fp8e4b8": "uint8_t",
    "fp8e5b16": "uint8_t",
}


class RVTuneDriver(DriverBase):
    def __init__(self) -> None:
        super().__init__()
        if requested_mode() is not None:  # created as Triton's driver (activate() or RVTUNE_CPU_DRIVER)
            from pytest_rvtune.cpu_driver import config_compat

            config_compat.install()

    @classmethod
    def is_active(cls) -> bool:
        return requested_mode() is not None

    # ---- what Triton's JIT and CompiledKernel use (only while active) ----------------------------------

    @property
    def launcher_cls(self) -> type:
        if requested_mode() == QEMU_MODE:
            from pytest_rvtune.cpu_driver.qemu import QemuLauncher

            return QemuLauncher
        from pytest_rvtune.cpu_driver.launch import CPULauncher

        return CPULauncher

    @property
    def utils(self) -> Any:
        from pytest_rvtune.cpu_driver.device import CPUUtils

        return CPUUtils(rv64=requested_mode() == QEMU_MODE)

    def get_current_device(self) -> int:
        # One device per mode: Triton's JIT keeps a kernel cache per device, so a kernel compiled for the host
        # is never handed to the QEMU launcher after a mode switch (or the other way round).
        return 1 if requested_mode() == QEMU_MODE else 0

    def set_current_device(self, device: int) -> None:
        pass

    def get_current_stream(self, device: int | None = None) -> int:
        return 0  # launches are synchronous; the launcher ignores the stream

    def get_device_interface(self) -> Any:
        from pytest_rvtune.cpu_driver.device import CPUDeviceInterface

        return CPUDeviceInterface

    def get_empty_cache_for_benchmark(self) -> Any:
        from pytest_rvtune.cpu_driver.device import empty_cache_for_benchmark

        return empty_cache_for_benchmark()

    def clear_cache(self, cache: Any) -> None:
        from pytest_rvtune.cpu_driver.device import clear_cache

        clear_cache(cache)

    def map_python_to_cpp_type(self, ty: str) -> str:
        if ty.startswith("*"):
            return f"{self.map_python_to_cpp_type(ty[1:])} *"
        try:
            return _SCALAR_C_TYPES[ty]
        except KeyError:
            raise ValueError(f"the rvtune backend has no C type for Triton type {ty!r}") from None

    def get_current_target(self) -> GPUTarget:
        # The host mode compiles for this machine; the QEMU mode (and an inactive driver) for rv64gcv. The backend
        # is named as triton-cpu names it: the tensors are torch CPU tensors in both modes.
        return GPUTarget(CPU_BACKEND_NAME, HOST_ISA if requested_mode() == HOST_MODE else RISCV_ISA, 1)

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_benchmarker(self) -> Any:
        if requested_mode() is None:
            raise NotImplementedError(
                "rvtune kernels are benchmarked by running ELFs on a target (pytest --rvtune-target), "
                "not in-process (or activate the CPU driver: pytest_rvtune.cpu_driver.activate())"
            )
        from triton.testing import do_bench

        return do_bench
