"""The generic C harness: generated from a kernel's launch description, so a new kernel needs no C.

The generated ``main`` stands on ``rvtune_harness.h`` and the compiler's ``<symbol>_launcher.h``. It depends
only on the kernel's parameter types and on which tensors it writes, never on sizes, scalar values, grid
or block config: those come on the command line, so one harness object serves every config and case.

Command line of a generic harness (docs/contracts.md, "Harness")::

    ELF [--warmup N] [--runs N] [--no-check] [--threads N] [--atol X] [--rtol X] --grid X,Y,Z ARG...

with one or two ARG per kernel parameter, in the kernel's order:

    role "scalar": its value               role "in":    the input FILE
    role "out":    the expected FILE        role "inout": the input FILE, then the expected FILE
    role "alias":  nothing: the buffer of the earlier tensor parameter with the same label (a tensor passed
                   twice, as Liger's RMSNorm backward passes dY as dY and as dX to update it in place)

An "out" buffer is zeroed and an "inout" buffer restored from its input before every run, then checked
against its expected file after the last one, with --atol/--rtol; an fp16 or bf16 output with at least
torch.testing's default tolerance for its dtype (DTYPE_TOLERANCE).

Out-of-bounds stores: every tensor the kernel gets (in, out and inout) lies between two guard zones of
canaries (rvtune_harness.h, "guard zones": 4096 bytes a side, at least 512 elements of any dtype); after the
last launch a zone the kernel wrote into is a `RVTUNE check <label>:before|after bad ...` line (count = the
elements overwritten), so the item is a wrong answer naming the buffer and the side. Reads past a buffer's
end are not detected: they read canaries (or other heap memory) without faulting, and catching them would
take a protected page per buffer.

fp16 and bf16 buffers hold uint16_t bit patterns, as the compiler's runtime (compiler/runtime/rvtune_rt.h)
does: the kernel ABI takes them as uint16_t pointers, so the rv64 build needs no Zfh and the host no _Float16.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Role = Literal["in", "out", "inout", "scalar", "alias"]
ROLES: tuple[str, ...] = ("in", "out", "inout", "scalar", "alias")

#: Pointer element type (Triton spelling) -> the harness dtype the golden file is read as.
TENSOR_DTYPES: dict[str, str] = {
    "fp32": "RVTUNE_F32", "fp64": "RVTUNE_F64", "fp16": "RVTUNE_F16", "bf16": "RVTUNE_BF16",
    "i8": "RVTUNE_I8", "i16": "RVTUNE_I16", "i32": "RVTUNE_I32", "i64": "RVTUNE_I64",
    "u8": "RVTUNE_U8", "i1": "RVTUNE_U8",
}

#: The least tolerance an output of these dtypes is checked with: torch.testing.assert_close's defaults for
#: them. The expected values are a float64 reference rounded to the output's dtype, and a correct kernel that
#: accumulates in fp32 in another order can land one rounding step away (up to 2**-10 relative for fp16, 2**-7
#: for bf16): a tighter tolerance, e.g. the default TOLERANCE (1e-4, 1e-4) of a module that gives none, would
#: fail correct kernels. A looser --atol/--rtol applies as given; fp32 and fp64 outputs always use it as given.
DTYPE_TOLERANCE: dict[str, tuple[float, float]] = {"fp16": (1e-5, 1e-3), "bf16": (1e-5, 1.6e-2)}  # (atol, rtol)

#: Scalar Triton type -> (C type, how the harness parses the argv token into it).
SCALAR_TYPES: dict[str, tuple[str, str]] = {
    "i1": ("int8_t", "rvtune_parse_ll({tok}, {what}, 0, 1)"),
    "i8": ("int8_t", "rvtune_parse_ll({tok}, {what}, INT8_MIN, INT8_MAX)"),
    "i16": ("int16_t", "rvtune_parse_ll({tok}, {what}, INT16_MIN, INT16_MAX)"),
    "i32": ("int32_t", "rvtune_parse_ll({tok}, {what}, INT32_MIN, INT32_MAX)"),
    "i64": ("int64_t", "rvtune_parse_ll({tok}, {what}, INT64_MIN, INT64_MAX)"),
    "u32": ("uint32_t", "rvtune_parse_ll({tok}, {what}, 0, UINT32_MAX)"),
    "fp32": ("float", "rvtune_parse_double({tok}, {what})"),
    "fp64": ("double", "rvtune_parse_double({tok}, {what})"),
}

_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class HarnessError(ValueError):
    """A launch description the generic harness cannot express (names the kernel and the parameter)."""


@dataclass(frozen=True)
class HarnessArg:
    """One non-constexpr kernel parameter as the harness sees it."""

    name: str   # the kernel's parameter name, e.g. "a_ptr"
    ttype: str  # Triton type: "*fp32", "i32", "fp32", ...
    role: Role  # "scalar" for non-pointers; for tensors whether the kernel reads and/or writes it
    label: str = ""  # the tensor's name in check lines and messages, e.g. "c" (default: name)

    @property
    def shown(self) -> str:
        return self.label or self.name

    @property
    def is_tensor(self) -> bool:
        return self.ttype.startswith("*")


def _validate(symbol: str, args: Sequence[HarnessArg]) -> None:
    if not _C_IDENT.fullmatch(symbol):
        raise HarnessError(f"kernel {symbol!r}: not a valid C identifier")
    if not any(a.role in ("out", "inout") for a in args):
        raise HarnessError(f"kernel {symbol}: no output tensor (role out/inout): nothing to check")
    for i, a in enumerate(args):
        where = f"kernel {symbol}, parameter {a.name!r}"
        if not _C_IDENT.fullmatch(a.name):
            raise HarnessError(f"{where}: not a valid C identifier")
        if a.role not in ROLES:
            raise HarnessError(f"{where}: role {a.role!r} is not one of {', '.join(ROLES)}")
        if a.is_tensor:
            if a.ttype[1:] not in TENSOR_DTYPES:
                raise HarnessError(f"{where}: pointer type {a.ttype!r} is not supported "
                                   f"(supported: {', '.join('*' + t for t in TENSOR_DTYPES)})")
            if a.role == "scalar":
                raise HarnessError(f"{where}: a pointer ({a.ttype}) cannot have role 'scalar'")
        else:
            if a.ttype not in SCALAR_TYPES:
                raise HarnessError(f"{where}: scalar type {a.ttype!r} is not supported "
                                   f"(supported: {', '.join(SCALAR_TYPES)})")
            if a.role != "scalar":
                raise HarnessError(f"{where}: a scalar ({a.ttype}) must have role 'scalar', not {a.role!r}")
        if a.role == "alias" and not any(b.is_tensor and b.role != "alias" and b.shown == a.shown and b.ttype == a.ttype
                                         for b in args[:i]):
            raise HarnessError(f"{where}: an alias of tensor {a.shown!r} needs an earlier {a.ttype} parameter "
                               "holding that tensor")
        if any(c in '"\\:' or c.isspace() for c in a.shown):  # ':' separates a guard zone's side
            raise HarnessError(f"{where}: label {a.shown!r} must not contain quotes, backslashes, colons or "
                               "spaces")


def usage(args: Sequence[HarnessArg]) -> str:
    """The positional arguments in order, as a human reads them in an error message."""
    words: list[str] = []
    for a in args:
        if a.role == "alias":
            continue
        if a.role == "scalar":
            words.append(a.name)
        elif a.role == "in":
            words.append(f"{a.shown}.txt")
        elif a.role == "out":
            words.append(f"expected_{a.shown}.txt")
        else:
            words += [f"{a.shown}.txt", f"expected_{a.shown}.txt"]
    return " ".join(words)


def generate(symbol: str, args: Sequence[HarnessArg]) -> str:
    """C source of the generic harness for kernel ``symbol`` (e.g. ``matmul_kernel``)."""
    _validate(symbol, args)
    decls: list[str] = []
    loads: list[str] = []
    call_args: list[str] = []
    outs: list[str] = []
    checks: list[str] = []
    guards: list[str] = []
    pos = 0
    buffers: dict[str, str] = {}  # tensor label -> the variable holding its buffer (for aliases)
    for i, a in enumerate(args):
        var = f"arg{i}"
        label = a.shown
        if a.role == "alias":
            call_args.append(f"{buffers[label]}.data")
            continue
        if a.role == "scalar":
            c_type, parse = SCALAR_TYPES[a.ttype]
            decls.append(f"static {c_type} {var};")
            value = parse.format(tok=f"o.pos[{pos}]", what='"' + a.name + '"')
            loads.append(f"    {var} = ({c_type}){value};")
            call_args.append(var)
            pos += 1
            continue
        dtype = TENSOR_DTYPES[a.ttype[1:]]
        buffers[label] = var
        decls.append(f"static rvtune_tensor {var};")
        call_args.append(f"{var}.data")
        guards.append(f"        ok &= rvtune_check_guards(&{var});")
        if a.role in ("in", "inout"):
            loads.append(f'    rvtune_read_txt(&{var}, "{label}", o.pos[{pos}], {dtype});')
            pos += 1
        if a.role in ("out", "inout"):
            decls.append(f"static rvtune_tensor {var}_expected;")
            loads.append(f'    rvtune_read_txt(&{var}_expected, "{label}", o.pos[{pos}], {dtype});')
            pos += 1
            if a.role == "out":
                loads.append(f"    rvtune_output_like(&{var}, &{var}_expected);")
            else:
                loads.append(f"    rvtune_expect_numel(&{var}_expected, rvtune_numel(&{var}));")
                loads.append(f"    rvtune_make_inout(&{var});")
            outs.append(f"&{var}")
            atol, rtol = "o.atol", "o.rtol"
            if a.ttype[1:] in DTYPE_TOLERANCE:
                least_atol, least_rtol = DTYPE_TOLERANCE[a.ttype[1:]]
                atol, rtol = f"fmax(o.atol, {least_atol!r})", f"fmax(o.rtol, {least_rtol!r})"
            checks.append(f'        ok &= rvtune_check("{label}", &{var}, &{var}_expected, {atol}, {rtol});')
    call = ", ".join(call_args)
    return f"""/* Generated by pytest_rvtune.harness.generate for {symbol}: do not edit.
   Positional arguments: {usage(args)} */
