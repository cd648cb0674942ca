"""Committed golden data that lost its manifest (issue 28, a weak case): before, the data was silently generated
afresh into the cache and used unchecked (a kernel module that drifted since would pass against itself); now every
item of the kernel is an error naming the missing manifest and how to restore it, and `rvtune golden verify` says
the same. Real parts: a tiny kernel module, `rvtune golden generate`, our compiler and QEMU.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import kernel_source

from pytest_rvtune.cli import main


def test_a_deleted_manifest_beside_golden_files_is_an_error_naming_it(project: pytest.Pytester,
                                                                      add_kernel: Callable[..., Path],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    add_kernel("fgo_manifest", configs=(16,))
    kernels = str(project.path / "kernels")
    assert main(["golden", "generate", "--kernel", "fgo_manifest", "--case", "small", "--kernels-dir", kernels]) == 0
    manifest = project.path / "golden" / "fgo_manifest" / "manifest.json"
    project.runpytest("--rvtune-case", "small", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    manifest.unlink()
    result = project.runpytest("--rvtune-case", "small", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)  # before: passed, on data generated again into the cache
    says = (f"golden manifest {manifest} is missing, but {manifest.parent} holds 2 golden file(s) (e.g. "
            f"small/matrix_1x75_1.txt): restore it from git (`git checkout -- {manifest}`), or regenerate it with "
            "`rvtune golden generate --kernel fgo_manifest`")
    assert says in result.stdout.str()
    capsys.readouterr()
    assert main(["golden", "verify", "--kernel", "fgo_manifest", "--kernels-dir", kernels, "--quick"]) == 1
    assert f"PROBLEM {says}" in capsys.readouterr().err
    assert main(["golden", "generate", "--kernel", "fgo_manifest", "--case", "small", "--kernels-dir", kernels]) == 0
    assert manifest.is_file()  # generate makes it again, as the message says
    project.runpytest("--rvtune-case", "small", "-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_reference_that_makes_nan_is_refused_naming_the_output_and_index(project: pytest.Pytester,
                                                                           add_kernel: Callable[..., Path]) -> None:
    source = kernel_source("fgo_nan", configs=(16,)).replace('return {"y": x + 1.0}',
                                                             'return {"y": torch.log(x) + 1.0}')  # log of randn < 0
    module = add_kernel("fgo_nan", source=source)
    result = project.runpytest("--rvtune-case", "small", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=0, failed=1)  # before: accepted, then "max abs error inf" for a right kernel
    result.stdout.fnmatch_lines([
        f"*kernel module {module}: reference() output 'y' of case small holds * NaN value(s) of 75, the first at flat "
        "index *: check reference() (a log or sqrt of a negative input, 0/0); if the kernel must make NaN there, set "
        "EXPECT_NAN = True in the module*"])
    module.write_text(source + "\nEXPECT_NAN = True\n")
    allowed = project.runpytest("--rvtune-case", "small", "-p", "no:cacheprovider")
    allowed.assert_outcomes(failed=1)  # data made; the kernel's numbers are not the NaNs: a wrong answer
    allowed.stdout.fnmatch_lines(["*wrong answer*"])


def test_a_non_contiguous_input_is_named_without_another_configs_id(project: pytest.Pytester,
                                                                    add_kernel: Callable[..., Path]) -> None:
    source = kernel_source("fgo_strided", configs=(16, 32)).replace(
        '"x": torch.randn(case["n"], generator=g)', '"x": torch.randn(2 * case["n"], generator=g)[::2]')
    module = add_kernel("fgo_strided", source=source)
    result = project.runpytest("--rvtune-case", "small", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    says = (f"kernel module {module} (case small): make_inputs() tensor 'x' (argument x_ptr) is not contiguous "
            "(shape (75,), strides (2,)): the kernel reads it as one dense block; return a contiguous tensor")
    out = result.stdout.str()
    assert out.count(says) >= 2, out
    # before: the BLOCK=32 item's message said "(case small, config BLOCK=16)": the config golden data was made for
    assert "config BLOCK=16)" not in out
