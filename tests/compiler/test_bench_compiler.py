"""`rvtune bench-compiler` at toy sizes: the table's rows, figures that are numbers, the JSON copy, and the
references it compares against computing the same thing as the kernels (no timing assertions)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from pytest_rvtune.cli import bench_compiler, main
from pytest_rvtune.spec import load_kernel_module

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def test_bench_compiler_prints_one_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    code = main(["bench-compiler", "--kernels", str(KERNELS), "--size", "48", "--qemu-size", "32", "24",
                 "--max-configs", "1", "--runs", "1", "--skip-torch", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "matmul 48^3 fp32, GFLOP/s" in text and "vector share" in text
    assert "matmul 32^3 fp32, kernel insns / FLOP" in text and "matmul 24^3 fp32, kernel insns / FLOP" in text
    rows = json.loads(out.read_text())
    assert [r["target"] for r in rows] == ["host"] + ["qemu rv64gcv VLEN 256"] * 4
    gflops, blas = float(rows[0]["ours"]), float(rows[0]["reference"].split()[0])
    assert gflops > 0 and blas > 0
    for row in (rows[1], rows[3]):
        ipf, hand = float(row["ours"]), float(row["reference"].split()[0])
        other = float(row["note"].rsplit(": ", 1)[1])  # the other hand-written tiling, named in the note
        # at most 64 FLOPs per instruction (a 32-float vector fused multiply-add); the better kernel is the ref
        assert 1 / 64 < ipf < 10 and 1 / 64 < hand <= other < 10
        assert "LMUL8" in row["reference"] + row["note"] and "LMUL4" in row["reference"] + row["note"]
    assert 0 < float(rows[2]["ours"].rstrip("%")) <= 100


def test_missing_kernels_dir_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench-compiler", "--kernels", str(tmp_path), "--skip-torch", "--skip-qemu"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{tmp_path / 'matmul.py'} not found" in err


def test_torch_moe_reference_computes_the_kernel_module_answer() -> None:
    spec = load_kernel_module(KERNELS / "fused_moe.py")
    variant = spec.variant_of(spec.configs[0].kwargs if hasattr(spec.configs[0], "kwargs") else spec.configs[0])
    inputs = spec.make_inputs("small", variant)
    want = spec.reference(inputs, "small", variant)["c"]
    got = bench_compiler.torch_moe_fn(inputs)()
    assert torch.allclose(got.reshape(want.shape), want, atol=1e-4, rtol=1e-4)


def test_torch_flash_reference_computes_the_kernel_module_answer() -> None:
    spec = load_kernel_module(KERNELS / "flash_attention_fwd.py")
    variant = {"IS_CAUSAL": True}
    case = spec.case("small", variant)
    inputs = spec.make_inputs("small", variant)
    want = spec.reference(inputs, "small", variant)["out"]
    got = bench_compiler.torch_flash_fn(inputs, case, float(spec.module.sm_scale(case)))()
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)
    assert not math.isnan(float(got.sum()))
