"""Faults of the results files (issue 15, cases 4-9): nothing lost, nothing wrong accepted.

The writer meets a read-only location and a full disk (a real tmpfs mounted here, so the kernel says EROFS and
ENOSPC, not a mock), a torn last line and a file glued by an older writer; the readers (`rvtune report`,
`compare`, `export-best`, `pytest --rvtune-resume/--rvtune-compare`) meet binary, garbage and empty files. Real
runs are the kernel suite's softmax on this host (two configs, a few seconds). Each test asserts what the user
gets: the message naming the file and cause, the exit code, the verdicts, every record already written.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from results_data import clean_env, make_record, write_jsonl

from pytest_rvtune.cli import main
from pytest_rvtune.results.runs import RunFileWarning, completed_items, load_run
from pytest_rvtune.results.writer import ResultsWriteError, ResultsWriter

ROOT = Path(__file__).resolve().parents[2]
SELECT = ["kernels/softmax.py", "--rvtune-target", "host", "--rvtune-case", "small",
          "--rvtune-config", "BLOCK_SIZE_M=1;BLOCK_SIZE_N=16,32"]
FRAGMENT = '{"build_cache_hit": true, "case": "sm'  # a record cut off mid-write (a kill or a full disk)


def _pytest(*args: str) -> subprocess.CompletedProcess[str]:
    """The kernel suite as a user runs it, in a child pytest."""
    return subprocess.run([sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider",
                           "--benchmark-disable"], cwd=ROOT, capture_output=True, text=True, env=clean_env())


def _suite(results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _pytest(*SELECT, f"--rvtune-results={results}", *extra)


def _lines(path: Path) -> list[dict]:
    """Every line of a results file, each of which must be one whole record."""
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Results of a real run: two passed softmax items on this host."""
    path = tmp_path_factory.mktemp("real") / "run.jsonl"
    done = _suite(path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [r["outcome"] for r in _lines(path)] == ["passed", "passed"]
    return path


def _mount_tmpfs(where: Path, options: str) -> str | None:
    """Mount a small tmpfs at ``where``; None if mounted, else why it could not be."""
    where.mkdir()
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                          text=True)
    return None if done.returncode == 0 else f"mount -t tmpfs failed: {done.stderr.strip()}"


def _unmount(where: Path) -> None:
    subprocess.run(["umount", str(where)], check=True)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory nothing can be written in: a read-only tmpfs (root), else mode 0555 (which binds non-root)."""
    where = tmp_path / "ro"
    why_not = _mount_tmpfs(where, "ro,size=64k")
    if why_not is None:
        yield where
        _unmount(where)
    elif os.geteuid() != 0:
        where.chmod(0o555)
        yield where
        where.chmod(0o755)
    else:  # root ignores file modes: only a read-only mount makes a location read-only for it
        pytest.skip(f"no read-only location for root: {why_not}")


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs. RLIMIT_FSIZE is no stand-in for a whole pytest run: it would fail the harness's own
    output files too (the writer alone is tested under it below), and a loop device needs root as well."""
    where = tmp_path / "disk"
    why_not = _mount_tmpfs(where, "size=64k")
    if why_not is not None:
        pytest.skip(f"no small file system to fill: {why_not}")
    yield where
    _unmount(where)