#include "rvtune_harness.h"
#include "{symbol}_launcher.h"

static rvtune_opts o;
{chr(10).join(decls)}

static void run_kernel(void *ctx) {{
    (void)ctx;
    {symbol}_wrap(o.grid[0], o.grid[1], o.grid[2], o.threads, {symbol}, {call});
}}

int main(int argc, char **argv) {{
    /* atol/rtol defaults only matter for a hand run: the build passes the kernel's tolerances */
    o = rvtune_default_opts(1e-5, 1e-5);
    rvtune_parse_args(argc, argv, &o);
    if (!o.has_grid) rvtune_fail("argument --grid X,Y,Z is required by the generated harness of {symbol}");
    rvtune_expect_positionals(&o, {pos}, "{usage(args)}");
{chr(10).join(loads)}
    rvtune_tensor *const outs[] = {{{", ".join(outs)}}};
    rvtune_bench(&o, run_kernel, NULL, outs, {len(outs)});
    int ok = 1;
    if (o.check) {{
{chr(10).join(checks)}
        /* every buffer the kernel got: a store past either end overwrote canaries */
{chr(10).join(guards)}
    }}
    return rvtune_exit_code(&o, ok);
}}
"""


def scalar_token(value: object) -> str:
    """A scalar value as an argv token the harness parses back exactly (repr round-trips floats)."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise HarnessError(f"scalar value {value!r} ({type(value).__name__}) is not an int, bool or float")


