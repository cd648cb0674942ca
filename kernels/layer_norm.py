"""Layer normalisation forward (fp32): y = (x - mean) / sqrt(var + eps) * w + b over each row.

The Triton tutorial's fused forward, with BLOCK_SIZE_M rows per program: a pass for the mean, one for the
variance, one to normalise; Mean and Rstd are written too (what the backward pass reads).
"""

import itertools

import torch
import triton
import triton.language as tl


@triton.jit
def layer_norm_kernel(
    X, Y, W, B, Mean, Rstd,
    stride, n_rows, N,
    eps,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = tl.arange(0, BLOCK_SIZE_N)
    row_mask = rows < n_rows
    x_rows = X + rows[:, None] * stride
    y_rows = Y + rows[:, None] * stride

    acc = tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_SIZE_N):
        cols = start + offs_n
        acc += tl.load(x_rows + cols[None, :], mask=row_mask[:, None] & (cols[None, :] < N), other=0.0)
    mean = tl.sum(acc, 1) / N

    acc = tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_SIZE_N):
        cols = start + offs_n
        mask = row_mask[:, None] & (cols[None, :] < N)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0)
        d = tl.where(mask, x - mean[:, None], 0.0)
        acc += d * d
    var = tl.sum(acc, 1) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + rows, mean, mask=row_mask)
    tl.store(Rstd + rows, rstd, mask=row_mask)

    for start in range(0, N, BLOCK_SIZE_N):
        cols = start + offs_n
        col_mask = cols < N
        mask = row_mask[:, None] & col_mask[None, :]
        w = tl.load(W + cols, mask=col_mask, other=0.0)
        b = tl.load(B + cols, mask=col_mask, other=0.0)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0)
        y = (x - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_rows + cols[None, :], y, mask=mask)


def get_layer_norm_kernel_autotune_config():
    # Rows per program x columns per step: 4 * 5 = 20 configs.
    return [
        triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn})
        for bm, bn in itertools.product([1, 2, 4, 8], [16, 32, 64, 128, 256])
    ]


CASES = {
    "small": dict(M=19, N=75),  # ragged rows and columns
    "emu": dict(M=256, N=512),
    "bench": dict(M=1151, N=1024),  # the Triton tutorial's row count
}
TOLERANCE = dict(atol=1e-4, rtol=1e-4)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    M, N = case["M"], case["N"]
    return {
        "x": torch.randn((M, N), generator=g) * 2 + 0.5,
        "y": torch.empty((M, N)),
        "w": torch.rand((N,), generator=g) + 0.5,
        "b": torch.rand((N,), generator=g) - 0.5,
        "mean": torch.empty((M,)),
        "rstd": torch.empty((M,)),
    }


EPS = 1e-5


def reference(inputs, case):
    x = inputs["x"].double()
    mean = x.mean(dim=1)
    rstd = 1 / torch.sqrt(x.var(dim=1, unbiased=False) + EPS)
    y = (x - mean[:, None]) * rstd[:, None] * inputs["w"].double() + inputs["b"].double()
    return {"y": y.float(), "mean": mean.float(), "rstd": rstd.float()}


def launch(kernel, inputs, case):
    x = inputs["x"]
    M, N = case["M"], case["N"]
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]),)  # noqa: E731 (written as Triton users do)
    kernel[grid](
        x, inputs["y"], inputs["w"], inputs["b"], inputs["mean"], inputs["rstd"],
        x.stride(0), M, N,
        EPS,
    )
