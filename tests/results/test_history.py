"""`rvtune history`: the best value per kernel and case over runs, the commit each measured, and the first run and
commit where a best got worse; the page rendered by headless Chromium (Debian package chromium)."""

from __future__ import annotations

from pathlib import Path

import pytest
from results_data import make_record, write_jsonl
from test_html_report import chromium

from pytest_rvtune.cli import main
from pytest_rvtune.results.history import first_regression


def _run(directory: Path, run_id: str, commit: str, cycles: dict[int, float], dirty: bool = False) -> Path:
    records = [make_record("scale", "emu", {"BLOCK": b}, [1.0, 1.0], target="qemu", git_commit=commit,
                           git_dirty=dirty, counters={"x60_cycles": c, "launch_insns": c * 3})
               for b, c in cycles.items()]
    records.append(make_record("axpy", "emu", {"BLOCK": 16}, [1.0, 1.0], target="qemu", git_commit=commit,
                               counters={"x60_cycles": 500.0, "launch_insns": 1500.0}))
    return write_jsonl(directory / f"{run_id}.jsonl", records)


def test_first_regression_is_against_the_run_before() -> None:
    assert first_regression([100.0, 101.0, None, 130.0, 90.0, 200.0], 5) == (3, pytest.approx(28.71, abs=0.01))
    assert first_regression([100.0, 99.0, 103.0], 5) is None  # +4.0 % on the run before: within 5 %
    assert first_regression([None, 100.0], 5) is None


def test_history_names_the_commit_that_made_a_kernel_slower(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    results = tmp_path / "results"
    results.mkdir()
    _run(results, "20261125T090000-1-aaaaaa", "a" * 40, {16: 1000.0, 32: 800.0})
    _run(results, "20261126T090000-2-bbbbbb", "b" * 40, {16: 1000.0, 32: 1040.0})  # best 800 -> 1000: +25 %
    _run(results, "20261127T090000-3-cccccc", "c" * 40, {16: 990.0, 32: 1040.0}, dirty=True)
    page = tmp_path / "history.html"
    assert main(["history", "--dir", str(results), "-o", str(page)]) == 0
    out = capsys.readouterr().out
    assert "regression: scale / emu on qemu: best x60_cycles +25.0% first at latest~1 (commit bbbbbbbbbb)" in out
    assert "axpy" not in out.split("wrote")[0]  # unchanged: no regression line
    assert f"wrote {page}: 2 kernel/case groups over 3 runs" in out

    dom = chromium("--dump-dom", page.as_uri(), cwd=tmp_path).stdout
    assert dom.count('class="worse"') == 1 and "cccccccccc+dirty" in dom and "<svg" in dom
    row = next(line for line in dom.split("<tr>") if line.startswith("<td>scale</td>"))
    assert [cell.split(">")[-1] for cell in row.split("</td>")[5:8]] == ["800", "1,000", "990"]
    assert "latest~1 (commit <code>bbbbbbbbbb</code>): +25.0%" in row
    shot = tmp_path / "history.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,500", page.as_uri(), cwd=tmp_path)
    assert shot.stat().st_size > 5000


def test_history_without_runs_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--dir", str(tmp_path), "-o", str(tmp_path / "h.html")]) == 1
    assert "no runs in" in capsys.readouterr().err
