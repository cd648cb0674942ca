"""Shared setup of the harness tests: ``ext_kernels`` (the kernels our test harnesses call) is importable as a
top-level module from every test file here."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
