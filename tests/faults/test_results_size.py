"""A results file of many items (issue 28, a weak case): `rvtune report --html` wrote every row of every table, a
130 MB page for 10^5 records. Now each table shows at most MAX_TABLE_ROWS rows and says how many there are; the
CSV output keeps every row. Reading such a file line by line: test_results_stream.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_rvtune.cli import main
from pytest_rvtune.results.html import MAX_TABLE_ROWS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "results"))
from results_data import make_record, write_jsonl


def test_an_html_page_of_many_configs_caps_its_tables_and_says_so(tmp_path: Path, capsys) -> None:
    n = 3 * MAX_TABLE_ROWS
    records = [make_record("matmul", "emu", {"BLOCK_SIZE_M": m}, [1000.0 + m] * 3, target="qemu",
                           counters={"launch_insns": 1000.0 + m}) for m in range(n)]
    records += [make_record("matmul", "emu", {"BLOCK_SIZE_M": n + m}, [], target="qemu", outcome="wrong")
                for m in range(n)]
    run = write_jsonl(tmp_path / "big.jsonl", records)
    page = tmp_path / "big.html"
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep"), "--html", str(page)]) == 0
    html = page.read_text()
    assert html.count("<tr data-config=") <= 2 * MAX_TABLE_ROWS + 10  # the ranking and the failures, capped
    assert html.count(f"The first {MAX_TABLE_ROWS} rows of {n} (sorting sorts these)") == 2
    assert "BLOCK_SIZE_M=0" in html  # the best config is among the rows shown
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep"), "--html", str(page),
                 "--html-rows", "10"]) == 0
    html = page.read_text()
    assert html.count("<tr data-config=") <= 2 * 10 + 10 and html.count(f"The first 10 rows of {n}") == 2
    capsys.readouterr()
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep"), "--format", "csv"]) == 0
    assert capsys.readouterr().out.count("BLOCK_SIZE_M=") >= n  # every valid config in the CSV


def test_the_scatter_of_a_group_of_many_configs_draws_as_many_points_as_a_table_shows(tmp_path: Path) -> None:
    """Issue 28: on 10^5 items the page's scatter plots drew every valid config, 90,000 circles (24 of its 35 MB)."""
    n, limit = 130, 40
    records = [make_record("matmul", "emu", {"BLOCK_SIZE_M": m}, [1000.0 + m] * 3, target="qemu",
                           counters={"launch_insns": 1000.0 + 7 * m}) for m in range(n)]
    run = write_jsonl(tmp_path / "many.jsonl", records)
    page = tmp_path / "many.html"
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep"), "--html", str(page),
                 "--html-rows", str(limit)]) == 0
    html = page.read_text()
    scatter = html[html.index("launch_insns against median time"):]
    scatter = scatter[:scatter.index("</svg>")]
    assert scatter.count("<circle") == 33 - 1  # every 4th of 130, the winner a diamond
    assert "33 of 130 valid configs: every 4th of the ranking" in html and "BLOCK_SIZE_M=0" in scatter


def test_a_page_that_shows_few_rows_still_ranks_the_untuned_default_among_all(tmp_path: Path) -> None:
    """The page keeps only the rows it shows of each group (and the untuned default's): its rank and the count of
    ranked configs are those of the whole group."""
    n = 60
    records = [make_record("matmul", "emu", {"BLOCK_SIZE_M": m}, [1000.0 + m] * 3, target="qemu",
                           counters={"launch_insns": 1000.0 + m}, kernel_default="BLOCK_SIZE_M=29")
               for m in range(n)]
    run = write_jsonl(tmp_path / "few.jsonl", records)
    page = tmp_path / "few.html"
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep"), "--html", str(page),
                 "--html-rows", "10"]) == 0
    html = page.read_text()
    assert "<dd>#30, the best is 1.03x faster</dd>" in html and f"over {n} configs" in html
    assert "The first 10 rows of 60" in html and html.count("<tr data-config=") <= 10 + 2
