"""`rvtune report` reduces each record while reading and writes its tables one group at a time (issue 28: a results
file of 10^5 records took 3.8x its size in memory). Here: what it prints and writes is what the whole records give
(render_report on load_run without a reducer), every format, with and without --top; and it never holds the whole
records: a counter of RunRecords alive, bumped by the loader's record_from_dict, stays at a handful on a file of
hundreds (holding them, as before, counts every one). The memory itself: benchmarks/results_memory.py.
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_rvtune.cli import main
from pytest_rvtune.results import runs
from pytest_rvtune.results.correlation import correlation_rows, strong
from pytest_rvtune.results.records import RunRecord, summarise
from pytest_rvtune.results.report import build_case_reports, render_report

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "results"))
from results_data import make_record, write_jsonl

PER_GROUP = 60


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    records = []
    for kernel in ("matmul", "softmax"):
        for case in ("emu", "small"):
            for n in range(PER_GROUP):
                base = 1000.0 + (n * 7919) % 500
                failed = n % 10 == 9
                records.append(make_record(
                    kernel, case, {"BLOCK_SIZE_M": 16 * (1 + n % 4), "BLOCK_SIZE_N": n},
                    [] if failed else [base * (1 + 0.01 * s) for s in range(4)], target="qemu",
                    outcome="wrong" if failed else "passed",
                    counters={} if failed else {"x60_cycles": base * 3 + n % 7, "launch_insns": base * 5},
                    shortlisted_by={"run": "emu.jsonl", "case": "emu", "case_params": {"n": 75}, "metric": "x60_cycles",
                                    "kept": [1, 2], "of_configs": 9} if case == "small" else None))
    records.append({**records[5], "samples_ns": [7.0] * 4})  # item 5 re-recorded: the last one counts
    return write_jsonl(tmp_path_factory.mktemp("reduce") / "run.jsonl", records)


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_report_prints_and_writes_what_the_whole_records_give(run_file: Path, tmp_path: Path, capsys,
                                                              fmt: str) -> None:
    whole = runs.load_run(run_file, fields=runs.ANALYSIS_FIELDS)
    reports = build_case_reports(whole)
    correlations = strong(correlation_rows(whole.records))
    expected = render_report(whole, reports, fmt, correlations)
    ext = {"table": "txt", "markdown": "md"}.get(fmt, fmt)
    for top in (None, 3):
        argv = ["report", str(run_file), "--no-plots", "--out", str(tmp_path), "--format", fmt]
        assert main(argv + ([] if top is None else ["--top", str(top)])) == 0
        printed = capsys.readouterr().out
        assert (tmp_path / f"report.{ext}").read_text() == expected
        cut = [replace(r, rows=r.rows[:top]) for r in reports] if top else reports
        assert printed == render_report(whole, cut, fmt, correlations) + "\n"
    assert "ranked among 2 of 9 configs" in expected if fmt != "csv" else "matmul,emu" in expected


class AliveRecords:
    """How many whole RunRecords the loader made are alive, and the most at once (counted as they are made)."""

    def __init__(self) -> None:
        self.alive = self.most = 0

    def made(self, record: RunRecord) -> RunRecord:
        self.alive += 1
        weakref.finalize(record, self.gone)
        self.most = max(self.most, self.alive)
        return record

    def gone(self) -> None:
        self.alive -= 1


@pytest.fixture
def records_alive(monkeypatch: pytest.MonkeyPatch) -> AliveRecords:
    count, read = AliveRecords(), runs.record_from_dict
    monkeypatch.setattr(runs, "record_from_dict", lambda *args, **kwargs: count.made(read(*args, **kwargs)))
    return count


def test_report_never_holds_the_whole_records(run_file: Path, tmp_path: Path, records_alive: AliveRecords,
                                              capsys) -> None:
    assert main(["report", str(run_file), "--no-plots", "--out", str(tmp_path)]) == 0
    most = records_alive.most
    assert 0 < most <= 3, f"{most} whole records alive at once while reading {4 * PER_GROUP + 1} lines"
    assert "matmul / emu on qemu" in capsys.readouterr().out
    records_alive.alive = records_alive.most = 0
    held = runs.load_run(run_file)  # what a command holding the records does: the counter sees it
    assert records_alive.most >= len(held.records) == 4 * PER_GROUP


def test_a_summarised_record_refuses_to_be_read_for_samples(run_file: Path) -> None:
    record = runs.load_run(run_file, reduce=summarise).records[0]
    assert record.n_samples == 4 and record.median_ns is not None and record.iqr_ns is not None
    with pytest.raises(TypeError, match="reduced to their statistics"):
        len(record.samples_ns)


def _rewrite(path: Path, out: Path, slower: float, drop: int, extra: bool) -> Path:
    """``path``'s records with every sample and x60_cycles ``slower``, item ``drop`` left out (missing) and, with
    ``extra``, one item more (new)."""
    import json
    lines = path.read_text().splitlines()
    records = [json.loads(line) for n, line in enumerate(lines) if n != drop]
    for record in records:
        record["samples_ns"] = [s * slower for s in record["samples_ns"]]
        if "x60_cycles" in record["counters"]:
            record["counters"]["x60_cycles"] *= slower if record["config"]["BLOCK_SIZE_N"] % 3 else 1.0
    if extra:
        records.append({**records[0], "config_id": "BLOCK_SIZE_M=999", "config": {"BLOCK_SIZE_M": 999}})
    return write_jsonl(out, records)


@pytest.mark.parametrize("show", [[], ["--all", "--format", "csv"]])
def test_compare_prints_what_comparing_the_whole_runs_gives(run_file: Path, tmp_path: Path, capsys,
                                                            show: list[str]) -> None:
    from pytest_rvtune.results.compare import Thresholds, compare_runs, summary_line, verdict_rows
    from pytest_rvtune.results.report import render_rows
    base = _rewrite(run_file, tmp_path / "base.jsonl", 1.0, drop=17, extra=False)
    new = _rewrite(run_file, tmp_path / "new.jsonl", 1.1, drop=40, extra=True)
    verdicts = compare_runs(runs.load_run(base), runs.load_run(new), Thresholds())
    rows = verdict_rows(verdicts, bool(show), raw=bool(show))
    assert main(["compare", str(base), str(new), *show]) == 1
    out, err = capsys.readouterr()
    assert out == render_rows(rows, "csv" if show else "table") + "\n"
    warned = [w for v in verdicts for w in v.warnings]
    assert [line for line in err.splitlines() if line.startswith("warning: ")] == [f"warning: {w}" for w in warned]
    assert err.splitlines()[-1] == summary_line(verdicts, runs.load_run(base), str(base), len(warned))
    assert "2 new, 1 missing" in err and "regressed" in out


def test_compare_holds_the_base_run_only(run_file: Path, tmp_path: Path, records_alive: AliveRecords,
                                         capsys) -> None:
    new = _rewrite(run_file, tmp_path / "new.jsonl", 1.1, drop=40, extra=False)
    assert main(["compare", str(run_file), str(new)]) == 1
    held = 4 * PER_GROUP  # the base run's items
    most = records_alive.most
    assert held < most <= held + 3, f"{most} whole records alive at once; the base run has {held}"
    assert "regressed" in capsys.readouterr().out


def test_export_best_holds_records_without_the_fields_it_does_not_read(run_file: Path, tmp_path: Path,
                                                                       monkeypatch, capsys) -> None:
    from pytest_rvtune.cli import export_best
    seen: list[RunRecord] = []
    export = export_best.export_kernel

    def spy(records, *args, **kwargs):
        seen.extend(records)
        return export(records, *args, **kwargs)

    monkeypatch.setattr(export_best, "export_kernel", spy)
    assert main(["export-best", str(run_file), "--out", str(tmp_path)]) == 0
    assert len(seen) == 4 * PER_GROUP and {k for r in seen for k in r.raw} == {"shortlisted_by"}
    assert all(r.n_samples == len(r.samples_ns) for r in seen)  # samples kept: a time ranking tests them
    assert "ranked among 2 of 9 configs" in capsys.readouterr().out
