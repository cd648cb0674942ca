"""Optional features and the pip extra that brings each: a missing one is a clear error naming the extra.

``[boards]`` (asyncssh) for RISC-V boards over SSH, ``[labgrid]`` (labgrid, and asyncssh) for boards taken from a
labgrid coordinator's places, ``[plots]`` (matplotlib) for `rvtune report`'s PNGs. The kernel suite on QEMU or the
host, and every other command, need none of them.
"""

from __future__ import annotations


class MissingExtraError(ImportError):
    """An optional feature whose Python package is not installed; the message says which extra brings it."""


def missing_extra(package: str, extra: str, feature: str) -> MissingExtraError:
    """The error for ``feature`` when ``package`` cannot be imported (raise it ``from`` the ImportError)."""
    return MissingExtraError(f"{feature} need the Python package {package}, which is not installed: "
                             f"pip install 'pytest-rvtune[{extra}]'")
