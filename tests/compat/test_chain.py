"""Kernels their Python launch code runs as a chain (each launch consuming the previous one's output), where their
harness cannot serve them: one item per config runs the whole chain in one ELF, its final output checked against
their Python reference (our own files in the Triton_RVV format: a 2-kernel chain and a harness calling a kernel
the module does not define, as their August attention harness does)."""

from __future__ import annotations

import ast
import contextlib
import io
import shutil
import textwrap
from pathlib import Path

import pytest
from rvv_tree import make_tree, write_matrix
from test_variants import _pytest

from pytest_rvtune.cli import main
from pytest_rvtune.compat.chain_plan import merge_signatures
from pytest_rvtune.compat.chain_scan import chain_in
from pytest_rvtune.compat.project import read_project

MODULE = '''
import torch
import triton
import triton.language as tl

triton.runtime.driver.set_active_to_cpu()


def chain_scale_kernel(x_ptr, y_ptr, M, N, stride_m, stride_n, BLOCK_SIZE_M: tl.constexpr, COLS: tl.constexpr):
    pid = tl.program_id(axis=0)
    rows = pid * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cols = tl.arange(0, COLS)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * stride_m + cols[None, :] * stride_n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def chain_add_kernel(y_ptr, w_ptr, z_ptr, M, N, stride_m, stride_n, BLOCK_SIZE_M: tl.constexpr,
                     COLS: tl.constexpr):
    pid = tl.program_id(axis=0)
    rows = pid * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cols = tl.arange(0, COLS)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * stride_m + cols[None, :] * stride_n
    tl.store(z_ptr + offs, tl.load(y_ptr + offs, mask=mask) + tl.load(w_ptr + offs, mask=mask), mask=mask)


def get_chain_kernel_autotune_config(N, num_threads=1):
    return [triton.Config({"BLOCK_SIZE_M": m, "COLS": triton.next_power_of_2(N)}, num_threads=num_threads)
            for m in (2, 4)]


def benchmark_triton(X, W):
    M, N = X.shape
    Y = torch.empty_like(X)
    step_jit = triton.jit(chain_scale_kernel)
    step = triton.runtime.Autotuner(step_jit, step_jit.arg_names, configs=get_chain_kernel_autotune_config(N), key=[])
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]),)
    step[grid](X, Y, M, N, X.stride(0), X.stride(1))
    Z = torch.zeros((M, N), dtype=X.dtype)
    step_jit = triton.jit(chain_add_kernel)  # the name is bound again, as their attention's matmul_jit
    step = triton.runtime.Autotuner(step_jit, step_jit.arg_names, configs=get_chain_kernel_autotune_config(N), key=[])
    step[grid](Y, W, Z, M, N, Y.stride(0), Y.stride(1))


def torch_chain_reference(X, W):
    return X * 2.0 + W

'''

# Their August attention harness's situation: it calls a kernel the module does not define (cannot link).
HARNESS = '''
#include "chain_fused_kernel_launcher.h"
#include "support/support.h"

int main(int argc, char *argv[]) {
  int M = 6;
  int N = 10;
  int RUN_COUNT = 1;
  if (argc >= 2) {
    std::vector<int> Shape = splitStringToInts(argv[1]);
    if (Shape.size() == 3) { M = Shape.at(0); N = Shape.at(1); RUN_COUNT = Shape.at(2); }
  }
  float *x_ptr = (float *)malloc(M * N * sizeof(float));
  float *w_ptr = (float *)malloc(M * N * sizeof(float));
  float *ref_out_ptr = (float *)malloc(M * N * sizeof(float));
  float *out_ptr = (float *)malloc(M * N * sizeof(float));
  std::string file1 = getDB("chain", std::to_string(M) + "x" + std::to_string(N), 1);
  if (!readMatrix(file1.c_str(), x_ptr, M, N)) return -1;
  std::string file2 = getDB("chain", std::to_string(M) + "x" + std::to_string(N), 2);
  if (!readMatrix(file2.c_str(), w_ptr, M, N)) return -1;
  std::string file3 = getDB("chain", std::to_string(M) + "x" + std::to_string(N), 3);
  if (!readMatrix(file3.c_str(), ref_out_ptr, M, N)) return -1;
  chain_fused_kernel_wrap(M, 1, 1, 1, chain_fused_kernel, x_ptr, w_ptr, out_ptr, M, N, N);
  check_tensor(ref_out_ptr, out_ptr, M * N, "out");
  return 0;
}
'''


def _tree(root: Path) -> Path:
    make_tree(root)
    (root / "benchmark/src/triton/chain.py").write_text(textwrap.dedent(MODULE))
    (root / "benchmark/src/main/chain_kernel.cpp").write_text(HARNESS)
    data = root / "benchmark/auto-tuner/chain/run/test_data"  # their writer's inputs; no expected file (3)
    write_matrix(data / "matrix_6x10_1.txt", [[(i * 10 + j) * 0.25 - 5 for j in range(10)] for i in range(6)])
    write_matrix(data / "matrix_6x10_2.txt", [[(i - j) * 0.5 for j in range(10)] for i in range(6)])
    return root


