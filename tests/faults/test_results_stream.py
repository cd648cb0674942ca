"""A results file of many records (issue 28): report, compare and export-best read it one line at a time and keep
only the fields analyses use (runs.ANALYSIS_FIELDS), not each whole object; benchmarks/results_memory.py measures
the memory. This test holds the output: on a file of 2,000 records with fields the analyses do not read (checks, a
long output text), a torn line and a re-recorded item, every command prints and writes exactly what it does with
the whole objects kept (fields=None, how the loader kept them before).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_rvtune.cli import compare as cli_compare
from pytest_rvtune.cli import export_best as cli_export
from pytest_rvtune.cli import main
from pytest_rvtune.cli import report as cli_report
from pytest_rvtune.results.runs import ANALYSIS_FIELDS, load_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "results"))
from results_data import make_record

KERNELS = ("matmul", "softmax")
PER_GROUP = 500  # 2 kernels x 2 cases x 500 configs = 2,000 records


def _records(slower: float) -> list[dict]:
    records = []
    for kernel in KERNELS:
        for case in ("emu", "small"):
            for n in range(PER_GROUP):
                base = 1000.0 + (n * 7919) % 5000
                failed = n % 10 == 9
                records.append(make_record(
                    kernel, case, {"BLOCK_SIZE_M": 16 * (1 + n % 8), "BLOCK_SIZE_N": n}, [] if failed else
                    [base * slower * (1 + 0.01 * s) for s in range(5)], target="qemu",
                    outcome="wrong" if failed else "passed",
                    counters={} if failed else {"x60_cycles": base * 3 * slower, "launch_insns": base * 5},
                    output="x" * 2000, rounds=2, rerun={"argv": ["./kernel.elf", str(n)]},
                    # ranked at another case: report and export-best say so (ranked_at.py)
                    shortlisted_by={"run": "emu.jsonl", "case": "emu", "case_params": {"n": 75},
                                    "metric": "x60_cycles", "kept": [1, 2], "of_configs": 9} if case == "small"
                    else None))
    return records


def _write(path: Path, records: list[dict]) -> Path:
    import json
    lines = [json.dumps(r) for r in records]
    lines.insert(7, lines[7][:40])  # a torn line (a run killed mid-write)
    lines.append(json.dumps({**records[3], "samples_ns": [5.0] * 5}))  # item 3 re-recorded: the last one counts
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _outputs(tmp: Path, base: Path, new: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, argv in {
        "report": ["report", str(new), "--no-plots", "--out", str(tmp / "rep")],
        "report-csv": ["report", str(new), "--no-plots", "--out", str(tmp / "rep"), "--format", "csv"],
        "compare": ["compare", str(base), str(new), "--all", "--format", "csv"],
        "compare-table": ["compare", str(base), str(new)],
        "export": ["export-best", str(new), "--out", str(tmp / "tuned")],
    }.items():
        code = main(argv)
        captured = capsys.readouterr()
        out[name] = f"exit {code}\n{captured.out}\n{captured.err}"
    for path in sorted((tmp / "tuned").rglob("*.json")) + sorted((tmp / "rep").rglob("*.csv")):
        out[str(path.relative_to(tmp))] = path.read_text()
    return out


def test_the_fields_analyses_read_are_kept() -> None:
    from pytest_rvtune.results import ranked_at
    from pytest_rvtune.verdict_key import RECORD_FIELD
    assert {ranked_at.RECORD_FIELD, RECORD_FIELD, "rounds", "threads", "rerun"} <= ANALYSIS_FIELDS


def test_commands_print_the_same_with_only_the_analysis_fields_kept(tmp_path: Path, capsys, monkeypatch) -> None:
    base = _write(tmp_path / "base.jsonl", _records(1.0))
    new = _write(tmp_path / "new.jsonl", _records(1.3))
    with pytest.warns(UserWarning, match="new.jsonl:8: not a JSON object"):  # the torn line
        run = load_run(new, fields=ANALYSIS_FIELDS)
    assert len(run.records) == 2000
    assert run.find({"target": "qemu", "kernel": "matmul", "case": "emu",
                     "config_id": "BLOCK_SIZE_M=64-BLOCK_SIZE_N=3"}).samples_ns == [5.0] * 5
    assert set(run.records[0].raw) == {"rounds", "rerun", "verdict_key", "wall_s", "shortlisted_by"}  # no output
    streamed = _outputs(tmp_path / "streamed", base, new, capsys)
    assert "ranked among 2 of 9 configs shortlisted by x60_cycles at case emu" in streamed["report"]
    for module in (cli_report, cli_compare, cli_export):
        monkeypatch.setattr(module, "ANALYSIS_FIELDS", None)  # every record's whole object, as before
    whole = _outputs(tmp_path / "whole", base, new, capsys)
    assert "regressed" in streamed["compare"] and "tuned/qemu/matmul.json" in streamed
    assert "new.jsonl:8: not a JSON object" in streamed["report"]  # the torn line is still named
    for name, text in whole.items():
        assert streamed[name] == text.replace(str(tmp_path / "whole"), str(tmp_path / "streamed")), name
