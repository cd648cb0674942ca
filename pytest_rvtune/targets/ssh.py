"""RISC-V boards over SSH (asyncssh): one connection per board per worker for the whole session.

The Target API is synchronous; asyncssh is not. One daemon thread per process runs an asyncio loop and every
target submits its coroutines there, so a connection (and its SFTP session) lives as long as the target.
When connecting, the board is checked: tools the run wrapper needs, the ISA in /proc/cpuinfo and the VLEN a
tiny vector probe reads from the ``vlenb`` CSR. Anything that makes the board unusable raises
:class:`BoardError` once, naming the host and the cause.

What a run looks like on the board is in remote_cmd.py; where files go, in remote_cache.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import secrets
import shlex
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from pytest_rvtune.extras import missing_extra

try:
    import asyncssh
except ImportError as exc:  # the [boards] extra
    raise missing_extra("asyncssh", "boards", "RISC-V boards over SSH") from exc

from pytest_rvtune import paths
from pytest_rvtune.compiler.runtime_object import KERNEL_HELPER_PREFIX
from pytest_rvtune.counters import parse_perf_stat_csv
from pytest_rvtune.harness.output_format import OutputFormat
from pytest_rvtune.hashing import sha256_file
from pytest_rvtune.targets.base import BoardError, BoardLostError, RunResult, TimingSource, run_dir_files
from pytest_rvtune.targets.config import TargetConfig
from pytest_rvtune.targets.output_cap import CappedOutput
from pytest_rvtune.targets.remote_cache import RemoteCache, UploadError
from pytest_rvtune.targets.remote_cmd import (
    KILL_AFTER_S,
    LOCK_BUSY_STATUS,
    NO_RUN_DIR_STATUS,
    NO_WORKDIR_STATUS,
    RECORD_MARKER,
    STAT_MARKER,
    TIMEOUT_STATUS,
    RemoteRun,
    parse_perf_script,
    quote_dir,
    read_status,
    split_perf,
)
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain, ToolchainError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What the run wrapper needs on the board (coreutils, util-linux, procps).
REQUIRED_TOOLS = ("flock", "timeout", "setsid", "pkill")

#: Seconds the client waits beyond the run's own bounds before it gives up on the channel.
_CLIENT_SLACK_S = 30.0

#: The connection broke under us: reconnect and retry the run once.
_CONNECTION_ERRORS = (asyncssh.ConnectionLost, asyncssh.DisconnectError, asyncssh.ChannelOpenError,
                      asyncssh.SFTPConnectionLost, asyncssh.SFTPNoConnection, ConnectionError, BrokenPipeError)

#: AES-GCM first: asyncssh runs it in OpenSSL (AES-NI), several times faster per upload than its
#: chacha20-poly1305; the others stay as fallbacks for boards that lack it.
_CIPHERS = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
            "aes128-ctr", "aes192-ctr", "aes256-ctr"]

#: Reads VLEN from the vlenb CSR; dies of SIGILL on a core without the V extension.
_VLEN_PROBE_C = r"""
#include <stdio.h>
int main(void) {
    unsigned long vlenb;
    __asm__ volatile("csrr %0, vlenb" : "=r"(vlenb));
    printf("RVTUNE vlen %lu\n", vlenb * 8);
    return 0;
}
"""


class _BoardBusy(Exception):
    """A lock try (no wait) found the board's lock held: the pool asks its next board."""


class InsecureHostKeyWarning(UserWarning):
    """A target runs with host key checking switched off."""


class LoopThread:
    """The one asyncio loop of this process, in a daemon thread; coroutines are submitted from any thread."""

    _instance: LoopThread | None = None
    _guard = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rvtune-ssh", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> LoopThread:
        with cls._guard:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


async def _close_connection(conn: asyncssh.SSHClientConnection) -> None:
    """Close on the loop's own thread: asyncssh is not thread-safe, and a close from the caller's thread raced
    the loop noticing a dropped socket (AttributeError from a transport the loop had already torn down)."""
    conn.close()
    await asyncio.wait_for(conn.wait_closed(), 5)


async def _capture(proc: asyncssh.SSHClientProcess[bytes], out: CappedOutput, err: CappedOutput) -> None:
    """Read a remote process's stdout and stderr into bounded captures until both end (a flood of output
    must not take this process's memory: output_cap.py)."""
    async def pump(stream: asyncssh.SSHReader[bytes], capture: CappedOutput) -> None:
        while chunk := await stream.read(1 << 16):
            capture.add(chunk)

    await asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err))


