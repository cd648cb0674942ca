"""Faults of a board, each against a real OpenSSH server: one clear BoardError naming host and cause.

These always use fixture servers (they stop them, kill their sessions, fill their disks, cut their links).
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd_helpers import Keys, NetnsHost, Sshd, board_config, free_port, remote_pids, wait_for

from pytest_rvtune.targets.base import RunResult
from pytest_rvtune.targets.ssh import BoardError, InsecureHostKeyWarning, connect_board, vlen_probe_elf


def test_unreachable_board(sshd: Sshd, tmp_path: Path):
    cfg = board_config(sshd, tmp_path, port=free_port())  # nothing listens there
    with pytest.raises(BoardError, match=rf"board root@127\.0\.0\.1:{cfg.port}: nothing listens on port {cfg.port} "
                                         r"\(connection refused\): check that sshd runs on the board and port in "):
        connect_board(cfg, worker_id="gw0")


def test_a_port_that_is_not_ssh_is_named_as_such(sshd: Sshd, tmp_path: Path):
    """Issue 28: a web server on the port was "unreachable ...; check that it is powered"."""
    import socket
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        cfg = board_config(sshd, tmp_path, port=port)
        said = r"'HTTP/1\.1 400 Bad Request'; asyncssh: .*\): check port in .*rvtune\.toml"
        with pytest.raises(BoardError, match=rf"port {port} answers, but not as an SSH server \(it said {said}"):
            connect_board(cfg, worker_id="gw0")
    finally:
        server.close()


@pytest.mark.parametrize("kind", ["missing", "encrypted", "public"])
def test_a_key_file_that_cannot_serve_is_named_with_its_config_key(sshd: Sshd, tmp_path: Path, kind: str):
    """Issue 28: a missing, passphrase-protected or public key file was "unreachable ...; check that it is
    powered"."""
    key = tmp_path / "id_board"
    if kind != "missing":
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret" if kind == "encrypted" else "",
                        "-f", str(key)], check=True)
    if kind == "public":
        key = key.with_name("id_board.pub")
    says = {"missing": "no such file",
            "encrypted": "an encrypted private key, and rvtune asks for no passphrase: load it into an ssh-agent",
            "public": "a public key: give the private key (the same name without .pub)"}[kind]
    cfg = board_config(sshd, tmp_path, key=key)
    with pytest.raises(BoardError) as refused:
        connect_board(cfg, worker_id="gw0")
    assert f"{cfg.where('key')} = {key}: {says}" in str(refused.value)


def test_auth_refused(sshd: Sshd, tmp_path: Path, ssh_keys: Keys):
    cfg = board_config(sshd, tmp_path, key=ssh_keys.other_key)
    with pytest.raises(BoardError, match=r"root@127\.0\.0\.1:\d+: authentication refused .*other_key"):
        connect_board(cfg, worker_id="gw0")


def test_host_key_mismatch_is_refused_unless_explicitly_skipped(sshd: Sshd, tmp_path: Path, ssh_keys: Keys):
    (tmp_path / "known_hosts").write_text(sshd.known_hosts_line(ssh_keys.other_host_pub))
    cfg = board_config(sshd, tmp_path)
    with pytest.raises(BoardError, match=r"127\.0\.0\.1:\d+: host key not trusted"):
        connect_board(cfg, worker_id="gw0")

    # The lab opt-out connects, and says so loudly every time.
    lab = dataclasses.replace(cfg, insecure_skip_host_key_check=True)
    with pytest.warns(InsecureHostKeyWarning, match="host key checking is OFF"):
        t = connect_board(lab, worker_id="gw0")
    t.close()


def test_no_known_hosts_entry_is_refused(sshd: Sshd, tmp_path: Path):
    (tmp_path / "known_hosts").write_text("")
    with pytest.raises(BoardError, match="host key not trusted"):
        connect_board(board_config(sshd, tmp_path), worker_id="gw0")


def test_board_checks_vlen_isa_and_tools(sshd: Sshd, tmp_path: Path):
    with pytest.raises(BoardError, match=r"VLEN is 256 on the board but the target says vlen = 512"):
        connect_board(board_config(sshd, tmp_path, vlen=512), worker_id="gw0")
    # Without an emulator this x86 "board" has no RISC-V ISA line: refused, not silently run.
    with pytest.raises(BoardError, match=r"no 'isa' line in /proc/cpuinfo"):
        connect_board(board_config(sshd, tmp_path, exec_prefix=()), worker_id="gw0")
    with pytest.raises(BoardError, match=r"missing on the board: no-such-emulator"):
        connect_board(board_config(sshd, tmp_path, exec_prefix=("no-such-emulator",)), worker_id="gw0")


def test_board_isa_from_cpuinfo_is_checked(tmp_path: Path, ssh_keys: Keys):
    """A board whose /proc/cpuinfo says rv64imafdc (no V) is refused before any run."""
    server = Sshd(tmp_path / "sshd", ssh_keys, cpuinfo="processor\t: 0\nisa\t\t: rv64imafdc_zicsr_zifencei\n")
    try:
        server.start()
    except RuntimeError as exc:
        pytest.skip(f"no private mount namespace for a fake /proc/cpuinfo here: {exc}")
    try:
        with pytest.raises(BoardError, match=r"the board's ISA rv64imafdc_zicsr_zifencei lacks v needed by "
                                             r"rv64gcv_zvl256b"):
            connect_board(board_config(server, tmp_path, exec_prefix=()), worker_id="gw0")
    finally:
        server.stop()

    # The ISA line alone is not trusted: the vector probe must run there too (it cannot on this x86 "board").
    claims_v = Sshd(tmp_path / "sshd2", ssh_keys, cpuinfo="isa\t\t: rv64imafdcv_zicsr\n").start()
    try:
        (tmp_path / "known_hosts").write_text(claims_v.known_hosts_line())
        with pytest.raises(BoardError, match=r"the vector probe failed .* no usable V extension"):
            connect_board(board_config(claims_v, tmp_path, exec_prefix=()), worker_id="gw0")
    finally:
        claims_v.stop()


