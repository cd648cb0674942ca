"""pytest-rvtune: Triton kernel block configs as checked, timed pytest benchmarks on RISC-V."""

from pathlib import Path

__version__ = "0.1.0"

#: The installed package: files shipped with it (icount.c, runtime headers, harness sources) are found here.
PACKAGE_DIR = Path(__file__).resolve().parent
