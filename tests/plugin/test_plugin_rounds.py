"""Rounds (sessions writing to one results file pool their samples), --rvtune-max-time, and the options that
tune --rvtune-compare (--rvtune-threshold, --rvtune-noise). Real host runs of a real kernel build."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import by_kernel, read_results

HOST = ("--rvtune-case", "small", "--rvtune-target", "host", "-p", "no:randomly")


def _last(path: Path) -> dict[str, dict]:
    return by_kernel(read_results(path))  # the last line of an item wins, as runs.load_run reads it


def test_sessions_on_one_results_file_pool_their_samples(project: pytest.Pytester,
                                                         add_kernel: Callable[..., Path]) -> None:
    add_kernel("pr_rounds", configs=(16,))
    opts = (*HOST, "--rvtune-results", "host.jsonl", "--rvtune-max-time", "0.05")
    project.runpytest(*opts).assert_outcomes(passed=1)
    first = _last(project.path / "host.jsonl")["pr_rounds[BLOCK=16]"]
    assert first["rounds"] == 1 and first["round_samples"] == [len(first["samples_ns"])]
    # max-time: far more samples than --rvtune-runs' 10 for a sub-microsecond kernel, at most 200
    assert 10 < len(first["samples_ns"]) <= 200 and first["launches"] > len(first["samples_ns"])

    second = project.runpytest(*opts, "--benchmark-json", "b.json")
    second.assert_outcomes(passed=1)
    pooled = _last(project.path / "host.jsonl")["pr_rounds[BLOCK=16]"]
    n2 = pooled["round_samples"][1]
    assert pooled["rounds"] == 2 and pooled["round_samples"] == [len(first["samples_ns"]), n2]
    assert pooled["samples_ns"][: len(first["samples_ns"])] == first["samples_ns"]
    assert len(pooled["samples_ns"]) == len(first["samples_ns"]) + n2 and pooled["run_id"] != first["run_id"]
    # pytest-benchmark's stats are the pooled samples too
    [bench] = json.loads((project.path / "b.json").read_text())["benchmarks"]
    assert bench["stats"]["rounds"] == len(pooled["samples_ns"])

    # the code changed: a record of another ELF is another experiment, and the next session is round 1 again
    lines = read_results(project.path / "host.jsonl")
    lines[-1]["elf_sha256"] = "0" * 64
    (project.path / "host.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    project.runpytest(*opts).assert_outcomes(passed=1)
    again = _last(project.path / "host.jsonl")["pr_rounds[BLOCK=16]"]
    assert again["rounds"] == 1 and len(again["samples_ns"]) == again["round_samples"][0]


def test_compare_options_need_a_base_and_name_bad_values(project: pytest.Pytester,
                                                         add_kernel: Callable[..., Path]) -> None:
    add_kernel("pr_opts", configs=(16,))
    lone = project.runpytest(*HOST, "--rvtune-noise", "noise.json")
    assert lone.ret == pytest.ExitCode.USAGE_ERROR
    lone.stderr.fnmatch_lines(["*--rvtune-threshold and --rvtune-noise tune --rvtune-compare BASE*"])
    project.runpytest(*HOST, "--rvtune-results", "base.jsonl", "--rvtune-max-time", "0.02").assert_outcomes(passed=1)
    bad = project.runpytest(*HOST, "--rvtune-compare", "base.jsonl", "--rvtune-threshold", "pr_opts=lots")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--rvtune-threshold: threshold 'pr_opts=lots': expected PERCENT or KERNEL=PERCENT*"])
    missing = project.runpytest(*HOST, "--rvtune-compare", "base.jsonl", "--rvtune-noise", "nope.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--rvtune-noise: nope.json: no such noise file*"])
    bad_time = project.runpytest(*HOST, "--rvtune-max-time", "-1")
    assert bad_time.ret == pytest.ExitCode.USAGE_ERROR
    bad_time.stderr.fnmatch_lines(["*--rvtune-max-time -1: seconds of samples per item, between 0 and 3600*"])


def test_compare_in_pytest_uses_threshold_and_noise_floor(project: pytest.Pytester,
                                                          add_kernel: Callable[..., Path]) -> None:
    add_kernel("pr_gate", configs=(16,))
    project.runpytest(*HOST, "--rvtune-results", "base.jsonl", "--rvtune-max-time", "0.05").assert_outcomes(passed=1)
    # the base run, made 3x faster: the same ELF now looks like a +200 % regression
    fast = [json.loads(line) for line in (project.path / "base.jsonl").read_text().splitlines()]
    for record in fast:
        record["samples_ns"] = [s / 3 for s in record["samples_ns"]]
    (project.path / "fast.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fast))
    gated = project.runpytest(*HOST, "--rvtune-compare", "fast.jsonl", "--rvtune-max-time", "0.05")
    gated.assert_outcomes(failed=1)
    gated.stdout.fnmatch_lines(["*pr_gate[[]small-BLOCK=16[]] on host: regression: time *min of n=*"])
    # a 1000 % threshold for this kernel lets it pass
    loose = project.runpytest(*HOST, "--rvtune-compare", "fast.jsonl", "--rvtune-max-time", "0.05",
                              "--rvtune-threshold", "pr_gate=1000")
    loose.assert_outcomes(passed=1)
    # so does an A/A floor of this target that says the minimum moves +-500 % between sessions
    noise = {"format": "rvtune-noise/1", "quantile": 95, "statistic": "min", "targets": [
        {"target": "host", "machine": fast[0]["machine"], "runs": [],
         "kernels": {"pr_gate": {"floor_pct": 500.0, "items_measured": 1, "items": {}}}}]}
    (project.path / "noise.json").write_text(json.dumps(noise))
    floored = project.runpytest(*HOST, "--rvtune-compare", "fast.jsonl", "--rvtune-max-time", "0.05",
                                "--rvtune-noise", "noise.json")
    floored.assert_outcomes(passed=1)
