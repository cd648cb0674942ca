"""Kernel items on two other hosts through pytest-xdist's own remote workers (``--tx ssh=...``), one of which
disappears mid-run.

Each "host" is a network namespace of this machine with its own OpenSSH server (host keys checked through an
ssh_config the test writes) and its own environment: its own RVTUNE_CACHE_DIR, so the build and count caches
are really per host. The namespaces share this machine's file system, so the remote python is this venv's, and
PYTHONPATH points it at the checkout under test. The controller is a real `pytest --tx ... --tx ...` session:
xdist rsyncs the project to each host (``--rsyncdir``, deprecated in xdist 3 but the only way it ships the code;
see docs/scaling.md), the items build and run under QEMU on the hosts, and their records come back over
execnet's channel to the controller, which alone writes the results file. Once host-b has finished an item, every
process of its namespace (sshd, the worker's python, QEMU) is killed: the host is gone. Its item in flight is
reported lost, naming the host and the item, and every other item finishes on host-a. A session started while
host-b is gone stops before any worker starts, with one error naming it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd_helpers import REPO, Keys, RemoteHost, kill_namespace, remote_hosts

from pytest_rvtune import paths

HOSTS = ("host-a", "host-b")
#: Five cheap items (softmax, small case): each host gets two at the start, the fifth goes to the first free.
SELECT = ["-k", "softmax and BLOCK_SIZE_M=4", "--rvtune-case", "small"]


@pytest.fixture
def two_hosts(tmp_path: Path, ssh_keys: Keys) -> Iterator[dict[str, RemoteHost]]:
    """Two namespace hosts with an sshd and a cache dir each; their ssh_config is tmp_path/ssh_config."""
    env = {"RVTUNE_TOOLS_DIR": str(paths.tools_dir()),  # the QEMU plugin `rvtune setup` built
           "PYTHONPATH": str(REPO)}  # the plugin under test, whatever the venv has installed
    with remote_hosts(tmp_path, ssh_keys, HOSTS, env) as hosts:  # skips, naming why, where netns is not allowed
        yield hosts


#: The controller's environment: ours, less xdist's variables (this test may run in an xdist worker itself), with
#: the plugin under test first on its path (it may run outside the checkout: a relative --rvtune-compare file).
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}, "PYTHONPATH": str(REPO)}


def controller_args(root: Path, results: Path, hosts: tuple[str, ...] = HOSTS,
                    items: tuple[str, ...] = (str(REPO / "kernels" / "softmax.py"), *SELECT)) -> list[str]:
    """The user's command: the kernel file (absolute, as xdist's --rsyncdir needs), one --tx per host."""
    txs = [f"--tx=ssh={name}//ssh_config={root / 'ssh_config'}//python={sys.executable}"
           f"//chdir={root / name / 'work'}" for name in hosts]
    return [sys.executable, "-m", "pytest", *items, *txs, "--dist=load", f"--rsyncdir={REPO}",
            f"--rvtune-results={results}", "--benchmark-disable", "-p", "no:cacheprovider",
            "-W", "ignore::DeprecationWarning"]


def records_of(path: Path) -> list[dict]:
    """The whole records in the results file (read while the controller appends: its last line may be partial)."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]


def test_items_run_on_two_hosts_and_a_lost_host_loses_only_its_item_in_flight(
        two_hosts: dict[str, RemoteHost], tmp_path: Path) -> None:
    results = tmp_path / "controller" / "run.jsonl"
    controller = subprocess.Popen(controller_args(tmp_path, results), cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
    try:
        # host-b disappears as soon as it has finished one item (the controller has written its record)
        deadline = time.monotonic() + 240
        while not any(r.get("worker_host") == "host-b" for r in records_of(results)):
            assert controller.poll() is None, f"the run ended before host-b finished an item:\n{controller.stdout}"
            assert time.monotonic() < deadline, "host-b finished no item in 240 s"
            time.sleep(0.05)
        assert kill_namespace(two_hosts["host-b"].ns) >= 3  # sshd, its session, the worker's python (and QEMU)
        out, _ = controller.communicate(timeout=300)
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
    records = records_of(results)
    lost = [line for line in out.splitlines() if line.startswith("rvtune: host host-b ") and "mid-run" in line]
    assert len(lost) == 1, out[-3000:]
    # exactly the item in flight is lost, named with its host; it has no record, every other item passed
    lost_item = lost[0].split("without a verdict or record: ")[1].split("; ")[0]
    assert lost_item.startswith("kernels/softmax.py::softmax[small-BLOCK_SIZE_M=4-"), lost[0]
    assert "1 item in flight lost" in lost[0] and "replaced on host-a" in lost[0], lost[0]
    assert "crashed while running" in out and controller.returncode == 1, out[-3000:]
    ran = [r["nodeid"] for r in records]
    assert len(ran) == len(set(ran)) == 4 and lost_item not in ran, ran  # five items, one lost
    assert all(r["outcome"] == "passed" and r["counters"].get("launch_insns") and r["samples_ns"] for r in records), \
        records
    assert "4 passed" in out and "1 lost" in out, out[-3000:]
    # the controller wrote every record (worker_host is its field), with its checkout's commit; no host wrote one
    by_host = Counter(r["worker_host"] for r in records)
    assert by_host["host-b"] >= 1 and by_host["host-a"] >= 2, by_host
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert all(r.get("run_id") == records[0]["run_id"] and r.get("git_commit") == (commit or None) for r in records)
    assert not list(tmp_path.glob("host-*/work/**/.rvtune/results/*.jsonl"))
    # build and count caches are the hosts' own: each built what it ran
    for host in two_hosts.values():
        assert any(host.cache.glob("elf/*")), f"{host.name} built nothing into its own cache {host.cache}"
        assert any(host.cache.glob("counts/*")), f"{host.name} counted nothing into its own cache {host.cache}"
    # a session that starts while host-b is still gone, and names a python on host-a that is not there: one error
    # naming both before any worker starts
    ours = f"python={sys.executable}//chdir={tmp_path / 'host-a'}"
    args = [a.replace(ours, f"python=/no/python//chdir={tmp_path / 'host-a'}")
            for a in controller_args(tmp_path, tmp_path / "again.jsonl")]
    again = subprocess.run(args, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=120)
    said = again.stdout + again.stderr
    assert again.returncode == pytest.ExitCode.USAGE_ERROR, said[-3000:]
    assert "--tx host host-b: does not answer (ssh: connect to host " in said, said[-3000:]
    assert "--tx host host-a: `/no/python -c 'import pytest_rvtune'` failed there (" in said, said[-3000:]
    assert "Traceback" not in said and not (tmp_path / "again.jsonl").exists(), said[-3000:]
    # files the options name reach the hosts by content: a base run given relative to the controller's directory
    # (no such file where a worker starts) is compared with on host-a, for an item it ran (its caches are warm)
    item = next(r["nodeid"] for r in records if r["worker_host"] == "host-a")
    args = controller_args(tmp_path, tmp_path / "compared.jsonl", hosts=("host-a",),
                           items=(f"{REPO}/{item}", "--rvtune-case", "small"))
    compared = subprocess.run([*args, "--rvtune-compare=run.jsonl"], cwd=results.parent, env=ENV,
                              capture_output=True, text=True, timeout=300)
    assert compared.returncode == 0, compared.stdout[-3000:] + compared.stderr[-3000:]
    assert "rvtune: compared 1 item against run.jsonl: 0 regressed, 1 unchanged" in compared.stdout, \
        compared.stdout[-3000:]