def worker_index(worker_id: str) -> int:
    """pytest-xdist's ``gw3`` -> 3; a run without xdist (``master``) is worker 0."""
    match = re.fullmatch(r"gw(\d+)", worker_id)
    return int(match.group(1)) if match else 0


def _required_letters(isa: str) -> set[str]:
    """``rv64gcv_zvl256b`` -> {i, m, a, f, d, c, v}: the single-letter extensions a build needs."""
    base = isa.lower().split("_", 1)[0].removeprefix("rv64").removeprefix("rv32")
    return set(base.replace("g", "imafd"))


@functools.cache
def vlen_probe_elf() -> Path:
    """The vector probe, built once per toolchain into the build cache (atomic rename: workers may race)."""
    tc = Toolchain.for_isa(RISCV_ISA)
    out = paths.cache_dir() / "probes" / f"vlen-{tc.fingerprint()}.elf"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            src, obj, elf = Path(tmp) / "vlen.c", Path(tmp) / "vlen.o", Path(tmp) / "vlen.elf"
            src.write_text(_VLEN_PROBE_C)
            tc.compile(src, obj)
            tc.link([obj], elf, libs=())
            os.replace(elf, out)
    return out


@dataclass(frozen=True)
class _RunExtras:
    """A run's checked ``files`` (relative path -> local file) and its output format."""

    files: dict[PurePosixPath, Path]
    output_format: OutputFormat


def key_file_problem(key: Path) -> str | None:
    """Why an identity file cannot be used by us (None: a private key asyncssh reads without a passphrase)."""
    if not key.is_file():
        return "no such file" if not key.exists() else "not a regular file"
    try:
        asyncssh.read_private_key(str(key))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    except asyncssh.KeyImportError as exc:
        if "passphrase" in str(exc).lower():
            return ("an encrypted private key, and rvtune asks for no passphrase: load it into an ssh-agent "
                    "(`ssh-add`) and set agent = true instead of key, or give an unencrypted key")
        try:
            asyncssh.read_public_key(str(key))
        except (OSError, asyncssh.KeyImportError):
            return f"not a private key ({exc})"
        return "a public key: give the private key (the same name without .pub)"
    return None


