"""A hand-written Triton_RVV-style C++ harness built unchanged and run on the local targets.

The harness (project/main/*.cpp), its support library (project/support) and the kernels (ext_kernels.py) are
ours, written in their format: data read from relative paths, `<label> OK|NOT OK` on stdout, the average
time on stderr, `<kernel>_wrap` called with the integer-1 strides dropped. Real Triton frontend, clang++-19,
QEMU and the host.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import ext_kernels
import numpy as np
import pytest

from pytest_rvtune.compiler.api import CompiledKernel, compile_kernel
from pytest_rvtune.compiler.specialise import specialise_ones
from pytest_rvtune.harness.external import ExternalBuildError, ExternalElf, build_external_elf
from pytest_rvtune.harness.output_format import OutputFormat
from pytest_rvtune.targets.base import Target
from pytest_rvtune.targets.local import HostTarget, QemuTarget
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA
from pytest_rvtune.verdict import judge

PROJECT = Path(__file__).resolve().parent / "project"
SUPPORT = [PROJECT / "support" / "support.cpp"]
DEFINES = ["TRITON_KERNEL_ENABLE", "CHECK_ACCURACY"]
FORMAT = OutputFormat.load("triton-rvv")
M, N, K = 5, 6, 7
ARGV = [f"{M}x{N}x{K}x3"]
MM_CONFIG = {"BLOCK_M": 4, "BLOCK_N": 8, "BLOCK_K": 8}
TARGETS = {"qemu": (RISCV_ISA, lambda: QemuTarget()), "host": (HOST_ISA, lambda: HostTarget())}


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RVTUNE_CACHE_DIR", str(tmp_path_factory.mktemp("rvtune_cache")))
        yield


def mm_launch_values() -> dict[str, int]:
    """The runtime integer arguments of a contiguous launch, as a Triton user's launch would pass them."""
    return dict(M=M, N=N, K=K, stride_am=K, stride_ak=1, stride_bk=N, stride_bn=1, stride_cm=N, stride_cn=1)


def compile_mm(isa: str) -> CompiledKernel:
    ones = specialise_ones(mm_launch_values(), MM_CONFIG)
    return compile_kernel(ext_kernels.mm_kernel, ext_kernels.MM_SIGNATURE, {**ones, **MM_CONFIG}, isa)


