"""`rvtune import`'s reading of a Triton_RVV-style checkout (text only: no kernel is compiled here)."""

from __future__ import annotations

import ast
import textwrap

import pytest
from rvv_tree import make_tree

from pytest_rvtune.compat.harness_reader import read_harness, split_call_args
from pytest_rvtune.compat.import_scan import scan
from pytest_rvtune.compat.launch_signature import derive_signature
from pytest_rvtune.compat.module_reader import read_module
from pytest_rvtune.compat.project import ProjectError, read_project


def test_call_arguments_split_at_top_level_commas_only():
    text = "f(ceil(1.0 * M / B) * ceil(N / C), 1, g(a, b), x[1, 2])"
    args, end = split_call_args(text, 1)
    assert args == ["ceil(1.0 * M / B) * ceil(N / C)", "1", "g(a, b)", "x[1, 2]"]
    assert end == len(text)


def test_harness_gives_wrap_arity_pointer_types_argv_fields_defaults_and_data(tmp_path):
    root = make_tree(tmp_path / "repo")
    info = read_harness(root / "benchmark/src/main/scale_kernel.cpp")
    assert info.wrap_calls == {"scale_kernel": ["arg0", "real_out", "M", "N", "N", "N"]}
    assert info.pointer_types["arg0"] == "fp32" and info.pointer_types["real_out"] == "fp32"
    assert info.shape_names == ["M", "N", "RUN_COUNT"]
    assert info.defaults == {"M": 8, "N": 12, "RUN_COUNT": 3}
    assert info.data == ["scale/run/test_data/matrix_{M}x{N}_1.txt", "scale/run/test_data/matrix_{M}x{N}_2.txt"]


def test_commented_out_calls_are_not_read(tmp_path):
    cpp = tmp_path / "k.cpp"
    cpp.write_text('// old_kernel_wrap(1, 1, 1, 1, old_kernel, a);\n/* getDB("x", std::to_string(M), 9) */\n'
                   'new_kernel_wrap(1, 1, 1, 1, new_kernel, a, b);\n')
    info = read_harness(cpp)
    assert info.wrap_calls == {"new_kernel": ["a", "b"]}
    assert info.data == []


def test_module_gives_kernels_getters_and_the_autotuned_launch(tmp_path):
    root = make_tree(tmp_path / "repo")
    info = read_module(root / "benchmark/src/triton/scale.py")
    assert list(info.kernels) == ["scale_kernel"]
    assert info.kernels["scale_kernel"][-1] == ("BLOCK_SIZE_N", True)
    assert info.getters == {"get_scale_kernel_autotune_config": ["num_threads"]}
    assert [ast.unparse(a) for a in info.launches["scale_kernel"]][-2:] == ["y.stride(0)", "y.stride(1)"]


def _signature(launch: str, wrap: list[str] | None, ranks: dict | None = None):
    params = [("a_ptr", False), ("c_ptr", False), ("M", False), ("stride_am", False), ("stride_ak", False),
              ("stride_cm", False), ("stride_cn", False), ("BLOCK", True)]
    call = ast.parse(launch).body[0].value
    return derive_signature("k_kernel", params, list(call.args), wrap, {"arg0": "fp16", "out": "fp32"},
                            {"M": "i32", "K": "i32", "N": "i32"}.get, None,
                            {"a": (2, "a"), "c": (2, "c")} if ranks is None else ranks)


def test_last_dimension_strides_are_specialised_and_pointer_types_come_from_the_harness():
    table, problems = _signature("k[g](a, c, M, a.stride(0), a.stride(1), c.stride(0), c.stride(1))",
                                 ["arg0", "out", "M", "K", "N"])
    assert problems == []
    assert table == {"a_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "stride_am": "i32", "stride_ak": 1,
                     "stride_cm": "i32", "stride_cn": 1}


def test_a_disagreement_between_launch_and_harness_is_reported_with_the_fix():
    _, problems = _signature("k[g](a, c, M, a.stride(0), a.stride(1), c.stride(0), c.stride(1))",
                             ["arg0", "out", "M", "K", "N", "N"])
    assert len(problems) == 1
    assert "calls k_kernel_wrap with 6 kernel arguments" in problems[0]
    assert "leaves 5" in problems[0] and "edit the signature table" in problems[0]


