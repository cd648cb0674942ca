"""Kernels without a config getter (fixed block sizes, as their layer_norm/softmax/cross_entropy at the July 2025
revision): one item with the block values their launch uses. Our own modules in the Triton_RVV format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rvv_tree import SCALE_HARNESS, SCALE_MODULE, make_tree

import pytest_rvtune
from pytest_rvtune.cli import main
from pytest_rvtune.compat.project import read_project
from pytest_rvtune.compat.project_items import entry_configs

# The scale kernel of rvv_tree without its getter: block values from the launch's text (module constants) ...
# (jitted by a decorator, as their softmax_kernel: it is launched directly)
JITTED = SCALE_MODULE.replace("scale_kernel", "fixed_kernel").replace("def fixed_kernel(",
                                                                     "@triton.jit\ndef fixed_kernel(")
STATIC = JITTED.split("def get_fixed_kernel_autotune_config")[0] + '''
BM = 4
BN = 8


def run(shape, x):
    M, N = shape
    assert x.dim() == 2
    y = torch.empty((M, N), dtype=DTYPE)
    fixed_kernel[(triton.cdiv(M, BM) * triton.cdiv(N, BN),)](x, y, M, N, x.stride(0), x.stride(1), y.stride(0),
                                                            y.stride(1), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN)
    return y
'''
# ... or computed when it runs: recorded from the launch the module makes on import (their softmax.py does), or
# not known at all without running it (their layer_norm.py launches only under __main__).
COMPUTED = STATIC.replace("BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN", "BLOCK_SIZE_M=BM, BLOCK_SIZE_N=triton.next_power_of_2(N)")
AT_IMPORT = COMPUTED + '''

y_triton_cpu = run((8, 12), torch.zeros((8, 12)))   # runs the kernel when imported, as their softmax.py
print(y_triton_cpu)
'''


def _tree(root: Path, module: str) -> Path:
    make_tree(root)
    (root / "benchmark/src/triton/fixed.py").write_text(textwrap.dedent(module))
    harness = SCALE_HARNESS.replace("scale_kernel", "fixed_kernel").replace('getDB("scale"', 'getDB("fixed"')
    (root / "benchmark/src/main/fixed_kernel.cpp").write_text(harness)
    data = root / "benchmark/auto-tuner"
    (data / "fixed/run/test_data").mkdir(parents=True)
    for f in (data / "scale/run/test_data").iterdir():
        (data / "fixed/run/test_data" / f.name).write_text(f.read_text())
    return root


def _configs(root: Path) -> list[str]:
    project = read_project(root / "rvtune.toml")
    assert project is not None
    entry = project.entries["fixed"]
    return [c.id for c in entry_configs(entry, entry.cases["default"])]


def test_block_values_from_the_launchs_text_give_one_config(tmp_path, capsys):
    root = _tree(tmp_path / "repo", STATIC)
    assert main(["import", str(root)]) == 0
    out = capsys.readouterr().out
    assert "configs from its launch (no config getter: fixed block sizes, one config)" in out
    assert "(1 config: BLOCK_SIZE_M=4, BLOCK_SIZE_N=8, the block values its launch uses)" in out
    assert _configs(root) == ["BLOCK_SIZE_M=4-BLOCK_SIZE_N=8"]


def test_computed_block_values_come_from_the_launch_the_module_makes_on_import(tmp_path, capsys):
    root = _tree(tmp_path / "repo", AT_IMPORT)
    assert main(["import", str(root)]) == 0
    assert "(1 config: BLOCK_SIZE_M=4, BLOCK_SIZE_N=16, the block values its launch uses)" in capsys.readouterr().out
    assert _configs(root) == ["BLOCK_SIZE_M=4-BLOCK_SIZE_N=16"]


def test_values_known_only_when_it_runs_are_asked_for_and_a_space_gives_them(tmp_path, capsys):
    root = _tree(tmp_path / "repo", COMPUTED)
    assert main(["import", str(root)]) == 1
    out = capsys.readouterr().out
    assert ("fixed_kernel's block values (BLOCK_SIZE_M, BLOCK_SIZE_N) are computed when its launch runs, and its "
            "module launches nothing on import: give them with --space 'fixed:BLOCK_SIZE_M=<value>;"
            "BLOCK_SIZE_N=<value>'") in out
    assert "[triton_rvv.kernels.fixed]" not in (root / "rvtune.toml").read_text()
    assert main(["import", str(root), "--space", "fixed:BLOCK_SIZE_M=4;BLOCK_SIZE_N=8,16"]) == 0
    assert _configs(root) == ["BLOCK_SIZE_M=4-BLOCK_SIZE_N=8", "BLOCK_SIZE_M=4-BLOCK_SIZE_N=16"]


def test_the_one_item_runs_and_passes_with_their_harness(tmp_path, capsys):
    root = _tree(tmp_path / "repo", AT_IMPORT)
    assert main(["import", str(root)]) == 0
    capsys.readouterr()
    results = root / "results.jsonl"
    package_root = str(Path(pytest_rvtune.__file__).resolve().parent.parent)  # the plugin under test
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | {
        "RVTUNE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": package_root}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-disable", "-q",
                           "--rvtune-results", str(results), "--rvtune-target", "qemu", "-k", "fixed"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(r["config_id"], r["outcome"], r["harness"]) for r in records] == [
        ("BLOCK_SIZE_M=4-BLOCK_SIZE_N=16", "passed", "theirs")]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda e: e.__setitem__("configs", [{"BLOCK_SIZE_M": 1.5}]), "configs must be a list of tables of integer"),
    (lambda e: e.__delitem__("configs"), "give config_getter"),
])
def test_an_entry_without_getter_or_valid_configs_is_refused(tmp_path, capsys, edit, message):
    import tomlkit

    from pytest_rvtune.compat.project import ProjectError

    root = _tree(tmp_path / "repo", STATIC)
    assert main(["import", str(root)]) == 0
    capsys.readouterr()
    doc = tomlkit.parse((root / "rvtune.toml").read_text())
    edit(doc["triton_rvv"]["kernels"]["fixed"])
    (root / "rvtune.toml").write_text(tomlkit.dumps(doc))
    with pytest.raises(ProjectError, match=r"kernels\.fixed\]: " + message):
        read_project(root / "rvtune.toml")
