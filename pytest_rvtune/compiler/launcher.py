"""Launcher C around a lowered kernel: the grid wrapper, the per-config block constants and their header.

Three generated files per kernel (docs/contracts.md, "Kernel C ABI"):

- ``<name>_launcher.h``: the kernel prototype, its function-pointer type, ``<name>_wrap`` and one
  ``extern const int <name>_<CONSTEXPR>`` per integer/bool constexpr. It depends only on the kernel's
  parameters and constexpr names, never on their values, so a harness compiled once against it links with
  any config.
- ``<name>_launcher.c``: ``<name>_wrap(gridX, gridY, gridZ, num_threads, kernel_ptr, args...)``, which walks
  the grid x fastest, serially or on pthreads (no OpenMP: Debian has no riscv64 libomp for clang).
- ``<name>_consts.c`` (one per config): the constant definitions, a tiny object so switching configs
  recompiles nothing else; and ``blk_constants.json`` beside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: Program ids and grid sizes the kernel ABI appends after the kernel's own arguments.
PID_PARAMS = ("int32_t pid_x", "int32_t pid_y", "int32_t pid_z",
              "uint32_t grid_x", "uint32_t grid_y", "uint32_t grid_z")

#: Parameter names of the generated wrapper; kernel parameters with these names are renamed in the wrapper.
_RESERVED = {"gridX", "gridY", "gridZ", "num_threads", "kernel_ptr"}

_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The const int the C side reads must fit an int32.
_INT32 = (-(2**31), 2**31 - 1)


class LauncherError(ValueError):
    """A kernel or config that cannot be expressed in the launcher C (names the kernel and the value)."""


class KernelParam(Protocol):
    """What the launcher needs of emitter.Param (read-only: Param is frozen)."""

    @property
    def name(self) -> str: ...

    @property
    def c_type(self) -> str: ...


@dataclass(frozen=True)
class LauncherSources:
    header_name: str
    header: str
    launcher_name: str
    launcher_c: str


def header_name(kernel_name: str) -> str:
    return f"{kernel_name}_launcher.h"


def _check_ident(kernel_name: str, what: str, name: str) -> None:
    if not _C_IDENT.fullmatch(name):
        raise LauncherError(f"kernel {kernel_name}: {what} {name!r} is not a valid C identifier")


def _plain_type(c_type: str) -> str:
    """The parameter type without a top-level ``restrict``: prototypes stay compatible (top-level
    qualifiers are ignored there) and the header also compiles as C++, which has no ``restrict``."""
    return re.sub(r"\b(__)?restrict(__)?\b", "", c_type).strip()


def _decl(c_type: str, name: str) -> str:
    c_type = _plain_type(c_type)
    return f"{c_type}{name}" if c_type.endswith("*") else f"{c_type} {name}"


def int_constexprs(kernel_name: str, constexprs: Mapping[str, Any]) -> dict[str, int]:
    """The constexprs that reach C as ``const int``: integers, and bools as 0/1. Others (floats, strings,
    dtypes) are baked into the kernel by the frontend and have no C symbol."""
    out: dict[str, int] = {}
    for name, value in constexprs.items():
        if isinstance(value, bool):
            out[name] = int(value)
        elif isinstance(value, int):
            if not _INT32[0] <= value <= _INT32[1]:
                raise LauncherError(
                    f"kernel {kernel_name}: constexpr {name}={value} does not fit the C `const int`; "
                    "use a value within int32")
            out[name] = value
        else:
            continue
        _check_ident(kernel_name, "constexpr", name)
    return out


def _wrap_names(params: Sequence[KernelParam]) -> list[str]:
    # The wrapper's own locals all start with rv_; renaming is invisible to callers (C has positional args).
    return [f"{p.name}_arg" if p.name in _RESERVED or p.name.startswith("rv_") else p.name for p in params]


def _signature(kernel_name: str, params: Sequence[KernelParam]) -> tuple[str, str, str]:
    """(kernel params decl, fn-pointer type decl, wrap params decl)."""
    for p in params:
        _check_ident(kernel_name, "parameter", p.name)
    kernel_params = ", ".join([*(_decl(p.c_type, p.name) for p in params), *PID_PARAMS])
    fn_type = f"typedef void (*{kernel_name}_fn_t)({kernel_params});"
    wrap_args = [_decl(p.c_type, n) for p, n in zip(params, _wrap_names(params), strict=True)]
    wrap_params = ", ".join(["uint32_t gridX", "uint32_t gridY", "uint32_t gridZ", "int num_threads",
                             f"{kernel_name}_fn_t kernel_ptr", *wrap_args])
    return kernel_params, fn_type, wrap_params


def launcher_sources(kernel_name: str, params: Sequence[KernelParam],
                     constexpr_names: Sequence[str]) -> LauncherSources:
    """Header and wrapper C for a kernel (config-independent: constexpr names only, never values)."""
    _check_ident(kernel_name, "kernel name", kernel_name)
    for name in constexpr_names:
        _check_ident(kernel_name, "constexpr", name)
    kernel_params, fn_type, wrap_params = _signature(kernel_name, params)
    guard = f"RVTUNE_{kernel_name.upper()}_LAUNCHER_H"
    consts = "\n".join(f"extern const int {kernel_name}_{c};" for c in constexpr_names)
    header = f"""/* Generated by pytest_rvtune.compiler.launcher for {kernel_name}: do not edit. */
