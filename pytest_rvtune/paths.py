"""Where pytest-rvtune keeps its tools and caches (all under one ``.rvtune`` directory)."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_rvtune import PACKAGE_DIR

#: The source checkout this package is installed from (editable install): the setup step builds the
#: QEMU plugin into ``<REPO_ROOT>/.rvtune/tools``.
REPO_ROOT = PACKAGE_DIR.parent


def tools_dir() -> Path:
    """Built helper tools (the QEMU instruction-count plugin). Override with RVTUNE_TOOLS_DIR."""
    return Path(os.environ.get("RVTUNE_TOOLS_DIR", REPO_ROOT / ".rvtune" / "tools"))


def cache_dir() -> Path:
    """Content-addressed build and data cache, shared across runs and xdist workers.

    Override with RVTUNE_CACHE_DIR (e.g. to share one cache between checkouts).
    """
    return Path(os.environ.get("RVTUNE_CACHE_DIR", REPO_ROOT / ".rvtune" / "cache"))


def icount_plugin() -> Path:
    return tools_dir() / "libicount.so"
