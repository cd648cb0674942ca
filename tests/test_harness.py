"""The C harness (rvtune_harness.h + the generated generic main) as a real rv64 ELF under QEMU.

The kernel under the harness here is a few lines of hand-written C with the kernel ABI, so these tests
exercise the harness alone: file reading, output reset, checks, samples, options and exit codes. The
launcher around it is the compiler's real generated one. Triton-compiled kernels under the harness are
covered by tests/test_build.py.
"""

from __future__ import annotations

import math
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_rvtune.compiler.launcher import consts_source, launcher_sources
from pytest_rvtune.harness import HEADER_DIR
from pytest_rvtune.harness.generate import HarnessArg, HarnessError, argv, generate
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain, qemu_command

REPO_ROOT = Path(__file__).resolve().parents[1]  # the checkout these tests belong to

SYMBOL = "tk_kernel"

# out[i] += alpha * x[idx[i]] (accumulates: only a reset before every run keeps it one run's worth);
# acc[i] *= 2 (in-out: only a restore before every run keeps it 2 * input). Four elements per program.
KERNEL_C = r"""
#include <stdint.h>
void tk_kernel(float *x, int32_t *idx, float *out, float *acc, int32_t n, float alpha,
               int32_t pid_x, int32_t pid_y, int32_t pid_z, uint32_t gx, uint32_t gy, uint32_t gz) {
  (void)pid_y; (void)pid_z; (void)gx; (void)gy; (void)gz;
  for (int32_t i = pid_x * 4; i < pid_x * 4 + 4 && i < n; i++) {
    out[i] += alpha * x[idx[i]];
    acc[i] *= 2.0f;
  }
}
"""

ARGS = [
    HarnessArg("x", "*fp32", "in"),
    HarnessArg("idx", "*i32", "in"),
    HarnessArg("out", "*fp32", "out"),
    HarnessArg("acc", "*fp32", "inout"),
    HarnessArg("n", "i32", "scalar"),
    HarnessArg("alpha", "fp32", "scalar"),
]


@dataclass(frozen=True)
class _Param:
    name: str
    c_type: str


PARAMS = [_Param("x", "float *"), _Param("idx", "int32_t *"), _Param("out", "float *"),
          _Param("acc", "float *"), _Param("n", "int32_t"), _Param("alpha", "float")]