#ifndef {guard}
#define {guard}
#include <stdint.h>
#ifdef __cplusplus
extern "C" {{
#endif

{fn_type}

/* The kernel: its own arguments, then the program id and the grid size (triton-cpu's ABI). */
void {kernel_name}({kernel_params});

/* Runs every program of the grid, x fastest. num_threads: 1 = serial on the calling thread,
   N = N pthreads, 0 = one per online hart. */
void {kernel_name}_wrap({wrap_params});

/* Block constants of the config linked in (defined in {kernel_name}_consts.c, one object per config). */
{consts}

#ifdef __cplusplus
}}
#endif
#endif
"""
    names = _wrap_names(params)
    fields = "\n".join(f"  {_decl(p.c_type, n)};" for p, n in zip(params, names, strict=True))
    from_job = "".join(f"job->{n}, " for n in names)
    to_job = "".join(f"  rv_job.{n} = {n};\n" for n in names)
    direct = "".join(f"{n}, " for n in names)
    launcher_c = f"""/* Generated by pytest_rvtune.compiler.launcher for {kernel_name}: do not edit. */
#include "{header_name(kernel_name)}"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Worker threads get an explicit 16 MB stack: a lowered kernel keeps its tiles (e.g. a 128x128 fp32
   accumulator is 64 KB, and several tiles are live at once) in local arrays, while the default thread
   stack differs by libc and board (glibc: RLIMIT_STACK, often 8 MB; musl: 128 KB). */
#define RVTUNE_THREAD_STACK ((size_t)16 << 20)

typedef struct {{
  {kernel_name}_fn_t kernel;
  uint32_t grid_x, grid_y, grid_z;
  uint64_t total;
  uint64_t next; /* next linear program id, claimed with an atomic add (dynamic balance: MoE programs
                    that return early cost nothing, so static slices would leave threads idle) */
{fields}
}} {kernel_name}_job_t;

static void {kernel_name}_run_one(const {kernel_name}_job_t *job, uint64_t i) {{
  /* x fastest, like the serial loop and triton-cpu's launcher */
  uint32_t x = (uint32_t)(i % job->grid_x);
  uint32_t y = (uint32_t)((i / job->grid_x) % job->grid_y);
  uint32_t z = (uint32_t)(i / ((uint64_t)job->grid_x * job->grid_y));
  job->kernel({from_job}(int32_t)x, (int32_t)y, (int32_t)z, job->grid_x, job->grid_y, job->grid_z);
}}

