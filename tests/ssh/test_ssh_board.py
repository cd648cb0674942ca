"""A board over SSH, end to end: connect and check, upload once, run, parse, perf, lock, kill, pool.

The board is the fixture OpenSSH server running the rv64gcv test ELF under qemu-riscv64 (exec_prefix), or a
real board when RVTUNE_TEST_BOARD names one in rvtune.toml (see conftest.py).
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd_helpers import Sshd, board_config, lock_held, remote_pids, wait_for

from pytest_rvtune.targets.base import RunResult, Target
from pytest_rvtune.targets.config import TargetConfig
from pytest_rvtune.targets.remote_cmd import RemoteRun
from pytest_rvtune.targets.ssh import BoardError, SshTarget, connect_board


@pytest.fixture
def target(board: TargetConfig) -> Iterator[SshTarget]:
    t = connect_board(board, worker_id="gw0")
    yield t
    t.close()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "input 1.txt"
    path.write_text("2 3\n1.5 2.5 3\n4 5 6\n")
    return path


def test_connect_checks_board_and_identity_names_it_without_secrets(target: SshTarget, board: TargetConfig):
    assert isinstance(target, Target)
    ident = target.identity()
    assert ident["target"] == board.name
    assert ident["vlen"] == "256"  # read from the vlenb CSR by the probe, not copied from the config
    assert ident["isa"] == "rv64gcv_zvl256b"
    assert ident["board"] and ident["kernel"]
    text = repr(ident)
    assert str(board.key) not in text and "client_key" not in text
    for name, value in board.env.items():
        assert value not in text and name not in text
    assert target.timing_source == ("emulated" if board.exec_prefix else "real")


def test_run_uploads_files_and_parses_harness_output(target: SshTarget, rvtest_elf: Path, data: Path):
    result = target.run(rvtest_elf, ["--note", "plain", data], timeout=60)
    assert isinstance(result, RunResult)
    assert result.returncode == 0 and not result.timed_out and result.signal is None
    assert len(result.samples_ns) == 3 and all(s >= 0 for s in result.samples_ns)
    assert [c.name for c in result.checks] == ["f0"] and result.all_checks_ok
    assert result.checks[0].count == 8
    assert "sum0=27" in result.stdout  # the golden file's content reached the board intact
    # The ELF saw the content-addressed copy of the file, not our local path.
    assert str(data) not in result.stdout and "/files/" in result.stdout


def test_missing_file_on_board_is_a_harness_error(target: SshTarget, rvtest_elf: Path):
    result = target.run(rvtest_elf, ["/nonexistent/golden.txt"], timeout=60)
    assert result.returncode == 2
    assert result.errors == ["cannot open /nonexistent/golden.txt"]


def test_files_upload_once_by_content_hash(board: TargetConfig, target: SshTarget, rvtest_elf: Path,
                                          data: Path, tmp_path: Path):
    before = target.uploads
    target.prepare([data])
    target.run(rvtest_elf, [data], timeout=60)
    assert target.uploads == before + 2  # the ELF and the data file
    target.run(rvtest_elf, [data], timeout=60)
    assert target.uploads == before + 2  # same session: nothing again
    target.close()

    rerun = connect_board(board, worker_id="gw0")  # a new session: the board's cache answers
    try:
        assert rerun.run(rvtest_elf, [data], timeout=60).all_checks_ok
        assert rerun.uploads == 0
        changed = tmp_path / "changed" / data.name  # same name, new content: a new upload
        changed.parent.mkdir()
        changed.write_text("7 8\n")
        result = rerun.run(rvtest_elf, [changed], timeout=60)
        assert rerun.uploads == 1 and "sum0=15" in result.stdout
    finally:
        rerun.close()


def test_quotes_and_spaces_reach_the_board_verbatim_and_inject_nothing(
        sshd: Sshd, tmp_path: Path, rvtest_elf: Path, data: Path):
    evil = "it's \"q\" $(touch PWNED) `touch PWNED2`; touch PWNED3 & *"
    cfg = board_config(sshd, tmp_path, work_dir=str(tmp_path / f"work {evil}"), env={"RVTEST_ENV": evil})
    elf = tmp_path / "k'ern el;$(touch PWNED4).elf"
    shutil.copy(rvtest_elf, elf)
    golden = tmp_path / "gold 'en' $(touch PWNED5).txt"
    shutil.copy(data, golden)
    t = connect_board(cfg, worker_id="gw0")
    try:
        result = t.run(elf, ["--note", evil, golden], timeout=60)
    finally:
        t.close()
    assert result.returncode == 0, result.stderr
    assert f"arg2={evil}\n" in result.stdout
    assert f"env={evil}\n" in result.stdout
    assert "sum0=27" in result.stdout
    assert "k'ern el;$(touch PWNED4).elf" in result.stdout.splitlines()[0]
    assert not list(tmp_path.rglob("PWNED*")) and not list(sshd.home.rglob("PWNED*"))


def test_hung_elf_is_killed_at_timeout_and_leaves_nothing(target: SshTarget, rvtest_elf: Path):
    token = f"hang-{secrets.token_hex(4)}"
    result = target.run(rvtest_elf, ["--note", token, "--hang"], timeout=1)
    assert result.timed_out and result.returncode is None
    assert "arg2=" + token in result.stdout  # what it printed before the kill is kept
    assert remote_pids(target, token) == []


def test_crash_reports_the_signal(target: SshTarget, rvtest_elf: Path):
    result = target.run(rvtest_elf, ["--crash"], timeout=60)
    assert result.signal == 11 and result.returncode == -11 and not result.timed_out


@pytest.mark.skipif(shutil.which("perf") is None, reason="linux-perf is not installed on this machine")
def test_perf_stat_and_record_counters_with_missing_ones_left_out(sshd: Sshd, tmp_path: Path, rvtest_elf: Path,
                                                              data: Path):
    # This VM has no PMU: `instructions` prints <not supported>, a software event counts.
    cfg = board_config(sshd, tmp_path, runner="perf", perf_events=("task-clock", "instructions"),
                       record_events=("cpu-clock",))
    t = connect_board(cfg, worker_id="gw0")
    try:
        result = t.run(rvtest_elf, [data], timeout=60)
        crashed = t.run(rvtest_elf, ["--crash"], timeout=60)
    finally:
        t.close()
    assert result.returncode == 0 and result.all_checks_ok
    assert result.counters.get("task-clock", 0) > 0
    assert "instructions" not in result.counters  # missing, not zero
    assert "task-clock" not in result.stderr  # perf's CSV is not mixed into the ELF's stderr
    assert result.counters.get("cpu-clock (perf record)", 0) > 0  # the optional perf record run
    assert crashed.signal == 11  # perf stat alone would have reported exit 0


def test_board_lock_makes_runs_take_turns(board: TargetConfig, target: SshTarget, rvtest_elf: Path):
    impatient = connect_board(dataclasses.replace(board, lock_timeout=0.5), worker_id="gw1")
    holder: list[RunResult] = []
    thread = threading.Thread(target=lambda: holder.append(target.run(rvtest_elf, ["--hang"], timeout=2)))
    thread.start()
    try:
        wait_for(lambda: lock_held(impatient), "the first run to take the board lock")
        with pytest.raises(BoardError, match="busy"):
            impatient.run(rvtest_elf, [], timeout=60)
        thread.join()
        assert holder[0].timed_out
        assert impatient.run(rvtest_elf, [], timeout=60).returncode == 0  # free again once the holder ends
    finally:
        thread.join()
        impatient.close()


def test_cancelled_client_frees_the_lock_and_kills_its_run(sshd: Sshd, tmp_path: Path, rvtest_elf: Path):
    """A CI job killed mid-run (here: an OpenSSH client, SIGKILLed) leaves no run and no lock behind."""
    cfg = board_config(sshd, tmp_path, lock_timeout=20.0)
    t = connect_board(cfg, worker_id="gw0")
    try:
        t.prepare([rvtest_elf])
        token = f"cancel-{secrets.token_hex(4)}"
        remote_elf = t._loop.run(t._cache.ensure(rvtest_elf))  # type: ignore[union-attr]
        spec = RemoteRun(argv=[remote_elf, "--note", token, "--hang"], timeout=600, work_dir=t.work_dir,
                         lock_file=cfg.lock_file, lock_timeout=5, exec_prefix=cfg.exec_prefix)
        client = subprocess.Popen(
            ["ssh", "-T", "-i", str(cfg.key), "-p", str(cfg.port), "-o", "BatchMode=yes",
             "-o", f"UserKnownHostsFile={cfg.known_hosts}", "-F", "/dev/null", f"root@{sshd.address}",
             spec.command()],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(lambda: lock_held(t), "the run to take the board lock")
        finally:
            client.kill()
            client.wait()
        wait_for(lambda: remote_pids(t, token) == [], "the abandoned run to be killed")
        assert not lock_held(t)
    finally:
        t.close()


def test_pool_hands_workers_different_boards_and_skips_dead_ones(sshd: Sshd, tmp_path: Path, rvtest_elf: Path):
    pool = board_config(sshd, tmp_path, hosts=("127.0.0.1", "127.0.0.2"))
    picked = {}
    for worker in ("master", "gw0", "gw1", "gw2", "gw3"):
        t = connect_board(pool, worker_id=worker)
        picked[worker] = t.host
        t.close()
    assert picked == {"master": "127.0.0.1", "gw0": "127.0.0.1", "gw1": "127.0.0.2", "gw2": "127.0.0.1",
                      "gw3": "127.0.0.2"}
    assert "pool" in SshTarget(pool, "127.0.0.1").identity()

    # 127.0.0.3 answers nothing on this port: its worker gets the next board of the pool.
    with_dead = dataclasses.replace(pool, hosts=("127.0.0.3", "127.0.0.1"))
    t = connect_board(with_dead, worker_id="gw0")
    try:
        assert t.host == "127.0.0.1"
        assert t.run(rvtest_elf, [], timeout=60).returncode == 0
    finally:
        t.close()
    with pytest.raises(BoardError, match=r"no board of the pool[\s\S]*127\.0\.0\.3[\s\S]*127\.0\.0\.4"):
        connect_board(dataclasses.replace(pool, hosts=("127.0.0.3", "127.0.0.4")), worker_id="gw0")
