"""Problem keys (PROBLEM_KEYS, e.g. flash attention's IS_CAUSAL): config keys that define the problem.

Configs of different problems are never ranked against each other: report, plots, perf_stats.csv, export-best
and correlate work per (target, kernel, case, problem); compare still matches items by config id. Also the
kernel-module side: KernelSpec.problem_keys / problem_of and their validation.
"""

from __future__ import annotations

import csv
import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from results_data import make_record, measure, write_jsonl

from pytest_rvtune.cli import main
from pytest_rvtune.results.compare import Thresholds, compare_runs
from pytest_rvtune.results.correlation import correlation_rows
from pytest_rvtune.results.records import RunFileError, record_from_dict
from pytest_rvtune.results.report import build_case_reports
from pytest_rvtune.results.runs import load_run
from pytest_rvtune.spec import KernelModuleError, load_kernel_module

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
PAIRS = [(bm, bn) for bm in (16, 32, 64) for bn in (16, 32)]


def kernel_insns(bm: int, bn: int, causal: bool) -> float:
    """Exact 'instruction counts' where causal does about half the work, so EVERY causal config beats every
    non-causal one, and the two problems have different best block sizes: (16, 32) causal, (32, 16) not."""
    if causal:
        return 1000.0 * (abs(bm - 16) / 16 + abs(bn - 32) / 16 + 5)
    return 1000.0 * (abs(bm - 32) / 16 + abs(bn - 16) / 16 + 10)


@pytest.fixture(scope="module")
def samples() -> dict[tuple[int, int], list[float]]:
    return dict(zip(PAIRS, measure(PAIRS, rounds=3), strict=True))


def fa_records(samples: dict[tuple[int, int], list[float]], cases: tuple[str, ...] = ("emu",),
               bump: tuple[int, int, bool] | None = None) -> list[dict]:
    """A QEMU tuning run of a flash-attention-like kernel: every (BM, BN) for both IS_CAUSAL values, with the
    ``problem`` field the plugin records. ``bump`` makes one config 20 % worse (a regression)."""
    records = []
    for case in cases:
        for causal in (False, True):
            for bm, bn in PAIRS:
                insns = kernel_insns(bm, bn, causal) * (1.2 if bump == (bm, bn, causal) else 1.0)
                counters = {"kernel_insns": insns, "insns": insns + 50_000, "vector_insns": insns / 4 + bn}
                time_scale = 0.5 if causal else 1.0  # causal runs take about half as long, as they would
                records.append(make_record(
                    "flash_attention_fwd", case, {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "IS_CAUSAL": causal},
                    [s * time_scale for s in samples[(bm, bn)]], target="qemu", counters=counters,
                    problem={"IS_CAUSAL": causal}))
    return records


def best_of(records: list[dict], causal: bool, case: str = "emu") -> str:
    mine = [r for r in records if r["problem"]["IS_CAUSAL"] is causal and r["case"] == case]
    return min(mine, key=lambda r: r["counters"]["kernel_insns"])["config_id"]


# --- ranking, winners, defaults ---------------------------------------------------------------------------


def test_each_problem_is_ranked_on_its_own(samples, tmp_path: Path, capsys) -> None:
    records = fa_records(samples, cases=("emu", "bench"))
    run = write_jsonl(tmp_path / "fa.jsonl", records)
    reports = build_case_reports(load_run(run))
    assert [(r.case, r.problem) for r in reports] == [
        ("emu", {"IS_CAUSAL": False}), ("emu", {"IS_CAUSAL": True}),
        ("bench", {"IS_CAUSAL": False}), ("bench", {"IS_CAUSAL": True})]
    for rep in reports:
        causal = rep.problem["IS_CAUSAL"]
        assert len(rep.rows) == len(PAIRS)  # only its own problem's configs
        assert all(row["config"].endswith(f"IS_CAUSAL={causal}") for row in rep.rows)
        assert rep.rows[0]["config"] == best_of(records, causal, rep.case)
        counts = [kernel_insns(bm, bn, causal) for bm, bn in PAIRS]
        assert rep.rows[0]["vs_worst"] == pytest.approx(max(counts) / min(counts))  # worst of the same problem
        assert rep.rows[0]["vs_common"] == 1.0  # the most common winner is per problem: this problem's winner
    # a mixed ranking would make the causal winner the non-causal case's best: it must not
    assert best_of(records, False) != best_of(records, True).replace("True", "False")

    assert main(["report", str(run), "--format", "json", "--no-plots", "--out", str(tmp_path / "rep")]) == 0
    doc = json.loads(capsys.readouterr().out)
    best = {(b["case"], b["problem"]): b for b in doc["best"]}
    assert len(best) == 4
    for causal in (False, True):
        row = best[("emu", f"IS_CAUSAL={causal}")]
        assert row["best_config"] == row["common_winner"] == best_of(records, causal)
    assert [c["problem"] for c in doc["cases"]] == [{"IS_CAUSAL": False}, {"IS_CAUSAL": True}] * 2

    assert main(["report", str(run), "--no-plots", "--out", str(tmp_path / "rep")]) == 0
    text = capsys.readouterr().out
    assert "flash_attention_fwd / emu IS_CAUSAL=True on qemu: ranked by kernel_insns" in text
    assert "Best config per case and problem" in text


