"""pytest-rvtune: Triton kernel block configs as checked, timed pytest benchmarks on RISC-V."""

from pathlib import Path

__version__ = "0.1.0"

#: The repository (or installed tree) root: tools and caches live under ``<root>/.rvtune``.
PACKAGE_DIR = Path(__file__).resolve().parent
