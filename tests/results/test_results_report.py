"""rvtune report: ranking (time, or kernel_insns under QEMU), perf_stats.csv, formats, plots, correlation."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from results_data import make_record, measure, write_jsonl

from pytest_rvtune.cli import main
from pytest_rvtune.results.report import PERF_RECORD_EVENTS, PERF_STAT_EVENTS, build_case_reports, render_report
from pytest_rvtune.results.runs import load_run

SEED_COLUMNS = ["Timestamp", "ELF Name", "BLOCK_SIZE_M", "BLOCK_SIZE_N", "Valid Output", "Kernel Time (s)",
                "Total Time (s)", "u_mode_cycle", "eu_vfpu_full", "vidu_total_cycle", "vector_micro_op",
                "vector_load_inst", "vector_store_inst", "vector_inst", "l1d_load_miss", "l1d_load_access",
                "l1d_access", "l1d_miss", "l2_access(perf record)", "l2_miss(perf record)",
                "l2_load_access(perf record)", "l2_store_access(perf record)"]


def test_report_ranks_by_kernel_insns_under_emulation(tmp_path: Path, capsys) -> None:
    configs = [(16, 16), (32, 32), (48, 96)]
    samples = measure(configs, rounds=5)
    # fewer instructions for the configs that took longer here: the ranking must follow the counts, not time
    order = sorted(range(3), key=lambda i: -sorted(samples[i])[2])
    records = [make_record("matmul", "M96", {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn}, samples[i], target="qemu",
                           counters={"kernel_insns": 1000.0 * (1 + order.index(i)), "insns": 5e6})
               for i, (bm, bn) in enumerate(configs)]
    run = write_jsonl(tmp_path / "qemu.jsonl", records)
    assert main(["report", str(run), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "ranked by kernel_insns" in out and "emulated by QEMU, not performance" in out
    rows = build_case_reports(load_run(run))[0].rows
    assert [r["kernel_insns"] for r in rows] == [1000.0, 2000.0, 3000.0]
    assert rows[0]["vs_worst"] == 3.0
    assert "| 3.00x" not in out and "3.00x" in out and "1,000" in out  # people see units and separators


def test_report_ranks_by_median_time_on_hardware(tuning_run, capsys) -> None:
    run = tuning_run("host")
    reports = build_case_reports(load_run(run))
    for rep in reports:
        assert rep.metric == "time"
        ranked_records = {r.config_id: r for r in load_run(run).records if r.case == rep.case}
        medians = [ranked_records[row["config"]].median_ns for row in rep.rows]
        assert medians == sorted(medians) == [row["median_ns"] for row in rep.rows]
        assert len(rep.failures) == 1 and rep.failures[0].outcome == "wrong"
        assert rep.rows[-1]["vs_worst"] == 1.0
    assert main(["report", str(run), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "Best config per case" in out and "Items without a valid result" in out
    assert main(["report", str(run), "--no-plots", "--top", "1", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [len(c["configs"]) for c in doc["cases"]] == [1, 1]


def test_perf_stats_csv_keeps_the_seed_columns(tmp_path: Path) -> None:
    samples = measure([(16, 32), (32, 32)], rounds=3)
    perf = {"u_mode_cycle:u": 1234.0, "vector_inst:u": 99.0, "l2_miss": 7.0}  # names as perf prints them
    records = [make_record("matmul", "M96", {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "GROUP_SIZE_M": 8},
                           samples[0], counters=perf, wall_s=0.25),
               make_record("matmul", "M96", {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "GROUP_SIZE_M": 8},
                           samples[1], outcome="wrong", run_seconds=1.5, wall_s=None)]  # what the plugin records
    run = write_jsonl(tmp_path / "board.jsonl", records)
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep")]) == 0
    with open(tmp_path / "rep" / "host" / "matmul" / "M96" / "perf_stats.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
        header = list(rows[0])
    assert header == SEED_COLUMNS
    assert len(PERF_STAT_EVENTS) == 11 and len(PERF_RECORD_EVENTS) == 4
    good, bad = rows
    assert good["Valid Output"] == "YES" and bad["Valid Output"] == "NO" and bad["Total Time (s)"] == "1.500000"
    assert good["u_mode_cycle"] == "1234" and good["vector_inst"] == "99" and good["l2_miss(perf record)"] == "7"
    assert good["l1d_miss"] == "" and good["Total Time (s)"] == "0.250000"  # missing counters stay empty
    assert abs(float(good["Kernel Time (s)"]) - sorted(samples[0])[1] / 1e9) < 1e-9
    assert good["BLOCK_SIZE_M"] == "16" and good["ELF Name"].startswith("matmul_16_32_")


def test_perf_stats_csv_under_qemu_adds_instruction_counts(tuning_run, tmp_path: Path) -> None:
    run = tuning_run("qemu")
    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep")]) == 0
    with open(tmp_path / "rep" / "qemu" / "matmul" / "M32" / "perf_stats.csv", newline="") as fh:
        header = next(csv.reader(fh))
    assert header[: len(SEED_COLUMNS)] == SEED_COLUMNS
    assert header[len(SEED_COLUMNS):] == ["kernel_insns", "insns", "vector_insns"]


def test_report_formats_and_files(tuning_run, tmp_path: Path, capsys) -> None:
    run = tuning_run("host")
    out = tmp_path / "rep"
    assert main(["report", str(run), "--format", "json", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {c["case"] for c in doc["cases"]} == {"M32", "M256"}
    assert doc["best"][0]["common_winner"] and doc["failures"]
    assert doc["best"][0]["default_config"] == ""  # records that do not name their kernel's untuned config
    assert doc["best"][0]["value"] == doc["cases"][0]["configs"][0]["median_ns"]  # numbers, not text
    assert json.loads((out / "report.json").read_text())["cases"] == doc["cases"]
    pngs = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png"))
    assert pngs == ["host/matmul/M256/heatmap.png", "host/matmul/M32/heatmap.png"]  # no counters: no scatter
    assert (out / "host/matmul/M32/heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["report", str(run), "--format", "csv", "--no-plots", "--out", str(out)]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert len(rows) == 34 and rows[0]["rank"] == "1"  # 2 cases x 17 valid configs
    assert float(rows[0]["median_ns"]) > 0 and float(rows[0]["vs_worst"]) > 1
    assert main(["report", str(run), "--format", "markdown", "--no-plots", "--out", str(out)]) == 0
    assert "| rank " in (out / "report.md").read_text()


def test_counter_scatter_plot_and_correlation(tmp_path: Path, capsys) -> None:
    configs = [(16, 16), (16, 32), (32, 32), (32, 96), (48, 96)]
    samples = measure(configs, rounds=5)
    records = []
    for (bm, bn), s in zip(configs, samples, strict=True):
        median = sorted(s)[2]
        # cycles follow the measured time, l1d misses do not: only one is a strong correlation
        records.append(make_record("matmul", "M96", {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn}, s,
                                   counters={"u_mode_cycle": round(median * 1.6), "l1d_miss": [5, 1, 4, 2, 3][
                                       configs.index((bm, bn))]}))
    run = write_jsonl(tmp_path / "board.jsonl", records)
    assert main(["correlate", str(run), "--strong", "--format", "json"]) == 0
    strong = json.loads(capsys.readouterr().out)
    assert [r["counter"] for r in strong] == ["u_mode_cycle"]
    assert strong[0]["spearman"] == 1.0 and strong[0]["pearson"] > 0.99
    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 0
    assert "Counters correlated with kernel time" in capsys.readouterr().out
    scatter = tmp_path / "rep/host/matmul/M96/counters_vs_time.png"
    assert scatter.read_bytes()[:4] == b"\x89PNG"


def test_bad_run_file_is_named(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kernel": "matmul"}\n')
    assert main(["report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:1: missing field(s) case, config_id, target, outcome" in err


def test_the_flat_csv_has_every_groups_columns(tmp_path: Path, capsys) -> None:
    """A host group (no QEMU counters, no FLOPS) before a QEMU group with both: one header for all rows (the
    first group's header made the second's rows a ValueError)."""
    records = [make_record("axpy", "small", {"BLOCK": b}, [100.0 * b, 110.0 * b], target="host") for b in (1, 2)]
    records += [make_record("mm", "small", {"BLOCK": b}, [5.0], target="qemu", flops=1000.0, bytes=400.0,
                            counters={"x60_cycles": 100.0 * b, "launch_insns": 50.0 * b}) for b in (1, 2)]
    run = write_jsonl(tmp_path / "mixed.jsonl", records)
    out = tmp_path / "rep"
    assert main(["report", str(run), "--format", "csv", "--no-plots", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    rows = list(csv.DictReader(text.splitlines()))
    assert [r["kernel"] for r in rows] == ["axpy", "axpy", "mm", "mm"]
    assert [r["flop/cycle"] for r in rows] == ["", "", "10.0", "5.0"]  # 1000 FLOPs over 100 and 200 cycles
    assert [r["x60_cycles"] for r in rows[2:]] == ["100.0", "200.0"] and rows[0]["x60_cycles"] == ""
    assert text == (out / "report.csv").read_text() + "\n"  # print's newline
    whole = load_run(run)  # and the report built whole says the same
    assert render_report(whole, build_case_reports(whole), "csv", []) == (out / "report.csv").read_text()
