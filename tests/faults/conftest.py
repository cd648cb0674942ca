"""Fixtures of the fault tests: the plugin tests' pytester project (tests/plugin/pytester_project.py) with tiny
kernel modules (tests/plugin/plugin_helpers.py), run with the real Triton frontend, clang-19 and QEMU."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugin"))  # their helpers, whichever runs first

from pytester_project import add_kernel, project, rvtune_cache_dir  # noqa: F401  (fixtures)