@pytest.fixture(scope="module")
def elf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test kernel + real launcher + generated harness, linked static for rv64gcv."""
    d = tmp_path_factory.mktemp("harness_elf")
    tc = Toolchain.for_isa(RISCV_ISA)
    src = launcher_sources(SYMBOL, PARAMS, ["BLOCK"])
    (d / src.header_name).write_text(src.header)
    files = {
        "kernel.c": KERNEL_C,
        src.launcher_name: src.launcher_c,
        "consts.c": consts_source(SYMBOL, {"BLOCK": 4}),
        "harness.c": generate(SYMBOL, ARGS),
    }
    objects = []
    for name, text in files.items():
        (d / name).write_text(text)
        obj = d / f"{name}.o"
        tc.compile(d / name, obj, ("-Wall", "-Wextra", "-Werror", f"-I{HEADER_DIR}", f"-I{d}"))
        objects.append(obj)
    tc.link(objects, d / "tk.elf")
    return d / "tk.elf"


def write_txt(path: Path, rows: int, cols: int, values: list, fmt: str = "{:.9g}") -> Path:
    lines = [f"{rows} {cols}"] + [" ".join(fmt.format(v) for v in values[r * cols:(r + 1) * cols])
                                  for r in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Run:
    returncode: int
    stdout: str

    def lines(self, kind: str) -> list[list[str]]:
        return [ln.split()[2:] for ln in self.stdout.splitlines() if ln.startswith(f"RVTUNE {kind} ")]

    @property
    def checks(self) -> dict[str, dict[str, str]]:
        out = {}
        for words in self.lines("check"):
            out[words[0]] = {"status": words[1], **dict(w.split("=", 1) for w in words[2:])}
        return out

    @property
    def error(self) -> str:
        errs = [ln for ln in self.stdout.splitlines() if ln.startswith("RVTUNE error ")]
        assert len(errs) == 1, self.stdout
        return errs[0]


def run(elf: Path, *args: str | Path) -> Run:
    proc = subprocess.run([*qemu_command(), str(elf), *map(str, args)], capture_output=True, text=True,
                          timeout=60, check=False)
    return Run(proc.returncode, proc.stdout)


N = 10
X = [0.5 * i - 1.0 for i in range(N)]
IDX = [N - 1 - i for i in range(N)]  # out[i] = alpha * x[N-1-i]
ACC = [float(i + 1) for i in range(N)]


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    alpha = 2.0
    return {
        "x": write_txt(tmp_path / "x.txt", 1, N, X),
        "idx": write_txt(tmp_path / "idx.txt", 2, N // 2, IDX, "{:d}"),  # shape is free: numel counts
        "out": write_txt(tmp_path / "out.txt", 1, N, [alpha * X[j] for j in IDX]),
        "acc": write_txt(tmp_path / "acc.txt", 1, N, ACC),
        "acc_exp": write_txt(tmp_path / "acc_exp.txt", 1, N, [2 * a for a in ACC]),
    }


def args_for(d: dict[str, Path], *, grid: int = 3, **override: Path) -> list[str | Path]:
    f = {**d, **override}
    return argv(ARGS, (grid,), {"n": N, "alpha": 2.0}, {"x": f["x"], "idx": f["idx"], "acc": f["acc"]},
                {"out": f["out"], "acc": f["acc_exp"]}, atol=1e-6, rtol=1e-6)


def test_correct_run_resets_outputs_every_run_and_prints_one_sample_per_timed_run(elf, data):
    # 3 warm-up + 4 timed runs: an accumulating output and an in-out buffer are still one run's result
    r = run(elf, "--warmup", "3", "--runs", "4", *args_for(data))
    assert r.returncode == 0, r.stdout
    samples = r.lines("sample")
    assert len(samples) == 4
    assert all(int(s[0]) > 0 for s in samples)
    assert r.checks["out"] == {"status": "ok", "max_abs": "0", "max_rel": "0", "first_bad": "-1", "count": "0"}
    assert r.checks["acc"]["status"] == "ok"
    assert r.lines("launches") == [["7"]]


def test_runs_zero_still_runs_once_for_the_check(elf, data):
    r = run(elf, "--warmup", "0", "--runs", "0", *args_for(data))
    assert r.returncode == 0, r.stdout
    assert r.lines("sample") == []
    assert r.checks["out"]["status"] == "ok"
    assert r.lines("launches") == [["1"]]


def test_max_time_samples_span_that_long_in_at_most_max_samples(elf, data):
    # A tiny kernel under QEMU takes microseconds: 0.3 s needs far more runs than 20 samples, so each sample
    # is the mean of many runs; the outputs are still one run's result (reset before every run).
    started = time.monotonic()
    r = run(elf, "--warmup", "3", "--runs", "3", "--max-time", "0.3", "--max-samples", "20", *args_for(data))
    took = time.monotonic() - started
    assert r.returncode == 0, r.stdout
    samples = [int(s[0]) for s in r.lines("sample")]
    [[launches]] = r.lines("launches")
    assert 3 <= len(samples) <= 20
    assert int(launches) > 3 + 2 * len(samples)  # several runs per sample
    assert took > 0.2  # sampling went on for about max-time (sized from the warm-ups; the clock decides)
    assert r.checks["out"]["status"] == "ok" and r.checks["acc"]["status"] == "ok"
    # --runs stays a minimum even when max-time is spent at once
    r = run(elf, "--warmup", "0", "--runs", "5", "--max-time", "1e-9", *args_for(data))
    assert len(r.lines("sample")) == 5 and r.lines("launches") == [["6"]]  # + the sizing run


def test_threads_option_reaches_the_launcher(elf, data):
    r = run(elf, "--threads", "2", "--runs", "1", *args_for(data))
    assert r.returncode == 0, r.stdout
    assert r.checks["out"]["status"] == "ok"


def test_wrong_value_is_flagged_with_first_bad_index_and_count(elf, data, tmp_path):
    wrong = [2.0 * X[j] for j in IDX]
    wrong[6] += 0.25
    wrong[8] -= 1.0
    exp = write_txt(tmp_path / "wrong.txt", 1, N, wrong)
    r = run(elf, "--runs", "1", *args_for(data, out=exp))
    assert r.returncode == 1
    c = r.checks["out"]
    assert (c["status"], c["first_bad"], c["count"]) == ("bad", "6", "2")
    assert float(c["max_abs"]) == pytest.approx(1.0)
    assert r.checks["acc"]["status"] == "ok"  # checks are per output


def test_no_check_exits_zero_on_a_wrong_answer_and_prints_no_check(elf, data, tmp_path):
    exp = write_txt(tmp_path / "wrong.txt", 1, N, [99.0] * N)
    r = run(elf, "--no-check", "--runs", "2", *args_for(data, out=exp))
    assert r.returncode == 0
    assert r.checks == {}
    assert len(r.lines("sample")) == 2


@pytest.mark.parametrize(
    ("got", "expected", "atol", "rtol", "ok"),
    [
        (1.0, 1.0005, 1e-3, 0.0, True),     # |diff| = 5e-4 <= atol
        (1.0, 1.0005, 1e-4, 0.0, False),
        (100.0, 100.05, 0.0, 1e-3, True),   # rtol scales with |expected|: 5e-2 <= 1e-3 * 100.05
        (100.0, 100.05, 0.0, 1e-4, False),
        (100.0, 100.05, 0.04, 1e-4, True),  # atol + rtol*|exp| together: 0.04 + 0.010005 >= 0.05
        (float("nan"), float("nan"), 0.0, 0.0, True),  # NaN equals only NaN
        (float("nan"), 1.0, 1e9, 1e9, False),
        (1.0, float("nan"), 1e9, 1e9, False),
        (float("inf"), float("inf"), 0.0, 0.0, True),
        (float("inf"), float("-inf"), 1e9, 1e9, False),
    ],
)
def test_tolerance_semantics(elf, tmp_path, got, expected, atol, rtol, ok):
    # alpha = 1, idx = identity: out = x, so the kernel's output is exactly `got`
    x = write_txt(tmp_path / "x.txt", 1, 1, [got])
    idx = write_txt(tmp_path / "idx.txt", 1, 1, [0], "{:d}")
    acc = write_txt(tmp_path / "acc.txt", 1, 1, [1.0])
    acc_exp = write_txt(tmp_path / "acc_exp.txt", 1, 1, [2.0])
    exp = write_txt(tmp_path / "exp.txt", 1, 1, [expected])
    args = argv(ARGS, (1,), {"n": 1, "alpha": 1.0}, {"x": x, "idx": idx, "acc": acc},
                {"out": exp, "acc": acc_exp}, atol=atol, rtol=rtol)
    r = run(elf, "--runs", "1", *args)
    assert r.checks["out"]["status"] == ("ok" if ok else "bad"), r.stdout
    assert r.returncode == (0 if ok else 1)
    if not ok:
        assert r.checks["out"]["first_bad"] == "0"


@pytest.mark.parametrize(
    ("name", "content", "line", "what"),
    [
        ("short.txt", "1 10\n1 2 3\n4 5\n", 3, "file is short: 5 values"),
        ("malformed.txt", "1 10\n1 2 3 4\n5 6 seven 8 9 10\n", 3, "malformed number 'seven'"),
        ("header.txt", "ten\n1 2 3\n", 1, "header must be `rows cols`"),
        ("oneheader.txt", "10\n1 2 3 4 5 6 7 8 9 10\n", 1, "fewer than two values on line 1"),
        ("long.txt", "1 3\n1 2 3\n4\n", 3, "more values than the 1 x 3"),
        ("empty.txt", "", 1, "an empty file"),
        ("huge.txt", "99999999999 99999999999\n1\n", 1, "more values than fit in memory"),
    ],
)
def test_reader_rejects_bad_files_naming_file_and_line(elf, data, tmp_path, name, content, line, what):
    bad = tmp_path / name
    bad.write_text(content)
    r = run(elf, *args_for(data, x=bad))
    assert r.returncode == 2
    assert r.error.startswith(f"RVTUNE error {bad}:{line}: ")
    assert what in r.error
    assert r.lines("sample") == [] and r.checks == {}  # never a run on bad input


def test_reader_rejects_a_missing_file(elf, data, tmp_path):
    missing = tmp_path / "nowhere" / "x.txt"
    r = run(elf, *args_for(data, x=missing))
    assert r.returncode == 2
    assert r.error.startswith(f"RVTUNE error {missing}:0: cannot open")
    assert "No such file" in r.error


def test_reader_rejects_a_non_integer_in_an_integer_tensor(elf, data, tmp_path):
    bad = write_txt(tmp_path / "idx.txt", 1, N, [0, 1, 2, 3, 4, 5.5, 6, 7, 8, 9], "{}")
    r = run(elf, *args_for(data, idx=bad))
    assert r.returncode == 2
    assert r.error.startswith(f"RVTUNE error {bad}:2: malformed integer '5.5'")


def test_expected_file_of_another_size_than_the_inout_input_is_bad_input(elf, data, tmp_path):
    bad = write_txt(tmp_path / "acc_exp.txt", 1, 4, [1.0, 2.0, 3.0, 4.0])
    r = run(elf, *args_for(data, acc_exp=bad))
    assert r.returncode == 2
    assert str(bad) in r.error


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["--runs"], "argument --runs: needs a value"),
        (["--runs", "-1"], "argument --runs: expected an integer"),
        (["--bogus", "1"], "unknown option --bogus"),
        (["--grid", "3,1"], "argument --grid: expected X,Y,Z"),
        (["--atol", "-1e-3"], "argument --atol: a tolerance must be >= 0"),
        (["--rtol", "nan"], "argument --rtol: a tolerance must be >= 0"),
        (["--max-time", "-1"], "argument --max-time: seconds between 0 and 86400"),
        (["--max-time", "soon"], "argument --max-time: expected a number"),
        (["--max-samples", "0"], "argument --max-samples: expected an integer"),
    ],
)
def test_bad_options_are_bad_input(elf, data, args, what):
    r = run(elf, *args_for(data), *args)
    assert r.returncode == 2
    assert what in r.error


def test_wrong_number_of_positionals_names_what_is_expected(elf, data):
    r = run(elf, *args_for(data)[:-1])
    assert r.returncode == 2
    assert "x.txt idx.txt expected_out.txt acc.txt expected_acc.txt n alpha" in r.error


def test_generator_rejects_what_it_cannot_express():
    with pytest.raises(HarnessError, match=r"parameter 'p'.*pointer type '\*fp8'"):
        generate("k_kernel", [HarnessArg("p", "*fp8", "out")])
    with pytest.raises(HarnessError, match="no output tensor"):
        generate("k_kernel", [HarnessArg("p", "*fp32", "in")])
    with pytest.raises(HarnessError, match=r"scalar .* must have role 'scalar'"):
        generate("k_kernel", [HarnessArg("o", "*fp32", "out"), HarnessArg("n", "i32", "in")])


def test_scalar_tokens_round_trip_floats():
    toks = argv(ARGS, (5, 2), {"n": 3, "alpha": 0.1}, {"x": Path("x"), "idx": Path("i"), "acc": Path("a")},
                {"out": Path("o"), "acc": Path("e")}, atol=0, rtol=0)
    assert toks[:2] == ["--grid", "5,2,1"]
    assert float(toks[-1]) == 0.1 and not math.isnan(float(toks[-1]))
    assert toks[6:] == [Path("x"), Path("i"), Path("o"), Path("a"), Path("e"), "3", "0.1"]


# ---------------------------------------------------------------------------------- main_cpp/fused_moe.cpp
# A plain scalar C fused_moe_kernel (same pid grouping and masking as kernels/fused_moe.py), so the custom
# harness is checked against the committed golden data of every BLOCK_SIZE_M on its own; the Triton-compiled
# kernel under the same harness is tests/test_build.py's job.
MOE_KERNEL_C = r"""
#include <stdint.h>
#include "fused_moe_kernel_launcher.h"
void fused_moe_kernel(float *a, float *b, float *c, float *w, int32_t *sorted, int32_t *eids, int32_t *ntpp,
                      int32_t N, int32_t K, int32_t EM, int32_t nvalid, int32_t sam, int32_t sak, int32_t sbe,
                      int32_t sbk, int32_t sbn, int32_t scm, int32_t scn, int32_t pid, int32_t py, int32_t pz,
                      uint32_t gx, uint32_t gy, uint32_t gz) {
  (void)py; (void)pz; (void)gx; (void)gy; (void)gz;
  const int BM = fused_moe_kernel_BLOCK_SIZE_M, BN = fused_moe_kernel_BLOCK_SIZE_N;
  const int G = fused_moe_kernel_GROUP_SIZE_M, TK = fused_moe_kernel_top_k;
  int npm = (EM + BM - 1) / BM, npn = (N + BN - 1) / BN, npig = G * npn;
  int fpm = pid / npig * G, gsm = npm - fpm < G ? npm - fpm : G;
  int pm = fpm + (pid % npig) % gsm, pn = (pid % npig) / gsm;
  if (pm * BM >= ntpp[0]) return;
  for (int i = 0; i < BM; i++) {
    int t = sorted[pm * BM + i];
    if (t >= nvalid) continue;
    for (int j = pn * BN; j < pn * BN + BN && j < N; j++) {
      float acc = 0;
      for (int k = 0; k < K; k++) acc += a[t / TK * sam + k * sak] * b[eids[pm] * sbe + k * sbk + j * sbn];
      c[t * scm + j * scn] = acc * w[t];
    }
  }
}
"""

_C_TYPES = {"*fp32": "float *", "*i32": "int32_t *", "i32": "int32_t"}


@pytest.fixture(scope="module")
def moe_objects(tmp_path_factory: pytest.TempPathFactory):
    """(spec, dir, toolchain, C++ toolchain, objects shared by every config): kernel, launcher, harness."""
    from pytest_rvtune.build import cxx_toolchain, main_cpp_path
    from pytest_rvtune.spec import load_kernel_module

    spec = load_kernel_module(REPO_ROOT / "kernels" / "fused_moe.py")
    launch = spec.capture_launch("small", spec.configs[0])
    d = tmp_path_factory.mktemp("moe")
    tc = Toolchain.for_isa(RISCV_ISA)
    src = launcher_sources("fused_moe_kernel", [_Param(a.name, _C_TYPES[a.type]) for a in launch.args],
                           list(launch.constexprs))
    (d / src.header_name).write_text(src.header)
    (d / src.launcher_name).write_text(src.launcher_c)
    (d / "kernel.c").write_text(MOE_KERNEL_C)
    flags = ("-Wall", "-Wextra", "-Werror", f"-I{HEADER_DIR}", f"-I{d}")
    tc.compile(d / "kernel.c", d / "kernel.o", flags)
    tc.compile(d / src.launcher_name, d / "launcher.o", flags)
    cxx = cxx_toolchain(tc)
    cxx.compile(main_cpp_path(spec), d / "harness.o", ("-std=c++17", *flags))
    return spec, d, tc, cxx, [d / "kernel.o", d / "launcher.o", d / "harness.o"]


def moe_elf(moe_objects, config: dict) -> Path:
    spec, d, tc, cxx, objects = moe_objects
    bm = config["BLOCK_SIZE_M"]
    launch = spec.capture_launch("small", config)
    (d / f"consts{bm}.c").write_text(consts_source("fused_moe_kernel", launch.constexprs))
    tc.compile(d / f"consts{bm}.c", d / f"consts{bm}.o")
    cxx.link([*objects, d / f"consts{bm}.o"], d / f"moe{bm}.elf")
    return d / f"moe{bm}.elf"


def moe_argv(spec, config: dict) -> list[str | Path]:
    from pytest_rvtune.build import _golden_files, harness_args_of, main_cpp_argv
    from pytest_rvtune.golden import golden_set

    inputs, expected = _golden_files(golden_set(spec, "small", config))
    return main_cpp_argv(harness_args_of(spec.capture_launch("small", config), inputs, expected),
                         inputs, expected, spec.tolerance)


@pytest.mark.parametrize("bm", [4, 8, 16, 32, 64])
def test_fused_moe_cpp_one_file_for_every_block_size_m(moe_objects, bm):
    spec = moe_objects[0]
    config = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
    r = run(moe_elf(moe_objects, config), "--warmup", "1", "--runs", "2", "--threads", "2", *moe_argv(spec, config))
    assert r.returncode == 0, r.stdout
    assert r.checks["c"]["status"] == "ok"
    assert len(r.lines("sample")) == 2


def test_fused_moe_cpp_rejects_the_data_of_another_block_size_m(moe_objects):
    spec = moe_objects[0]
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
    r = run(moe_elf(moe_objects, config), *moe_argv(spec, {**config, "BLOCK_SIZE_M": 8}))
    assert r.returncode == 2
    assert "do not fit BLOCK_SIZE_M=16: use the golden variant generated for BLOCK_SIZE_M=16" in r.error


# ---------------------------------------------------------------------------------- half-precision tensors
DUMP_C = r"""
#include "rvtune_harness.h"
/* read argv[1] as fp16 and argv[2] as bf16; print every element back as the harness sees it */
int main(int argc, char **argv) {
    rvtune_tensor h, b;
    (void)argc;
    rvtune_read_txt(&h, "h", argv[1], RVTUNE_F16);
    rvtune_read_txt(&b, "b", argv[2], RVTUNE_BF16);
    for (int64_t i = 0; i < rvtune_numel(&h); i++) printf("%.17g %.17g\n", rvtune_get(&h, i), rvtune_get(&b, i));
    return 0;
}
"""


def test_fp16_and_bf16_files_round_to_nearest_even_like_torch(tmp_path):
    import torch

    values = [0.0, -0.0, 1.0, -2.5, 0.1, 1 / 3, 65504.0, 65520.0, 1e-5, 6e-8, 3e-8, 2.9802322387695312e-08,
              1.00048828125, 1.00146484375, 3.0e38, float("inf"), float("-inf")]
    tc = Toolchain.for_isa("host")
    (tmp_path / "dump.c").write_text(DUMP_C)
    tc.compile(tmp_path / "dump.c", tmp_path / "dump.o", ("-Wall", "-Wextra", "-Werror", f"-I{HEADER_DIR}"))
    tc.link([tmp_path / "dump.o"], tmp_path / "dump")
    f = write_txt(tmp_path / "v.txt", 1, len(values), values, "{!r}")
    out = subprocess.run([str(tmp_path / "dump"), str(f), str(f)], capture_output=True, text=True, check=True)
    got = [tuple(float(w) for w in ln.split()) for ln in out.stdout.splitlines()]
    want_h = torch.tensor(values, dtype=torch.float32).to(torch.float16).float().tolist()
    want_b = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16).float().tolist()
    assert [g[0] for g in got] == want_h
    assert [g[1] for g in got] == want_b


def _dump_exe(tmp_path: Path, isa: str) -> list[str]:
    """DUMP_C built for ``isa``: the command that runs it (under QEMU for rv64)."""
    tc = Toolchain.for_isa(isa)
    (tmp_path / "dump.c").write_text(DUMP_C)
    tc.compile(tmp_path / "dump.c", tmp_path / "dump.o", ("-Wall", "-Wextra", "-Werror", f"-I{HEADER_DIR}"))
    tc.link([tmp_path / "dump.o"], tmp_path / "dump")
    return [*(qemu_command() if isa == RISCV_ISA else []), str(tmp_path / "dump")]


@pytest.mark.parametrize("isa", [RISCV_ISA, "host"])
def test_every_fp16_and_bf16_value_written_by_golden_reads_back_bit_for_bit(tmp_path, isa):
    # all 65536 bit patterns of each type, written by golden.format_txt (the digits of its _DTYPES formats)
    import numpy as np
    import torch

    from pytest_rvtune.golden import format_txt

    bits = np.arange(65536, dtype=np.uint32)
    half = bits.astype(np.uint16).view(np.float16)
    bf16 = torch.from_numpy((bits << 16).view(np.float32).copy()).to(torch.bfloat16)
    (tmp_path / "h.txt").write_bytes(format_txt(half.reshape(256, 256), "fp16"))
    (tmp_path / "b.txt").write_bytes(format_txt(bf16.reshape(256, 256)))
    out = subprocess.run([*_dump_exe(tmp_path, isa), str(tmp_path / "h.txt"), str(tmp_path / "b.txt")],
                         capture_output=True, text=True, check=True, timeout=120)
    got = np.array([[float(w) for w in ln.split()] for ln in out.stdout.splitlines()])
    for column, want in ((got[:, 0], half.astype(np.float64)), (got[:, 1], bf16.double().numpy())):
        same = (column == want) & (np.signbit(column) == np.signbit(want))
        assert (same | (np.isnan(column) & np.isnan(want))).all(), np.flatnonzero(~same)[:5]


@pytest.mark.parametrize("isa", [RISCV_ISA, "host"])
def test_16_bit_values_are_rounded_once_from_the_decimal(tmp_path, isa):
    # just above a half-way point of both types: through float they would round twice, down to 1.0
    values = [1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-30, -(1 + 2**-11 + 2**-40)]
    f = write_txt(tmp_path / "v.txt", 1, len(values), values, "{!r}")
    out = subprocess.run([*_dump_exe(tmp_path, isa), str(f), str(f)], capture_output=True, text=True,
                         check=True, timeout=60)
    got = [tuple(float(w) for w in ln.split()) for ln in out.stdout.splitlines()]
    assert got[0] == (1 + 2**-10, 1.0)  # fp16: up to the next value; bf16: below its half-way point
    assert got[1] == (1 + 2**-8, 1 + 2**-7)  # 1 + 2**-8 is an fp16 value (nearest to the decimal)
    assert got[2] == (-(1 + 2**-10), -1.0)


# A copy kernel for each 16-bit type: y = x (fp16), yb = xb (bf16), as uint16_t patterns (the kernel ABI).
HALF_KERNEL_C = r"""
#include <stdint.h>
void hk_kernel(uint16_t *x, uint16_t *y, uint16_t *xb, uint16_t *yb, int32_t n,
               int32_t pid_x, int32_t pid_y, int32_t pid_z, uint32_t gx, uint32_t gy, uint32_t gz) {
  (void)pid_x; (void)pid_y; (void)pid_z; (void)gx; (void)gy; (void)gz;
  for (int32_t i = 0; i < n; i++) { y[i] = x[i]; yb[i] = xb[i]; }
}
"""
HALF_ARGS = [HarnessArg("x", "*fp16", "in"), HarnessArg("y", "*fp16", "out"), HarnessArg("xb", "*bf16", "in"),
             HarnessArg("yb", "*bf16", "out"), HarnessArg("n", "i32", "scalar")]


@pytest.fixture(scope="module")
def half_elf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("half_elf")
    tc = Toolchain.for_isa(RISCV_ISA)
    params = [_Param(a.name, "uint16_t *" if a.is_tensor else "int32_t") for a in HALF_ARGS]
    src = launcher_sources("hk_kernel", params, ["BLOCK"])
    (d / src.header_name).write_text(src.header)
    files = {"kernel.c": HALF_KERNEL_C, src.launcher_name: src.launcher_c,
             "consts.c": consts_source("hk_kernel", {"BLOCK": 1}), "harness.c": generate("hk_kernel", HALF_ARGS)}
    objects = []
    for name, text in files.items():
        (d / name).write_text(text)
        tc.compile(d / name, d / f"{name}.o", ("-Wall", "-Wextra", "-Werror", f"-I{HEADER_DIR}", f"-I{d}"))
        objects.append(d / f"{name}.o")
    tc.link(objects, d / "hk.elf")
    return d / "hk.elf"


@pytest.mark.parametrize(
    ("expected_y", "expected_yb", "y_ok", "yb_ok"),
    [
        (1.0, 1.0, "ok", "ok"),
        (1 + 2**-10, 1 + 2**-7, "ok", "ok"),  # one rounding step off: within fp16 rtol 1e-3 / bf16 rtol 1.6e-2
        (1 + 2**-9, 1 + 2**-5, "bad", "bad"),  # two fp16 steps (2e-3), four bf16 steps (3.1e-2): beyond them
    ],
)
def test_16_bit_outputs_are_checked_with_at_least_their_dtype_tolerance(half_elf, tmp_path, expected_y,
                                                                        expected_yb, y_ok, yb_ok):
    files = {name: write_txt(tmp_path / f"{name}.txt", 1, 2, [v, -v], "{!r}")
             for name, v in (("x", 1.0), ("xb", 1.0), ("y", expected_y), ("yb", expected_yb))}
    args = argv(HALF_ARGS, (1,), {"n": 2}, {"x": files["x"], "xb": files["xb"]},
                {"y": files["y"], "yb": files["yb"]}, atol=0.0, rtol=0.0)  # the module asks for exactness
    r = run(half_elf, "--runs", "1", *args)
    assert (r.checks["y"]["status"], r.checks["yb"]["status"]) == (y_ok, yb_ok), r.stdout
    assert float(r.checks["y"]["max_abs"]) == pytest.approx(expected_y - 1.0)  # compared in double, widened
    assert r.returncode == (0 if y_ok == yb_ok == "ok" else 1)


def test_a_looser_module_tolerance_still_applies_to_16_bit_outputs(half_elf, tmp_path):
    files = {name: write_txt(tmp_path / f"{name}.txt", 1, 2, [v, -v], "{!r}")
             for name, v in (("x", 1.0), ("xb", 1.0), ("y", 1.25), ("yb", 1.25))}
    args = argv(HALF_ARGS, (1,), {"n": 2}, {"x": files["x"], "xb": files["xb"]},
                {"y": files["y"], "yb": files["yb"]}, atol=0.3, rtol=0.0)
    r = run(half_elf, "--runs", "1", *args)
    assert r.returncode == 0 and r.checks["y"]["status"] == r.checks["yb"]["status"] == "ok", r.stdout
