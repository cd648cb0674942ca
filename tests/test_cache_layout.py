"""cache_layout.walk: the one classification of a cache's paths that `rvtune cache info|prune|verify` and doctor
share (they disagreed before: 8+ hex names were entries for the size cap, 64 hex ones for verify)."""

from __future__ import annotations

from pathlib import Path

from pytest_rvtune.cache_check import check_cache
from pytest_rvtune.cache_layout import walk
from pytest_rvtune.cache_limit import usage
from pytest_rvtune.compiler.cache import cache_key


def test_entries_records_temps_and_other_files(tmp_path: Path) -> None:
    key, record = cache_key(name="entry"), cache_key(name="record")
    entry = tmp_path / "elf" / key[:2] / key
    (entry / "sub").mkdir(parents=True)
    (entry / "sub" / "k.elf").write_bytes(b"\0" * 100)  # inside an entry: part of it, not a path of its own
    (tmp_path / "counts" / record[:2]).mkdir(parents=True)
    (tmp_path / "counts" / record[:2] / f"{record}.json").write_text("{}")
    temp = tmp_path / "elf" / key[:2] / f".{key}.tmp-x1"
    temp.mkdir()
    (temp / "half.o").write_bytes(b"\0" * 7)
    short = tmp_path / "elf" / "ab" / "abcdef0123"  # not a sha256: not an entry, its file is "other"
    short.mkdir(parents=True)
    (short / "f").write_bytes(b"\0" * 3)
    (tmp_path / "golden" / "k").mkdir(parents=True)
    (tmp_path / "golden" / "k" / "x.txt").write_text("1\n")

    kinds = {p.path.relative_to(tmp_path).as_posix(): p.kind for p in walk(tmp_path)}
    assert kinds == {f"elf/{key[:2]}/{key}": "entry", f"counts/{record[:2]}/{record}.json": "record",
                     f"elf/{key[:2]}/.{key}.tmp-x1": "temp", "elf/ab/abcdef0123/f": "other",
                     "golden/k/x.txt": "other"}
    found = usage(tmp_path)
    assert sorted(e.path.name for e in found.entries) == sorted([key, f"{record}.json"])
    assert found.entry_bytes == 100 + 2 and found.other_bytes == 7 + 3 + 2
    checked = check_cache(tmp_path)
    assert checked.older == [entry] and checked.damaged == []  # no manifest: an older version's entry
    assert checked.stale == [temp]  # no build holds its key's lock
