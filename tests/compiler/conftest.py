"""Shared setup of the compiler tests: ``difftest`` (the differential-test helper) is importable as a
top-level module from every test file here, with or without a package ``__init__.py``."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
