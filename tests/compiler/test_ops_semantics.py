"""Exact op semantics of the lowering, op by op, on hand-written TTIR (no Triton frontend involved).

Triton's frontend never emits some predicates and ops (cmpf ord/uno/ueq..., floordivsi, shrui on i64,
fptoui...), and the interpreter has numpy's semantics at the edges (division by zero, shifts past the
width, out-of-range float->int). So here each op is applied element-wise to edge-case inputs in a
generic-form TTIR kernel and compared, bit-exactly, with numpy computing what MLIR specifies, and with our
documented choices where MLIR says poison (see runtime/rvtune_rt.h). Host and rv64gcv (QEMU) builds.
"""

from __future__ import annotations

import numpy as np
import pytest
from difftest import KernelCall, assert_match, run_c_kernels

from pytest_rvtune.compiler.lower import lower_ttir
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA

N = 32  # elements per op (one program, one tile): 16 edge values + 16 random
NP = {"i1": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "f16": np.float16,
      "bf16": np.uint16, "f32": np.float32, "f64": np.float64}
TRITON = {"i8": "*i8", "i16": "*i16", "i32": "*i32", "i64": "*i64", "f16": "*fp16", "bf16": "*bf16",
          "f32": "*fp32", "f64": "*fp64", "i1": "*i8"}


def op_module(name: str, in_type: str, out_type: str, ops: list[tuple[str, str]], nargs: int = 2) -> str:
    """A kernel applying each ``(op, props)`` to ``nargs`` loaded tensors, storing op k at out[k*N:]."""
    ti, to = f"tensor<{N}x{in_type}>", f"tensor<{N}x{out_type}>"
    args = ", ".join(f"%a{k}p: !tt.ptr<{in_type}>" for k in range(nargs))
    lines = [f'"builtin.module"() ({{\n  "tt.func"() <{{function_type = ({", ".join([f"!tt.ptr<{in_type}>"] * nargs)}, '
             f'!tt.ptr<{out_type}>) -> (), sym_name = "{name}", sym_visibility = "public"}}> ({{',
             f"  ^bb0({args}, %outp: !tt.ptr<{out_type}>):",
             f'    %r = "tt.make_range"() <{{end = {N} : i32, start = 0 : i32}}> : () -> tensor<{N}xi32>']
    for k in range(nargs):
        lines += [f'    %a{k}s = "tt.splat"(%a{k}p) : (!tt.ptr<{in_type}>) -> tensor<{N}x!tt.ptr<{in_type}>>',
                  f'    %a{k}q = "tt.addptr"(%a{k}s, %r) : (tensor<{N}x!tt.ptr<{in_type}>>, tensor<{N}xi32>) '
                  f"-> tensor<{N}x!tt.ptr<{in_type}>>",
                  f'    %a{k} = "tt.load"(%a{k}q) <{{isVolatile = false, operandSegmentSizes = array<i32: 1, 0, 0>}}>'
                  f" : (tensor<{N}x!tt.ptr<{in_type}>>) -> {ti}"]
    operands = ", ".join(f"%a{k}" for k in range(nargs))
    for k, (op, props) in enumerate(ops):
        p = f" <{{{props}}}>" if props else ""
        lines += [f'    %c{k} = "{op}"({operands}){p} : ({", ".join([ti] * nargs)}) -> {to}',
                  f'    %k{k} = "arith.constant"() <{{value = dense<{k * N}> : tensor<{N}xi32>}}> '
                  f": () -> tensor<{N}xi32>",
                  f'    %i{k} = "arith.addi"(%r, %k{k}) : (tensor<{N}xi32>, tensor<{N}xi32>) -> tensor<{N}xi32>',
                  f'    %o{k} = "tt.splat"(%outp) : (!tt.ptr<{out_type}>) -> tensor<{N}x!tt.ptr<{out_type}>>',
                  f'    %q{k} = "tt.addptr"(%o{k}, %i{k}) : (tensor<{N}x!tt.ptr<{out_type}>>, tensor<{N}xi32>) '
                  f"-> tensor<{N}x!tt.ptr<{out_type}>>",
                  f'    "tt.store"(%q{k}, %c{k}) : (tensor<{N}x!tt.ptr<{out_type}>>, {to}) -> ()']
    lines += ['    "tt.return"() : () -> ()', "  }) : () -> ()", "}) : () -> ()"]
    return "\n".join(lines)


