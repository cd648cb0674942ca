"""compare on REAL host A/A rounds: why one session is not enough, and what 3 pooled rounds give.

data/host_rounds_{a,b}.jsonl: ``pytest kernels/matmul.py --rvtune-case emu --rvtune-target host`` run six times
on the team's VM, alternating A, B, A, B, A, B, each set into its own results file, so every item's last line
pools 3 rounds (rounds.py) with --rvtune-max-time 0.5 samples; the 30 items kept are BLOCK_SIZE_M=128 and
BLOCK_SIZE_M=32/BLOCK_SIZE_N=128. The same ELFs in every session: any change is drift.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_rvtune.cli import main
from pytest_rvtune.results.rounds import pool

DATA = Path(__file__).parent / "data"
A, B = DATA / "host_rounds_a.jsonl", DATA / "host_rounds_b.jsonl"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _round(record: dict, index: int) -> dict:
    """One round of a pooled record, as the session that measured it wrote it."""
    sizes = record["round_samples"]
    start = sum(sizes[:index])
    return record | {"samples_ns": record["samples_ns"][start:start + sizes[index]], "rounds": 1,
                     "round_samples": [sizes[index]]}


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _min_changes(a: list[dict], b: list[dict]) -> np.ndarray:
    by_id = {r["config_id"]: r for r in b}
    return np.array([min(by_id[r["config_id"]]["samples_ns"]) / min(r["samples_ns"]) - 1 for r in a]) * 100


def test_the_data_is_three_pooled_rounds_of_the_same_elfs() -> None:
    a, b = _records(A), {r["config_id"]: r for r in _records(B)}
    assert len(a) == len(b) == 30
    for ra in a:
        rb = b[ra["config_id"]]
        assert ra["elf_sha256"] == rb["elf_sha256"]
        assert ra["rounds"] == rb["rounds"] == 3 and len(ra["samples_ns"]) == sum(ra["round_samples"])
        # pooling the rounds again gives the record back (what the plugin wrote, round by round)
        rebuilt = None
        for index in range(3):
            rebuilt = pool(_round(ra, index), rebuilt)
        assert rebuilt["samples_ns"] == ra["samples_ns"] and rebuilt["round_samples"] == ra["round_samples"]


def test_one_session_drifts_and_three_pooled_rounds_do_not(tmp_path: Path, capsys) -> None:
    a, b = _records(A), _records(B)
    single_a, single_b = [_round(r, 0) for r in a], [_round(r, 0) for r in b]
    single = np.abs(_min_changes(single_a, single_b))
    pooled = np.abs(_min_changes(a, b))
    assert np.percentile(pooled, 90) < np.percentile(single, 90) / 2
    # one session each: drift passes for regressions at 7 %, and compare says why it may
    sa, sb = _write(tmp_path / "sa.jsonl", single_a), _write(tmp_path / "sb.jsonl", single_b)
    assert main(["compare", str(sa), str(sb), "--threshold", "7"]) == 1
    assert "fewer than 3 rounds" in capsys.readouterr().err
    # three pooled rounds each: nothing flagged at 7 %, and no warning
    assert main(["compare", str(A), str(B), "--threshold", "7"]) == 0
    err = capsys.readouterr().err
    assert "REGRESSION" not in err and "fewer than 3 rounds" not in err


def test_injected_ten_percent_slowdown_on_pooled_rounds_is_flagged(tmp_path: Path, capsys) -> None:
    slow = _write(tmp_path / "slow.jsonl", [r | {"samples_ns": [s * 1.10 for s in r["samples_ns"]]}
                                            for r in _records(B)])
    assert main(["compare", str(A), str(slow), "--threshold", "7"]) == 1
    flagged = capsys.readouterr().err.count("REGRESSION")
    # every item whose A/A drift did not eat 3 points of the 10 % is flagged
    expected = int((_min_changes(_records(A), _records(B)) > -3.0).sum())
    assert flagged >= expected >= 27


@pytest.mark.parametrize("statistic", ["min", "median"])
def test_statistic_option_names_what_is_gated(statistic: str, capsys) -> None:
    assert main(["compare", str(A), str(B), "--statistic", statistic, "--threshold", "50", "--all"]) == 0
    assert f"{statistic} of n=" in capsys.readouterr().out  # unchanged rows: shown with --all
