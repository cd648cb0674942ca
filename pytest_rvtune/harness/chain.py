"""The chain harness: several kernels launched one after the other in one ELF, each consuming buffers an earlier
launch wrote (their attention: transpose -> Q @ K^T -> softmax -> P @ V), generated from the recorded launches.

Unlike the one-kernel generic harness (generate.py), a chain's grids and scalars are part of the source: each
launch has its own, and they come from their Python launch code for one config (compat/chain_run.py), so the
harness object is per config. Files stay on the command line (targets substitute their own paths)::

    ELF [--warmup N] [--runs N] [--no-check] [--threads N] [--atol X] [--rtol X] FILE...

one FILE per "in" buffer (its input), per "out" buffer (its expected file), two per "inout" buffer, in the
order of the buffers. A "temp" buffer (an intermediate the launch function made with ``torch.empty`` /
``torch.zeros``) is allocated here with the size the recording saw, zeroed before every run like the outputs.
One run of the chain is ``<name>_wrap()``, a function of its own so that the counting plugin's launch window
(targets/local.py: ``<symbol>_wrap``) spans every launch of the chain. Every buffer lies between guard zones
(rvtune_harness.h), so a launch storing past a buffer's end is a check line naming that buffer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_rvtune.harness.generate import DTYPE_TOLERANCE, SCALAR_TYPES, TENSOR_DTYPES, HarnessError

_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

BufferRole = Literal["in", "out", "inout", "temp"]


@dataclass(frozen=True)
class Buffer:
    label: str  # their name for it: a parameter of the launch function or a local it made (Q, K_t, Output)
    ttype: str  # "*fp32"
    numel: int
    role: BufferRole
    expected: Path | None  # out/inout: the file it is checked against
    source: Path | None  # in/inout: the file it is read from


@dataclass(frozen=True)
class Arg:
    name: str  # the kernel's parameter
    ttype: str
    buffer: str | None = None  # a tensor: the buffer's label
    value: int | float | None = None  # a scalar


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Chain:
    name: str  # C identifier: <entry>_chain; <name>_wrap is one run of the chain
    buffers: tuple[Buffer, ...]
    launches: tuple[Launch, ...]

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(launch.kernel for launch in self.launches))


def _literal(arg: Arg) -> str:
    c_type = SCALAR_TYPES[arg.ttype][0]
    if arg.ttype in ("fp32", "fp64"):
        return f"({c_type}){float(arg.value or 0.0).hex()}"  # hex floats: exactly the recorded value
    return f"({c_type}){int(arg.value or 0)}LL"


def _validate(chain: Chain) -> None:
    if not _C_IDENT.fullmatch(chain.name):
        raise HarnessError(f"chain {chain.name!r}: not a valid C identifier")
    labels = {b.label for b in chain.buffers}
    if not any(b.role in ("out", "inout") for b in chain.buffers):
        raise HarnessError(f"chain {chain.name}: no output checked: nothing to compare")
    for b in chain.buffers:
        if not _C_IDENT.fullmatch(b.label) or b.ttype[1:] not in TENSOR_DTYPES:
            raise HarnessError(f"chain {chain.name}: buffer {b.label!r} ({b.ttype}) cannot be expressed")
    for launch in chain.launches:
        if not _C_IDENT.fullmatch(launch.kernel):
            raise HarnessError(f"chain {chain.name}: kernel {launch.kernel!r}: not a valid C identifier")
        for a in launch.args:
            if a.buffer is None and a.ttype not in SCALAR_TYPES:
                raise HarnessError(f"chain {chain.name}: {launch.kernel}'s {a.name}: scalar type {a.ttype!r} is "
                                   f"not supported (supported: {', '.join(SCALAR_TYPES)})")
            if a.buffer is not None and a.buffer not in labels:
                raise HarnessError(f"chain {chain.name}: {launch.kernel}'s {a.name}: no buffer {a.buffer!r}")


def usage(chain: Chain) -> str:
    words: list[str] = []
    for b in chain.buffers:
        if b.role in ("in", "inout"):
            words.append(f"{b.label}.txt")
        if b.role in ("out", "inout"):
            words.append(f"expected_{b.label}.txt")
    return " ".join(words)


def generate(chain: Chain) -> str:
    """C source of the chain harness."""
    _validate(chain)
    var = {b.label: f"buf{i}" for i, b in enumerate(chain.buffers)}
    decls, loads, resets, checks, guards = [], [], [], [], []
    pos = 0
    for b in chain.buffers:
        v, dtype = var[b.label], TENSOR_DTYPES[b.ttype[1:]]
        decls.append(f"static rvtune_tensor {v};")
        guards.append(f"        ok &= rvtune_check_guards(&{v});")
        if b.role in ("in", "inout"):
            loads.append(f'    rvtune_read_txt(&{v}, "{b.label}", o.pos[{pos}], {dtype});')
            loads.append(f"    rvtune_expect_numel(&{v}, {b.numel});")
            pos += 1
        if b.role in ("out", "inout"):
            decls.append(f"static rvtune_tensor {v}_expected;")
            loads.append(f'    rvtune_read_txt(&{v}_expected, "{b.label}", o.pos[{pos}], {dtype});')
            loads.append(f"    rvtune_expect_numel(&{v}_expected, {b.numel});")
            pos += 1
            loads.append(f"    rvtune_output_like(&{v}, &{v}_expected);" if b.role == "out"
                         else f"    rvtune_make_inout(&{v});")
            atol, rtol = "o.atol", "o.rtol"
            if b.ttype[1:] in DTYPE_TOLERANCE:
                least_atol, least_rtol = DTYPE_TOLERANCE[b.ttype[1:]]
                atol, rtol = f"fmax(o.atol, {least_atol!r})", f"fmax(o.rtol, {least_rtol!r})"
            checks.append(f'        ok &= rvtune_check("{b.label}", &{v}, &{v}_expected, {atol}, {rtol});')
        if b.role == "temp":
            loads.append(f'    rvtune_describe(&{v}, "{b.label}", "(an intermediate of the chain)", {dtype}, 1, '
                         f"{b.numel});")
            loads.append(f'    rvtune_alloc_guarded(&{v}, "{b.label}");')
        if b.role != "in":
            resets.append(f"&{v}")
    calls = []
    for launch in chain.launches:
        values = [f"{var[a.buffer]}.data" if a.buffer is not None else _literal(a) for a in launch.args]
        gx, gy, gz = launch.grid
        calls.append(f"    {launch.kernel}_wrap({gx}u, {gy}u, {gz}u, o.threads, {launch.kernel}, "
                     f"{', '.join(values)});")
    includes = "\n".join(f'#include "{k}_launcher.h"' for k in chain.kernels)
    return f"""/* Generated by pytest_rvtune.harness.chain for {chain.name}: do not edit.
   Launches: {' -> '.join(launch.kernel for launch in chain.launches)}
   Positional arguments: {usage(chain)} */
