"""Board farms through labgrid: a place reserved and acquired from a labgrid coordinator, its board reached over
SSH exactly as a configured board is (:class:`~pytest_rvtune.targets.ssh.SshTarget`: host keys checked, uploads
by content, runs under the board's lock).

How a place is taken, in labgrid's own terms (its coordinator speaks gRPC; we use labgrid's ``ClientSession``
for the session stream and call the coordinator's RPCs ourselves, so nothing prints to stdout):

1. **Reserve**: a reservation filtered by the place's name (``place``) or its tags (``tags``). The coordinator
   allocates it a free place, in priority and then age order; until then it waits, and a waiting reservation
   expires unless polled, so it is polled every second (as ``labgrid-client reserve --wait`` does).
2. **Acquire** the allocated place: its resources are now ours until released.
3. **Read** the place's ``NetworkService`` resource (address, username, port, as its exporter publishes them):
   that is the board's SSH address.
4. **Release** the place and **cancel** the reservation at the end, on an error and on Ctrl-C / SIGTERM (the
   plugin turns SIGTERM into KeyboardInterrupt): a released place whose reservation stayed allocated would be
   kept from the next waiting user until the reservation expired. A session killed with SIGKILL leaves the place
   acquired, as any labgrid client would: ``labgrid-client -p PLACE release`` frees it.

A :class:`PlaceLease` (the place, the reservation token, the board's address) is plain data: the pytest-xdist
controller takes the place once and hands the lease to its workers, which only connect to the board.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import os
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pytest_rvtune.extras import missing_extra

try:
    import grpc
    from labgrid.remote.client import ClientSession
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2
    from labgrid.util.proxy import proxymanager
except ImportError as exc:  # the [labgrid] extra
    raise missing_extra("labgrid", "labgrid", "board farms through a labgrid coordinator") from exc

from pytest_rvtune.targets.base import BoardError
from pytest_rvtune.targets.config import TargetConfig
from pytest_rvtune.targets.ssh import LoopThread, SshTarget, warn_if_insecure

log = logging.getLogger(__name__)

T = TypeVar("T")

#: labgrid's default coordinator address and port (what labgrid-client uses without -x or LG_COORDINATOR).
DEFAULT_COORDINATOR = "127.0.0.1:20408"
_DEFAULT_PORT = 20408
#: Seconds between polls of a waiting reservation (the coordinator expires one not polled for 60 s).
_POLL_S = 1.0
#: Seconds the coordinator gets to answer the session's start, a release or a cancel.
_ANSWER_S = 15.0
#: labgrid's ReservationState values (labgrid.remote.common), as the coordinator sends them.
_WAITING, _ALLOCATED, _ACQUIRED = 0, 1, 2
_STATE_NAMES = {0: "waiting", 1: "allocated", 2: "acquired", 3: "expired", 4: "invalid"}


@dataclass(frozen=True)
class PlaceLease:
    """A place this session holds, and the address of its board (as its NetworkService resource says)."""

    coordinator: str
    place: str
    token: str  # the reservation's
    resource: str  # the NetworkService's name in the place
    host: str
    port: int
    user: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlaceLease:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})


def coordinator_address(cfg: TargetConfig) -> str:
    """The coordinator's HOST:PORT: the target's ``coordinator``, else $LG_COORDINATOR, else labgrid's default."""
    return cfg.coordinator or os.environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR


def reservation_filter(cfg: TargetConfig) -> dict[str, str]:
    """labgrid filters by tags; a place's name is the tag ``name``."""
    return {**cfg.tags, **({"name": cfg.place} if cfg.place else {})}