def test_scan_writes_a_project_that_loads_and_formats_argv_and_data(tmp_path):
    root = make_tree(tmp_path / "repo")
    result = scan(root)
    assert all(f.ok for f in result.findings), result.findings
    assert [f.subject for f in result.findings] == ["layout", "output format", "scale"]
    entry = result.table["kernels"]["scale"]
    assert entry["signature"]["scale_kernel"]["stride_xn"] == 1
    assert entry["argv"] == ["{M}x{N}x{RUN_COUNT}"]
    assert set(entry["cases"]["default"]["sha256"]) == {"scale/run/test_data/matrix_8x12_1.txt",
                                                        "scale/run/test_data/matrix_8x12_2.txt"}
    import tomlkit
    (root / "rvtune.toml").write_text(tomlkit.dumps({"triton_rvv": result.table}))
    project = read_project(root / "rvtune.toml")
    assert project is not None
    scale = project.entries["scale"]
    case = scale.cases["default"]
    assert scale.argv_for(case) == ["8x12x3"]
    assert scale.data_for(case)[0] == "scale/run/test_data/matrix_8x12_1.txt"
    assert scale.specialised("scale_kernel") == {"stride_xn": 1, "stride_yn": 1}


def test_missing_data_is_named_with_how_to_make_it(tmp_path):
    root = make_tree(tmp_path / "repo")
    (root / "benchmark/auto-tuner/scale/run/test_data/matrix_8x12_2.txt").unlink()
    problems = [f for f in scan(root).findings if not f.ok]
    assert len(problems) == 1
    assert "matrix_8x12_2.txt is missing: the harness reads it" in problems[0].message
    assert "save_matrices_to_txt" in problems[0].message


def test_a_harness_calling_kernels_the_module_lacks_is_reported(tmp_path):
    root = make_tree(tmp_path / "repo")
    cpp = root / "benchmark/src/main/scale_kernel.cpp"
    cpp.write_text(cpp.read_text() + "\nvoid f() { other_kernel_wrap(1, 1, 1, 1, other_kernel, 0); }\n")
    problems = [f.message for f in scan(root).findings if not f.ok]
    assert any("calls other_kernel_wrap" in p and "defines no such kernel (scale_kernel)" in p for p in problems)
    assert "scale" not in scan(root).table["kernels"]  # it could not link: no entry that fails every item


def test_not_a_checkout(tmp_path):
    result = scan(tmp_path)
    assert not result.table and "not a Triton_RVV-style checkout" in result.findings[0].message


@pytest.mark.parametrize(("edit", "message"), [
    ('functions = []', "functions must name at least one kernel function"),
    ('harness = "nope.cpp"', "harness = 'nope.cpp': no such file"),
    ('data = ["../../etc/passwd"]', "must be relative to run_dir, without '..'"),
    ('num_threads = -1', "num_threads must be an integer >= 0"),
])
def test_project_file_errors_name_the_table_and_key(tmp_path, edit, message):
    root = make_tree(tmp_path / "repo")
    import tomlkit
    table = scan(root).table
    key, value = (s.strip() for s in edit.split("=", 1))
    table["kernels"]["scale"][key] = tomlkit.parse(f"v = {value}")["v"]
    (root / "rvtune.toml").write_text(tomlkit.dumps({"triton_rvv": table}))
    with pytest.raises(ProjectError) as err:
        read_project(root / "rvtune.toml")
    assert "[triton_rvv.kernels.scale]" in str(err.value) and message in str(err.value)


def test_a_signature_value_other_than_one_is_refused(tmp_path):
    root = make_tree(tmp_path / "repo")
    import tomlkit
    table = scan(root).table
    table["kernels"]["scale"]["signature"]["scale_kernel"]["M"] = 2
    (root / "rvtune.toml").write_text(tomlkit.dumps({"triton_rvv": table}))
    with pytest.raises(ProjectError, match="M = 2: only the integer 1 can be specialised"):
        read_project(root / "rvtune.toml")


def test_no_table_means_no_project(tmp_path):
    (tmp_path / "rvtune.toml").write_text(textwrap.dedent("""
        [targets.laptop]
        host = "k1"
    """))
    assert read_project(tmp_path / "rvtune.toml") is None