static void *{kernel_name}_worker(void *arg) {{
  {kernel_name}_job_t *job = ({kernel_name}_job_t *)arg;
  for (;;) {{
    uint64_t i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
    if (i >= job->total) return NULL;
    {kernel_name}_run_one(job, i);
  }}
}}

void {kernel_name}_wrap({wrap_params}) {{
  uint64_t rv_total = (uint64_t)gridX * gridY * gridZ;
  if (rv_total == 0) return;
  if (num_threads < 0) {{
    fprintf(stderr, "{kernel_name}_wrap: num_threads=%d is negative (0 = all harts, 1 = serial)\\n",
            num_threads);
    abort();
  }}
  if (num_threads == 0) {{
    long rv_harts = sysconf(_SC_NPROCESSORS_ONLN);
    num_threads = rv_harts > 0 ? (int)rv_harts : 1;
  }}
  if ((uint64_t)num_threads > rv_total) num_threads = (int)rv_total;
  if (num_threads == 1) {{
    for (uint32_t rv_z = 0; rv_z < gridZ; ++rv_z)
      for (uint32_t rv_y = 0; rv_y < gridY; ++rv_y)
        for (uint32_t rv_x = 0; rv_x < gridX; ++rv_x)
          kernel_ptr({direct}(int32_t)rv_x, (int32_t)rv_y, (int32_t)rv_z, gridX, gridY, gridZ);
    return;
  }}

  {kernel_name}_job_t rv_job;
  rv_job.kernel = kernel_ptr;
  rv_job.grid_x = gridX;
  rv_job.grid_y = gridY;
  rv_job.grid_z = gridZ;
  rv_job.total = rv_total;
  rv_job.next = 0;
{to_job}
  pthread_attr_t rv_attr;
  pthread_attr_init(&rv_attr);
  pthread_attr_setstacksize(&rv_attr, RVTUNE_THREAD_STACK);
  pthread_t *rv_threads = (pthread_t *)calloc((size_t)num_threads, sizeof(pthread_t));
  int rv_started = 0;
  for (; rv_threads != NULL && rv_started < num_threads; ++rv_started) {{
    if (pthread_create(&rv_threads[rv_started], &rv_attr, {kernel_name}_worker, &rv_job) != 0) {{
      fprintf(stderr, "{kernel_name}_wrap: could only start %d of %d threads\\n", rv_started, num_threads);
      break;
    }}
  }}
  pthread_attr_destroy(&rv_attr);
  /* Threads that could not start: the calling thread finishes the grid (a slower run beats a lost one). */
  if (rv_started < num_threads) {kernel_name}_worker(&rv_job);
  for (int rv_t = 0; rv_t < rv_started; ++rv_t) pthread_join(rv_threads[rv_t], NULL);
  free(rv_threads);
}}
"""
    return LauncherSources(header_name(kernel_name), header, f"{kernel_name}_launcher.c", launcher_c)


def consts_source(kernel_name: str, constexprs: Mapping[str, Any]) -> str:
    """``const int <name>_<CONSTEXPR> = <value>;`` for one config (C: file-scope const has external linkage)."""
    values = int_constexprs(kernel_name, constexprs)
    lines = "\n".join(f"const int {kernel_name}_{k} = {v};" for k, v in values.items())
    config = ", ".join(f"{k}={v}" for k, v in values.items())
    return f"/* Block constants of {kernel_name} for {config or 'no integer constexprs'}. */\n{lines}\n"


def blk_constants_json(kernel_name: str, constexprs: Mapping[str, Any]) -> str:
    """blk_constants.json of one config: ``{CONSTEXPR: int}`` (the seeds' per-config file)."""
    return json.dumps(int_constexprs(kernel_name, constexprs), indent=2, sort_keys=True) + "\n"
