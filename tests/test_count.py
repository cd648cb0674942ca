"""``rvtune count`` on real QEMU: a hand-written ELF whose counts follow from its code, an ELF of ours built
through the project's build path (its counts must equal what an item records), --compare-to, the error paths."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_rvtune import build
from pytest_rvtune.cli import main
from pytest_rvtune.spec import load_kernel_module
from pytest_rvtune.targets.local import QemuTarget
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain, find_tool

REPO_ROOT = Path(__file__).resolve().parents[1]

# foo(n) is n trips of (addi, vsetvli, bne) plus li and ret, in assembly so the count is the program's, not the
# compiler's: a launch of foo_wrap is 3 (addi, sd, jal) + 2 + 3n + 3 (ld, addi, ret) = 8 + 3n instructions, of
# which n are vector (vsetvli) and 2 + 3n are inside foo. n comes from data/n.txt (a relative path: the run
# directory matters), the launches from argv[1]; idle_wrap is a launcher that is called only with a 2nd argument.
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>

#ifndef WRAP
#define WRAP "foo_wrap" /* -DWRAP='"_Z8foo_wrapl"': the launcher as a C++ compiler names it */
#endif

void foo(long n);
void foo_wrap(long n) __asm__(WRAP);
void idle_wrap(void);
__asm__(".text\n"
        ".globl foo\n.type foo,@function\nfoo:\n"
        "  li t0, 0\n"
        "1: addi t0, t0, 1\n"
        "  vsetvli t1, zero, e32, m1, ta, ma\n"
        "  bne t0, a0, 1b\n"
        "  ret\n"
        ".size foo, .-foo\n"
        ".globl " WRAP "\n.type " WRAP ",@function\n" WRAP ":\n"
        "  addi sp, sp, -16\n  sd ra, 8(sp)\n  jal ra, foo\n  ld ra, 8(sp)\n  addi sp, sp, 16\n  ret\n"
        ".size " WRAP ", .-" WRAP "\n"
        ".globl idle_wrap\n.type idle_wrap,@function\nidle_wrap:\n  ret\n.size idle_wrap, .-idle_wrap\n");

int main(int argc, char **argv) {
    FILE *f = fopen("data/n.txt", "r");
    long n;
    if (f == NULL || fscanf(f, "%ld", &n) != 1) {
        fprintf(stderr, "foo: cannot read data/n.txt\n");
        return 3;
    }
    int reps = argc > 1 ? atoi(argv[1]) : 1;
    for (int r = 0; r < reps; r++) foo_wrap(n);
    if (argc > 2) idle_wrap();
    printf("done %ld x %d\n", n, reps);
    return 0;
}
"""


@pytest.fixture(scope="module")
def foo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """foo.elf (static), foo_dyn.elf (the same, dynamically linked) and a run directory with data/n.txt = 1000."""
    tmp = tmp_path_factory.mktemp("count")
    src = tmp / "foo.c"
    src.write_text(PROGRAM)
    tc = Toolchain.for_isa(RISCV_ISA)
    tc.compile(src, tmp / "foo.o")
    tc.link([tmp / "foo.o"], tmp / "foo.elf")
    subprocess.run([tc.cc, "--target=riscv64-linux-gnu", "-fuse-ld=lld", str(tmp / "foo.o"), "-o",
                    str(tmp / "foo_dyn.elf")], check=True, capture_output=True)
    tc.compile(src, tmp / "foo_cxx.o", extra=("-DWRAP=\"_Z8foo_wrapl\"",))
    tc.link([tmp / "foo_cxx.o"], tmp / "foo_cxx.elf")
    run_dir = tmp / "run"
    (run_dir / "data").mkdir(parents=True)
    (run_dir / "data" / "n.txt").write_text("1000\n")
    subprocess.run([find_tool("llvm-strip-19"), str(tmp / "foo.elf"), "-o", str(tmp / "foo_stripped.elf")],
                   check=True, capture_output=True)  # llvm-19: the toolchain's package
    damaged = bytearray((tmp / "foo.elf").read_bytes())
    damaged[58:60] = (40).to_bytes(2, "little")  # e_shentsize: an ELF64 section header has 64 bytes
    (tmp / "foo_badsh.elf").write_bytes(damaged)
    return {"badsh": tmp / "foo_badsh.elf",
            "elf": tmp / "foo.elf", "dyn": tmp / "foo_dyn.elf", "cxx": tmp / "foo_cxx.elf", "run": run_dir, "src": src,
            "obj": tmp / "foo.o", "stripped": tmp / "foo_stripped.elf"}


