"""`rvtune import`'s readers of their C++ harnesses and Python modules: every construct real harnesses use, and a
seeded fuzz over those constructs proving that no input makes either reader raise (harnesses written by us in
their conventions, never their code)."""

from __future__ import annotations

import ast
import contextlib
import random

import pytest
from harness_fuzz import random_harness

from pytest_rvtune.compat.harness_reader import parse_harness
from pytest_rvtune.compat.int_expr import IntExprError, evaluate
from pytest_rvtune.compat.launch_signature import derive_signature
from pytest_rvtune.compat.module_reader import parse_module
from pytest_rvtune.compat.project import TemplateError, format_template

PROLOGUE = """
#include "support/support.h"
#define NUM_EXPERTS 8
#define SHAPE_OF(a) std::to_string(a)
int main(int argc, char *argv[]) {
  int M = 16, TopK = 2;
  int N = 32;
  int RUN_COUNT = 1;
  if (argc >= 2) {
    std::vector<int> Shape = splitStringToInts(argv[1]);
    M = Shape.at(0); N = Shape.at(1); RUN_COUNT = Shape.at(2);
  }
  int padded = 2008, blocks = padded / moe_kernel_BLOCK_SIZE_M;
  int tmp = 3;
  tmp = 4;
  float *a = (float *)malloc(M * N * sizeof(float));
  float *out = (float *)malloc(M * N * sizeof(float));
  int* ids = (int*)malloc(padded * sizeof(int));
  float sm_scale = 1.0f / sqrtf(64.0f);
  int64_t stride = N;
  double eps = 1e-5;
  std::string shape = std::to_string(M) + "x" + std::to_string(N);
"""
EPILOGUE = """
  moe_kernel_wrap(1, 1, 1, 1, moe_kernel, a, ids, out, M, stride, sm_scale, eps, 2.5f, 7, M * N);
  return 0;
}
"""


def _getdb(expr: str) -> tuple[list[str], list[tuple[int, str, str]]]:
    info = parse_harness(PROLOGUE + f'  std::string f = getDB("moe", {expr}, 1);\n' + EPILOGUE)
    return info.data, [(u.line, u.construct, u.why) for u in info.unreadable]


@pytest.mark.parametrize(("expr", "path"), [
    ('std::to_string(M) + "x" + std::to_string(N)', "moe/run/test_data/matrix_{M}x{N}_1.txt"),
    ('std::to_string(1) + "x" + std::to_string(M)', "moe/run/test_data/matrix_1x{M}_1.txt"),  # their fused_moe
    ('std::to_string(M * TopK) + "x" + std::to_string(N)', "moe/run/test_data/matrix_{M * 2}x{N}_1.txt"),
    ("std::to_string(padded)", "moe/run/test_data/matrix_2008_1.txt"),  # a local assigned once
    ("std::to_string(NUM_EXPERTS) + \"x\" + std::to_string((size_t)N)", "moe/run/test_data/matrix_8x{N}_1.txt"),
    ("std::to_string(static_cast<int>(M) / 4 - 1)", "moe/run/test_data/matrix_{M / 4 - 1}_1.txt"),
    ("std::to_string(0x10)", "moe/run/test_data/matrix_16_1.txt"),
    ("shape", "moe/run/test_data/matrix_{M}x{N}_1.txt"),  # a string variable
    ('"{x}" + std::to_string(N)', "moe/run/test_data/matrix_{{x}}{N}_1.txt"),  # braces stay literal
    ("std::to_string(blocks)", "moe/run/test_data/matrix_{2008 / BLOCK_SIZE_M}_1.txt"),  # a config value
])
def test_getdb_paths_are_read_as_templates(expr, path):
    data, unreadable = _getdb(expr)
    assert unreadable == []
    assert data == [path]


@pytest.mark.parametrize(("expr", "construct", "why"), [
    ("std::to_string(next_power_of_2(N))", "next_power_of_2(N)", "a call of next_power_of_2()"),
    ("SHAPE_OF(M)", "SHAPE_OF(M)", "not a string literal"),
    ("std::to_string(tmp)", "tmp", "tmp is assigned more than once"),
    ("std::to_string(undeclared)", "undeclared", "neither an argv field, a macro, nor a local"),
    ("std::to_string(sm_scale)", "sm_scale", "sm_scale is declared float, not an integer"),
    ("std::to_string(1.5)", "1.5", "not an integer literal"),
])
def test_an_unreadable_construct_names_its_line_and_why(expr, construct, why):
    data, unreadable = _getdb(expr)
    assert data == []
    [(line, got, message)] = unreadable
    assert line == PROLOGUE.count("\n") + 1
    assert got.startswith(construct) and why in message


