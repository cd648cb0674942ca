"""Golden data through the real pipeline (Triton frontend, our compiler, clang-19, QEMU and the host): 16-bit
float kernels, and imported golden files (`rvtune golden import`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from half_matmul import source
from plugin_helpers import read_results, results_file


def rvtune(project: pytest.Pytester, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_rvtune.cli", *args], capture_output=True, text=True,
                          check=False, cwd=project.path)


def test_fp16_and_bf16_matmul_pass_on_qemu_and_host(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("pg_h16", source=source("pg_h16", "float16"))
    add_kernel("pg_b16", source=source("pg_b16", "bfloat16"))
    done = rvtune(project, "golden", "generate", "--kernels-dir", str(project.path / "kernels"))
    assert done.returncode == 0, done.stderr
    for name, dtype in (("pg_h16", "fp16"), ("pg_b16", "bf16")):
        manifest = json.loads((project.path / "golden" / name / "manifest.json").read_text())
        files = manifest["cases"]["small"]["variants"][""]["files"]
        assert [(f["tensor"], f["role"], f["dtype"]) for f in files] == [
            ("a", "input", dtype), ("b", "input", dtype), ("c", "expected", dtype)]

    result = project.runpytest("--rvtune-case", "small", "--rvtune-target", "qemu", "--rvtune-target", "host",
                               "-p", "no:randomly")
    result.assert_outcomes(passed=8)
    records = read_results(results_file(project))
    assert len(records) == 8 and {r["outcome"] for r in records} == {"passed"}
    assert {(r["kernel"], r["machine"]["target"]) for r in records} == {
        (k, t) for k in ("pg_h16", "pg_b16") for t in ("qemu", "host")}
    for r in records:
        (check,) = r["checks"]
        assert check["name"] == "c" and check["ok"] and check["count"] == 0
        # fp32 accumulation in another order than the float64 reference may land one rounding step off (today
        # one fp16 element does, by 6.6e-4 relative: beyond the default TOLERANCE, within fp16's rtol 1e-3)
        assert check["max_rel"] <= (1e-3 if r["kernel"] == "pg_h16" else 1.6e-2)


def test_imported_golden_files_are_what_the_items_run_against(project: pytest.Pytester,
                                                              add_kernel: Callable[..., Path]) -> None:
    # y = x + 1 over 75 elements; x written like Triton_RVV's C++ writeMatrix (`%.6f ` per value), y like its
    # Python writer (`%.9f`): right for pi_right, off by one at index 5 for pi_wrong
    theirs = project.path / "theirs"
    theirs.mkdir()
    x = [round(0.37 * i - 9.0, 6) for i in range(75)]
    (theirs / "matrix_1x75_1.txt").write_text("1 75\n" + "".join(f"{v:.6f} " for v in x) + "\n")
    right = [v + 1.0 for v in x]
    wrong = [v + (2.0 if i == 5 else 1.0) for i, v in enumerate(x)]
    for name, y in (("pi_right", right), ("pi_wrong", wrong)):
        add_kernel(name, "good", configs=(16,))
        (theirs / f"{name}_y.txt").write_text("1 75\n" + " ".join(f"{v:.9f}" for v in y) + "\n")
        done = rvtune(project, "golden", "import", "--kernel", name, "--case", "small",
                      "--input", f"x={theirs / 'matrix_1x75_1.txt'}", "--expected", f"y={theirs / f'{name}_y.txt'}")
        assert done.returncode == 0, done.stderr

    result = project.runpytest("--rvtune-case", "small", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*pi_wrong [[]case small, BLOCK=16[]] on target qemu: wrong answer*",
                                 "*y: max abs error 1, max rel error *, first bad index 5, 1 element wrong*"])
    outcomes = {r["kernel"]: (r["outcome"], r["checks"][0]["first_bad"]) for r in read_results(results_file(project))}
    assert outcomes == {"pi_right": ("passed", -1), "pi_wrong": ("wrong", 5)}
    # the run left the imported files as they were: nothing generated over them
    manifest = json.loads((project.path / "golden" / "pi_wrong" / "manifest.json").read_text())
    assert manifest["cases"]["small"]["source"] == "imported"
    kept = project.path / "golden" / "pi_wrong" / "small" / "matrix_1x75_2.txt"
    assert kept.read_bytes() == (theirs / "pi_wrong_y.txt").read_bytes()
