"""A session keeps the cache to its size cap at its end: the least recently used entries of earlier sessions go,
none that this session used, and the summary says what was removed. The real plugin, compiler, clang and QEMU;
a cache of its own (a prune must not empty the shared one)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_rvtune.compiler.cache import BuildCache, cache_key


def test_the_session_prunes_entries_of_earlier_sessions_down_to_the_cap(
        project: pytest.Pytester, add_kernel: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache_root = tmp_path / "own-cache"
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(cache_root))
    stale, _ = BuildCache(cache_root).get_or_build(
        "elf", cache_key(name="an earlier session's"), lambda tmp: (tmp / "k.elf").write_bytes(b"\0" * 200_000))
    os.utime(stale, (time.time() - 86400, time.time() - 86400))
    add_kernel("cap_axpy", configs=(16,))
    result = project.runpytest("--rvtune-case", "small", "--benchmark-disable", "--rvtune-cache-max", "100kB")
    result.assert_outcomes(passed=1)
    assert not stale.exists()
    result.stdout.fnmatch_lines(["rvtune: cache over its 100.0 kB cap (option): removed 1 least recently used "
                                 "entries (200.* kB), * left; `rvtune cache info` lists it"])
    # what this session built stays, though it is over the cap: the next run of the same item is a cache hit
    assert any((cache_root / "elf").rglob("*.elf"))
    again = project.runpytest("--rvtune-case", "small", "--benchmark-disable", "--rvtune-cache-max", "100kB")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*build cache * hits / 0 misses*"])
    assert (project.path / ".rvtune" / ".gitignore").is_file()  # results went under the project's .rvtune/


def test_a_cap_that_is_not_a_size_is_a_usage_error(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RVTUNE_CACHE_MAX", "a lot")
    add_kernel("cap_axpy", configs=(16,))
    result = project.runpytest("--rvtune-case", "small", "--benchmark-disable")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the cache's size cap: RVTUNE_CACHE_MAX=a lot: 'a lot' is not a size; write e.g. "
                                 "4GB, 500MB, 2GiB, or 'off' for no cap*"])
