"""The generic-form TTIR reader (ttir.py): the shapes of text the lowering depends on, read exactly."""

from __future__ import annotations

import pytest
import triton
import triton.language as tl

from pytest_rvtune.compiler.frontend import kernel_to_ttir
from pytest_rvtune.compiler.ttir import (
    Loc,
    TTIRParseError,
    Type,
    parse_function_type,
    parse_int_array,
    parse_loc,
    parse_module,
    parse_type,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("i32", Type("i32")),
    ("bf16", Type("bf16")),
    ("!tt.ptr<f16>", Type(pointee=Type("f16"))),
    ("tensor<4x8xf32>", Type("f32", shape=(4, 8))),
    ("tensor<16x!tt.ptr<i64>>", Type(pointee=Type("i64"), shape=(16,))),
    ("tensor<f32>", Type("f32", shape=())),
])
def test_types(text: str, expected: Type) -> None:
    assert parse_type(text) == expected
    assert str(parse_type(text)) == text


def test_unknown_type_is_named() -> None:
    with pytest.raises(TTIRParseError, match="vector<4xf32>"):
        parse_type("vector<4xf32>")


@pytest.mark.parametrize(("raw", "loc"), [
    ('"offs"("/k/a.py":28:12)', Loc("offs", "/k/a.py", 28)),
    ('"/k/a.py":32:14', Loc(None, "/k/a.py", 32)),
    ('callsite("/t/standard.py":43:13 at "/k/a.py":44:23)', Loc(None, "/k/a.py", 44)),  # the caller's line
    ('"acc"("b"("a"("/k/a.py":44:5)))', Loc("acc", "/k/a.py", 44)),
    ("unknown", Loc()),
])
def test_locations(raw: str, loc: Loc) -> None:
    assert parse_loc(raw) == loc


def test_attribute_helpers() -> None:
    assert parse_int_array("array<i32: 1, 0, 2>") == [1, 0, 2]
    assert parse_int_array("array<i32>") == []
    args, results = parse_function_type("(!tt.ptr<f32>, i32) -> (tensor<8xf32>, f32)")
    assert args == [Type(pointee=Type("f32")), Type("i32")]
    assert results == [Type("f32", shape=(8,)), Type("f32")]
    assert parse_function_type("() -> ()") == ([], [])


GENERIC = '''"builtin.module"() ({
  "tt.func"() <{function_type = (i32) -> (), sym_name = "k", sym_visibility = "public"}> ({
  ^bb0(%n: i32 loc("n"("/k.py":1:1))):
    %c:2 = "test.pair"(%n) <{s = "a}b>c", arr = array<i32: 1, 1>}> : (i32) -> (i32, i32) loc("/k.py":2:3)
    "cf.cond_br"(%c#1, %c#0)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (i32, i32) -> ()
  ^bb1(%x: i32 loc(unknown)):  // pred: ^bb0
    "tt.return"() : () -> () loc("/k.py":3:1)
  ^bb2:  // pred: ^bb0
    "tt.return"() : () -> ()
  }) {noinline = false} : () -> () loc("/k.py":1:1)
}) : () -> ()'''


def test_generic_module_structure() -> None:
    (func,) = parse_module(GENERIC)
    assert func.name == "tt.func" and func.props["sym_name"] == '"k"' and func.attrs["noinline"] == "false"
    entry, bb1, bb2 = func.regions[0].blocks
    assert entry.args[0][:2] == ("%n", Type("i32")) and entry.args[0][2].name == "n"
    pair, branch = entry.ops
    assert pair.results == ["%c#0", "%c#1"] and pair.props["s"] == '"a}b>c"'
    assert parse_int_array(pair.props["arr"]) == [1, 1] and pair.loc == Loc(None, "/k.py", 2)
    assert branch.operands == ["%c#1", "%c#0"] and branch.successors == ["^bb1", "^bb2"]
    assert bb1.label == "^bb1" and bb1.args[0][0] == "%x" and [o.name for o in bb2.ops] == ["tt.return"]


def test_truncated_module_names_the_line() -> None:
    with pytest.raises(TTIRParseError, match="TTIR line 4"):
        parse_module(GENERIC.split("%c:2")[0] + '%c = "x.y"(')


@triton.jit
def _loop_kernel(x_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(n):
        acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), acc)


def test_frontend_output_parses_with_kernel_names_and_lines() -> None:
    text = kernel_to_ttir(_loop_kernel, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 8})
    (func,) = parse_module(text)
    ops = func.regions[0].blocks[0].ops
    loop = next(op for op in ops if op.name == "scf.for")
    body = loop.regions[0].blocks[0]
    assert body.args[0][0] == "%i" and body.args[1][1] == Type("f32", shape=(8,))
    assert loop.loc.file == __file__ and any(op.name == "tt.dot" or op.loc.name == "acc" for op in body.ops)
