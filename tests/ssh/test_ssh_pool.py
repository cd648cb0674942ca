"""A pool of boards hands each run a free board: two loopback OpenSSH servers as boards A and B.

Both servers run on this machine, so "the board's lock" must be a different file per board: the work dir is
``~/board work`` (each server's sessions get their own HOME) and the lock file is relative to it. The test
holds a board's lock itself with flock(2) on that local path, exactly as another job's run would.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd_helpers import Keys, Sshd, board_config, wait_for

from pytest_rvtune.targets.base import RunResult, Target
from pytest_rvtune.targets.config import TargetConfig
from pytest_rvtune.targets.ssh import BoardLostError, SshPool, connect_board

WORK = "board work"


@pytest.fixture
def boards(tmp_path: Path, ssh_keys: Keys) -> Iterator[tuple[Sshd, Sshd]]:
    """Boards A and B: two servers on two loopback addresses and one port (a pool shares its port)."""
    a = Sshd(tmp_path / "a", ssh_keys, address="127.0.0.11")
    b = Sshd(tmp_path / "b", ssh_keys, address="127.0.0.12")
    b.port = a.port
    a.start()
    try:
        b.start()
        try:
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()


@pytest.fixture
def pool_cfg(boards: tuple[Sshd, Sshd], tmp_path: Path) -> TargetConfig:
    a, b = boards
    (tmp_path / "known_hosts").write_text(a.known_hosts_line() + b.known_hosts_line())
    # lock_timeout bounds a wrong wait on a held board: the run would fail with "stayed busy", not hang.
    return board_config(a, tmp_path, hosts=(a.address, b.address), work_dir=f"~/{WORK}", lock_file="board.lock",
                        lock_timeout=20.0)


def lock_path(board: Sshd) -> Path:
    return board.home / WORK / "board.lock"


@contextlib.contextmanager
def holding(board: Sshd) -> Iterator[None]:
    """Hold the board's run lock from here, as another worker's or CI job's run would."""
    path = lock_path(board)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
        fcntl.flock(fh, fcntl.LOCK_UN)


def ran_on(result: RunResult, board: Sshd) -> bool:
    """The ELF's argv[0] is its content-addressed upload, under the work dir of the board that ran it."""
    return f"arg0={board.home / WORK}/files/" in result.stdout


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "golden.txt"
    path.write_text("1 3\n1 2 3\n")
    return path


def test_free_pool_runs_on_the_preferred_board_and_opens_no_other(pool_cfg: TargetConfig, boards, rvtest_elf: Path,
                                                                  data: Path):
    a, b = boards
    for worker, board in (("gw0", a), ("gw1", b)):
        pool = connect_board(pool_cfg, worker_id=worker)
        try:
            assert isinstance(pool, SshPool) and isinstance(pool, Target)
            result = pool.run(rvtest_elf, [data], timeout=60)
            assert result.returncode == 0 and "sum0=10" in result.stdout
            assert ran_on(result, board) and pool.identity()["host"] == board.address
            assert list(pool.boards) == [board.address]  # the other board's connection is opened lazily
        finally:
            pool.close()


def test_busy_preferred_board_hands_the_run_to_a_free_one(pool_cfg: TargetConfig, boards, rvtest_elf: Path,
                                                          data: Path):
    a, b = boards
    pool = connect_board(pool_cfg, worker_id="gw0")
    try:
        assert isinstance(pool, SshPool)
        pool.prepare([data])
        uploads_on_a = pool.boards[a.address].uploads
        with holding(a):
            # A stays locked for the whole run: the run finishing at all shows it did not wait for A.
            result = pool.run(rvtest_elf, [data], timeout=60)
            assert result.returncode == 0 and "sum0=10" in result.stdout
            assert ran_on(result, b)
            ident = pool.identity()
            assert ident["host"] == b.address and ident["pool"] == f"{a.address},{b.address}"
            # The files went to B, the board that ran (A got its upload from prepare only).
            assert list((b.home / WORK / "files").glob(f"*/{data.name}"))
            assert pool.boards[a.address].uploads == uploads_on_a
            uploads_on_b = pool.boards[b.address].uploads
            again = pool.run(rvtest_elf, [data], timeout=60)  # B's connection and uploads are kept
            assert ran_on(again, b) and pool.boards[b.address].uploads == uploads_on_b
        result = pool.run(rvtest_elf, [data], timeout=60)  # A is free again: back to the preferred board
        assert ran_on(result, a) and pool.identity()["host"] == a.address
        assert pool.reconnects == 0
    finally:
        pool.close()


def test_all_busy_queues_on_the_preferred_board(pool_cfg: TargetConfig, boards, rvtest_elf: Path):
    a, b = boards
    pool = connect_board(pool_cfg, worker_id="gw0")
    results: list[RunResult] = []
    try:
        with holding(a):
            b_lock = contextlib.ExitStack()
            b_lock.enter_context(holding(b))
            runner = threading.Thread(target=lambda: results.append(pool.run(rvtest_elf, [], timeout=60)))
            runner.start()
            wait_for(lambda: waiting_flock_in(a.home / WORK), "the run to queue on board A")
            b_lock.close()
            # B is free now, but the run already waits on A: it must run there once A is released.
        runner.join(60)
        assert not runner.is_alive()
        assert len(results) == 1 and results[0].returncode == 0 and ran_on(results[0], a)
        assert pool.identity()["host"] == a.address
    finally:
        pool.close()


def test_lost_board_is_skipped_for_the_rest_of_the_session(pool_cfg: TargetConfig, boards, rvtest_elf: Path):
    a, b = boards
    pool = connect_board(pool_cfg, worker_id="gw0")
    try:
        assert ran_on(pool.run(rvtest_elf, [], timeout=60), a)
        a.stop()  # board A goes away: its connection drops and reconnecting is refused
        assert ran_on(pool.run(rvtest_elf, [], timeout=60), b)
        assert a.address in pool.lost and "lost" in pool.lost[a.address]
        assert ran_on(pool.run(rvtest_elf, [], timeout=60), b)
        assert list(pool.boards) == [b.address]  # no new attempt on A
        b.stop()
        with pytest.raises(BoardLostError, match=r"every board of the pool is lost[\s\S]*127\.0\.0\.11[\s\S]*"
                                                 r"127\.0\.0\.12"):
            pool.run(rvtest_elf, [], timeout=60)
    finally:
        pool.close()


def waiting_flock_in(work_dir: Path) -> bool:
    """A blocking ``flock -w`` (a run queued for the lock) runs in that board's work dir (loopback: our /proc)."""
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if argv[:2] == [b"flock", b"-w"] and (proc / "cwd").resolve() == work_dir.resolve():
                return True
    return False
