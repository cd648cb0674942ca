"""count_cache.py: a clean emulated run is measured once; anything else is measured again; keys change with
every input that decides a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rvtune.targets.base import Check, RunResult
from pytest_rvtune.targets.count_cache import count_key, fingerprint_of, measure_once

COUNTS = {"insns": 100.0, "vector_insns": 10.0, "kernel_insns": 50.0, "launches": 3.0, "launch_insns": 90.0}


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _runner(result: RunResult) -> tuple[list[int], object]:
    calls: list[int] = []

    def run() -> RunResult:
        calls.append(1)
        return result

    return calls, run


def test_a_clean_run_is_measured_once_and_comes_back_whole() -> None:
    clean = RunResult(returncode=0, samples_ns=[5, 6], checks=[Check("y", True, 0.0, 0.0, -1, 0)],
                      counters=dict(COUNTS), launches=3, stdout="RVTUNE ...\n")
    calls, run = _runner(clean)
    first, hit = measure_once("k" * 64, run)
    assert (first, hit, len(calls)) == (clean, False, 1)
    again, hit = measure_once("k" * 64, run)
    assert hit and len(calls) == 1
    assert again == clean  # samples, checks (as Check objects), counters, output


@pytest.mark.parametrize("bad", [
    RunResult(returncode=-11, counters=dict(COUNTS), signal=11),  # crashed
    RunResult(returncode=None, timed_out=True),  # killed at its timeout
    RunResult(returncode=0, counters={"insns": 1.0}),  # the plugin's output is incomplete
    RunResult(returncode=0, counters=dict(COUNTS), errors=["cannot open x.txt"]),
])
def test_a_run_that_is_not_clean_is_measured_again(bad: RunResult) -> None:
    calls, run = _runner(bad)
    measure_once("b" * 64, run)
    _, hit = measure_once("b" * 64, run)
    assert not hit and len(calls) == 2


def test_every_input_changes_the_key(tmp_path: Path) -> None:
    data = tmp_path / "x.txt"
    data.write_text("1 2\n")
    base = dict(elf_sha256="e", data_sha256="d", fingerprint={"qemu": "7.2", "plugin": "p"},
                argv=["--runs", "2", data], kernel_symbol="k")
    key = count_key(**base)
    moved = tmp_path / "y.txt"
    moved.write_text("1 2\n")
    assert count_key(**(base | {"argv": ["--runs", "2", moved]})) == key  # files count by content, not path
    changed = tmp_path / "z.txt"
    changed.write_text("1 3\n")
    others = [base | {"argv": ["--runs", "2", changed]}, base | {"elf_sha256": "f"}, base | {"data_sha256": "c"},
              base | {"fingerprint": {"qemu": "8.0", "plugin": "p"}}, base | {"fingerprint": {"qemu": "7.2",
              "plugin": "q"}}, base | {"argv": ["--runs", "3", data]}, base | {"kernel_symbol": "j"}]
    assert len({count_key(**o) for o in others} | {key}) == len(others) + 1


def test_only_emulated_targets_with_a_fingerprint_are_cached() -> None:
    class Emulated:
        timing_source = "emulated"

        def count_fingerprint(self) -> dict[str, str]:
            return {"qemu": "7.2"}

    class Real(Emulated):
        timing_source = "real"

    class EmulatedBoard:  # a board under an exec prefix: nothing says what decides its results
        timing_source = "emulated"

    assert fingerprint_of(Emulated()) == {"qemu": "7.2"}
    assert fingerprint_of(Real()) is None and fingerprint_of(EmulatedBoard()) is None
