"""Differential testing of the rvtune lowering against Triton's interpreter.

    outs = run_c_kernel(kernel, signature, constexprs, args, grid, isa="host")   # our TTIR -> C -> clang
    want = run_interpreter(kernel, args, grid, constexprs)                       # TRITON_INTERPRET semantics
    assert_match(outs, want)

``args`` are the kernel's non-constexpr arguments in order: numpy arrays for pointer parameters (bf16 as
uint16 bit patterns), Python ints/floats for scalars. Both runners return a copy of every array argument
after the launch, in order. ``run_c_kernels`` builds many launches in ONE C file and ONE compile: the host
build is a shared library called through ctypes, the rv64gcv build a static ELF with a tiny test main that
reads the arrays from a binary file and writes them back, run under qemu-riscv64.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pickle
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_rvtune.compiler.frontend import kernel_to_ttir
from pytest_rvtune.compiler.lower import RUNTIME_DIR, LoweredKernel, lower_ttir
from pytest_rvtune.compiler.lower_ops import float_literal
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain, qemu_command

Arg = np.ndarray | int | float
BUILD_DIR = Path(tempfile.gettempdir()) / "rvtune-difftest"


@dataclass
class KernelCall:
    fn: Any
    signature: dict[str, str]
    constexprs: dict[str, object]
    args: list[Arg]
    grid: tuple[int, ...]
    lowered: LoweredKernel | None = field(default=None, repr=False)


_lowered: dict[str, LoweredKernel] = {}


def lower_kernel(fn: Any, signature: dict[str, str], constexprs: dict[str, object]) -> LoweredKernel:
    """Triton frontend + our lowering, memoised per (kernel, signature, constexprs)."""
    key = f"{fn.fn.__module__}.{fn.__name__}|{sorted(signature.items())}|{sorted(constexprs.items())}"
    if key not in _lowered:
        _lowered[key] = lower_ttir(kernel_to_ttir(fn, signature, constexprs))
    return _lowered[key]


def _grid3(grid: Sequence[int]) -> tuple[int, int, int]:
    g = (*grid, 1, 1, 1)
    return g[0], g[1], g[2]


def _scalar_literal(value: int | float, triton_type: str) -> str:
    if triton_type in ("fp32", "fp64"):
        return float_literal(float(value), "f32" if triton_type == "fp32" else "f64")
    ctype = {"i1": "uint8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t"}[triton_type]
    return f"(({ctype}){int(value)}ll)"


def _driver_source(calls: list[KernelCall]) -> str:
    """One `rvtest_call<i>(void **arrays)` per launch: walks the grid (x fastest) with the scalars baked in."""
    out: list[str] = []
    symbols: dict[str, str] = {}  # kernel C source -> its symbol (one kernel, several signatures: renamed)
    for c in calls:
        assert c.lowered is not None
        if c.lowered.c_source not in symbols:
            symbol = c.lowered.name if c.lowered.name not in symbols.values() else f"{c.lowered.name}_{len(symbols)}"
            symbols[c.lowered.c_source] = symbol
            out.append(c.lowered.c_source.replace(f"void {c.lowered.name}(", f"void {symbol}("))
    for i, c in enumerate(calls):
        assert c.lowered is not None
        gx, gy, gz = _grid3(c.grid)
        args, k = [], 0
        for p, a in zip(c.lowered.params, c.args, strict=True):
            if p.triton_type.startswith("*"):
                args.append(f"({p.c_type})arrays[{k}]")
                k += 1
            else:
                args.append(_scalar_literal(a, p.triton_type))  # type: ignore[arg-type]
        out.append(f"void rvtest_call{i}(void **arrays) {{\n"
                   f"    for (int z = 0; z < {gz}; ++z) for (int y = 0; y < {gy}; ++y) for (int x = 0; x < {gx}; ++x)\n"
                   f"        {symbols[c.lowered.c_source]}({', '.join(args)}, x, y, z, {gx}, {gy}, {gz});\n}}\n")
    return "\n".join(out)


def _arrays(c: KernelCall) -> list[np.ndarray]:
    return [np.ascontiguousarray(a).copy() for a in c.args if isinstance(a, np.ndarray)]


def _main_source(calls: list[KernelCall], threaded: bool) -> str:
    """Test-only main for the ELF: read every array (call by call) from argv[1], run, write them to argv[2].

    ``threaded``: each launch runs in its own pthread created with default attributes (default stack)."""
    body = []
    for i, c in enumerate(calls):
        sizes = [a.nbytes for a in _arrays(c)]
        counts = ", ".join(map(str, sizes)) or "0"
        body.append(f"    {{ static const long n[] = {{{counts}}}; void *a[{len(sizes) or 1}];\n"
                    f"      for (int k = 0; k < {len(sizes)}; ++k) {{ a[k] = malloc(n[k] + 1);"
                    f" if (fread(a[k], 1, n[k], in) != (size_t)n[k]) return 2; }}\n"
                    + (f"      {{ pthread_t t; if (pthread_create(&t, NULL, rvtest_thread{i}, a)) return 3;"
                       " pthread_join(t, NULL); }\n" if threaded else f"      rvtest_call{i}(a);\n")
                    + f"      for (int k = 0; k < {len(sizes)}; ++k) fwrite(a[k], 1, n[k], out); }}")
    decls = "\n".join(f"void rvtest_call{i}(void **arrays);\n"
                      f"static void *rvtest_thread{i}(void *a) {{ rvtest_call{i}((void **)a); return NULL; }}"
                      for i in range(len(calls)))
    return ("#include <pthread.h>\n#include <stdio.h>\n#include <stdlib.h>\n" + decls
            + "\nint main(int argc, char **argv) {\n"
            "    if (argc != 3) return 2;\n    FILE *in = fopen(argv[1], \"rb\"), *out = fopen(argv[2], \"wb\");\n"
            "    if (!in || !out) return 2;\n" + "\n".join(body) + "\n    fclose(out);\n    return 0;\n}\n")


def _build(source: str, tc: Toolchain, extra_objects: list[Path], output: Path, shared: bool) -> None:
    obj = output.with_suffix(".o")
    src = output.with_suffix(".c")
    src.write_text(source)
    tc.compile(src, obj, extra=("-I", str(RUNTIME_DIR)))
    libs = ("-shared", "-lm") if shared else ("-lm", "-lpthread")
    tc.link([obj, *extra_objects], output, libs=libs)


def run_c_kernels(calls: list[KernelCall], isa: str = HOST_ISA, threaded: bool = False) -> list[list[np.ndarray]]:
    """Run every launch in ``calls`` from one compiled C file; the arrays of each launch after it ran.

    ``threaded``: every launch runs on a new thread with the default pthread stack (as in a launcher)."""
    for c in calls:
        c.lowered = c.lowered or lower_kernel(c.fn, c.signature, c.constexprs)
    source = _driver_source(calls)
    tc = Toolchain.for_isa(isa)
    runtime = "".join(p.read_text() for p in sorted(RUNTIME_DIR.glob("*.h")))
    key = hashlib.sha256((source + runtime + tc.fingerprint() + str(threaded)).encode()).hexdigest()[:16]
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    results = [_arrays(c) for c in calls]
    if isa == HOST_ISA:
        lib_path = BUILD_DIR / f"k{key}.so"
        if not lib_path.exists():
            _build(source, tc, [], lib_path, shared=True)
        lib = ctypes.CDLL(str(lib_path))
        for i, arrays in enumerate(results):
            ptrs = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
            call = getattr(lib, f"rvtest_call{i}")
            if threaded:  # a Python thread is a pthread with the default stack size
                worker = threading.Thread(target=call, args=(ptrs,))
                worker.start()
                worker.join()
            else:
                call(ptrs)
        return results
    if isa != RISCV_ISA:
        raise ValueError(f"unknown ISA {isa!r}")
    elf = BUILD_DIR / f"k{key}.rv"
    if not elf.exists():
        main_obj = BUILD_DIR / f"m{key}.o"
        (BUILD_DIR / f"m{key}.c").write_text(_main_source(calls, threaded))
        tc.compile(BUILD_DIR / f"m{key}.c", main_obj)
        _build(source, tc, [main_obj], elf, shared=False)
    with tempfile.TemporaryDirectory() as tmp:
        inp, outp = Path(tmp) / "in.bin", Path(tmp) / "out.bin"
        inp.write_bytes(b"".join(a.tobytes() for arrays in results for a in arrays))
        proc = subprocess.run([*qemu_command(), str(elf), str(inp), str(outp)], capture_output=True,
                              text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{elf} under QEMU exited {proc.returncode}: {proc.stderr[-2000:]}")
        data, pos = outp.read_bytes(), 0
    for arrays in results:
        for a in arrays:
            a[...] = np.frombuffer(data, dtype=a.dtype, count=a.size, offset=pos).reshape(a.shape)
            pos += a.nbytes
    return results


def run_c_kernel(fn: Any, signature: dict[str, str], constexprs: dict[str, object], args: list[Arg],
                 grid: tuple[int, ...], isa: str = HOST_ISA) -> list[np.ndarray]:
    return run_c_kernels([KernelCall(fn, signature, constexprs, args, grid)], isa)[0]


def run_interpreter(fn: Any, args: list[Arg], grid: tuple[int, ...], constexprs: dict[str, object],
                    signature: dict[str, str] | None = None) -> list[np.ndarray]:
    """Triton's interpreter on copies of ``args``: the array arguments after the launch."""
    return run_interpreter_many([KernelCall(fn, signature or {}, constexprs, args, grid)])[0]