def test_dropped_connection_reconnects_and_retries_once(own_sshd: Sshd, tmp_path: Path, rvtest_elf: Path):
    t = connect_board(board_config(own_sshd, tmp_path), worker_id="gw0")
    results: list[RunResult] = []
    token = "drop-retry-run"
    thread = threading.Thread(target=lambda: results.append(
        t.run(rvtest_elf, ["--note", token, "--sleep-ms", "3000"], timeout=60)))
    try:
        thread.start()
        wait_for(lambda: remote_pids(t, token) != [], "the run to start")
        assert own_sshd.kill_sessions() > 0  # the link breaks mid-run
        thread.join(60)
        assert results and results[0].returncode == 0
        assert len(results[0].samples_ns) == 3  # the retry ran to the end
        assert t.reconnects == 1
        assert remote_pids(t, token) == []  # the abandoned first attempt did not keep running
    finally:
        thread.join()
        t.close()


def test_connection_dropped_between_items_reconnects(own_sshd: Sshd, tmp_path: Path, rvtest_elf: Path):
    """The next item's upload (an SFTP call, the first to notice) reconnects too."""
    t = connect_board(board_config(own_sshd, tmp_path), worker_id="gw0")
    try:
        assert t.run(rvtest_elf, [], timeout=60).returncode == 0
        own_sshd.kill_sessions()
        fresh = tmp_path / "new golden.txt"
        fresh.write_text("5 6\n")
        result = t.run(rvtest_elf, [fresh], timeout=60)
        assert result.all_checks_ok and "sum0=11" in result.stdout
        assert t.reconnects == 1
    finally:
        t.close()


def test_board_gone_mid_run_fails_the_run_with_host_and_cause(own_sshd: Sshd, tmp_path: Path, rvtest_elf: Path):
    t = connect_board(board_config(own_sshd, tmp_path, connect_timeout=2.0), worker_id="gw0")
    errors: list[BaseException] = []
    token = "gone-mid-run"

    def run() -> None:
        try:
            t.run(rvtest_elf, ["--note", token, "--hang"], timeout=600)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    try:
        thread.start()
        wait_for(lambda: remote_pids(t, token) != [], "the run to start")
        own_sshd.stop()
        thread.join(60)
        assert len(errors) == 1 and isinstance(errors[0], BoardError)
        message = str(errors[0])
        assert "127.0.0.1" in message and "lost while running rvtest.elf" in message
        assert "nothing listens on port" in message  # its sshd is gone: the reconnect was refused
        own_sshd.start()  # back up: nothing of the abandoned run is left on it
        wait_for(lambda: remote_pids(t, token) == [], "the abandoned run to be killed")
    finally:
        thread.join()
        t.close()


@contextlib.contextmanager
def tiny_tmpfs(path: Path, size_kib: int) -> Iterator[None]:
    path.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root / CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_full_disk_is_a_clear_error(sshd: Sshd, tmp_path: Path):
    work = tmp_path / "small disk"
    room = vlen_probe_elf().stat().st_size // 1024 + 96  # the probe fits, a 256 KiB golden file does not
    with tiny_tmpfs(work, room):
        t = connect_board(board_config(sshd, tmp_path, work_dir=str(work)), worker_id="gw0")
        try:
            big = tmp_path / "big golden.txt"
            big.write_text("1.0 " * 65536)
            with pytest.raises(BoardError, match=r"big golden\.txt.*disk is full \(\d+ KiB free under .*small disk"):
                t.prepare([big])
        finally:
            t.close()


def test_board_in_its_own_network_namespace(netns_host: NetnsHost, tmp_path: Path, ssh_keys: Keys,
                                            rvtest_elf: Path):
    """A separate host behind a link we can cut: reachable, then lost mid-session, then unreachable."""
    server = Sshd(tmp_path / "sshd", ssh_keys, address=netns_host.address, netns=netns_host.name).start()
    try:
        cfg = board_config(server, tmp_path, connect_timeout=2.0, keepalive=0.5)
        t = connect_board(cfg, worker_id="gw0")
        try:
            assert t.run(rvtest_elf, [], timeout=60).returncode == 0
            netns_host.link(up=False)
            with pytest.raises(BoardError, match=rf"{netns_host.address}:\d+ lost while running"):
                t.run(rvtest_elf, [], timeout=60)
        finally:
            t.close()
        with pytest.raises(BoardError, match=rf"{netns_host.address}:\d+: unreachable"):
            connect_board(cfg, worker_id="gw0")
    finally:
        netns_host.link(up=True)
        server.stop()


def test_sessions_of_the_target_use_one_connection(sshd: Sshd, tmp_path: Path, rvtest_elf: Path):
    """Every run and upload of a session goes over the one connection made at connect time."""
    t = connect_board(board_config(sshd, tmp_path), worker_id="gw0")
    try:
        conn = t._conn
        for _ in range(3):
            t.run(rvtest_elf, [], timeout=60)
        assert t._conn is conn and t.reconnects == 0
    finally:
        t.close()