def test_a_two_argument_getdb_is_named_as_not_compiling_against_their_support_library():
    info = parse_harness('int main() {\n  int M = 4;\n  std::string f = getDB(std::to_string(M), 1);\n}\n')
    [u] = info.unreadable
    assert (u.line, u.construct) == (3, "getDB(std::to_string(M), 1)")
    assert "getDB with 2 argument(s)" in u.why and "getDB(kernel_name, Shape, index)" in u.why


def test_scalar_types_come_from_declarations_and_literals():
    info = parse_harness(PROLOGUE + EPILOGUE)
    assert info.wrap_calls["moe_kernel"] == ["a", "ids", "out", "M", "stride", "sm_scale", "eps", "2.5f", "7",
                                             "M * N"]
    assert info.pointer_types == {"a": "fp32", "out": "fp32", "ids": "i32"}
    types = [info.c_type_of(a) for a in info.wrap_calls["moe_kernel"][3:]]
    # a double reaches triton-cpu's launcher as a float (Python floats are fp32 in Triton)
    assert types == ["i32", "i64", "fp32", "fp32", "fp32", "i32", "i32"]
    assert info.c_type_of("(float)M") == "fp32" and info.c_type_of("some_call(M)") is None


def test_commented_and_disabled_code_is_not_read_and_strings_are_not_comments():
    info = parse_harness('int main() {\n  int M = 4;\n  // getDB("x", std::to_string(M), 9);\n#if 0\n'
                         '  getDB("x", std::to_string(M), 8);\n#endif\n'
                         '  std::string f = getDB("k//v", "a" + std::to_string(M), 2); /* getDB( */\n}\n')
    assert info.data == ["k//v/run/test_data/matrix_a4_2.txt"] and info.unreadable == []


def test_template_fields_are_evaluated_as_c_integer_arithmetic():
    assert format_template("matrix_{M * TopK}x{(N + 3) / 4}_{{x}}_{name}.txt",
                           {"M": 5, "TopK": 2, "N": 10, "name": "a"}) == "matrix_10x3_{x}_a.txt"
    assert evaluate("-7 / 2", {}) == -3 and evaluate("-7 % 2", {}) == -1  # C truncates toward zero
    with pytest.raises(TemplateError, match="gives no TopK"):
        format_template("{M * TopK}", {"M": 1})
    with pytest.raises(TemplateError, match="not a template"):
        format_template("a{b", {})
    for bad in ("__import__('os')", "M ** 2", "M.real", "[M]", "1.5 * M"):
        with pytest.raises(IntExprError):
            evaluate(bad, {"M": 2})


# ------------------------------------------------------------------------------------------ Python launches
MODULE = '''
import math
import triton
import triton.language as tl


def attn_kernel(q_ptr, o_ptr, stride_qm, stride_qk, N, scale, eps, BLOCK: tl.constexpr):
    pass


def benchmark_triton(q, o, sm_scale, D):
    fn_jit = triton.jit(attn_kernel)
    tuned = triton.runtime.Autotuner(fn=fn_jit, arg_names=fn_jit.arg_names, configs=[], key=[])
    Z, N = q.shape

    def run():
        tuned[(1,)](q, o, q.stride(0), q.stride(1), N, sm_scale, 1e-5)
    run()


if __name__ == "__main__":
    D_test = 64
    scale_test = 1.0 / math.sqrt(D_test)
    benchmark_triton(None, None, scale_test, D_test)
'''


def test_the_python_launch_tells_floats_from_ints_through_names_parameters_and_call_sites():
    info = parse_module(MODULE)
    assert info.error is None
    kinds = [k for k, _ in info.launch_kinds["attn_kernel"]]
    assert kinds == [None, None, "int", "int", "int", "float", "float"]
    assert "1.0 / math.sqrt(D_test)" in info.launch_kinds["attn_kernel"][5][1]


def _attn_signature(c_scale: str, module: str = MODULE):
    info = parse_module(module)
    harness = parse_harness(f"int main() {{\n float *q = 0; float *o = 0; int N = 4; {c_scale}\n"
                            "  attn_kernel_wrap(1, 1, 1, 1, attn_kernel, q, o, N, N, scale, 1e-5f);\n}\n")
    return derive_signature("attn_kernel", info.kernels["attn_kernel"], info.launches["attn_kernel"],
                            harness.wrap_calls["attn_kernel"], harness.pointer_types, harness.c_type_of,
                            info.launch_kinds["attn_kernel"], info.launch_ranks["attn_kernel"])