async def _port_answer(host: str, port: int, timeout: float) -> bytes | None:
    """What a TCP connection to host:port first says (up to 64 bytes; b"" for silence), None when none opens."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return None
    try:
        return await asyncio.wait_for(reader.read(64), timeout)
    except (OSError, TimeoutError):
        return b""
    finally:
        writer.close()


class SshTarget:
    """One board of a configured target, reached over one kept asyncssh connection."""

    def __init__(self, cfg: TargetConfig, host: str) -> None:
        self.cfg = cfg
        self.host = host
        self.name = cfg.name
        self.isa = cfg.isa
        self.timing_source: TimingSource = "emulated" if cfg.exec_prefix else "real"
        self._loop = LoopThread.get()
        self._conn: asyncssh.SSHClientConnection | None = None
        self._cache: RemoteCache | None = None
        self.work_dir = ""  # absolute, resolved on the board at connect
        self.facts: dict[str, str] = {}
        self.reconnects = 0
        self._uploads_before = 0  # uploads of earlier connections (a reconnect starts a new cache object)
        self._on_board: set[tuple[str, str]] = set()  # (sha256, name) of files known to be on the board

    # --- connection ---------------------------------------------------------------------------------

    @property
    def label(self) -> str:
        who = f"{self.cfg.user}@" if self.cfg.user else ""
        port = f":{self.cfg.port}" if self.cfg.port else ""
        return f"{who}{self.host}{port}"

    def connect(self) -> None:
        """Connect and check the board; BoardError names the host and the cause."""
        try:
            self._loop.run(self._connect(probe=True))
        except (asyncssh.Error, OSError) as exc:  # the link broke during the checks
            raise BoardError(f"target {self.name!r}: board {self.label} lost while checking it: {exc}") from None

    async def _open(self) -> asyncssh.SSHClientConnection:
        cfg = self.cfg
        options: dict[str, Any] = {
            "connect_timeout": cfg.connect_timeout,
            "keepalive_interval": cfg.keepalive,
            "keepalive_count_max": 3,
            # Keys and agents only: a password prompt would hang a CI job.
            "password_auth": False,
            "kbdint_auth": False,
            "encryption_algs": _CIPHERS,
        }
        if cfg.port is not None:
            options["port"] = cfg.port
        if cfg.user is not None:
            options["username"] = cfg.user
        if cfg.key is not None:
            options["client_keys"] = [str(cfg.key)]
        if not cfg.agent:
            options["agent_path"] = None
        if cfg.insecure_skip_host_key_check:
            options["known_hosts"] = None
        elif cfg.known_hosts is not None:
            options["known_hosts"] = str(cfg.known_hosts)
        if cfg.ssh_config is not None:
            options["config"] = [str(cfg.ssh_config)]
        where = f"target {cfg.name!r}: board {self.label}"
        if cfg.key is not None:  # said of the file, not "check that it is powered"
            problem = key_file_problem(Path(cfg.key))
            if problem is not None:
                raise BoardError(f"{where}: {cfg.where('key')} = {cfg.key}: {problem}")
        try:
            return await asyncssh.connect(self.host, **options)
        except asyncssh.HostKeyNotVerifiable as exc:
            known = cfg.known_hosts or "~/.ssh/known_hosts"
            raise BoardError(
                f"{where}: host key not trusted ({exc.reason}): it is not in {known} or it changed. If the "
                f"board was reinstalled, check its key and update {known} (ssh-keyscan); see {cfg.where()}"
            ) from None
        except asyncssh.PermissionDenied as exc:
            key = f"key {cfg.key}" if cfg.key else "the agent / default keys"
            raise BoardError(
                f"{where}: authentication refused ({exc.reason}) with {key}; install the public key in the "
                f"board's authorized_keys or set key/user in {cfg.where()}"
            ) from None
        except (OSError, TimeoutError, asyncssh.Error) as exc:
            cause = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
            port = cfg.port or 22
            if isinstance(exc, ConnectionRefusedError):
                raise BoardError(f"{where}: nothing listens on port {port} (connection refused): check that sshd runs "
                                 f"on the board and port in {cfg.where()}") from None
            answer = await _port_answer(self.host, port, min(cfg.connect_timeout, 3.0))
            if answer is not None and not answer.startswith(b"SSH-"):
                shown = answer.decode("ascii", "replace").splitlines()[0][:60] if answer.strip() else "nothing"
                raise BoardError(f"{where}: port {port} answers, but not as an SSH server (it said {shown!r}; "
                                 f"asyncssh: {cause}): check port in {cfg.where()}") from None
            raise BoardError(
                f"{where}: unreachable ({cause}); check that it is powered and on the network, and host/port "
                f"in {cfg.where()}"
            ) from None

    async def _connect(self, *, probe: bool) -> None:
        self._conn = await self._open()
        try:
            sftp = await self._conn.start_sftp_client()
            facts = await self._check_board()
            self.work_dir = facts["work"]
            if self._cache is not None:
                self._uploads_before += self._cache.uploads
            self._cache = RemoteCache(sftp, f"{self.work_dir}/files", self.label, self._free_kib)
            if probe:
                self.facts = facts
                self.facts["vlen"] = str(await self._probe_vlen())
        except BaseException:
            self._conn.close()
            raise

    async def _sh(self, script: str, timeout: float = 60.0) -> asyncssh.SSHCompletedProcess:
        assert self._conn is not None
        return await self._conn.run("exec /bin/sh -c " + shlex.quote(script), check=False, timeout=timeout)

    async def _check_board(self) -> dict[str, str]:
        """Work dir, host facts and missing tools in one round trip."""
        cfg = self.cfg
        tools = [*REQUIRED_TOOLS, *(["taskset"] if cfg.taskset else []),
                 *(["perf"] if cfg.runner == "perf" or cfg.record_events else []), *cfg.exec_prefix[:1]]
        script = "\n".join([
            f"mkdir -p {quote_dir(cfg.work_dir)}/files && cd {quote_dir(cfg.work_dir)} || exit {NO_WORKDIR_STATUS}",
            'printf "work=%s\\n" "$(pwd -P)"',
            'printf "hostname=%s\\n" "$(uname -n)"',
            'printf "kernel=%s\\n" "$(uname -r)"',
            "printf \"board_isa=%s\\n\" \"$(sed -n 's/^isa[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n1)\"",
            "printf \"cpu=%s\\n\" \"$(sed -n -E 's/^(uarch|model name)[[:space:]]*:[[:space:]]*//p' "
            '/proc/cpuinfo | head -n1)"',
            f"for t in {' '.join(shlex.quote(t) for t in tools)}; do",
            '  command -v "$t" >/dev/null 2>&1 || printf "missing=%s\\n" "$t"',
            "done",
            # Every run takes this lock: one it cannot open (a missing directory) would fail each item alike,
            # as flock's exit status 66, so it is tried once here. Held by another run (75) is fine.
            "if command -v flock >/dev/null 2>&1; then",
            f"  err=$(flock -n -E {LOCK_BUSY_STATUS} {shlex.quote(cfg.lock_file)} true 2>&1); rc=$?",
            f"  [ $rc -eq 0 ] || [ $rc -eq {LOCK_BUSY_STATUS} ] ||",
            '    printf "lock_error=%s\\n" "$(printf %s "$err" | tr "\\n" " ")"',
            "fi",
        ])
        done = await self._sh(script)
        where = f"target {cfg.name!r}: board {self.label}"
        if done.exit_status == NO_WORKDIR_STATUS:
            raise BoardError(f"{where}: cannot create work_dir {cfg.work_dir!r} ({str(done.stderr).strip()}); "
                             f"set work_dir in {cfg.where()} to a writable directory")
        facts: dict[str, str] = {}
        missing: list[str] = []
        for line in str(done.stdout).splitlines():
            key, _, value = line.partition("=")
            if key == "missing":
                missing.append(value)
            elif key:
                facts[key] = value
        if done.exit_status != 0 or "work" not in facts:
            raise BoardError(f"{where}: the board check failed (exit {done.exit_status}): "
                             f"{str(done.stderr).strip()[-500:]}")
        if "lock_error" in facts:
            raise BoardError(f"{where}: cannot take the board's lock file {cfg.lock_file!r} ({facts['lock_error']}); "
                             f"set {cfg.where('lock_file')} to a file in a directory that exists and every user of "
                             "the board can write (the default is /tmp/rvtune-board.lock)")
        if missing:
            raise BoardError(f"{where}: missing on the board: {', '.join(missing)} (install coreutils, "
                             "util-linux, procps, linux-perf as needed, or fix exec_prefix/runner in "
                             f"{cfg.where()})")
        if cfg.exec_prefix:
            # The ELF runs under an emulator there: the host CPU's ISA says nothing, the probe below decides.
            log.info("%s: exec_prefix set, /proc/cpuinfo ISA not checked", where)
        else:
            board_isa = facts.get("board_isa", "")
            if not board_isa:
                raise BoardError(f"{where}: no 'isa' line in /proc/cpuinfo: not a RISC-V Linux board? "
                                 f"(to run under an emulator there, set exec_prefix in {cfg.where()})")
            lacking = sorted(_required_letters(cfg.isa) - _required_letters(board_isa))
            if lacking:
                raise BoardError(f"{where}: the board's ISA {board_isa} lacks {', '.join(lacking)} needed by "
                                 f"{cfg.isa} builds; use another board or fix isa in {cfg.where()}")
        return facts

    async def _probe_vlen(self) -> int:
        where = f"target {self.cfg.name!r}: board {self.label}"
        try:
            probe = vlen_probe_elf()
        except ToolchainError as exc:
            raise BoardError(f"{where}: cannot build the VLEN probe: {exc}") from None
        assert self._cache is not None
        remote = await self._cache.ensure(probe)
        argv = [*self.cfg.exec_prefix, remote]
        assert self._conn is not None
        script = f"timeout -k 2 30 {' '.join(shlex.quote(a) for a in argv)}"
        proc = await self._conn.create_process("exec /bin/sh -c " + shlex.quote(script), encoding=None)
        proc.stdin.write_eof()
        out, err = CappedOutput(), CappedOutput()  # a wrapper that floods its output: bounded here too
        await asyncio.wait_for(_capture(proc, out, err), 60)
        status = (await proc.wait(check=False, timeout=30)).exit_status
        stdout, stderr = out.text(), err.text()
        # Not anchored at a line start: a wrapper's output without a final newline runs into the probe's line.
        found = re.findall(r"RVTUNE vlen (\d+)$", stdout, re.M)
        if not found:
            # One line of printable text: a shell that tried to run the ELF as a script prints binary garbage.
            detail = "".join(c if c.isprintable() else "?" for c in " ".join(stderr.split()))[-300:]
            if status == 0:
                seen = "".join(c if c.isprintable() else "?" for c in " ".join(stdout.split()))[-200:]
                raise BoardError(f"{where}: the vector probe exited 0 but its `RVTUNE vlen N` line is not in its "
                                 f"output ({out.total} bytes on stdout, ending {seen!r}): does exec_prefix print "
                                 f"over it? Check exec_prefix in {self.cfg.where()}")
            if status in (TIMEOUT_STATUS, 128 + 9):
                raise BoardError(f"{where}: the vector probe did not finish within 30 s (exit {status}: {detail}); "
                                 f"check that exec_prefix in {self.cfg.where()} runs the ELF it is given")
            raise BoardError(f"{where}: the vector probe failed (exit {status}: {detail}); "
                             "the board has no usable V extension")
        vlen = int(found[-1])
        if vlen != self.cfg.vlen:
            raise BoardError(f"{where}: VLEN is {vlen} on the board but the target says vlen = {self.cfg.vlen}: "
                             f"{self.cfg.isa} code computes wrong answers at any other VLEN; fix "
                             f"{self.cfg.where('vlen')} or use a matching board")
        return vlen

    async def _free_kib(self, directory: str) -> int | None:
        try:
            done = await self._sh(f"df -Pk {shlex.quote(directory)} | tail -n1", timeout=30)
            return int(str(done.stdout).split()[3])
        except (asyncssh.Error, OSError, ValueError, IndexError):
            return None

    def _reconnect(self) -> None:
        self.close()
        self.reconnects += 1
        self._loop.run(self._connect(probe=False))

    # --- the Target protocol ------------------------------------------------------------------------

    @functools.cache  # noqa: B019 (one target object per session: caching on self is intended)
    def identity(self) -> dict[str, str]:
        """Which board this is (no key paths, no env values: results files get shared)."""
        ident = {
            "target": self.name,
            "isa": self.isa,
            "vlen": self.facts.get("vlen", str(self.cfg.vlen)),
            "board": self.facts.get("hostname", self.host),
            "board_isa": self.facts.get("board_isa", ""),
            "cpu": self.facts.get("cpu", ""),
            "kernel": self.facts.get("kernel", ""),
            "runner": self.cfg.runner,
        }
        if len(self.cfg.hosts) > 1:
            ident["pool"] = ",".join(self.cfg.hosts)
            ident["host"] = self.host  # the pool's entry: boards of a pool may share a host name
        if self.cfg.exec_prefix:
            ident["exec_prefix"] = " ".join(self.cfg.exec_prefix)
        if self.cfg.taskset:
            ident["taskset"] = self.cfg.taskset
        try:
            from pytest_rvtune.toolchain import find_tool, tool_version

            ident["toolchain"] = tool_version(find_tool("clang-19"))
        except ToolchainError:
            pass
        return ident

    @property
    def uploads(self) -> int:
        """Files sent to the board by this target so far (all connections)."""
        return self._uploads_before + (self._cache.uploads if self._cache else 0)

    def prepare(self, files: Sequence[Path]) -> None:
        self._with_retry(lambda: self._prepare(files), f"uploading {len(files)} file(s)")

    async def _prepare(self, files: Sequence[Path]) -> None:
        assert self._cache is not None
        try:
            await asyncio.gather(*(self._cache.ensure(f) for f in files))
            self._on_board.update((sha256_file(f), f.name) for f in files)
        except UploadError as exc:
            raise BoardError(f"target {self.name!r}: {exc}") from None

    def run(self, elf: Path, args: Sequence[str | Path], timeout: float, *, kernel_symbol: str | None = None,
            files: Mapping[str, Path] | None = None, output_format: OutputFormat | None = None) -> RunResult:
        extra = _RunExtras(run_dir_files(files), output_format or OutputFormat.load("rvtune"))
        return self._with_retry(lambda: self._run(elf, args, timeout, kernel_symbol, extra, wait=True),
                                f"running {elf.name}")

    def try_run(self, elf: Path, args: Sequence[str | Path], timeout: float, *, kernel_symbol: str | None = None,
                files: Mapping[str, Path] | None = None,
                output_format: OutputFormat | None = None) -> RunResult | None:
        """As run, but None at once (nothing ran) when another run holds the board's lock."""
        extra = _RunExtras(run_dir_files(files), output_format or OutputFormat.load("rvtune"))
        try:
            return self._with_retry(lambda: self._run(elf, args, timeout, kernel_symbol, extra, wait=False),
                                    f"running {elf.name}")
        except _BoardBusy:
            return None

    def _with_retry(self, make: Callable[[], Coroutine[Any, Any, T]], what: str) -> T:
        """Run a coroutine; if the connection breaks, reconnect and try once more, then give up."""
        try:
            return self._loop.run(make())
        except _CONNECTION_ERRORS as exc:
            log.warning("target %r: connection to %s lost while %s (%s): reconnecting", self.name, self.label,
                        what, exc)
            first = exc
        try:
            self._reconnect()
            return self._loop.run(make())
        except _CONNECTION_ERRORS as exc:
            raise BoardLostError(f"target {self.name!r}: board {self.label} lost while {what} ({first}); the "
                                 f"retry failed too ({exc})") from None
        except BoardError as exc:
            raise BoardLostError(f"target {self.name!r}: board {self.label} lost while {what} ({first}); "
                                 f"reconnecting failed: {exc}") from None

    async def _run(self, elf: Path, args: Sequence[str | Path], timeout: float,
                   kernel_symbol: str | None, extra: _RunExtras, *, wait: bool) -> RunResult:
        assert self._cache is not None and self._conn is not None
        cfg = self.cfg
        files = [elf, *(a for a in args if isinstance(a, Path)), *extra.files.values()]
        if not wait and not self._has(files) and await self._lock_busy():
            raise _BoardBusy(self.label)  # do not upload to a board that will not run it
        try:
            remote_elf = await self._cache.ensure(elf)
            argv = [remote_elf]
            for arg in args:
                argv.append(await self._cache.ensure(arg) if isinstance(arg, Path) else arg)
            links = {str(rel): await self._cache.ensure(local) for rel, local in extra.files.items()}
            self._on_board.update((sha256_file(f), f.name) for f in files)
        except UploadError as exc:
            raise BoardError(f"target {self.name!r}: {exc}") from None
        perf = cfg.runner == "perf"
        tag = secrets.token_hex(6)  # workers share the work dir: per-run names for perf's files
        spec = RemoteRun(
            argv=argv, timeout=timeout, work_dir=self.work_dir, lock_file=cfg.lock_file,
            lock_timeout=cfg.lock_timeout if wait else 0, env=cfg.env, taskset=cfg.taskset, exec_prefix=cfg.exec_prefix,
            perf_events=cfg.perf_events if perf else (),
            perf_out=f"{self.work_dir}/.perf-{tag}.csv" if perf else None,
            record_events=cfg.record_events, record_out=f"{self.work_dir}/.perf-{tag}.data",
            links=links, run_dir=f"{self.work_dir}/.run-{tag}" if links else None,
        )
        start = time.monotonic()
        # create_process, not run: run() would close our stdin at once, and the wrapper's watchdog reads
        # EOF on stdin as "the client is gone".
        proc = await self._conn.create_process(spec.command(), encoding=None)
        # The ELF's own stderr is capped; perf's sections after their marker are kept whole.
        marker = STAT_MARKER if perf else RECORD_MARKER if cfg.record_events else None
        out, err = CappedOutput(), CappedOutput(keep_after=f"\n{marker}\n".encode() if marker else None)
        try:
            await asyncio.wait_for(_capture(proc, out, err),
                                   cfg.lock_timeout + timeout + KILL_AFTER_S + _CLIENT_SLACK_S)
            done = await proc.wait(check=False, timeout=_CLIENT_SLACK_S)
        except (TimeoutError, asyncssh.TimeoutError):
            proc.close()  # EOF for the watchdog: the board kills the run
            raise BoardError(f"target {self.name!r}: board {self.label} did not finish {elf.name} within "
                             f"{timeout:g}s + lock wait; the run was abandoned") from None
        elapsed = time.monotonic() - start
        if done.exit_status is None and done.exit_signal is None:
            raise asyncssh.ConnectionLost("the channel closed without an exit status")
        if done.exit_status == LOCK_BUSY_STATUS:
            if not wait:
                raise _BoardBusy(self.label)
            raise BoardError(f"target {self.name!r}: board {self.label} stayed busy (lock {cfg.lock_file} held "
                             f"by another run for {cfg.lock_timeout:g}s); raise lock_timeout in {cfg.where()}")
        if done.exit_status == NO_WORKDIR_STATUS:
            raise BoardError(f"target {self.name!r}: work dir {self.work_dir} vanished on {self.label}")
        if done.exit_status == NO_RUN_DIR_STATUS and links:
            raise BoardError(f"target {self.name!r}: could not make the run directory for {len(links)} file(s) "
                             f"under {self.work_dir} on {self.label}: {err.text().strip()}")
        stdout = out.text()
        stderr, perf_csv, samples = split_perf(err.text())
        signame = done.exit_signal[0] if done.exit_signal else None
        outcome = read_status(done.exit_status, signame, timeout, elapsed)
        parsed = extra.output_format.parse(stdout, stderr)
        counters: dict[str, float] = {}
        if not outcome.timed_out:
            counters.update(parse_perf_stat_csv(perf_csv))
            # Under an emulator the board's perf sees the emulator's symbols, never the kernel's.
            counters.update(parse_perf_script(samples, None if cfg.exec_prefix else kernel_symbol,
                                              helpers=KERNEL_HELPER_PREFIX))
        return RunResult(
            returncode=outcome.returncode, samples_ns=parsed.samples_ns, checks=parsed.checks,
            counters=counters, launches=parsed.launches,
            errors=parsed.errors, stdout=stdout, stderr=stderr, timed_out=outcome.timed_out,
            signal=outcome.signal, wall_s=elapsed,
        )

    def _has(self, files: Sequence[Path]) -> bool:
        return all((sha256_file(f), f.name) in self._on_board for f in files if f.is_file())

    async def _lock_busy(self) -> bool:
        """One lock try without running anything (the lock file may be relative to the work dir)."""
        done = await self._sh(f"cd {shlex.quote(self.work_dir)} && flock -n -E {LOCK_BUSY_STATUS} "
                              f"{shlex.quote(self.cfg.lock_file)} true", timeout=30)
        return done.exit_status == LOCK_BUSY_STATUS

    def run_shell(self, script: str, timeout: float = 60.0) -> tuple[int | None, str, str]:
        """Run a plain shell script on the board (for checks and tools; not for timing runs)."""
        done = self._loop.run(self._sh(script, timeout))
        return done.exit_status, str(done.stdout or ""), str(done.stderr or "")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
                self._loop.run(_close_connection(conn))


