"""Hostile results files and arguments to the analysis commands (issue 28's form: the user's command, what they
got before, what they get now).

- a record with a field of the wrong JSON type (config a list, machine or case_params a string, counters a list,
  wall_s a string): a Python traceback; samples_ns "100" was read digit by digit as the samples 1, 0, 0
- a pytest-benchmark JSON whose extra_info is not an object: a traceback
- `rvtune report RUN --out FILE` / `rvtune export-best RUN --out FILE`: FileExistsError / NotADirectoryError
  tracebacks, after reading the whole run
- `rvtune report RUN --top -1`: every row but the last of each case, silently
- `rvtune export-best RUN --alpha 2`: accepted (every win "significant"); compare refused it
Now each is one line naming the file (and line) or the option, and exit 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_rvtune.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "results"))
from results_data import make_record


def _good() -> dict:
    return make_record("matmul", "emu", {"BLOCK_SIZE_M": 16}, [100.0, 110.0], target="qemu",
                       counters={"x60_cycles": 5.0})


def _run(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("config", [1, 2], "config must be a JSON object, got an array [1, 2]"),
    ("machine", "x60", "machine must be a JSON object, got a string 'x60'"),
    ("counters", [1, 2], "counters must be a JSON object, got an array"),
    ("case_params", "M=64", "case_params must be a JSON object, got a string 'M=64'"),
    ("samples_ns", "100", "samples_ns must be a list of numbers, got a string '100'"),
    ("wall_s", "fast", "wall_s must be a number (seconds), got a string 'fast'"),
    ("kernel", None, "kernel must be a string, got null;"),
])
def test_a_record_field_of_the_wrong_type_is_named_with_file_and_line(tmp_path: Path, capsys, field, value,
                                                                       expected) -> None:
    run = _run(tmp_path, [_good(), {**_good(), "config_id": "other", field: value}])
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert f"{run}:2: {expected}" in err and "Traceback" not in err


def test_a_benchmark_json_whose_extra_info_is_not_an_object_is_named(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"benchmarks": [{"name": "x", "extra_info": "oops"}]}, indent=2))
    assert main(["export-best", str(path), "--out", str(tmp_path / "tuned")]) == 2
    assert "bench.json: benchmarks[0]: expected an object with an extra_info object" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["report", "export-best"])
def test_an_out_directory_that_is_a_file_is_refused_before_reading(tmp_path: Path, capsys, command) -> None:
    run = _run(tmp_path, [_good()])
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    assert main([command, str(run), "--out", str(afile / "sub")]) == 2
    assert f"--out {afile / 'sub'} is inside {afile}, which is a file, not a directory" in capsys.readouterr().err
    assert afile.read_text() == "mine\n"
    assert main([command, str(run), "--out", str(tmp_path / "new" / "dir")] + (["--no-plots"] if command ==
                                                                                "report" else [])) == 0


def test_a_negative_top_is_refused(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path, [_good(), {**_good(), "config_id": "BLOCK_SIZE_M=32", "config": {"BLOCK_SIZE_M": 32}}])
    with pytest.raises(SystemExit) as exited:
        main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep"), "--top", "-1"])
    assert exited.value.code == 2
    assert "argument --top: -1: give 0 or more rows per case" in capsys.readouterr().err


def test_export_best_refuses_an_alpha_outside_0_1(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path, [_good()])
    assert main(["export-best", str(run), "--out", str(tmp_path / "tuned"), "--alpha", "2"]) == 2
    assert "--alpha 2: the significance level must be between 0 and 1" in capsys.readouterr().err
    assert not (tmp_path / "tuned").exists()
