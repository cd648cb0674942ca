"""OpenSSH servers as test boards, and helpers the SSH tests share (the fixtures are in conftest.py).

A board is an OpenSSH ``sshd`` started by a fixture (no system service): a temp host key, authorized_keys and
sshd_config, listening on loopback (or, for the network tests, inside a network namespace of our own). It
runs the RISC-V test ELF under qemu-riscv64 through the target's ``exec_prefix``, so the whole board path
(connect, checks, upload, flock/timeout wrapper, perf, parsing) runs end to end on this x86 machine.

``SetEnv HOME=<temp home>`` gives the login shell an empty .bashrc: root's own one costs ~0.2 s per command
here, which would dominate; the shell itself (bash as root's login shell) is still the real one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pytest_rvtune.targets.config import TargetConfig
from pytest_rvtune.targets.ssh import SshTarget, connect_board
from pytest_rvtune.toolchain import qemu_command

SSHD = "/usr/sbin/sshd"
HERE = Path(__file__).parent
REPO = HERE.parent.parent


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rvtune-test", "-f", str(path)],
                   check=True)
    return path.with_suffix(".pub").read_text().strip()


@dataclass(frozen=True)
class Keys:
    dir: Path
    host_key: Path
    host_pub: str
    client_key: Path
    other_key: Path  # a key the server does not accept
    other_host_pub: str  # a host key the server does not have (for mismatch tests)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    """One OpenSSH server process (optionally inside a network namespace)."""

    def __init__(self, root: Path, keys: Keys, address: str = "127.0.0.1", netns: str | None = None,
                 also: tuple[str, ...] = (), cpuinfo: str | None = None, env: dict[str, str] | None = None) -> None:
        self.root, self.keys, self.address, self.netns = root, keys, address, netns
        self.env = env or {}  # the environment of every session (SetEnv): a host's own RVTUNE_CACHE_DIR
        self.cpuinfo = cpuinfo  # a /proc/cpuinfo the board's processes see instead (own mount namespace)
        self.addresses = (address, *also)  # a pool test gives one server two loopback addresses
        self.port = free_port()
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / ".bashrc").write_text("")
        self.config = root / "sshd_config"
        self.log = root / "sshd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Sshd:
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        self.config.write_text("\n".join([
            f"Port {self.port}",
            *(f"ListenAddress {a}" for a in self.addresses),
            f"HostKey {self.keys.host_key}",
            f"AuthorizedKeysFile {self.keys.dir / 'authorized_keys'}",
            f"PidFile {self.root / 'sshd.pid'}",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PermitRootLogin prohibit-password",
            "Subsystem sftp internal-sftp",
            f"SetEnv HOME={self.home}" + "".join(f" {k}={v}" for k, v in self.env.items()),
            "MaxStartups 50",
            "MaxSessions 50",
            "",
        ]))
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        if self.cpuinfo is not None:
            fake = self.root / "cpuinfo"
            fake.write_text(self.cpuinfo)
            prefix += ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                       f'mount --bind {shlex.quote(str(fake))} /proc/cpuinfo && exec "$@"', "sh"]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([*prefix, SSHD, "-D", "-e", "-f", str(self.config)],
                                         stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited at start: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection((self.address, self.port), 0.2):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on {self.address}:{self.port}: {self.log.read_text()[-2000:]}")

    def kill_sessions(self) -> int:
        """Kill every connection this server serves (as a crashed link would end them); the listener stays."""
        assert self.proc is not None
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        pids = [int(p) for p in out.split()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill_sessions()
            self.proc.terminate()
            self.proc.wait(10)

    def known_hosts_line(self, host_pub: str | None = None) -> str:
        return "".join(f"[{a}]:{self.port} {host_pub or self.keys.host_pub}\n" for a in self.addresses)


def board_config(sshd: Sshd, root: Path, name: str = "laptop", **overrides: object) -> TargetConfig:
    """A TargetConfig for a fixture server, as a user would write it (plus test-only speed-ups)."""
    known = root / "known_hosts"
    if not known.exists():
        known.write_text(sshd.known_hosts_line())
    empty_ssh_config = root / "ssh_config"
    empty_ssh_config.touch()  # not this machine's ~/.ssh/config
    work = root / "board work"  # a space in the path on purpose: every remote word must be quoted
    cfg = TargetConfig(
        name=name, kind="ssh", source=str(root / "rvtune.toml"), hosts=(sshd.address,), port=sshd.port,
        user="root", key=sshd.keys.client_key, agent=False, known_hosts=known, ssh_config=empty_ssh_config,
        work_dir=str(work), runner="plain", exec_prefix=tuple(qemu_command()), timeout=60.0,
        lock_file=str(root / "board.lock"), lock_timeout=30.0, connect_timeout=5.0, keepalive=1.0,
    )
    return replace(cfg, **overrides)  # type: ignore[arg-type]


# --- a separate host: an sshd inside a network namespace of our own ---------------------------------------


@dataclass
class NetnsHost:
    name: str
    veth: str  # our end of the link
    address: str  # the namespace's address

    def link(self, up: bool) -> None:
        subprocess.run(["ip", "link", "set", self.veth, "up" if up else "down"], check=True)


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


@contextlib.contextmanager
def netns_link() -> Iterator[NetnsHost]:
    """A namespace with a veth link to us (10.213.x.0/30); skipped, naming why, where netns is not allowed."""
    if shutil.which("ip") is None:
        pytest.skip("iproute2 (ip) is not installed: no network namespace host")
    tag = secrets.token_hex(3)
    ns, ours, theirs = f"rvtune-{tag}", f"rvt{tag}a", f"rvt{tag}b"
    made = _ip("netns", "add", ns)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace here (ip netns add: {made.stderr.strip()})")
    try:
        # Two links on one /30 would share a route and one of them would be unreachable: the subnet is chosen
        # among those no link has, under a lock the test processes of this machine (xdist workers) share.
        with open(Path(tempfile.gettempdir()) / "rvtune-test-netns.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = {int(m) for m in re.findall(r"inet 10\.213\.(\d+)\.", _ip("-4", "-o", "addr", "show").stdout)}
            octet = secrets.choice([n for n in range(1, 251) if n not in used])
            for args in (
                ("link", "add", ours, "type", "veth", "peer", "name", theirs),
                ("link", "set", theirs, "netns", ns),
                ("addr", "add", f"10.213.{octet}.1/30", "dev", ours),
                ("link", "set", ours, "up"),
                ("-n", ns, "addr", "add", f"10.213.{octet}.2/30", "dev", theirs),
                ("-n", ns, "link", "set", theirs, "up"),
                ("-n", ns, "link", "set", "lo", "up"),
            ):
                done = _ip(*args)
                if done.returncode != 0:
                    pytest.skip(f"cannot set up the namespace link (ip {' '.join(args)}: {done.stderr.strip()})")
        yield NetnsHost(ns, ours, f"10.213.{octet}.2")
    finally:
        _ip("netns", "del", ns)  # deletes their end of the veth, and with it ours
        _ip("link", "del", ours)



def wait_for(predicate: Callable[[], bool], what: str, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


def remote_pids(target: SshTarget, token: str) -> list[str]:
    """Processes on the board whose command line holds ``token``, seen over a fresh connection."""
    fresh = connect_board(target.cfg, worker_id="gw0")
    try:
        # `[x]yz` matches "xyz" but not the pgrep command line itself.
        _, out, _ = fresh.run_shell(f"pgrep -f {shlex.quote(f'[{token[0]}]{token[1:]}')} || true")
    finally:
        fresh.close()
    return out.split()


def lock_held(target: SshTarget) -> bool:
    status, _, _ = target.run_shell(f"flock -n {shlex.quote(target.cfg.lock_file)} true")
    return status != 0


# --- hosts for pytest-xdist's remote workers: namespaces with an sshd each, reached through an ssh_config ----


@dataclass
class RemoteHost:
    name: str  # its alias in the ssh_config
    ns: NetnsHost
    server: Sshd
    cache: Path  # its own RVTUNE_CACHE_DIR


def ssh_config_entry(name: str, server: Sshd, known_hosts: Path) -> str:
    """How a user reaches a host: an alias with its address, port, key and known_hosts, host keys checked."""
    return "\n".join([
        f"Host {name}",
        f"  HostName {server.address}",
        f"  Port {server.port}",
        "  User root",
        f"  IdentityFile {server.keys.client_key}",
        "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {known_hosts}",
        "  StrictHostKeyChecking yes",
        "  BatchMode yes",
        "  ServerAliveInterval 2",  # a host that falls silent is noticed within ~6 s
        "  ServerAliveCountMax 3",
        "",
    ])


@contextlib.contextmanager
def remote_hosts(root: Path, keys: Keys, names: tuple[str, ...],
                 env: dict[str, str]) -> Iterator[dict[str, RemoteHost]]:
    """One namespace host per name, each with its own sshd and RVTUNE_CACHE_DIR (root/<name>/cache) and ``env``,
    reachable as ``ssh -F root/ssh_config <name>``; every process in them is killed on exit (skips where
    namespaces cannot be made, as netns_link does)."""
    known, config = root / "known_hosts", root / "ssh_config"
    hosts: dict[str, RemoteHost] = {}
    with contextlib.ExitStack() as stack:
        for name in names:
            ns = stack.enter_context(netns_link())
            cache = root / name / "cache"
            server = Sshd(root / name / "sshd", keys, address=ns.address, netns=ns.name,
                          env={"RVTUNE_CACHE_DIR": str(cache), **env}).start()
            stack.callback(kill_namespace, ns)  # the workers too, not only sshd
            stack.callback(server.stop)
            with known.open("a") as f:
                f.write(server.known_hosts_line())
            with config.open("a") as f:
                f.write(ssh_config_entry(name, server, known))
            hosts[name] = RemoteHost(name, ns, server, cache)
        yield hosts


def kill_namespace(ns: NetnsHost) -> int:
    """Kill every process in the namespace (the host disappears); how many there were."""
    pids = subprocess.run(["ip", "netns", "pids", ns.name], capture_output=True, text=True).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    return len(pids)
