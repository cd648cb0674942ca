"""NaN or infinity among an item's time samples or counters (issue 28): every comparison with NaN is false, so a NaN
median ranked first and a NaN count passed every gate. Reading a results file, such a record is named (file:line,
kernel, case, config, target, what is not finite) and read as an error: not ranked, not compared as a measurement.
Writing, the item is an error naming the item and the number, and the record keeps only the finite numbers (JSON has
no NaN). A counter of a board's PMU that reads NaN cannot be produced here (no board): the test builds the
RunResult a board target would return, and says so.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from pytest_rvtune.cli import main
from pytest_rvtune.harness.check import Check
from pytest_rvtune.harness.output import parse_harness_output
from pytest_rvtune.results.runs import RunFileWarning, load_run
from pytest_rvtune.targets.base import RunResult
from pytest_rvtune.verdict import judge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "results"))
from results_data import make_record


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))  # json writes NaN / Infinity tokens
    return path


def _records(nan_at: int | None = None, inf_counter_at: int | None = None) -> list[dict]:
    """Six configs of one group, the smaller BLOCK_SIZE_M the faster; item ``nan_at`` with a NaN sample and a NaN
    x60_cycles, item ``inf_counter_at`` with an infinite launch_insns."""
    records = []
    for n in range(6):
        records.append(make_record("matmul", "emu", {"BLOCK_SIZE_M": 16 * (n + 1)},
                                   [1000.0 + 100 * n + s for s in range(5)], target="qemu",
                                   counters={"x60_cycles": 5000.0 + 100 * n, "launch_insns": 9000.0 + n}))
    if nan_at is not None:
        records[nan_at]["samples_ns"][2] = math.nan
        records[nan_at]["counters"]["x60_cycles"] = math.nan
    if inf_counter_at is not None:
        records[inf_counter_at]["counters"]["launch_insns"] = math.inf
    return records


def test_reading_a_nan_record_names_it_and_never_ranks_it(tmp_path: Path, capsys) -> None:
    run = _write(tmp_path / "run.jsonl", _records(nan_at=0, inf_counter_at=3))
    with pytest.warns(RunFileWarning) as caught:
        loaded = load_run(run)
    said = [str(w.message) for w in caught]
    assert any(f"{run}:1: matmul[emu-BLOCK_SIZE_M=16] on qemu: 1 of 5 samples_ns is nan; counter x60_cycles is "
               "nan: read as an error" in s for s in said), said
    assert any(f"{run}:4: matmul[emu-BLOCK_SIZE_M=64] on qemu: counter launch_insns is inf" in s for s in said)
    record = loaded.records[0]
    assert record.outcome == "error" and "nan" in record.message and not record.valid
    assert all(math.isfinite(s) for s in record.samples_ns) and "x60_cycles" not in record.counters
    # the NaN config had the smallest numbers; it is listed as failing, the next one wins
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep")]) == 0
    out, err = capsys.readouterr()
    assert f"{run}:1: matmul[emu-BLOCK_SIZE_M=16] on qemu" in err
    best = out.split("Best config per case")[1]
    ranking = out.split("Best config per case")[0]
    assert "emu     BLOCK_SIZE_M=32" in best and "1       BLOCK_SIZE_M=32" in ranking
    assert "BLOCK_SIZE_M=16 " not in ranking and "BLOCK_SIZE_M=64 " not in ranking
    assert main(["export-best", str(run), "--out", str(tmp_path / "tuned")]) == 0
    doc = json.loads((tmp_path / "tuned" / "qemu" / "matmul.json").read_text())
    assert doc["default"]["config_id"] == "BLOCK_SIZE_M=32"


def test_compare_reads_a_nan_record_as_broken_not_as_a_change(tmp_path: Path, capsys) -> None:
    base = _write(tmp_path / "base.jsonl", _records())
    new = _write(tmp_path / "new.jsonl", _records(nan_at=2))
    assert main(["compare", str(base), str(new)]) == 1
    err = capsys.readouterr().err
    assert f"{new}:3: matmul[emu-BLOCK_SIZE_M=48] on qemu: 1 of 5 samples_ns is nan" in err
    assert "REGRESSION matmul[emu-BLOCK_SIZE_M=48] on qemu: passed in base, now error" in err
    assert "1 broken" in err.splitlines()[-1]


def test_a_target_reporting_nan_or_inf_makes_the_item_an_error_naming_it() -> None:
    what = "matmul[emu-BLOCK_SIZE_M=16] on k1"
    ok = [Check("c", True, 0.0, 0.0, -1, 0)]
    # a board's PMU counter read as NaN (no board here: the RunResult its target would return)
    verdict = judge(RunResult(0, samples_ns=[1000, 1100], checks=ok, counters={"l1d_miss": math.nan}),
                    what=what, timeout=10)
    assert verdict.outcome == "error"
    assert verdict.message.startswith(f"{what}: the target reported counter l1d_miss is nan: not a measurement")
    # the harness printing an infinite sample: an error line of the harness (it raised OverflowError before)
    out = parse_harness_output("RVTUNE sample inf\nRVTUNE sample 1200\n")
    assert out.samples_ns == [1200] and "sample 'inf' is not a non-negative finite time" in out.errors[0]
    verdict = judge(RunResult(0, samples_ns=out.samples_ns, checks=ok, errors=out.errors), what=what, timeout=10)
    assert verdict.outcome == "error" and "inf" in verdict.message
