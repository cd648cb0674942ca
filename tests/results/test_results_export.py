"""rvtune export-best: winners per case, ties marked by Mann-Whitney, M buckets, default, C header."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from results_data import exact_counts, make_record, measure, write_jsonl

from pytest_rvtune.cli import main
from pytest_rvtune.results.export import case_m, export_kernel, m_bucket
from pytest_rvtune.results.runs import load_run


@pytest.mark.parametrize(("m", "bucket"), [(1, "small"), (31, "small"), (32, "medium_M32"), (33, "medium_M64"),
                                           (64, "medium_M64"), (100, "medium_M128"), (128, "medium_M128"),
                                           (129, "large"), (256, "large"), (257, "xlarge"), (4096, "xlarge")])
def test_m_buckets_follow_aiter(m: int, bucket: str) -> None:
    assert m_bucket(m) == bucket


def test_case_m_from_params_or_name() -> None:
    run_record = make_record("k", "M=64", {"BLOCK_SIZE_M": 4}, [1.0])
    from pytest_rvtune.results.records import record_from_dict

    assert case_m(record_from_dict(run_record)) == 64
    assert case_m(record_from_dict(make_record("k", "decode", {"B": 1}, [1.0], case_params={"M": 7}))) == 7
    assert case_m(record_from_dict(make_record("k", "small", {"B": 1}, [1.0]))) is None


def test_export_marks_a_tie_and_a_clear_win(tmp_path: Path) -> None:
    # alternate samples of one (32, 96) stream under two config names: a tie by construction
    same, slow = measure([(32, 96), (16, 16)], rounds=60)
    same_a, same_b = same[0::2], same[1::2]
    records = [
        make_record("matmul", "tie", {"BLOCK_SIZE_M": 32, "GROUP_SIZE_M": 1}, same_a),
        make_record("matmul", "tie", {"BLOCK_SIZE_M": 32, "GROUP_SIZE_M": 8}, same_b),
        make_record("matmul", "clear", {"BLOCK_SIZE_M": 32, "GROUP_SIZE_M": 1}, same_a),
        make_record("matmul", "clear", {"BLOCK_SIZE_M": 16, "GROUP_SIZE_M": 1}, slow),
    ]
    run = write_jsonl(tmp_path / "run.jsonl", records)
    # alpha 0.001: a true tie is called a win less than once in a thousand runs, so this does not flake
    assert main(["export-best", str(run), "--alpha", "0.001", "--out", str(tmp_path / "best")]) == 0
    doc = json.loads((tmp_path / "best" / "host" / "matmul.json").read_text())
    tie, clear = doc["cases"]["tie"], doc["cases"]["clear"]
    assert tie["tie"] is True and tie["tie_with"] == [tie["runner_up"]]
    assert tie["note"].startswith("not significantly better")
    assert clear["tie"] is False and clear["config_id"] == "BLOCK_SIZE_M=32-GROUP_SIZE_M=1"
    assert clear["p_value"] < 1e-6
    assert "buckets" not in doc  # no M sizes known: no buckets


def test_export_emulated_ties_only_on_equal_counts_and_buckets(tuning_run, tmp_path: Path) -> None:
    doc = export_kernel(load_run(tuning_run("qemu")).records)
    assert doc is not None and doc["ranked_by"] == ["kernel_insns"]
    m32, m256 = doc["cases"]["M32"], doc["cases"]["M256"]
    # under M=32, BLOCK_SIZE_M 32 and 48 both make one row block: equal exact counts, a tie
    assert m32["tie"] is True and m32["value"] == m32["runner_up_value"]
    assert m256["tie"] is False and m256["value"] < m256["runner_up_value"]
    assert m256["value"] == exact_counts(48, 96, 256)["kernel_insns"] + 1
    assert set(doc["buckets"]) == {"medium_M32", "large", "any"}
    assert doc["buckets"]["large"] == m256["config"]
    assert doc["buckets"]["any"] == doc["default"]["config"]
    assert doc["default"]["of_cases"] == 2


def test_export_header_compiles(tuning_run, tmp_path: Path) -> None:
    run = tuning_run("qemu")
    assert main(["export-best", str(run), "--format", "header", "--out", str(tmp_path / "best")]) == 0
    header = tmp_path / "best" / "qemu" / "matmul.h"
    text = header.read_text()
    assert "#define RVTUNE_MATMUL_M256_BLOCK_SIZE_M 48" in text and "TIE with" in text
    probe = tmp_path / "probe.c"
    probe.write_text(f'#include "{header}"\nint x[RVTUNE_MATMUL_DEFAULT_BLOCK_SIZE_N];\n'
                     "int y = RVTUNE_MATMUL_BUCKET_LARGE_BLOCK_SIZE_M + RVTUNE_MATMUL_M32_GROUP_SIZE_M;\n")
    subprocess.run(["clang-19", "-fsyntax-only", "-Wall", "-Werror", str(probe)], check=True)


def test_export_nothing_valid_fails(tmp_path: Path, capsys) -> None:
    run = write_jsonl(tmp_path / "r.jsonl", [make_record("matmul", "M1", {"BLOCK_SIZE_M": 4}, [], outcome="crashed")])
    assert main(["export-best", str(run), "--out", str(tmp_path / "best")]) == 1
    assert "matmul on host: no valid config" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["triton", "triton-rvv"])
def test_export_triton_module_loads_into_triton_autotune(tuning_run, tmp_path: Path, fmt: str) -> None:
    """The module imports with the real Triton; its configs are the winners, default first, and
    @triton.autotune takes them (and Triton_RVV's getter returns them)."""
    import importlib.util

    import triton
    import triton.language as tl

    run = tuning_run("qemu")
    assert main(["export-best", str(run), "--format", fmt, "--out", str(tmp_path / "best")]) == 0
    doc = export_kernel(load_run(run).records)
    assert doc is not None
    spec = importlib.util.spec_from_file_location(f"tuned_{fmt.replace('-', '_')}", tmp_path / "best" / "qemu" /
                                                  "matmul.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert all(isinstance(c, triton.Config) for c in module.CONFIGS)
    assert module.CONFIGS[0].kwargs == doc["default"]["config"]
    # each distinct winner once, the default (most common winner) first
    expected = {doc["default"]["config_id"]: doc["default"]["config"]}
    for entry in doc["cases"].values():
        expected.setdefault(entry["config_id"], entry["config"])
    assert [c.kwargs for c in module.CONFIGS] == list(expected.values())
    assert module.CONFIG_BY_CASE["M256"].kwargs == doc["cases"]["M256"]["config"]

    @triton.jit
    def copy_kernel(x_ptr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK_SIZE_M), tl.load(x_ptr + tl.arange(0, BLOCK_SIZE_M)))

    tuned = triton.autotune(configs=module.CONFIGS, key=["x_ptr"])(copy_kernel)
    assert len(tuned.configs) == len(module.CONFIGS)
    if fmt == "triton-rvv":
        assert [c.kwargs for c in module.get_matmul_kernel_autotune_config()] == [c.kwargs for c in module.CONFIGS]
    else:
        assert not hasattr(module, "get_matmul_kernel_autotune_config")
