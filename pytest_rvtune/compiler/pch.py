"""A precompiled header (PCH) of the runtime headers every generated kernel C starts with.

Parsing rvtune_rt.h, rvtune_dot.h and the system headers they pull in (math.h, string.h, riscv_vector.h) was
about a third of clang's CPU time on one kernel (0.12 of 0.35 s for a matmul config, the rest is optimisation
and code generation), paid again by every config. With ``-include-pch`` clang loads them parsed. The object is
byte for byte the same (tests/compiler/test_pch.py compares them): clang places the PCH's declarations before
the kernel's first line, and the kernel's own ``#include`` lines of the same guarded headers then add nothing.

- Used only when the kernel C begins (after comment lines) with exactly the include lines of
  ``runtime/rvtune_kernel_prelude.h``; any other text compiles as before.
- The PCH is an entry of the build cache (so concurrent xdist workers make it once), keyed by the compiler, every
  flag, and the path, size and modification time of every header it is made from (``clang -M``, once per
  process): clang refuses a PCH whose inputs changed, and a changed header gives a new key, hence a new PCH.
- Should clang still refuse it, or making it fail, the kernel compiles without it (and a broken header then
  fails with clang's usual message about the header, not about a PCH).
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.toolchain import Toolchain, ToolchainError

#: The header the PCH is made from, in the runtime directory (its path is recorded in the PCH, so it must stay).
PRELUDE_NAME = "rvtune_kernel_prelude.h"

#: Bump when the way the PCH is made or used changes.
PCH_VERSION = "1"


def include_lines(text: str) -> list[str]:
    """The ``#include`` lines of a header, in order."""
    return [ln.strip() for ln in text.splitlines() if ln.lstrip().startswith("#include")]


def starts_with_prelude(c_source: str, prelude_text: str) -> bool:
    """Whether the C text's first lines that are not comments or blank are exactly the prelude's includes, so
    that loading the PCH before line 1 changes nothing."""
    wanted = include_lines(prelude_text)
    if not wanted:
        return False
    lines = iter(c_source.splitlines())
    for line in lines:
        stripped = line.strip()
        if not stripped or (stripped.startswith("/*") and stripped.endswith("*/")) or stripped.startswith("//"):
            continue
        head = [stripped, *(next(lines, "").strip() for _ in wanted[1:])]
        return head == wanted
    return False


def _compile_args(tc: Toolchain, flags: Sequence[str]) -> list[str]:
    return [tc.cc, *tc.cflags, *flags, "-x", "c-header"]


@functools.cache
def _inputs_fingerprint(args: tuple[str, ...], prelude: Path) -> tuple[tuple[str, int, int], ...]:
    """(path, size, mtime_ns) of the prelude and every header it includes, as clang resolves them with these
    flags: what clang checks before it trusts a PCH."""
    proc = subprocess.run([*args, "-M", str(prelude)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolchainError(f"listing the headers of {prelude} failed:\n{proc.stderr.strip()}")
    rule = proc.stdout.replace("\\\n", " ")
    paths = shlex.split(rule.split(":", 1)[1]) if ":" in rule else []
    out = []
    for p in dict.fromkeys(paths):
        st = os.stat(p)
        out.append((os.path.realpath(p), st.st_size, st.st_mtime_ns))
    return tuple(out)


def prelude_pch(cache: BuildCache, tc: Toolchain, flags: Sequence[str], runtime_dir: Path) -> Path | None:
    """The PCH of the prelude for this toolchain and these extra flags (made on first use), or None when it
    cannot be made (the kernel then compiles without one)."""
    prelude = runtime_dir / PRELUDE_NAME
    args = tuple(_compile_args(tc, flags))
    try:
        inputs = _inputs_fingerprint(args, prelude)
    except (OSError, ToolchainError):
        return None
    key = cache_key(kind="pch", version=PCH_VERSION, args=args, toolchain=tc.fingerprint(), inputs=inputs)

    def build(tmp: Path) -> None:
        subprocess.run([*args, str(prelude), "-o", str(tmp / "prelude.pch")], capture_output=True, check=True)

    try:
        entry, _ = cache.get_or_build("pch", key, build)
    except (OSError, subprocess.CalledProcessError):
        return None
    return entry / "prelude.pch"


def compile_kernel_c(cache: BuildCache, tc: Toolchain, source: Path, output: Path, flags: tuple[str, ...],
                     runtime_dir: Path) -> None:
    """Compile generated kernel C with the prelude's PCH when the text starts with the prelude, else as is;
    raises ToolchainError with clang's message (of the compile without PCH) on failure."""
    prelude = runtime_dir / PRELUDE_NAME
    pch = None
    if prelude.is_file() and starts_with_prelude(source.read_text(), prelude.read_text()):
        pch = prelude_pch(cache, tc, flags, runtime_dir)
    if pch is not None:
        try:
            tc.compile(source, output, extra=(*flags, "-include-pch", str(pch)))
            return
        except ToolchainError:
            pass  # a PCH clang will not take, or an error in the kernel: the compile below says which
    tc.compile(source, output, extra=flags)
