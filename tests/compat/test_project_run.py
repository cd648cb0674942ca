"""A Triton_RVV-style checkout, imported, runs under pytest with its own harness, support library and data.

Everything is real: `rvtune import`, the Triton frontend on their undecorated kernel with `num_threads` configs,
our compiler, clang++ on their harness, QEMU (and the host), their output format parsed into a verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rvv_tree import make_tree

from pytest_rvtune.cli import main


def _run_pytest(root: Path, cache: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    results = root / "results.jsonl"
    env_cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-disable", "-q",
               "--rvtune-results", str(results), *args]
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | {"RVTUNE_CACHE_DIR": str(cache)}
    proc = subprocess.run(env_cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.is_file() else []
    return proc, records


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("target", ["qemu", "host"])
def test_every_config_passes_with_their_harness_unchanged(tmp_path, cache, target, capsys):
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root)]) == 0
    capsys.readouterr()
    proc, records = _run_pytest(root, cache, "--rvtune-target", target)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "4 passed" in proc.stdout
    assert sorted(r["config_id"] for r in records) == sorted(
        f"BLOCK_SIZE_M={m}-BLOCK_SIZE_N={n}-num_threads=1" for m in (4, 8) for n in (8, 16))
    for r in records:
        assert r["outcome"] == "passed" and r["kernel"] == "scale" and r["case"] == "default"
        assert len(r["samples_ns"]) == 1 and r["samples_ns"][0] > 0  # their "Average Time" line
        assert r["launches"] == 3  # RUN_COUNT
        assert r["checks"][0]["name"] == "out" and r["checks"][0]["ok"]


def test_a_wrong_expected_file_fails_every_config_and_k_selects(tmp_path, cache, capsys):
    root = make_tree(tmp_path / "repo", wrong=True)
    assert main(["import", str(root)]) == 0
    capsys.readouterr()
    proc, records = _run_pytest(root, cache, "--rvtune-target", "qemu", "-k", "scale and BLOCK_SIZE_M=4")
    assert proc.returncode == 1
    assert "2 failed" in proc.stdout and "2 deselected" in proc.stdout
    assert {r["outcome"] for r in records} == {"wrong"}
    assert "out" in records[0]["message"]


def test_data_changed_after_import_is_an_error_naming_the_file(tmp_path, cache, capsys):
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root)]) == 0
    capsys.readouterr()
    data = root / "benchmark/auto-tuner/scale/run/test_data/matrix_8x12_2.txt"
    data.write_text(data.read_text().replace("-6.000000", "-6.500000"))
    proc, records = _run_pytest(root, cache, "--rvtune-target", "host", "-k", "BLOCK_SIZE_M=4 and BLOCK_SIZE_N=8")
    assert proc.returncode == 1
    assert "matrix_8x12_2.txt changed since it was pinned" in proc.stdout
    assert [r["outcome"] for r in records] == ["error"]


def test_the_advice_for_changed_data_leads_to_a_passing_run(tmp_path, cache, capsys):
    """"changed since it was pinned: run `rvtune import` again" keeps the user's case and pins the new file."""
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root), "--case", "scale/tiny:M=8,N=12,RUN_COUNT=2"]) == 0
    data = root / "benchmark/auto-tuner/scale/run/test_data/matrix_8x12_1.txt"
    data.write_text(data.read_text() + "\n")  # same values, another file
    assert main(["import", str(root)]) == 0
    capsys.readouterr()
    proc, records = _run_pytest(root, cache, "--rvtune-target", "host", "-k", "BLOCK_SIZE_M=4 and BLOCK_SIZE_N=8")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [(r["outcome"], r["case"]) for r in records] == [("passed", "tiny")]


def _support_prints(root: Path, statement: str) -> None:
    header = root / "env_build/include/support/support.h"
    text = header.read_text()
    start = text.index("#define PRINT_KERNEL_RUNNING_TIME")
    end = text.index("\n", text.index("std::endl", start))
    header.write_text(text[:start] + "#define PRINT_KERNEL_RUNNING_TIME(Kernel, Value) \\\n" + statement +
                      text[end:])


def test_their_july_support_library_time_line_is_a_sample(tmp_path, cache, capsys):
    root = make_tree(tmp_path / "repo")
    _support_prints(root, '  std::cerr << "Running " << (Kernel) << " Time: " << (Value) << " s" << std::endl;')
    assert main(["import", str(root)]) == 0
    assert "PRINT_KERNEL_RUNNING_TIME prints `Running Triton Kernel Time: 0.00123 s`" in capsys.readouterr().out
    proc, records = _run_pytest(root, cache, "--rvtune-target", "host", "-k", "BLOCK_SIZE_M=4 and BLOCK_SIZE_N=8")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [r["outcome"] for r in records] == ["passed"] and len(records[0]["samples_ns"]) == 1


