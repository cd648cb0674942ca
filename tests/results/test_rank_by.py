"""--rank-by METRIC: report, export-best and compare rank (or gate) by any recorded metric, and the session-end
ranking too; an unknown metric is an error that lists the metrics present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from results_data import make_record, write_jsonl

from pytest_rvtune.cli import main
from pytest_rvtune.results.summary import ranking_lines

# Two configs whose instruction count and estimated cycles disagree: BLOCK=16 runs fewer instructions, BLOCK=64
# fewer (estimated) cycles.
COUNTS = {16: {"launch_insns": 1000.0, "kernel_insns": 900.0, "est_cycles": 5000.0, "l1d_misses": 10.0},
          64: {"launch_insns": 1500.0, "kernel_insns": 1400.0, "est_cycles": 3000.0, "l1d_misses": 40.0}}


def _records(est_scale: float = 1.0) -> list[dict]:
    return [make_record("k", case, {"BLOCK": b}, [1000, 1100], target="qemu",
                        counters={**c, "est_cycles": c["est_cycles"] * est_scale})
            for case in ("emu", "bench") for b, c in COUNTS.items()]


def _first_config(report_json: str) -> set[str]:
    """The rank-1 config of every case in `rvtune report --format json` output."""
    doc = json.loads(report_json)
    return {rows[0]["config"] for rows in (case["configs"] for case in doc["cases"])}


def test_report_ranks_by_the_metric_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_jsonl(tmp_path / "r.jsonl", _records())
    assert main(["report", str(run), "--no-plots", "--format", "json", "--out", str(tmp_path / "a")]) == 0
    assert _first_config(capsys.readouterr().out) == {"BLOCK=16"}  # default: launch_insns
    assert main(["report", str(run), "--no-plots", "--format", "json", "--out", str(tmp_path / "b"),
                 "--rank-by", "est_cycles"]) == 0
    assert _first_config(capsys.readouterr().out) == {"BLOCK=64"}
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "c"), "--rank-by", "est_cycles"]) == 0
    assert "ranked by est_cycles (estimated cycles per launch" in capsys.readouterr().out


def test_export_best_picks_the_winner_by_the_metric(tmp_path: Path) -> None:
    run = write_jsonl(tmp_path / "r.jsonl", _records())
    for metric, winner in ((None, "BLOCK=16"), ("est_cycles", "BLOCK=64"), ("l1d_misses", "BLOCK=16")):
        out = tmp_path / f"out-{metric}"
        assert main(["export-best", str(run), "--out", str(out), *(["--rank-by", metric] if metric else [])]) == 0
        doc = json.loads((out / "qemu" / "k.json").read_text())
        assert doc["default"]["config_id"] == winner
        assert doc["ranked_by"] == [metric or "launch_insns"]


def test_compare_gates_the_ranking_metric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_jsonl(tmp_path / "base.jsonl", _records())
    new = write_jsonl(tmp_path / "new.jsonl", _records(est_scale=1.2))  # 20 % more cycles, same instructions
    assert main(["compare", str(base), str(new)]) == 0  # instruction counts gate by default: unchanged
    assert main(["compare", str(base), str(new), "--rank-by", "est_cycles"]) == 1
    assert "est_cycles" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["report", "export-best", "compare"])
def test_an_unknown_metric_is_an_error_listing_the_metrics_present(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    run = write_jsonl(tmp_path / "r.jsonl", _records())
    argv = {"report": ["report", str(run), "--no-plots", "--out", str(tmp_path / "o")],
            "export-best": ["export-best", str(run), "--out", str(tmp_path / "o")],
            "compare": ["compare", str(run), str(run)]}[command]
    assert main([*argv, "--rank-by", "est_cycle"]) == 2
    err = capsys.readouterr().err
    assert "--rank-by est_cycle" in err
    assert "metrics present: time, launch_insns, kernel_insns, est_cycles, l1d_misses" in err


def test_the_session_end_ranking_follows_rank_by() -> None:
    records = _records()
    assert "1. BLOCK=16" in ranking_lines(records)[1]
    lines = ranking_lines(records, rank_by="est_cycles")
    assert lines[0].startswith("rvtune ranking, by est_cycles")
    assert "1. BLOCK=64 3,000" in lines[1]
    unknown = ranking_lines(records, rank_by="cycles")
    assert unknown[0].startswith("rvtune ranking, by launch_insns (instructions per launch")
    assert "--rank-by cycles: no valid record" in unknown[-1] and "ranked by the default" in unknown[-1]


def test_a_group_without_the_metric_keeps_its_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = [make_record("k", "emu", {"BLOCK": b}, [s, s + 10] * 3, target="host") for b, s in ((16, 900), (64, 500))]
    run = write_jsonl(tmp_path / "r.jsonl", [*_records(), *host])
    assert main(["report", str(run), "--no-plots", "--format", "json", "--out", str(tmp_path / "o"),
                 "--rank-by", "est_cycles"]) == 0
    doc = json.loads(capsys.readouterr().out)
    metrics = {(c["target"], c["ranked_by"]) for c in doc["cases"]}
    assert ("qemu", "est_cycles") in metrics and ("host", "time") in metrics
