"""Triton's libdevice (``triton.language.extra.libdevice``, CUDA's ``__nv_*`` symbols) as C expressions.

Every function of the module with a defined meaning on a CPU is here, for every dtype overload Triton offers (its
symbols, as ``tt.extern_elementwise`` names them): libm where C has the same function, else
``runtime/rvtune_libdevice.h``. Float results of 32-bit functions without an fp32 libm twin are computed in
double and rounded once. The ``fast_*`` forms are computed as the accurate ones (CUDA's are approximations with
looser bounds; any closer answer is within them). Directed rounding (``_rz``, ``_rd``, ``_ru``) is real: the
rounding mode is set around the one operation. ``REFUSED`` names what is left out and why; docs/compiler.md has
the coverage table, tests/compiler/test_libdevice.py checks every symbol element-wise.
"""

from __future__ import annotations

import re

#: C ``fenv.h`` rounding modes of the ``_rn``/``_rz``/``_rd``/``_ru`` suffixes.
MODES = {"rn": "FE_TONEAREST", "rz": "FE_TOWARDZERO", "rd": "FE_DOWNWARD", "ru": "FE_UPWARD"}

#: libdevice symbols left out, with the reason (shown in the error and in docs/compiler.md).
REFUSED: dict[str, str] = {
    "__nv_rcp64h": "its result is defined by NVIDIA hardware's reciprocal approximation of the high word, "
                   "not by a formula; use 1.0 / x",
}

# libm functions of one float argument, named alike (``sinf`` / ``sin``); the f32 form calls the f32 libm one
_LIBM_UNARY = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan", "asin",
               "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "floor", "ceil",
               "round", "rint", "nearbyint", "lgamma", "tgamma", "logb", "j0", "j1", "y0", "y1", "exp10")
_LIBM_BINARY = ("atan2", "pow", "hypot", "copysign", "remainder", "fdim", "nextafter")
# double helpers of rvtune_libdevice.h: the f32 form widens, calls, rounds once
_DOUBLE_HELPERS = {"erfinv": "rv_ld_erfinv", "erfcinv": "rv_ld_erfcinv", "normcdf": "rv_ld_normcdf",
                   "normcdfinv": "rv_ld_normcdfinv", "erfcx": "rv_ld_erfcx", "sinpi": "rv_ld_sinpi",
                   "cospi": "rv_ld_cospi"}
_FAST = {"fast_sinf": "sinf", "fast_cosf": "cosf", "fast_log2f": "log2f", "fast_logf": "logf", "fast_expf": "expf",
         "fast_tanf": "tanf", "fast_exp10f": "exp10f", "fast_log10f": "log10f"}

# norms and their reciprocals (the ``r`` forms): name -> (its f32 form computed in double, its f64 form)
_NORMS = {
    "sqrt": ("sqrt((double){0})", "sqrt({0})"),
    "cbrt": ("cbrt((double){0})", "cbrt({0})"),
    "hypot": ("hypot((double){0}, (double){1})", "hypot({0}, {1})"),
    "norm3d": ("sqrt((double){0} * {0} + (double){1} * {1} + (double){2} * {2})", "hypot(hypot({0}, {1}), {2})"),
    "norm4d": ("sqrt((double){0} * {0} + (double){1} * {1} + (double){2} * {2} + (double){3} * {3})",
               "hypot(hypot({0}, {1}), hypot({2}, {3}))"),
}