class SshPool:
    """A pool of identical boards (``hosts = [...]``) as one target: each run goes to a board that is free.

    Boards are tried in the worker's order (its preferred board first) with a lock try that does not wait;
    the run happens on the first board whose lock is free. Only when every board is busy does the run queue
    on the first live board of that order, as a single board would. Connections to the other boards open
    the first time they are needed and stay open (one per board per worker); each keeps its own upload
    cache, since a run's files must be on the board that runs it. A board that is lost (unreachable, or
    its reconnect failed) is skipped for the rest of the session; the pool fails only when all are lost.
    """

    def __init__(self, cfg: TargetConfig, order: Sequence[str], first: SshTarget,
                 lost: dict[str, str] | None = None) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.isa = cfg.isa
        self.timing_source: TimingSource = first.timing_source
        self.order = tuple(order)  # the worker's preferred board first
        self._boards: dict[str, SshTarget] = {first.host: first}
        self.lost: dict[str, str] = dict(lost or {})  # host -> why, skipped for the rest of the session
        self.current = first  # the board of the last run: identity() names it

    @property
    def boards(self) -> dict[str, SshTarget]:
        """The boards this worker has connected to so far, by host."""
        return dict(self._boards)

    @property
    def host(self) -> str:
        return self.current.host

    @property
    def label(self) -> str:
        return self.current.label

    @property
    def uploads(self) -> int:
        return sum(board.uploads for board in self._boards.values())

    @property
    def reconnects(self) -> int:
        return sum(board.reconnects for board in self._boards.values())

    def _board(self, host: str) -> SshTarget | None:
        """The kept connection to ``host``, opened now if this is its first use; None when it is lost."""
        if host in self.lost:
            return None
        board = self._boards.get(host)
        if board is None:
            board = SshTarget(self.cfg, host)
            try:
                board.connect()
            except BoardError as exc:
                self._lose(host, exc)
                return None
            self._boards[host] = board
        return board

    def _lose(self, host: str, exc: BoardError) -> None:
        log.warning("target %r: board %s skipped for the rest of the session: %s", self.name, host, exc)
        self.lost[host] = str(exc)
        board = self._boards.pop(host, None)
        if board is not None:
            board.close()

    def _all_lost(self) -> BoardLostError:
        causes = "\n  ".join(f"{host}: {why}" for host, why in self.lost.items())
        return BoardLostError(f"target {self.name!r}: every board of the pool is lost:\n  {causes}")

    def identity(self) -> dict[str, str]:
        """The identity of the board that ran last (it carries the pool's host list too)."""
        return self.current.identity()

    def prepare(self, files: Sequence[Path]) -> None:
        """Upload to the board most likely to run next (the last one); run() uploads where it runs."""
        if self.current.host in self.lost:
            return
        try:
            self.current.prepare(files)
        except BoardLostError as exc:
            self._lose(self.current.host, exc)  # run() picks another board or reports the pool lost

    def run(self, elf: Path, args: Sequence[str | Path], timeout: float, *, kernel_symbol: str | None = None,
            files: Mapping[str, Path] | None = None, output_format: OutputFormat | None = None) -> RunResult:
        run_dir_files(files)  # a bad path is the caller's error, not a lost board
        while True:
            busy: SshTarget | None = None  # the first board found busy: where to queue if all are
            for host in self.order:
                board = self._board(host)
                if board is None:
                    continue
                try:
                    result = board.try_run(elf, args, timeout, kernel_symbol=kernel_symbol, files=files,
                                           output_format=output_format)
                except BoardLostError as exc:
                    self._lose(host, exc)
                    continue
                if result is not None:
                    self.current = board
                    return result
                busy = busy or board
            if busy is None:
                raise self._all_lost()
            log.info("target %r: every board of the pool is busy: waiting for %s", self.name, busy.label)
            try:
                result = busy.run(elf, args, timeout, kernel_symbol=kernel_symbol, files=files,
                                  output_format=output_format)
            except BoardLostError as exc:
                self._lose(busy.host, exc)
                continue  # the others may be free by now
            self.current = busy
            return result

    def run_shell(self, script: str, timeout: float = 60.0) -> tuple[int | None, str, str]:
        """A plain shell script on the current board (for checks and tools; not for timing runs)."""
        return self.current.run_shell(script, timeout)

    def close(self) -> None:
        for board in self._boards.values():
            board.close()


