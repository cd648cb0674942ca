"""``files`` of Target.run: relative POSIX paths only, checked before anything runs."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from pytest_rvtune.targets.base import RunFilesError, run_dir_files
from pytest_rvtune.targets.local import HostTarget, make_run_dir


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "m.txt"
    path.write_text("1 1\n2\n")
    return path


@pytest.mark.parametrize(("key", "message"), [
    ("/etc/passwd", "must be a relative path"),
    ("", "must be a relative path"),
    ("a/../../b.txt", "no '..'"),
    ("../b.txt", "no '..'"),
    ("./b.txt", "no '..', '.'"),
    ("a//b.txt", "'//'"),
    ("a/", "'//'"),
    ("a\\b.txt", "'\\'"),
])
def test_paths_that_could_escape_or_mislead_are_refused(data: Path, key: str, message: str):
    with pytest.raises(RunFilesError) as err:
        run_dir_files({key: data})
    assert f"run file {key!r}" in str(err.value) and message in str(err.value)


def test_a_missing_source_and_a_file_used_as_a_directory_are_refused(data: Path, tmp_path: Path):
    with pytest.raises(RunFilesError, match=r"run file 'x.txt': its source .*nope.txt is not a file"):
        run_dir_files({"x.txt": tmp_path / "nope.txt"})
    with pytest.raises(RunFilesError, match=r"run files 'a' and 'a/b\.txt': the first is a file"):
        run_dir_files({"a/b.txt": data, "a": data})


def test_the_run_dir_holds_each_file_at_its_relative_path(data: Path, tmp_path: Path):
    assert run_dir_files({"k/run/test_data/m.txt": data}) == {PurePosixPath("k/run/test_data/m.txt"): data}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run_dir = make_run_dir(scratch, {"k/run/test_data/m.txt": data, "top.txt": data})
    assert (run_dir / "k" / "run" / "test_data" / "m.txt").read_text() == "1 1\n2\n"
    assert (run_dir / "top.txt").resolve() == data.resolve()
    assert sorted(p.name for p in run_dir.iterdir()) == ["k", "top.txt"]


def test_a_bad_path_fails_the_call_before_anything_runs(data: Path, tmp_path: Path):
    with pytest.raises(RunFilesError):
        HostTarget(perf_events=()).run(tmp_path / "never-run.elf", [], timeout=5, files={"../x": data})