class PlaceHold:
    """One reservation and the place it was given, on one coordinator session. Not thread-safe: one owner."""

    def __init__(self, cfg: TargetConfig, on_wait: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg
        self.on_wait = on_wait  # told once, when the place is taken by others and the wait begins
        self.address = coordinator_address(cfg)
        self._loop = LoopThread.get()
        self._session: ClientSession | None = None
        self.token: str | None = None
        self.place: str | None = None
        self.lease: PlaceLease | None = None

    @property
    def where(self) -> str:
        return f"target {self.cfg.name!r}: labgrid coordinator {self.address}"

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None, *, finish: bool = False) -> T:
        """Run on the loop thread; an interrupt (Ctrl-C, SIGTERM) here cancels the coroutine there too, unless
        ``finish``: a call whose effect at the coordinator release() must know is then awaited (at most
        ``timeout`` more) before the interrupt goes on."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None
        except BaseException:
            if finish:
                with contextlib.suppress(Exception):
                    future.result(timeout)
            else:
                future.cancel()
            raise

    def take(self) -> PlaceLease:
        """Reserve, wait for, acquire and read a place; everything taken is given back if any step fails or is
        interrupted. BoardError names the coordinator, the place and what to do."""
        try:
            self._call(self._start(), _ANSWER_S + 5)
            # an interrupt can land after the coordinator made the reservation but before its answer came: the
            # call finishes (it keeps the token), so release() cancels the reservation instead of leaving it there
            self._call(self._reserve(), _ANSWER_S, finish=True)
            self.place = self._wait()
            self._call(self._acquire(self.place), _ANSWER_S * 2)
            self.lease = self._call(self._read_lease(self.place), _ANSWER_S)
        except TimeoutError:
            self.release()
            raise BoardError(f"{self.where}: the coordinator stopped answering (reservation {self.token}, place "
                             f"{self.place or 'not yet allocated'})") from None
        except BaseException:
            self.release()
            raise
        log.info("%s: place %s acquired (reservation %s): board %s@%s:%d", self.where, self.lease.place,
                 self.lease.token, self.lease.user, self.lease.host, self.lease.port)
        return self.lease

    async def _start(self) -> None:
        try:
            self._session = await _SESSIONS.open(self.address)
        except (TimeoutError, Exception) as exc:
            cause = f"no answer within {_ANSWER_S:g} s" if isinstance(exc, TimeoutError) else str(exc)
            raise BoardError(f"{self.where}: cannot connect ({cause}); check that labgrid-coordinator runs there "
                             f"and coordinator in {self.cfg.where()} (or LG_COORDINATOR)") from None

    async def _reserve(self) -> None:
        assert self._session is not None
        fltr = reservation_filter(self.cfg)
        request = pb2.CreateReservationRequest(filters={"main": pb2.Reservation.Filter(filter=fltr)}, prio=0.0)
        try:
            response = await self._session.stub.CreateReservation(request)
        except grpc.aio.AioRpcError as exc:
            raise BoardError(f"{self.where}: reservation refused: {exc.details()}") from None
        self.token = str(response.reservation.token)  # set here, so it is kept even if the caller was interrupted

    def _wanted(self) -> str:
        return f"place {self.cfg.place}" if self.cfg.place else \
            "a place tagged " + " ".join(f"{k}={v}" for k, v in self.cfg.tags.items())

    def _check_exists(self) -> None:
        """A name or tags no place has would wait forever: said at once instead."""
        assert self._session is not None
        places = self._session.places
        if self.cfg.place and self.cfg.place not in places:
            raise BoardError(f"{self.where}: no place named {self.cfg.place!r} (places: "
                             f"{', '.join(sorted(places)) or 'none'}); create it (labgrid-client -p NAME create) or "
                             f"fix place in {self.cfg.where()}")
        fltr = reservation_filter(self.cfg)
        if not any(all(({**p.tags, "name": name}).get(k) == v for k, v in fltr.items())
                   for name, p in places.items()):
            tags = " ".join(f"{k}={v}" for k, v in self.cfg.tags.items())
            raise BoardError(f"{self.where}: no place has the tags {tags}; set tags on a place "
                             f"(labgrid-client -p NAME set-tags k=v) or fix tags in {self.cfg.where()}")

    def _wait(self) -> str:
        """Poll the reservation until the coordinator allocates it a place; the place's name."""
        self._check_exists()
        deadline = time.monotonic() + self.cfg.reserve_timeout
        said = False
        while True:
            reservation = self._call(self._poll(), _ANSWER_S)
            if reservation.state in (_ALLOCATED, _ACQUIRED):
                return str(reservation.allocations["main"])
            if reservation.state != _WAITING:
                raise BoardError(f"{self.where}: reservation {self.token} for {self._wanted()} is "
                                 f"{_STATE_NAMES.get(reservation.state, reservation.state)}")
            if not said:
                message = f"{self.where}: waiting for {self._wanted()} ({self._holders()})"
                log.warning("%s", message)
                if self.on_wait is not None:
                    self.on_wait(message)
                said = True
            if time.monotonic() > deadline:
                raise BoardError(f"{self.where}: {self._wanted()} still taken after {self.cfg.reserve_timeout:g} s "
                                 f"({self._holders()}); raise reserve_timeout in {self.cfg.where()}")
            time.sleep(_POLL_S)

    def _holders(self) -> str:
        assert self._session is not None
        fltr = reservation_filter(self.cfg)
        held = [f"{name} acquired by {p.acquired}" if p.acquired else f"{name} reserved"
                for name, p in sorted(self._session.places.items())
                if all(({**p.tags, "name": name}).get(k) == v for k, v in fltr.items())]
        return "; ".join(held) or "no place free"

    async def _poll(self) -> Any:
        assert self._session is not None and self.token is not None
        try:
            response = await self._session.stub.PollReservation(pb2.PollReservationRequest(token=self.token))
        except grpc.aio.AioRpcError as exc:
            raise BoardError(f"{self.where}: reservation {self.token} lost: {exc.details()}") from None
        return response.reservation

    async def _acquire(self, place: str) -> None:
        assert self._session is not None
        try:
            await self._session.stub.AcquirePlace(pb2.AcquirePlaceRequest(placename=place))
        except grpc.aio.AioRpcError as exc:
            raise BoardError(f"{self.where}: cannot acquire place {place}: {exc.details()}") from None
        await self._session.sync_with_coordinator()  # the place's update (its resources) has arrived

    async def _read_lease(self, place_name: str) -> PlaceLease:
        """The board's address from the place's NetworkService resource (``resource`` names one of several)."""
        assert self._session is not None and self.token is not None
        place = self._session.places[place_name]
        services: dict[str, Any] = {}
        for path in place.acquired_resources:
            exporter, group, cls, name = path
            if cls != "NetworkService":
                continue
            match = place.getmatch(path)
            entry = self._session.resources.get(exporter, {}).get(group, {}).get(name)
            if entry is not None:
                services[(match.rename if match is not None and match.rename else name)] = entry
        if not services:
            raise BoardError(f"{self.where}: place {place_name} has no NetworkService resource (is its exporter "
                             "running, and does the place match its NetworkService? labgrid-client -p "
                             f"{place_name} show)")
        wanted = self.cfg.resource
        if wanted is None and len(services) > 1:
            raise BoardError(f"{self.where}: place {place_name} has {len(services)} NetworkService resources "
                             f"({', '.join(sorted(services))}); name one with resource in {self.cfg.where()}")
        name = wanted if wanted is not None else next(iter(services))
        if name not in services:
            raise BoardError(f"{self.where}: place {place_name} has no NetworkService named {name!r} (it has "
                             f"{', '.join(sorted(services))}); fix resource in {self.cfg.where()}")
        params = services[name].params
        if params.get("extra", {}).get("proxy_required"):
            raise BoardError(f"{self.where}: place {place_name}'s NetworkService {params.get('address')} is only "
                             "reachable through the exporter host (labgrid's SSH proxy), which rvtune does not use; "
                             "export an address this machine reaches directly")
        return PlaceLease(coordinator=self.address, place=place_name, token=self.token, resource=name,
                          host=str(params["address"]), port=int(params.get("port") or 22),
                          user=str(params["username"]))

    def release(self) -> None:
        """Give back what this hold took (the place if acquired under our reservation, then the reservation);
        never raises: a coordinator gone away is logged (the place stays acquired there)."""
        session, self._session = self._session, None
        if session is None:
            return
        try:
            self._call(self._give_back(session), _ANSWER_S * 2)
        except (Exception, TimeoutError) as exc:
            log.warning("%s: could not release place %s / reservation %s (%s): free it with `labgrid-client -x "
                        "%s -p %s release`", self.where, self.place, self.token, exc, self.address, self.place)
        finally:
            with contextlib.suppress(Exception):
                self._call(_SESSIONS.close(self.address), 15)
            self.lease = None

    async def _give_back(self, session: ClientSession) -> None:
        if session.stopping.is_set():
            raise ConnectionError("the coordinator closed the session")
        await session.sync_with_coordinator()  # the latest place states (an acquire interrupted halfway)
        for name, place in list(session.places.items()):
            if place.reservation == self.token and self.token and place.acquired:
                await session.stub.ReleasePlace(pb2.ReleasePlaceRequest(placename=name))
                log.info("%s: place %s released", self.where, name)
        if self.token is not None:
            with contextlib.suppress(grpc.aio.AioRpcError):  # already gone (expired)
                await session.stub.CancelReservation(pb2.CancelReservationRequest(token=self.token))


