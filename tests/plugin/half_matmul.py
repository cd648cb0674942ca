"""A matmul with 16-bit float inputs and output and fp32 accumulation, like Triton_RVV's DTYPE matmul.

``source(name, dtype)`` is the text of a kernel module ``<name>.py`` for torch dtype ``float16`` or ``bfloat16``;
its reference is float64 math rounded to that dtype, so only the harness's per-dtype tolerance lets a correct
kernel (fp32 accumulation in another order) pass.
"""

from __future__ import annotations

TEMPLATE = '''
import torch
import triton
import triton.language as tl

DTYPE = torch.{dtype}


@triton.jit
def {name}_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = tl.program_id(1) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        kk = k * BLOCK_SIZE_K + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :],
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + offs_n[None, :],
                    mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def get_{name}_kernel_autotune_config():
    return [triton.Config({{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16}}),
            triton.Config({{"BLOCK_SIZE_M": 8, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 8}})]


CASES = {{"small": dict(M=37, N=29, K=45)}}


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    M, N, K = case["M"], case["N"], case["K"]
    return {{"a": (torch.rand((M, K), generator=g) * {scale} - {scale} / 2).to(DTYPE),
            "b": (torch.rand((K, N), generator=g) * 2 - 1).to(DTYPE),
            "c": torch.empty((M, N), dtype=DTYPE)}}


def reference(inputs, case):
    return {{"c": (inputs["a"].double() @ inputs["b"].double()).to(DTYPE)}}


def launch(kernel, inputs, case):
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    M, N, K = case["M"], case["N"], case["K"]
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]), triton.cdiv(N, META["BLOCK_SIZE_N"]))  # noqa: E731
    kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0))
'''


def source(name: str, dtype: str, scale: float = 64.0) -> str:
    """Module text; ``scale`` is the width of A's value range: 64 makes the outputs large enough that one fp16
    rounding step exceeds the default TOLERANCE (atol 1e-4, rtol 1e-4)."""
    return TEMPLATE.format(name=name, dtype=dtype, scale=scale)
