"""C = A @ B (fp32) with an aiter-sized tuning space: the GEMM `benchmarks/search.py` searches.

aiter's Triton GEMMs tune 3,456 configs per (N, K) over several M buckets (block sizes, group size, split-K,
pipeline knobs). Ours has 3,000, every key one that changes the code our backend builds: block sizes, the
program grouping, the order programs walk the output tiles, and how far the K loop is unrolled. Its cases are
four M buckets of one (N, K), as aiter's tuner runs them.
"""

import itertools

import torch
import triton
import triton.language as tl


@triton.jit
def gemm_space_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, N_MAJOR: tl.constexpr, UNROLL_K: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    if N_MAJOR:  # walk the tiles along N first (groups of GROUP_SIZE_M columns of blocks)
        num_pid_in_group = GROUP_SIZE_M * num_pid_m
        group_id = pid // num_pid_in_group
        first_pid_n = group_id * GROUP_SIZE_M
        group_size_n = min(num_pid_n - first_pid_n, GROUP_SIZE_M)
        pid_n = first_pid_n + ((pid % num_pid_in_group) % group_size_n)
        pid_m = (pid % num_pid_in_group) // group_size_n
    else:  # the Triton tutorial's grouped ordering along M
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_SIZE_K), loop_unroll_factor=UNROLL_K):
        k_remaining = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_remaining), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_remaining) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def get_gemm_space_kernel_autotune_config():
    # 6 x 5 x 5 x 5 x 2 x 2 = 3,000 configs
    return [
        triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g,
                       "N_MAJOR": n_major, "UNROLL_K": unroll})
        for bm, bn, bk, g, n_major, unroll in itertools.product(
            [4, 8, 16, 32, 64, 128], [8, 16, 32, 64, 128], [8, 16, 32, 64, 128], [1, 2, 4, 8, 16],
            [False, True], [1, 2])
    ]


# aiter's M buckets (16, 32, 64, 128 of its 16..4096) for one (N, K), sized for QEMU.
CASES = {
    "small": dict(M=19, N=24, K=40),  # ragged: every block size leaves a partial tile
    "M16": dict(M=16, N=64, K=128),
    "M32": dict(M=32, N=64, K=128),
    "M64": dict(M=64, N=64, K=128),
    "M128": dict(M=128, N=64, K=128),
}
TOLERANCE = dict(atol=1e-4, rtol=1e-4)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    M, N, K = case["M"], case["N"], case["K"]
    return {
        "a": torch.rand((M, K), generator=g) * 2 - 1,
        "b": torch.rand((K, N), generator=g) * 2 - 1,
        "c": torch.empty((M, N)),
    }


def reference(inputs, case):
    return {"c": (inputs["a"].double() @ inputs["b"].double()).float()}


def launch(kernel, inputs, case):
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    M, N, K = case["M"], case["N"], case["K"]
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
    )