class _Sessions:
    """One coordinator session per address and process, shared by the holds on it (used on the loop thread
    only). Two sessions of one process would share one gRPC connection, and the coordinator, which knows a
    client by its connection, refuses the second."""

    def __init__(self) -> None:
        self.sessions: dict[str, ClientSession] = {}
        self.users: dict[str, int] = {}

    async def open(self, address: str) -> ClientSession:
        session = self.sessions.get(address)
        if session is None or session.stopping.is_set():  # none yet, or the coordinator closed it
            if session is not None:
                await self._stop(self.sessions.pop(address))
            grpc_address = proxymanager.get_grpc_address(address, default_port=_DEFAULT_PORT)
            session = ClientSession(grpc_address, asyncio.get_running_loop())
            try:
                await asyncio.wait_for(session.start(), _ANSWER_S)
            except BaseException:
                await self._stop(session)
                raise
            self.sessions[address] = session
        self.users[address] = self.users.get(address, 0) + 1
        return session

    async def close(self, address: str) -> None:
        self.users[address] -= 1
        if self.users[address] == 0:
            del self.users[address]
            await self._stop(self.sessions.pop(address))

    @staticmethod
    async def _stop(session: ClientSession) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(session.stop(), 5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(session.close(), 5)


_SESSIONS = _Sessions()


def board_config(cfg: TargetConfig, lease: PlaceLease) -> TargetConfig:
    """The SSH board of a labgrid target: every board key of the target, the address from the place."""
    return replace(cfg, kind="ssh", hosts=(lease.host,), port=lease.port, user=lease.user)


class LabgridBoard(SshTarget):
    """The board of a labgrid place, over SSH; it gives the place back on close when it took it itself."""

    def __init__(self, cfg: TargetConfig, lease: PlaceLease, hold: PlaceHold | None) -> None:
        super().__init__(board_config(cfg, lease), lease.host)
        self.lease = lease
        self.hold = hold

    @functools.cache  # noqa: B019 (one target object per session, as SshTarget.identity)
    def identity(self) -> dict[str, str]:
        return {**super().identity(), "labgrid_place": self.lease.place, "labgrid_coordinator": self.lease.coordinator}

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.hold is not None:
                self.hold.release()


def hold_place(cfg: TargetConfig, on_wait: Callable[[str], None] | None = None) -> PlaceHold:
    """Reserve and acquire a place of ``cfg`` (a labgrid target) now; the caller releases it. ``on_wait`` is
    told, once, when others hold the place and the wait begins."""
    hold = PlaceHold(cfg, on_wait)
    hold.take()
    return hold


def open_labgrid_board(cfg: TargetConfig, lease: Mapping[str, Any] | None = None) -> LabgridBoard:
    """The board of a labgrid target: of the given lease (an xdist worker: its controller holds the place), else
    of a place taken now and given back when the target closes."""
    warn_if_insecure(cfg)
    hold = None if lease is not None else hold_place(cfg)
    try:
        taken = PlaceLease.from_dict(lease) if lease is not None else hold.lease  # type: ignore[union-attr]
        assert taken is not None
        board = LabgridBoard(cfg, taken, hold)
        try:
            board.connect()
        except BoardError as exc:  # its host and port are not in the config file: say where they come from
            raise BoardError(f"{exc} [this board is labgrid place {taken.place}'s NetworkService {taken.resource} "
                             f"at coordinator {taken.coordinator}: labgrid-client -p {taken.place} show]") from None
    except BaseException:
        if hold is not None:
            hold.release()
        raise
    return board
