"""Board farms through labgrid: a real labgrid-coordinator and labgrid-exporter on loopback, the exporter's
NetworkService pointing at an sshd "board" in a network namespace of our own, and the place made with the
commands docs/targets.md gives (labgrid-client create, add-match).

Sessions that contend for the one place are told apart by labgrid's own LG_USERNAME (the coordinator names a
client host/user). A session takes its place at its start and holds it to its end, so the session that holds the
place here runs one plain test that waits for a file that never comes (no kernel to collect: 0.4 s of CPU, not 3):
what the others do while it holds the place is seen, never guessed from timing. Who held the place when is read
from the coordinator (its log and its RPCs).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import getpass
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2
from labgrid.remote.generated import labgrid_coordinator_pb2_grpc
from sshd_helpers import REPO, Keys, Sshd, board_config, free_port, netns_link, wait_for

from pytest_rvtune.cli import doctor
from pytest_rvtune.targets.base import BoardError
from pytest_rvtune.targets.config import load_targets
from pytest_rvtune.targets.labgrid_farm import PlaceHold, open_labgrid_board

BIN = Path(sys.executable).parent
PLACE = "k1"
ITEMS = [
    "kernels/softmax.py::softmax[emu-BLOCK_SIZE_M=8-BLOCK_SIZE_N=64]",
    "kernels/softmax.py::softmax[emu-BLOCK_SIZE_M=4-BLOCK_SIZE_N=64]",
]


@dataclass
class Farm:
    root: Path
    coordinator: str
    coordinator_log: Path
    board: Sshd

    def client(self, *args: str) -> str:
        """labgrid-client against our coordinator: the commands docs/targets.md gives a farm's admin."""
        done = subprocess.run([str(BIN / "labgrid-client"), "-x", self.coordinator, *args], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, f"labgrid-client {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    @functools.cached_property
    def observer(self) -> Any:
        """The coordinator's read-only RPCs, straight from its gRPC stub (no client session: one would clash
        with a session this process opens through the code under test, and polling it costs no process)."""
        return labgrid_coordinator_pb2_grpc.CoordinatorStub(grpc.insecure_channel(self.coordinator))

    def holder(self) -> str:
        """Who has the place acquired, as host/user ('' when nobody)."""
        places = self.observer.GetPlaces(pb2.GetPlacesRequest(), timeout=10).places
        return next((p.acquired for p in places if p.name == PLACE), "")

    def reservations(self) -> list[tuple[str, str]]:
        """(owner, state) of every reservation the coordinator has."""
        states = {0: "waiting", 1: "allocated", 2: "acquired", 3: "expired", 4: "invalid"}
        return [(r.owner, states[r.state])
                for r in self.observer.GetReservations(pb2.GetReservationsRequest(), timeout=10).reservations]

    def events(self) -> list[str]:
        """The coordinator's own lines about the place, in order."""
        return re.findall(rf"^{PLACE}: (place acquired by \S+|place released)$", self.coordinator_log.read_text(),
                          re.M)


def listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), 0.2):
        return True
    return False


def _spawn(argv: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as fh:
        return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory, ssh_keys: Keys) -> Iterator[Farm]:
    root = tmp_path_factory.mktemp("labgrid")
    with netns_link() as host:
        board = Sshd(root / "sshd", ssh_keys, address=host.address, netns=host.name).start()
        address = f"127.0.0.1:{free_port()}"
        coordinator_log = root / "coordinator.log"
        procs = [_spawn([str(BIN / "labgrid-coordinator"), "-l", address], coordinator_log, root)]
        try:
            wait_for(lambda: listening(address), "the coordinator to listen")  # else the exporter gives up
            (root / "exporter.yaml").write_text(
                f"board:\n  NetworkService:\n    address: {host.address}\n    username: root\n"
                f"    port: {board.port}\n")
            procs.append(_spawn([str(BIN / "labgrid-exporter"), "-c", address, "-n", "lab1", "--hostname",
                                 "127.0.0.1", "exporter.yaml"], root / "exporter.log", root))
            farm = Farm(root, address, coordinator_log, board)
            # read from the coordinator's log: a labgrid-client poll is a 0.5 s process each time
            wait_for(lambda: "set_resource board NetworkService" in coordinator_log.read_text(),
                     "the exporter's resource at the coordinator")
            farm.client("-p", PLACE, "create")
            farm.client("-p", PLACE, "add-match", "lab1/board/NetworkService")
            yield farm
        finally:
            for proc in reversed(procs):
                _stop(proc)
            board.stop()


