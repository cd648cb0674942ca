"""A kernel whose harness cannot be built (the 2-argument getDB of their July harnesses) runs in our generic
harness on its data, the expected output from its module's Python reference where no expected file exists (our own
files in the Triton_RVV format)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from rvv_tree import SCALE_HARNESS, SCALE_MODULE, make_tree
from test_variants import _pytest

from pytest_rvtune.cli import main
from pytest_rvtune.compat.harness_values import read_data
from pytest_rvtune.compat.project import read_project
from pytest_rvtune.compat.python_reference import find_reference

#: The scale kernel of rvv_tree with a launch function that takes its output, and a Python reference beside it.
MODULE = SCALE_MODULE.replace("scale_kernel", "twice_kernel").split("def benchmark_triton")[0] + '''
def run(x, y):
    M, N = x.shape
    fn_jit = triton.jit(twice_kernel)
    tuned = triton.runtime.Autotuner(fn_jit, fn_jit.arg_names, configs=get_twice_kernel_autotune_config(), key=[])
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)
    tuned[grid](x, y, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1))


def torch_twice(x):
    return x * FACTOR


def naive_unused(x):
    return x


FACTOR = 2.0

if __name__ == "__main__":
    x = torch.randn((8, 12))
    y = torch.empty_like(x)
    run(x, y)
    assert torch.allclose(y, torch_twice(x))
'''
# Their July harness style: getDB(shape, index), which their support.h does not declare.
HARNESS = SCALE_HARNESS.replace("scale_kernel", "twice_kernel").replace('getDB("scale", ', "getDB(")


def _tree(root: Path, factor: float = 2.0) -> Path:
    make_tree(root)
    (root / "benchmark/src/triton/twice.py").write_text(textwrap.dedent(MODULE).replace("FACTOR = 2.0",
                                                                                        f"FACTOR = {factor}"))
    (root / "benchmark/src/main/twice_kernel.cpp").write_text(HARNESS)
    data = root / "benchmark/auto-tuner/twice/run/test_data"
    data.mkdir(parents=True)
    source = root / "benchmark/auto-tuner/scale/run/test_data/matrix_8x12_1.txt"
    (data / "matrix_8x12_1.txt").write_text(source.read_text())  # the input only: no expected file
    return root


def test_the_reference_is_the_candidate_called_beside_the_launch(tmp_path):
    root = _tree(tmp_path / "repo")
    found = find_reference(root / "benchmark/src/triton/twice.py", "run")
    assert (found.name, found.candidates) == ("torch_twice", ("torch_twice", "naive_unused"))
    assert found.why == "module-level code calls it beside run()"
    assert find_reference(root / "benchmark/src/triton/scale.py", "benchmark_triton").name is None


def test_import_plans_the_generic_harness_with_the_reference_and_says_so(tmp_path, capsys):
    root = _tree(tmp_path / "repo")
    assert main(["import", str(root)]) == 1  # the harness's 2-argument getDB lines stay FIX lines
    out = capsys.readouterr().out
    assert ("ok   twice: plan: case default: generic harness: their harness does not compile "
            "(benchmark/src/main/twice_kernel.cpp:") in out
    assert ("expected: their python reference torch_twice (module-level code calls it beside run()); inputs x = "
            "twice/run/test_data/matrix_8x12_1.txt; expected y from their python reference torch_twice") in out
    entry = read_project(root / "rvtune.toml").entries["twice"]
    plan = entry.cases["default"].generic
    assert entry.launch == "run" and plan is not None
    assert (plan.harness, plan.args, plan.reference, plan.reference_outputs) == (
        "generic", {"x": "twice/run/test_data/matrix_8x12_1.txt"}, "torch_twice", ("y",))


def test_without_a_reference_it_is_a_fix_and_rvtune_toml_can_name_one(tmp_path, capsys):
    root = _tree(tmp_path / "repo")
    module = root / "benchmark/src/triton/twice.py"
    module.write_text(module.read_text().replace("    assert torch.allclose(y, torch_twice(x))\n", ""))
    main(["import", str(root)])
    out = capsys.readouterr().out
    assert ("FIX  twice: case default: generic harness: no expected file for y and no Python reference (none of "
            "torch_twice, naive_unused is called beside run()): set reference = \"<function of the module>\" in "
            "[triton_rvv.kernels.twice] of rvtune.toml and import again (candidates: torch_twice, naive_unused)"
            ) in out
    assert read_project(root / "rvtune.toml").entries["twice"].cases["default"].generic.harness == "none"
    toml = root / "rvtune.toml"
    toml.write_text(toml.read_text().replace('[triton_rvv.kernels.twice]\n',
                                             '[triton_rvv.kernels.twice]\nreference = "torch_twice"\n'))
    main(["import", str(root)])
    assert "expected: their python reference torch_twice (reference in [triton_rvv.kernels.twice])" \
        in capsys.readouterr().out
    assert read_project(toml).entries["twice"].cases["default"].generic.reference == "torch_twice"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("factor, verdicts", [(2.0, {"passed"}), (3.0, {"wrong"})])
def test_the_items_run_their_kernel_against_the_reference_output(tmp_path, cache, capsys, factor, verdicts):
    root = _tree(tmp_path / "repo", factor)
    main(["import", str(root)])
    capsys.readouterr()
    proc, records = _pytest(root, cache, "--rvtune-target", "qemu", "-k", "twice", "-n", "0")
    assert len(records) == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {r["outcome"] for r in records} == verdicts, proc.stdout[-3000:]
    assert all(r["harness"] == "generic" and "their python reference torch_twice" in r["harness_why"]
               for r in records)
    assert "4 " + verdicts.pop() in proc.stdout


def test_a_two_argument_getdb_through_a_shape_string_is_read_as_the_kernels_own_file():
    text = ('int M = 6; int N = 5;\nstd::string shape_str = std::to_string(M) + "x" + std::to_string(N);\n'
            'std::string input_file = getDB(shape_str, 1);\nreadMatrix(input_file.c_str(), input_ptr, m, n);\n'
            'std::string twice = std::to_string(M);\ntwice = "7";\n'
            'readMatrix(getDB(twice, 2).c_str(), other_ptr, m, n);\n')
    data = read_data(text, "soft")
    assert [(r.path({"M": 6, "N": 5}), r.buffer) for r in data.reads] == [
        ("soft/run/test_data/matrix_6x5_1.txt", "input_ptr")]  # `twice` is assigned twice: not read
    assert read_data(text).reads == ()  # without the kernel's directory, the 2-argument form names no file