def test_heatmaps_and_perf_stats_per_problem(samples, tmp_path: Path) -> None:
    records = fa_records(samples)
    run = write_jsonl(tmp_path / "fa.jsonl", records)
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out)]) == 0
    folder = out / "qemu" / "flash_attention_fwd" / "emu"
    assert sorted(p.name for p in folder.iterdir()) == [
        "counters_vs_time-IS_CAUSAL=False.png", "counters_vs_time-IS_CAUSAL=True.png",
        "heatmap-IS_CAUSAL=False.png", "heatmap-IS_CAUSAL=True.png",
        "perf_stats-IS_CAUSAL=False.csv", "perf_stats-IS_CAUSAL=True.csv"]
    assert (folder / "heatmap-IS_CAUSAL=True.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for causal in (False, True):
        with open(folder / f"perf_stats-IS_CAUSAL={causal}.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        expected = sorted(kernel_insns(bm, bn, causal) for bm, bn in PAIRS)
        assert sorted(float(r["kernel_insns"]) for r in rows) == expected  # this problem's items, all of them


def test_heatmap_title_names_the_problem_and_no_other_param(samples, tmp_path: Path) -> None:
    from pytest_rvtune.results.plots import heatmap_figure
    from pytest_rvtune.results.runs import group_by_problem

    records = fa_records(samples)
    run = load_run(write_jsonl(tmp_path / "fa.jsonl", records))
    group = group_by_problem(run.records)[("qemu", "flash_attention_fwd", "emu", "IS_CAUSAL=True")]
    fig = heatmap_figure(group)
    assert fig is not None
    ax = fig.axes[0]
    title = ax.get_title()
    # the title is the user's only clue to the problem; IS_CAUSAL is fixed here, not "at its best"
    assert "emu IS_CAUSAL=True" in title and "at their best" not in title
    assert (ax.get_ylabel(), ax.get_xlabel()) == ("BLOCK_SIZE_M", "BLOCK_SIZE_N")
    assert f"best (boxed): {best_of(records, True)}" in title


# --- export-best, correlate, compare ----------------------------------------------------------------------


def test_export_best_has_one_tuning_per_problem(samples, tmp_path: Path) -> None:
    records = fa_records(samples, cases=("emu", "bench"))
    run = write_jsonl(tmp_path / "fa.jsonl", records)
    assert main(["export-best", str(run), "--out", str(tmp_path / "best")]) == 0
    doc = json.loads((tmp_path / "best" / "qemu" / "flash_attention_fwd.json").read_text())
    assert doc["problem_keys"] == ["IS_CAUSAL"] and "cases" not in doc and "default" not in doc
    assert set(doc["problems"]) == {"IS_CAUSAL=False", "IS_CAUSAL=True"}
    for causal in (False, True):
        tuning = doc["problems"][f"IS_CAUSAL={causal}"]
        assert tuning["problem"] == {"IS_CAUSAL": causal}
        assert tuning["default"]["config_id"] == best_of(records, causal)
        assert {c: e["config_id"] for c, e in tuning["cases"].items()} == {
            "emu": best_of(records, causal), "bench": best_of(records, causal, "bench")}

    assert main(["export-best", str(run), "--format", "header", "--out", str(tmp_path / "best")]) == 0
    header = tmp_path / "best" / "qemu" / "flash_attention_fwd.h"
    probe = tmp_path / "probe.c"
    # a caller picks the problem by pasting its own IS_CAUSAL macro into the name
    probe.write_text(textwrap.dedent(f"""\
        #include "{header}"
        #define CAUSAL 1
        #define PICK(c, p) RVTUNE_FLASH_ATTENTION_FWD_IS_CAUSAL_ ## c ## _ ## p
        #define TUNED(c, p) PICK(c, p)
        _Static_assert(TUNED(CAUSAL, EMU_BLOCK_SIZE_M) == 16, "causal winner");
        _Static_assert(RVTUNE_FLASH_ATTENTION_FWD_IS_CAUSAL_0_DEFAULT_BLOCK_SIZE_M == 32, "non-causal default");
        _Static_assert(RVTUNE_FLASH_ATTENTION_FWD_IS_CAUSAL_0_BENCH_IS_CAUSAL == 0, "problem key kept");
        """))
    subprocess.run(["clang-19", "-fsyntax-only", "-Wall", "-Werror", str(probe)], check=True)


def test_correlation_per_problem(samples) -> None:
    records = [record_from_dict(r) for r in fa_records(samples)]
    rows = correlation_rows(records)
    assert {r["problem"] for r in rows} == {"IS_CAUSAL=False", "IS_CAUSAL=True"}
    assert all(r["n"] == len(PAIRS) for r in rows)  # never both problems in one coefficient


def test_compare_matches_the_problem_twins_by_config_id(samples, tmp_path: Path) -> None:
    base = load_run(write_jsonl(tmp_path / "base.jsonl", fa_records(samples)))
    new = load_run(write_jsonl(tmp_path / "new.jsonl", fa_records(samples, bump=(16, 32, True))))
    verdicts = compare_runs(base, new, Thresholds())
    assert len(verdicts) == 2 * len(PAIRS)
    regressed = [v for v in verdicts if v.regressed]
    assert [v.key[3] for v in regressed] == ["BLOCK_SIZE_M=16-BLOCK_SIZE_N=32-IS_CAUSAL=True"]
    # the causal twin's own base count, not the non-causal one of the same block sizes
    assert f"kernel_insns {kernel_insns(16, 32, True):,.0f} -> " in regressed[0].message


# --- the results file --------------------------------------------------------------------------------------


def test_problem_field_missing_or_bad(samples, tmp_path: Path) -> None:
    old = make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, samples[(16, 16)])  # written before problem keys
    assert record_from_dict(old).problem == {} and record_from_dict(old).group_label == "M96"
    fa = record_from_dict(fa_records(samples)[-1])
    assert fa.group_label == "emu IS_CAUSAL=True" and fa.group == ("qemu", "flash_attention_fwd", "emu",
                                                                   "IS_CAUSAL=True")
    bad = write_jsonl(tmp_path / "bad.jsonl", [old, {**old, "problem": ["IS_CAUSAL"]}])
    with pytest.raises(RunFileError, match=r"bad\.jsonl:2: problem must be an object"):
        load_run(bad)


# --- the kernel-module contract ----------------------------------------------------------------------------

MODULE = """
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, FLAG: tl.constexpr = False):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def get_scale_kernel_autotune_config():
    return [triton.Config(c) for c in {configs}]


PROBLEM_KEYS = {keys}
CASES = {{"small": dict(n=10)}}


def make_inputs(case, seed):
    return {{"x": torch.rand(case["n"]), "y": torch.empty(case["n"])}}


def reference(inputs, case):
    return {{"y": inputs["x"]}}


def launch(kernel, inputs, case):
    kernel[lambda META: (triton.cdiv(case["n"], META["BLOCK"]),)](inputs["x"], inputs["y"], case["n"])
"""
BOTH = '[{"BLOCK": 4, "FLAG": False}, {"BLOCK": 4, "FLAG": True}, {"BLOCK": 8, "FLAG": True}]'


def module(tmp_path: Path, keys: str, configs: str = BOTH) -> Path:
    path = tmp_path / "scale.py"
    path.write_text(MODULE.format(keys=keys, configs=configs))
    return path


def test_spec_problem_keys_and_problem_of(tmp_path: Path) -> None:
    spec = load_kernel_module(module(tmp_path, '("FLAG",)'))
    assert spec.problem_keys == ("FLAG",)
    assert [spec.problem_of(c) for c in spec.configs] == [{"FLAG": False}, {"FLAG": True}, {"FLAG": True}]
    none = load_kernel_module(module(tmp_path, "()"))
    assert none.problem_keys == () and none.problem_of(none.configs[0]) == {}

    fa = load_kernel_module(KERNELS / "flash_attention_fwd.py")
    assert fa.problem_keys == ("IS_CAUSAL",)
    assert {fa.problem_of(c)["IS_CAUSAL"] for c in fa.configs} == {False, True}
    assert all(fa.problem_of(c) == {"IS_CAUSAL": c["IS_CAUSAL"]} for c in fa.configs)


@pytest.mark.parametrize(("keys", "configs", "cause"), [
    ('("FLAG",)', '[{"BLOCK": 4}, {"BLOCK": 8, "FLAG": True}]',
     "PROBLEM_KEYS names FLAG, which not every config sets (config BLOCK=4 does not)"),
    ('("IS_CAUSAL",)', BOTH, "PROBLEM_KEYS names IS_CAUSAL, which not every config sets"),
    ('"FLAG"', BOTH, "PROBLEM_KEYS must be a tuple of config key names"),
])
def test_spec_rejects_bad_problem_keys(tmp_path: Path, keys: str, configs: str, cause: str) -> None:
    path = module(tmp_path, keys, configs)
    with pytest.raises(KernelModuleError) as info:
        load_kernel_module(path)
    assert str(path) in str(info.value) and cause in str(info.value)
