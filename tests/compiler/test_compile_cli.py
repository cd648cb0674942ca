"""``rvtune compile``: each stage printed from a real kernel module, and bad input named with what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rvtune import cli

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout these tests belong to

MATMUL = str(REPO_ROOT / "kernels" / "matmul.py")
CONFIG = "BLOCK_SIZE_M=8,BLOCK_SIZE_N=16,BLOCK_SIZE_K=8,GROUP_SIZE_M=2"


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    # One cache for this module's tests (a second compile of the same config is a hit), none shared with
    # other test modules or the developer's .rvtune.
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "compile-cli-cache"))


def rvtune(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["compile", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_emit_ttir_and_c(capsys):
    code, out, _ = rvtune(capsys, MATMUL, "--config", CONFIG, "--emit", "ttir", "--emit", "c")
    assert code == 0
    ttir_part, c_part = out.split("// ---- c:")
    assert "// ---- ttir: matmul_kernel [BLOCK_SIZE_M=8-BLOCK_SIZE_N=16-BLOCK_SIZE_K=8-GROUP_SIZE_M=2]" in ttir_part
    assert "tt.dot" in ttir_part and "tensor<8x16xf32>" in ttir_part
    assert "void matmul_kernel(" in c_part


def test_partial_config_takes_the_rest_from_the_kernels_space(capsys):
    # the issue's own command line: GROUP_SIZE_M comes from the matmul space's matching config
    code, out, _ = rvtune(capsys, MATMUL, "--config", "BLOCK_SIZE_M=32,BLOCK_SIZE_N=32,BLOCK_SIZE_K=32",
                          "--emit", "ttir", "--emit", "c")
    assert code == 0
    assert "[BLOCK_SIZE_M=32-BLOCK_SIZE_N=32-BLOCK_SIZE_K=32-GROUP_SIZE_M=8]" in out


def test_emit_asm_is_riscv_vector_code_for_qemu(capsys):
    code, out, _ = rvtune(capsys, MATMUL, "--config", CONFIG, "--target", "qemu", "--emit", "asm")
    assert code == 0
    assert "<matmul_kernel>:" in out
    assert "file format elf64-littleriscv" in out
    # the GEMM inner loops are the runtime object's: the kernel calls them and the output says where they are
    assert "rv_dot_panel_m8" in out and "# The GEMM panels (rv_dot_panel_m8" in out and "rvtune_dot_panels.o" in out


def test_emit_asm_for_host(capsys):
    code, out, _ = rvtune(capsys, MATMUL, "--config", CONFIG, "--target", "host", "--emit", "asm")
    assert code == 0
    assert "<matmul_kernel>:" in out
    assert "riscv" not in out
    assert "GEMM panels" not in out  # inline on the host


def test_signature_option_instead_of_launch(capsys):
    sig = ("a_ptr=*fp32,b_ptr=*fp32,c_ptr=*fp32,M=i32,N=i32,K=i32,stride_am=i32,stride_ak=i32,"
           "stride_bk=i32,stride_bn=i32,stride_cm=i32,stride_cn=i32")
    code, out, _ = rvtune(capsys, MATMUL, "--config", CONFIG, "--signature", sig, "--emit", "c")
    assert code == 0 and "void matmul_kernel(" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--config", CONFIG + ",BLOCK_SIZE_Q=4"], "BLOCK_SIZE_Q is not a constexpr of matmul_kernel"),
    (["--config", "BLOCK_SIZE_M=8,BLOCK_SIZE_N=16,GROUP_SIZE_M=2"], "BLOCK_SIZE_K"),
    (["--config", "BLOCK_SIZE_M=eight"], "BLOCK_SIZE_M=eight is not an integer"),
    (["--config", CONFIG, "--target", "nowhere"], "--target nowhere: no such target"),
    (["--config", CONFIG, "--case", "huge"], "no case 'huge'"),
    (["--config", CONFIG, "--signature", "a_ptr=*fp32"], "parameter(s) b_ptr, c_ptr, M"),
])
def test_bad_input_is_named(capsys, argv, message):
    code, out, err = rvtune(capsys, MATMUL, *argv)
    assert code == 2
    assert message in err
    assert out == ""


def test_missing_kernel_file(capsys, tmp_path):
    code, _, err = rvtune(capsys, str(tmp_path / "nope.py"))
    assert code == 2 and "nope.py" in err


def test_console_script_prints_c():
    # The installed `rvtune` entry point, as a user runs it (one subprocess: Triton's import is slow).
    proc = subprocess.run([sys.executable, "-m", "pytest_rvtune.cli", "compile", MATMUL, "--config", CONFIG],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "void matmul_kernel(" in proc.stdout


def test_emit_elf_links_riscv_executable(capsys):
    code, out, err = rvtune(capsys, MATMUL, "--config", CONFIG, "--target", "qemu", "--emit", "elf")
    assert code == 0, err
    elf = Path(out.strip())
    header = elf.read_bytes()[:20]
    assert header[:4] == b"\x7fELF"
    assert int.from_bytes(header[18:20], "little") == 243  # EM_RISCV
    assert "--grid" in err  # how to run it


def test_partial_config_outside_the_space_is_named(capsys):
    code, _, err = rvtune(capsys, MATMUL, "--config", "BLOCK_SIZE_M=3", "--emit", "c")
    assert code == 2
    assert "no config of matmul_kernel's space has BLOCK_SIZE_M=3" in err and "BLOCK_SIZE_N" in err