def edge_ints(dtype: type, rng: np.random.Generator) -> np.ndarray:
    info = np.iinfo(dtype)
    edges = [0, 1, -1, 2, -2, 7, -7, info.min, info.max, info.min + 1, info.max - 1, 31, 32, 33, 63, 64]
    vals = np.array(edges, dtype=np.int64).astype(dtype)
    rand = rng.integers(info.min, info.max, size=N - len(vals), dtype=dtype, endpoint=True)
    return np.concatenate([vals, rand])


def edge_floats(rng: np.random.Generator) -> np.ndarray:
    edges = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 0.5, -0.5, 1.5, 2.5, -2.5, 3e9, -3e9, 1e-40, 7.0]
    rand = rng.standard_normal(N - len(edges)) * 10
    return np.concatenate([edges, rand]).astype(np.float32)


# ---- expected values: MLIR semantics, plus our documented choices where MLIR says poison --------------


def _sx(v: int, w: int) -> int:
    """Two's complement wrap of an exact integer to w bits, as a signed value."""
    v &= (1 << w) - 1
    return v - (1 << w) if v >= 1 << (w - 1) else v


def _tdiv(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


# Scalar reference semantics on exact Python ints: (x, y, width) -> result (wrapped by the caller).
# Poison cases follow runtime/rvtune_rt.h: x/0 = -1, x%0 = x, shifts >= width give 0 / the sign fill.
def _ushr(x: int, y: int, w: int) -> int:
    return 0 if y % (1 << w) >= w else (x % (1 << w)) >> (y % (1 << w))


INT_SEMANTICS = {
    "arith.addi": lambda x, y, w: x + y,
    "arith.subi": lambda x, y, w: x - y,
    "arith.muli": lambda x, y, w: x * y,
    "arith.divsi": lambda x, y, w: -1 if y == 0 else _tdiv(x, y),
    "arith.remsi": lambda x, y, w: x if y == 0 else x - y * _tdiv(x, y),
    "arith.divui": lambda x, y, w: -1 if y == 0 else (x % (1 << w)) // (y % (1 << w)),
    "arith.remui": lambda x, y, w: x if y == 0 else (x % (1 << w)) % (y % (1 << w)),
    "arith.floordivsi": lambda x, y, w: -1 if y == 0 else x // y,
    "arith.ceildivsi": lambda x, y, w: -1 if y == 0 else -((-x) // y),
    "arith.andi": lambda x, y, w: x & y,
    "arith.ori": lambda x, y, w: x | y,
    "arith.xori": lambda x, y, w: x ^ y,
    "arith.shli": lambda x, y, w: 0 if y % (1 << w) >= w else x << (y % (1 << w)),
    "arith.shrui": _ushr,
    "arith.shrsi": lambda x, y, w: (-1 if x < 0 else 0) if y % (1 << w) >= w else x >> (y % (1 << w)),
    "arith.minsi": lambda x, y, w: min(x, y),
    "arith.maxsi": lambda x, y, w: max(x, y),
    "arith.minui": lambda x, y, w: x if x % (1 << w) < y % (1 << w) else y,
    "arith.maxui": lambda x, y, w: x if x % (1 << w) > y % (1 << w) else y,
}


def int_expected(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w = 8 * a.itemsize
    fn = INT_SEMANTICS[op]
    return np.array([_sx(fn(int(x), int(y), w), w) for x, y in zip(a, b, strict=True)], dtype=a.dtype)


def _u(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(x.dtype.str.replace("i", "u")))


INT_OPS = list(INT_SEMANTICS)
CMPI = [lambda a, b: a == b, lambda a, b: a != b, lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: a > b,
        lambda a, b: a >= b, lambda a, b: _u(a) < _u(b), lambda a, b: _u(a) <= _u(b),
        lambda a, b: _u(a) > _u(b), lambda a, b: _u(a) >= _u(b)]


def _ord(a, b):
    return ~np.isnan(a) & ~np.isnan(b)


CMPF = [lambda a, b: np.zeros(a.shape, bool), lambda a, b: a == b, lambda a, b: a > b, lambda a, b: a >= b,
        lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: _ord(a, b) & (a != b), _ord,
        lambda a, b: ~_ord(a, b) | (a == b), lambda a, b: ~(a <= b), lambda a, b: ~(a < b),
        lambda a, b: ~(a >= b), lambda a, b: ~(a > b), lambda a, b: a != b,
        lambda a, b: ~_ord(a, b), lambda a, b: np.ones(a.shape, bool)]


def maximumf(a, b):
    same = np.where(np.signbit(a), b, a)  # maximum(-0, +0) = +0
    return np.where(np.isnan(a) | np.isnan(b), np.nan, np.where(a == b, same, np.maximum(a, b)))


def minimumf(a, b):
    same = np.where(np.signbit(a), a, b)  # minimum(-0, +0) = -0
    return np.where(np.isnan(a) | np.isnan(b), np.nan, np.where(a == b, same, np.minimum(a, b)))


FLOAT_BIN = [("arith.addf", np.add), ("arith.subf", np.subtract), ("arith.mulf", np.multiply),
             ("arith.divf", np.divide), ("arith.remf", np.fmod), ("arith.maximumf", maximumf),
             ("arith.minimumf", minimumf), ("arith.maxnumf", np.fmax), ("arith.minnumf", np.fmin)]
FLOAT_UNARY = [("math.log1p", np.log1p), ("math.expm1", np.expm1), ("math.tanh", np.tanh),
               ("math.trunc", np.trunc), ("math.round", lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x)),
               ("math.roundeven", np.rint), ("math.absf", np.abs), ("arith.negf", np.negative),
               ("math.exp", np.exp), ("math.sqrt", np.sqrt), ("math.rsqrt", lambda x: 1 / np.sqrt(x)),
               ("math.floor", np.floor), ("math.ceil", np.ceil), ("math.atan", np.arctan),
               ("math.cbrt", np.cbrt), ("math.log10", np.log10)]


def fptosi32(x):
    with np.errstate(invalid="ignore"):
        v = np.clip(np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0)), -2**31, 2**31 - 1)
        out = np.where(np.isnan(x), 0, v)
    return out.astype(np.int64).astype(np.int32)


