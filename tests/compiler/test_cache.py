"""The build cache: entries appear atomically, concurrent builders of one key do the work once, and a
rebuild happens exactly when something that changes the output changes (counted, never timed)."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from pytest_rvtune.compiler.cache import BuildCache, cache_key


def _build_in_process(root: str, key: str, log: str, queue) -> None:
    def build(tmp: Path) -> None:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.3)  # keep the build open so the other worker arrives while it runs
        (tmp / "out.txt").write_text("built")

    path, hit = BuildCache(Path(root)).get_or_build("obj", key, build)
    queue.put((str(path), hit, (path / "out.txt").read_text()))


def test_concurrent_workers_build_once(tmp_path):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    log = tmp_path / "builds.log"
    key = cache_key(what="x")
    procs = [ctx.Process(target=_build_in_process, args=(str(tmp_path / "c"), key, str(log), queue))
             for _ in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert len(log.read_text().splitlines()) == 1
    assert len({r[0] for r in results}) == 1
    assert sorted(r[1] for r in results) == [False, True, True]
    assert {r[2] for r in results} == {"built"}
    # no temp dirs left behind
    entry = Path(results[0][0])
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]


def test_failed_build_publishes_nothing(tmp_path):
    cache = BuildCache(tmp_path)

    def broken(tmp: Path) -> None:
        (tmp / "half.o").write_text("partial")
        raise RuntimeError("clang failed")

    with pytest.raises(RuntimeError, match="clang failed"):
        cache.get_or_build("obj", "k" * 64, broken)
    assert not cache.entry("obj", "k" * 64).exists()
    assert list(cache.entry("obj", "k" * 64).parent.iterdir()) == []
    path, hit = cache.get_or_build("obj", "k" * 64, lambda tmp: (tmp / "a").write_text("ok"))
    assert not hit and (path / "a").read_text() == "ok"
    assert cache.get_or_build("obj", "k" * 64, lambda tmp: pytest.fail("rebuilt a cached entry")) == (path, True)


def test_cache_key_is_stable_and_sensitive():
    a = cache_key(config={"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32}, lowering="1")
    assert a == cache_key(lowering="1", config={"BLOCK_SIZE_N": 32, "BLOCK_SIZE_M": 16})
    assert a != cache_key(config={"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16}, lowering="1")
    assert a != cache_key(config={"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32}, lowering="2")
