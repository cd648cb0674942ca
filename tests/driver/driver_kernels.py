"""Kernels shared by the CPU driver tests (host mode and QEMU mode run the same ones)."""

import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # 2-D grid: axis 0 over rows of C, axis 1 over its columns; masks on every edge.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def descriptor_scale_kernel(x_desc, out_desc, block_out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    # Host tensor descriptors as parameters: each program scales its block (out-of-bounds stores dropped), and
    # program (2, 1), whose block passes the shape's corner, also stores its whole loaded block: the padding shows.
    pm, pn = tl.program_id(0) * BM, tl.program_id(1) * BN
    block = x_desc.load([pm, pn])
    out_desc.store([pm, pn], block * 2.0)
    if (tl.program_id(0) == 2) & (tl.program_id(1) == 1):
        r = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
        tl.store(block_out_ptr + r, block)


def run_descriptor_scale(padding: str):
    """Launch descriptor_scale_kernel on a 10x13 view in 4x8 blocks: (x, out, the bottom-right block as loaded)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    x = torch.arange(10 * 16, dtype=torch.float32).reshape(10, 16)[:, :13]  # a view: row stride 16, 13 columns
    out = torch.full((10, 16), -1.0)[:, :13]  # descriptors need 16-byte row strides
    corner = torch.zeros(4, 8)
    x_desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [4, 8], padding=padding)
    out_desc = TensorDescriptor.from_tensor(out, [4, 8])
    descriptor_scale_kernel[(3, 2)](x_desc, out_desc, corner, BM=4, BN=8)
    return x, out, corner
