"""Tensors updated in place (issue 29): an output whose initial data the kernel reads gets its input data and
its expected data, inferred from the kernel's TTIR or named in the module's INOUT; real frontend, clang, QEMU."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from plugin_helpers import read_results, results_file

from pytest_rvtune.golden import read_txt

#: x += 1 in place; {inout} is an optional INOUT line
SOURCE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def {name}_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)


def get_{name}_kernel_autotune_config():
    return [triton.Config({{"BLOCK": 16}})]


CASES = {{"small": dict(n=75)}}
{inout}

def make_inputs(case, seed):
    return {{"x": torch.randn(case["n"], generator=torch.Generator().manual_seed(seed))}}


def reference(inputs, case):
    inputs["x"] += 1.0  # as the kernel does: in place (the golden input data must stay make_inputs')
    return {{"x": inputs["x"]}}


def launch(kernel, inputs, case):
    kernel[lambda META: (triton.cdiv(case["n"], META["BLOCK"]),)](inputs["x"], case["n"])
'''


def roles(project: pytest.Pytester, name: str) -> list[tuple[str, str, str]]:
    manifest = json.loads((project.path / "golden" / name / "manifest.json").read_text())
    return [(f["tensor"], f["role"], f["file"]) for f in manifest["cases"]["small"]["variants"][""]["files"]]


def test_a_tensor_updated_in_place_gets_its_input_and_expected_data(project: pytest.Pytester,
                                                                    add_kernel: Callable[..., Path]) -> None:
    add_kernel("ip_inferred", source=SOURCE.format(name="ip_inferred", inout=""))
    add_kernel("ip_declared", source=SOURCE.format(name="ip_declared", inout='INOUT = {"x"}'))
    # INOUT overrides the inference: declared empty, x is a plain output, zeroed before the run: wrong answer,
    # which is what every in-place kernel got before (x + 1 expected, 0 + 1 computed)
    add_kernel("ip_none", source=SOURCE.format(name="ip_none", inout="INOUT = set()"))
    done = subprocess.run([sys.executable, "-m", "pytest_rvtune.cli", "golden", "generate", "--kernels-dir",
                           str(project.path / "kernels")], capture_output=True, text=True, cwd=project.path)
    assert done.returncode == 0, done.stderr
    result = project.runpytest("--rvtune-case", "small", "--rvtune-target", "qemu", "--rvtune-target", "host",
                               "-p", "no:randomly")
    result.assert_outcomes(passed=4, failed=2)
    outcomes = {(r["kernel"], r["machine"]["target"]): r["outcome"] for r in read_results(results_file(project))}
    assert outcomes == {(k, t): ("wrong" if k == "ip_none" else "passed")
                        for k in ("ip_inferred", "ip_declared", "ip_none") for t in ("qemu", "host")}
    for name in ("ip_inferred", "ip_declared"):
        assert roles(project, name) == [("x", "input", "matrix_1x75_1.txt"),
                                        ("x", "expected", "matrix_1x75_1_expected.txt")]
    assert roles(project, "ip_none") == [("x", "expected", "matrix_1x75_1.txt")]
    # the input file holds make_inputs' data, not the reference's updated copy
    x = torch.randn(75, generator=torch.Generator().manual_seed(0)).numpy()
    small = project.path / "golden" / "ip_inferred" / "small"
    assert (read_txt(small / "matrix_1x75_1.txt")[0] == x).all()
    assert (read_txt(small / "matrix_1x75_1_expected.txt")[0] == x + 1).all()


def test_inout_naming_no_output_is_refused(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("ip_stray", source=SOURCE.format(name="ip_stray", inout='INOUT = {"z"}'))
    result = project.runpytest("--rvtune-case", "small", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*INOUT names 'z', which reference() does not return*"])


ALIAS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def ip_alias_kernel(dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dx_ptr + offs, tl.load(dy_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def get_ip_alias_kernel_autotune_config():
    return [triton.Config({"BLOCK": 16})]


CASES = {"small": dict(n=75)}


def make_inputs(case, seed):
    return {"g": torch.randn(case["n"], generator=torch.Generator().manual_seed(seed))}


def reference(inputs, case):
    return {"g": inputs["g"] * 2.0}


def launch(kernel, inputs, case):  # dX written over dY, as Liger's RMSNorm backward does with in_place=True
    kernel[lambda META: (triton.cdiv(case["n"], META["BLOCK"]),)](inputs["g"], inputs["g"], case["n"])
'''


def test_a_tensor_passed_twice_is_one_buffer(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    # the generic harness refused it ("cannot alias buffers; write main_cpp"); now the second parameter gets the
    # first one's buffer, and the tensor (read through dy_ptr before dx_ptr writes it) is in-out
    add_kernel("ip_alias", source=ALIAS)
    result = project.runpytest("--rvtune-case", "small", "--rvtune-target", "qemu", "--rvtune-target", "host",
                               "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    records = read_results(results_file(project))
    assert [(c["name"], c["ok"]) for r in records for c in r["checks"]] == [("g", True), ("g", True)]
