"""Guard zones and NaN reporting of the C harness, as a real rv64 ELF under QEMU (issue 15, faults 1 and 2).

The kernel is a few lines of hand-written C that stores over [lo, hi) of every output, so a test chooses
exactly how far past (or before) each buffer it writes; the harness must name the buffer, the side and
the number of elements overwritten, for every dtype, from 1 to 64 elements out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_harness import _Param, run, write_txt

from pytest_rvtune.compiler.launcher import consts_source, launcher_sources
from pytest_rvtune.harness import HEADER_DIR
from pytest_rvtune.harness.generate import HarnessArg, HarnessError, argv, generate
from pytest_rvtune.harness.output import parse_harness_output
from pytest_rvtune.targets.base import RunResult
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain
from pytest_rvtune.verdict import judge

SYMBOL = "gk_kernel"
# y copies x (past x's end it copies x's canaries: y's must still differ), z[i] = i in fp64, b[i] = 7 in i8,
# h copies hx in fp16: one output per element size.
KERNEL_C = r"""
#include <stdint.h>
void gk_kernel(float *x, float *y, double *z, int8_t *b, uint16_t *hx, uint16_t *h, int32_t lo, int32_t hi,
               int32_t pid_x, int32_t pid_y, int32_t pid_z, uint32_t gx, uint32_t gy, uint32_t gz) {
  (void)pid_x; (void)pid_y; (void)pid_z; (void)gx; (void)gy; (void)gz;
  for (int32_t i = lo; i < hi; i++) { y[i] = x[i]; z[i] = (double)i; b[i] = 7; h[i] = hx[i]; }
}
"""
ARGS = [HarnessArg("x", "*fp32", "in"), HarnessArg("y", "*fp32", "out"), HarnessArg("z", "*fp64", "out"),
        HarnessArg("b", "*i8", "out"), HarnessArg("hx", "*fp16", "in"), HarnessArg("h", "*fp16", "out"),
        HarnessArg("lo", "i32", "scalar"), HarnessArg("hi", "i32", "scalar")]
_C_TYPES = {"*fp32": "float *", "*fp64": "double *", "*i8": "int8_t *", "*fp16": "uint16_t *", "i32": "int32_t"}
OUTPUTS = ("y", "z", "b", "h")
N = 10


@pytest.fixture(scope="module")
def elf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("guard_elf")
    tc = Toolchain.for_isa(RISCV_ISA)
    src = launcher_sources(SYMBOL, [_Param(a.name, _C_TYPES[a.ttype]) for a in ARGS], ["BLOCK"])
    (d / src.header_name).write_text(src.header)
    files = {"kernel.c": KERNEL_C, src.launcher_name: src.launcher_c,
             "consts.c": consts_source(SYMBOL, {"BLOCK": 1}), "harness.c": generate(SYMBOL, ARGS)}
    objects = []
    for name, text in files.items():
        (d / name).write_text(text)
        tc.compile(d / name, d / f"{name}.o", ("-Wall", "-Wextra", "-Werror", f"-I{HEADER_DIR}", f"-I{d}"))
        objects.append(d / f"{name}.o")
    tc.link(objects, d / "gk.elf")
    return d / "gk.elf"


def guard_run(elf: Path, tmp_path: Path, lo: int, hi: int):
    """Run over [lo, hi) with golden files right for the in-bounds part (the rest of y is zero)."""
    x = [0.25 * i + 1.0 for i in range(N)]
    inside = range(max(lo, 0), min(hi, N))
    files = {
        "x": write_txt(tmp_path / "x.txt", 1, N, x), "hx": write_txt(tmp_path / "hx.txt", 1, N, x),
        "y": write_txt(tmp_path / "y.txt", 1, N, [x[i] if i in inside else 0.0 for i in range(N)]),
        "h": write_txt(tmp_path / "h.txt", 1, N, [x[i] if i in inside else 0.0 for i in range(N)]),
        "z": write_txt(tmp_path / "z.txt", 1, N, [float(i) if i in inside else 0.0 for i in range(N)]),
        "b": write_txt(tmp_path / "b.txt", 1, N, [7 if i in inside else 0 for i in range(N)], "{:d}"),
    }
    args = argv(ARGS, (1,), {"lo": lo, "hi": hi}, {"x": files["x"], "hx": files["hx"]},
                {k: files[k] for k in OUTPUTS}, atol=0.0, rtol=0.0)
    return run(elf, "--warmup", "1", "--runs", "1", *args)


def verdict_of(r):
    parsed = parse_harness_output(r.stdout)
    return judge(RunResult(returncode=r.returncode, samples_ns=parsed.samples_ns, checks=parsed.checks,
                           errors=parsed.errors, stdout=r.stdout), what="gk", timeout=10)


def test_in_bounds_stores_leave_every_guard_intact(elf, tmp_path):
    r = guard_run(elf, tmp_path, 0, N)
    assert r.returncode == 0, r.stdout
    assert set(r.checks) == set(OUTPUTS)  # one value check per output, no guard line


@pytest.mark.parametrize("over", [1, 5, 64])
def test_a_store_past_the_end_names_the_buffer_the_side_and_the_count(elf, tmp_path, over):
    r = guard_run(elf, tmp_path, 0, N + over)
    assert r.returncode == 1, r.stdout
    for name in OUTPUTS:  # every dtype (1, 2, 4 and 8 bytes): the values in bounds are right
        assert r.checks[name]["status"] == "ok", r.stdout
        guard = r.checks[f"{name}:after"]
        assert (guard["status"], guard["first_bad"], guard["count"]) == ("bad", "0", str(over)), r.stdout
        assert f"{name}:before" not in r.checks
    assert "x:after" not in r.checks  # x was only read past its end: reads are not detected


@pytest.mark.parametrize("under", [1, 3, 64])
def test_a_store_before_the_start_is_caught_too(elf, tmp_path, under):
    r = guard_run(elf, tmp_path, -under, N)
    assert r.returncode == 1, r.stdout
    for name in OUTPUTS:
        guard = r.checks[f"{name}:before"]
        assert (guard["status"], guard["first_bad"], guard["count"]) == ("bad", "0", str(under)), r.stdout
        assert f"{name}:after" not in r.checks


def test_a_store_far_past_the_end_is_caught_and_counted_from_the_edge(elf, tmp_path):
    # writes elements N+100 .. N+109 only (lo > N): the nearest overwritten canary is 100 past the end
    r = guard_run(elf, tmp_path, N + 100, N + 110)
    guard = r.checks["y:after"]
    assert (guard["first_bad"], guard["count"]) == ("100", "10"), r.stdout
    assert "y: 10 elements written after its end, starting 100 elements after it" in verdict_of(r).message


def test_the_verdict_names_the_buffer_side_and_count(elf, tmp_path):
    r = guard_run(elf, tmp_path, 0, N + 5)
    verdict = verdict_of(r)
    assert verdict.outcome == "wrong"
    assert "gk: out-of-bounds store" in verdict.message
    assert "y: 5 elements written after its end, starting right after it" in verdict.message, verdict.message
    assert "max abs error" not in verdict.message  # the values in bounds were right


def test_a_label_with_a_colon_is_refused():
    with pytest.raises(HarnessError, match="colons"):
        generate(SYMBOL, [HarnessArg("y", "*fp32", "out", label="y:after")])


def test_nan_output_is_reported_as_nan_at_its_first_index(elf, tmp_path):
    # x[3] is NaN in the input, so y[3] (a copy) is NaN where the expected file holds 1.75; y[1] is also wrong
    # (by 1): the check line says nan and points at the NaN, not at the first mismatch
    x = [0.25 * i + 1.0 for i in range(N)]
    x_nan = [float("nan") if i == 3 else v for i, v in enumerate(x)]
    expected_y = [v + 1.0 if i == 1 else v for i, v in enumerate(x)]
    files = {"x": write_txt(tmp_path / "x.txt", 1, N, x_nan), "hx": write_txt(tmp_path / "hx.txt", 1, N, x),
             "y": write_txt(tmp_path / "y.txt", 1, N, expected_y), "h": write_txt(tmp_path / "h.txt", 1, N, x),
             "z": write_txt(tmp_path / "z.txt", 1, N, [float(i) for i in range(N)]),
             "b": write_txt(tmp_path / "b.txt", 1, N, [7] * N, "{:d}")}
    args = argv(ARGS, (1,), {"lo": 0, "hi": N}, {"x": files["x"], "hx": files["hx"]},
                {k: files[k] for k in OUTPUTS}, atol=0.0, rtol=0.0)
    r = run(elf, "--runs", "1", *args)
    y = r.checks["y"]
    assert (y["status"], y["max_abs"], y["max_rel"], y["first_bad"], y["count"]) == ("bad", "nan", "nan", "3", "2")
    verdict = verdict_of(r)
    assert verdict.outcome == "wrong"
    assert "y: NaN where a number was expected, first at index 3; 2 elements wrong" in verdict.message, verdict.message
    assert "inf" not in verdict.message