def run_interpreter_many(calls: list[KernelCall]) -> list[list[np.ndarray]]:
    """Several interpreter launches in ONE child process with TRITON_INTERPRET=1.

    Triton decides at import time whether ``@triton.jit`` (its own ``tl.zeros``, ``tl.cdiv``... included)
    makes interpretable functions, so the clean oracle is a fresh interpreter process (~2-3 s to start,
    hence the batching). Kernels must be module-level functions of an importable file. ``signature``
    entries ``*bf16`` mark uint16 arrays that hold bf16 bit patterns.
    """
    jobs = []
    for c in calls:
        code = c.fn.fn.__code__
        jobs.append({"file": code.co_filename, "module": c.fn.fn.__module__, "name": c.fn.__name__,
                     "args": c.args, "grid": tuple(c.grid),
                     "constexprs": c.constexprs, "signature": c.signature,
                     "arg_names": [n for n in c.fn.arg_names if n not in c.constexprs]})
    with tempfile.TemporaryDirectory(prefix="rvtune-interp-") as tmp:
        job, result = Path(tmp) / "job.pkl", Path(tmp) / "result.pkl"
        job.write_bytes(pickle.dumps({"sys_path": list(sys.path), "jobs": jobs}))
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        proc = subprocess.run([sys.executable, __file__, str(job), str(result)], env=env, capture_output=True,
                              text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"interpreter child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return pickle.loads(result.read_bytes())


def _interpret_main(job_path: str, result_path: str) -> None:
    """Child side of run_interpreter_many (TRITON_INTERPRET=1 is set before triton is imported)."""
    import importlib
    import importlib.util

    import torch

    modules: dict[str, Any] = {}
    results = []
    request = pickle.loads(Path(job_path).read_bytes())
    sys.path[:0] = [p for p in request["sys_path"] if p not in sys.path]
    for job in request["jobs"]:
        if job["file"] not in modules:
            if job["module"] not in ("__main__", "") and importlib.util.find_spec(job["module"]) is not None:
                modules[job["file"]] = importlib.import_module(job["module"])  # relative imports work
            else:
                spec = importlib.util.spec_from_file_location(f"rvtune_interp_{len(modules)}", job["file"])
                assert spec is not None and spec.loader is not None
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                modules[job["file"]] = mod
        kernel = getattr(modules[job["file"]], job["name"])
        tensors: list[Any] = []
        for name, a in zip(job["arg_names"], job["args"], strict=True):
            if isinstance(a, np.ndarray):
                t = torch.from_numpy(np.ascontiguousarray(a).copy())
                if job["signature"].get(name) == "*bf16":
                    t = t.view(torch.int16).view(torch.bfloat16)
                tensors.append(t)
            else:
                tensors.append(a)
        kernel[job["grid"]](*tensors, **job["constexprs"])
        results.append([t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()
                        for t in tensors if isinstance(t, torch.Tensor)])
    Path(result_path).write_bytes(pickle.dumps(results))


def run_and_match(launches: dict[str, KernelCall], expected: list[list[np.ndarray]], isa: str, *, rtol: float,
                  atol: float) -> list[list[np.ndarray]]:
    """Every named launch compiled for ``isa`` and run (run_c_kernels), each checked against ``expected`` (the
    interpreter's arrays, in the same order) by assert_match; the arrays, for checks of their own."""
    got = run_c_kernels(list(launches.values()), isa)
    for name, g, w in zip(launches, got, expected, strict=True):
        assert_match(g, w, what=f"{name} on {isa}", rtol=rtol, atol=atol)
    return got


def assert_match(got: list[np.ndarray], want: list[np.ndarray], *, rtol: float = 1e-5, atol: float = 1e-6,
                 what: str = "") -> None:
    """Integers bit-exact; floats NaN-aware (NaN only where NaN, infinities equal) within rtol/atol."""
    assert len(got) == len(want), f"{what}: {len(got)} arrays vs {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        label = f"{what} array {k}"
        assert g.shape == w.shape, f"{label}: shape {g.shape} != {w.shape}"
        if np.issubdtype(g.dtype, np.floating):
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            nan_g, nan_w = np.isnan(g64), np.isnan(w64)
            assert (nan_g == nan_w).all(), f"{label}: NaN mismatch at {np.argwhere(nan_g != nan_w)[:5].tolist()}"
            ok = np.isclose(g64, w64, rtol=rtol, atol=atol) | nan_g
            if not ok.all():
                i = np.argwhere(~ok)[:5].tolist()
                raise AssertionError(f"{label}: {int((~ok).sum())} mismatches, first at {i}: "
                                     f"got {g[tuple(i[0])]}, want {w[tuple(i[0])]}")
        else:
            diff = g.view(np.uint8) != w.view(np.uint8) if g.dtype == w.dtype else np.ones(1, bool)
            if diff.any():
                bad = np.argwhere(g != w)[:5].tolist()
                raise AssertionError(f"{label}: {int((g != w).sum())} mismatches, first at {bad}: "
                                     f"got {g[tuple(bad[0])] if bad else g.dtype}, "
                                     f"want {w[tuple(bad[0])] if bad else w.dtype}")


if __name__ == "__main__":
    _interpret_main(sys.argv[1], sys.argv[2])
