"""`rvtune bench-compiler` at toy sizes: the table's rows, figures that are numbers, the JSON copy, and the
references it compares against computing the same thing as the kernels (no timing assertions)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from pytest_rvtune.bench import yardsticks
from pytest_rvtune.cli import bench_compiler, main
from pytest_rvtune.spec import load_kernel_module

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def test_bench_compiler_prints_one_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    code = main(["bench-compiler", "--kernels", str(KERNELS), "--size", "48", "--qemu-size", "32", "24",
                 "--max-configs", "1", "--runs", "1", "--skip-torch", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "matmul 48^3 fp32, GFLOP/s" in text and "threadpoolctl: " in text
    assert "matmul 32^3 fp32, launch insns / FLOP" in text and "matmul 24^3 fp32, launch insns / FLOP" in text
    rows = json.loads(out.read_text())
    qemu = [r for r in rows if r["target"].startswith("qemu")]
    assert [r["target"] for r in rows] == ["host"] + ["qemu rv64gcv VLEN 256"] * len(qemu)
    assert float(rows[0]["ours"]) > 0 and float(rows[0]["reference"].split()[0]) > 0
    assert all(len(r["load"].split()) == 3 for r in rows)
    for n in (32, 24):
        mm = [r for r in qemu if r["what"] == f"matmul {n}^3 fp32, launch insns / FLOP"]
        # one row per hand-written tiling and the floor, all against the same figure of ours
        assert len(mm) == len(yardsticks.MATMUL_VARIANTS) + 1 and len({r["ours"] for r in mm}) == 1
        ours = float(mm[0]["ours"])
        refs = [float(r["reference"].split()[0]) for r in mm]
        assert 1 / 64 < ours < 10 and all(1 / 64 < ref < 10 for ref in refs)
        assert min(refs) == pytest.approx(yardsticks.gemm_floor_insns_per_flop(), abs=1e-4)  # the floor is lowest
        for row, ref in zip(mm, refs, strict=True):
            assert float(row["ratio"].rstrip("x")) == pytest.approx(ours / ref, rel=0.01, abs=0.006)  # printed rounded
    for n in (32, 24):  # the X60 model's cycles: ours beside each yardstick's and the peak (1/16 cycle per FLOP)
        x60 = [r for r in qemu if r["what"] == f"matmul {n}^3 fp32, X60 cycles / FLOP"]
        assert len(x60) == len(yardsticks.MATMUL_VARIANTS) + 1 and x60[-1]["reference"] == bench_compiler.X60_PEAK
        assert float(x60[-1]["ratio"].rstrip("x")) == pytest.approx(float(x60[0]["ours"]) * 16, rel=0.01)
        assert all(float(r["reference"].split()[0]) >= 1 / 16 for r in x60)  # nothing beats the chip's peak
    for name in ("softmax", "layer_norm"):
        assert [r for r in qemu if r["what"] == f"{name} 256x512 fp32, X60 cycles / element"]
        (row,) = [r for r in qemu if r["what"].startswith(f"{name} 256x512") and "launch insns" in r["what"]]
        assert 0.1 < float(row["reference"].split()[0]) < float(row["ours"])
    (flash,) = [r for r in qemu if r["what"].startswith("flash attention") and "launch insns" in r["what"]]
    assert 1 / 64 < float(flash["reference"].split()[0]) < 10 and float(flash["ours"]) > 1 / 64
    (moe,) = [r for r in qemu if r["what"] == "fused MoE (M=128 E=8 K=64 N=128 top_k=2), launch insns / FLOP"]
    # no hand-written GEMM beats the floor; ours is a whole launch too
    assert yardsticks.gemm_floor_insns_per_flop() < float(moe["reference"].split()[0]) < 1
    assert float(moe["ours"]) > yardsticks.gemm_floor_insns_per_flop()


@pytest.mark.parametrize("variant", list(yardsticks.MATMUL_VARIANTS))
@pytest.mark.parametrize("n", [13, 40])  # 13: rows left over after the register tile, a column tail, K % 8 != 0
def test_matmul_yardstick_is_right_under_qemu(tmp_path: Path, variant: str, n: int) -> None:
    counts = yardsticks.matmul(n, variant, tmp_path)  # raises YardstickError on a wrong answer
    assert counts.launch_insns > 0 and counts.vector_insns > 0


@pytest.mark.parametrize(("rows", "cols"), [(3, 75), (2, 130)])  # column tails at LMUL 8 (64 floats)
def test_row_yardsticks_are_right_under_qemu(tmp_path: Path, rows: int, cols: int) -> None:
    assert yardsticks.softmax(rows, cols, tmp_path).launch_insns > 0
    assert yardsticks.layer_norm(rows, cols, tmp_path).launch_insns > 0


@pytest.mark.parametrize("causal", [False, True])
def test_flash_yardstick_is_right_under_qemu(tmp_path: Path, causal: bool) -> None:
    # n = 70: a full and a partial 64-key block; d = 24: a head narrower than one LMUL-8 vector
    assert yardsticks.flash_attention(2, 70, 24, causal, tmp_path).launch_insns > 0


@pytest.mark.parametrize(("m", "experts", "k", "n", "top_k", "block_m", "idle"), [
    (13, 4, 20, 70, 2, 4, (2,)),  # an idle expert, a 70-feature row (64 + a tail), experts with 3k+1 / 3k+2 slots
    (10, 3, 70, 24, 3, 8, ()),  # K longer than one LMUL-8 vector when the token rows are packed; top 3
])
def test_moe_yardstick_is_right_under_qemu(tmp_path: Path, m: int, experts: int, k: int, n: int, top_k: int,
                                           block_m: int, idle: tuple[int, ...]) -> None:
    counts = yardsticks.fused_moe(m, experts, k, n, top_k, block_m, tmp_path, idle_experts=idle)
    assert counts.launch_insns > 0 and counts.vector_insns > 0


def test_a_wrong_moe_yardstick_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of rvv_moe.c that drops the routing weight of a tile's third slot is caught by the numpy check."""
    source = yardsticks.MOE_SOURCE.read_text()
    good = "__riscv_vfmul_vf_f32m8(c2, w[slots[2]], vl)"
    assert good in source
    (tmp_path / "rvv_moe.c").write_text(source.replace(good, "c2"))
    monkeypatch.setattr(yardsticks, "MOE_SOURCE", tmp_path / "rvv_moe.c")
    with pytest.raises(yardsticks.YardstickError, match="differs from numpy"):
        yardsticks.fused_moe(9, 2, 8, 16, 2, 4, tmp_path / "build")


