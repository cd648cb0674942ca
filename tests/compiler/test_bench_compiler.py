"""`rvtune bench-compiler` at toy sizes: the table's rows, figures that are numbers, the JSON copy, and the
references it compares against computing the same thing as the kernels (no timing assertions)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from pytest_rvtune import bench_compiler
from pytest_rvtune.cli import main
from pytest_rvtune.spec import load_kernel_module

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def test_bench_compiler_prints_one_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    code = main(["bench-compiler", "--kernels", str(KERNELS), "--size", "48", "--qemu-size", "32",
                 "--max-configs", "1", "--runs", "1", "--skip-torch", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "matmul 48^3 fp32, GFLOP/s" in text and "kernel insns / FLOP" in text and "vector share" in text
    rows = json.loads(out.read_text())
    assert [r["target"] for r in rows] == ["host", "qemu rv64gcv VLEN 256", "qemu rv64gcv VLEN 256"]
    gflops, blas = float(rows[0]["ours"]), float(rows[0]["reference"].split()[0])
    assert gflops > 0 and blas > 0
    ipf, hand = float(rows[1]["ours"]), float(rows[1]["reference"].split()[0])
    # a 32^3 matmul needs at least one instruction per 2 * 32 multiply-adds of a 32-float vector op
    assert 1 / 64 < ipf < 10 and 1 / 64 < hand < 10
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
