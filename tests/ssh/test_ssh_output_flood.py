"""Issue 15: a board's exec_prefix wrapper (or the ELF) that prints 60 MB. Before, the connect probe's line ran
into the flood's last, unterminated line and the board was refused as having "no usable V extension"; a run
kept the whole flood in memory. Now the probe finds its line, a run keeps the head and the tail of each stream
(saying what it dropped), and the session's memory does not grow with the flood.

Memory is measured in a child Python that connects to the fixture board and runs one ELF there: its peak RSS
(getrusage) with the flooding wrapper against the same run without it.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sshd_helpers import REPO, Sshd, board_config, qemu_command

from pytest_rvtune.targets.config import TargetConfig
from pytest_rvtune.targets.ssh import BoardError, connect_board

FLOOD = 60_000_000
#: 60 MB of 80-byte lines, cut mid-line by head -c (no final newline), then the command it wraps.
FLOOD_WRAPPER = ('#!/bin/sh\nyes "flood flood flood flood flood flood flood flood flood flood flood flood flood flo" '
                 f'| head -c {FLOOD}\nexec "$@"\n')
#: Runs the command with its stdout thrown away: a probe that exits 0 and says nothing.
SWALLOWING_WRAPPER = '#!/bin/sh\n"$@" >/dev/null\n'

CHILD = """
import json, resource, sys
from pathlib import Path
from pytest_rvtune.targets.config import TargetConfig
from pytest_rvtune.targets.ssh import connect_board
fields = json.loads(sys.argv[1])
paths = ("key", "known_hosts", "ssh_config")
cfg = TargetConfig(**{k: Path(v) if k in paths and v else tuple(v) if isinstance(v, list) else v
                      for k, v in fields.items()})
target = connect_board(cfg, worker_id="gw0")
result = target.run(Path(sys.argv[2]), ["--note", "hello"], timeout=120)
target.close()
print(json.dumps({"rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "samples": len(result.samples_ns), "returncode": result.returncode, "stdout": result.stdout}))
"""


def _wrapper(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def _run_in_child(cfg: TargetConfig, elf: Path) -> dict:
    fields = {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
              for k, v in dataclasses.asdict(cfg).items()}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(fields), str(elf)], capture_output=True,
                          text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_flooding_exec_prefix_still_connects_and_its_runs_keep_memory_bounded(sshd: Sshd, tmp_path: Path,
                                                                                 rvtest_elf: Path) -> None:
    flood = _wrapper(tmp_path, "flood.sh", FLOOD_WRAPPER)
    quiet_cfg = board_config(sshd, tmp_path, work_dir=str(tmp_path / "quiet work"))
    loud_cfg = board_config(sshd, tmp_path, exec_prefix=(str(flood), *qemu_command()))
    target = connect_board(loud_cfg, worker_id="gw0")  # the probe: was "no usable V extension"
    try:
        assert target.facts["vlen"] == "256"
    finally:
        target.close()
    quiet, loud = _run_in_child(quiet_cfg, rvtest_elf), _run_in_child(loud_cfg, rvtest_elf)
    assert quiet["returncode"] == loud["returncode"] == 0 and quiet["samples"] == loud["samples"] == 3
    assert loud["rss_mib"] - quiet["rss_mib"] < 40, (quiet["rss_mib"], loud["rss_mib"])
    out = loud["stdout"]
    assert out.startswith("flood flood") and len(out) < 1.2 * 2**20
    assert "\n[rvtune: 56.2 MiB of this output (57.2 MiB in all) not kept: only its first 64 KiB and last 1.0 MiB " \
           "are]\n" in out
    assert "arg2=hello\n" in out  # the ELF's own lines after the flood are all there


def test_a_probe_that_prints_nothing_is_not_blamed_on_the_v_extension(sshd: Sshd, tmp_path: Path) -> None:
    swallow = _wrapper(tmp_path, "swallow.sh", SWALLOWING_WRAPPER)
    cfg = board_config(sshd, tmp_path, exec_prefix=(str(swallow), *qemu_command()))
    with pytest.raises(BoardError) as silent:
        connect_board(cfg, worker_id="gw0")
    message = str(silent.value)
    assert "V extension" not in message
    assert (f"the vector probe exited 0 but its `RVTUNE vlen N` line is not in its output (0 bytes on stdout, "
            f"ending ''): does exec_prefix print over it? Check exec_prefix in {cfg.where()}") in message
