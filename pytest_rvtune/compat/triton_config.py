"""``triton.Config(..., num_threads=n)`` while a config getter runs.

``num_threads`` is a triton-cpu extension (0 = all harts, 1 = serial, N = N threads); upstream Triton's
``Config`` refuses the keyword. Config getters written for triton-cpu call it, so while one runs,
``triton.Config`` (and any module global bound to it by ``from triton import Config``) is a subclass that
accepts it. The swap is scoped to the call: nothing else sees a changed Triton.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator, MutableMapping
from typing import Any

_lock = threading.RLock()  # triton.Config is process-global: one swap at a time


@functools.cache
def threaded_config_class() -> type:
    """``triton.Config`` plus a ``num_threads`` attribute (None when the keyword was not given)."""
    import triton

    class ThreadedConfig(triton.Config):
        def __init__(self, kwargs: dict[str, Any], num_threads: int | None = None, **options: Any) -> None:
            super().__init__(kwargs, **options)
            self.num_threads = num_threads

    ThreadedConfig.__name__ = ThreadedConfig.__qualname__ = "Config"  # reprs and errors read as triton's
    return ThreadedConfig


@contextlib.contextmanager
def accepting_num_threads(module_globals: MutableMapping[str, Any] | None = None) -> Iterator[None]:
    """Within the block, ``triton.Config`` (and names in ``module_globals`` bound to it) accept num_threads."""
    import triton

    threaded = threaded_config_class()
    with _lock:
        original = triton.Config
        if original is threaded:  # nested: already swapped
            yield
            return
        names = module_globals if module_globals is not None else {}
        rebound = [k for k, v in names.items() if v is original]
        triton.Config = threaded
        for k in rebound:
            names[k] = threaded
        try:
            yield
        finally:
            triton.Config = original
            for k in rebound:
                if names.get(k) is threaded:
                    names[k] = original
