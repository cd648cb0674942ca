"""Fixtures of the results tests (report, compare, export, plots): a tuning run with real samples."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from results_data import SIZE, SPACE, exact_counts, make_record, measure, write_jsonl


@pytest.fixture(scope="session")
def measured_space() -> dict[tuple[int, int], list[float]]:
    """Real samples for each (BLOCK_SIZE_M, BLOCK_SIZE_N) of SPACE, measured once per session."""
    pairs = sorted({(bm, bn) for bm, bn, _ in SPACE})
    return dict(zip(pairs, measure(pairs, rounds=12), strict=True))


@pytest.fixture
def tuning_run(tmp_path: Path, measured_space: dict[tuple[int, int], list[float]]) -> Callable[..., Path]:
    """A results file of a full tuning run: every config of SPACE, cases M32 and M256, on ``target``."""

    def make(target: str = "host", name: str = "run.jsonl", fail: tuple[int, int, int] | None = (48, 96, 8)) -> Path:
        records = []
        for case, m in (("M32", 32), ("M256", 256)):
            for bm, bn, g in SPACE:
                config = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "GROUP_SIZE_M": g}
                # GROUP_SIZE_M changes the walk order only: the same work, a slightly shifted time
                samples = [s * (m / SIZE) * (1.0 + 0.01 * (g == 8)) for s in measured_space[(bm, bn)]]
                outcome = "wrong" if (bm, bn, g) == fail else "passed"
                counters = exact_counts(bm, bn, m) if target == "qemu" else {}
                if target == "qemu":
                    counters["kernel_insns"] += g  # exact counts differ by config, as real ones do
                records.append(make_record("matmul", case, config, samples, target=target, outcome=outcome,
                                           counters=counters, case_params={"M": m}))
        return write_jsonl(tmp_path / name, records)

    return make