def farm_config(farm: Farm, tmp_path: Path, name: str) -> Path:
    """A kind = "labgrid" target as a user writes it."""
    ssh = board_config(farm.board, tmp_path)  # the board keys the SSH tests use (key, known_hosts, QEMU prefix)
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join([
        f"[targets.{name}]",
        'kind = "labgrid"',
        f'coordinator = "{farm.coordinator}"',
        f'place = "{PLACE}"',
        f"key = {json.dumps(str(ssh.key))}",
        "agent = false",
        f"known_hosts = {json.dumps(str(ssh.known_hosts))}",
        f"ssh_config = {json.dumps(str(ssh.ssh_config))}",
        f"work_dir = {json.dumps(ssh.work_dir)}",
        'runner = "plain"',
        f"exec_prefix = {json.dumps(list(ssh.exec_prefix))}",
        f"lock_file = {json.dumps(ssh.lock_file)}",
        "connect_timeout = 5",
        "",
    ]))
    return path


def session(config: Path, name: str, user: str, tmp_path: Path, items: list[str], *extra: str, cwd: Path = REPO
            ) -> subprocess.Popen[bytes]:
    """`pytest ITEMS --rvtune-target NAME` as its own process, known to the coordinator as host/``user``."""
    argv = [sys.executable, "-m", "pytest", *items, "--rvtune-target", name, "--rvtune-config-file", str(config),
            "--rvtune-results", str(tmp_path / f"{user}.jsonl"), "-p", "no:cacheprovider", "-p", "no:labgrid",
            "-q", "-rA", *extra]
    with (tmp_path / f"{user}.log").open("wb") as log:
        # PYTHONPATH: this checkout's plugin also for a session run from another directory
        path = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
        return subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "LG_USERNAME": user, "PYTHONPATH": path})


def holding_session(farm: Farm, tmp_path: Path, user: str, *extra: str) -> subprocess.Popen[bytes]:
    """A session of the farm's target whose one test waits for a file that never comes: it holds the place."""
    project = tmp_path / user
    project.mkdir()
    (project / "test_hold.py").write_text(
        "import pathlib, time\n\n\ndef test_hold():\n"
        f"    while not pathlib.Path({str(tmp_path / 'never')!r}).exists():\n        time.sleep(0.1)\n")
    return session(farm_config(farm, tmp_path, "farm"), "farm", user, tmp_path, ["test_hold.py"], *extra,
                   cwd=project)


def finished(proc: subprocess.Popen[bytes], tmp_path: Path, user: str) -> str:
    proc.wait(300)
    return (tmp_path / f"{user}.log").read_text()


def waiting(farm: Farm, user: str) -> bool:
    return any(owner.endswith(f"/{user}") and state == "waiting" for owner, state in farm.reservations())


