"""Row-wise softmax (fp32): BLOCK_SIZE_M rows per program, columns streamed BLOCK_SIZE_N at a time.

Two passes over each row block: an online max / sum (the flash-attention rescaling trick), then the
normalised write. Rows of any length work with any BLOCK_SIZE_N.
"""

import itertools

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(
    output_ptr, input_ptr,
    input_row_stride, output_row_stride,
    n_rows, n_cols,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = tl.arange(0, BLOCK_SIZE_N)
    row_mask = rows < n_rows
    in_rows = input_ptr + rows[:, None] * input_row_stride
    out_rows = output_ptr + rows[:, None] * output_row_stride

    m = tl.full([BLOCK_SIZE_M], float("-inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_SIZE_M], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE_N):
        cols = start + offs_n
        mask = row_mask[:, None] & (cols[None, :] < n_cols)
        x = tl.load(in_rows + cols[None, :], mask=mask, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(x, 1))
        # Rows past n_rows stay -inf and compute NaN here; they are never stored.
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), 1)
        m = m_new
    for start in range(0, n_cols, BLOCK_SIZE_N):
        cols = start + offs_n
        mask = row_mask[:, None] & (cols[None, :] < n_cols)
        x = tl.load(in_rows + cols[None, :], mask=mask, other=float("-inf"))
        y = tl.exp(x - m[:, None]) / s[:, None]
        tl.store(out_rows + cols[None, :], y, mask=mask)


def get_softmax_kernel_autotune_config():
    # Rows per program x columns per step: 4 * 5 = 20 configs.
    return [
        triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn})
        for bm, bn in itertools.product([1, 2, 4, 8], [16, 32, 64, 128, 256])
    ]


CASES = {
    "small": dict(n_rows=19, n_cols=75),  # ragged rows and columns
    "emu": dict(n_rows=256, n_cols=512),
    "bench": dict(n_rows=1823, n_cols=781),  # the Triton tutorial's shape
}
TOLERANCE = dict(atol=1e-6, rtol=1e-4)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    shape = (case["n_rows"], case["n_cols"])
    return {"x": torch.randn(shape, generator=g) * 4, "y": torch.empty(shape)}


def reference(inputs, case):
    return {"y": torch.softmax(inputs["x"].double(), dim=1).float()}


def launch(kernel, inputs, case):
    x, y = inputs["x"], inputs["y"]
    n_rows, n_cols = case["n_rows"], case["n_cols"]
    grid = lambda META: (triton.cdiv(n_rows, META["BLOCK_SIZE_M"]),)  # noqa: E731 (written as Triton users do)
    kernel[grid](y, x, x.stride(0), y.stride(0), n_rows, n_cols)
