"""Run files on a board: a harness that opens its data by relative path (Triton_RVV style) finds them in a
per-run directory of symlinks to the content-addressed uploads, and its output is read in its own format.

The board is the fixture OpenSSH server running rv64 ELFs under qemu-riscv64 (or RVTUNE_TEST_BOARD).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rvtune.harness.output_format import OutputFormat
from pytest_rvtune.targets.base import RunFilesError
from pytest_rvtune.targets.config import TargetConfig
from pytest_rvtune.targets.ssh import SshPool, SshTarget, connect_board
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain

# Reads each relative path it is given and prints it back, then the lines the triton-rvv format reads.
READER = r"""
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char cwd[4096];
    printf("cwd=%s\n", getcwd(cwd, sizeof cwd) ? cwd : "?");
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "r");
        if (!f) { printf("Cannot open file %s\n", argv[i]); return 255; }
        char line[256];
        printf("%s: %s", argv[i], fgets(line, sizeof line, f) ? line : "(empty)\n");
        fclose(f);
    }
    printf("out OK\n");
    fprintf(stderr, "Running Triton Kernel Average Time: 0.25 s\n");
    return 0;
}
"""

ODD = "we ird/it's \"q\" $(touch PWNED) `x`; & *.txt"


@pytest.fixture(scope="module")
def reader_elf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("reader")
    (d / "reader.c").write_text(READER)
    tc = Toolchain.for_isa(RISCV_ISA)
    tc.compile(d / "reader.c", d / "reader.o")
    tc.link([d / "reader.o"], d / "reader.elf")
    return d / "reader.elf"


@pytest.fixture
def target(board: TargetConfig) -> Iterator[SshTarget | SshPool]:
    t = connect_board(board, worker_id="gw0")
    yield t
    t.close()


def test_files_are_found_at_their_relative_paths_and_the_run_dir_goes_away(target: SshTarget, reader_elf: Path,
                                                                           tmp_path: Path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("2 2 first\n")
    second.write_text("1 1 second\n")
    files = {"mm/run/test_data/matrix_2x2_1.txt": first, ODD: second}
    result = target.run(reader_elf, list(files), timeout=60, files=files,
                        output_format=OutputFormat.load("triton-rvv"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "mm/run/test_data/matrix_2x2_1.txt: 2 2 first\n" in result.stdout
    assert f"{ODD}: 1 1 second\n" in result.stdout
    assert [(c.name, c.ok) for c in result.checks] == [("out", True)] and result.samples_ns == [250_000_000]
    cwd = result.stdout.splitlines()[0].removeprefix("cwd=")
    assert cwd.startswith(f"{target.work_dir}/.run-")
    status, out, _ = target.run_shell(f"test -e {shlex.quote(cwd)} && echo left || echo gone")
    assert out.strip() == "gone"
    status, out, _ = target.run_shell(f"find {shlex.quote(target.work_dir)} -name 'PWNED*'")
    assert status == 0 and out == ""


def test_without_files_the_run_stays_in_the_work_dir_and_reads_rvtune(target: SshTarget, reader_elf: Path):
    result = target.run(reader_elf, [], timeout=60)
    assert result.stdout.splitlines()[0] == f"cwd={target.work_dir}"
    assert result.checks == [] and result.samples_ns == []  # "out OK" is not an RVTUNE line


def test_a_missing_run_file_is_the_harness_error_and_a_bad_path_is_refused(target: SshTarget, reader_elf: Path,
                                                                           tmp_path: Path):
    result = target.run(reader_elf, ["mm/x.txt"], timeout=60, files={}, output_format=OutputFormat.load("triton-rvv"))
    assert result.returncode == 255 and result.errors == ["Cannot open file mm/x.txt"] and result.checks == []
    with pytest.raises(RunFilesError, match=r"run file '/abs\.txt': must be a relative path"):
        target.run(reader_elf, [], timeout=60, files={"/abs.txt": reader_elf})
