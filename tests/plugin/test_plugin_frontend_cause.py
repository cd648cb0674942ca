"""A frontend error names its cause (issue 29): Triton's message stops at the caret of a call into a helper;
the helper's static_assert (the chained CompileTimeAssertionFailure) says what went wrong. Through the item's
message and `rvtune compile`'s; real Triton frontend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_rvtune import cli

SOURCE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _check(BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 64, "fc_assert needs BLOCK >= 64")


@triton.jit
def fc_assert_kernel(x_ptr, n, BLOCK: tl.constexpr):
    _check(BLOCK)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0, mask=offs < n)


def get_fc_assert_kernel_autotune_config():
    return [triton.Config({"BLOCK": 16})]


CASES = {"small": dict(n=5)}


def make_inputs(case, seed):
    return {"x": torch.zeros(case["n"])}


def reference(inputs, case):
    return {"x": torch.ones(case["n"])}


def launch(kernel, inputs, case):
    kernel[(1,)](inputs["x"], case["n"])
'''

CAUSE = ["    _check(BLOCK)", "    ^", "caused by CompileTimeAssertionFailure: at 2:4:",
         "def _check(BLOCK: tl.constexpr):", "*tl.static_assert(BLOCK >= 64*", "    ^", "fc_assert* needs BLOCK >= 64"]


def test_the_items_message_carries_the_cause(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("fc_assert", source=SOURCE)
    result = project.runpytest("--rvtune-case", "small", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(CAUSE, consecutive=True)


def test_rvtune_compile_carries_the_cause(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "kernels").mkdir()
    module = tmp_path / "kernels" / "fc_assert_cli.py"  # not the item test's module name (sys.modules is shared)
    module.write_text(SOURCE.replace("fc_assert", "fc_assert_cli"))
    code = cli.main(["compile", str(module), "--config", "BLOCK=16"])
    _, err = capsys.readouterr()
    assert code != 0
    pytest.LineMatcher(err.splitlines()).fnmatch_lines(CAUSE, consecutive=True)