def warn_if_insecure(cfg: TargetConfig) -> None:
    """Every session that connects with host key checking off says so."""
    if cfg.insecure_skip_host_key_check:
        message = (f"target {cfg.name!r}: host key checking is OFF (insecure_skip_host_key_check in "
                   f"{cfg.source}): anyone on the network path can impersonate the board")
        warnings.warn(message, InsecureHostKeyWarning, stacklevel=3)
        log.warning(message)


def connect_board(cfg: TargetConfig, *, worker_id: str) -> SshTarget | SshPool:
    """The board (or, for ``hosts = [...]``, the pool) this worker runs on.

    A pool orders its boards from worker index modulo the pool size, connects to the first that answers
    (boards that do not are skipped for the session) and spreads runs over free boards (:class:`SshPool`).
    Each run still takes the board's lock, so runs of several workers or CI jobs on one board take turns.
    """
    warn_if_insecure(cfg)
    start = worker_index(worker_id) % len(cfg.hosts)
    order = (*cfg.hosts[start:], *cfg.hosts[:start])
    errors: dict[str, str] = {}
    for host in order:
        target = SshTarget(cfg, host)
        try:
            target.connect()
        except BoardError as exc:
            errors[host] = str(exc)
            continue
        return target if len(cfg.hosts) == 1 else SshPool(cfg, order, target, lost=errors)
    if len(errors) == 1:
        raise BoardError(next(iter(errors.values())))
    raise BoardError(f"target {cfg.name!r}: no board of the pool is usable:\n  " + "\n  ".join(errors.values()))