def fptoui32(x):
    with np.errstate(invalid="ignore"):
        v = np.clip(np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0)), 0, 2**32 - 1)
    return v.astype(np.uint64).astype(np.uint32).view(np.int32)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 bit patterns, round to nearest even (quiet NaN)."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), ((b >> 16) | 0x40).astype(np.uint16), rounded)


@pytest.fixture(scope="module")
def cases() -> dict[str, tuple[KernelCall, list[np.ndarray]]]:
    """name -> (launch, expected output array per op)."""
    rng = np.random.default_rng(1234)
    out: dict[str, tuple[KernelCall, list[np.ndarray]]] = {}

    def add(name: str, text: str, inputs: list[np.ndarray], out_dtype: type, expected: list[np.ndarray]) -> None:
        lowered = lower_ttir(text)
        result = np.zeros(len(expected) * N, out_dtype)
        call = KernelCall(None, {}, {}, [*inputs, result], (1,), lowered)
        out[name] = (call, expected)

    for t in ("i32", "i64", "i16", "i8"):
        dt = NP[t]
        a, b = edge_ints(dt, rng), edge_ints(dt, rng)[::-1].copy()
        b[:8] = [0, -1, 3, 0, 5, -1, 0, 1]  # division by zero, INT_MIN / -1 (a[7] is INT_MIN)
        ops = [(name, "") for name in INT_OPS]
        add(f"int_{t}", op_module(f"int_{t}", t, t, ops), [a, b], dt, [int_expected(o, a, b) for o in INT_OPS])
        cmp = [("arith.cmpi", f"predicate = {p} : i64") for p in range(10)]
        add(f"cmpi_{t}", op_module(f"cmpi_{t}", t, "i1", cmp), [a, b], np.uint8,
            [fn(a, b).astype(np.uint8) for fn in CMPI])
    x, y = edge_floats(rng), edge_floats(rng)[::-1].copy()
    y[:4] = [-0.0, 0.0, np.nan, 0.0]
    add("cmpf", op_module("cmpf_k", "f32", "i1", [("arith.cmpf", f"predicate = {p} : i64") for p in range(16)]),
        [x, y], np.uint8, [fn(x, y).astype(np.uint8) for fn in CMPF])
    with np.errstate(all="ignore"):
        fast = "fastmath = #arith.fastmath<none>"
        add("float_bin", op_module("float_bin", "f32", "f32", [(n, fast) for n, _ in FLOAT_BIN]),
            [x, y], np.float32, [fn(x, y).astype(np.float32) for _, fn in FLOAT_BIN])
        add("float_unary", op_module("float_unary", "f32", "f32", [(n, "") for n, _ in FLOAT_UNARY], nargs=1),
            [x], np.float32, [fn(x).astype(np.float32) for _, fn in FLOAT_UNARY])
        add("fptosi", op_module("fptosi_k", "f32", "i32", [("arith.fptosi", ""), ("arith.fptoui", "")], nargs=1),
            [x], np.int32, [fptosi32(x), fptoui32(x)])
    i = edge_ints(np.int32, rng)
    add("ext_i32_i64", op_module("ext_k", "i32", "i64", [("arith.extsi", ""), ("arith.extui", "")], nargs=1),
        [i], np.int64, [i.astype(np.int64), i.view(np.uint32).astype(np.int64)])
    j = edge_ints(np.int64, rng)
    add("trunc_i64_i16", op_module("trunc_k", "i64", "i16", [("arith.trunci", "")], nargs=1), [j], np.int16,
        [j.astype(np.int16)])
    add("sitofp", op_module("itofp_k", "i32", "f32", [("arith.sitofp", ""), ("arith.uitofp", "")], nargs=1),
        [i], np.float32, [i.astype(np.float32), i.view(np.uint32).astype(np.float32)])
    add("bitcast", op_module("bitcast_k", "f32", "i32", [("arith.bitcast", "")], nargs=1), [x], np.int32,
        [x.view(np.int32)])
    add("trunc_f16", op_module("truncf16_k", "f32", "f16", [("arith.truncf", "")], nargs=1), [x * 1e4],
        np.float16, [(x * 1e4).astype(np.float16)])
    tiny = (x * 1e-6).astype(np.float32)  # f16 subnormals
    add("trunc_f16_subnormal", op_module("truncf16s_k", "f32", "f16", [("arith.truncf", "")], nargs=1), [tiny],
        np.float16, [tiny.astype(np.float16)])
    add("trunc_bf16", op_module("truncbf16_k", "f32", "bf16", [("arith.truncf", "")], nargs=1), [x * 1.001],
        np.uint16, [bf16_bits(x * np.float32(1.001))])
    h = x.astype(np.float16)
    add("ext_f16", op_module("extf16_k", "f16", "f32", [("arith.extf", "")], nargs=1), [h], np.float32,
        [h.astype(np.float32)])
    add("f16_arith", op_module("f16_arith_k", "f16", "f16", [("arith.addf", ""), ("arith.mulf", ""),
                                                             ("arith.divf", "")]),
        [h, h[::-1].copy()], np.float16, [h + h[::-1], h * h[::-1], h / h[::-1]])
    return out


