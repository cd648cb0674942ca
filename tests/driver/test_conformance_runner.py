"""benchmarks/triton_conformance.py on a small test file of ours written the way Triton's test_core.py is
(a ``device`` fixture, numpy asserts): every verdict class, a crashing item, sampling, the summary table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout these tests belong to

RUNNER = REPO_ROOT / "benchmarks" / "triton_conformance.py"

FAKE_TEST_CORE = '''
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def add_one(X, Z, SIZE: tl.constexpr):
    off = tl.arange(0, SIZE)
    tl.store(Z + off, tl.load(X + off) + 1)


@triton.jit
def inline_asm(X, SIZE: tl.constexpr):
    x = tl.load(X + tl.arange(0, SIZE))
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(X + tl.arange(0, SIZE), y)


@pytest.mark.parametrize("size", [4, 8, 16])
def test_add(size, device):
    x = torch.arange(size, dtype=torch.float32, device=device)
    z = torch.empty_like(x)
    add_one[(1, )](x, z, SIZE=size)
    np.testing.assert_allclose(z.numpy(), x.numpy() + 1)


def test_wrong_reference(device):
    x = torch.zeros(4, device=device)
    z = torch.empty_like(x)
    add_one[(1, )](x, z, SIZE=4)
    np.testing.assert_allclose(z.numpy(), x.numpy() + 2)


def test_refused(device):
    inline_asm[(1, )](torch.zeros(4, device=device), SIZE=4)


def test_reads_a_gpu_stage(device):
    h = add_one[(1, )](torch.zeros(4, device=device), torch.empty(4, device=device), SIZE=4)
    assert "tt.load" in h.asm["ttir"]
    assert "ld.global" in h.asm["ptx"]


def test_other(device):
    raise RuntimeError("not a compiler problem")


def test_no_kernel(device):
    assert torch.zeros(2, device=device).sum() == 0


def test_skips_itself(device):
    pytest.skip("Only for cuda")


def test_crashes(device):
    os.abort()
'''


def run(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    test_file = tmp_path / "test_core.py"
    test_file.write_text(textwrap.dedent(FAKE_TEST_CORE))
    out = tmp_path / "verdicts.json"
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton"), "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run([sys.executable, str(RUNNER), str(test_file), "--json", str(out), *args],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert out.exists(), proc.stdout + proc.stderr
    return proc, json.loads(out.read_text())


def test_every_verdict_and_a_crash(tmp_path):
    proc, results = run(tmp_path)
    verdicts = {r["nodeid"].split("::")[-1]: r["verdict"] for r in results}
    assert verdicts == {
        "test_add[4]": "pass", "test_add[8]": "pass", "test_add[16]": "pass",
        "test_wrong_reference": "wrong", "test_refused": "refused", "test_other": "other",
        "test_skips_itself": "skipped", "test_crashes": "other", "test_no_kernel": "pass",
        "test_reads_a_gpu_stage": "gpu stage",
    }
    # reached our lowering: the three adds, the wrong one and the refused one; not the test without a kernel
    assert [r["nodeid"].split("::")[-1] for r in results if r["reached_lowering"]] == [
        "test_add[4]", "test_add[8]", "test_add[16]", "test_wrong_reference", "test_refused",
        "test_reads_a_gpu_stage"]
    assert proc.returncode == 1  # a wrong result fails the run
    # the table: function, run, pass, wrong, refused, other, skipped
    assert "| test_add " in proc.stdout and "|     3 |      3 |       0 |" in proc.stdout
    assert "items that reached our lowering: 6, passed 3 (50.00 %)" in proc.stdout, proc.stdout
    assert "without the 1 that read a GPU compiler stage: 5, passed 3 (60.00 %)" in proc.stdout
    assert "KeyError: \"Unknown key: 'ptx'\"" in proc.stdout
    assert "test_core.py::test_wrong_reference: AssertionError: Not equal to tolerance" in proc.stdout
    assert "UnsupportedOpError: operation tt.elementwise_inline_asm: rvtune cannot lower it" in proc.stdout
    assert "the test process crashed" in proc.stdout


def test_sample_in_process(tmp_path):
    proc, results = run(tmp_path, "--sample", "3", "--seed", "4", "--workers", "0", "-k", "test_add or other")
    assert len(results) == 3, proc.stdout
    assert "(sample of 3, seed 4)" in proc.stdout


def test_a_kernel_crash_under_qemu_is_other_and_named_even_behind_the_tests_own_assert():
    # Triton's tests wrap some launches in ``try: ... except BaseException: assert False``; the verdict and the
    # reason must come from the crash, not from that assert (nor count it as a refusal of ours).
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        import triton_conformance_plugin as plugin
    finally:
        sys.path.pop(0)
    import numpy as np

    from pytest_rvtune.cpu_driver.launch import KernelCrashError, LaunchError

    def fail_after(error: Exception) -> AssertionError:
        try:
            try:
                raise error
            except BaseException:
                np.testing.assert_(False)  # as Triton's test does: the error stays the assert's __context__
        except AssertionError as e:
            return e

    crashed = fail_after(KernelCrashError("kernel k: the kernel crashed under QEMU (SIGSEGV; ...)"))
    assert plugin.classify(crashed) == ("other", True)
    assert plugin.reason_of(crashed).startswith("KernelCrashError: kernel k: the kernel crashed under QEMU")
    refused = fail_after(LaunchError("kernel k: argument 'x' is on device meta"))
    assert plugin.classify(refused) == ("refused", True)


def test_an_assert_inside_torch_is_other_but_torch_testing_mismatches_are_wrong():
    # Triton's tests create CUDA tensors in some parametrisations: torch's own "not compiled with CUDA" assert is
    # not a wrong result; torch.testing.assert_close (raised from inside torch as well) is one.
    import torch

    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        import triton_conformance_plugin as plugin
    finally:
        sys.path.pop(0)

    def raised(fn) -> BaseException:
        try:
            fn()
        except BaseException as e:  # whatever the call raises is the subject
            return e
        raise AssertionError(f"{fn} raised nothing")

    no_cuda = raised(lambda: torch.zeros(1, device="cuda"))
    assert isinstance(no_cuda, AssertionError) and "CUDA" in str(no_cuda)
    assert plugin.classify(no_cuda) == ("other", False)
    mismatch = raised(lambda: torch.testing.assert_close(torch.ones(2), torch.zeros(2)))
    assert plugin.classify(mismatch) == ("wrong", False)


STOPPABLE_TEST_CORE = '''
import time

import pytest


@pytest.mark.parametrize("i", range(4))
def test_quick(i, device):
    assert device == "cpu"


def test_slow(device):
    time.sleep(900)
'''


def test_stop_after_reports_the_items_that_finished_in_random_order(tmp_path):
    """A run longer than the machine allows is interrupted (--stop-after) and still reports what finished;
    --shuffle makes that a random sample of the file. The slow item never finishes, so it is never counted.
    The runner is started with SIGINT ignored, as a shell starts a background job."""
    test_file = tmp_path / "test_core.py"
    test_file.write_text(textwrap.dedent(STOPPABLE_TEST_CORE))
    out = tmp_path / "verdicts.json"
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton"), "PYTHONPATH": str(REPO_ROOT)}
    # started as `runner ... &` from a script starts it: with SIGINT ignored, which pytest must not inherit
    proc = subprocess.run([sys.executable, str(RUNNER), str(test_file), "--json", str(out), "--shuffle", "--seed", "3",
                           "--stop-after", "45", "--workers", "1", "--timeout", "60"],
                          capture_output=True, text=True, env=env, timeout=600, check=False,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert "stopped after 45 s, " in proc.stdout and "(random order, seed 3)" in proc.stdout, proc.stdout
    results = json.loads(out.read_text())
    assert all(r["verdict"] == "pass" and r["function"] == "test_quick" for r in results), results
    assert proc.returncode == 0


def test_half_precision_references_are_exact_products_rounded_once(monkeypatch):
    # the runner's references for torch.matmul on CPU fp16/bf16 tensors (exact_half_matmul): every element is the
    # exact product rounded once to the dtype; other calls are torch's own
    import torch

    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        import triton_conformance_plugin as plugin
    finally:
        sys.path.pop(0)
    original = torch.matmul
    monkeypatch.setattr(torch, "matmul", original)  # restored after the test
    plugin.exact_half_matmul()
    plugin.exact_half_matmul()  # a second call does not wrap the wrapper
    assert torch.matmul is not original and torch.matmul._rvtune_exact
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        # K = 128 products of widely spread magnitudes, so that rounding anywhere but once at the end would show
        a = (torch.randn(32, 128, generator=g) * 64).to(dtype)
        b = (torch.randn(128, 32, generator=g) * 64).to(dtype)
        got = torch.matmul(a, b)
        assert got.dtype == dtype
        exact = (a.double() @ b.double()).to(dtype)
        assert torch.equal(got, exact)
    x, y = torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)
    assert torch.equal(torch.matmul(x, y), original(x, y))  # fp32: torch's own


def test_a_journal_keeps_each_verdict_and_a_second_run_goes_on_where_the_first_stopped(tmp_path):
    journal = tmp_path / "journal.jsonl"
    _, results = run(tmp_path, "--workers", "0", "-k", "test_add", "--journal", str(journal))
    assert sorted(r["nodeid"].split("::")[-1] for r in results) == ["test_add[16]", "test_add[4]", "test_add[8]"]
    lines = journal.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["seconds"] >= 0 for line in lines)
    # an interrupted write leaves a torn last line: that item is not counted as done and runs again
    journal.write_text("\n".join(lines[:2]) + "\n" + lines[2][:20])
    torn = json.loads(lines[2])["nodeid"]
    second, results = run(tmp_path, "--workers", "0", "-k", "test_add or test_no_kernel", "--journal", str(journal))
    assert "|     4 |      4 |       0 |" in second.stdout, second.stdout  # the table covers both runs
    new = [json.loads(line)["nodeid"] for line in journal.read_text().splitlines()[3:]]
    assert sorted(new) == sorted([torn, "test_core.py::test_no_kernel"])  # the two finished ones did not run again
    assert len(results) == 4
