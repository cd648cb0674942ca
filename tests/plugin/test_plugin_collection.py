"""Collection: item ids, selection (-k, markers, --rvtune-case/-config/-target), broken kernel modules.

Collection only (--collect-only): the real kernel modules are imported and validated, nothing is built.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import REPO, kernel_source


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line]


def test_ids_stable_and_selection(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("pc_add", configs=(16, 32, 64))
    add_kernel("pc_other", configs=(16,))
    first = collected(project.runpytest("--co", "-q"))
    # default case on the default target (qemu) is emu; ids are <kernel>[<case>-<config id>]
    assert first == ["kernels/pc_add.py::pc_add[emu-BLOCK=16]", "kernels/pc_add.py::pc_add[emu-BLOCK=32]",
                     "kernels/pc_add.py::pc_add[emu-BLOCK=64]", "kernels/pc_other.py::pc_other[emu-BLOCK=16]"]
    assert collected(project.runpytest("--co", "-q")) == first  # stable across runs

    assert collected(project.runpytest("--co", "-q", "-k", "pc_other")) == first[3:]
    assert collected(project.runpytest("--co", "-q", "-k", "BLOCK=16")) == [first[0], first[3]]
    assert collected(project.runpytest("--co", "-q", "-k", "BLOCK=1 or LOCK=16")) == []  # values are exact
    # --rvtune-config: values ORed; repeated filters all apply
    assert collected(project.runpytest("--co", "-q", "--rvtune-config", "BLOCK=32,64")) == first[1:3]
    assert collected(project.runpytest("--co", "-q", "--rvtune-config", "BLOCK=16,64",
                                       "--rvtune-config", "BLOCK=64,32")) == first[2:3]
    # cases (repeatable) and markers per kernel and per case
    both = collected(project.runpytest("--co", "-q", "--rvtune-case", "small", "--rvtune-case", "emu",
                                       "-k", "pc_other"))
    assert both == ["kernels/pc_other.py::pc_other[small-BLOCK=16]", "kernels/pc_other.py::pc_other[emu-BLOCK=16]"]
    marked = collected(project.runpytest("--co", "-q", "--strict-markers", "--rvtune-case", "small",
                                         "--rvtune-case", "emu", "-m", "small and pc_add"))
    assert marked == [f"kernels/pc_add.py::pc_add[small-BLOCK={b}]" for b in (16, 32, 64)]


def test_target_matrix(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("pc_matrix", configs=(16,))
    ids = collected(project.runpytest("--co", "-q", "--rvtune-target", "qemu", "--rvtune-target", "host",
                                      "--rvtune-case", "small"))
    assert ids == ["kernels/pc_matrix.py::pc_matrix[small-BLOCK=16-qemu]",
                   "kernels/pc_matrix.py::pc_matrix[small-BLOCK=16-host]"]


def test_usage_errors(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("pc_usage", configs=(16,))
    result = project.runpytest("--co", "-q", "--rvtune-target", "nosuchboard")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rvtune-target nosuchboard: unknown target; known targets are host, qemu*"])
    # a key no kernel has: one collection error (shown by the xdist controller too), nothing runs
    result = project.runpytest("--co", "-q", "--rvtune-config", "BLOK=16")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*--rvtune-config: no kernel has the key(s) BLOK; check the spelling*"])
    result = project.runpytest("--co", "-q", "--rvtune-config", "BLOCK")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rvtune-config: config filter 'BLOCK': clause 'BLOCK' is not KEY=V1,V2*"])


def test_num_threads_of_a_config_is_in_its_id(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    """triton-cpu's Config(..., num_threads=n): the id says it (results record the id); configs without it keep
    the ids they always had."""
    source = kernel_source("pc_threads", configs=(16, 32)).replace(
        'return [triton.Config({"BLOCK": b}) for b in [16, 32]]',
        'return [triton.Config({"BLOCK": 16}, num_threads=2), triton.Config({"BLOCK": 16}), '
        'triton.Config({"BLOCK": 32}, num_threads=0)]')
    add_kernel("pc_threads", source=source)
    ids = collected(project.runpytest("--co", "-q"))
    assert ids == ["kernels/pc_threads.py::pc_threads[emu-BLOCK=16-num_threads=2]",
                   "kernels/pc_threads.py::pc_threads[emu-BLOCK=16]",
                   "kernels/pc_threads.py::pc_threads[emu-BLOCK=32-num_threads=0]"]
    assert collected(project.runpytest("--co", "-q", "--rvtune-config", "BLOCK=16")) == ids[:2]


def test_broken_modules_are_one_collection_error_each(project: pytest.Pytester,
                                                      add_kernel: Callable[..., Path]) -> None:
    add_kernel("pc_fine", configs=(16,))
    add_kernel("pc_import", source="import triton\nraise RuntimeError('no GPU here, on purpose')\n")
    add_kernel("pc_exit", source="import sys\nsys.exit(3)\n")  # once an INTERNALERROR that ended the session
    add_kernel("pc_noconfigs", source=(project.path / "kernels" / "pc_fine.py").read_text()
               .replace("pc_fine", "pc_noconfigs").replace("for b in [16]", "for b in []"))
    add_kernel("pc_badconfig", source=(project.path / "kernels" / "pc_fine.py").read_text()
               .replace("pc_fine", "pc_badconfig").replace("for b in [16]", "for b in [24]"))
    result = project.runpytest("--co", "-q")
    result.stdout.fnmatch_lines_random([
        "*pc_import.py: import failed: RuntimeError: no GPU here, on purpose*",
        "*pc_noconfigs.py: get_pc_noconfigs_kernel_autotune_config() returned no configs*",
        "*pc_badconfig.py: config 0 (BLOCK=24): BLOCK=24 is used as a tl.arange length: it must be a power of two*",
        "*pc_exit.py: import failed: SystemExit: 3 (the module called sys.exit(); a kernel module must not exit)*",
        "*4 errors*",
    ])
    assert "INTERNALERROR" not in result.stdout.str()
    assert collected(result) == ["kernels/pc_fine.py::pc_fine[emu-BLOCK=16]"]
    assert sum("ERROR kernels/" in line for line in result.outlines) == 4
    # and the session goes on: the good kernel runs beside the one that exits
    ran = project.runpytest("-q")
    ran.assert_outcomes(passed=1, errors=4)
    assert "INTERNALERROR" not in ran.stdout.str()


def test_repo_kernels_select_by_name_and_config_value(pytester: pytest.Pytester) -> None:
    args = ("--co", "-q", "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"), str(REPO / "kernels"),
            "--rvtune-case", "small")
    moe = collected(pytester.runpytest(*args, "-k", "fused_moe"))
    assert len(moe) == 45 and all("fused_moe.py::fused_moe[small-BLOCK_SIZE_M=" in i for i in moe)
    assert {i.split("BLOCK_SIZE_M=")[1].split("-")[0] for i in moe} == {"4", "8", "16", "32", "64"}
    assert "kernels/fused_moe.py::fused_moe[small-BLOCK_SIZE_M=16-BLOCK_SIZE_N=64-BLOCK_SIZE_K=32-GROUP_SIZE_M=8]" \
        in moe
    m16 = collected(pytester.runpytest(*args, "-k", "BLOCK_SIZE_M=16"))
    assert m16 and all("BLOCK_SIZE_M=16-" in i for i in m16)
    assert {i.split("::")[0] for i in m16} >= {"kernels/fused_moe.py", "kernels/matmul.py"}
    # a filter on a key some kernels lack leaves those kernels out instead of failing them
    filtered = collected(pytester.runpytest(*args, "--rvtune-config", "BLOCK_SIZE_M=16"))
    assert {i.split("::")[0] for i in filtered} == {i.split("::")[0] for i in m16}


def test_run_timeout_from_option_then_target_then_default(project: pytest.Pytester) -> None:
    """A board's own `timeout` applies unless --rvtune-timeout is given (a slow board may need more)."""
    project.makefile(".toml", rvtune='[targets.slowboard]\nhost = "127.0.0.1"\ntimeout = 7\n')
    project.makepyfile(test_timeouts="""
        def test_timeouts(rvtune_targets, pytestconfig):
            given = pytestconfig.getoption("rvtune_timeout")
            assert rvtune_targets.timeout_for("slowboard") == (given or 7)
            assert rvtune_targets.timeout_for("qemu") == (given or 300)
    """)
    project.runpytest("test_timeouts.py").assert_outcomes(passed=1)
    project.runpytest("test_timeouts.py", "--rvtune-timeout", "3").assert_outcomes(passed=1)

