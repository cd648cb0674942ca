"""Issue 15: a full disk while golden data is generated or a build writes its cache entry.

Before, the user read `[Errno 28] No space left on device` with no path (write() errors name no file) and a
failed golden write left its `.matrix_*.txt.<pid>.tmp` behind on the full disk. Now the message names the file
or the cache entry and what to do, and nothing temporary is left. The disk is a real 8 MiB tmpfs (root only),
so the kernel itself says ENOSPC.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rvtune import build
from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.golden import GoldenError, Store, cache_golden_dir, golden_set
from pytest_rvtune.spec import load_kernel_module
from pytest_rvtune.toolchain import RISCV_ISA

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs, filled to the last block by ``filler`` (delete it to make room)."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {done.stderr.strip()}")
    try:
        fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"x" * 65536)
        except OSError as exc:
            assert exc.errno == 28, exc
        finally:
            os.close(fd)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".tmp" in p.name]


def test_golden_generation_on_a_full_disk_names_the_file_and_leaves_no_temporary(
        full_disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(full_disk / "cache"))
    spec = load_kernel_module(KERNELS / "softmax.py")
    store = Store(root=full_disk / "golden", cache=cache_golden_dir())
    with pytest.raises(GoldenError) as full:
        golden_set(spec, "emu", spec.configs[0], store)
    message = str(full.value)
    first = full_disk / "cache" / "golden" / "softmax" / "emu" / "matrix_256x512_1.txt"
    assert message.startswith(f"cannot write golden file {first}: No space left on device; make room there")
    assert "Errno" not in message and "RVTUNE_CACHE_DIR" in message
    assert _leftovers(full_disk) == []
    (full_disk / "filler").unlink()  # room again: the same call works, from a clean directory
    assert all(f.path.is_file() for f in golden_set(spec, "emu", spec.configs[0], store).files)


def test_a_build_cache_entry_on_a_full_disk_names_the_entry_and_leaves_nothing(full_disk: Path) -> None:
    cache = BuildCache(full_disk / "cache")
    key = cache_key(what="big")

    def build_big(tmp: Path) -> None:
        (tmp / "obj.o").write_bytes(b"\0" * (1 << 20))  # a write() error: the OSError has no file name

    with pytest.raises(OSError) as full:
        cache.get_or_build("obj", key, build_big)
    assert full.value.errno == 28
    assert str(full.value) == (f"[Errno 28] No space left on device (writing build cache entry "
                               f"{cache.entry('obj', key)}; make room or set RVTUNE_CACHE_DIR to another disk)")
    assert _leftovers(full_disk) == [] and not cache.entry("obj", key).exists()


def test_a_real_build_on_a_full_disk_names_the_cache_entry(full_disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(full_disk / "cache"))
    spec = load_kernel_module(KERNELS / "softmax.py")
    with pytest.raises(build.BuildError) as full:
        build.build_item(spec, "small", spec.configs[0], RISCV_ISA)
    message = str(full.value)
    assert message.startswith("kernel softmax [case small, config ") and f"ISA {RISCV_ISA}]" in message
    assert "No space left on device (writing build cache entry " + str(full_disk / "cache") in message
    assert _leftovers(full_disk) == []


def test_a_link_on_a_full_disk_says_the_disk_is_full_not_only_that_lld_crashed(full_disk: Path, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """lld writes its output through a memory map: on a full tmpfs it dies of SIGBUS ("PLEASE submit a bug report",
    issue 28) with no word of space. The objects are built on a roomy disk; only the link writes to the full one."""
    from pytest_rvtune.toolchain import Toolchain
    source = tmp_path / "tiny.c"
    source.write_text("int main(void) { return 0; }\n")
    tc = Toolchain.for_isa(RISCV_ISA)
    tc.compile(source, tmp_path / "tiny.o")
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(full_disk / "cache"))
    with pytest.raises(OSError) as full:
        build.link_elf(tc, [tmp_path / "tiny.o"], "tiny", cxx=False)
    message = str(full.value)
    assert full.value.errno == 28 and message.startswith("[Errno 28] No space left on device: ")
    assert f"KiB free on the disk of build cache entry {full_disk / 'cache' / 'elf'}" in message
    assert message.endswith("a full disk makes clang and lld fail or crash; make room or set RVTUNE_CACHE_DIR to "
                            "another disk")
    assert _leftovers(full_disk) == []
