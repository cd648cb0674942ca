"""pytest_rvtune as a Triton CPU driver: ``kernel[grid](*cpu_tensors)`` compiled by our backend, run in-process.

Off unless asked for: call ``activate()`` or set ``RVTUNE_CPU_DRIVER=1`` before Triton picks its driver (the
first launch). Then Triton's own JIT compiles each specialisation through the rvtune backend for the host ISA
(``triton.compile`` -> TTIR -> C), this package builds the C into shared objects (loader.py), and Triton's
``CompiledKernel`` launches them through our launcher (launch.py) on the tensors' memory; ``triton.autotune``
and ``triton.testing.do_bench`` use the CPU device (device.py). The QEMU mode (qemu.py) compiles for rv64gcv
and runs each launch as an ELF under qemu-riscv64 instead.

This module is imported while Triton discovers backends: it imports only the activation state at module level.
"""

from __future__ import annotations

from pytest_rvtune.cpu_driver.activation import ENV_VAR, HOST_MODE, QEMU_MODE, ActivationError, requested_mode

__all__ = ["ENV_VAR", "HOST_MODE", "QEMU_MODE", "ActivationError", "activate", "active_mode", "deactivate", "is_active"]


def activate(mode: str = HOST_MODE) -> None:
    """Make the rvtune driver Triton's active driver: ``kernel[grid](...)`` on CPU tensors runs our build.

    ``mode``: ``"host"`` (built for this machine, run in-process) or ``"qemu"`` (built for rv64gcv, each launch
    run under qemu-riscv64 on copies of the tensors' memory, copied back). Kernels compiled in one mode are
    never launched in the other (Triton's JIT keeps one cache per device, and each mode is its own device).
    """
    from triton.runtime.driver import driver

    from pytest_rvtune.compiler.driver import RVTuneDriver
    from pytest_rvtune.cpu_driver import activation

    activation.set_mode(mode)
    driver.set_active(RVTuneDriver())  # an active RVTuneDriver installs the Config(num_threads=) shim


def deactivate() -> None:
    """Switch the driver off (also over ``RVTUNE_CPU_DRIVER``): Triton falls back to its default driver."""
    from triton.runtime.driver import driver

    from pytest_rvtune.cpu_driver import activation, config_compat

    activation.set_mode(None)
    config_compat.uninstall()
    # None: the next driver.active is Triton's default again (found afresh if none was created yet).
    driver.set_active(None)


def is_active() -> bool:
    return requested_mode() is not None


def active_mode() -> str | None:
    """The active mode (``"host"`` or ``"qemu"``), None when the driver is off."""
    return requested_mode()
