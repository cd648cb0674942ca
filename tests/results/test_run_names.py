"""Runs named by age (latest, latest~N) wherever a run is named, `rvtune runs`, and the git commit and kernel hash
records carry. Real files, real git."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from results_data import make_record, write_jsonl

from pytest_rvtune import paths
from pytest_rvtune.cli import main
from pytest_rvtune.provenance import git_state
from pytest_rvtune.results.records import RunFileError
from pytest_rvtune.results.run_names import resolve

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    monkeypatch.chdir(tmp_path)
    previous = paths.set_project_root(tmp_path)
    yield tmp_path
    paths.set_project_root(previous)


def _run(directory: Path, run_id: str, cycles: float, commit: str | None = None, dirty: bool = False,
         outcomes: tuple[str, ...] = ("passed", "passed")) -> Path:
    records = []
    for block, outcome in zip((16, 32), outcomes, strict=True):
        extra = {"git_commit": commit, "git_dirty": dirty} if commit else {}
        records.append(make_record("scale", "emu", {"BLOCK": block}, [1.0, 1.0], target="qemu", outcome=outcome,
                                   counters={"x60_cycles": cycles * block, "launch_insns": cycles}, **extra))
    return write_jsonl(directory / f"{run_id}.jsonl", records)


def test_latest_and_latest_tilde_n_name_runs_by_their_start(project: Path) -> None:
    results = paths.results_dir()
    results.mkdir(parents=True)
    # written out of order: the run id's start time orders them, not the file's age
    newest = _run(results, "20261127T120000-1-aaaaaa", 100)
    oldest = _run(results, "20261125T090000-2-bbbbbb", 100)
    middle = _run(results, "20261126T090000-3-cccccc", 100)
    (results / "20261128T000000-4-dddddd.jsonl").write_text("")  # a session that recorded nothing yet
    assert resolve("latest") == newest and resolve("latest~0") == newest
    assert resolve("latest~1") == middle and resolve("latest~2") == oldest
    assert resolve("latest", exclude=newest) == middle  # a session never takes its own file for "latest"
    with pytest.raises(RunFileError, match=r"latest~3: .*results holds 3 runs, so there is no latest~3 "
                                           r"\(`rvtune runs` lists them"):
        resolve("latest~3")
    (project / "latest").write_text("")
    assert resolve("latest") == Path("latest")  # a file of that name is that file


def test_commands_take_latest_and_runs_lists_them(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = paths.results_dir()
    results.mkdir(parents=True)
    _run(results, "20261125T090000-2-bbbbbb", 100, commit="a" * 40, outcomes=("passed", "wrong"))
    _run(results, "20261126T093000-3-cccccc", 130, commit="b" * 40, dirty=True)
    assert main(["compare", "latest~1", "latest"]) == 1  # 30 % more cycles: regressed
    assert "compared 2 of the base run's 2 items against latest~1" in capsys.readouterr().err
    assert main(["report", "latest", "--no-plots", "--format", "json"]) == 0
    capsys.readouterr()
    assert (results / "20261126T093000-3-cccccc-report").is_dir() and not (project / "latest-report").exists()
    assert main(["compare", "latest~2", "latest"]) == 2
    err = capsys.readouterr().err
    assert "rvtune compare: latest~2: " in err and "results holds 2 runs, so there is no latest~2" in err

    assert main(["runs", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["latest~1", "latest"]
    assert rows[0]["started (UTC)"] == "2026-11-25 09:00" and rows[1]["commit"] == "bbbbbbbbbb+dirty"
    assert rows[0]["outcomes"] == "1 passed, 1 wrong" and rows[0]["commit"] == "aaaaaaaaaa"
    assert rows[0]["items"] == 2 and rows[0]["kernels"] == 1 and rows[0]["target"] == "qemu"


def test_git_state_is_the_commit_and_whether_tracked_files_changed(tmp_path: Path) -> None:
    assert git_state(tmp_path) == {}  # not a work tree
    subprocess.run([*GIT, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "k.py").write_text("x = 1\n")
    subprocess.run([*GIT, "add", "k.py"], cwd=tmp_path, check=True)
    subprocess.run([*GIT, "commit", "-qm", "k"], cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout.strip()
    git_state.cache_clear()
    (tmp_path / "scratch.txt").write_text("untracked\n")
    assert git_state(tmp_path) == {"git_commit": head, "git_dirty": False}
    git_state.cache_clear()
    (tmp_path / "k.py").write_text("x = 2\n")
    assert git_state(tmp_path) == {"git_commit": head, "git_dirty": True}
    git_state.cache_clear()
