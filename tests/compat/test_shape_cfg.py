"""A fork's shapes file beside its harness (our own files in that layout): the kernel's default cases."""

from __future__ import annotations

import shutil
from pathlib import Path

from rvv_tree import make_tree, write_matrix

from pytest_rvtune.cli import main
from pytest_rvtune.compat.import_scan import scan
from pytest_rvtune.compat.shape_cfg import read_shape_cfg

FIELDS = ["M", "N", "K", "RUN_COUNT"]
DEFAULTS = {"M": 1024, "N": 1024, "K": 1024, "RUN_COUNT": 10}


def _read(tmp_path: Path, text: str):
    cfg = tmp_path / "matmul_kernel.cfg"
    cfg.write_text(text)
    return read_shape_cfg(cfg, FIELDS, DEFAULTS, "src/main/matmul_kernel.cfg")


def test_shape_lines_and_key_value_lines_each_give_cases_in_the_harness_fields_order(tmp_path):
    read = _read(tmp_path, "# shapes to tune\n128x256x64x2\n 64 x 64 x 32   // RUN_COUNT stays\n"
                           "M=32, n=16 K: 8\n\n[tall]\nM = 512\nN = 8\n\n96,96,96,1\n")
    assert read.problems == []
    assert read.cases == {
        "128x256x64x2": {"M": 128, "N": 256, "K": 64, "RUN_COUNT": 2},
        "64x64x32x10": {"M": 64, "N": 64, "K": 32, "RUN_COUNT": 10},
        "32x16x8x10": {"M": 32, "N": 16, "K": 8, "RUN_COUNT": 10},
        "tall": {"M": 512, "N": 8, "K": 1024, "RUN_COUNT": 10},
        "96x96x96x1": {"M": 96, "N": 96, "K": 96, "RUN_COUNT": 1},
    }


def test_what_it_cannot_read_is_a_problem_with_file_line_and_what_to_write_and_the_rest_is_read(tmp_path):
    read = _read(tmp_path, "8x8\nL=4\nM=big\nall of them please\n64x64x64x1\n")
    assert list(read.cases) == ["64x64x64x1"]
    assert len(read.problems) == 4
    assert read.problems[0].startswith("src/main/matmul_kernel.cfg:1: `8x8`: 2 number(s), the harness takes 4 argv "
                                       "field(s) (MxNxKxRUN_COUNT)")
    assert "src/main/matmul_kernel.cfg:2: `L=4`: cannot read it (L is not one of the harness's argv fields" \
        in read.problems[1]
    assert "M=big: not an integer" in read.problems[2]
    assert "neither `MxN...` nor `KEY=VALUE` pairs" in read.problems[3] and "write `MxNxKxRUN_COUNT`" \
        in read.problems[3]


def _fork(root: Path) -> Path:
    make_tree(root)
    (root / "src").mkdir()
    for a, b in (("benchmark/src/triton", "src/triton"), ("benchmark/src/main", "src/main"),
                 ("benchmark/src/support", "src/support"), ("env_build/include", "include"),
                 ("benchmark/auto-tuner", "data")):
        shutil.move(root / a, root / b)
    return root


def test_the_shapes_file_gives_the_import_its_cases_unless_cases_are_given(tmp_path, capsys):
    root = _fork(tmp_path / "fork")
    (root / "src/main/scale_kernel.cfg").write_text("8x12x3\nM=4, N=6\n")
    for m, n in ((4, 6),):
        for idx in (1, 2):
            write_matrix(root / f"data/scale/run/test_data/matrix_{m}x{n}_{idx}.txt", [[1.0] * n] * m)
    result = scan(root)
    assert [f.message for f in result.findings if not f.ok] == []
    assert "cases from src/main/scale_kernel.cfg: 8x12x3, 4x6x3" in [f.message for f in result.findings]
    cases = result.table["kernels"]["scale"]["cases"]
    assert {k: v["params"] for k, v in cases.items()} == {"8x12x3": {"M": 8, "N": 12, "RUN_COUNT": 3},
                                                          "4x6x3": {"M": 4, "N": 6, "RUN_COUNT": 3}}
    assert set(cases["4x6x3"]["sha256"]) == {"scale/run/test_data/matrix_4x6_1.txt",
                                             "scale/run/test_data/matrix_4x6_2.txt"}
    # --case wins over the file
    assert main(["import", str(root), "--case", "scale/mine:M=8,N=12,RUN_COUNT=1"]) == 0
    assert "cases from" not in capsys.readouterr().out
