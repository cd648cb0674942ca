"""The shell command one timing run executes on a board, and how to read its exit status back.

Three promises live in this wrapper, because sshd keeps none of them by itself:

* exclusive use: ``flock -w`` on the board's lock file wraps the whole run, so two xdist workers or two CI
  jobs never measure at once; the lock is an open file of the flock process, so it dies with its holder;
* bounded runs: ``timeout -k`` kills a hung ELF with everything it started (perf, QEMU, the ELF);
* abandoned runs die: ``setsid`` puts the run in a session of its own, and a watchdog reads the SSH
  channel's stdin, which the client never closes during a run; EOF there means the client went away
  (cancelled job, dropped connection), so it kills the whole session, lock wait included.

A run with ``links`` (a harness that opens its data by relative path) runs in a directory of its own under the
work dir, holding a symlink per relative path to the file's content-addressed upload; the directory is
removed when the run ends (also after a timeout or the watchdog's kill, since the outer script carries on).

Every word that comes from a user, a file name or a kernel name goes through ``shlex.quote``.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: Exit status of the wrapper when the board's lock was not free within ``lock_timeout``.
LOCK_BUSY_STATUS = 75  # EX_TEMPFAIL
#: Exit status of the wrapper when the work directory is missing (the board was wiped under us).
NO_WORKDIR_STATUS = 97
#: Exit status of the wrapper when the run directory for ``links`` could not be made.
NO_RUN_DIR_STATUS = 98
#: GNU timeout's status when it killed the command with the first signal (TERM).
TIMEOUT_STATUS = 124
#: Seconds between timeout's TERM and its KILL (and the watchdog's).
KILL_AFTER_S = 2

#: Separate the ELF's own stderr from the perf stat CSV and the perf record samples that follow it.
STAT_MARKER = "@@RVTUNE-PERF-STAT@@"
RECORD_MARKER = "@@RVTUNE-PERF-RECORD@@"


def quote_dir(path: str) -> str:
    """Quote a remote directory, keeping a leading ``~/`` as the remote user's home."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


@dataclass(frozen=True)
class RemoteRun:
    """What to run, already in the board's terms (remote paths, remote work dir)."""

    argv: Sequence[str]  # the ELF's remote path, then its arguments
    timeout: float
    work_dir: str  # absolute
    lock_file: str
    lock_timeout: float  # 0: do not wait, exit LOCK_BUSY_STATUS at once when the lock is held
    env: Mapping[str, str] = field(default_factory=dict)
    taskset: str | None = None
    exec_prefix: Sequence[str] = ()
    perf_events: Sequence[str] = ()  # empty: plain runner
    perf_out: str | None = None  # file perf stat writes its CSV to (inside work_dir)
    record_events: Sequence[str] = ()  # `perf record` events: a second run of the ELF, under the same lock
    record_out: str | None = None  # perf.data of that run (inside work_dir)
    links: Mapping[str, str] = field(default_factory=dict)  # relative path in run_dir -> remote file
    run_dir: str | None = None  # absolute, inside work_dir; made for `links` and removed after the run

    def command(self) -> str:
        """The command line for the remote login shell (which hands it to /bin/sh)."""
        return "exec /bin/sh -c " + shlex.quote(self.script())

    def _timed(self, command: Sequence[str]) -> list[str]:
        wrapped = [*command]
        if self.taskset:
            wrapped = ["taskset", "-c", self.taskset, *wrapped]
        return ["timeout", "-k", str(KILL_AFTER_S), f"{self.timeout:g}", *wrapped]

    def script(self) -> str:
        q = shlex.quote
        target = [*self.exec_prefix, *self.argv]
        if self.perf_events:
            # perf stat exits 0 when its child dies of a signal: an sh between them turns the signal into
            # status 128+N, which perf passes on, so a crash under perf is still seen as a crash.
            measured = self._timed([
                "perf", "stat", "-x,", "-o", self.perf_out or "perf.csv", "-e", ",".join(self.perf_events),
                "--", "/bin/sh", "-c", '"$@"; exit $?', "sh", *target,
            ])
        else:
            measured = self._timed(target)
        locked = " ".join(q(w) for w in measured)
        if self.record_events:
            # A second run under perf record, while the lock is still ours (skipped after a timeout).
            record = " ".join(q(w) for w in self._timed([
                "perf", "record", "-q", "-e", ",".join(self.record_events), "-F", "4001",
                "-o", self.record_out or "perf.data", "--", *target,
            ]))
            inner = (f"{locked}; rc=$?; [ $rc -eq {TIMEOUT_STATUS} ] || [ $rc -eq {128 + signal.SIGKILL} ] || "
                     f"{record} >/dev/null 2>&1; exit $rc")
            locked = f"/bin/sh -c {q(inner)}"
        # Shell assignments, not `env`: one exec less per run (names are identifiers, checked by config.py).
        envs = [f"{k}={q(v)}" for k, v in self.env.items()]
        # One session (setsid) holds everything the run starts: flock, timeout, perf, QEMU, the ELF.
        # timeout makes its own process group inside it, so the watchdog kills by session, not by group.
        # lock_timeout 0 is a try (flock -n): a pool asks each board once and runs on the first free one.
        wait = ["-w", f"{self.lock_timeout:g}"] if self.lock_timeout > 0 else ["-n"]
        # A relative lock file is relative to the work dir, and the run may cd into its own run dir.
        lock_file = posixpath.join(self.work_dir, self.lock_file)
        lock = " ".join(q(w) for w in [
            "setsid", "flock", *wait, "-E", str(LOCK_BUSY_STATUS), lock_file,
        ])
        run = " ".join([*envs, lock, locked])
        # fd 3 is the SSH channel's stdin: a background list's stdin would otherwise be /dev/null (POSIX),
        # and the ELF itself must not read it.
        lines = [
            f"cd {q(self.work_dir)} || exit {NO_WORKDIR_STATUS}",
            "ulimit -c 0 2>/dev/null",  # a crashing config must not fill the board's disk with cores
            *self._run_dir_lines(),
            "exec 3<&0",
            f"{run} </dev/null &",
            "pid=$!",
            "( while read -r _; do :; done; pkill -TERM -s $pid; sleep "
            f"{KILL_AFTER_S}; pkill -KILL -s $pid ) <&3 >/dev/null 2>&1 &",
            "watch=$!",
            "wait $pid; rc=$?",
            "kill $watch 2>/dev/null",
        ]
        if self.perf_events:
            out = q(self.perf_out or "perf.csv")
            lines.append(f"printf '\\n%s\\n' {q(STAT_MARKER)} >&2; cat {out} >&2 2>/dev/null; rm -f {out}")
        if self.record_events:
            # After the lock is released: turning samples into text is not part of the measurement.
            out = q(self.record_out or "perf.data")
            lines.append(f"printf '\\n%s\\n' {q(RECORD_MARKER)} >&2; "
                         f"perf script -i {out} -F event,period,ip,sym >&2 2>/dev/null; rm -f {out}")
        if self.run_dir is not None:
            lines.append(f"cd {q(self.work_dir)} && rm -rf -- {q(self.run_dir)}")
        lines.append("exit $rc")
        return "\n".join(lines)

    def _run_dir_lines(self) -> list[str]:
        """Make the run dir with its symlinks and cd into it (nothing without a run dir)."""
        if self.run_dir is None:
            return []
        q = shlex.quote
        dirs = sorted({posixpath.dirname(posixpath.join(self.run_dir, rel)) for rel in self.links} | {self.run_dir})
        steps = [f"mkdir -p -- {' '.join(q(d) for d in dirs)}",
                 *(f"ln -s -- {q(remote)} {q(posixpath.join(self.run_dir, rel))}"
                   for rel, remote in sorted(self.links.items())),
                 f"cd {q(self.run_dir)}"]
        return [f"{{ {' && '.join(steps)}; }} || {{ rm -rf -- {q(self.run_dir)}; exit {NO_RUN_DIR_STATUS}; }}"]


