"""pytest-xdist workers on other hosts (``--tx ssh=user@host//python=...``): which host each worker is on, and
what happens when a host goes away mid-run.

xdist runs each item where its worker is and sends the item's report (with our record in its user_properties)
back over execnet's channel; the controller alone writes the results file (session.tally_report). What xdist
3.8 does not do is survive a host that disappears: it replaces a crashed worker by starting another on the same
spec, and on a host that is gone that start raises HostNotFound out of its main loop, which ends the whole
session (an INTERNALERROR; with --max-worker-restart 0 it stops instead, leaving the remaining items unrun and
unreported). So when a remote worker goes down, the controller asks the host with a fresh SSH connection; a host
that does not answer is lost: its in-flight item is reported as such (naming the host), the spec of the
replacement worker is pointed at a host that answers (this machine when none does), and the items the lost
worker had queued run there. A host that does not answer at the start is one error naming it.

Knows xdist's objects only by the attributes it reads (``node.gateway.id``, ``node.gateway.spec``), so the
plugin imports no xdist module at start-up.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: workerinput key of the files the controller's options name (a base run, a noise file...), sent by content to
#: workers on other hosts, which cannot read the controller's disk.
SHIPPED_KEY = "rvtune_shipped_files"
#: How a summary names the controller's machine (where a local worker runs).
THIS_MACHINE = "this machine"
#: Seconds a lost-host probe may take to connect (the probe runs only when a remote worker went down).
PROBE_TIMEOUT_S = 5


def spec_host(spec: Any) -> str | None:
    """The host an execnet spec's worker runs on (``ssh=user@host`` -> ``user@host``), or None for a worker on this
    host (``popen`` without ``via``)."""
    if spec is None:
        return None
    if getattr(spec, "ssh", None):
        return str(spec.ssh)
    if getattr(spec, "socket", None):
        return str(spec.socket)
    if getattr(spec, "via", None):
        return f"via {spec.via}"
    return None


def node_host(node: Any) -> str | None:
    """The host of an xdist WorkerController (a report's ``node``), None for a local worker."""
    gateway = getattr(node, "gateway", None)
    return spec_host(getattr(gateway, "spec", None))


def unfit_at_start(specs: Sequence[Any]) -> list[str]:
    """What is wrong with the hosts of the ``ssh=`` specs, one line per host, probed at once before any worker
    starts: a host that does not answer, or whose python cannot import pytest_rvtune (xdist would otherwise stop at
    the first one with a HostNotFound traceback, or restart a worker that cannot start)."""
    hosts = {spec_host(spec): spec for spec in specs if getattr(spec, "ssh", None)}

    def check(spec: Any) -> str | None:
        python = str(spec.python or "python")  # execnet's own default
        return probe_ssh(spec, f"{python} -c 'import pytest_rvtune'")

    with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        causes = dict(zip(hosts, pool.map(check, hosts.values()), strict=True))
    return [f"--tx host {host}: {cause}" for host, cause in causes.items() if cause is not None]


def probe_ssh(spec: Any, command: str = "true") -> str | None:
    """Whether the host of an ``ssh=`` spec answers a fresh connection and runs ``command``: None if it does, else
    what went wrong (ssh's or the command's last line).

    Uses the spec's own ssh words and ``ssh_config`` (so the same keys, known hosts and port), in batch mode."""
    args = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={PROBE_TIMEOUT_S}"]
    if getattr(spec, "ssh_config", None):
        args += ["-F", str(spec.ssh_config)]
    args += [*str(spec.ssh).split(), command]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S * 3)
    except subprocess.TimeoutExpired:
        return f"does not answer (no answer within {PROBE_TIMEOUT_S * 3} s)"
    except OSError as exc:  # no ssh client here: say so, and treat the host as lost
        return f"cannot be reached: cannot run ssh here ({exc})"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    last = lines[-1] if lines else f"exit status {done.returncode}"
    if done.returncode == 255:  # ssh's own failure: no connection, refused key, unknown host key
        return f"does not answer ({last})"
    return f"`{command}` failed there ({last}): install pytest-rvtune for that python (the same version as here)"


@dataclass
class LostHost:
    host: str
    worker: str  # xdist's worker id (gw1)
    cause: str  # why the probe failed
    items: list[str] = field(default_factory=list)  # the node ids that were in flight on it
    moved_to: str | None = None  # the host the replacement worker was started on (None: its worker is not down)