def test_the_chain_is_read_from_the_launch_function_in_launch_order():
    host = next(n for n in ast.parse(textwrap.dedent(MODULE)).body
                if isinstance(n, ast.FunctionDef) and n.name == "benchmark_triton")
    chain = chain_in(host, {"chain_scale_kernel", "chain_add_kernel"})
    assert chain is not None
    assert [launch.kernel for launch in chain.launches] == ["chain_scale_kernel", "chain_add_kernel"]
    assert (chain.params, chain.made, chain.outputs) == (("X", "W"), ("Y", "Z"), ("Z",))
    assert chain.shared_getter() == "get_chain_kernel_autotune_config"
    # two launches that share no tensor made inside are no chain
    lone = ast.parse("def f(X, W):\n    A = torch.empty_like(X)\n    k1[(1,)](X, A)\n    k2[(1,)](W, X)\n").body[0]
    assert isinstance(lone, ast.FunctionDef) and chain_in(lone, {"k1", "k2"}) is None


def test_an_int_specialised_in_one_case_only_stays_a_number_for_every_case():
    one = {"k": {"x_ptr": "*fp32", "Z": 1, "stride_n": 1}}
    two = {"k": {"x_ptr": "*fp32", "Z": "i32", "stride_n": 1}}
    assert merge_signatures([one, two]) == merge_signatures([two, one]) == {"k": {"x_ptr": "*fp32", "Z": "i32",
                                                                                  "stride_n": 1}}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The tree, imported once (an import loads torch and records their launch: seconds)."""
    root = _tree(tmp_path_factory.mktemp("chain") / "repo")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["import", str(root)])
    return root, out.getvalue()


def test_import_plans_one_chain_item_per_config_and_each_runs_the_whole_chain(imported, cache):
    root, out = imported
    assert ("ok   chain: plan: case default: chain harness: their harness cannot serve it "
            "(benchmark/src/main/chain_kernel.cpp calls chain_fused_kernel_wrap, which benchmark/src/triton/chain.py "
            "does not define); their benchmark_triton() launches the chain chain_scale_kernel -> chain_add_kernel: "
            "one ELF runs it in that order, one config per item, given to every kernel "
            "(get_chain_kernel_autotune_config() gives every launch's configs), intermediates Y allocated by the "
            "harness; expected: their python reference torch_chain_reference") in out
    assert "inputs X = chain/run/test_data/matrix_6x10_1.txt, W = chain/run/test_data/matrix_6x10_2.txt" in out
    assert ("(2 configs: one item each on our chain harness (chain_scale_kernel -> chain_add_kernel in one ELF, "
            "every launch with the item's config))") in out
    entry = read_project(root / "rvtune.toml").entries["chain"]
    plan = entry.cases["default"].generic
    assert plan is not None and plan.chain == ("chain_scale_kernel", "chain_add_kernel")
    assert (plan.reference, plan.reference_outputs, entry.launch) == ("torch_chain_reference", ("Z",),
                                                                      "benchmark_triton")
    # the signature as their launch passes it: the contiguous rows' stride 1 specialised away, as triton-cpu did
    assert entry.signatures["chain_add_kernel"] == {"y_ptr": "*fp32", "w_ptr": "*fp32", "z_ptr": "*fp32",
                                                    "M": "i32", "N": "i32", "stride_m": "i32", "stride_n": 1}
    proc, records = _pytest(root, cache, "--rvtune-target", "qemu", "-k", "chain", "-n", "0")
    assert [r["outcome"] for r in records] == ["passed", "passed"], proc.stdout[-3000:] + proc.stderr[-3000:]
    assert all(r["chain"] == ["chain_scale_kernel", "chain_add_kernel"] and r["harness"] == "generic"
               and "expected: their python reference torch_chain_reference" in r["harness_why"] for r in records)
    assert records[0]["nodeid"].endswith("chain[default-BLOCK_SIZE_M=2-COLS=16-num_threads=1-chain]")
    # the counting window is one run of the whole chain (chain_chain_wrap calls both kernels' launchers)
    assert all(r["counters"]["launch_insns"] > 0 for r in records), [r["counters"] for r in records]


def test_a_wrong_intermediate_kernel_fails_the_chain_naming_the_kernels_and_the_config(imported, tmp_path, cache):
    root = tmp_path / "repo"
    shutil.copytree(imported[0], root)
    module = root / "benchmark/src/triton/chain.py"  # the first kernel of the chain is wrong, the second is right
    module.write_text(module.read_text().replace("mask=mask) * 2.0, mask=mask)", "mask=mask) * 3.0, mask=mask)"))
    proc, records = _pytest(root, cache, "--rvtune-target", "qemu", "-k", "chain and BLOCK_SIZE_M=2", "-n", "0")
    assert [r["outcome"] for r in records] == ["wrong"], proc.stdout[-3000:] + proc.stderr[-3000:]
    message = records[0]["message"]
    assert message.startswith("chain chain_scale_kernel -> chain_add_kernel [config BLOCK_SIZE_M=2-COLS=16-"
                              "num_threads=1]: the final output (Z, written by chain_add_kernel) differs from their "
                              "Python reference torch_chain_reference()"), message
    assert "chain_scale_kernel -> chain_add_kernel [config BLOCK_SIZE_M=2" in proc.stdout
