"""The C side of a run: ``rvtune_harness.h`` (support header) and the generic harness generator."""

from pathlib import Path

#: Directory holding rvtune_harness.h (an include path for every harness compile).
HEADER_DIR = Path(__file__).resolve().parent
HEADER = HEADER_DIR / "rvtune_harness.h"
