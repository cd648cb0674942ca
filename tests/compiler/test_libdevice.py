"""Every libdevice function (``triton.language.extra.libdevice``) for every dtype overload Triton offers, through
the real frontend and our lowering, on the host and on rv64gcv under QEMU, checked element-wise against scipy /
numpy / math (float results within the ulp bounds of ``ULPS``; integer and bit results exactly; the rounding-mode
forms against the exact value rounded in that mode, with fractions).

The overloads are read from Triton's own libdevice module, so a function Triton adds shows up here (and fails
until compiler/libdevice.py lowers or refuses it). One kernel per signature group (all fp32 -> fp32 functions in
one kernel, ...), one C file and one compile per target.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
import scipy.special as sp
from difftest import KernelCall, run_c_kernels
from triton.language.extra.cuda import libdevice

from pytest_rvtune.compiler.libdevice import REFUSED, TEMPLATES
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA

N = 128  # elements per argument

NP = {"fp32": np.float32, "fp64": np.float64, "int32": np.int32, "int64": np.int64, "uint32": np.uint32,
      "uint64": np.uint64}
SIG = {"fp32": "*fp32", "fp64": "*fp64", "int32": "*i32", "int64": "*i64", "uint32": "*u32", "uint64": "*u64"}


@dataclass(frozen=True)
class Overload:
    function: str  # libdevice.<function>
    args: tuple[str, ...]  # Triton dtype names
    symbol: str
    result: str


def overloads() -> list[Overload]:
    text = inspect.getsource(libdevice)
    out = []
    for block in text.split("@core.extern")[1:]:
        function = re.search(r"def (\w+)\(", block).group(1)  # type: ignore[union-attr]
        flat = re.sub(r"\s+", "", block)
        pattern = r'\(((?:core\.dtype\("\w+"\),?)+)\):\("(__nv_\w+)",core\.dtype\("(\w+)"\)\)'
        for args, symbol, result in re.findall(pattern, flat):
            out.append(Overload(function, tuple(re.findall(r'dtype\("(\w+)"\)', args)), symbol, result))
    return out


OVERLOADS = overloads()


def test_every_symbol_is_lowered_or_refused_with_a_reason():
    symbols = {o.symbol for o in OVERLOADS}
    assert len(OVERLOADS) == len(symbols) > 300
    assert symbols - set(TEMPLATES) == set(REFUSED)
    assert set(TEMPLATES) <= symbols  # no template for a symbol Triton does not have (a typo)


# ---- inputs ------------------------------------------------------------------------------------------------
def float_inputs(dtype: str, seed: int) -> np.ndarray:
    t = NP[dtype]
    info = np.finfo(t)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 1.5, -2.5, 3.0, 0.25, 1e-3,
               float(info.tiny), float(info.smallest_subnormal), float(info.max), -float(info.max), 7.0, -7.5, 100.0]
    rng = np.random.default_rng(seed)
    rest = N - len(special)
    wide = np.sign(rng.standard_normal(rest // 2)) * 10.0 ** rng.uniform(-8, 8, rest // 2)
    near = rng.uniform(-4, 4, rest - rest // 2)
    return np.concatenate([special, wide, near]).astype(t)


def int_inputs(dtype: str, seed: int) -> np.ndarray:
    t = NP[dtype]
    info = np.iinfo(t)
    special = [0, 1, 2, 3, 7, 255, 256, 65535, info.max, info.min, info.max - 1, info.min + 1]
    if info.min < 0:
        special += [-1, -2, -255, -(1 << 23), (1 << 23) - 1, 1 << 24]
    rng = np.random.default_rng(seed)
    rest = rng.integers(info.min, info.max, N - len(special), dtype=t, endpoint=True)
    return np.concatenate([np.array(special, dtype=t), rest])


#: integer arguments of float functions: small ranges where they are exponents or orders
SMALL_INTS = {"ldexp": (-160, 160), "scalbn": (-160, 160), "pow": (-12, 12), "jn": (0, 6), "yn": (0, 6)}


def inputs(o: Overload, seed: int) -> list[np.ndarray]:
    out = []
    for k, dtype in enumerate(o.args):
        if dtype.startswith("fp"):
            out.append(float_inputs(dtype, seed * 7 + k))
        elif o.function in SMALL_INTS:
            lo, hi = SMALL_INTS[o.function]
            out.append(np.random.default_rng(k).integers(lo, hi, N, endpoint=True).astype(NP[dtype]))
        else:
            out.append(int_inputs(dtype, seed * 7 + k))
    return out


# ---- kernels: one per signature group ----------------------------------------------------------------------
def group_key(o: Overload) -> tuple[tuple[str, ...], str]:
    return o.args, o.result


def kernel_module(tmp_path: Path, groups: dict[tuple[tuple[str, ...], str], list[Overload]]):
    lines = ["import triton", "import triton.language as tl", "from triton.language.extra import libdevice", ""]
    for g, (key, members) in enumerate(groups.items()):
        nargs = len(key[0])
        params = [f"x{k}" for k in range(nargs)] + [f"o{i}" for i in range(len(members))]
        lines += ["@triton.jit", f"def group{g}_kernel({', '.join(params)}, N: tl.constexpr):",
                  "    offs = tl.arange(0, N)"]
        lines += [f"    a{k} = tl.load(x{k} + offs)" for k in range(nargs)]
        values = ", ".join(f"a{k}" for k in range(nargs))
        lines += [f"    tl.store(o{i} + offs, libdevice.{o.function}({values}))" for i, o in enumerate(members)]
        lines.append("")
    path = tmp_path / "libdevice_groups.py"
    path.write_text("\n".join(lines))
    spec = importlib.util.spec_from_file_location("libdevice_groups", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["libdevice_groups"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def run_all(tmp_path: Path, isa: str) -> dict[str, tuple[list[np.ndarray], np.ndarray]]:
    """symbol -> (its inputs, what our compiled kernel gave)"""
    groups: dict[tuple[tuple[str, ...], str], list[Overload]] = {}
    for o in OVERLOADS:
        if o.symbol not in REFUSED:
            groups.setdefault(group_key(o), []).append(o)
    module = kernel_module(tmp_path, groups)
    calls = []
    for g, ((args, result), members) in enumerate(groups.items()):
        ins = inputs(members[0], g)
        outs = [np.zeros(N, NP[result]) for _ in members]
        sig = {f"x{k}": SIG[a] for k, a in enumerate(args)} | {f"o{i}": SIG[result] for i in range(len(members))}
        calls.append(KernelCall(getattr(module, f"group{g}_kernel"), sig, {"N": N}, [*ins, *outs], (1,)))
    results = run_c_kernels(calls, isa)
    got = {}
    for ((args, _), members), res in zip(groups.items(), results, strict=True):
        ins = res[:len(args)]
        for i, o in enumerate(members):
            got[o.symbol] = (ins, res[len(args) + i])
    return got


# ---- references ----------------------------------------------------------------------------------------------
def _sinpi(x: float) -> float:
    return float(mpmath.sinpi(x)) if math.isfinite(x) else math.nan


def _cospi(x: float) -> float:
    return float(mpmath.cospi(x)) if math.isfinite(x) else math.nan


def _mp_erfcinv(y: float) -> float:
    """erfcinv in 1200-bit arithmetic: 1 - y exact for every double y (scipy's is inf below 1e-300)."""
    if not 0 <= y <= 2:
        return math.nan
    if y in (0, 2):
        return math.inf if y == 0 else -math.inf
    with mpmath.workprec(1200):
        return float(mpmath.erfinv(1 - mpmath.mpf(y)))


def _mp_erfc(x: float) -> float:
    if not math.isfinite(x) or abs(x) > 30:  # 0 or 2 in double
        return math.erfc(x) if not math.isnan(x) else x
    with mpmath.workprec(200):
        return float(mpmath.erfc(x))


def _lgamma(x: float) -> float:
    """log|gamma(x)| (Python's math.lgamma is 70 ulps off at -2.5; glibc's is within one)."""
    if math.isnan(x):
        return x
    if math.isinf(x) or (x <= 0 and x == math.floor(x)):  # C's lgamma: +inf at the poles and the infinities
        return math.inf
    with mpmath.workprec(120):
        return float(mpmath.loggamma(x).real)


def _vector(f: Callable[..., float]) -> Callable[..., np.ndarray]:
    return np.vectorize(f, otypes=[np.float64])


def _i(f: Callable[..., float]) -> Callable[..., float]:
    def safe(*a: float) -> float:
        try:
            return f(*a)
        except (ValueError, OverflowError):
            return math.nan
    return safe


def _at_inf(values: np.ndarray, x: np.ndarray, at_plus: float, at_minus: float) -> np.ndarray:
    """The limits at the infinities (C's libm gives them; scipy gives NaN for some)."""
    return np.where(x == np.inf, at_plus, np.where(x == -np.inf, at_minus, values))


with np.errstate(all="ignore"):
    FLOAT_REF: dict[str, Callable[..., np.ndarray]] = {
        "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "exp2": np.exp2, "sqrt": np.sqrt,
        "rsqrt": lambda x: 1.0 / np.sqrt(x), "rsqrt_rn": lambda x: 1.0 / np.sqrt(x),
        "saturatef": lambda x: np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0)),
        "fast_dividef": lambda a, b: a / b, "fast_sinf": np.sin, "fast_cosf": np.cos, "fast_log2f": np.log2,
        "fast_logf": np.log, "fast_expf": np.exp, "fast_tanf": np.tan, "fast_exp10f": lambda x: 10.0 ** x,
        "fast_log10f": np.log10, "fast_powf": np.power, "rint": np.rint, "nearbyint": np.rint,
        "copysign": np.copysign, "nextafter": None, "sin": np.sin, "cos": np.cos, "sinpi": _vector(_sinpi),
        "cospi": _vector(_cospi), "tan": np.tan, "log2": np.log2, "exp": np.exp, "exp10": lambda x: 10.0 ** x,
        "cosh": np.cosh, "sinh": np.sinh, "tanh": np.tanh, "atan2": np.arctan2, "atan": np.arctan, "asin": np.arcsin,
        "acos": np.arccos, "log": np.log, "log10": np.log10, "log1p": np.log1p, "acosh": np.arccosh,
        "asinh": np.arcsinh, "atanh": np.arctanh, "expm1": np.expm1, "hypot": np.hypot,
        "rhypot": lambda a, b: 1.0 / np.hypot(a, b),
        "norm3d": lambda a, b, c: np.hypot(np.hypot(a, b), c),
        "rnorm3d": lambda a, b, c: 1.0 / np.hypot(np.hypot(a, b), c),
        "norm4d": lambda a, b, c, d: np.hypot(np.hypot(a, b), np.hypot(c, d)),
        "rnorm4d": lambda a, b, c, d: 1.0 / np.hypot(np.hypot(a, b), np.hypot(c, d)),
        "cbrt": np.cbrt, "rcbrt": lambda x: 1.0 / np.cbrt(x), "j0": lambda x: _at_inf(sp.j0(x), x, 0.0, 0.0),
        "j1": lambda x: _at_inf(sp.j1(x), x, 0.0, 0.0), "y0": lambda x: _at_inf(sp.y0(x), x, 0.0, np.nan),
        "y1": lambda x: _at_inf(sp.y1(x), x, 0.0, np.nan), "jn": lambda n, x: _at_inf(sp.jv(n, x), x, 0.0, 0.0),
        "yn": lambda n, x: _at_inf(sp.yn(n, x), x, 0.0, np.nan),
        "cyl_bessel_i0": lambda x: _at_inf(sp.i0(x), x, np.inf, np.inf),
        "cyl_bessel_i1": lambda x: _at_inf(sp.i1(x), x, np.inf, -np.inf), "erf": sp.erf, "erfinv": sp.erfinv,
        "erfc": _vector(_mp_erfc), "erfcx": sp.erfcx,
        "erfcinv": _vector(_mp_erfcinv), "normcdfinv": _vector(lambda p: -math.sqrt(2) * _mp_erfcinv(2 * p)),
        "normcdf": sp.ndtr, "lgamma": _vector(_lgamma),
        "tgamma": sp.gamma, "ldexp": lambda x, n: np.ldexp(x, n.astype(np.int32)),
        "scalbn": lambda x, n: np.ldexp(x, n.astype(np.int32)), "fmod": np.fmod,
        "remainder": _vector(_i(math.remainder)), "fma": None, "pow": lambda a, b: np.power(a, np.float64(b)),
        "round": lambda x: np.where(np.isfinite(x), np.sign(x) * np.floor(np.abs(x) + 0.5), x),
        "fdim": lambda a, b: np.where(np.isnan(a) | np.isnan(b), np.nan, np.where(a > b, a - b, 0.0)),
        "logb": lambda x: np.where(x == 0, -np.inf, np.where(np.isfinite(x), np.frexp(x)[1] - 1.0, np.abs(x))),
    }