def test_a_float_scalar_is_typed_fp32_from_the_harness_and_the_launch():
    table, problems = _attn_signature("float scale = 0.125f;")
    assert problems == []
    assert table == {"q_ptr": "*fp32", "o_ptr": "*fp32", "stride_qm": "i32", "stride_qk": 1, "N": "i32",
                     "scale": "fp32", "eps": "fp32"}


def test_a_harness_and_launch_that_disagree_on_a_scalar_are_a_problem_not_a_silent_type():
    table, problems = _attn_signature("int scale = 1;")
    assert table["scale"] == "i32"
    [problem] = problems
    assert "scale: the harness passes `scale` (i32) where the Python launch passes `1.0 / math.sqrt(D_test)`" in problem
    assert 'set scale = "fp32"' in problem


def test_a_scalar_neither_side_tells_is_assumed_i32_and_said_so():
    module = MODULE.replace("benchmark_triton(None, None, scale_test, D_test)", "benchmark_triton(*args)")
    table, problems = _attn_signature("auto scale = make_scale();", module)
    assert table["scale"] == "i32"
    assert any(p.startswith("scale: cannot tell its type") and "i32 assumed" in p for p in problems)


# ------------------------------------------------------------------------------------------ fuzz
def test_fuzz_the_harness_reader_never_raises():
    rng = random.Random(26)
    seen_data = seen_unreadable = 0
    for _ in range(1000):
        text = random_harness(rng)
        info = parse_harness(text)  # must not raise, whatever the text
        for template in info.data:
            with contextlib.suppress(TemplateError):  # named, never another exception
                format_template(template, dict.fromkeys(["M", "N", "K", "TopK", "x", "BLOCK"], 3))
        for a in (arg for args in info.wrap_calls.values() for arg in args):
            info.c_type_of(a)
        seen_data += bool(info.data)
        seen_unreadable += bool(info.unreadable)
    assert seen_data > 25 and seen_unreadable > 300  # the generator reaches both sides


_PY_LINES = [
    "def {k}_kernel(a_ptr, n, s, B: tl.constexpr):\n    pass", "def get_{k}_kernel_autotune_config(D, num_threads=1):"
    "\n    return []", "def benchmark_triton({v}, {v}2):\n    f = triton.jit({k}_kernel)\n    f[(1,)]({args})",
    "{v} = {val}", "{v}, {v}2 = t.shape", "benchmark_triton({args})", "if __name__ == '__main__':\n    {v} = {val}",
    "def f({v}):\n    return f({v})", "x = lambda: f[g]({args})", "class C:\n    pass", "{v} = {v}",
    "def g(*a, **k):\n    g[(1,)](*a)",
]


def _py_text(rng: random.Random) -> str:
    values = ["1.0", "2", "1 / n", "math.sqrt(2)", "t.stride(-1)", "t.stride(x)", "t.stride(0)", "{v}", "None",
              "int(3)", "-1", "2 ** 0.5", "[1, 2]", "t.shape[0]", "'s'"]

    def fill(template: str) -> str:
        v = rng.choice(["a", "b", "sm", "n"])
        args = ", ".join(rng.choice(values).replace("{v}", v) for _ in range(rng.randint(0, 5)))
        return template.format(k=rng.choice(["moe", "attn"]), v=v, val=rng.choice(values).replace("{v}", v),
                               args=args)

    text = "import math\nimport triton\nimport triton.language as tl\n\n" + "\n\n".join(
        fill(rng.choice(_PY_LINES)) for _ in range(rng.randint(1, 12)))
    if rng.random() < 0.15:
        cut = rng.randint(0, len(text))
        text = text[:cut] + rng.choice(["(", "\x00", "def", "[[[[", "\n    ", "'''", "(" * 300])
    return text


def test_fuzz_the_module_reader_never_raises():
    rng = random.Random(2607)
    parsed = errors = launched = 0
    for _ in range(800):
        info = parse_module(_py_text(rng))  # must not raise
        if info.error:
            errors += 1
            continue
        parsed += 1
        for kernel, args in info.launches.items():
            launched += 1
            derive_signature(kernel, info.kernels[kernel], args, None, {}, None, info.launch_kinds.get(kernel),
                             info.launch_ranks.get(kernel))
    assert parsed > 300 and errors > 30 and launched > 50


def test_an_unparsable_module_is_an_error_with_its_line():
    assert parse_module("def f(:\n  pass\n").error == "line 1: syntax error (invalid syntax)"
    assert "cannot parse" in (parse_module("x = 1\x00").error or "")
    assert parse_module("x = " + "(" * 400 + "1" + ")" * 400).error is not None
    assert isinstance(ast.parse("x"), ast.Module)
