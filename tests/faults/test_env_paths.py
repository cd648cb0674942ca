"""Directories named by the environment (issue 28, bad case 5 and a weak case): RVTUNE_CACHE_DIR (and
RVTUNE_TOOLS_DIR, RVTUNE_GOLDEN_DIR) are made absolute and checked once at start-up; a value that cannot be a
directory is one usage error naming the variable, not one errno line (or a "crash") per item.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import REPO, read_results


def test_a_relative_cache_dir_works_from_the_run_directory(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                                           rvtune_cache_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    add_kernel("fep_relative", configs=(16,))
    relative = os.path.relpath(rvtune_cache_dir, project.path)  # the shared cache, named from the project
    monkeypatch.setenv("RVTUNE_CACHE_DIR", relative)
    result = project.runpytest("--rvtune-case", "small", "--rvtune-results=run.jsonl", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)  # before: every item "crashed", exit 127 (die_with_parent not found)
    (record,) = read_results(project.path / "run.jsonl")
    assert Path(record["rerun"]["elf"]).is_relative_to(rvtune_cache_dir.resolve())


@pytest.mark.parametrize("variable", ["RVTUNE_CACHE_DIR", "RVTUNE_TOOLS_DIR", "RVTUNE_GOLDEN_DIR"])
@pytest.mark.parametrize("kind", ["a file", "under a file", "a symlink loop"])
def test_a_directory_variable_that_cannot_be_one_is_a_usage_error_naming_it(
        project: pytest.Pytester, add_kernel: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
        variable: str, kind: str) -> None:
    add_kernel("fep_bad", configs=(16,))
    plain = project.path / "plain.txt"
    plain.write_text("not a directory")
    if kind == "a file":
        value, says = plain, f"{plain} is a file, not a directory; point it at a directory (or unset it)"
    elif kind == "under a file":
        value, says = plain / "cache", f"is under {plain}, which is a file, not a directory"
    else:
        (project.path / "loop-a").symlink_to(project.path / "loop-b")
        (project.path / "loop-b").symlink_to(project.path / "loop-a")
        value, says = project.path / "loop-a", "cannot be resolved ("
    monkeypatch.setenv(variable, str(value))
    result = project.runpytest("--rvtune-case", "small", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # before: one errno line per item, naming no variable
    err = result.stderr.str()
    assert f"ERROR: {variable}={value} (" in err and says in err, err
    assert "Traceback" not in err


def test_the_cli_names_the_variable_too(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    env = {**os.environ, "RVTUNE_CACHE_DIR": str(plain)}
    done = subprocess.run([sys.executable, "-m", "pytest_rvtune.cli", "cache", "verify"], env=env, cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith(f"rvtune cache: RVTUNE_CACHE_DIR={plain} (the build, data and count caches): "
                                  f"{plain} is a file, not a directory"), done.stderr
