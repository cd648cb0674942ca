"""Fixtures of the plugin tests: a pytester project with tiny kernel modules, run with the real Triton
frontend, our compiler, clang-19 and QEMU.

Every kernel module here has a name no other test uses (golden data and builds of a kernel live in the shared
cache under its name), and the build cache is one directory for the whole session, shared by xdist workers,
so a module built by one test is a cache hit for the next.
"""

from __future__ import annotations

from pytester_project import add_kernel, project, rvtune_cache_dir  # noqa: F401  (fixtures)