def _float_forms() -> dict[str, str]:
    """Symbol -> C template ({0}, {1}, ... the arguments) of the float functions."""
    t: dict[str, str] = {}
    for name in _LIBM_UNARY:
        t[f"__nv_{name}f"] = f"{name}f({{0}})"
        t[f"__nv_{name}"] = f"{name}({{0}})"
    for name in _LIBM_BINARY:
        t[f"__nv_{name}f"] = f"{name}f({{0}}, {{1}})"
        t[f"__nv_{name}"] = f"{name}({{0}}, {{1}})"
    for name, helper in _DOUBLE_HELPERS.items():
        t[f"__nv_{name}f"] = f"((float){helper}((double){{0}}))"
        t[f"__nv_{name}"] = f"{helper}({{0}})"
    for fast, libm in _FAST.items():
        t[f"__nv_{fast}"] = f"{libm}({{0}})"
    t |= {
        "__nv_fabsf": "fabsf({0})", "__nv_fabs": "fabs({0})",
        "__nv_truncf": "rv_truncf({0})", "__nv_trunc": "rv_trunc({0})",  # see rv_truncf in rvtune_rt.h
        "__nv_fmodf": "rv_fmodf({0}, {1})", "__nv_fmod": "rv_fmod({0}, {1})",
        "__nv_fmaf": "fmaf({0}, {1}, {2})", "__nv_fma": "fma({0}, {1}, {2})",
        "__nv_fast_powf": "powf({0}, {1})", "__nv_fast_fdividef": "({0} / {1})",
        "__nv_frsqrt_rn": "((float)(1.0 / sqrt((double){0})))",
        "__nv_cyl_bessel_i0f": "((float)rv_ld_bessel_i((double){0}, 0))",
        "__nv_cyl_bessel_i0": "rv_ld_bessel_i({0}, 0)",
        "__nv_cyl_bessel_i1f": "((float)rv_ld_bessel_i((double){0}, 1))",
        "__nv_cyl_bessel_i1": "rv_ld_bessel_i({0}, 1)",
        "__nv_jnf": "jnf({0}, {1})", "__nv_jn": "jn({0}, {1})", "__nv_ynf": "ynf({0}, {1})", "__nv_yn": "yn({0}, {1})",
        "__nv_ldexpf": "ldexpf({0}, {1})", "__nv_ldexp": "ldexp({0}, {1})",
        "__nv_scalbnf": "scalbnf({0}, {1})", "__nv_scalbn": "scalbn({0}, {1})",
        "__nv_powif": "((float)pow((double){0}, (double){1}))", "__nv_powi": "pow({0}, (double){1})",
        "__nv_saturatef": "rv_ld_saturatef({0})",
        "__nv_ilogbf": "rv_ld_ilogb((double){0})", "__nv_ilogb": "rv_ld_ilogb({0})",
        "__nv_llrintf": "rv_fptosi64(rint((double){0}))", "__nv_llrint": "rv_fptosi64(rint({0}))",
        "__nv_llroundf": "rv_fptosi64(round((double){0}))", "__nv_llround": "rv_fptosi64(round({0}))",
        "__nv_isnanf": "((int32_t)(isnan({0}) != 0))", "__nv_isnand": "((int32_t)(isnan({0}) != 0))",
        "__nv_isinff": "((int32_t)(isinf({0}) != 0))", "__nv_isinfd": "((int32_t)(isinf({0}) != 0))",
        "__nv_finitef": "((int32_t)(isfinite({0}) != 0))", "__nv_isfinited": "((int32_t)(isfinite({0}) != 0))",
        "__nv_signbitf": "((int32_t)(signbit({0}) != 0))", "__nv_signbitd": "((int32_t)(signbit({0}) != 0))",
    }
    for name, (f32, f64) in _NORMS.items():
        t[f"__nv_r{name}f"] = f"((float)(1.0 / {f32}))"
        t[f"__nv_r{name}"] = f"(1.0 / {f64})"
        if name.startswith("norm"):  # sqrt, cbrt and hypot themselves are libm's (_LIBM_UNARY, _LIBM_BINARY)
            t[f"__nv_{name}f"] = f"((float){f32})"
            t[f"__nv_{name}"] = f64
    # the IEEE operations in each rounding mode
    for mode, fe in MODES.items():
        for s, t_ in (("f", "f32"), ("d", "f64")):
            for op in ("add", "sub", "mul"):
                t[f"__nv_{s}{op}_{mode}"] = (f"rv_ld_{op}_rn_{t_}({{0}}, {{1}})" if mode == "rn"
                                             else f"rv_ld_{op}_{t_}({{0}}, {{1}}, {fe})")
            t[f"__nv_{s}div_{mode}"] = "({0} / {1})" if mode == "rn" else f"rv_ld_div_{t_}({{0}}, {{1}}, {fe})"
            t[f"__nv_{s}rcp_{mode}"] = (f"(1.0{'f' if s == 'f' else ''} / {{0}})" if mode == "rn"
                                        else f"rv_ld_rcp_{t_}({{0}}, {fe})")
            t[f"__nv_{s}sqrt_{mode}"] = (f"sqrt{'f' if s == 'f' else ''}({{0}})" if mode == "rn"
                                         else f"rv_ld_sqrt_{t_}({{0}}, {fe})")
        t[f"__nv_fmaf_{mode}"] = "fmaf({0}, {1}, {2})" if mode == "rn" else f"rv_ld_fma_f32({{0}}, {{1}}, {{2}}, {fe})"
        t[f"__nv_fma_{mode}"] = "fma({0}, {1}, {2})" if mode == "rn" else f"rv_ld_fma_f64({{0}}, {{1}}, {{2}}, {fe})"
    return t


