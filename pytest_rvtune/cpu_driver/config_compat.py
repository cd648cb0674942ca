"""``triton.Config(..., num_threads=n)`` while the CPU driver is active.

``num_threads`` is triton-cpu's launch option (0 = all harts, 1 = serial, N = N threads); upstream Triton's
``Config`` refuses the keyword. While the driver is active, ``triton.Config`` is a subclass that accepts it and
passes it to the launch (``all_kwargs``), where the backend's options carry it to our launcher. Triton's own
names for the class (``triton.Config``, ``triton.runtime.Config`` and the autotuner module's, which rebuilds
configs from its disk cache) are swapped together; deactivating restores them. Code that bound ``Config``
before activation (``from triton import Config``) keeps Triton's own class.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def threaded_config_class() -> type:
    """``triton.Config`` that accepts ``num_threads`` and hands it to the kernel launch."""
    from triton.runtime import autotuner

    # The autotuner module's binding: the class itself, even while another scoped swap of triton.Config runs.
    class Config(autotuner.Config):
        def __init__(self, kwargs: dict[str, Any], *args: Any, num_threads: int | None = None,
                     **options: Any) -> None:
            super().__init__(kwargs, *args, **options)
            self.num_threads = num_threads

        def all_kwargs(self) -> dict[str, Any]:
            extra = {} if self.num_threads is None else {"num_threads": self.num_threads}
            return {**super().all_kwargs(), **extra}

        def __str__(self) -> str:
            text = super().__str__()
            return text if self.num_threads is None else f"{text}, num_threads: {self.num_threads}"

    Config.__qualname__ = "Config"
    return Config


_original: type | None = None


def _holders() -> list[Any]:
    """The modules whose ``Config`` attribute is Triton's class."""
    import triton
    import triton.runtime
    import triton.runtime.autotuner

    return [triton, triton.runtime, triton.runtime.autotuner]


def install() -> None:
    global _original
    from triton.runtime import autotuner

    threaded = threaded_config_class()
    if _original is None:
        _original = autotuner.Config
    for module in _holders():
        if module.Config is _original:
            module.Config = threaded


def uninstall() -> None:
    global _original
    threaded = threaded_config_class()
    if _original is not None:
        for module in _holders():
            if module.Config is threaded:
                module.Config = _original
    _original = None
