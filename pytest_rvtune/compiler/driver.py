"""The rvtune Triton driver: present so Triton's backend discovery accepts the backend, never active.

rvtune kernels are not launched from Python (the ELF runs on QEMU, the host or a board), so ``is_active()``
is False: this driver must never hijack ``kernel[grid](...)`` launches (the interpreter and CUDA keep them).
"""

from __future__ import annotations

from typing import Any

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from pytest_rvtune.toolchain import RISCV_ISA

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
}


class RVTuneDriver(DriverBase):
    @classmethod
    def is_active(cls) -> bool:
        return False

    def map_python_to_cpp_type(self, ty: str) -> str:
        if ty.startswith("*"):
            return f"{self.map_python_to_cpp_type(ty[1:])} *"
        try:
            return _SCALAR_C_TYPES[ty]
        except KeyError:
            raise ValueError(f"the rvtune backend has no C type for Triton type {ty!r}") from None

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("riscv", RISCV_ISA, 1)

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_benchmarker(self) -> Any:
        raise NotImplementedError(
            "rvtune kernels are benchmarked by running ELFs on a target (pytest --rvtune-target), "
            "not in-process"
        )
