"""C = A @ B (fp32), the Triton tutorial's grouped-ordering matmul with plain pointers and masks."""

import itertools

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # Programs are grouped GROUP_SIZE_M rows of blocks at a time so neighbouring programs reuse B columns.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
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
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_remaining = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_remaining), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_remaining) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def get_matmul_kernel_autotune_config():
    # The seeds' space: every power of two M 4..128 x N 8..128 x K 8..128 = 6 * 5 * 5 = 150 configs.
    return [
        triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8})
        for bm, bn, bk in itertools.product([4, 8, 16, 32, 64, 128], [8, 16, 32, 64, 128], [8, 16, 32, 64, 128])
    ]


CASES = {
    "small": dict(M=67, N=45, K=33),  # ragged: every block size leaves a partial tile
    "emu": dict(M=160, N=160, K=160),  # ~0.2-1 s per run under QEMU: the full space in minutes
    "bench": dict(M=1024, N=1024, K=1024),  # the seeds' size
}
TOLERANCE = dict(atol=1e-4, rtol=1e-4)


def FLOPS(case):  # one multiply and one add per (m, n, k): what reports turn into FLOP/cycle
    return 2 * case["M"] * case["N"] * case["K"]


def BYTES(case):  # fp32 A and B read once, C written once: the compulsory traffic of one launch
    return 4 * (case["M"] * case["K"] + case["K"] * case["N"] + case["M"] * case["N"])


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    M, N, K = case["M"], case["N"], case["K"]
    # Uniform in [-1, 1): sums over K=1024 stay well inside fp32's accuracy for the tolerance above.
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
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731 (written as Triton users do)
    kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
    )