CONSTANTS = """
"builtin.module"() ({
  "tt.func"() <{function_type = (!tt.ptr<i32>, !tt.ptr<f32>) -> (), sym_name = "const_k",
                sym_visibility = "public"}> ({
  ^bb0(%ip: !tt.ptr<i32>, %fp: !tt.ptr<f32>):
    %r = "tt.make_range"() <{end = 4 : i32, start = 0 : i32}> : () -> tensor<4xi32>
    %c = "arith.constant"() <{value = dense<[7, -1, 2147483647, -2147483648]> : tensor<4xi32>}>
         : () -> tensor<4xi32>
    %h = "arith.constant"() <{value = dense<"0x0000803F000000C00000807F0000C07F"> : tensor<4xf32>}>
         : () -> tensor<4xf32>
    %ps = "tt.splat"(%ip) : (!tt.ptr<i32>) -> tensor<4x!tt.ptr<i32>>
    %pi = "tt.addptr"(%ps, %r) : (tensor<4x!tt.ptr<i32>>, tensor<4xi32>) -> tensor<4x!tt.ptr<i32>>
    "tt.store"(%pi, %c) : (tensor<4x!tt.ptr<i32>>, tensor<4xi32>) -> ()
    %fs = "tt.splat"(%fp) : (!tt.ptr<f32>) -> tensor<4x!tt.ptr<f32>>
    %pf = "tt.addptr"(%fs, %r) : (tensor<4x!tt.ptr<f32>>, tensor<4xi32>) -> tensor<4x!tt.ptr<f32>>
    "tt.store"(%pf, %h) : (tensor<4x!tt.ptr<f32>>, tensor<4xf32>) -> ()
    "tt.return"() : () -> ()
  }) : () -> ()
}) : () -> ()
"""