def write_matrix(path: Path, m: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = "\n".join(" ".join(repr(float(x)) for x in row) for row in m)
    path.write_text(f"{m.shape[0]} {m.shape[1]}\n{rows}\n")
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The harness's data files by the relative path it opens (getDB("mm", ...)), written by us."""
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    c = (a.astype(np.float64) @ b).astype(np.float32)
    d = tmp_path_factory.mktemp("data")
    return {
        f"mm/run/test_data/matrix_{M}x{K}_1.txt": write_matrix(d / "a.txt", a),
        f"mm/run/test_data/matrix_{K}x{N}_2.txt": write_matrix(d / "b.txt", b),
        f"mm/run/test_data/matrix_{M}x{N}_3.txt": write_matrix(d / "c.txt", c),
        f"mm/run/test_data/matrix_{M}x{N}_4.txt": write_matrix(d / "c2.txt", 2 * c),
    }


@pytest.fixture(scope="module", params=list(TARGETS))
def target_and_elf(request: pytest.FixtureRequest):
    isa, make = TARGETS[request.param]
    elf = build_external_elf(isa, [compile_mm(isa)], PROJECT / "main" / "mm_kernel.cpp", SUPPORT, [PROJECT],
                             DEFINES)
    target: Target = make()
    yield target, elf
    target.close()


def average_time_ns(stderr: str) -> int:
    (value,) = re.findall(r"Average Time: (\S+) s", stderr)
    return round(float(value) * 1e9)


def test_specialise_ones_picks_the_ints_equal_to_one_as_triton_does():
    values = {"M": 1, "stride": 1, "flag": True, "scale": 1.0, "n": 16, "BLOCK": 1}
    assert specialise_ones(values, constexpr_names={"BLOCK"}) == {"M": 1, "stride": 1}
    assert specialise_ones(values, {"BLOCK"}, do_not_specialise={"M"}) == {"stride": 1}
    assert specialise_ones(mm_launch_values()) == {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}


def test_specialised_ints_leave_the_wrapper_and_the_kernel():
    ck = compile_mm(RISCV_ISA)
    header = ck.header.read_text()
    (wrap,) = re.findall(r"void mm_kernel_wrap\((.*?)\);", header)
    names = [re.split(r"[\s*]", p.strip())[-1] for p in wrap.split(",")]
    assert names[5:] == ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"]
    assert [p.name for p in ck.params] == names[5:]
    assert "extern const int mm_kernel_BLOCK_M;" in header


def test_their_style_harness_passes_with_data_at_relative_paths(target_and_elf, data):
    target, elf = target_and_elf
    result = target.run(elf.elf, ARGV, timeout=120, kernel_symbol="mm_kernel", files=data, output_format=FORMAT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(c.name, c.ok, c.first_bad, c.count) for c in result.checks] == [("out", True, -1, 0)]
    assert result.samples_ns == [average_time_ns(result.stderr)]
    assert result.errors == []
    assert judge(result, what="mm", timeout=120).outcome == "passed"
    if target.name == "qemu":  # the counter plugin found the kernel's symbol in their ELF
        assert result.counters["kernel_insns"] > 0
    assert "mm_kernel_wrap" in elf.asm.read_text()


def test_a_wrong_expected_file_fails_with_not_ok(target_and_elf, data, tmp_path: Path):
    target, elf = target_and_elf
    key = f"mm/run/test_data/matrix_{M}x{N}_3.txt"
    want = np.loadtxt(data[key], skiprows=1, dtype=np.float32).reshape(M, N)
    want[0, 4] += 1.0
    files = {**data, key: write_matrix(tmp_path / "wrong.txt", want)}
    result = target.run(elf.elf, ARGV, timeout=120, files=files, output_format=FORMAT)
    assert [(c.name, c.ok, c.first_bad, c.count) for c in result.checks] == [("out", False, 4, 1)]
    verdict = judge(result, what="mm", timeout=120)
    assert verdict.outcome == "wrong" and "out: first bad index 4, 1 element wrong" in verdict.message


def test_a_missing_data_file_fails_without_a_check(target_and_elf, data):
    target, elf = target_and_elf
    files = {k: v for k, v in data.items() if "_2.txt" not in k}
    result = target.run(elf.elf, ARGV, timeout=120, files=files, output_format=FORMAT)
    assert result.checks == [] and result.returncode == 255  # their harness returns -1
    assert result.errors == [f"Cannot open file mm/run/test_data/matrix_{K}x{N}_2.txt",
                             "Failed to read second input matrix"]
    verdict = judge(result, what="mm", timeout=120)
    assert verdict.outcome == "error" and "matrix_7x6_2.txt" in verdict.message


def test_two_kernels_in_one_elf_each_with_its_config(data):
    scale = compile_kernel(ext_kernels.scale_kernel, ext_kernels.SCALE_SIGNATURE, {"BLOCK": 8}, RISCV_ISA)
    elf = build_external_elf(RISCV_ISA, [compile_mm(RISCV_ISA), scale], PROJECT / "main" / "mm_scale_kernel.cpp",
                             SUPPORT, [PROJECT], DEFINES)
    asm = elf.asm.read_text()
    assert "<mm_kernel>:" in asm and "<scale_kernel>:" in asm
    result = QemuTarget(counters=False).run(elf.elf, ARGV, timeout=120, files=data, output_format=FORMAT)
    assert [(c.name, c.ok) for c in result.checks] == [("scaled", True)], result.stdout
    assert judge(result, what="mm+scale", timeout=120).outcome == "passed"


def test_a_second_build_is_a_cache_hit_and_a_header_edit_is_not(tmp_path: Path):
    first = build_external_elf(HOST_ISA, [compile_mm(HOST_ISA)], PROJECT / "main" / "mm_kernel.cpp", SUPPORT,
                               [PROJECT], DEFINES)
    again = build_external_elf(HOST_ISA, [compile_mm(HOST_ISA)], PROJECT / "main" / "mm_kernel.cpp", SUPPORT,
                               [PROJECT], DEFINES)
    assert isinstance(again, ExternalElf) and again.cache_hit and again.elf == first.elf
    copy = tmp_path / "project"
    shutil.copytree(PROJECT, copy)
    header = copy / "support" / "support.h"
    header.write_text(header.read_text().replace('"Triton Kernel"', '"Triton kernel"'))
    edited = build_external_elf(HOST_ISA, [compile_mm(HOST_ISA)], copy / "main" / "mm_kernel.cpp",
                                [copy / "support" / "support.cpp"], [copy], DEFINES)
    assert not edited.cache_hit and edited.sha256 != first.sha256


def test_a_missing_support_header_says_which_include_dir_to_add():
    main = PROJECT / "main" / "mm_kernel.cpp"
    with pytest.raises(ExternalBuildError) as err:
        build_external_elf(HOST_ISA, [compile_mm(HOST_ISA)], main, SUPPORT, [], DEFINES)
    assert str(main) in str(err.value)
    assert "support/support.h not found: add its directory to include_dirs" in str(err.value)


def test_a_harness_calling_a_kernel_not_given_names_it():
    main = PROJECT / "main" / "mm_scale_kernel.cpp"
    with pytest.raises(ExternalBuildError, match=r"scale_kernel_launcher.h not found: the harness calls kernel "
                                                 r"scale_kernel, which is not among the kernels given \(given: "
                                                 r"mm_kernel\)"):
        build_external_elf(HOST_ISA, [compile_mm(HOST_ISA)], main, SUPPORT, [PROJECT], DEFINES)


def test_a_compile_error_points_at_the_users_file_and_line(tmp_path: Path):
    main = tmp_path / "broken_kernel.cpp"
    main.write_text('#include "mm_kernel_launcher.h"\nint main() {\n  return mm_kernel_wrap(1);\n}\n')
    with pytest.raises(ExternalBuildError) as err:
        build_external_elf(HOST_ISA, [compile_mm(HOST_ISA)], main, (), (), ())
    assert f"harness {main}" in str(err.value) and f"{main}:3:" in str(err.value)


@pytest.mark.parametrize("define", ["-DX", "A B", "1X"])
def test_a_malformed_define_is_refused(define: str):
    with pytest.raises(ExternalBuildError, match=re.escape(f"define {define!r} is not NAME or NAME=VALUE")):
        build_external_elf(HOST_ISA, [], PROJECT / "main" / "mm_kernel.cpp", (), (), [define])