def _fill(directory: Path) -> None:
    """Fill the file system of ``directory`` to the last block."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == 28, exc  # ENOSPC: full
    finally:
        os.close(fd)


# --- 4, 5: the writer cannot write -------------------------------------------------------------------------


def test_read_only_location_is_one_error_at_the_start_and_verdicts_still_count(read_only_dir: Path) -> None:
    results = read_only_dir / "runs" / "run.jsonl"
    done = _suite(results)
    out = done.stdout + done.stderr
    # Both items pass, but their records are lost: a run that cannot keep its results is not a green run.
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert "2 passed" in out and "Traceback" not in out and "filelock" not in out
    errors = [line for line in done.stdout.splitlines() if line.startswith("rvtune: ERROR")]
    assert errors == [f"rvtune: ERROR: cannot write results to {results}: {read_only_dir} is not writable "
                      f"({'read-only file system' if os.geteuid() == 0 else 'permission denied'}); items still run "
                      "and report their verdicts, but records not written are lost (the summary line counts them): "
                      "make room or give another --rvtune-results PATH"]
    lines = done.stdout.splitlines()
    assert lines.index(errors[0]) < next(i for i, line in enumerate(lines) if line.startswith(".."))  # at the start
    summary = next(line for line in lines if line.startswith("rvtune: 2 passed"))
    assert summary.endswith(f"results: {results}; 2 records NOT written: "
                            f"{'Read-only file system' if os.geteuid() == 0 else 'Permission denied'} "
                            f"({results.parent})")
    assert not results.parent.exists()


def test_full_disk_is_one_error_when_it_happens_and_nothing_written_is_lost(real_run: Path,
                                                                             full_disk: Path) -> None:
    results = full_disk / "run.jsonl"
    before = real_run.read_bytes()
    results.write_bytes(before)  # an earlier round, then the disk fills up
    _fill(full_disk)
    done = _pytest(*SELECT[:-1], "BLOCK_SIZE_M=1,2;BLOCK_SIZE_N=16,32", f"--rvtune-results={results}")
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, out[-3000:]  # 4 passed, but records were lost
    assert "4 passed" in out and "Traceback" not in out
    errors = [line for line in done.stdout.splitlines() if "rvtune: ERROR" in line]
    assert len(errors) == 1 and errors[0].endswith(f"rvtune: ERROR: cannot write results to {results}: No space "
                                                   "left on device; items still run and report their verdicts, but "
                                                   "records not written are lost (the summary line counts them): "
                                                   "make room or give another --rvtune-results PATH")
    assert f"results: {results}; 4 records NOT written: No space left on device" in done.stdout
    assert results.read_bytes() == before  # whole lines only: no torn record after the earlier round


def test_a_write_cut_short_leaves_only_whole_lines(tmp_path: Path) -> None:
    """A write the file system cuts short (here RLIMIT_FSIZE: a partial write, then EFBIG, as a full disk gives
    a partial write, then ENOSPC) is cut back off; once there is room the next record lands whole."""
    path = tmp_path / "run.jsonl"
    writer = ResultsWriter(path)
    first = make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, [1000.0] * 5)
    writer.append(first)
    size = path.stat().st_size
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, limits[1]))
    try:
        with pytest.raises(ResultsWriteError) as lost:
            writer.append(make_record("matmul", "M96", {"BLOCK_SIZE_M": 32}, [1000.0] * 5))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert str(lost.value) == f"cannot write results to {path}: File too large"
    assert path.stat().st_size == size  # the 100 bytes that fitted are gone again
    third = make_record("matmul", "M96", {"BLOCK_SIZE_M": 48}, [1000.0] * 5)
    writer.append(third)
    assert _lines(path) == [first, third]


# --- 6: torn lines -----------------------------------------------------------------------------------------


def test_append_after_a_torn_line_starts_a_new_line(tmp_path: Path) -> None:
    first = make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, [1000.0] * 5)
    path = write_jsonl(tmp_path / "run.jsonl", [first])
    with open(path, "a") as fh:
        fh.write(FRAGMENT)  # a session killed mid-write
    second = make_record("matmul", "M96", {"BLOCK_SIZE_M": 32}, [1000.0] * 5)
    ResultsWriter(path).append(second)
    assert path.read_text().splitlines()[1:] == [FRAGMENT, json.dumps(second, sort_keys=True)]
    with pytest.warns(RunFileWarning) as warned:
        run = load_run(path)
    assert [r.config_id for r in run.records] == ["BLOCK_SIZE_M=16", "BLOCK_SIZE_M=32"]
    assert [str(w.message) for w in warned] == [
        f"{path}:2: not a JSON object (Unterminated string starting at), a torn line (a run killed mid-write or a "
        "full disk?): skipped"]


def test_torn_lines_anywhere_are_skipped_and_a_glued_record_is_kept(tmp_path: Path) -> None:
    """Files written before the writer ended fragments have the fragment and the next record on one line."""
    records = [make_record("matmul", "M96", {"BLOCK_SIZE_M": bm}, [1000.0] * 5) for bm in (16, 32, 48, 64)]
    text = [json.dumps(r) for r in records]
    path = tmp_path / "old.jsonl"
    path.write_text(f"{text[0]}\n{FRAGMENT}\n{FRAGMENT}{text[1]}\n{text[2]}\n\x00\x00\x00\n{text[3]}\n")
    with pytest.warns(RunFileWarning) as warned:
        run = load_run(path)
    assert [r.config_id for r in run.records] == [f"BLOCK_SIZE_M={bm}" for bm in (16, 32, 48, 64)]
    torn = "a torn line (a run killed mid-write or a full disk?)"
    assert [str(w.message) for w in warned] == [
        f"{path}:2: not a JSON object (Unterminated string starting at), {torn}: skipped",
        f"{path}:3: not a JSON object (Expecting ',' delimiter), {torn}: its first {len(FRAGMENT)} characters "
        "skipped, the record after them kept",
        f"{path}:5: NUL bytes (binary data or a crash's zero-filled block): skipped"]
    assert len(completed_items(run)) == 4  # a resume repeats none of them


def test_report_compare_export_and_resume_use_a_file_with_a_torn_line(real_run: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The README's rounds loop appends to the same file after a killed session left a torn line."""
    path = tmp_path / "rounds.jsonl"
    path.write_text(real_run.read_text() + FRAGMENT)
    appended = _suite(path)  # round 2 appends to the torn file
    assert appended.returncode == 0, appended.stdout[-3000:] + appended.stderr[-3000:]
    lines = path.read_text().splitlines()
    assert len(lines) == 5 and lines[2] == FRAGMENT
    assert [json.loads(line)["rounds"] for line in lines[3:]] == [2, 2]  # pooled with round 1: it was read
    warning = f"{path}:3: not a JSON object (Unterminated string starting at), a torn line"

    for argv in (["report", str(path), "--no-plots", "--out", str(tmp_path / "rep")],
                 ["compare", str(real_run), str(path)],
                 ["export-best", str(path), "--out", str(tmp_path / "tuned")]):
        assert main(argv) == 0, argv
        err = capsys.readouterr().err
        assert f"rvtune {argv[0]}: warning: {warning}" in err, err
        assert argv[0] != "compare" or "compared 2 of the base run's 2 items" in err

    resumed = _suite(tmp_path / "resumed.jsonl", f"--rvtune-resume={path}")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "2 passed" in resumed.stdout and "; 2 resumed;" in resumed.stdout
    assert f"--rvtune-resume: {warning}" in resumed.stdout


