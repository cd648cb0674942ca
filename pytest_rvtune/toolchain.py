"""Compilers, flags and emulator command per target ISA.

Two ISAs exist: ``rv64gcv_zvl256b`` (cross-built with clang-19, run on QEMU or a board) and ``host``.
Everything that changes an object file is in ``Toolchain.fingerprint()`` so caches key on it.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

RISCV_ISA = "rv64gcv_zvl256b"
HOST_ISA = "host"
ISAS = (RISCV_ISA, HOST_ISA)

#: VLEN the RISC-V build assumes (zvl256b). QEMU must emulate exactly this: a zvl256b binary under a
#: smaller VLEN computes wrong answers instead of trapping.
RISCV_VLEN = 256

QEMU_CPU = f"rv64,v=true,vlen={RISCV_VLEN},vext_spec=v1.0,Zfh=true"


class ToolchainError(RuntimeError):
    pass


#: The Debian package that provides each external tool we run.
DEBIAN_PACKAGES = {
    "clang-19": "clang-19", "clang++-19": "clang-19", "ld.lld-19": "lld-19", "llvm-objdump-19": "llvm-19",
    "llvm-nm-19": "llvm-19", "qemu-riscv64": "qemu-user", "riscv64-linux-gnu-gcc": "g++-riscv64-linux-gnu",
    "sshd": "openssh-server", "perf": "linux-perf",
}


def install_hint(tool: str) -> str:
    """How to get ``tool``: its Debian package (a checkout's `make setup` installs them all)."""
    package = DEBIAN_PACKAGES.get(tool, tool)
    return f"install it with `apt-get install {package}` (a pytest-rvtune checkout's `make setup` installs all)"


def find_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolchainError(f"{name} not found on PATH: {install_hint(name)}")
    return path


@functools.cache
def tool_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else "unknown"


@dataclass(frozen=True)
class Toolchain:
    isa: str
    cc: str
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    objdump: str

    @classmethod
    def for_isa(cls, isa: str) -> Toolchain:
        if isa not in ISAS:
            raise ToolchainError(f"unknown ISA {isa!r}: expected one of {', '.join(ISAS)}")
        cc = find_tool("clang-19")
        objdump = find_tool("llvm-objdump-19")
        common = ("-O3", "-fno-math-errno", "-fPIC")
        if isa == RISCV_ISA:
            return cls(
                isa=isa,
                cc=cc,
                cflags=(
                    "--target=riscv64-linux-gnu",
                    f"-march={RISCV_ISA}",
                    "-mrvv-vector-bits=zvl",
                    *common,
                ),
                ldflags=("--target=riscv64-linux-gnu", "-static", "-fuse-ld=lld"),
                objdump=objdump,
            )
        return cls(isa=isa, cc=cc, cflags=("-march=native", *common), ldflags=("-fuse-ld=lld",),
                   objdump=objdump)

    def fingerprint(self) -> str:
        """A hash of everything about this toolchain that can change an object (for cache keys)."""
        text = "\n".join([self.isa, tool_version(self.cc), *self.cflags, *self.ldflags])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def compile(self, source: Path, output: Path, extra: tuple[str, ...] = ()) -> None:
        """C source -> object file. Raises ToolchainError with clang's message on failure."""
        self._run([self.cc, *self.cflags, *extra, "-c", str(source), "-o", str(output)], source)

    def link(self, objects: list[Path], output: Path, libs: tuple[str, ...] = ("-lm", "-lpthread")) -> None:
        self._run([self.cc, *self.ldflags, *map(str, objects), "-o", str(output), *libs], output)

    def disassemble(self, elf: Path) -> str:
        out = subprocess.run([self.objdump, "-d", "--no-show-raw-insn", str(elf)],
                             capture_output=True, text=True, check=True)
        return out.stdout

    @staticmethod
    def _run(cmd: list[str], what: Path) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ToolchainError(f"building {what} failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")


def qemu_command() -> list[str]:
    return [find_tool("qemu-riscv64"), "-cpu", QEMU_CPU]
