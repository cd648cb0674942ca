"""The state directory marks itself (git ignores it, backup tools skip it) and the cache keeps to its size cap by
evicting the least recently used entries; `rvtune cache info|prune|clean`. Real files, real git, the real
BuildCache and the real CLI."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from pytest_rvtune import cli, paths
from pytest_rvtune.cache_limit import DEFAULT_CAP, CapError, format_size, parse_size, prune, resolve_cap, usage
from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.results.writer import ResultsWriter


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("RVTUNE_CACHE_DIR", raising=False)
    monkeypatch.delenv("RVTUNE_CACHE_MAX", raising=False)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    previous = paths.set_project_root(tmp_path)
    yield tmp_path
    paths.set_project_root(previous)


def test_the_state_directory_is_ignored_by_git_and_tagged_as_a_cache(project: Path) -> None:
    cache = paths.cache_dir()
    (cache / "elf" / "ab").mkdir(parents=True)
    (cache / "elf" / "ab" / "big.elf").write_bytes(b"\0" * 1000)
    paths.results_dir().mkdir(parents=True)
    (paths.results_dir() / "run.jsonl").write_text("{}\n")
    (project / "kernel.py").write_text("x = 1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "add", "-A"], cwd=project, check=True)
    tracked = subprocess.run(["git", "ls-files"], cwd=project, capture_output=True, text=True, check=True).stdout
    assert tracked.split() == ["kernel.py", "pyproject.toml"]  # nothing of .rvtune/
    tag = (project / ".rvtune" / "CACHEDIR.TAG").read_text()
    assert tag.startswith("Signature: 8a477f597d28d172789f06886806bc55")  # what tar --exclude-caches looks for


def test_a_state_directory_of_an_older_version_gets_its_markers(project: Path) -> None:
    (project / ".rvtune" / "results").mkdir(parents=True)
    paths.results_dir()
    assert not (project / ".rvtune" / ".gitignore").exists()  # naming the directory writes nothing
    ResultsWriter(paths.results_dir() / "run.jsonl").append({"kernel": "k"})  # the first record does
    assert (project / ".rvtune" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (project / ".rvtune" / "CACHEDIR.TAG").is_file()


def test_sizes_and_where_the_cap_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_size("4GB", "x") == 4_000_000_000 and parse_size("1.5 GiB", "x") == 3 << 29
    assert parse_size("500M", "x") == 500_000_000 and parse_size("0", "x") == 0 and parse_size("off", "x") is None
    with pytest.raises(CapError, match=r"RVTUNE_CACHE_MAX=4 gigs: '4 gigs' is not a size; write e.g. 4GB"):
        parse_size("4 gigs", "RVTUNE_CACHE_MAX=4 gigs")
    monkeypatch.delenv("RVTUNE_CACHE_MAX", raising=False)
    assert resolve_cap(None, None) == (DEFAULT_CAP, "default")
    assert resolve_cap(None, "2GB") == (2_000_000_000, "rvtune_cache_max")
    monkeypatch.setenv("RVTUNE_CACHE_MAX", "3GB")
    assert resolve_cap(None, "2GB") == (3_000_000_000, "RVTUNE_CACHE_MAX")
    assert resolve_cap("1GB", "2GB") == (1_000_000_000, "option")


def _entry(cache: BuildCache, name: str, size: int, age_s: float) -> Path:
    def build(tmp: Path) -> None:
        (tmp / "kernel.elf").write_bytes(os.urandom(size))

    path, _ = cache.get_or_build("elf", cache_key(name=name), build)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def _record(root: Path, name: str, size: int, age_s: float) -> Path:
    key = cache_key(record=name)
    path = root / "counts" / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{" + b" " * (size - 2) + b"}")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_prune_evicts_least_recently_used_first_and_a_hit_counts_as_a_use(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    oldest = _entry(cache, "oldest", 40_000, age_s=4000)
    used_again = _entry(cache, "used again", 40_000, age_s=3000)
    record = _record(tmp_path, "a count record", 40_000, age_s=2000)
    newest = _entry(cache, "newest", 40_000, age_s=1000)
    # a hit on the second-oldest entry makes it the most recently used
    assert cache.get_or_build("elf", cache_key(name="used again"), lambda tmp: None) == (used_again, True)
    assert usage(tmp_path).entry_bytes > 160_000
    pruned = prune(90_000, keep_since=time.time() + 60, root=tmp_path)
    assert not oldest.exists() and not record.exists()  # the two least recently used
    assert newest.is_dir() and used_again.is_dir()
    assert pruned.removed == 2 and pruned.after <= 90_000 and pruned.before - pruned.after == pruned.freed


def test_prune_keeps_what_the_session_used_and_what_a_build_holds(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    locked = _entry(cache, "being built again", 30_000, age_s=5000)
    this_session = _entry(cache, "this session's", 30_000, age_s=10)
    key = cache_key(name="being built again")
    with FileLock(str(tmp_path / "locks" / f"elf-{key}.lock")):
        pruned = prune(0, keep_since=time.time() - 60, root=tmp_path)
    assert locked.is_dir() and this_session.is_dir() and pruned.removed == 0 and pruned.kept_busy == 2
    assert prune(0, keep_since=time.time() - 60, root=tmp_path).removed == 1 and not locked.exists()


def test_the_cache_command_informs_prunes_and_cleans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "cache"
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(root))
    monkeypatch.setenv("RVTUNE_CACHE_MAX", "1MB")
    cache = BuildCache(root)
    old = _entry(cache, "old", 300_000, age_s=7200)
    recent = _entry(cache, "recent", 300_000, age_s=3600)
    _record(root, "record", 2_000, age_s=60)
    (root / "golden" / "k").mkdir(parents=True)
    (root / "golden" / "k" / "x.txt").write_text("1 2 3\n")

    assert cli.main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"cache {root}: 602." in out and "cap 1.0 MB (RVTUNE_CACHE_MAX)" in out
    assert "elf" in out and "2 entries" in out and "counts" in out and "1 entry" in out and "other" in out

    old_size = sum(f.stat().st_size for f in old.rglob("*") if f.is_file())  # the ELF and the entry's manifest
    assert cli.main(["cache", "prune", "--max", "400kB"]) == 0
    out = capsys.readouterr().out
    assert not old.exists() and recent.is_dir()
    assert f"removed 1 entry, least recently used first ({format_size(old_size)})" in out
    assert "(cap 400.0 kB, option)" in out

    assert cli.main(["cache", "prune", "--max", "lots"]) == 2
    assert "option=lots: 'lots' is not a size" in capsys.readouterr().err

    assert cli.main(["cache", "clean"]) == 0
    assert "rvtune cache clean: removed 302." in capsys.readouterr().out
    assert sorted(p.name for p in root.iterdir()) == [".gitignore", "CACHEDIR.TAG"]