def _conversions() -> dict[str, str]:
    t: dict[str, str] = {
        "__nv_int2double_rn": "((double){0})", "__nv_uint2double_rn": "((double)(uint32_t){0})",
        "__nv_int_as_float": "rv_bits_f32((uint32_t){0})", "__nv_uint_as_float": "rv_bits_f32((uint32_t){0})",
        "__nv_float_as_int": "((int32_t)rv_f32_bits({0}))", "__nv_float_as_uint": "((int32_t)rv_f32_bits({0}))",
        "__nv_longlong_as_double": "rv_bits_f64((uint64_t){0})",
        "__nv_double_as_longlong": "((int64_t)rv_f64_bits({0}))",
        "__nv_hiloint2double": "rv_bits_f64(((uint64_t)(uint32_t){0} << 32) | (uint32_t){1})",
        "__nv_double2loint": "((int32_t)(uint32_t)rv_f64_bits({0}))",
        "__nv_double2hiint": "((int32_t)(uint32_t)(rv_f64_bits({0}) >> 32))",
    }
    for mode, fe in MODES.items():
        rn = mode == "rn"
        t[f"__nv_double2float_{mode}"] = "((float){0})" if rn else f"rv_ld_f64_to_f32({{0}}, {fe})"
        for src, widen in (("float", "(double){0}"), ("double", "{0}")):
            rounded = f"rv_ld_round_mode({widen}, {fe})"
            t[f"__nv_{src}2int_{mode}"] = f"rv_fptosi32({rounded})"
            t[f"__nv_{src}2uint_{mode}"] = f"rv_fptoui32({rounded})"
            t[f"__nv_{src}2ll_{mode}"] = f"rv_fptosi64({rounded})"
            t[f"__nv_{src}2ull_{mode}"] = f"rv_fptoui64({rounded})"
        for src, c in (("int", "i32"), ("uint", "u32"), ("ll", "i64"), ("ull", "u64")):
            cast = {"i32": "{0}", "u32": "(uint32_t){0}", "i64": "{0}", "u64": "(uint64_t){0}"}[c]
            t[f"__nv_{src}2float_{mode}"] = f"((float){cast})" if rn else f"rv_ld_{c}_to_f32({{0}}, {fe})"
            if c in ("i64", "u64"):
                t[f"__nv_{src}2double_{mode}"] = f"((double){cast})" if rn else f"rv_ld_{c}_to_f64({{0}}, {fe})"
    return t