def test_sessions_take_turns_and_sigterm_gives_the_place_back(farm: Farm, tmp_path: Path):
    """alice's session holds the place, bob's and carol's sessions wait for it. SIGTERM to carol (an xdist
    controller waiting before its worker runs) cancels her waiting reservation; SIGTERM to alice releases the
    place and cancels her reservation, and bob's session (an xdist worker on the lease its controller took) then
    runs its configs on the board and gives the place back at the end."""
    alice = holding_session(farm, tmp_path, "alice")
    bob = carol = None
    try:
        wait_for(lambda: farm.holder().endswith("/alice"), "alice's session to acquire the place", 120)
        bob = session(farm_config(farm, tmp_path, "farm2"), "farm2", "bob", tmp_path, ITEMS, "-n", "1")
        carol = holding_session(farm, tmp_path, "carol", "-n", "1")
        wait_for(lambda: waiting(farm, "bob") and waiting(farm, "carol"), "bob's and carol's reservations", 120)
        carol.send_signal(signal.SIGTERM)
        out_carol = finished(carol, tmp_path, "carol")
        assert carol.returncode != 0 and "SIGTERM received" in out_carol, out_carol[-3000:]
        assert not any(owner.endswith("/carol") for owner, _ in farm.reservations()), farm.reservations()
        assert farm.holder().endswith("/alice") and bob.poll() is None
        alice.send_signal(signal.SIGTERM)
        out_alice = finished(alice, tmp_path, "alice")
        out_bob = finished(bob, tmp_path, "bob")
    finally:
        for proc in (alice, bob, carol):
            if proc is not None:
                _stop(proc)
    assert alice.returncode != 0 and "SIGTERM received" in out_alice, out_alice[-3000:]
    assert bob.returncode == 0 and "2 passed" in out_bob, out_bob[-3000:]
    said = r"rvtune: target .farm2.: labgrid coordinator \S+: waiting for place k1 \(k1 acquired by \S+/alice\)"
    assert re.search(said, out_bob), out_bob[-3000:]  # the wait is said on the terminal
    # alice held the place until her SIGTERM, then bob had it until his run ended: the coordinator's own order
    users = [event.split("/")[-1] if "acquired" in event else "released" for event in farm.events()]
    assert users[-4:] == ["alice", "released", "bob", "released"], farm.events()
    records = [json.loads(line) for line in (tmp_path / "bob.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["outcome"] == "passed" and r["machine"]["labgrid_place"] == PLACE
                                     for r in records), records
    assert farm.holder() == "" and farm.reservations() == []  # nothing is left taken
    assert PLACE not in farm.client("who")


def test_an_interrupt_before_the_reservation_is_answered_still_cancels_it(farm: Farm, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """SIGTERM (a KeyboardInterrupt here) can land after the coordinator made the reservation but before its answer
    reached the session (a loaded machine): the reservation is still cancelled, not left waiting until it expires.
    The coordinator is real; only its answer is held back, so the interrupt comes first."""
    real_start = PlaceHold._start

    async def start_with_a_late_answer(self: PlaceHold) -> None:
        await real_start(self)
        assert self._session is not None
        create = self._session.stub.CreateReservation

        async def late_answer(request: Any) -> Any:
            response = await create(request)  # made at the coordinator
            await asyncio.sleep(1.0)
            return response

        monkeypatch.setattr(self._session.stub, "CreateReservation", late_answer)

    monkeypatch.setattr(PlaceHold, "_start", start_with_a_late_answer)
    cfg = load_targets(tmp_path, farm_config(farm, tmp_path, "farm"))["farm"]
    hold = PlaceHold(cfg)
    # A real SIGINT (as Ctrl-C; SIGTERM becomes the same KeyboardInterrupt in a session) wakes the main thread
    # from its wait for the answer; _thread.interrupt_main() sends no signal and would land only after the answer.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            hold.take()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
        hold.release()  # a no-op when take() gave everything back; else the module's later tests still get the place
    assert farm.reservations() == [] and farm.holder() == ""


def test_target_config_and_errors_name_the_place_and_coordinator(farm: Farm, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    cfg = load_targets(tmp_path, farm_config(farm, tmp_path, "farm"))["farm"]
    assert cfg.kind == "labgrid" and cfg.place == PLACE and cfg.hosts == ()
    board = open_labgrid_board(cfg)  # takes the place itself (no xdist controller here)
    try:
        assert farm.holder().endswith("/" + getpass.getuser())
        ident = board.identity()
        assert ident["labgrid_place"] == PLACE and ident["vlen"] == "256" and board.host == farm.board.address
        # another opening waits for the place, and gives up at reserve_timeout naming who holds it: `rvtune
        # doctor`'s, which waits DOCTOR_RESERVE_S at most (not the target's hour)
        monkeypatch.setattr(doctor, "DOCTOR_RESERVE_S", 1.0)
        (tmp_path / "rvtune.toml").write_text(farm_config(farm, tmp_path, "farm").read_text())
        open_in_doctor, fix = doctor._configured_targets(tmp_path)["farm"]
        with pytest.raises(BoardError, match=rf"place {PLACE} still taken after 1 s \({PLACE} acquired by "):
            open_in_doctor()
        assert "labgrid-client who" in fix
    finally:
        board.close()
    assert farm.holder() == "" and farm.reservations() == []
    with pytest.raises(BoardError, match=rf"no place named 'k9' \(places: {PLACE}\)"):
        PlaceHold(replace(cfg, place="k9")).take()
    with pytest.raises(BoardError, match="no place has the tags board=x"):
        PlaceHold(replace(cfg, place=None, tags={"board": "x"})).take()
    with pytest.raises(BoardError, match=r"coordinator 127\.0\.0\.1:1: cannot connect"):
        PlaceHold(replace(cfg, coordinator="127.0.0.1:1")).take()
    # the host key is checked as for any board: a place whose board's key is not known is refused
    (tmp_path / "known_hosts").write_text("")
    with pytest.raises(BoardError, match=rf"host key not trusted.*\[this board is labgrid place {PLACE}'s "
                                         "NetworkService NetworkService at coordinator"):
        open_labgrid_board(cfg)
    assert farm.holder() == "" and farm.reservations() == []


def test_labgrid_target_keys_are_checked(tmp_path: Path):
    path = tmp_path / "rvtune.toml"
    path.write_text('[targets.farm]\nkind = "labgrid"\nplace = "k1"\nhost = "k1.lab"\n')
    with pytest.raises(ValueError, match=r"\[targets.farm\] host: a labgrid target's board address .* comes from "):
        load_targets(tmp_path, path)
    path.write_text('[targets.farm]\nkind = "labgrid"\n')
    with pytest.raises(ValueError, match="missing place"):
        load_targets(tmp_path, path)
    path.write_text('[targets.farm]\nkind = "lab"\nhost = "x"\n')
    with pytest.raises(ValueError, match='kind: expected "ssh"'):
        load_targets(tmp_path, path)
    path.write_text('[targets.farm]\nkind = "labgrid"\ntags = { board = "k1" }\nreserve_timeout = 60\n')
    cfg = load_targets(tmp_path, path)["farm"]
    assert cfg.tags == {"board": "k1"} and cfg.reserve_timeout == 60.0 and cfg.coordinator is None