# --- 7, 8, 9: files that are not runs ----------------------------------------------------------------------

#: name -> (content, what every reader says of it)
NOT_RUNS = {
    "binary": (bytes(range(256)) * 4, "binary data, not a results file: no line of it is an item record"),
    "garbage": (b"garbage\n", "not a results file: no line of it is an item record"),
    "empty": (b"", "empty results file"),
}


@pytest.fixture
def good_run(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "good.jsonl", [make_record("matmul", "M96", {"BLOCK_SIZE_M": bm}, [1000.0] * 5)
                                                 for bm in (16, 32)])


@pytest.mark.parametrize("kind", NOT_RUNS)
def test_every_cli_names_a_file_that_is_not_a_run_and_exits_2(kind: str, good_run: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    content, message = NOT_RUNS[kind]
    bad = tmp_path / f"{kind}.json"
    bad.write_bytes(content)
    for argv, command in ((["report", str(bad), "--no-plots"], "report"),
                          (["compare", str(good_run), str(bad)], "compare"),
                          (["compare", str(bad), str(good_run)], "compare"),
                          (["export-best", str(bad), "--out", str(tmp_path / "tuned")], "export-best")):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert err.startswith(f"rvtune {command}: {bad}: {message}"), (argv, err)
        assert not out
    assert not (tmp_path / "tuned").exists()


@pytest.mark.parametrize("kind", NOT_RUNS)
@pytest.mark.parametrize("option", ["--rvtune-resume", "--rvtune-compare"])
def test_pytest_names_a_file_that_is_not_a_run_as_a_usage_error(kind: str, option: str, tmp_path: Path) -> None:
    content, message = NOT_RUNS[kind]
    bad = tmp_path / f"{kind}.jsonl"
    bad.write_bytes(content)
    done = _pytest(*SELECT, f"{option}={bad}", f"--rvtune-results={tmp_path / 'run.jsonl'}")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.startswith(f"ERROR: {option}: {bad}: {message}")
    assert "INTERNALERROR" not in done.stdout + done.stderr
    assert not (tmp_path / "run.jsonl").exists()  # nothing ran


@pytest.mark.parametrize("kind", ["binary", "garbage", "benchmark"])
def test_a_results_file_that_is_not_ours_is_refused_before_anything_is_appended(kind: str, tmp_path: Path) -> None:
    content = json.dumps({"benchmarks": [{"name": "x", "extra_info": make_record("softmax", "small", {}, [1.0])}]})
    bad = tmp_path / f"{kind}.out"
    bad.write_bytes(NOT_RUNS[kind][0] if kind in NOT_RUNS else content.encode())
    before = bad.read_bytes()
    done = _suite(bad)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-2000:] + done.stderr[-2000:]
    message = NOT_RUNS[kind][1] if kind in NOT_RUNS else "a pytest-benchmark file; results are appended as JSON lines"
    assert done.stderr.startswith(f"ERROR: --rvtune-results{':' if kind in NOT_RUNS else ''} {bad}: {message}")
    assert bad.read_bytes() == before