def test_non_splat_constants_list_and_hex_forms() -> None:
    lowered = lower_ttir(CONSTANTS)
    ints, floats = np.zeros(4, np.int32), np.zeros(4, np.float32)
    got_i, got_f = run_c_kernels([KernelCall(None, {}, {}, [ints, floats], (1,), lowered)], HOST_ISA)[0]
    assert got_i.tolist() == [7, -1, 2**31 - 1, -(2**31)]
    assert got_f[:3].tolist() == [1.0, -2.0, float("inf")] and np.isnan(got_f[3])


@pytest.fixture(scope="module", params=[HOST_ISA, RISCV_ISA])
def results(request: pytest.FixtureRequest, cases) -> dict[str, list[np.ndarray]]:
    names = list(cases)
    runs = run_c_kernels([cases[n][0] for n in names], request.param)
    return {n: r for n, r in zip(names, runs, strict=True)}


CASE_NAMES = ([f"int_{t}" for t in ("i32", "i64", "i16", "i8")] + [f"cmpi_{t}" for t in ("i32", "i64", "i16", "i8")]
              + ["cmpf", "float_bin", "float_unary", "fptosi", "ext_i32_i64", "trunc_i64_i16", "sitofp", "bitcast",
                 "trunc_f16", "trunc_f16_subnormal", "trunc_bf16", "ext_f16", "f16_arith"])
OP_NAMES = {f"int_{t}": INT_OPS for t in ("i32", "i64", "i16", "i8")} | {
    "float_bin": [n for n, _ in FLOAT_BIN], "float_unary": [n for n, _ in FLOAT_UNARY]}


@pytest.mark.parametrize("name", CASE_NAMES)
def test_op_semantics(name: str, cases, results) -> None:
    _call, expected = cases[name]
    got = results[name][-1].reshape(len(expected), N)
    inexact = name in ("float_unary",)  # libm vs numpy: last-ulp differences
    for k, want in enumerate(expected):
        label = f"{name}: op {k} ({OP_NAMES.get(name, [name] * len(expected))[k]})"
        if inexact:
            assert_match([got[k]], [np.asarray(want)], rtol=2e-6, atol=1e-30, what=label)
        else:
            g, w = got[k], np.asarray(want).astype(got.dtype)
            if OP_NAMES.get(name, [""] * len(expected))[k] in ("arith.maxnumf", "arith.minnumf"):
                assert_match([g], [w], rtol=0, atol=0, what=label)  # fmax(-0, +0) may be either zero
            elif np.issubdtype(g.dtype, np.floating):
                same = (g.view(np.uint8) == w.view(np.uint8)).reshape(N, -1).all(axis=1) | (np.isnan(g) & np.isnan(w))
                assert same.all(), f"{label}: got {g[~same][:4]} want {w[~same][:4]} at {np.flatnonzero(~same)[:4]}"
            else:
                bad = g != w
                assert not bad.any(), f"{label}: got {g[bad][:4]} want {w[bad][:4]} at {np.flatnonzero(bad)[:4]}"
