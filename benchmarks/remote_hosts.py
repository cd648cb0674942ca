"""The matmul suite on pytest-xdist remote workers: two "hosts" against one, cold caches each time.

Each host is a network namespace of this machine with its own sshd and its own RVTUNE_CACHE_DIR (the test
fixture's, tests/ssh/sshd_helpers.py); the controller is `pytest kernels -k matmul --rvtune-case small
--tx ssh=host-a ... [--tx ssh=host-b ...] --rsyncdir=...`, one worker per host. Every run starts from empty
host caches, so each one builds every config (as a new farm host would).

    .venv/bin/python benchmarks/remote_hosts.py [-k matmul] [--case small]

The namespaces share this machine's cores: on a 2-core machine two one-worker hosts can at best halve the
one-host time, and whatever else runs on the machine (its load average is printed) takes from both. The figure
says what the remote path costs and how the work spreads, not how a farm of real machines scales.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from pytest_rvtune import paths

REPO = Path(__file__).resolve().parent.parent
# The test fixture servers and namespaces (tests/ssh/sshd_helpers.py), reused rather than copied.
sys.path.insert(0, str(REPO / "tests" / "ssh"))
from sshd_helpers import Keys, RemoteHost, _keygen, remote_hosts  # noqa: E402


def keys_in(d: Path) -> Keys:
    host_pub = _keygen(d / "host_key")
    client_pub = _keygen(d / "client_key")
    _keygen(d / "other_key")
    (d / "authorized_keys").write_text(client_pub + "\n")
    return Keys(d, d / "host_key", host_pub, d / "client_key", d / "other_key", _keygen(d / "other_host_key"))


def run_suite(root: Path, hosts: list[RemoteHost], select: list[str], tag: str) -> tuple[float, str, Counter[str]]:
    """One controller session over ``hosts`` (one worker each) from empty host caches: wall seconds, the rvtune
    summary line, and how many records each host ran."""
    for host in hosts:
        shutil.rmtree(host.cache, ignore_errors=True)
    results = root / f"{tag}.jsonl"
    txs = [f"--tx=ssh={h.name}//ssh_config={root / 'ssh_config'}//python={sys.executable}"
           f"//chdir={root / h.name / 'work'}" for h in hosts]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "kernels"), *select, *txs, "--dist=load", f"--rsyncdir={REPO}",
         f"--rvtune-results={results}", "--benchmark-disable", "-p", "no:cacheprovider", "-q",
         "-W", "ignore::DeprecationWarning"],
        cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    summary = next((line for line in done.stdout.splitlines() if line.startswith("rvtune: ")), done.stdout[-2000:])
    ran = Counter(json.loads(line).get("worker_host", "?") for line in results.read_text().splitlines()) \
        if results.exists() else Counter()
    return seconds, summary, ran


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="matmul", help="the -k selection (default: matmul)")
    parser.add_argument("--case", default="small", help="the --rvtune-case (default: small)")
    args = parser.parse_args()
    select = ["-k", args.k, "--rvtune-case", args.case]
    with tempfile.TemporaryDirectory(prefix="rvtune-remote-bench-") as tmp:
        root = Path(tmp)
        (root / "keys").mkdir()
        env = {"RVTUNE_TOOLS_DIR": str(paths.tools_dir()), "PYTHONPATH": str(REPO)}
        with remote_hosts(root, keys_in(root / "keys"), ("host-a", "host-b"), env) as hosts:
            rows = []
            for tag, chosen in (("one host", [hosts["host-a"]]), ("two hosts", [hosts["host-a"], hosts["host-b"]])):
                before = os.getloadavg()
                seconds, summary, ran = run_suite(root, chosen, select, tag.replace(" ", "-"))
                after = os.getloadavg()
                rows.append((tag, seconds))
                print(f"{tag}: {seconds:.1f} s wall; records per host {dict(ran)}; load average (1 min) "
                      f"{before[0]:.2f} before, {after[0]:.2f} after; {os.cpu_count()} cores")
                print(f"  {summary}")
            print(f"two hosts / one host: {rows[1][1] / rows[0][1]:.2f}x the time "
                  f"({rows[0][1] / rows[1][1]:.2f}x the throughput)")


if __name__ == "__main__":
    main()