def _integers() -> dict[str, str]:
    u32, u64 = "(uint32_t)", "(uint64_t)"
    return {
        "__nv_clz": f"({{0}} == 0 ? 32 : (int32_t)__builtin_clz({u32}{{0}}))",
        "__nv_clzll": f"({{0}} == 0 ? 64 : (int32_t)__builtin_clzll({u64}{{0}}))",
        "__nv_popc": f"((int32_t)__builtin_popcount({u32}{{0}}))",
        "__nv_popcll": f"((int32_t)__builtin_popcountll({u64}{{0}}))",
        "__nv_ffs": "((int32_t)__builtin_ffs({0}))", "__nv_ffsll": "((int32_t)__builtin_ffsll({0}))",
        "__nv_brev": f"((int32_t)__builtin_bitreverse32({u32}{{0}}))",
        "__nv_brevll": f"((int64_t)__builtin_bitreverse64({u64}{{0}}))",
        "__nv_byte_perm": "rv_ld_byte_perm({0}, {1}, {2})",
        "__nv_mulhi": "((int32_t)(((int64_t){0} * (int64_t){1}) >> 32))",
        "__nv_umulhi": "rv_mulhiui32({0}, {1})",  # the runtime's, as tt.mulhiui
        "__nv_mul64hi": "((int64_t)(((__int128){0} * (__int128){1}) >> 64))",
        "__nv_umul64hi": "rv_mulhiui64({0}, {1})",
        "__nv_mul24": "((int32_t)(uint32_t)((int64_t)rv_ld_sext24({0}) * rv_ld_sext24({1})))",
        "__nv_umul24": f"((int32_t)(uint32_t)((uint64_t)({u32}{{0}} & 0xffffffu) * ({u32}{{1}} & 0xffffffu)))",
        "__nv_sad": f"((int32_t)({u32}(({{0}} > {{1}}) ? (int64_t){{0}} - {{1}} : (int64_t){{1}} - {{0}}) "
                    f"+ {u32}{{2}}))",
        "__nv_usad": f"((int32_t)(({u32}{{0}} > {u32}{{1}} ? {u32}{{0}} - {u32}{{1}} : {u32}{{1}} - {u32}{{0}}) "
                     f"+ {u32}{{2}}))",
        "__nv_hadd": "((int32_t)(((int64_t){0} + {1}) >> 1))",
        "__nv_rhadd": "((int32_t)(((int64_t){0} + {1} + 1) >> 1))",
        "__nv_uhadd": f"((int32_t)(uint32_t)(((uint64_t){u32}{{0}} + {u32}{{1}}) >> 1))",
        "__nv_urhadd": f"((int32_t)(uint32_t)(((uint64_t){u32}{{0}} + {u32}{{1}} + 1) >> 1))",
        "__nv_abs": "rv_absi32({0})", "__nv_llabs": "rv_absi64({0})",  # the runtime's, as math.absi
    }


#: libdevice symbol -> C template of its value ({0}, {1}, ... are the arguments as C expressions of their types:
#: float, double, int32_t, int64_t; unsigned operands arrive as the signed type of their width)
TEMPLATES: dict[str, str] = {**_float_forms(), **_conversions(), **_integers()}


#: The C functions and macros the templates name (with their f32 twins): a kernel variable of such a name is renamed
#: in the C (emitter.py), or it would hide the function.
C_NAMES: frozenset[str] = frozenset(
    name + suffix for template in TEMPLATES.values()
    for name in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\(", template) + re.findall(r"\b(FE_[A-Z]+)\b", template)
    for suffix in ("", "f")
) | frozenset(("fegetround", "fesetround"))


class LibdeviceError(ValueError):
    """A libdevice symbol left out (REFUSED) or unknown."""


def libdevice_expr(symbol: str, args: list[str]) -> str:
    """The C expression of ``symbol`` (``__nv_rsqrtf``) applied to ``args``."""
    if symbol in REFUSED:
        raise LibdeviceError(f"tt.extern_elementwise {symbol}: not lowered: {REFUSED[symbol]}")
    template = TEMPLATES.get(symbol)
    if template is None:
        raise LibdeviceError(f"tt.extern_elementwise {symbol} (not a libdevice function rvtune knows)")
    return template.format(*args)
