"""confirm.py's refusals: a regression that cannot be re-run as it ran keeps its verdict, and the reason names
what is missing. The re-runs themselves are exercised on real host builds in tests/plugin/test_plugin_rounds.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_rvtune.hashing import sha256_file
from pytest_rvtune.item import rerun_field
from pytest_rvtune.results.compare import Thresholds
from pytest_rvtune.results.confirm import CannotConfirm, Rerun, confirm
from pytest_rvtune.results.records import record_from_dict
from pytest_rvtune.run_options import RunOptions
from pytest_rvtune.targets.local import HostTarget, QemuTarget


def _record(tmp_path: Path, machine: dict[str, Any], **fields: Any) -> Any:
    elf = tmp_path / "kernel.elf"
    if not elf.exists():
        elf.write_bytes(b"\x7fELF not really")
    data = tmp_path / "x.txt"
    data.write_text("1 2 3\n")
    obj = {"kernel": "k", "case": "small", "config": {"BLOCK": 16}, "config_id": "BLOCK=16", "target": "host",
           "outcome": "passed", "samples_ns": [100.0] * 10, "timing_source": "real", "machine": machine,
           "elf_sha256": sha256_file(elf), "golden_sha256": "g" * 64,
           "rerun": rerun_field(elf, ["--n", "3", data], "k_kernel")}
    return record_from_dict(obj | fields)


def _refusal(base: Any, new: Any, target: Any) -> str:
    with pytest.raises(CannotConfirm) as info:
        confirm(base, new, target, RunOptions(), Thresholds(), trials=10)
    return str(info.value)


def test_rerun_reads_back_what_the_runner_recorded(tmp_path: Path) -> None:
    record = _record(tmp_path, {})
    rerun = Rerun.of(record, "base")
    assert rerun.elf == tmp_path / "kernel.elf" and rerun.kernel_symbol == "k_kernel"
    assert rerun.argv == ["--n", "3", tmp_path / "x.txt"]  # the file is a Path again: a board gets it uploaded


def test_confirm_refuses_what_it_cannot_rerun_as_it_ran(tmp_path: Path) -> None:
    host = HostTarget(perf_events=())
    here = host.identity()
    base, new = _record(tmp_path, here), _record(tmp_path, here)
    elsewhere = _record(tmp_path, here | {"board": "another-vm"})
    assert "the base run was measured on another machine than target host" in _refusal(elsewhere, new, host)
    assert "the new run was measured on another machine" in _refusal(base, elsewhere, host)
    changed_data = _record(tmp_path, here, golden_sha256="h" * 64)
    assert "the golden data changed between the runs" in _refusal(changed_data, new, host)
    assert "the runs used 2 and 1 launcher threads" in _refusal(_record(tmp_path, here, threads=2), new, host)
    assert "target qemu is emulated" in _refusal(base, new, QemuTarget(counters=False))

    no_rerun = record_from_dict(dict(base.raw) | {"rerun": None})
    assert "the base run does not say how to re-run its ELF" in _refusal(no_rerun, new, host)
    (tmp_path / "x.txt").unlink()
    assert f"the base run's {tmp_path / 'x.txt'} is gone from this machine" in _refusal(base, new, host)
    (tmp_path / "x.txt").write_text("1 2 3\n")
    (tmp_path / "kernel.elf").write_bytes(b"\x7fELF rebuilt since")
    assert f"the base run's ELF {tmp_path / 'kernel.elf'} has changed since it ran" in _refusal(base, new, host)


def test_too_few_trials_is_refused_up_front() -> None:
    """At alpha 0.01 the one-sided sign test needs 7 pairs to say anything: fewer would pass every item."""
    from pytest_rvtune.results.confirm import check_trials, paired_p
    assert paired_p([1.1] * 7) < 0.01 <= paired_p([1.1] * 6)
    check_trials(7, 0.01)
    with pytest.raises(ValueError, match=r"6 interleaved trials can never confirm a regression at alpha 0\.01"):
        check_trials(6, 0.01)
    assert paired_p([1.0] * 10) == 1.0  # a quantised clock: every pair equal is no evidence of a slow-down
    assert paired_p([1.0] * 5 + [1.1] * 7) < 0.01  # ties say nothing either way: dropped
    # two pairs split by a change of spell (ratios far below 1) do not outweigh thirteen consistent ones
    assert paired_p([1.12] * 13 + [0.83, 0.8]) < 0.01
