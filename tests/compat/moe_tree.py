"""A small MoE-like kernel in the Triton_RVV format, written by us: data that depends on BLOCK_SIZE_M (each expert's
token slots padded to a multiple of it), per-value TXT files named ``matrix_BLOCK_SIZE_M_<v>_...``, and a harness
that hard-codes the padded size of one value (as their fused_moe_kernel.cpp does for BLOCK_SIZE_M=4)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch
from rvv_tree import make_tree, write_matrix

from pytest_rvtune.moe_align import moe_align_block_size

#: M tokens routed to top_k of E experts, N features; the routing is fixed (not random) so tests can reason on it.
M, E, N, TOP_K = 6, 3, 12, 2
TOPK_IDS = torch.tensor([[0, 1], [0, 2], [1, 0], [0, 1], [2, 0], [0, 2]])

MOE_MODULE = '''
import torch
import triton
import triton.language as tl

triton.runtime.driver.set_active_to_cpu()


def moe_kernel(a_ptr, w_ptr, c_ptr, sorted_token_ids_ptr, expert_ids_ptr, N, num_tokens_post_padded,
               num_valid_tokens, stride_am, stride_an, stride_we, stride_wn, stride_cm, stride_cn,
               BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, top_k: tl.constexpr):
    # c[slot] = a[slot // top_k] * w[expert of the slot's block]: one block of BLOCK_SIZE_M slots per program
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    if pid_m * BLOCK_SIZE_M >= num_tokens_post_padded:
        return
    slots = tl.load(sorted_token_ids_ptr + pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M))
    valid = (slots < num_valid_tokens) & (slots >= 0)
    expert = tl.load(expert_ids_ptr + pid_m)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    in_n = offs_n < N
    mask = valid[:, None] & in_n[None, :]
    a = tl.load(a_ptr + (slots[:, None] // top_k) * stride_am + offs_n[None, :] * stride_an, mask=mask, other=0.0)
    w = tl.load(w_ptr + expert * stride_we + offs_n * stride_wn, mask=in_n, other=0.0)
    tl.store(c_ptr + slots[:, None] * stride_cm + offs_n[None, :] * stride_cn, a * w[None, :], mask=mask)


def get_moe_kernel_autotune_config(num_threads=1):
    return [triton.Config({"BLOCK_SIZE_M": 4, "BLOCK_SIZE_N": n, "top_k": 2}, num_threads=num_threads)
            for n in (8, 16)]


def benchmark_triton(a, w, c, sorted_token_ids, expert_ids, num_tokens_post_padded, num_valid_tokens):
    M, N = a.shape
    E, _ = w.shape
    assert c.dim() == 3
    fn_jit = triton.jit(moe_kernel)
    tuned = triton.runtime.Autotuner(fn=fn_jit, arg_names=fn_jit.arg_names,
                                     configs=get_moe_kernel_autotune_config(), key=[])
    grid = lambda META: (triton.cdiv(num_tokens_post_padded, META["BLOCK_SIZE_M"]),
                         triton.cdiv(N, META["BLOCK_SIZE_N"]))
    tuned[grid](a, w, c, sorted_token_ids, expert_ids, N, num_tokens_post_padded, num_valid_tokens,
                a.stride(0), a.stride(1), w.stride(0), w.stride(1), c.stride(1), c.stride(2))
'''


def harness(em: int) -> str:
    """Their style: every size hard-coded (the padded size EM right for one BLOCK_SIZE_M only), no argv."""
    return f'''
#include "moe_kernel_launcher.h"
#include "support/support.h"
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

int main(int argc, char *argv[]) {{
  int M = {M}, E = {E}, N = {N}, TopK = {TOP_K};
  int total_padded_tokens = {em}, expert_ids_size = total_padded_tokens / moe_kernel_BLOCK_SIZE_M;
  int num_valid_tokens = M * TopK;
  float *A = (float *)malloc(M * N * sizeof(float));
  float *W = (float *)malloc(E * N * sizeof(float));
  float *ref_output = (float *)malloc(M * TopK * N * sizeof(float));
  float *real_output = (float *)malloc(M * TopK * N * sizeof(float));
  int *sorted_token_ids = (int *)malloc(total_padded_tokens * sizeof(int));
  int *expert_ids = (int *)malloc(expert_ids_size * sizeof(int));
  memset(real_output, 0, M * TopK * N * sizeof(float));
  int rows, cols;
  std::string file1 = getDB("moe", std::to_string(M) + "x" + std::to_string(N), 1);
  if (!readMatrix(file1.c_str(), A, rows, cols)) return -1;
  std::string file2 = getDB("moe", std::to_string(E) + "x" + std::to_string(N), 2);
  if (!readMatrix(file2.c_str(), W, rows, cols)) return -1;
  std::string file3 = getDB("moe", std::to_string(M) + "x" + std::to_string(TopK) + "x" + std::to_string(N), 3);
  if (!readMatrix(file3.c_str(), ref_output, rows, cols)) return -1;
  std::string file4 = getDB("moe", std::to_string(1) + "x" + std::to_string(total_padded_tokens), 4);
  if (!readMatrix(file4.c_str(), sorted_token_ids, rows, cols)) return -1;
  std::string file5 = getDB("moe", std::to_string(1) + "x" + std::to_string(expert_ids_size), 5);
  if (!readMatrix(file5.c_str(), expert_ids, rows, cols)) return -1;
  auto begin = std::chrono::high_resolution_clock::now();
  moe_kernel_wrap(ceil(1.0 * total_padded_tokens / moe_kernel_BLOCK_SIZE_M),
                  ceil(1.0 * N / moe_kernel_BLOCK_SIZE_N), 1, 1, moe_kernel,
                  A, W, real_output, sorted_token_ids, expert_ids, N, total_padded_tokens, num_valid_tokens,
                  N, N, N);
  std::chrono::duration<double> t = std::chrono::high_resolution_clock::now() - begin;
  PRINT_KERNEL_RUNNING_TIME(TRITON_KERNEL, t.count())
  check_tensor(ref_output, real_output, M * TopK * N, "out");
  return 0;
}}
'''


def expected_output(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.stack([torch.stack([a[m] * w[int(TOPK_IDS[m, k])] for k in range(TOP_K)]) for m in range(M)])


def make_moe_tree(root: Path, values: tuple[int, ...] = (4, 8, 16), harness_value: int = 4) -> Path:
    """A checkout (beside rvv_tree's `scale`) with the `moe` kernel, data for each BLOCK_SIZE_M in ``values`` and a
    harness hard-coding the padded size of ``harness_value``."""
    make_tree(root)
    (root / "benchmark/src/triton/moe.py").write_text(textwrap.dedent(MOE_MODULE))
    em = int(moe_align_block_size(TOPK_IDS, harness_value, E)[2])
    (root / "benchmark/src/main/moe_kernel.cpp").write_text(harness(em))
    a = torch.arange(M * N, dtype=torch.float32).reshape(M, N) * 0.25 - 5
    w = torch.arange(E * N, dtype=torch.float32).reshape(E, N) * 0.5 - 3
    data = root / "benchmark/auto-tuner/moe/run/test_data"
    write_matrix(data / f"matrix_{M}x{N}_1.txt", a.tolist())
    write_matrix(data / f"matrix_{E}x{N}_2.txt", w.tolist())
    c = expected_output(a, w).reshape(M * TOP_K, N)
    for bm in values:
        sorted_ids, expert_ids, em_t = moe_align_block_size(TOPK_IDS, bm, E)
        em = int(em_t)
        prefix = data / f"matrix_BLOCK_SIZE_M_{bm}"
        write_matrix(Path(f"{prefix}_{M}x{TOP_K}x{N}_3.txt"), c.tolist())
        write_matrix(Path(f"{prefix}_1x{em}_4.txt"), [sorted_ids.tolist()], "%d")
        write_matrix(Path(f"{prefix}_1x{em // bm}_5.txt"), [expert_ids.tolist()], "%d")
    return root


def padded_size(bm: int) -> int:
    return int(moe_align_block_size(TOPK_IDS, bm, E)[2])
