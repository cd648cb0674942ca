"""Flash attention forward (fp32): softmax(Q K^T * sm_scale) V with an online softmax, optionally causal.

IS_CAUSAL is a config key, as in the seeds' autotune configs; it changes the answer, so it is also a variant
key: golden outputs are kept per IS_CAUSAL value. BLOCK_SIZE_DMODEL is not tuned: launch() passes the head
dimension rounded up to a power of two.
"""

import itertools
import math

import torch
import triton
import triton.language as tl


@triton.jit
def flash_attention_fwd_kernel(
    Q, K, V, Out, L,
    stride_qz, stride_qh, stride_qm, stride_qk,
    stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk,
    stride_oz, stride_oh, stride_om, stride_ok,
    H, N_CTX, D_HEAD,
    sm_scale,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_DMODEL: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    offs_m = start_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = tl.arange(0, BLOCK_SIZE_N)
    offs_d = tl.arange(0, BLOCK_SIZE_DMODEL)
    d_mask = offs_d < D_HEAD

    q_ptrs = Q + off_z * stride_qz + off_h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < N_CTX) & d_mask[None, :], other=0.0)
    k_base = K + off_z * stride_kz + off_h * stride_kh
    v_base = V + off_z * stride_vz + off_h * stride_vh

    m_i = tl.full([BLOCK_SIZE_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_SIZE_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_DMODEL], dtype=tl.float32)
    # Causal rows never look past their own position: stop at the end of this block of rows.
    if IS_CAUSAL:  # noqa: SIM108 (a constexpr branch reads better than a ternary in a kernel)
        hi = tl.minimum((start_m + 1) * BLOCK_SIZE_M, N_CTX)
    else:
        hi = N_CTX
    for start_n in range(0, hi, BLOCK_SIZE_N):
        cols = start_n + offs_n
        # K is loaded already transposed ([D, BLOCK_N]) by pointer arithmetic: no tl.trans needed.
        kt = tl.load(k_base + offs_d[:, None] * stride_kk + cols[None, :] * stride_kn,
                     mask=d_mask[:, None] & (cols[None, :] < N_CTX), other=0.0)
        qk = tl.dot(q, kt, input_precision="ieee") * sm_scale
        valid = cols[None, :] < N_CTX
        if IS_CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk, float("-inf"))
        # Every row sees key 0 in the first block, so m_ij is finite from then on (no inf - inf).
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_ij[:, None])
        alpha = tl.exp(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk,
                    mask=(cols[:, None] < N_CTX) & d_mask[None, :], other=0.0)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="ieee")
        m_i = m_ij

    acc = acc / l_i[:, None]
    o_ptrs = Out + off_z * stride_oz + off_h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok
    tl.store(o_ptrs, acc, mask=(offs_m[:, None] < N_CTX) & d_mask[None, :])
    # L is contiguous [Z, H, N_CTX]: the log-sum-exp of each row (what a backward pass needs).
    tl.store(L + off_hz * N_CTX + offs_m, m_i + tl.log(l_i), mask=offs_m < N_CTX)


def get_flash_attention_fwd_kernel_autotune_config():
    # The seeds' space (BLOCK_SIZE_M 4..64 x BLOCK_SIZE_N 8..64), for both IS_CAUSAL values: 5 * 4 * 2 = 40.
    return [
        triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "IS_CAUSAL": causal})
        for causal, bm, bn in itertools.product([False, True], [4, 8, 16, 32, 64], [8, 16, 32, 64])
    ]


VARIANT_KEYS = ("IS_CAUSAL",)
# Causal and non-causal attention are two problems (causal does about half the work): rank, pick winners and
# plot configs per IS_CAUSAL value, never one against the other.
PROBLEM_KEYS = ("IS_CAUSAL",)
CASES = {
    "small": dict(Z=1, H=2, N_CTX=21, D_HEAD=16),  # ragged sequence: partial row and key blocks
    "emu": dict(Z=1, H=2, N_CTX=96, D_HEAD=64),  # partial blocks for BLOCK_SIZE_M/N 64
    "bench": dict(Z=1, H=2, N_CTX=128, D_HEAD=64),  # the seeds' size
}
TOLERANCE = dict(atol=1e-4, rtol=1e-4)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    shape = (case["Z"], case["H"], case["N_CTX"], case["D_HEAD"])
    return {
        "q": torch.randn(shape, generator=g),
        "k": torch.randn(shape, generator=g),
        "v": torch.randn(shape, generator=g),
        "out": torch.empty(shape),
        "L": torch.empty(shape[:3]),
    }


def sm_scale(case):
    return 1.0 / math.sqrt(case["D_HEAD"])


def reference(inputs, case):
    q, k, v = (inputs[n].double() for n in ("q", "k", "v"))
    s = (q @ k.transpose(-1, -2)) * sm_scale(case)
    if case["IS_CAUSAL"]:
        n = case["N_CTX"]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return {"out": (torch.softmax(s, dim=-1) @ v).float(), "L": torch.logsumexp(s, dim=-1).float()}


def launch(kernel, inputs, case):
    q, k, v, out, L = (inputs[n] for n in ("q", "k", "v", "out", "L"))
    Z, H, N_CTX, D_HEAD = case["Z"], case["H"], case["N_CTX"], case["D_HEAD"]
    grid = lambda META: (triton.cdiv(N_CTX, META["BLOCK_SIZE_M"]), Z * H)  # noqa: E731 (written as Triton users do)
    kernel[grid](
        q, k, v, out, L,
        q.stride(0), q.stride(1), q.stride(2), q.stride(3),
        k.stride(0), k.stride(1), k.stride(2), k.stride(3),
        v.stride(0), v.stride(1), v.stride(2), v.stride(3),
        out.stride(0), out.stride(1), out.stride(2), out.stride(3),
        H, N_CTX, D_HEAD,
        sm_scale(case),
        BLOCK_SIZE_DMODEL=triton.next_power_of_2(D_HEAD),
    )
