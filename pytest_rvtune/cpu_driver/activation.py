"""Whether the CPU driver is switched on, and in which mode: an explicit call or an environment variable.

This module is imported while ``triton`` discovers backends (through compiler/driver.py), so it imports
nothing but the standard library.
"""

from __future__ import annotations

import os

#: ``RVTUNE_CPU_DRIVER=1`` (or ``host``, or ``qemu``) makes Triton's backend discovery find the rvtune driver
#: active.
ENV_VAR = "RVTUNE_CPU_DRIVER"

#: Kernels compiled for this machine and run in-process on the tensors' memory.
HOST_MODE = "host"
#: Kernels compiled for rv64gcv; every launch runs as an ELF under qemu-riscv64 (slow; for conformance).
QEMU_MODE = "qemu"
MODES = (HOST_MODE, QEMU_MODE)

_ENV_VALUES = {"1": HOST_MODE, "true": HOST_MODE, "yes": HOST_MODE, "on": HOST_MODE, HOST_MODE: HOST_MODE,
               QEMU_MODE: QEMU_MODE}
_OFF_VALUES = {"", "0", "false", "no", "off"}

_mode: str | None = None  # set by a call; None = off
_set_by_call = False  # once a call has switched the driver on or off, the environment no longer counts


class ActivationError(ValueError):
    """A mode or an environment variable value the driver does not know."""


def env_mode() -> str | None:
    """The mode ``RVTUNE_CPU_DRIVER`` asks for, None when unset or off."""
    raw = os.environ.get(ENV_VAR, "").strip().lower()
    if raw in _OFF_VALUES:
        return None
    try:
        return _ENV_VALUES[raw]
    except KeyError:
        raise ActivationError(f"{ENV_VAR}={os.environ[ENV_VAR]!r}: expected 1 or one of {', '.join(MODES)} "
                              "(0 or unset: off)") from None


def requested_mode() -> str | None:
    """The active mode, None when the driver is off. A call (activate/deactivate) wins over the environment."""
    return _mode if _set_by_call else env_mode()


def set_mode(mode: str | None) -> None:
    """Switch the driver on in ``mode`` or off (None), whatever the environment says."""
    global _mode, _set_by_call
    if mode is not None and mode not in MODES:
        raise ActivationError(f"unknown CPU driver mode {mode!r}: expected one of {', '.join(MODES)}")
    _mode, _set_by_call = mode, True
