"""Issue 15, session-level faults end to end: an xdist worker killed mid-item, a typo'd table in rvtune.toml,
a damaged cache golden file. Each asserts what the user reads and that the other items still run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import by_kernel, kernel_source, read_results

from pytest_rvtune import cli

#: The launch of the "BLOCK=32" item kills its own xdist worker (as the OOM killer or a `kill -9` would). Only
#: while an item runs (PYTEST_CURRENT_TEST): collection calls launch() too, and must survive.
KILL_IN_LAUNCH = '''
def launch(kernel, inputs, case):
    import os, signal
    if "BLOCK=32" in os.environ.get("PYTEST_CURRENT_TEST", ""):
        os.kill(os.getpid(), signal.SIGKILL)
'''


def test_an_item_whose_xdist_worker_is_killed_is_counted_in_the_summary(
        project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    source = kernel_source("fs_killer", configs=(16, 32)).replace(
        "def launch(kernel, inputs, case):\n", KILL_IN_LAUNCH + "    _launch(kernel, inputs, case)\n\n\n"
        "def _launch(kernel, inputs, case):\n")
    add_kernel("fs_killer", source=source)
    add_kernel("fs_fine", configs=(16, 32))
    result = project.runpytest_subprocess("-n", "2", "--rvtune-case", "small", "--rvtune-results", "run.jsonl",
                                          "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running 'kernels/fs_killer.py::fs_killer[[]small-"
                                 "BLOCK=32[]]'*"])
    summary = [line for line in result.stdout.lines if line.startswith("rvtune: ")]
    assert len(summary) == 1 and summary[0].startswith(
        "rvtune: 3 passed, 0 wrong, 0 build-failed, 0 crashed, 0 timeout, 1 lost (xdist worker crashed mid-item: "
        "no verdict, no record); "), summary
    assert sorted(by_kernel(read_results(project.path / "run.jsonl"))) == [
        "fs_fine[BLOCK=16]", "fs_fine[BLOCK=32]", "fs_killer[BLOCK=16]"]  # every finished item's record kept


def test_a_targets_table_typo_names_the_table(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("fs_typo", configs=(16,))
    (project.path / "rvtune.toml").write_text('[target.board]\nhost = "k1"\n')
    result = project.runpytest("--rvtune-target", "board")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*target configuration: {project.path}/rvtune.toml: unknown table [[]target[]] "
                                 "(known tables: [[]targets[]], [[]triton_rvv[]]); did you mean [[]targets.board[]]?"])
    assert "unknown target" not in result.stderr.str()


def test_a_damaged_cache_golden_file_is_regenerated_and_the_item_passes(
        project: pytest.Pytester, add_kernel: Callable[..., Path], rvtune_cache_dir: Path) -> None:
    """Issue 15: a damaged file under .rvtune/cache/golden failed the item, blamed on a change of the module."""
    add_kernel("fs_cache", configs=(16,))
    # The manifest records the case; its files go to the cache (emu data is not committed).
    assert cli.main(["golden", "generate", "--kernel", "fs_cache", "--case", "emu",
                     "--kernels-dir", str(project.path / "kernels")]) == 0
    assert (project.path / "golden" / "fs_cache" / "manifest.json").is_file()
    files = sorted((rvtune_cache_dir / "golden" / "fs_cache" / "emu").glob("matrix_*.txt"))
    assert files
    good = files[0].read_bytes()
    files[0].write_bytes(good[: len(good) // 2])  # torn by a crash or a full disk
    result = project.runpytest("--rvtune-case", "emu")
    result.assert_outcomes(passed=1)
    assert "differs from the manifest" not in result.stdout.str() and files[0].read_bytes() == good
