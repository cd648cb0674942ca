"""Issue 15: an ELF that prints 60 MB took the session to 1.05 GB of memory (its whole output was kept, then
copied by the parser and the verdict). Now a run keeps the first 64 KiB and the last 1 MiB of each stream and
says what it dropped; the harness's lines at the end are still read.

The memory is measured in a child Python that runs the real target (qemu or host) and judges the result as the
plugin does: its peak RSS (getrusage) with a 60 MB flood against the same run without one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rvtune.targets.output_cap import HEAD_BYTES, TAIL_BYTES, CappedOutput
from pytest_rvtune.targets.remote_cmd import STAT_MARKER, split_perf
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain

REPO = Path(__file__).resolve().parent.parent

#: flood BYTES out|err [crash|forever]: a first line, BYTES of 80-byte lines on that stream, then a harness's
#: result lines (or a crash, or a flood that never ends).
FLOOD_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    FILE *to = strcmp(argv[2], "err") == 0 ? stderr : stdout;
    const char *then = argc > 3 ? argv[3] : "";
    char line[81];
    memset(line, 'x', 79); line[79] = '\n'; line[80] = 0;
    fprintf(to, "first line of the flood\n");
    for (long i = 0; i < n / 80 || strcmp(then, "forever") == 0; i++) fputs(line, to);
    fprintf(to, "last line of the flood\n");
    fflush(to);
    if (strcmp(then, "crash") == 0) *(volatile int *)0 = 1;
    printf("RVTUNE sample 1500\nRVTUNE sample 1200\n");
    printf("RVTUNE check out ok max_abs=0 max_rel=0 first_bad=-1 count=0\n");
    return 0;
}
"""

CHILD = """
import json, resource, sys
from pathlib import Path
from pytest_rvtune.targets.local import HostTarget, QemuTarget
from pytest_rvtune.verdict import judge
target = QemuTarget(counters=False) if sys.argv[1] == "qemu" else HostTarget()
timeout = float(sys.argv[3])
result = target.run(Path(sys.argv[2]), sys.argv[4:], timeout)
verdict = judge(result, what="flood", timeout=timeout)
print(json.dumps({"rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "samples": result.samples_ns, "outcome": verdict.outcome, "message": verdict.message,
                  "stdout": result.stdout, "stderr": result.stderr}))
"""

FLOOD = 60_000_000


