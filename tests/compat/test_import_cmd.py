"""`rvtune import PATH`: what it writes and what it prints."""

from __future__ import annotations

import pytest
from rvv_tree import make_tree

from pytest_rvtune.cli import main
from pytest_rvtune.compat.project import read_project

BOARDS = """# my boards
[targets.laptop]
host = "k1"   # the K1
"""


def test_import_writes_the_project_keeping_other_tables_and_prints_findings(tmp_path, capsys):
    root = make_tree(tmp_path / "repo")
    (root / "rvtune.toml").write_text(BOARDS)
    assert main(["import", str(root)]) == 0
    out = capsys.readouterr().out
    assert "ok   scale: benchmark/src/triton/scale.py: 1 kernel(s) (scale_kernel)" in out
    assert "(4 configs)" in out  # the getter was called: its configs counted
    assert f"Run: cd {root} && pytest --rvtune-target qemu -k scale" in out
    text = (root / "rvtune.toml").read_text()
    assert text.startswith(BOARDS)  # the boards and their comments are kept as written
    project = read_project(root / "rvtune.toml")
    assert project is not None and list(project.entries) == ["scale"]


def test_cases_replace_the_harness_defaults_and_missing_data_is_a_fix(tmp_path, capsys):
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root), "--case", "small:M=8,N=12,RUN_COUNT=2", "--case", "big:M=64,N=64"]) == 1
    out = capsys.readouterr().out
    assert "FIX  scale: data: case big: benchmark/auto-tuner/scale/run/test_data/matrix_64x64_1.txt is missing" in out
    project = read_project(root / "rvtune.toml")
    assert project is not None
    entry = project.entries["scale"]
    assert entry.argv_for(entry.cases["small"]) == ["8x12x2"]
    assert entry.cases["big"].params == {"M": 64, "N": 64, "RUN_COUNT": 3}  # RUN_COUNT from the harness default
    assert entry.cases["big"].sha256 == {}


def test_a_case_applies_where_its_fields_fit_or_to_the_kernel_named(tmp_path, capsys):
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root), "--case", "mm:M=8,N=12,K=4", "--case", "scale/tiny:M=8,N=12"]) == 0
    project = read_project(root / "rvtune.toml")
    assert project is not None
    assert list(project.entries["scale"].cases) == ["tiny"]  # no K in scale's argv: mm does not apply
    capsys.readouterr()
    assert main(["import", str(root), "--case", "scale/tiny:M=8,Q=3"]) == 1
    assert ("case tiny: Q is neither one of the harness's argv fields (MxNxRUN_COUNT) nor a parameter of the "
            "config getter or the data paths (none)") in capsys.readouterr().out


def test_dry_run_writes_nothing(tmp_path, capsys):
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root), "--dry-run"]) == 0
    assert "[triton_rvv.kernels.scale]" in capsys.readouterr().out
    assert not (root / "rvtune.toml").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--case", "small"], "expected [KERNEL/]NAME:K=V,..."),
    (["--case", "a b/small:M=1"], "expected [KERNEL/]NAME:K=V,..."),
    (["--case", "small:M=x"], "M='x' is not an integer"),
])
def test_bad_case_options_are_usage_errors(tmp_path, capsys, args, message):
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root), *args]) == 2
    assert message in capsys.readouterr().err


def test_not_a_checkout_exits_non_zero_with_the_reason(tmp_path, capsys):
    assert main(["import", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "not a Triton_RVV-style checkout" in captured.out
    assert "nothing to import" in captured.err


def test_an_unreadable_rvtune_toml_is_named_and_left_alone(tmp_path, capsys):
    root = make_tree(tmp_path / "repo")
    (root / "rvtune.toml").write_text("[targets.laptop\n")
    assert main(["import", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{root / 'rvtune.toml'} is not valid TOML" in err and "nothing was written" in err
    assert (root / "rvtune.toml").read_text() == "[targets.laptop\n"