#include "rvtune_harness.h"
{includes}

static rvtune_opts o;
{chr(10).join(decls)}

/* one run of the chain: every launch in their launch order (the counting plugin's launch window) */
__attribute__((noinline)) void {chain.name}_wrap(void) {{
{chr(10).join(calls)}
}}

static void run_chain(void *ctx) {{
    (void)ctx;
    {chain.name}_wrap();
}}

int main(int argc, char **argv) {{
    o = rvtune_default_opts(1e-5, 1e-5);
    rvtune_parse_args(argc, argv, &o);
    rvtune_expect_positionals(&o, {pos}, "{usage(chain)}");
{chr(10).join(loads)}
    /* outputs and intermediates start from zeros in every run, as their torch.zeros / torch.empty buffers */
    rvtune_tensor *const resets[] = {{{", ".join(resets)}}};
    rvtune_bench(&o, run_chain, NULL, resets, {len(resets)});
    int ok = 1;
    if (o.check) {{
{chr(10).join(checks)}
{chr(10).join(guards)}
    }}
    return rvtune_exit_code(&o, ok);
}}
"""


def argv(chain: Chain, atol: float, rtol: float) -> list[str | Path]:
    """The chain harness's argv after the ELF (files as ``Path``: targets substitute their own paths)."""
    out: list[str | Path] = ["--atol", repr(float(atol)), "--rtol", repr(float(rtol))]
    for b in chain.buffers:
        if b.role in ("in", "inout") and b.source is not None:
            out.append(b.source)
        if b.role in ("out", "inout") and b.expected is not None:
            out.append(b.expected)
    return out


def checked(chain: Chain) -> Sequence[Buffer]:
    return [b for b in chain.buffers if b.role in ("out", "inout")]