def count(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main(["count", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def count_json(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> dict:
    code, out, err = count(capsys, "--json", *argv)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(("n", "reps"), [(1000, 3), (250, 1)])
def test_hand_written_elf_counts_follow_from_its_code(foo: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                                      n: int, reps: int) -> None:
    (foo["run"] / "data" / "n.txt").write_text(f"{n}\n")
    try:
        figures = count_json(capsys, foo["elf"], "--symbol", "foo", "--run-dir", foo["run"], "--", str(reps))
    finally:
        (foo["run"] / "data" / "n.txt").write_text("1000\n")
    assert figures["launches"] == reps
    assert figures["launch"] == "foo_wrap"
    assert figures["launch_insns"] == 8 + 3 * n
    assert figures["kernel_insns"] == 2 + 3 * n
    assert figures["vector_insns"] == n
    assert figures["vector_share"] == pytest.approx(n / (8 + 3 * n))
    assert figures["insns_whole_process"] > reps * (8 + 3 * n)  # libc start-up, the file read, printf


def test_x60_cycles_grow_with_the_loop_as_its_blocks_do(foo: dict[str, Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # the model prices each block once and multiplies by its executions: x60_cycles is affine in the trip count
    cycles = {}
    try:
        for n in (250, 500, 1000):
            (foo["run"] / "data" / "n.txt").write_text(f"{n}\n")
            figures = count_json(capsys, foo["elf"], "--symbol", "foo", "--run-dir", foo["run"], "--", "1")
            assert "x60_cycles" in figures, figures.get("x60_missing")
            cycles[n] = figures["x60_cycles"]
    finally:
        (foo["run"] / "data" / "n.txt").write_text("1000\n")
    assert 0 < cycles[250] < cycles[500] < cycles[1000]
    assert cycles[1000] - cycles[500] == pytest.approx(2 * (cycles[500] - cycles[250]))
    assert figures["x60_standin_share"] == 0.0  # addi, vsetvli, bne, jal, sd, ld, ret: all in the chip's table


def test_text_output_and_an_explicit_launcher(foo: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = count(capsys, foo["elf"], "--symbol", "foo", "--run-dir", foo["run"], "--", "2")
    assert code == 0
    assert "launch window foo_wrap, kernel foo" in out
    assert "3,008" in out and "3,002" in out and "33.2 %" in out
    # a launcher the program calls once, with no kernel: a 1-instruction window (ret)
    figures = count_json(capsys, foo["elf"], "--launch", "idle_wrap", "--run-dir", foo["run"], "--", "1", "x")
    assert (figures["launches"], figures["launch_insns"], figures["vector_insns"]) == (1, 1, 0)
    assert "kernel_insns" not in figures


def test_a_cxx_launcher_is_found_by_its_plain_name(foo: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # Triton_RVV's triton-cpu launchers are C++: fused_moe_kernel_wrap is _Z21fused_moe_kernel_wrapjjji...
    figures = count_json(capsys, foo["cxx"], "--symbol", "foo", "--run-dir", foo["run"], "--", "2")
    assert (figures["launch"], figures["launches"], figures["launch_insns"]) == ("_Z8foo_wrapl", 2, 3008)


def test_an_elf_without_the_execute_bit_is_counted(foo: dict[str, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # ELFs committed to git (Triton_RVV's triton-cpu builds) often lack it; qemu-user then exits 1 silently
    plain = tmp_path / "foo.elf"
    shutil.copyfile(foo["elf"], plain)
    plain.chmod(0o644)
    figures = count_json(capsys, plain, "--symbol", "foo", "--run-dir", foo["run"], "--", "1")
    assert (figures["launches"], figures["launch_insns"]) == (1, 3008)
    assert plain.stat().st_mode & 0o777 == 0o644  # the user's file is left as it was


def test_program_arguments_after_the_separator_are_not_ours(foo: dict[str, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # options of ours after the ELF, and program arguments that look like options (-1 trips: atoi -> no launch)
    code, _, err = count(capsys, foo["elf"], "--run-dir", foo["run"], "--symbol", "foo", "--", "-1", "--json")
    assert code == 1
    assert "never returned from foo_wrap (0 launches)" in err


@pytest.mark.parametrize(("which", "extra", "message"), [
    ("src", [], "is not an ELF file"),
    ("dyn", ["--symbol", "foo"], "is dynamically linked"),
    ("obj", ["--symbol", "foo"], "is not an executable"),
    ("stripped", ["--symbol", "foo"], "has no symbol table (stripped?)"),
    ("badsh", ["--symbol", "foo"], "unreadable section headers (section headers of 40 bytes"),
    ("elf", ["--symbol", "bar"], "has no function 'bar'"),
    ("elf", [], "no --symbol (the kernel function) and no --launch"),
    ("elf", ["--launch", "nope_wrap"], "has no launcher function 'nope_wrap'"),
    ("missing", ["--symbol", "foo"], "no such file"),
])
def test_errors_name_the_elf_and_what_to_do(foo: dict[str, Path], capsys: pytest.CaptureFixture[str], which: str,
                                           extra: list[str], message: str) -> None:
    elf = foo["elf"].with_name("missing.elf") if which == "missing" else foo[which]
    code, out, err = count(capsys, elf, *extra, "--run-dir", foo["run"])
    assert code == 1 and out == ""
    assert err.startswith(f"rvtune count: {elf}") and message in err
    assert "Traceback" not in err
    if message.startswith(("no --symbol", "has no launcher")):
        assert "its *_wrap functions: foo_wrap, idle_wrap" in err


def test_an_elf_for_another_machine_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    host_elf = Path(shutil.which("true") or "/bin/true").resolve()
    code, _, err = count(capsys, host_elf, "--symbol", "foo")
    assert code == 1 and "not rv64 RISC-V" in err


def test_a_failing_program_gives_its_exit_code_and_last_stderr_lines(foo: dict[str, Path], tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = count(capsys, foo["elf"], "--symbol", "foo", "--run-dir", tmp_path)  # no data/n.txt there
    assert code == 1
    assert "failed under QEMU with exit code 3" in err and f"run in {tmp_path}" in err
    assert err.rstrip().endswith("foo: cannot read data/n.txt")


# ------------------------------------------------------------------------------------- an ELF of ours

# fused_moe builds with its main cpp (a Triton_RVV-style harness), which links the config's block constants
MOE_CONFIG = {"BLOCK_SIZE_M": 4, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
RUN_OPTS = ["--warmup", "0", "--runs", "2", "--threads", "1"]


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> build.BuildArtifact:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RVTUNE_CACHE_DIR", str(tmp_path_factory.mktemp("rvtune_cache")))
        return build.build_item(load_kernel_module(REPO_ROOT / "kernels" / "fused_moe.py"), "small", MOE_CONFIG,
                                RISCV_ISA)


def test_our_elf_counts_as_our_item_records_it(ours: build.BuildArtifact, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*RUN_OPTS, *map(str, ours.argv)]
    figures = count_json(capsys, ours.elf, "--symbol", ours.kernel_symbol, "--", *argv)
    item = QemuTarget().run(ours.elf, argv, timeout=300, kernel_symbol=ours.kernel_symbol).counters
    assert figures["launches"] == item["launches"] == 2
    assert figures["launch_insns"] == item["launch_insns"] / 2
    assert figures["kernel_insns"] == item["kernel_insns"] / 2
    # our launcher's const ints, read from the ELF: the config's and the kernel's other integer constexprs
    assert figures["block_constants"] == {**MOE_CONFIG, "MUL_ROUTED_WEIGHT": 1, "top_k": 2}
    assert 0 < figures["vector_share"] < 1


def test_a_threaded_launch_counts_every_thread(ours: build.BuildArtifact, capsys: pytest.CaptureFixture[str]) -> None:
    one = count_json(capsys, ours.elf, "--symbol", ours.kernel_symbol, "--", *RUN_OPTS, *map(str, ours.argv))
    argv = [*RUN_OPTS[:-1], "2", *map(str, ours.argv)]  # --threads 2: the launcher starts two workers
    two = count_json(capsys, ours.elf, "--symbol", ours.kernel_symbol, "--", *argv)
    assert (one["harts"], two["harts"]) == (1, 3)  # the calling thread and its two workers
    assert two["kernel_insns"] == one["kernel_insns"]  # the same grid, split over the workers
    assert two["launch_insns"] > one["launch_insns"]  # plus starting and joining the threads
    code, out, _ = count(capsys, ours.elf, "--symbol", ours.kernel_symbol, "--", *argv)
    assert code == 0 and "threads" in out


def _results_file(path: Path, config: dict, launch_insns: float, kernel_symbol: str = "fused_moe_kernel") -> Path:
    """A results file of ours with one passed fused_moe item (the fields results/writer.py writes)."""
    from pytest_rvtune.spec import config_id

    record = {"kernel": "fused_moe", "case": "small", "config": config, "config_id": config_id(config),
              "target": "qemu", "outcome": "passed", "timing_source": "emulated",
              "counters": {"launch_insns": launch_insns, "kernel_insns": launch_insns / 2},
              "rerun": {"elf": "x.elf", "kernel_symbol": kernel_symbol, "argv": []}}
    path.write_text(json.dumps(record) + "\n")
    return path


def test_compare_to_matches_by_the_elfs_block_constants(ours: build.BuildArtifact, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*RUN_OPTS, *map(str, ours.argv)]
    mine = count_json(capsys, ours.elf, "--symbol", ours.kernel_symbol, "--", *argv)
    results = _results_file(tmp_path / "run.jsonl", MOE_CONFIG, mine["launch_insns"] / 2)
    code, out, err = count(capsys, ours.elf, "--symbol", ours.kernel_symbol, "--compare-to", results, "--", *argv)
    assert code == 0, err
    assert "matched by kernel fused_moe_kernel and the ELF's block constants" in out
    row = next(line for line in out.splitlines() if "launch_insns" in line and "fused_moe[small-" in line)
    assert row.rstrip().endswith("2.00x")
    # another config in the results: no match, and the error says what the file has
    other = _results_file(tmp_path / "other.jsonl", {**MOE_CONFIG, "BLOCK_SIZE_M": 32}, 1.0, kernel_symbol="")
    code, _, err = count(capsys, ours.elf, "--symbol", ours.kernel_symbol, "--compare-to", other, "--", *argv)
    assert code == 1 and "has no passed item of kernel fused_moe_kernel with BLOCK_SIZE_M=4" in err
    assert "fused_moe (?)" in err
    # --config overrides the ELF's constants (and a record without its function matches by module name)
    code, out, err = count(capsys, ours.elf, "--symbol", ours.kernel_symbol, "--compare-to", other,
                           "--config", "BLOCK_SIZE_M=32", "--json", "--", *argv)
    assert code == 0, err
    assert json.loads(out)["compare_to"]["items"][0]["counters"]["launch_insns"] == 1.0
    code, _, err = count(capsys, ours.elf, "--symbol", ours.kernel_symbol, "--compare-to", other,
                         "--config", "BLOCK_SIZE_M:32", "--", *argv)
    assert code == 1 and "is not NAME=<integer>" in err
