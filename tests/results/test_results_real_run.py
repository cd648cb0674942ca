"""The analysis commands on real runs of the kernel suite: softmax, two configs, on QEMU and on this host.

The suite runs as a user runs it (pytest on kernels/, real Triton frontend, clang-19, QEMU with the icount
plugin, native host runs); the results JSONL and the pytest-benchmark JSON it writes are the inputs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from results_data import clean_env

from pytest_rvtune.cli import main
from pytest_rvtune.results.runs import load_run

ROOT = Path(__file__).resolve().parents[2]
SELECT = ["kernels/softmax.py", "--rvtune-case", "emu", "--rvtune-config", "BLOCK_SIZE_M=1;BLOCK_SIZE_N=16,32"]


def _suite(out: Path, *targets: str, options: tuple[str, ...] = ()) -> tuple[Path, Path]:
    results, bench = out.with_suffix(".jsonl"), out.with_suffix(".json")
    target_args = [arg for t in targets for arg in ("--rvtune-target", t)]
    done = subprocess.run([sys.executable, "-m", "pytest", *SELECT, *target_args, *options, "-q", "-p",
                           "no:cacheprovider",
                           f"--rvtune-results={results}", f"--benchmark-json={bench}"],
                          cwd=ROOT, capture_output=True, text=True, env=clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return results, bench


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("real")
    # the base run asks for the timing model (est_cycles, cache misses); the rerun counts only, as by default
    base, bench = _suite(folder / "base", "qemu", "host", options=("--rvtune-timing-model",))
    rerun, _ = _suite(folder / "rerun", "qemu")
    return {"base": base, "bench": bench, "rerun": rerun}


def test_both_files_of_a_real_run_load_the_same(real_runs) -> None:
    jsonl, bench = load_run(real_runs["base"]), load_run(real_runs["bench"])
    assert len(jsonl.records) == len(bench.records) == 4
    for record in jsonl.records:
        other = bench.find(record)
        assert other is not None and other.samples_ns == record.samples_ns
        assert other.counters == record.counters and other.machine == record.machine
    qemu = [r for r in jsonl.records if r.target == "qemu"]
    assert all(r.emulated and r.counters["kernel_insns"] > 0 for r in qemu)


def test_real_report_ranks_qemu_by_the_x60_model_and_host_by_time(real_runs, capsys) -> None:
    assert main(["report", str(real_runs["bench"]), "--format", "json", "--no-plots"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ranked_by = {c["target"]: c["ranked_by"] for c in doc["cases"]}
    # under QEMU by the X60 model's cycles of the whole launch; instruction counts are columns
    assert ranked_by == {"qemu": "x60_cycles", "host": "time"}
    for case in doc["cases"]:
        assert [row["rank"] for row in case["configs"]] == [1, 2]


def test_real_rerun_under_qemu_is_not_flagged_and_a_counter_change_is(real_runs, tmp_path: Path, capsys) -> None:
    # A/A: a second session of the same items; exact instruction counts must not move
    assert main(["compare", str(real_runs["base"]), str(real_runs["rerun"])]) == 0
    capsys.readouterr()
    lines = real_runs["rerun"].read_text().splitlines()
    first = json.loads(lines[0])
    first["counters"]["x60_cycles"] = first["counters"]["x60_cycles"] * 1.10
    slower = tmp_path / "slower.jsonl"
    slower.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert main(["compare", str(real_runs["base"]), str(slower)]) == 1
    err = capsys.readouterr().err
    assert err.count("REGRESSION") == 1 and "x60_cycles" in err and "+10.0%" in err
    # an instruction count that is not the ranking metric shows its change but does not gate
    first = json.loads(lines[0])
    first["counters"]["kernel_insns"] = round(first["counters"]["kernel_insns"] * 1.10)
    more_insns = tmp_path / "more_insns.jsonl"
    more_insns.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert main(["compare", str(real_runs["base"]), str(more_insns)]) == 0
    assert "REGRESSION" not in capsys.readouterr().err


def test_real_export_and_perf_stats(real_runs, tmp_path: Path) -> None:
    assert main(["export-best", str(real_runs["base"]), "--out", str(tmp_path / "best")]) == 0
    qemu = json.loads((tmp_path / "best" / "qemu" / "softmax.json").read_text())
    assert qemu["ranked_by"] == ["x60_cycles"] and qemu["cases"]["emu"]["tie"] is False
    assert main(["report", str(real_runs["base"]), "--no-plots", "--out", str(tmp_path / "rep")]) == 0
    csv_text = (tmp_path / "rep" / "qemu" / "softmax" / "emu" / "perf_stats.csv").read_text()
    # the X60 model's cycles, the exact QEMU counts, then the other models' figures (per launch)
    assert csv_text.splitlines()[0].endswith(
        ",x60_cycles,launch_insns,kernel_insns,insns,vector_insns,est_cycles,l1d_accesses,l1d_misses,l2_misses,"
        "x60_harts,x60_memory_stall_cycles,x60_scalar_cycles,x60_standin_share,x60_vector_cycles")
    assert csv_text.count(",YES,") == 2
