"""Per-value data (``matrix_BLOCK_SIZE_M_<v>_...``), a user-chosen space, and their kernel in our generic harness
where their harness cannot serve a value: on an MoE-like kernel of ours in the Triton_RVV format (moe_tree.py)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from moe_tree import make_moe_tree, padded_size
from rvv_tree import write_matrix

import pytest_rvtune
from pytest_rvtune.cli import main
from pytest_rvtune.compat.harness_values import read_data, values
from pytest_rvtune.compat.project import read_project
from pytest_rvtune.compat.project_items import entry_configs

DATA = "moe/run/test_data"


def _import(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["import", str(root), *args])
    return code, capsys.readouterr().out


def _pytest(root: Path, cache: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    import os
    results = root / "results.jsonl"
    results.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-disable", "-q",
           "--rvtune-results", str(results), *args]
    # the plugin under test, not whichever copy is installed (a worktree's tests run a worktree's plugin)
    package_root = str(Path(pytest_rvtune.__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | {
        "RVTUNE_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join(filter(None, [package_root,
                                                                                   os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.is_file() else []
    return proc, records


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


# ------------------------------------------------------------------------------------------ the harness's values
def test_declarations_are_evaluated_in_order_with_the_block_constant_and_the_datas_sizes():
    text = "int M = 6, E = 3;\nint total = 20, size = total / moe_kernel_BLOCK_SIZE_M;\nint bad = foo(M);"
    assert values(text, {"moe_kernel_BLOCK_SIZE_M": 8}) == {"moe_kernel_BLOCK_SIZE_M": 8, "M": 6, "E": 3,
                                                             "total": 20, "size": 2}
    # a size the data says replaces the hard-coded one, and what is computed from it follows
    assert values(text, {"moe_kernel_BLOCK_SIZE_M": 8}, {"total": 32})["size"] == 4


def test_reads_know_their_buffer_and_the_checked_output(tmp_path):
    root = make_moe_tree(tmp_path / "repo")
    data = read_data((root / "benchmark/src/main/moe_kernel.cpp").read_text())
    assert [(r.index, r.buffer) for r in data.reads] == [(1, "A"), (2, "W"), (3, "ref_output"),
                                                         (4, "sorted_token_ids"), (5, "expert_ids")]
    assert data.checks == {"real_output": "ref_output"}
    fourth = data.reads[3]
    assert fourth.bind(f"1x{padded_size(8)}", {}) == {"total_padded_tokens": padded_size(8)}
    assert fourth.bind("2x16", {}) is None  # the literal 1 must match


def _inline_reads(text: str) -> str:
    """The harness with each ``std::string fileN = getDB(...);`` inlined into its ``readMatrix(fileN.c_str(), ...)``."""
    import re
    calls = dict(re.findall(r"std::string (file\d) = (getDB\(.*\));\n", text))
    text = re.sub(r"  std::string file\d = getDB\(.*\);\n", "", text)
    for var, call in calls.items():
        text = text.replace(f"readMatrix({var}.c_str()", f"readMatrix({call}.c_str()")
    assert "std::string" not in text and text.count("readMatrix(getDB(") == 5
    return text


def test_a_getdb_call_inlined_into_readmatrix_is_read_like_a_named_one(tmp_path, capsys):
    named = make_moe_tree(tmp_path / "named", values=(4, 8))
    inline = make_moe_tree(tmp_path / "inline", values=(4, 8))
    harness = inline / "benchmark/src/main/moe_kernel.cpp"
    harness.write_text(_inline_reads(harness.read_text()))
    for root in (named, inline):
        data = read_data((root / "benchmark/src/main/moe_kernel.cpp").read_text())
        assert [(r.index, r.buffer) for r in data.reads] == [(1, "A"), (2, "W"), (3, "ref_output"),
                                                             (4, "sorted_token_ids"), (5, "expert_ids")]
        assert _import(root, capsys)[0] == 0
    tables = [read_project(root / "rvtune.toml").entries["moe"].cases["default"] for root in (named, inline)]
    assert tables[0] == tables[1]
    assert tables[1].variants[8].harness == "generic" and tables[1].variants[8].expected


# ------------------------------------------------------------------------------------------ import
def test_per_value_data_is_found_pinned_and_planned_per_harness(tmp_path, capsys):
    root = make_moe_tree(tmp_path / "repo")
    code, out = _import(root, capsys)
    assert code == 0, out
    assert "moe: data: data named by BLOCK_SIZE_M: values 4, 8, 16" in out
    assert "their harness for BLOCK_SIZE_M=4" in out
    em8 = padded_size(8)
    assert (f"generic harness for BLOCK_SIZE_M=8,16: their harness cannot serve it (sizes hard-coded): it opens "
            f"matrix_1x{padded_size(4)}_4.txt (BLOCK_SIZE_M=8's is matrix_BLOCK_SIZE_M_8_1x{em8}_4.txt)") in out
    project = read_project(root / "rvtune.toml")
    assert project is not None
    case = project.entries["moe"].cases["default"]
    assert case.variant_key == "BLOCK_SIZE_M" and sorted(case.variants) == [4, 8, 16]
    four, eight = case.variants[4], case.variants[8]
    # their harness opens unprefixed names: the value's own files are placed there
    assert four.harness == "theirs"
    assert four.files[f"{DATA}/matrix_1x{padded_size(4)}_4.txt"] == \
        f"{DATA}/matrix_BLOCK_SIZE_M_4_1x{padded_size(4)}_4.txt"
    assert four.files[f"{DATA}/matrix_6x12_1.txt"] == f"{DATA}/matrix_6x12_1.txt"  # shared by every value
    # our generic harness: the launch's parameters bound to the value's files and sizes
    assert eight.harness == "generic"
    assert eight.args == {"a": f"{DATA}/matrix_6x12_1.txt", "w": f"{DATA}/matrix_3x12_2.txt",
                          "sorted_token_ids": f"{DATA}/matrix_BLOCK_SIZE_M_8_1x{em8}_4.txt",
                          "expert_ids": f"{DATA}/matrix_BLOCK_SIZE_M_8_1x{em8 // 8}_5.txt",
                          "num_tokens_post_padded": em8, "num_valid_tokens": 12}
    assert eight.expected == {"c": f"{DATA}/matrix_BLOCK_SIZE_M_8_6x2x12_3.txt"}
    # every file of every value pinned, each value its own
    assert set(eight.sha256) == {*(v for v in eight.args.values() if isinstance(v, str)), *eight.expected.values()}
    assert eight.sha256[eight.expected["c"]] != "" and set(four.sha256) == set(four.files.values())
    assert project.entries["moe"].launch == "benchmark_triton"


def test_space_is_written_honoured_kept_and_replaced(tmp_path, capsys):
    root = make_moe_tree(tmp_path / "repo")
    code, out = _import(root, capsys, "--space", "moe:BLOCK_SIZE_M=4,8,16,32")  # widen: 32 has no data
    assert code == 1
    assert "space BLOCK_SIZE_M = 4, 8, 16, 32; no data for 32" in out
    assert "FIX  moe: data: BLOCK_SIZE_M=32: no data for BLOCK_SIZE_M=32" in out
    assert "8 configs: 2 on their harness (BLOCK_SIZE_M=4); 4 on our generic harness (BLOCK_SIZE_M=8,16); " \
           "2 on no data (BLOCK_SIZE_M=32)" in out
    assert "[triton_rvv.kernels.moe.space]\nBLOCK_SIZE_M = [4, 8, 16, 32]" in (root / "rvtune.toml").read_text()
    project = read_project(root / "rvtune.toml")
    assert project is not None
    entry, case = project.entries["moe"], project.entries["moe"].cases["default"]
    configs = entry_configs(entry, case)
    assert [(c.values["BLOCK_SIZE_M"], c.values["BLOCK_SIZE_N"]) for c in configs] == [
        (4, 8), (8, 8), (16, 8), (32, 8), (4, 16), (8, 16), (16, 16), (32, 16)]
    assert case.variant(configs[3].values).harness == "none"  # its item fails naming the files to write
    # a later import without --space keeps the user's space; a new --space replaces it (narrow)
    _import(root, capsys)
    project = read_project(root / "rvtune.toml")
    assert project is not None and project.entries["moe"].space == {"BLOCK_SIZE_M": (4, 8, 16, 32)}
    code, out = _import(root, capsys, "--space", "moe:BLOCK_SIZE_M=8;BLOCK_SIZE_N=16")
    assert code == 0, out
    project = read_project(root / "rvtune.toml")
    assert project is not None
    configs = entry_configs(project.entries["moe"], project.entries["moe"].cases["default"])
    assert [c.id for c in configs] == ["BLOCK_SIZE_M=8-BLOCK_SIZE_N=16-top_k=2-num_threads=1"]


@pytest.mark.parametrize(("space", "message"), [
    ("moe", "expected KERNEL:KEY=V,...;KEY=V,..."),
    ("moe:BLOCK_SIZE_M=a", "the values of BLOCK_SIZE_M must be integers"),
    ("moe:BLOCK_SIZE_M=", "BLOCK_SIZE_M has no values"),
])
def test_bad_space_options_are_usage_errors(tmp_path, capsys, space, message):
    root = make_moe_tree(tmp_path / "repo")
    assert main(["import", str(root), "--space", space]) == 2
    assert message in capsys.readouterr().err


def test_a_space_key_or_kernel_that_does_not_exist_is_a_fix(tmp_path, capsys):
    root = make_moe_tree(tmp_path / "repo")
    code, out = _import(root, capsys, "--space", "moe:BLOCK_SIZE_Q=4", "--space", "nope:BLOCK_SIZE_M=4")
    assert code == 1
    assert "FIX  moe: --space BLOCK_SIZE_Q: not a tl.constexpr of moe_kernel: use its config keys" in out
    assert "FIX  nope: --space nope:...: no kernel nope was imported (kernels: moe, scale)" in out


# ------------------------------------------------------------------------------------------ runs
def test_their_harness_and_ours_each_serve_their_values_and_a_wrong_value_fails(tmp_path, cache, capsys):
    root = make_moe_tree(tmp_path / "repo")
    code, out = _import(root, capsys, "--space", "moe:BLOCK_SIZE_M=4,8,16;BLOCK_SIZE_N=8")
    assert code == 0, out
    proc, records = _pytest(root, cache, "--rvtune-target", "qemu", "-k", "moe")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "3 passed" in proc.stdout
    by_bm = {r["config"]["BLOCK_SIZE_M"]: r for r in records}
    assert {bm: r["harness"] for bm, r in by_bm.items()} == {4: "theirs", 8: "generic", 16: "generic"}
    assert by_bm[8]["nodeid"].endswith("-generic]") and not by_bm[4]["nodeid"].endswith("-generic]")
    assert "their harness cannot serve it" in by_bm[16]["harness_why"]
    # the grid came from their launch for each value: cdiv(EM, BLOCK_SIZE_M) x cdiv(N, BLOCK_SIZE_N)
    assert by_bm[16]["rerun"]["argv"][:2] == ["--grid", f"{padded_size(16) // 16},2,1"]
    assert all(r["outcome"] == "passed" and r["checks"][0]["ok"] for r in records)
    # a corrupted expected value for BLOCK_SIZE_M=8 (pinned again): that item, run by our harness, fails
    expected = root / f"benchmark/auto-tuner/{DATA}/matrix_BLOCK_SIZE_M_8_6x2x12_3.txt"
    lines = expected.read_text().splitlines()
    row = lines[3].split()
    row[5] = f"{float(row[5]) + 0.5:.9f}"
    lines[3] = " ".join(row)
    expected.write_text("\n".join(lines) + "\n")
    assert _import(root, capsys)[0] == 0
    proc, records = _pytest(root, cache, "--rvtune-target", "qemu", "-k", "moe and BLOCK_SIZE_M=8")
    assert proc.returncode == 1
    assert [r["outcome"] for r in records] == ["wrong"] and records[0]["harness"] == "generic"
    assert records[0]["checks"][0]["count"] == 1


def test_a_value_without_data_fails_its_items_naming_the_files(tmp_path, cache, capsys):
    root = make_moe_tree(tmp_path / "repo", values=(4,))
    _import(root, capsys, "--space", "moe:BLOCK_SIZE_M=8;BLOCK_SIZE_N=8")
    proc, records = _pytest(root, cache, "--rvtune-target", "qemu", "-k", "moe")
    assert proc.returncode == 1
    assert [r["outcome"] for r in records] == ["error"]
    assert "no data for BLOCK_SIZE_M=8: write matrix_BLOCK_SIZE_M_8_<shape>_<idx>.txt" in records[0]["message"]


def test_changed_variant_data_is_an_error(tmp_path, cache, capsys):
    root = make_moe_tree(tmp_path / "repo")
    _import(root, capsys, "--space", "moe:BLOCK_SIZE_M=16;BLOCK_SIZE_N=8")
    write_matrix(root / f"benchmark/auto-tuner/{DATA}/matrix_3x12_2.txt", [[0.0] * 12] * 3)
    proc, records = _pytest(root, cache, "--rvtune-target", "qemu", "-k", "moe")
    assert proc.returncode == 1
    assert "matrix_3x12_2.txt changed since it was pinned" in records[0]["message"]


# ------------------------------------------------------------------------------------------ their launch, recorded
def _generic_parts(root: Path, bm: int, bn: int):
    from pytest_rvtune.compat.triton_rvv_module import RvvConfig, load_rvv_module

    project = read_project(root / "rvtune.toml")
    assert project is not None
    entry = project.entries["moe"]
    variant = entry.cases["default"].variants[bm]
    config = RvvConfig({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "top_k": 2}, 1)
    return project, entry, variant, config, load_rvv_module(entry.module)


def test_their_launch_gives_arguments_and_grid_per_config(tmp_path, capsys):
    from pytest_rvtune.compat.generic_run import record_launch

    root = make_moe_tree(tmp_path / "repo")
    _import(root, capsys)
    project, entry, variant, config, module = _generic_parts(root, 16, 8)
    launch = record_launch(module, entry, "moe_kernel", variant, config, project.run_dir)
    em = padded_size(16)
    assert launch.grid == (em // 16, 2, 1)  # cdiv(EM, BLOCK_SIZE_M) x cdiv(N, BLOCK_SIZE_N), from their lambda
    # sizes and strides as their code computes them from the files' shapes; strides of 1 left out (specialised)
    assert launch.scalars == {"N": 12, "num_tokens_post_padded": em, "num_valid_tokens": 12, "stride_am": 12,
                              "stride_we": 12, "stride_cm": 12}
    assert [(a.name, a.ttype, a.role, a.shown) for a in launch.args if a.is_tensor] == [
        ("a_ptr", "*fp32", "in", "a"), ("w_ptr", "*fp32", "in", "w"), ("c_ptr", "*fp32", "out", "c"),
        ("sorted_token_ids_ptr", "*i32", "in", "sorted_token_ids"), ("expert_ids_ptr", "*i32", "in", "expert_ids")]
    assert launch.expected["c_ptr"].name == "matrix_BLOCK_SIZE_M_16_6x2x12_3.txt"
    # the kernel and triton are theirs again afterwards
    assert callable(module.moe_kernel) and module.triton.jit.__module__.startswith("triton")


def test_a_launch_that_cannot_be_bound_is_named(tmp_path, capsys):
    from pytest_rvtune.compat.generic_run import GenericRunError, record_launch

    root = make_moe_tree(tmp_path / "repo")
    module_file = root / "benchmark/src/triton/moe.py"
    # the output made inside the launch function: no data file is known for it
    text = module_file.read_text().replace("    M, N = a.shape\n", "    M, N = a.shape\n    c = torch.empty_like(c)\n")
    module_file.write_text(text)
    _import(root, capsys)
    project, entry, variant, config, module = _generic_parts(root, 8, 8)
    with pytest.raises(GenericRunError, match="moe_kernel's c_ptr gets a tensor made inside benchmark_triton"):
        record_launch(module, entry, "moe_kernel", variant, config, project.run_dir)
    bad = dataclasses.replace(entry, launch="run_it")
    with pytest.raises(GenericRunError, match="has no function run_it: set launch in"):
        record_launch(module, bad, "moe_kernel", variant, config, project.run_dir)