def test_a_wrong_yardstick_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy check can fail: a copy of rvv_matmul.c whose 6-row tile uses the wrong A element."""
    source = yardsticks.MATMUL_SOURCE.read_text()
    good_step = "c5 = __riscv_vfmacc_vf_f32m4(c5, a[6 * (kk) + 5]"
    bad = source.replace(good_step, good_step.replace("+ 5]", "+ 4]"))
    assert bad != source
    (tmp_path / "rvv_matmul.c").write_text(bad)
    monkeypatch.setattr(yardsticks, "MATMUL_SOURCE", tmp_path / "rvv_matmul.c")
    with pytest.raises(yardsticks.YardstickError, match="differs from numpy"):
        yardsticks.matmul(12, "6x4k8", tmp_path / "build")


def test_gemm_floor_counts_one_step_of_the_3_row_lmul8_tile() -> None:
    # per K step: 3 vfmacc.vf + 3 flw + 1 vle32 + 1 add for 3 rows x 64 lanes x 2 FLOPs
    assert yardsticks.gemm_floor_insns_per_flop() == pytest.approx(8 / 384)
    assert yardsticks.gemm_floor_insns_per_flop(rows=6, lanes=32) == pytest.approx(14 / 384)


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


def test_x60_rows_set_ours_beside_each_reference_and_the_peak() -> None:
    ours = {"launch_insns": 1000.0, "x60_cycles": 500.0}
    rows = bench_compiler.x60_rows("matmul 8^3 fp32, X60 cycles / FLOP", "M=8", ours, 1000.0,
                                   [("hand A", 250.0), ("hand B", None)])
    # hand B has no x60_cycles: no row; the peak (16 FLOP/cycle) is a row of its own for a per-FLOP measurement
    assert [r.reference for r in rows] == ["0.2500 (hand A)", bench_compiler.X60_PEAK]
    assert [r.ratio for r in rows] == ["2.00x", "8.00x"]  # 0.5 cycles/FLOP against 0.25 and 1/16
    assert bench_compiler.x60_rows("softmax, X60 cycles / element", "N=8", ours, 10.0, []) == []  # no peak
    assert bench_compiler.x60_rows("x, X60 cycles / FLOP", "c", {"launch_insns": 1.0}, 1.0, [("a", 1.0)]) == []
