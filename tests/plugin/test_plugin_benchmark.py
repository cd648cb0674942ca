"""pytest-benchmark output from target samples; --rvtune-resume and --rvtune-compare against earlier runs.

One real QEMU run, then runs that reuse it: a resumed run (no ELF run at all) compared by pytest-benchmark
against a doctored saved run, pytest-benchmark's own `compare` CLI on the saved runs, and --rvtune-compare
against a base whose instruction count was halved.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import by_kernel, read_results


def test_benchmark_output_resume_and_compare(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("pb_bench", configs=(16, 32))
    common = ("--rvtune-case", "small", "-p", "no:randomly")

    # -- 1: a real run: JSON, autosave, results file
    first = project.runpytest(*common, "--benchmark-json", "out.json", "--benchmark-autosave",
                              "--rvtune-results", "run1.jsonl")
    first.assert_outcomes(passed=2)
    doc = json.loads((project.path / "out.json").read_text())
    benches = {b["name"]: b for b in doc["benchmarks"]}
    assert sorted(benches) == ["pb_bench[small-BLOCK=16]", "pb_bench[small-BLOCK=32]"]
    records = by_kernel(read_results(project.path / "run1.jsonl"))
    bench = benches["pb_bench[small-BLOCK=16]"]
    record = records["pb_bench[BLOCK=16]"]
    assert bench["fullname"] == "kernels/pb_bench.py::pb_bench[small-BLOCK=16]"
    # under emulation the stats are the modelled X60's time of one launch, x60_cycles at 1.6 GHz, one value per
    # sample the target took (seconds in pytest-benchmark), not QEMU's wall time
    assert bench["stats"]["rounds"] == 1 and bench["stats"]["iterations"] == 1  # one launch under emulation
    assert bench["stats"]["data"] == pytest.approx([record["counters"]["x60_cycles"] / 1.6e9])
    assert bench["group"].endswith("(modelled SpacemiT X60 time: x60_cycles at 1.6 GHz, not measured)")
    assert bench["params"] == {"case": "small", "BLOCK": 16, "target": "qemu"}
    extra = bench["extra_info"]
    assert extra["config"] == {"BLOCK": 16} and extra["case"] == "small" and extra["target"] == "qemu"
    assert extra["elf_sha256"] == record["elf_sha256"] and extra["golden_sha256"] == record["golden_sha256"]
    assert extra["counters"]["kernel_insns"] > 0 and extra["timing_source"] == "emulated"
    # machine_info is the target's identity (saved runs never mix boards), the same as each item's
    assert doc["machine_info"]["rvtune_targets"]["qemu"] == extra["machine"] == record["machine"]
    assert extra["machine"]["isa"] == "rv64gcv_zvl256b" and extra["machine"]["vlen"] == "256"
    (saved,) = project.path.glob(".benchmarks/*/0001_*.json")

    # -- 2: resumed from run 1 (same ELF, data, target: nothing runs) and compared with a doctored saved run
    # whose times are a millionth of the real ones: --benchmark-compare-fail must call that a regression.
    doctored = json.loads(saved.read_text())
    for b in doctored["benchmarks"]:
        b["stats"] = {k: (v * 1e-6 if isinstance(v, float) else v) for k, v in b["stats"].items()}
    saved.write_text(json.dumps(doctored))
    second = project.runpytest(*common, "--rvtune-resume", "run1.jsonl", "--rvtune-results", "run2.jsonl",
                               "--benchmark-compare", "0001", "--benchmark-compare-fail", "mean:5%",
                               "--benchmark-autosave")
    second.stdout.fnmatch_lines(["rvtune: 2 passed, * 0 timeout; 2 resumed; *"])
    second.stderr.fnmatch_lines(["*Performance has regressed*"])
    assert second.ret != 0
    resumed = by_kernel(read_results(project.path / "run2.jsonl"))
    assert {k: r["samples_ns"] for k, r in resumed.items()} == {k: r["samples_ns"] for k, r in records.items()}
    assert all(r["resumed_from"] == "run1.jsonl" and r["run_seconds"] == 0.0 for r in resumed.values())

    # -- pytest-benchmark's own compare CLI reads our saved runs
    cli = subprocess.run([str(Path(sys.executable).parent / "pytest-benchmark"), "compare", "0001", "0002",
                          "--columns", "min,rounds", "--group-by", "name"],
                         cwd=project.path, capture_output=True, text=True, check=False)
    assert cli.returncode == 0, cli.stderr
    assert "pb_bench[small-BLOCK=16] (0001_" in cli.stdout and "pb_bench[small-BLOCK=16] (0002_" in cli.stdout

    # -- 3: --rvtune-compare: a base run whose BLOCK=16 item took half the cycles -> that item fails
    base = [json.loads(line) for line in (project.path / "run1.jsonl").read_text().splitlines()]
    for r in base:
        if r["config_id"] == "BLOCK=16":
            r["counters"] = {k: v / 2 for k, v in r["counters"].items()}
    (project.path / "base.jsonl").write_text("".join(json.dumps(r) + "\n" for r in base))
    third = project.runpytest(*common, "--rvtune-compare", "base.jsonl", "--rvtune-results", "run3.jsonl",
                              "--benchmark-disable")
    third.assert_outcomes(passed=1, failed=1)
    third.stdout.fnmatch_lines([
        "*pb_bench[[]small-BLOCK=16[]] on qemu: regression: *x60_cycles * -> * (+100.0%, threshold 5%*",
        "*(base run base.jsonl)*",
    ])
    after = by_kernel(read_results(project.path / "run3.jsonl"))
    assert after["pb_bench[BLOCK=16]"]["outcome"] == "regressed"
    assert after["pb_bench[BLOCK=32]"]["outcome"] == "passed"


def test_benchmark_only_keeps_kernel_items(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # kernel items are benchmarks (their stats come from the target), other tests are not. The inner run is
    # no xdist worker (pytest-benchmark refuses --benchmark-only inside one) even when this test runs in one.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    add_kernel("pb_only", configs=(16,))
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = project.runpytest("kernels", "test_plain.py", "--rvtune-case", "small", "--benchmark-only")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*pb_only[[]small-BLOCK=16[]]*"])


def test_benchmark_compare_refuses_a_run_of_another_target(project: pytest.Pytester,
                                                           add_kernel: Callable[..., Path]) -> None:
    # pytest-benchmark files saved runs by host; a QEMU run must not pass for a baseline of the host target
    add_kernel("pb_mix", configs=(16,))
    project.runpytest("--rvtune-case", "small", "--benchmark-autosave").assert_outcomes(passed=1)
    mixed = project.runpytest("--rvtune-case", "small", "--rvtune-target", "host", "--benchmark-compare=0001")
    assert mixed.ret == pytest.ExitCode.USAGE_ERROR
    mixed.stderr.fnmatch_lines(["*--benchmark-compare: the saved run measured target(s) qemu, not 'host'*"])
    same = project.runpytest("--rvtune-case", "small", "--benchmark-compare=0001")
    same.assert_outcomes(passed=1)