#: ulp bounds of float results against the reference above (rounded to the result's dtype): (fp32, fp64).
#: Default (1, 2): libm and the helpers computed in double and rounded once; fp64 references are numpy /
#: scipy's own double results, themselves within an ulp or so.
ULPS: dict[str, tuple[int, int]] = {
    "tgamma": (2, 8), "lgamma": (2, 16), "j0": (4, 1 << 40), "j1": (4, 1 << 40), "y0": (4, 1 << 40),
    "y1": (4, 1 << 40), "jn": (8, 1 << 40), "yn": (8, 1 << 40),
    "erfcx": (1, 8), "erfinv": (1, 8), "erfcinv": (1, 8), "normcdfinv": (1, 8), "normcdf": (1, 8),
    "cyl_bessel_i0": (1, 8), "cyl_bessel_i1": (1, 8), "sinpi": (1, 4), "cospi": (1, 4), "pow": (1, 2),
    "norm3d": (1, 2), "norm4d": (1, 2), "rnorm3d": (1, 3), "rnorm4d": (1, 3), "rhypot": (1, 3), "rcbrt": (1, 3),
    "exp10": (1, 3), "fast_exp10f": (1, 1), "sinh": (1, 2), "cosh": (1, 2), "tan": (1, 2), "fast_tanf": (1, 1),
    "erfc": (2, 2), "acosh": (1, 2), "asinh": (1, 2), "atanh": (1, 2), "remainder": (0, 0),
}
# Bessel functions of the second kind and of higher order lose all relative precision next to their zeros: glibc
# (whose j0 / y0 / jn are the C ones both targets run) and scipy differ there by far more than ulps; they are
# checked with an absolute tolerance instead (ATOL).
ATOL = {"j0": 1e-6, "j1": 1e-6, "y0": 1e-6, "y1": 1e-6, "jn": 1e-5, "yn": 1e-5}


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Ulps between two arrays of one float dtype (0 where both are NaN; equal infinities 0), in exact integers."""
    bits = {np.float32: np.int32, np.float64: np.int64}[got.dtype.type]
    top = 1 << (8 * got.itemsize - 1)

    def ordered(a: np.ndarray) -> list[int]:  # sign-magnitude bit patterns -> a line of ints
        return [-(i + top) if i < 0 else i for i in a.view(bits).tolist()]

    d = np.array([abs(x - y) for x, y in zip(ordered(got), ordered(want), strict=True)], dtype=np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    return np.where(both_nan, 0, np.where(np.isnan(got) | np.isnan(want), np.inf, d))


MODE_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b}


def round_exact(q: Fraction, dtype: type, mode: str) -> float:
    """The exact value ``q`` rounded to ``dtype`` in mode rn / rz / rd / ru."""
    finfo = np.finfo(dtype)
    big = Fraction(float(finfo.max))
    if abs(q) > big:  # beyond the largest finite: inf or the largest, by the mode
        up = mode == "ru" or (mode == "rn" and abs(q) >= big + Fraction(2) ** (finfo.maxexp - finfo.nmant - 2))
        if q > 0:
            return math.inf if up else float(finfo.max)
        return -math.inf if (mode == "rd" or (mode == "rn" and up)) else -float(finfo.max)
    c = dtype(float(q)) if dtype is np.float64 else np.float32(np.float64(float(q)))
    cands = sorted({float(np.nextafter(c, dtype(-np.inf))), float(c), float(np.nextafter(c, dtype(np.inf)))})
    cands = [v for v in cands if math.isfinite(v)]
    below = max(v for v in cands if Fraction(v) <= q)
    above = min(v for v in cands if Fraction(v) >= q)
    if mode == "rd":
        return below
    if mode == "ru":
        return above
    if mode == "rz":
        return below if q >= 0 else above
    d_below, d_above = q - Fraction(below), Fraction(above) - q
    if d_below != d_above:
        return below if d_below < d_above else above
    return below if int(np.array(below, dtype).view({np.float32: np.int32, np.float64: np.int64}[dtype])) % 2 == 0 \
        else above


def exact_ref(o: Overload, ins: list[np.ndarray]) -> np.ndarray | None:
    """The exactly rounded reference of the rounding-mode forms and the conversions (None for others)."""
    m = re.fullmatch(r"(add|sub|mul|div|rcp|sqrt|fma)_(rn|rz|rd|ru)", o.function)
    conv = re.fullmatch(r"(int|uint|ll|ull|float|double)2(float|double|int|uint|ll|ull)_(rn|rz|rd|ru)", o.function)
    if not (m or conv):
        return None
    out_t = NP[o.result]
    want = np.zeros(N, out_t)
    for i in range(N):
        vals = [a[i].item() for a in ins]
        if conv:
            _, dst, mode = conv.groups()
            if dst in ("float", "double"):
                want[i] = round_exact(Fraction(vals[0]), out_t, mode) if math.isfinite(vals[0]) else vals[0]
                continue
            x = vals[0]
            if math.isnan(x):
                want[i] = 0
                continue
            if math.isinf(x):
                r = x
            else:
                q = Fraction(x)
                r = {"rz": math.trunc, "rd": math.floor, "ru": math.ceil, "rn": round}[mode](q)  # round: half even
            lo, hi = {"int": (-2**31, 2**31 - 1), "uint": (0, 2**32 - 1), "ll": (-2**63, 2**63 - 1),
                      "ull": (0, 2**64 - 1)}[dst]
            r = lo if r < lo else hi if r > hi else int(r)
            want[i] = np.array(r & ((1 << 64) - 1), dtype=np.uint64).astype(out_t)
            continue
        op, mode = m.groups()
        if not all(math.isfinite(v) for v in vals):
            want[i] = _ieee(op, vals)
            continue
        q: Fraction | None
        if op in MODE_OPS:
            q = None if (op == "div" and vals[1] == 0) else MODE_OPS[op](Fraction(vals[0]), Fraction(vals[1]))
        elif op == "rcp":
            q = None if vals[0] == 0 else 1 / Fraction(vals[0])
        elif op == "fma":
            q = Fraction(vals[0]) * Fraction(vals[1]) + Fraction(vals[2])
        else:
            q = None if vals[0] <= 0 else _sqrt_fraction(vals[0])
        if q is None:  # a division by zero, the root of a negative or zero: the same in every mode
            want[i] = _ieee(op, vals)
        else:
            want[i] = round_exact(q, out_t, mode)
    return want


def _ieee(op: str, vals: list[float]) -> float:
    """The operation on special values (infinities, NaN, zero divisors), where every rounding mode agrees."""
    a = [np.float64(v) for v in vals]
    with np.errstate(all="ignore"):
        if op == "rcp":
            return float(1 / a[0])
        if op == "sqrt":
            return float(np.sqrt(a[0]))
        if op == "fma":
            return float(a[0] * a[1] + a[2])
        return float(MODE_OPS[op](a[0], a[1]))


def _sqrt_fraction(x: float) -> Fraction:
    with mpmath.workprec(400):
        r = mpmath.sqrt(mpmath.mpf(x))
        man, exp = r.man_exp
        return Fraction(int(man)) * Fraction(2) ** int(exp)


def int_ref(o: Overload, ins: list[np.ndarray]) -> np.ndarray:
    """Integer, bit-pattern and predicate results, exactly."""
    f = o.function
    width = 64 if o.args[0] in ("int64", "uint64", "fp64") else 32
    mask = (1 << width) - 1
    vals = [[int(v) if not isinstance(v, float) else v for v in a.tolist()] for a in ins]

    def signed(v: int, w: int = 32) -> int:
        v &= (1 << w) - 1
        return v - (1 << w) if v >= 1 << (w - 1) else v

    out = []
    for row in zip(*vals, strict=True):
        a = row[0]
        if f == "clz":
            r = width - (a & mask).bit_length()
        elif f == "popc":
            r = bin(a & mask).count("1")
        elif f == "ffs":
            r = ((a & mask) & -(a & mask)).bit_length()
        elif f == "brev":
            r = int(format(a & mask, f"0{width}b")[::-1], 2)
        elif f == "mulhi":
            r = (a * row[1]) >> width
        elif f == "mul24":
            s = o.args[0] == "int32"
            x, y = (signed(a, 24), signed(row[1], 24)) if s else (a & 0xFFFFFF, row[1] & 0xFFFFFF)
            r = x * y
        elif f == "sad":
            r = abs(a - row[1]) + (row[2] & 0xFFFFFFFF)
        elif f == "hadd":
            r = (a + row[1]) >> 1
        elif f == "rhadd":
            r = (a + row[1] + 1) >> 1
        elif f == "abs":
            r = abs(a)
        elif f == "byte_perm":
            both = ((row[1] & 0xFFFFFFFF) << 32) | (a & 0xFFFFFFFF)
            r = sum(((both >> (8 * ((row[2] >> (4 * n)) & 7))) & 0xFF) << (8 * n) for n in range(4))
        elif f in ("isnan", "isinf", "finitef", "isfinited", "signbit"):
            r = int({"isnan": math.isnan(a), "isinf": math.isinf(a), "finitef": math.isfinite(a),
                     "isfinited": math.isfinite(a), "signbit": math.copysign(1.0, a) < 0}[f])
        elif f in ("float_as_int", "float_as_uint"):
            r = int(np.array(a, np.float32).view(np.uint32))
        elif f == "double_as_longlong":
            r = int(np.array(a, np.float64).view(np.uint64))
        elif f == "double2loint":
            r = int(np.array(a, np.float64).view(np.uint64)) & 0xFFFFFFFF
        elif f == "double2hiint":
            r = int(np.array(a, np.float64).view(np.uint64)) >> 32
        elif f == "ilogb":
            r = -2**31 if (a == 0 or math.isnan(a)) else 2**31 - 1 if math.isinf(a) else math.frexp(a)[1] - 1
        elif f in ("llrint", "llround"):
            if math.isnan(a):
                r = 0
            elif math.isinf(a):
                r = 2**63 - 1 if a > 0 else -2**63
            else:
                q = Fraction(a)
                r = round(q) if f == "llrint" else int(math.copysign(math.floor(abs(q) + Fraction(1, 2)), a))
                r = max(-2**63, min(2**63 - 1, r))
        else:
            raise AssertionError(f"no integer reference for {f}")
        out.append(r)
    out_w = 64 if o.result in ("int64", "uint64") else 32
    return np.array([r & ((1 << out_w) - 1) for r in out], dtype=np.uint64 if out_w == 64 else np.uint32).view(
        NP[o.result] if o.result in ("int64", "uint64", "int32", "uint32") else np.int32)


def bits_ref(o: Overload, ins: list[np.ndarray]) -> np.ndarray | None:
    """Results that are bit patterns of floats: exact."""
    if o.function in ("int_as_float", "uint_as_float"):
        return ins[0].view(np.float32)
    if o.function == "longlong_as_double":
        return ins[0].view(np.float64)
    if o.function == "hiloint2double":
        return ((ins[0].astype(np.uint32).astype(np.uint64) << np.uint64(32)) | ins[1].astype(np.uint32)).view(
            np.float64)
    if o.function == "double2float_rn":
        return ins[0].astype(np.float32)
    if o.function in ("int2double_rn", "uint2double_rn"):
        return ins[0].astype(np.float64)
    return None


def check(o: Overload, ins: list[np.ndarray], got: np.ndarray) -> str | None:
    """None when ``got`` is right, else what is wrong (symbol, the first bad element, its inputs)."""
    out_t = NP[o.result]
    if o.result.startswith("fp"):
        want = exact_ref(o, ins)
        bound = 0
        if want is None:
            want = bits_ref(o, ins)
        if want is None:
            ref = FLOAT_REF.get(o.function)
            if ref is None and o.function == "nextafter":
                want = np.nextafter(ins[0], ins[1])
            elif ref is None and o.function in ("fma", "fma_rn"):
                want = np.array([round_exact(Fraction(a) * Fraction(b) + Fraction(c), out_t, "rn")
                                 if all(map(math.isfinite, (a, b, c))) else a * b + c
                                 for a, b, c in zip(*(x.astype(np.float64).tolist() for x in ins), strict=True)])
            else:
                assert ref is not None, f"no reference for {o.function}"
                with np.errstate(all="ignore"):
                    wide = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in ins]
                    want = np.asarray(ref(*wide), dtype=np.float64)
            bound = ULPS.get(o.function, (1, 2))[o.result == "fp64"]
        with np.errstate(all="ignore"):
            want = np.asarray(want).astype(out_t)
            dist = ulp_distance(got, want)
            if o.function in ATOL:
                dist = np.where(np.abs(got.astype(np.float64) - want) <= ATOL[o.function], 0, dist)
            if o.function in ("floor", "ceil", "trunc", "rint", "nearbyint", "round", "sqrt", "copysign", "abs"):
                bound = 0
            bad = np.flatnonzero(dist > bound)
            # zeros: the sign of an exactly-zero result is not checked against the reference
            bad = [i for i in bad if not (got[i] == 0 and want[i] == 0)]
    else:
        want = exact_ref(o, ins)
        if want is None:
            want = int_ref(o, ins)
        bad = list(np.flatnonzero(got != want))
    if not bad:
        return None
    i = bad[0]
    return (f"{o.symbol} ({o.function} {o.args}->{o.result}): {len(bad)} of {N} wrong; first at {i}: inputs "
            f"{[a[i].item() for a in ins]}, got {got[i].item()!r}, want {want[i].item()!r}")


@pytest.mark.parametrize("isa", [HOST_ISA, RISCV_ISA])
def test_every_libdevice_overload_element_wise(tmp_path, isa):
    got = run_all(tmp_path, isa)
    problems = [p for o in OVERLOADS if o.symbol in got for p in [check(o, *got[o.symbol])] if p]
    assert not problems, f"{len(problems)} of {len(got)} symbols wrong on {isa}:\n" + "\n".join(problems)