@dataclass
class RemoteWorkers:
    """The controller's view of its remote workers: their hosts, and the hosts lost mid-run."""

    specs: dict[str, Any] = field(default_factory=dict)  # worker id -> its execnet spec, as configured
    lost: dict[str, LostHost] = field(default_factory=dict)  # host -> what was lost with it

    def configured(self, node: Any) -> None:
        self.specs[node.gateway.id] = node.gateway.spec

    def went_down(self, node: Any, error: object | None) -> LostHost | None:
        """xdist's pytest_testnodedown: a remote worker that went down with an error on a host that no longer
        answers marks the host lost and points the worker's spec (which xdist reuses for the replacement worker)
        at a host that answers. Returns the lost host, else None (a local worker, a clean end, a host that is up:
        xdist restarts the worker there as usual)."""
        spec = node.gateway.spec
        host = spec_host(spec)
        if error is None or error == "keyboard-interrupt" or host is None or not getattr(spec, "ssh", None):
            return None  # a clean end, Ctrl-C (xdist's own word for it), a local worker, a socket/via worker
        cause = self.lost[host].cause if host in self.lost else probe_ssh(spec)
        if cause is None:
            return None
        lost = self.lost.setdefault(host, LostHost(host, node.gateway.id, cause))
        # xdist's _clone_node starts the replacement from node.gateway.spec: a copy of a live host's spec, else
        # (every --tx host is gone) a worker on this machine, which finishes the session as `-n 1` would
        # (xdist would otherwise try the lost host again and end the session with HostNotFound).
        replacement = self.live_spec(exclude=host)
        node.gateway.spec = type(spec)(str(replacement) if replacement is not None else "popen")
        lost.moved_to = spec_host(replacement) or THIS_MACHINE
        return lost

    def live_spec(self, exclude: str) -> Any | None:
        """A configured spec on a host that answers now, the first in --tx order (a local worker's too: this
        machine always answers); None if there is none. A host that does not answer is marked lost on the way:
        several hosts can go at once (a switch, a power strip), and a replacement sent to one of them would end
        the session as xdist's own retry does."""
        for worker, spec in self.specs.items():
            host = spec_host(spec)
            if host is None:
                return spec
            if host == exclude or host in self.lost:
                continue
            cause = probe_ssh(spec) if getattr(spec, "ssh", None) else None
            if cause is None:
                return spec
            self.lost[host] = LostHost(host, worker, cause)
        return None

    def item_lost(self, node: Any, nodeid: str) -> bool:
        """xdist's crash report of ``nodeid`` from ``node``: noted under its host when that host is lost."""
        # the host it was configured on: went_down may have pointed the node's spec at the replacement's host
        gateway = getattr(node, "gateway", None)
        host = spec_host(self.specs.get(getattr(gateway, "id", ""))) or node_host(node)
        if host is None or host not in self.lost:
            return False
        self.lost[host].items.append(nodeid)
        return True

    def summary_lines(self) -> list[str]:
        lines = []
        for lost in self.lost.values():
            if lost.moved_to is None:  # found silent when looking for a replacement, its own worker still up
                continue
            count = len(lost.items)
            items = "; ".join(lost.items) if lost.items else "none"
            where = f"its worker was replaced on {lost.moved_to}, which ran the items it had queued"
            lines.append(f"rvtune: host {lost.host} (xdist worker {lost.worker}) went away mid-run ({lost.cause}): "
                         f"{count} item{'' if count == 1 else 's'} in flight lost, without a verdict or record: "
                         f"{items}; {where}")
        return lines


def pack_files(named: Mapping[str, Sequence[Path]]) -> dict[str, list[tuple[str, bytes]]]:
    """option field -> its files as (name, content), for a remote worker's workerinput (execnet sends bytes)."""
    return {field_name: [(path.name, path.read_bytes()) for path in files] for field_name, files in named.items()}


def unpack_files(packed: Mapping[str, Sequence[tuple[str, bytes]]], into: Path) -> dict[str, list[Path]]:
    """The worker's side of pack_files: each file written under ``into`` with its own name (its format is read from
    the name: .json or .jsonl), one directory per option and file; option field -> the paths."""
    unpacked: dict[str, list[Path]] = {}
    for field_name, files in packed.items():
        for index, (name, content) in enumerate(files):
            path = into / f"{field_name}-{index}" / name
            path.parent.mkdir(parents=True)
            path.write_bytes(content)
            unpacked.setdefault(field_name, []).append(path)
    return unpacked