@pytest.mark.parametrize("content", ["", FRAGMENT], ids=["empty", "torn-first-line"])
def test_a_results_file_without_a_whole_line_is_appended_to(content: str, tmp_path: Path) -> None:
    """A session killed in its first write (or by a full disk) leaves such a file: the next round appends."""
    path = tmp_path / "run.jsonl"
    path.write_text(content)
    done = _suite(path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = path.read_text().splitlines()
    assert lines[:-2] == ([FRAGMENT] if content else [])
    assert [json.loads(line)["outcome"] for line in lines[-2:]] == ["passed", "passed"]


def test_resume_says_when_nothing_can_be_resumed(good_run: Path, tmp_path: Path) -> None:
    crashed = write_jsonl(tmp_path / "crashed.jsonl",
                          [make_record("softmax", "small", {"BLOCK_SIZE_M": 1}, [], outcome="crashed")])
    done = _pytest(*SELECT, f"--rvtune-resume={crashed}", "--co")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (f"--rvtune-resume {crashed}: none of its 1 items can be resumed (only passed or wrong items with a "
            "verdict key, which an older pytest-rvtune did not write): every item runs") in done.stdout


def test_compare_says_how_many_items_it_compared(good_run: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    one = write_jsonl(tmp_path / "one.jsonl", [make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, [1000.0] * 5)])
    assert main(["compare", str(good_run), str(one)]) == 0  # fewer items: said, and the one compared passes
    assert "compared 1 of the base run's 2 items" in capsys.readouterr().err

    qemu = write_jsonl(tmp_path / "qemu.jsonl", [make_record("matmul", "M96", {"BLOCK_SIZE_M": bm}, [1000.0] * 5,
                                                             target="qemu") for bm in (16, 32)])
    assert main(["compare", str(good_run), str(qemu)]) == 2
    err = capsys.readouterr().err
    assert "compared 0 of the base run's 2 items" in err
    assert err.rstrip().endswith("rvtune compare: nothing compared: the base run has target(s) host and the new run "
                                 "qemu; items match by target, kernel, case and config: compare two runs of the "
                                 "same target")