def test_a_time_line_no_format_reads_names_the_pattern_the_lines_and_the_fix(tmp_path, cache, capsys):
    root = make_tree(tmp_path / "repo")
    _support_prints(root, '  std::cerr << (Kernel) << " took " << (Value) << " seconds" << std::endl;')
    assert main(["import", str(root)]) == 1
    assert "FIX  output format: env_build/include/support/support.h:" in capsys.readouterr().out
    proc, records = _run_pytest(root, cache, "--rvtune-target", "host", "-k", "BLOCK_SIZE_M=4 and BLOCK_SIZE_N=8")
    assert proc.returncode == 1
    [record] = records
    assert record["outcome"] == "error"
    message = record["message"]
    assert "the harness reported no timing sample (looked for a stderr line matching '^Running Triton Kernel " \
           "(?:Average )?Time: " in message
    assert "format triton-rvv (" in message and "change [sample].regex" in message
    assert "Triton Kernel took " in message  # the lines it saw


def test_a_broken_module_fails_its_entry_only_with_the_reason(tmp_path, cache, capsys):
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root)]) == 0
    capsys.readouterr()
    module = root / "benchmark/src/triton/scale.py"
    module.write_text(module.read_text().replace("def get_scale_kernel_autotune_config(num_threads=1):",
                                                 "def get_scale_kernel_autotune_config(num_threads=1):\n"
                                                 "    raise RuntimeError('no configs today')"))
    proc, _ = _run_pytest(root, cache, "--rvtune-target", "host")
    assert proc.returncode == 1
    assert "1 failed" in proc.stdout
    assert "no configs today" in proc.stdout and "[triton_rvv.kernels.scale]" in proc.stdout


def test_two_block_pointer_kernels_in_one_harness_with_a_sized_getter(tmp_path, cache, capsys):
    from rvv_tree import add_pipe
    root = add_pipe(make_tree(tmp_path / "repo"))
    assert main(["import", str(root)]) == 0
    out = capsys.readouterr().out
    assert "2 kernel(s) (pipe_scale_kernel, pipe_shift_kernel)" in out and "(2 configs)" in out
    proc, records = _run_pytest(root, cache, "--rvtune-target", "qemu", "-k", "pipe")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the getter got N=12 from the case: COLS is the next power of two, in every config id
    assert sorted(r["config_id"] for r in records) == ["BLOCK_SIZE_M=2-COLS=16-num_threads=1",
                                                       "BLOCK_SIZE_M=4-COLS=16-num_threads=1"]
    assert all(r["outcome"] == "passed" for r in records)


def test_a_flagged_project_item_can_be_rerun_interleaved_as_it_ran(tmp_path, cache, capsys):
    """confirm.py re-runs a regression's ELFs: a Triton_RVV harness must get its own argv, its files at their
    relative paths and its output format again (not our harness options)."""
    from pytest_rvtune.results.compare import Thresholds
    from pytest_rvtune.results.confirm import confirm
    from pytest_rvtune.results.runs import load_run
    from pytest_rvtune.run_options import RunOptions
    from pytest_rvtune.targets.local import HostTarget

    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root)]) == 0
    capsys.readouterr()
    proc, records = _run_pytest(root, cache, "--rvtune-target", "host", "-k", "BLOCK_SIZE_M=4 and BLOCK_SIZE_N=8")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert records[0]["rerun"]["output_format"] == "triton-rvv"
    assert set(records[0]["rerun"]["run_files"]) == {"scale/run/test_data/matrix_8x12_1.txt",
                                                     "scale/run/test_data/matrix_8x12_2.txt"}
    (record,) = load_run(root / "results.jsonl").records
    confirmation = confirm(record, record, HostTarget(), RunOptions(), Thresholds(alpha=0.01), trials=7, seed=1)
    assert confirmation.trials == 7 and all(r > 0 for r in confirmation.ratios)


def test_a_shortlist_leaves_a_projects_items_alone(tmp_path, cache, capsys):
    """--rvtune-shortlist ranks kernel modules' configs; a project's items (no kernel module, no problem keys)
    all stay. They made collection fail with AttributeError (ProjectItemInfo has no spec) before."""
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root)]) == 0
    capsys.readouterr()
    earlier = {"kernel": "other", "case": "default", "config_id": "B=1", "config": {"B": 1}, "target": "qemu",
               "outcome": "passed", "samples_ns": [100, 110, 120], "timing_source": "emulated",
               "counters": {"launch_insns": 1000}}
    (root / "earlier.jsonl").write_text(json.dumps(earlier) + "\n")
    proc, _ = _run_pytest(root, cache, "--collect-only", "--rvtune-shortlist", "earlier.jsonl")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "4 tests collected" in proc.stdout
