"""The CPU as the "device" Triton's runtime and ``triton.testing.do_bench`` expect.

``do_bench`` asks the driver for a device interface (``synchronize()``, ``Event(enable_timing=True)`` with
``record()`` / ``elapsed_time()``), for a buffer to flush the caches with between runs and for the
function that flushes it. ``CompiledKernel`` asks ``driver.utils`` for the device's properties and to load a
binary. A CPU launch is synchronous (the wrapper returns when every program has run), so events are
wall-clock stamps and synchronising does nothing.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

from pytest_rvtune.cpu_driver import loader

#: Flush buffer size when the last-level cache size is unknown.
_DEFAULT_FLUSH_BYTES = 32 << 20


class CPUEvent:
    """A timing event: ``record()`` takes a wall-clock stamp; ``elapsed_time(end)`` is in milliseconds."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.stamp: float | None = None

    def record(self, stream: Any = None) -> None:
        self.stamp = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: CPUEvent) -> float:
        if self.stamp is None or end.stamp is None:
            raise RuntimeError("elapsed_time() needs both events recorded first")
        return (end.stamp - self.stamp) * 1000.0


class CPUDeviceInterface:
    """What ``triton.testing`` uses of ``torch.cuda``, for the CPU (one device, index 0)."""

    Event = CPUEvent

    @staticmethod
    def synchronize(device: Any = None) -> None:
        pass  # launches are synchronous

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def set_device(device: Any) -> None:
        pass


def flush_buffer_bytes() -> int:
    """Twice the last-level cache (so a flush evicts it), from sysconf where the C library knows it."""
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError):
            continue
        if size > 0:
            return 2 * size
    return _DEFAULT_FLUSH_BYTES


def empty_cache_for_benchmark() -> bytearray:
    return bytearray(flush_buffer_bytes())


def clear_cache(cache: bytearray) -> None:
    """Write the whole flush buffer, evicting the kernel's data from the caches before a timed run."""
    ctypes.memset((ctypes.c_char * len(cache)).from_buffer(cache), 0, len(cache))


class CPUUtils:
    """``driver.utils`` of the CPU driver: loads the C our backend compiled (``CompiledKernel.kernel``)."""

    def __init__(self, rv64: bool = False) -> None:
        self.rv64 = rv64  # QEMU mode: the "binary" is the kernel's rv64 object, linked per launch ELF

    def load_binary(self, name: str, kernel: bytes, shared: int, device: Any) -> tuple[None, Any, int, int, int]:
        """(module, function, n_regs, n_spills, n_max_threads), as the GPU drivers return; a CPU program is
        one thread (warp size 1), so any num_warps fits.

        The module is None: libraries belong to the loader's process-wide table and stay loaded, so Triton's
        ``CompiledKernel.__del__`` has nothing to unload (and needs no driver, which may be deactivated by the
        time a kernel is collected).
        """
        if self.rv64:
            from pytest_rvtune.cpu_driver.qemu import load_kernel_object

            return None, load_kernel_object(name, kernel.decode()), 0, 0, 2**31 - 1
        _, function = loader.load_kernel(name, kernel.decode())
        return None, function, 0, 0, 2**31 - 1

    @staticmethod
    def unload_module(module: Any) -> None:
        pass  # the library stays loaded: other specialisations or a later launch may load the same file

    @staticmethod
    def get_device_properties(device: Any) -> dict[str, Any]:
        return {"max_shared_mem": 2**31 - 1, "multiprocessor_count": os.cpu_count() or 1,
                "max_num_regs": 0, "warpSize": 1}
