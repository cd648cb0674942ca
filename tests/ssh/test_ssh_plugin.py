"""The `laptop` path end to end: `pytest kernels --rvtune-target laptop` against the fixture board.

A real kernel item (Triton frontend, our lowering, clang-19) is built here, uploaded over SFTP and run on the
board under qemu-riscv64 with `perf stat`; pytest-benchmark output carries its counters and the board's
identity. A second run of the same items uploads nothing. An unreachable board is one error for the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sshd_helpers import REPO, Sshd, board_config, free_port

from pytest_rvtune.targets.config import TargetConfig

ITEMS = [
    "kernels/softmax.py::softmax[emu-BLOCK_SIZE_M=8-BLOCK_SIZE_N=64]",
    "kernels/softmax.py::softmax[emu-BLOCK_SIZE_M=4-BLOCK_SIZE_N=64]",
]


def write_config(cfg: TargetConfig, path: Path) -> Path:
    """The board as a user writes it in rvtune.toml."""
    def toml_list(items: tuple[str, ...]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    path.write_text("\n".join([
        f"[targets.{cfg.name}]",
        f"host = {json.dumps(cfg.hosts[0])}",
        f"port = {cfg.port}",
        f"user = {json.dumps(cfg.user)}",
        f"key = {json.dumps(str(cfg.key))}",
        "agent = false",
        f"known_hosts = {json.dumps(str(cfg.known_hosts))}",
        f"ssh_config = {json.dumps(str(cfg.ssh_config))}",
        f"work_dir = {json.dumps(cfg.work_dir)}",
        'runner = "perf"',
        'perf_events = ["task-clock", "instructions"]',
        f"exec_prefix = {toml_list(cfg.exec_prefix)}",
        f"lock_file = {json.dumps(cfg.lock_file)}",
        f"connect_timeout = {cfg.connect_timeout}",
        "",
    ]))
    return path


def run_pytest(config: Path, tmp_path: Path, tag: str, items: list[str] = ITEMS, extra: tuple[str, ...] = ()
               ) -> tuple[subprocess.CompletedProcess[str], Path]:
    bench = tmp_path / f"{tag}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *items, "--rvtune-target", "laptop", "--rvtune-config-file", str(config),
         "--rvtune-results", str(tmp_path / f"{tag}.jsonl"), "--benchmark-json", str(bench), "-p", "no:cacheprovider",
         "-q", "-rA", *extra],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    return proc, bench


@pytest.mark.skipif(not (REPO / "kernels" / "softmax.py").is_file(), reason="the softmax kernel is not in kernels/")
def test_kernel_items_run_on_the_board_end_to_end(sshd: Sshd, tmp_path: Path):
    cfg = board_config(sshd, tmp_path)
    config = write_config(cfg, tmp_path / "rvtune.toml")
    proc, bench = run_pytest(config, tmp_path, "first")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    data = json.loads(bench.read_text())
    assert len(data["benchmarks"]) == len(ITEMS)
    for entry in data["benchmarks"]:
        assert entry["extra_info"]["counters"]["task-clock"] > 0
        assert "instructions" not in entry["extra_info"]["counters"]  # <not supported> here: missing
    machine = data["machine_info"]["rvtune_targets"]["laptop"]
    assert machine["vlen"] == "256" and machine["runner"] == "perf" and str(cfg.key) not in json.dumps(machine)
    first_files = {p.name for p in Path(cfg.work_dir, "files").iterdir()}

    proc, _ = run_pytest(config, tmp_path, "again")  # a re-run: the board already has every file
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert {p.name for p in Path(cfg.work_dir, "files").iterdir()} == first_files


@pytest.mark.skipif(not (REPO / "kernels" / "softmax.py").is_file(), reason="the softmax kernel is not in kernels/")
def test_a_regression_is_rerun_interleaved_on_the_board_it_ran_on(sshd: Sshd, tmp_path: Path):
    """confirm.py over SSH: the base and new items' ELFs and argv files go to the board (by content hash) and
    run there in alternation. The fixture board runs its ELFs under qemu-riscv64 (exec_prefix), so its times are
    emulated and never gated; the one stand-in here relabels them real (the board's own clock is hardware that
    is not here). Base: the same item with its samples made 3x faster, so the same ELF looks 3x slower."""
    from pytest_rvtune.results.compare import Thresholds, compare_record
    from pytest_rvtune.results.confirm import confirm
    from pytest_rvtune.results.records import record_from_dict
    from pytest_rvtune.run_options import RunOptions
    from pytest_rvtune.targets.config import load_targets
    from pytest_rvtune.targets.ssh import connect_board

    config = write_config(board_config(sshd, tmp_path), tmp_path / "rvtune.toml")
    proc, _ = run_pytest(config, tmp_path, "base", ITEMS[:1],
                         ("--rvtune-runs", "6"))  # emulated targets take 2 samples: too few for a test
    assert proc.returncode == 0, proc.stdout[-3000:]
    [raw] = [json.loads(line) for line in (tmp_path / "base.jsonl").read_text().splitlines()]
    new = record_from_dict(raw | {"timing_source": "real"})
    base = record_from_dict(raw | {"timing_source": "real", "samples_ns": [s / 3 for s in raw["samples_ns"]]})
    assert compare_record(base, new).status == "regressed"
    target = connect_board(load_targets(tmp_path, config)["laptop"], worker_id="main")  # the board as it ran
    try:
        target.timing_source = "real"
        # alpha 0.0001 and 14 trials: one ELF against itself is wrongly confirmed with probability up to alpha;
        # the default 0.01 with 7 trials is 1 in 128, and a CI run met it (7 of 7 pairs slower, median +17 %)
        result = confirm(base, new, target, RunOptions(warmup=1, runs=2, timeout=60.0), Thresholds(alpha=1e-4),
                         trials=14)
    finally:
        target.close()
    # fourteen pairs measured on the board, and the same ELF against itself is not confirmed slower
    assert len(result.ratios) == 14 and all(0 < r < 10 for r in result.ratios) and result.base_ns > 0, result
    assert not result.confirmed, result


def test_unreachable_board_fails_the_item_naming_host_and_cause(sshd: Sshd, tmp_path: Path):
    # One item: with two, the plugin's skip of the second (the error "reported once, above") currently
    # trips a pytest INTERNALERROR; that is the plugin's to fix (reported to the lead).
    cfg = board_config(sshd, tmp_path, port=free_port(), connect_timeout=2.0)
    proc, _ = run_pytest(write_config(cfg, tmp_path / "rvtune.toml"), tmp_path, "down", ITEMS[:1])
    assert proc.returncode != 0
    assert f"board root@127.0.0.1:{cfg.port}: nothing listens on port {cfg.port} (connection refused)" in proc.stdout, \
        proc.stdout[-3000:]


KILLER = '''
import os, signal, subprocess
_done = []
def pytest_runtest_logfinish(nodeid, location):
    if _done:
        return
    _done.append(nodeid)  # after the first item: the board goes away (listener and live sessions)
    pid = os.environ["RVTUNE_TEST_SSHD_PID"]
    for child in subprocess.run(["pgrep", "-P", pid], capture_output=True, text=True).stdout.split():
        os.kill(int(child), signal.SIGKILL)
    os.kill(int(pid), signal.SIGTERM)
'''


def test_board_lost_mid_session_is_one_error_then_skips(own_sshd: Sshd, tmp_path: Path):
    cfg = board_config(own_sshd, tmp_path, connect_timeout=3)
    config = write_config(cfg, tmp_path / "rvtune.toml")
    (tmp_path / "rvtune_killer.py").write_text(KILLER)
    items = [*ITEMS, "kernels/softmax.py::softmax[emu-BLOCK_SIZE_M=2-BLOCK_SIZE_N=64]",
             "kernels/softmax.py::softmax[emu-BLOCK_SIZE_M=1-BLOCK_SIZE_N=64]"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "RVTUNE_TEST_SSHD_PID": str(own_sshd.proc.pid)}
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *items, "--rvtune-target", "laptop", "--rvtune-config-file", str(config),
         "--rvtune-results", str(tmp_path / "lost.jsonl"), "-p", "rvtune_killer", "-p", "no:cacheprovider", "-q"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    out = proc.stdout
    assert "1 passed" in out and "1 failed" in out and "2 skipped" in out, out[-3000:]
    records = [json.loads(line) for line in (tmp_path / "lost.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["passed", "error"]  # the finished item is kept
    assert f"board {cfg.user}@127.0.0.1:{cfg.port} lost" in records[1]["message"]


def test_a_lock_file_in_a_missing_directory_is_one_board_error_naming_it(sshd: Sshd, tmp_path: Path):
    """Issue 15: every item "crashed with status 66" (flock's EX_NOINPUT) and none said why."""
    lock = tmp_path / "no such dir" / "board.lock"
    config = write_config(board_config(sshd, tmp_path, lock_file=str(lock)), tmp_path / "rvtune.toml")
    proc, _ = run_pytest(config, tmp_path, "lock")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "status 66" not in proc.stdout and "crashed" not in proc.stdout and "1 skipped, 1 error" in proc.stdout
    # once; the other item points to it. (Before pytest's short summary, which repeats the error's message in
    # full when CI is set and cut to the terminal's width otherwise.)
    reports = proc.stdout.split("short test summary info")[0]
    assert reports.count("cannot take the board's lock file") == 1, reports[-3000:]
    assert (f"target 'laptop': board root@127.0.0.1:{sshd.port}: cannot take the board's lock file '{lock}' (flock: "
            f"cannot open lock file {lock}: No such file or directory); set {config} [targets.laptop] lock_file "
            "to a file in a directory that exists") in proc.stdout, proc.stdout[-3000:]


def test_a_boards_own_timeout_is_named_as_the_boards_setting(sshd: Sshd, tmp_path: Path):
    """Issue 15: a board's `timeout = ...` was reported as --rvtune-timeout, which the user never gave."""
    config = write_config(board_config(sshd, tmp_path), tmp_path / "rvtune.toml")
    config.write_text(config.read_text() + "timeout = 0.5\n")
    proc, _ = run_pytest(config, tmp_path, "slow", ITEMS[:1], ("--rvtune-runs", "1000000"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert (f"on target laptop: killed after the 0.5 s timeout ({config} [targets.laptop] timeout = 0.5; "
            "--rvtune-timeout overrides it)") in proc.stdout, proc.stdout[-3000:]
