"""Hostile board settings: shell metacharacters in the settings that reach the board's shell (lock_file, which
the connect check now tries, work_dir, env) run nothing and reach it verbatim."""

from __future__ import annotations

import os
from pathlib import Path

from sshd_helpers import Sshd, board_config

from pytest_rvtune.targets.ssh import connect_board

EVIL = "it's \"q\" $(touch PWNED1) `touch PWNED2`; touch PWNED3 & *"


def _pwned(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("PWNED*")]


def test_metacharacters_in_lock_file_work_dir_and_env_inject_nothing(sshd: Sshd, tmp_path: Path,
                                                                     rvtest_elf: Path) -> None:
    lock_dir = tmp_path / f"locks {EVIL}"
    lock_dir.mkdir()
    cfg = board_config(sshd, tmp_path, lock_file=str(lock_dir / f"board {EVIL}.lock"),
                       work_dir=str(tmp_path / f"work {EVIL}"), env={"RVTEST_ENV": EVIL})
    target = connect_board(cfg, worker_id="gw0")
    try:
        result = target.run(rvtest_elf, [], timeout=60)
    finally:
        target.close()
    assert result.returncode == 0 and f"env={EVIL}" in result.stdout.splitlines()
    assert (lock_dir / f"board {EVIL}.lock").is_file()  # the connect check and the run took this very file
    assert _pwned(tmp_path) == [] and list(Path(os.path.expanduser("~")).glob("PWNED*")) == []
