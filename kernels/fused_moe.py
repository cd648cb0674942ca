"""Fused mixture-of-experts GEMM (vLLM's fused_moe_kernel, fp32, plain pointers and masks).

Each (token, k) slot of a top-k routing is multiplied by its expert's weight matrix and, with
MUL_ROUTED_WEIGHT, scaled by its routing weight: C[i, k] = w[i, k] * A[i] @ B[topk_ids[i, k]]^T.
The slots are grouped per expert and padded to BLOCK_SIZE_M by ``moe_align_block_size``, so the
sorted_token_ids / expert_ids / num_tokens_post_padded inputs depend on BLOCK_SIZE_M: it is a variant key.
"""

import itertools

import torch
import triton
import triton.language as tl

from pytest_rvtune.moe_align import moe_align_block_size


@triton.jit
def fused_moe_kernel(
    a_ptr, b_ptr, c_ptr, topk_weights_ptr,
    sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
    N, K, EM, num_valid_tokens,
    stride_am, stride_ak,
    stride_be, stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    top_k: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    num_tokens_post_padded = tl.load(num_tokens_post_padded_ptr)
    if pid_m * BLOCK_SIZE_M >= num_tokens_post_padded:
        return
    # One block = BLOCK_SIZE_M slots of one expert; padding slots hold num_valid_tokens and are masked off.
    offs_token_id = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_token = tl.load(sorted_token_ids_ptr + offs_token_id)
    token_mask = offs_token < num_valid_tokens
    off_expert = tl.load(expert_ids_ptr + pid_m)

    offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    # Slot i * top_k + k reads token row i of A.
    a_ptrs = a_ptr + (offs_token[:, None] // top_k * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + off_expert * stride_be + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_remaining = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < k_remaining), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_remaining) & (offs_bn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    if MUL_ROUTED_WEIGHT:
        moe_weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0.0)
        acc = acc * moe_weight[:, None]

    c_ptrs = c_ptr + offs_token[:, None] * stride_cm + offs_bn[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=token_mask[:, None] & (offs_bn[None, :] < N))


def get_fused_moe_kernel_autotune_config():
    # The seeds' BLOCK_SIZE_M set x a power-of-two N/K grid: 5 * 3 * 3 = 45 configs.
    return [
        triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8})
        for bm, bn, bk in itertools.product([4, 8, 16, 32, 64], [16, 32, 64], [8, 16, 32])
    ]


VARIANT_KEYS = ("BLOCK_SIZE_M",)
CASES = {
    # 13 tokens x top 2 over 4 experts, expert 2 never chosen: ragged per-expert counts and an idle expert.
    "small": dict(M=13, E=4, K=20, N=24, top_k=2, idle_experts=(2,)),
    "emu": dict(M=128, E=8, K=64, N=128, top_k=2, idle_experts=()),
    "bench": dict(M=1000, E=8, K=128, N=512, top_k=2, idle_experts=()),  # the seeds' size
}
TOLERANCE = dict(atol=1e-4, rtol=1e-4)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    M, E, K, N, top_k = case["M"], case["E"], case["K"], case["N"], case["top_k"]
    a = torch.rand((M, K), generator=g) * 2 - 1
    b = torch.rand((E, N, K), generator=g) * 2 - 1  # [expert, out feature, in feature], as vLLM
    # A router: softmax over expert logits, top-k experts per token (distinct), renormalised weights.
    logits = torch.randn((M, E), generator=g)
    logits[:, list(case["idle_experts"])] = float("-inf")
    # In float64, rounded once at the end: torch's float32 softmax differs in the last bit between CPUs (its exp
    # depends on the SIMD path), and golden data must be the same bytes on every machine that generates it.
    weights, topk_ids = torch.topk(torch.softmax(logits.double(), dim=-1), top_k, dim=-1)
    weights = (weights / weights.sum(dim=-1, keepdim=True)).float()
    sorted_token_ids, expert_ids, num_tokens_post_padded = moe_align_block_size(topk_ids, case["BLOCK_SIZE_M"], E)
    return {
        "a": a,
        "b": b,
        "c": torch.empty((M, top_k, N)),
        "topk_weights": weights.contiguous(),
        "sorted_token_ids": sorted_token_ids,
        "expert_ids": expert_ids,
        "num_tokens_post_padded": num_tokens_post_padded,
        "topk_ids": topk_ids.to(torch.int32),  # for the reference only: not a kernel argument
    }


def reference(inputs, case):
    a, b = inputs["a"].double(), inputs["b"].double()
    ids = inputs["topk_ids"].long()
    c = torch.zeros((*ids.shape, b.shape[1]), dtype=torch.float64)
    for e in range(b.shape[0]):
        # The (token, k) slots routed to expert e: their token rows times the expert's transposed weights.
        tokens, ks = torch.nonzero(ids == e, as_tuple=True)
        c[tokens, ks] = a[tokens] @ b[e].T
    return {"c": (c * inputs["topk_weights"].double()[:, :, None]).float()}


def launch(kernel, inputs, case):
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    sorted_token_ids = inputs["sorted_token_ids"]
    N, K, top_k = case["N"], case["K"], case["top_k"]
    EM = sorted_token_ids.shape[0]
    grid = lambda META: (triton.cdiv(EM, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731 (written as Triton users do)
    kernel[grid](
        a, b, c, inputs["topk_weights"],
        sorted_token_ids, inputs["expert_ids"], inputs["num_tokens_post_padded"],
        N, K, EM, c.shape[0] * top_k,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(2), b.stride(1),
        c.stride(1), c.stride(2),
        MUL_ROUTED_WEIGHT=True,
        top_k=top_k,
    )