def positionals(args: Sequence[HarnessArg], scalars: Mapping[str, object],
                inputs: Mapping[str, Path], expected: Mapping[str, Path]) -> list[str | Path]:
    """The positional argv of a generic harness: files as ``Path`` (targets substitute their own path).

    ``scalars`` by parameter name; ``inputs``/``expected`` golden files by parameter name.
    """
    out: list[str | Path] = []
    for a in args:
        try:
            if a.role == "scalar":
                out.append(scalar_token(scalars[a.name]))
            if a.role in ("in", "inout"):
                out.append(Path(inputs[a.name]))
            if a.role in ("out", "inout"):
                out.append(Path(expected[a.name]))
        except KeyError:
            raise HarnessError(f"parameter {a.name!r} ({a.role}): no value or golden file given for it") from None
    return out


def argv(args: Sequence[HarnessArg], grid: Sequence[int], scalars: Mapping[str, object],
         inputs: Mapping[str, Path], expected: Mapping[str, Path],
         atol: float, rtol: float) -> list[str | Path]:
    """Full argv (after the ELF) for a generic harness, without run options (--warmup/--runs/...)."""
    if len(grid) > 3 or not all(isinstance(g, int) and g >= 0 for g in grid):
        raise HarnessError(f"grid {tuple(grid)!r} must be up to three non-negative ints")
    g = [*grid, 1, 1, 1][:3]
    return ["--grid", ",".join(map(str, g)), "--atol", repr(float(atol)), "--rtol", repr(float(rtol)),
            *positionals(args, scalars, inputs, expected)]
