"""``triton.Config(..., num_threads=n)`` while the CPU driver is active.

``num_threads`` is triton-cpu's launch option (0 = all harts, 1 = serial, N = N threads); upstream Triton's
``Config`` refuses the keyword. While the driver is active, ``triton.Config`` is a subclass that accepts it and
passes it to the launch (``all_kwargs``), where the backend's options carry it to our launcher. Deactivating
restores Triton's class. Code that bound ``Config`` before activation (``from triton import Config``) keeps
Triton's own class.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def threaded_config_class() -> type:
    """``triton.Config`` that accepts ``num_threads`` and hands it to the kernel launch."""
    import triton

    class Config(triton.Config):
        def __init__(self, kwargs: dict[str, Any], *args: Any, num_threads: int | None = None,
                     **options: Any) -> None:
            super().__init__(kwargs, *args, **options)
            self.num_threads = num_threads

        def all_kwargs(self) -> dict[str, Any]:
            extra = {} if self.num_threads is None else {"num_threads": self.num_threads}
            return {**super().all_kwargs(), **extra}

        def __str__(self) -> str:
            return f"{super().__str__()}, num_threads: {self.num_threads}"

    Config.__qualname__ = "Config"
    return Config


_original: type | None = None


def install() -> None:
    global _original
    import triton

    threaded = threaded_config_class()
    if triton.Config is not threaded:
        _original = triton.Config
        triton.Config = threaded


def uninstall() -> None:
    global _original
    import triton

    if _original is not None and triton.Config is threaded_config_class():
        triton.Config = _original
    _original = None
