"""Damaged cache entries (issue 28, bad cases 2-4): a truncated, zeroed or missing ELF, a truncated kernel object,
a data image with one value changed and damaged count-cache records are each found before use, removed, made again
and reported once; the item's verdict is the kernel's own (passed), never a crash or wrong answer of the damage.
`rvtune cache verify` checks the whole cache and removes stale temporary directories of killed runs.

Real parts: a tiny kernel (tests/plugin/plugin_helpers.py) built by our compiler and clang-19, run under QEMU, in
the session's shared cache (each test's kernel has its own name, so its entries are its own to damage).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import read_results

SMALL = ("--rvtune-case", "small", "-p", "no:cacheprovider")


def _run(project: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, list[dict]]:
    out = project.path / "run.jsonl"
    out.unlink(missing_ok=True)
    result = project.runpytest(*SMALL, f"--rvtune-results={out}", *args)
    return result, read_results(out)


@pytest.mark.parametrize("damage", ["truncated", "zeroed", "deleted"])
def test_a_damaged_elf_is_rebuilt_and_reported_not_run(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                                        rvtune_cache_dir: Path, damage: str) -> None:
    name = f"fci_elf_{damage}"
    add_kernel(name, configs=(16,))
    first, records = _run(project)
    first.assert_outcomes(passed=1)
    elf, built = Path(records[0]["rerun"]["elf"]), records[0]["elf_sha256"]
    size = elf.stat().st_size
    if damage == "truncated":  # a full disk or a killed copy: the first half
        elf.write_bytes(elf.read_bytes()[: size // 2])
    elif damage == "zeroed":  # same size, a page of zeros in the middle (bit rot, a bad sector)
        with elf.open("r+b") as fh:
            fh.seek(size // 2)
            fh.write(bytes(4096))
    else:
        elf.unlink()
    second, records = _run(project)
    second.assert_outcomes(passed=1)  # before: SIGBUS / SIGILL / "build failed [Errno 2]" on every run
    assert records[0]["elf_sha256"] == built  # rebuilt as it was (the link is deterministic)
    why = {"truncated": f"{elf.name} has {size // 2} bytes, {size} when it was built",
           "zeroed": f"{elf.name} has changed since it was built (sha256 differs)",
           "deleted": f"{elf.name} is missing"}[damage]
    line = f"cache entry {elf.parent} was damaged ({why}): removed and rebuilt"
    second.stdout.fnmatch_lines(["rvtune: 1 damaged cache entry found and replaced *", f"  {line}"])
    assert records[0]["cache_repairs"] == [line]
    third, records = _run(project)  # repaired for good: nothing more to say
    third.assert_outcomes(passed=1)
    assert "was damaged" not in third.stdout.str() and "cache_repairs" not in records[0]


def test_a_truncated_kernel_object_is_rebuilt_before_it_is_linked(project: pytest.Pytester,
                                                                  add_kernel: Callable[..., Path],
                                                                  rvtune_cache_dir: Path) -> None:
    add_kernel("fci_object", configs=(16,))
    first, before = _run(project)
    first.assert_outcomes(passed=1)
    (obj,) = (rvtune_cache_dir / "compile" / "kernel").rglob("fci_object_kernel.o")  # the one linked
    obj.write_bytes(obj.read_bytes()[:200])
    second, after = _run(project)
    second.assert_outcomes(passed=1)  # before: a link error in this and every later build that used it
    assert after[0]["elf_sha256"] == before[0]["elf_sha256"]
    second.stdout.fnmatch_lines([f"  cache entry {obj.parent} was damaged (fci_object_kernel.o has 200 bytes, *"])


def test_a_data_image_with_one_value_changed_is_made_again(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                                           rvtune_cache_dir: Path) -> None:
    add_kernel("fci_image", configs=(16,))
    first, records = _run(project)
    first.assert_outcomes(passed=1)
    rerun = records[0]["rerun"]
    txt = rerun["argv"][rerun["files"][-1]]  # the expected y (inputs come first)
    (expected,) = [p for p in (rvtune_cache_dir / "data-image").rglob("image.bin")
                   if txt.encode() in p.read_bytes()[:512]]
    data = bytearray(expected.read_bytes())
    data[-8:] = struct.pack("<d", 12345.0)  # the last expected value
    expected.write_bytes(bytes(data))
    second, _ = _run(project)
    second.assert_outcomes(passed=1)  # before: "wrong answer" for a right kernel, on every run
    second.stdout.fnmatch_lines([f"  cache entry {expected.parent} was damaged (image.bin has changed since it was "
                                 "built (sha256 differs)): removed and rebuilt"])


@pytest.mark.parametrize("damage", ["a list", "a bogus field", "a changed count", "torn"])
def test_a_damaged_count_record_is_measured_again_naming_its_file(project: pytest.Pytester,
                                                                   add_kernel: Callable[..., Path],
                                                                   rvtune_cache_dir: Path, damage: str) -> None:
    name = "fci_counts_" + damage.split()[-1]
    add_kernel(name, configs=(16,))
    first, before = _run(project)
    first.assert_outcomes(passed=1)
    (record,) = [p for p in (rvtune_cache_dir / "counts").rglob("*.json") if f"{name} [" in p.read_text()]
    data = json.loads(record.read_text())
    if damage == "a list":
        record.write_text("[]")
        why = "a JSON list, not a record"
    elif damage == "a bogus field":
        data["result"]["bogus"] = 1
        record.write_text(json.dumps(data))
        why = "its result does not match the sha256 stored with it"
    elif damage == "a changed count":  # a hand edit: the count would rank the config wrongly for good
        data["result"]["counters"]["launch_insns"] = 1.0
        record.write_text(json.dumps(data))
        why = "its result does not match the sha256 stored with it"
    else:
        record.write_text(record.read_text()[:100])
        why = "unreadable (JSONDecodeError: *"
    second, after = _run(project)
    second.assert_outcomes(passed=1)  # before: bare "'list' object has no attribute 'get'" errors on every run
    assert after[0]["counts_cached"] is False
    assert after[0]["counters"]["launch_insns"] == before[0]["counters"]["launch_insns"]
    second.stdout.fnmatch_lines([f"  count cache record {record} was damaged ({why}): removed and measured again"])
    third, again = _run(project)
    assert again[0]["counts_cached"] is True and "was damaged" not in third.stdout.str()


def test_cache_verify_finds_removes_and_counts_damage_and_stale_temp_dirs(tmp_path: Path) -> None:
    from pytest_rvtune.compiler.cache import BuildCache, cache_key

    cache = BuildCache(tmp_path / "cache")
    keys = [cache_key(n=n) for n in range(3)]
    for key in keys:
        cache.get_or_build("elf", key, lambda tmp, key=key: (tmp / "k.elf").write_text(f"ELF {key}"))
    (cache.entry("elf", keys[0]) / "k.elf").write_text(f"ELF {'0' * 64}")  # same size, other bytes
    stale = cache.entry("elf", keys[1]).parent / f".{keys[1]}.tmp-abc123"  # a build killed with -9
    stale.mkdir()
    (stale / "half.o").write_text("x")
    env = {**os.environ, "RVTUNE_CACHE_DIR": str(tmp_path / "cache")}
    verify = subprocess.run([sys.executable, "-m", "pytest_rvtune.cli", "cache", "verify"], env=env,
                            capture_output=True, text=True, check=False)
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert (f"damaged: {cache.entry('elf', keys[0])}: k.elf has changed since it was built (sha256 differs): "
            "removed (made again at its next use)") in verify.stdout
    assert f"stale: {stale}: left by a killed build: removed" in verify.stdout
    assert ("3 build entries checked: 2 intact, 1 damaged (removed); 0 count records checked: 0 damaged (removed); "
            "1 stale temporary directory removed") in verify.stdout
    assert not cache.entry("elf", keys[0]).exists() and not stale.exists()
    assert cache.entry("elf", keys[2]).is_dir()
    again = subprocess.run([sys.executable, "-m", "pytest_rvtune.cli", "cache", "verify"], env=env,
                           capture_output=True, text=True, check=False)
    assert again.returncode == 0 and "2 build entries checked: 2 intact" in again.stdout


def test_an_intact_entry_or_record_under_another_key_is_not_served(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry copied or renamed within the cache (a sync tool, a hand 'fix') is whole and matches its manifest,
    but holds another build's output: it is made again, not served."""
    import shutil

    from pytest_rvtune import repairs
    from pytest_rvtune.compiler.cache import BuildCache, cache_key
    from pytest_rvtune.counters import REQUIRED_ICOUNT_KEYS
    from pytest_rvtune.targets.base import RunResult
    from pytest_rvtune.targets.count_cache import measure_once

    cache = BuildCache(tmp_path / "cache")
    first, other = cache_key(n=1), cache_key(n=2)
    cache.get_or_build("elf", first, lambda tmp: (tmp / "k.elf").write_text("ELF of 1"))
    cache.entry("elf", other).parent.mkdir(parents=True)
    shutil.copytree(cache.entry("elf", first), cache.entry("elf", other))
    entry, hit = cache.get_or_build("elf", other, lambda tmp: (tmp / "k.elf").write_text("ELF of 2"))
    assert not hit and (entry / "k.elf").read_text() == "ELF of 2"
    assert repairs.drain() == [f"cache entry {entry} was damaged (it holds the entry made for key {first[:16]}..., "
                               "not for its own name): removed and rebuilt"]

    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(tmp_path / "cache"))
    measure_once("a" * 64, lambda: RunResult(0, [1], counters=dict.fromkeys(REQUIRED_ICOUNT_KEYS, 1.0)))
    counts = tmp_path / "cache" / "counts"
    shutil.copy(counts / "aa" / f"{'a' * 64}.json", (counts / "bb").mkdir() or counts / "bb" / f"{'b' * 64}.json")
    result, hit = measure_once("b" * 64, lambda: RunResult(0, [2], counters=dict.fromkeys(REQUIRED_ICOUNT_KEYS, 2.0)))
    assert not hit and result.samples_ns == [2]
    assert "it is the record of key aaaaaaaaaaaaaaaa..., not of its own name" in repairs.drain()[0]


