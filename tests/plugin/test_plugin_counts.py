"""Counts under QEMU as sessions use them: the whole launch is charged (libc work included) and ranks configs,
an unchanged item is measured once (a warm re-run starts no QEMU), and emulated runs overlap across workers.

Real Triton frontend, our compiler, clang-19 and QEMU with the icount plugin (RVTUNE_TOOLS_DIR)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import KERNEL_TEMPLATE, by_kernel, kernel_source, read_results

from pytest_rvtune import paths
from pytest_rvtune.counters import parse_icount
from pytest_rvtune.results.export import case_winner
from pytest_rvtune.results.report import case_report
from pytest_rvtune.results.runs import group_by_problem, load_run
from pytest_rvtune.run_options import RunOptions
from pytest_rvtune.toolchain import find_tool, qemu_command

# The kernel's work is mostly libm's: tl.log lowers to a call of logf for every element, so most of the launch's
# instructions are executed outside the kernel symbol. (Tile zeroing used to call memset; the lowering now fills
# tiles itself, so libm is the libc work generated code still hands out.)
LIBM_BODY = (
    "    x = tl.load(x_ptr + offs, mask=mask)\n"
    "    tl.store(y_ptr + offs, tl.log(tl.abs(x) + 1.0) + 1.0, mask=mask)"
)


def libm_kernel(name: str) -> str:
    return KERNEL_TEMPLATE.format(name=name, body=LIBM_BODY, ref="torch.log(x.double().abs() + 1.0) + 1.0",
                                  configs=[64], loops=0)


def _symbol_count(elf: str, argv: list[str], runs: int, symbol: str, out: Path) -> float:
    """Instructions executed inside ``symbol`` in one run of the harness with ``runs`` timed launches."""
    options = RunOptions(warmup=0, runs=runs).harness_args()
    plugin = f"{paths.icount_plugin()},out={out},symbol={symbol}"
    done = subprocess.run([*qemu_command(), "-plugin", plugin, elf, *options, *argv], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return parse_icount(out.read_text(), source=str(out))["kernel_insns"]


def test_work_a_kernel_hands_to_libc_is_charged_to_the_launch(project: pytest.Pytester, tmp_path: Path) -> None:
    (project.path / "kernels" / "pc_libm.py").write_text(libm_kernel("pc_libm"))
    # three launches (one is the default under emulation): the per-launch division is what is checked
    result = project.runpytest("--rvtune-case", "emu", "--rvtune-results", "run.jsonl", "--benchmark-disable",
                               "--rvtune-warmup", "1", "--rvtune-runs", "2")
    result.assert_outcomes(passed=1)
    [record] = read_results(project.path / "run.jsonl")
    counters = record["counters"]
    # per launch and exact: the plugin saw every launch the harness made
    assert record["counted_launches"] == record["launches"] == 3
    assert record["counters_total"]["launch_insns"] == 3 * counters["launch_insns"]

    # logf's instructions per launch, measured on their own (two launches minus one: whatever the harness
    # itself may call at start-up cancels out)
    elf, argv = record["rerun"]["elf"], record["rerun"]["argv"]
    # glibc's logf has aliases at the same address (__logf, __ieee754_logf, logf32) and QEMU names the code by
    # one of them, which one depends on the symbol table's order: count under each, one of them has it all.
    libm = max(_symbol_count(elf, argv, 2, name, tmp_path / "2.txt")
               - _symbol_count(elf, argv, 1, name, tmp_path / "1.txt")
               for name in ("logf", "__logf", "__ieee754_logf", "logf32"))
    assert libm > counters["kernel_insns"] / 2  # a real share of the work is in libc
    # The launch is the kernel plus logf plus the grid walk (5 programs: a few dozen instructions each),
    # within 2 %; the in-kernel count misses logf entirely.
    assert counters["launch_insns"] == pytest.approx(counters["kernel_insns"] + libm, rel=0.02)
    # the whole process (reading the golden files) is more than its launches
    assert counters["insns"] > counters["launch_insns"]


# Two configs of one function ((|x| + 1)^2), one with its work in libm (logf outside the kernel symbol, exp inside),
# one with it all inside the kernel (a runtime loop of exact multiplications by one): the in-kernel count prefers
# the libm config, the whole launch the other. (layer_norm was the example of such a flip; since its tiles
# are filled without memset and its where-masks and accumulators stay in the fused loops, its configs no longer
# disagree, so the flip is built here on purpose.)
FLIP_KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def pc_flip_kernel(x_ptr, y_ptr, n, loops, one, BLOCK: tl.constexpr, LIBM: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.abs(tl.load(x_ptr + offs, mask=mask, other=1.0)) + 1.0
    if LIBM:
        y = tl.exp(tl.log(a) * 2.0)
    else:
        y = a * a
        for _ in range(loops):
            y = y * one
    tl.store(y_ptr + offs, y, mask=mask)


def get_pc_flip_kernel_autotune_config():
    return [triton.Config({"BLOCK": 64, "LIBM": m}) for m in (0, 1)]


CASES = {"emu": dict(n=300, loops=500)}
TOLERANCE = dict(atol=1e-5, rtol=1e-5)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(case["n"], generator=g), "y": torch.empty(case["n"])}


def reference(inputs, case):
    return {"y": ((inputs["x"].double().abs() + 1.0) ** 2).float()}


def launch(kernel, inputs, case):
    grid = lambda META: (triton.cdiv(case["n"], META["BLOCK"]),)  # noqa: E731
    kernel[grid](inputs["x"], inputs["y"], case["n"], case["loops"], 1.0)
'''


def test_a_ranking_follows_the_whole_launch_where_the_kernel_count_disagrees(project: pytest.Pytester) -> None:
    (project.path / "kernels" / "pc_flip.py").write_text(FLIP_KERNEL)
    result = project.runpytest("-n", "2", "--rvtune-case", "emu", "--rvtune-results", "run.jsonl",
                               "--benchmark-disable", "--rvtune-rank-by", "launch_insns")
    result.assert_outcomes(passed=2)
    run = load_run(project.path / "run.jsonl")
    [group] = group_by_problem(run.records).values()
    assert len(group) == 2 and all(r.counters["launch_insns"] > r.counters["kernel_insns"] for r in group)

    def by(counter: str) -> list[str]:
        return [r.config_id for r in sorted(group, key=lambda r: (r.counters[counter], r.config_id))]

    # The counts disagree (if they did not, this test could not tell the metrics apart).
    assert by("kernel_insns") == ["BLOCK=64-LIBM=1", "BLOCK=64-LIBM=0"]
    assert by("launch_insns") == ["BLOCK=64-LIBM=0", "BLOCK=64-LIBM=1"]
    # by default the X60 model's cycles rank them, also a figure of the whole launch
    assert case_report(group, common_id=None).metric == "x60_cycles"
    report = case_report(group, common_id=None, rank_by="launch_insns")
    assert report.metric == "launch_insns"
    assert [row["config"] for row in report.rows] == by("launch_insns")
    winner = case_winner(group, rank_by="launch_insns")
    assert winner is not None and winner["ranked_by"] == "launch_insns"
    assert winner["config_id"] == "BLOCK=64-LIBM=0"
    # the session ends with the ranking --rvtune-rank-by asked for, then says where the rest is
    joined(result).fnmatch_lines([
        "rvtune ranking, by launch_insns (instructions per launch, counted under emulation*",
        "  pc_flip / emu on qemu: 1. BLOCK=64-LIBM=0 *  2. BLOCK=64-LIBM=1 *; worst/best *x over 2 configs*",
        "  all configs: rvtune report *run.jsonl",
        "rvtune: 2 passed, *",
    ])


def joined(result: pytest.RunResult) -> pytest.LineMatcher:
    """The session's output with each ranking line that was broken to fit 120 columns joined back together
    (its continuation lines are indented six spaces; the ranking's title and notes wrap with four)."""
    lines: list[str] = []
    for line in result.stdout.lines:
        if line.startswith("      ") and line.strip() and lines:
            lines[-1] += " " + line.strip()
        elif line.startswith("    ") and not line.startswith("     ") and line.strip() and lines:
            lines[-1] += " " + line.strip()  # a wrapped title or note
        else:
            lines.append(line)
    return pytest.LineMatcher(lines)


@pytest.fixture
def counted_qemu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """qemu-riscv64 on PATH as a wrapper that logs every run (not `--version`) to the returned file."""
    real = find_tool("qemu-riscv64")
    log = tmp_path / "qemu-runs.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "qemu-riscv64"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = --version ] || echo "$*" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


def _runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_warm_rerun_of_unchanged_items_runs_no_qemu(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                                    counted_qemu: Path) -> None:
    add_kernel("pc_cache", configs=(16, 32))
    common = ("--rvtune-case", "small", "--benchmark-disable")
    cold = project.runpytest(*common, "--rvtune-results", "cold.jsonl")
    cold.assert_outcomes(passed=2)
    assert _runs(counted_qemu) == 2
    first = by_kernel(read_results(project.path / "cold.jsonl"))
    assert not any(r["counts_cached"] for r in first.values())

    warm = project.runpytest(*common, "--rvtune-results", "warm.jsonl")
    warm.assert_outcomes(passed=2)
    assert _runs(counted_qemu) == 2  # nothing ran again
    again = by_kernel(read_results(project.path / "warm.jsonl"))
    assert all(r["counts_cached"] for r in again.values())
    for key, record in again.items():
        assert record["counters"] == first[key]["counters"] and record["checks"] == first[key]["checks"]
        assert record["elf_sha256"] == first[key]["elf_sha256"]

    # another argv (one more timed run) is another measurement: QEMU runs again, once per item
    more = project.runpytest(*common, "--rvtune-runs", "3", "--rvtune-results", "more.jsonl")
    more.assert_outcomes(passed=2)
    assert _runs(counted_qemu) == 4
    assert not any(r["counts_cached"] for r in read_results(project.path / "more.jsonl"))


def test_qemu_items_run_at_the_same_time_on_two_workers(project: pytest.Pytester,
                                                        add_kernel: Callable[..., Path]) -> None:
    # Emulated runs count instructions, which a neighbour does not change: no target lock, so the two workers'
    # QEMU runs overlap. Each run takes seconds (the "slow" body, 60 timed launches), far longer than a build
    # from the cache, so with the old exclusive lock they never could.
    add_kernel("pc_parallel", kind="slow", configs=(16, 32, 64, 128))
    result = project.runpytest("-n", "2", "--rvtune-case", "small", "--rvtune-runs", "60",
                               "--rvtune-results", "run.jsonl", "--benchmark-disable")
    result.assert_outcomes(passed=4)
    records = read_results(project.path / "run.jsonl")
    assert not any(r["counts_cached"] for r in records)
    spans = [r["run_span"] for r in records]
    overlapping = [(a, b) for a, b in itertools.combinations(spans, 2) if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, spans


def test_identical_builds_are_one_result(project: pytest.Pytester, add_kernel: Callable[..., Path],
                                         counted_qemu: Path) -> None:
    # UNUSED is a constexpr the kernel never reads: the three configs of each BLOCK build the same code, so they
    # link one ELF, QEMU runs it once, and the summary lists one result with the other configs as its aliases.
    source = kernel_source("pc_alias").replace("BLOCK: tl.constexpr)", "BLOCK: tl.constexpr, UNUSED: tl.constexpr)")
    source = source.replace('[triton.Config({"BLOCK": b}) for b in [16, 32]]',
                            '[triton.Config({"BLOCK": b, "UNUSED": u}) for b in (16, 32) for u in (1, 2, 3)]')
    assert "UNUSED" in source and '"UNUSED": u' in source
    add_kernel("pc_alias", source=source)
    result = project.runpytest("--rvtune-case", "small", "--rvtune-results", "run.jsonl", "--benchmark-disable")
    result.assert_outcomes(passed=6)
    assert _runs(counted_qemu) == 2  # one run per distinct build
    records = read_results(project.path / "run.jsonl")
    elves = {r["config"]["BLOCK"]: {r2["elf_sha256"] for r2 in records if r2["config"]["BLOCK"] == r["config"]["BLOCK"]}
             for r in records}
    assert all(len(shas) == 1 for shas in elves.values()) and elves[16] != elves[32]
    assert sum(not r["counts_cached"] for r in records) == 2  # the others took the first one's run
    joined(result).fnmatch_lines([
        "  pc_alias / small on qemu: 1. BLOCK=* (= BLOCK=*-UNUSED=*, BLOCK=*-UNUSED=*)*2. BLOCK=* (= *); "
        "worst/best *x over 6 configs, 2 distinct*",
    ])


def test_session_ends_with_the_ranking_then_the_labelled_emulated_table(project: pytest.Pytester,
                                                                        add_kernel: Callable[..., Path]) -> None:
    add_kernel("pc_table", configs=(16, 32))
    result = project.runpytest("--rvtune-case", "small", "--rvtune-results", "run.jsonl",
                               "--benchmark-json=bench.json")
    result.assert_outcomes(passed=2)
    joined(result).fnmatch_lines([
        "rvtune ranking, by x60_cycles (modelled SpacemiT X60 cycles per launch*",
        "  pc_table / small on qemu: 1. BLOCK=* *  2. BLOCK=* *; worst/best *x over 2 configs; default BLOCK=16 *",
        "  all configs: rvtune report *run.jsonl",
        "  (pytest-benchmark's tables below show the modelled SpacemiT X60 time of emulated items*",
        "*benchmark 'pc_table-small (modelled SpacemiT X60 time: x60_cycles at 1.6 GHz, not measured)': 2 tests*",
        "rvtune: 2 passed, *",
    ])
    saved = json.loads((project.path / "bench.json").read_text())["benchmarks"]
    assert all(b["extra_info"]["counters"]["launch_insns"] > 0 for b in saved)  # the JSON keeps every counter
    # pytest-benchmark's samples are the modelled chip's time of one launch: x60_cycles at 1.6 GHz
    for bench in saved:
        modelled_s = bench["extra_info"]["counters"]["x60_cycles"] / 1.6e9
        assert bench["stats"]["min"] == pytest.approx(modelled_s) == bench["stats"]["max"]
    # and the session-end ranking is pytest-benchmark's order
    ranked = sorted(saved, key=lambda b: b["stats"]["median"])
    assert [b["extra_info"]["config_id"] for b in ranked] == [
        r["config_id"] for r in sorted(read_results(project.path / "run.jsonl"),
                                       key=lambda r: r["counters"]["x60_cycles"])]
