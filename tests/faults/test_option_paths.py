"""Paths given to options that cannot be what the option needs (issue 28, bad case 7): --rvtune-results naming
a symlink loop, a directory or a path under a file is one usage error naming the option (a loop was an
INTERNALERROR traceback); the earlier-run options say the same of a loop.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.mark.parametrize("kind", ["a symlink loop", "a directory", "under a file"])
def test_a_results_path_that_cannot_be_a_file_is_a_usage_error(project: pytest.Pytester,
                                                               add_kernel: Callable[..., Path], kind: str) -> None:
    add_kernel("fop_results", configs=(16,))
    if kind == "a symlink loop":
        (project.path / "loop-a").symlink_to(project.path / "loop-b")
        (project.path / "loop-b").symlink_to(project.path / "loop-a")
        value, says = "loop-a", "--rvtune-results loop-a: cannot be resolved (Symlink loop from *); give a file path"
    elif kind == "a directory":
        value, says = "kernels", f"--rvtune-results kernels: {project.path / 'kernels'} is a directory; give a file *"
    else:
        value = "kernels/fop_results.py/run.jsonl"
        says = (f"--rvtune-results {value}: "
                f"{project.path / 'kernels' / 'fop_results.py'} is a file, so it cannot hold run.jsonl; give another "
                "file path")
    result = project.runpytest("--rvtune-case", "small", f"--rvtune-results={value}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {says}"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("option", ["--rvtune-resume", "--rvtune-compare", "--rvtune-shortlist"])
def test_an_earlier_run_that_is_a_symlink_loop_is_a_usage_error(project: pytest.Pytester,
                                                                add_kernel: Callable[..., Path], option: str) -> None:
    add_kernel("fop_runs", configs=(16,))
    (project.path / "loop-a").symlink_to(project.path / "loop-b")
    (project.path / "loop-b").symlink_to(project.path / "loop-a")
    result = project.runpytest("--rvtune-case", "small", f"{option}=loop-a", "--co", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option}: *loop-a*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_import_of_a_symlink_loop_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_rvtune.cli import main
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    assert main(["import", str(tmp_path / "loop-a")]) == 2  # before: a RuntimeError traceback
    assert capsys.readouterr().err == (f"rvtune import: {tmp_path / 'loop-a'}: cannot be resolved (Symlink loop from "
                                       f"'{tmp_path / 'loop-a'}'); give the checkout's directory\n")