def split_perf(stderr: str) -> tuple[str, str, str]:
    """The run's stderr -> (the ELF's own stderr, perf stat's CSV, perf script's samples)."""
    rest, sep, record = stderr.rpartition(f"\n{RECORD_MARKER}\n")
    if not sep:
        rest, record = stderr, ""
    own, sep, stat = rest.rpartition(f"\n{STAT_MARKER}\n")
    if not sep:
        own, stat = rest, ""
    return own, stat, record


_SAMPLE = re.compile(r"^\s*(\d+)\s+(\S+):\s+[0-9a-f]+\s*(\S*)")


def parse_perf_script(text: str, symbol: str | None = None, helpers: str | None = None) -> dict[str, float]:
    """``perf script -F event,period,ip,sym`` lines -> ``{"<event> (perf record)": summed period}``.

    With ``symbol`` only samples in that function count (as the seeds' ``perf report -S <kernel>``), and in
    functions whose name starts with ``helpers`` (the compiler runtime's precompiled parts of kernels: only
    kernels call them). An event without any sample is absent (missing), not zero.
    """
    seen: set[str] = set()
    totals: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        period, event, sym = int(match.group(1)), match.group(2), match.group(3)
        key = f"{event} (perf record)"
        seen.add(key)
        if symbol is None or sym == symbol or (helpers is not None and sym.startswith(helpers)):
            totals[key] = totals.get(key, 0.0) + period
    return {key: totals.get(key, 0.0) for key in sorted(seen)}


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None when killed at the timeout
    timed_out: bool
    signal: int | None


def read_status(status: int | None, exit_signal: str | None, timeout: float, elapsed: float) -> Outcome:
    """The remote exit status -> what happened to the ELF.

    ``timeout`` exits 124 when TERM sufficed and 137 (128+KILL) when it had to KILL; a 137 before the
    deadline is a real SIGKILL (e.g. the OOM killer). A signal that killed the ELF comes back as 128+N from
    the shells in between; we report it as the ELF's signal with returncode -N, as subprocess does.
    """
    if exit_signal:  # the remote shell itself was killed: sshd reports the signal's name
        sig = getattr(signal, f"SIG{exit_signal}", None)
        num = int(sig) if sig is not None else None
        return Outcome(returncode=-num if num else None, timed_out=False, signal=num)
    if status is None:
        return Outcome(returncode=None, timed_out=False, signal=None)
    if status == TIMEOUT_STATUS or (status == 128 + signal.SIGKILL and elapsed >= timeout):
        return Outcome(returncode=None, timed_out=True, signal=None)
    if 128 < status < 128 + 65:
        return Outcome(returncode=-(status - 128), timed_out=False, signal=status - 128)
    return Outcome(returncode=status, timed_out=False, signal=None)
