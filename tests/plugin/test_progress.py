"""Progress of a session: builds and runs done out of the total, and an ETA, from the xdist controller.

Real sessions (softmax from kernels/, four configs on QEMU, two xdist workers): once with output to a pipe (a
progress line every --rvtune-progress seconds), once on a pseudo-terminal (one status line redrawn in place).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from pytest_rvtune.progress import ERASE_TO_END, RESTORE_CURSOR, SAVE_CURSOR, Progress, format_duration

REPO = Path(__file__).resolve().parents[2]
SESSION = [sys.executable, "-m", "pytest", "kernels/softmax.py", "--rvtune-case", "emu", "--rvtune-config",
           "BLOCK_SIZE_M=1;BLOCK_SIZE_N=16,32,64,128", "-n", "2", "-q", "-p", "no:cacheprovider",
           "--benchmark-disable"]
LINE = re.compile(r"builds (\d+)/(\d+)(?: \((\d+) cached\))?, runs (\d+)/(\d+)(?: \(\d+ reused\))?"
                  r"(?:; (\S+) elapsed, ETA (\S+)|; all done in (\S+))?")


def _env() -> dict[str, str]:
    # without this test run's own xdist variables, which would make the child think it is a worker
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}


def test_xdist_session_prints_progress_lines_with_counts_and_an_eta(tmp_path: Path) -> None:
    done = subprocess.run([*SESSION, "--rvtune-progress", "0.001", f"--rvtune-results={tmp_path / 'r.jsonl'}"],
                          cwd=REPO, capture_output=True, text=True, env=_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("rvtune progress: ")]
    counts = [LINE.match(line.removeprefix("rvtune progress: ")) for line in lines]
    assert all(counts), lines
    builds = [int(m.group(1)) for m in counts if m]
    runs = [int(m.group(4)) for m in counts if m]
    assert {int(m.group(2)) for m in counts if m} == {4}  # the total: the four kernel items
    assert builds == sorted(set(builds)) and runs == sorted(set(runs))  # a line when an item finished
    assert builds[-1] == runs[-1] == 4 and counts[-1] and counts[-1].group(8)  # the last: "all done in ..."
    etas = [m.group(7) for m in counts if m and m.group(7)]
    assert etas and all(re.fullmatch(r"(\d+m)?\d+s|\d+h\d+m", eta) for eta in etas)  # the first line has one


def test_default_interval_prints_no_line_per_item(tmp_path: Path) -> None:
    done = subprocess.run([*SESSION, "--rvtune-progress", "3600", f"--rvtune-results={tmp_path / 'r.jsonl'}"],
                          cwd=REPO, capture_output=True, text=True, env=_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rvtune progress" not in done.stdout and "builds " not in done.stdout


def _on_a_terminal(argv: list[str], width: int = 120) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal of ``width`` columns as its output; (exit code, everything written)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, width, 0, 0))
    proc = subprocess.Popen(argv, cwd=REPO, stdin=slave, stdout=slave, stderr=slave, env=_env() | {"TERM": "xterm"})
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            out += data
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), out.decode(errors="replace")


def test_on_a_terminal_one_status_line_is_redrawn_in_place(tmp_path: Path) -> None:
    code, out = _on_a_terminal([*SESSION, f"--rvtune-results={tmp_path / 'r.jsonl'}"])
    assert code == 0, out[-3000:]
    assert "rvtune progress:" not in out  # no lines of their own
    drawn = re.findall(re.escape(SAVE_CURSOR) + r"(.*?)" + re.escape(RESTORE_CURSOR), out)
    texts = [re.sub(r"\x1b\[[0-9;]*m", "", text).strip() for text in drawn]
    assert texts and all(LINE.fullmatch(t) for t in texts), texts
    assert texts[-1].startswith("builds 4/4") and "runs 4/4" in texts[-1] and "all done in" in texts[-1]
    assert any("ETA" in t for t in texts)
    # every drawing is erased before anything else is written: what remains is pytest's own output
    after = [out[m.end():m.end() + len(ERASE_TO_END)] for m in re.finditer(re.escape(RESTORE_CURSOR), out)]
    assert after == [ERASE_TO_END] * len(drawn)
    plain = re.sub(re.escape(SAVE_CURSOR) + r".*?" + re.escape(RESTORE_CURSOR), "", out).replace(ERASE_TO_END, "")
    assert "...." in re.sub(r"\x1b\[[0-9;]*m", "", plain)


def test_progress_counts_builds_runs_and_failures_and_estimates_what_is_left() -> None:
    progress = Progress()
    progress.start(total=4, now=100.0)
    progress.finish("a", {"outcome": "passed", "build_cache_hit": True, "counts_cached": True})
    progress.finish("b", {"outcome": "build_failed"})
    assert progress.line(110.0) == ("builds 2/4 (1 cached), runs 1/4 (1 reused), 1 failed; 10s elapsed, "
                                    "ETA 10s")
    progress.finish("b", {"outcome": "build_failed"})  # the same item reported again: counted once
    progress.finish("c", None)  # no record: its setup failed or its worker died
    progress.finish("d", {"outcome": "wrong", "build_cache_hit": False})
    assert progress.eta(130.0) is None
    assert progress.line(130.0) == "builds 3/4 (1 cached), runs 2/4 (1 reused), 3 failed; all done in 30s"
    assert [format_duration(s) for s in (0.4, 59, 61, 3599, 3600 * 2 + 120)] == ["0s", "59s", "1m01s", "59m59s",
                                                                                   "2h02m"]