def test_a_file_where_an_entry_goes_is_replaced_by_the_entry(tmp_path: Path) -> None:
    """Before: every build of that key failed with "Not a directory" (the rename onto the file), run after run."""
    from pytest_rvtune import repairs
    from pytest_rvtune.compiler.cache import BuildCache, cache_key

    cache = BuildCache(tmp_path)
    key = cache_key(n="file")
    cache.entry("elf", key).parent.mkdir(parents=True)
    cache.entry("elf", key).write_text("not an entry")
    entry, hit = cache.get_or_build("elf", key, lambda tmp: (tmp / "k.elf").write_text("ELF"))
    assert not hit and (entry / "k.elf").read_text() == "ELF"
    assert repairs.drain() == [f"cache entry {entry} was damaged (a file, not an entry directory): removed and "
                               "rebuilt"]


def test_a_build_removes_the_temp_dirs_a_killed_build_of_its_key_left(tmp_path: Path) -> None:
    from pytest_rvtune.compiler.cache import BuildCache, cache_key

    cache = BuildCache(tmp_path)
    key = cache_key(n=1)
    parent = cache.entry("obj", key).parent
    parent.mkdir(parents=True)
    (parent / f".{key}.tmp-dead").mkdir()
    _, hit = cache.get_or_build("obj", key, lambda tmp: (tmp / "o").write_text("o"))
    assert not hit and sorted(p.name for p in parent.iterdir()) == [key]


def test_doctor_reports_a_damaged_cache_entry_and_the_fix(tmp_path: Path) -> None:
    """Before, `rvtune doctor` said "everything is in place" with a truncated ELF in the cache."""
    from pytest_rvtune.compiler.cache import BuildCache, cache_key

    cache = BuildCache(tmp_path / "cache")
    key = cache_key(n="doctor")
    cache.get_or_build("elf", key, lambda tmp: (tmp / "k.elf").write_text("ELF whole"))
    (cache.entry("elf", key) / "k.elf").write_text("ELF")
    env = {**os.environ, "RVTUNE_CACHE_DIR": str(tmp_path / "cache")}
    doctor = subprocess.run([sys.executable, "-m", "pytest_rvtune.cli", "doctor", "--rootdir", str(tmp_path)],
                            env=env, capture_output=True, text=True, check=False, cwd=Path(__file__).parents[2])
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    row = next(line for line in doctor.stdout.splitlines() if line.startswith("cache "))
    assert row.split()[1] == "FAILED" and row.endswith(f" count records intact, 1 damaged (first: "
                                                       f"{cache.entry('elf', key)})"), doctor.stdout
    assert ("cache: run `rvtune cache verify` (removes them; they are made again at their next use)"
            in doctor.stdout)