@pytest.fixture(scope="module", params=["qemu", "host"])
def flood_elf(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    tmp = tmp_path_factory.mktemp(request.param)
    (tmp / "flood.c").write_text(FLOOD_C)
    tc = Toolchain.for_isa(RISCV_ISA if request.param == "qemu" else HOST_ISA)
    tc.compile(tmp / "flood.c", tmp / "flood.o", extra=("-O1",))
    tc.link([tmp / "flood.o"], tmp / "flood.elf")
    return request.param, tmp / "flood.elf"


def _run(target: str, elf: Path, *args: str, timeout: float = 300) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, target, str(elf), str(timeout), *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_60_mb_flood_keeps_head_and_tail_and_memory_bounded(flood_elf: tuple[str, Path]) -> None:
    target, elf = flood_elf
    quiet = _run(target, elf, "0", "out")
    loud = _run(target, elf, str(FLOOD), "out")
    assert quiet["outcome"] == loud["outcome"] == "passed" and loud["samples"] == [1500, 1200]
    # Before: +200 MiB for the host run (227 vs 28 MiB peak), more with the session's own copies.
    assert loud["rss_mib"] - quiet["rss_mib"] < 20, (quiet["rss_mib"], loud["rss_mib"])
    out = loud["stdout"]
    assert len(out) < HEAD_BYTES + TAIL_BYTES + 1000
    assert out.startswith("first line of the flood\n") and "last line of the flood\n" in out
    note = "[rvtune: 56.2 MiB of this output (57.2 MiB in all) not kept: only its first 64 KiB and last 1.0 MiB are]"
    assert out.endswith(f"\n{note}\n")
    assert f"\n{note.replace('not kept:', 'dropped here:')}\nxxx" in out  # where the gap is, between whole lines


def test_a_crash_after_a_flood_shows_the_note_in_the_output_tail(flood_elf: tuple[str, Path]) -> None:
    target, elf = flood_elf
    crashed = _run(target, elf, str(FLOOD), "err", "crash")
    assert crashed["outcome"] == "crashed"
    assert crashed["message"].splitlines()[-2:] == [
        "    last line of the flood",
        "    [rvtune: 56.2 MiB of this output (57.2 MiB in all) not kept: only its first 64 KiB and last 1.0 MiB are]"]


def test_a_flood_that_never_ends_is_killed_at_the_timeout_with_memory_bounded(flood_elf: tuple[str, Path]) -> None:
    target, elf = flood_elf
    quiet = _run(target, elf, "0", "out")
    endless = _run(target, elf, "0", "out", "forever", timeout=3)
    assert endless["outcome"] == "timeout" and "killed after the 3 s timeout" in endless["message"]
    assert endless["stdout"].startswith("first line of the flood\n") and "dropped here" in endless["stdout"]
    assert endless["rss_mib"] - quiet["rss_mib"] < 20, (quiet["rss_mib"], endless["rss_mib"])


DAEMON_C = r"""
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    pid_t child = fork();
    if (child == 0) {  /* a daemon: its own session, so outside the group a timeout kills; keeps stdout */
        setsid();
        sleep(60);
        return 0;
    }
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "%d\n", (int)child);
    fclose(f);
    printf("RVTUNE sample 1500\nRVTUNE sample 1200\n");
    printf("RVTUNE check out ok max_abs=0 max_rel=0 first_bad=-1 count=0\n");
    return 0;
}
"""

DAEMON_CHILD = """
import json, sys
from pathlib import Path
from pytest_rvtune.targets.local import HostTarget, QemuTarget
from pytest_rvtune.verdict import judge
target = QemuTarget(counters=False) if sys.argv[1] == "qemu" else HostTarget()
result = target.run(Path(sys.argv[2]), [sys.argv[3]], 20)
print(json.dumps({"verdict": judge(result, what="daemon", timeout=20).message, "stderr": result.stderr}))
"""


@pytest.mark.parametrize("target", ["qemu", "host"])
def test_a_harness_that_leaves_a_daemon_holding_its_output_passes_and_the_daemon_dies(
        target: str, tmp_path: Path) -> None:
    """Hostile case: the run waited for the daemon's end of the pipe until the timeout, so a harness that
    finished at once was "killed after the 20 s timeout", and the daemon (a session of its own) was left
    running."""
    (tmp_path / "daemon.c").write_text(DAEMON_C)
    tc = Toolchain.for_isa(RISCV_ISA if target == "qemu" else HOST_ISA)
    tc.compile(tmp_path / "daemon.c", tmp_path / "daemon.o")
    tc.link([tmp_path / "daemon.o"], tmp_path / "daemon.elf")
    pid_file = tmp_path / "daemon.pid"
    done = subprocess.run([sys.executable, "-c", DAEMON_CHILD, target, str(tmp_path / "daemon.elf"), str(pid_file)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["verdict"] == "daemon: passed"
    assert result["stderr"].endswith("[rvtune: killed 1 process(es) the ELF left running with its output open]\n")
    pid = int(pid_file.read_text())
    assert not _alive(pid), f"the daemon {pid} is still running"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


# ---- the capture itself ------------------------------------------------------------------------------------
def test_small_output_is_kept_as_a_text_pipe_reads_it() -> None:
    cap = CappedOutput()
    for chunk in (b"a\r\nb", "\u00e9".encode()[:1], "\u00e9".encode()[1:], b"\n\xff\n"):
        cap.add(chunk)
    assert cap.text() == "a\nb\u00e9\n\ufffd\n" and cap.dropped == 0


def test_everything_after_the_marker_is_kept_whole_even_when_split_across_chunks() -> None:
    """A board appends perf's CSV to the run's stderr after a marker: a flood before it must not cut it off."""
    marker = f"\n{STAT_MARKER}\n".encode()
    cap = CappedOutput(head=100, tail=1000, keep_after=marker)
    for _ in range(100):
        cap.add(b"y" * 79 + b"\n")
    csv = b"".join(b"%d,,task-clock,1,100.00,,\n" % i for i in range(200))  # longer than the tail
    data = marker + csv
    cap.add(data[:5])  # the marker arrives in three pieces
    cap.add(data[5:12])
    cap.add(data[12:])
    own, stat, _ = split_perf(cap.text())
    assert stat == csv.decode() and own.startswith("y" * 79 + "\n")
    assert own.endswith("not kept: only its first 100 bytes and last 1000 bytes are]\n")
    assert len(own) < 100 + 1000 + 300


def test_one_endless_line_is_bounded_too() -> None:
    """Hostile case: no newline at all (the gap cannot fall between lines): still head and tail only."""
    cap = CappedOutput(head=1000, tail=10_000)
    for _ in range(1000):
        cap.add(b"z" * 4096)
    text = cap.text()
    assert len(text) < 1000 + 10_000 + 300 and text.startswith("[rvtune: ") and text.endswith("are]\n")

