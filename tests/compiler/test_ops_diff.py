"""Differential tests: small Triton kernels through the real frontend + our lowering + clang, natively
and as rv64gcv ELFs under QEMU, against Triton's interpreter on the same random (ragged, edge-case) inputs.

Every lowered op family appears in at least one kernel: arith (int + float, NaN / inf / -0.0 inputs), math,
f16 / bf16 storage, casts, tt.{make_range, splat, broadcast, expand_dims, reshape, trans, join, split,
addptr, load/store with mask and other, dot (f32, f16, bf16, i8, batched 3-D), reduce (sum, max, argmax:
two operands, a custom combiner), scan (forward, reverse), call (a noinline function), cat, gather,
histogram, atomics, extern_elementwise (libdevice), map_elementwise (with branches), get_program_id /
get_num_programs on a 3-D grid}, tensor descriptors, scf.{for with a swap of carried values, if, while},
cf (an early return) and scalar loads/stores. All launches are built into ONE C file per ISA and
interpreted in ONE child process (see difftest.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import triton
import triton.language as tl
from difftest import KernelCall, assert_match, run_c_kernels, run_interpreter_many
from triton.language.extra import libdevice

from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA

# ---- kernels -------------------------------------------------------------------------------------------


@triton.jit
def int_ops_kernel(x_ptr, y_ptr, out_ptr, n, SHIFT_MASK: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    o = out_ptr + offs
    tl.store(o + 0 * n, x + y, mask=m)
    tl.store(o + 1 * n, x - y, mask=m)
    tl.store(o + 2 * n, x * y, mask=m)
    tl.store(o + 3 * n, x // y, mask=m)
    tl.store(o + 4 * n, x % y, mask=m)
    tl.store(o + 5 * n, x & y, mask=m)
    tl.store(o + 6 * n, x | y, mask=m)
    tl.store(o + 7 * n, x ^ y, mask=m)
    tl.store(o + 8 * n, tl.minimum(x, y), mask=m)
    tl.store(o + 9 * n, tl.maximum(x, y), mask=m)
    tl.store(o + 10 * n, x << (y & SHIFT_MASK), mask=m)
    tl.store(o + 11 * n, x >> (y & SHIFT_MASK), mask=m)
    tl.store(o + 12 * n, (x < y).to(x.dtype) + 2 * (x <= y).to(x.dtype) + 4 * (x > y).to(x.dtype)
             + 8 * (x >= y).to(x.dtype) + 16 * (x == y).to(x.dtype) + 32 * (x != y).to(x.dtype), mask=m)
    tl.store(o + 13 * n, tl.where(x > 0, x, y), mask=m)
    tl.store(o + 14 * n, -x, mask=m)
    tl.store(o + 15 * n, tl.abs(x), mask=m)
    tl.store(o + 16 * n, tl.cdiv(x, y), mask=m)
    tl.store(o + 17 * n, tl.umulhi(x, y), mask=m)
    tl.store(o + 18 * n, x.to(tl.int16).to(x.dtype), mask=m)
    tl.store(o + 19 * n, x.to(tl.int8).to(x.dtype) * 3 + 1, mask=m)


@triton.jit
def float_ops_kernel(x_ptr, y_ptr, z_ptr, out_ptr, i_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m, other=1.0)
    z = tl.load(z_ptr + offs, mask=m, other=1.0)
    o = out_ptr + offs
    tl.store(o + 0 * n, x + y, mask=m)
    tl.store(o + 1 * n, x - y, mask=m)
    tl.store(o + 2 * n, x * y, mask=m)
    tl.store(o + 3 * n, x / y, mask=m)
    tl.store(o + 4 * n, x % y, mask=m)
    tl.store(o + 5 * n, tl.minimum(x, y), mask=m)
    tl.store(o + 6 * n, tl.maximum(x, y), mask=m)
    tl.store(o + 7 * n, tl.minimum(x, y, propagate_nan=tl.PropagateNan.ALL), mask=m)
    tl.store(o + 8 * n, tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL), mask=m)
    tl.store(o + 9 * n, (x < y).to(tl.float32) + 2 * (x <= y).to(tl.float32) + 4 * (x > y).to(tl.float32)
             + 8 * (x >= y).to(tl.float32) + 16 * (x == y).to(tl.float32) + 32 * (x != y).to(tl.float32)
             + 64 * (~(x < y)).to(tl.float32), mask=m)
    tl.store(o + 10 * n, tl.where(x > y, x, z), mask=m)
    tl.store(o + 11 * n, -x, mask=m)
    tl.store(o + 12 * n, tl.fma(x, y, z), mask=m)
    tl.store(o + 13 * n, tl.clamp(x, -1.0, 2.0), mask=m)
    tl.store(o + 14 * n, tl.math.div_rn(x, y), mask=m)
    tl.store(o + 15 * n, tl.clamp(x, -1.0, 2.0, propagate_nan=tl.PropagateNan.ALL), mask=m)
    tl.store(o + 16 * n, (x * 0.5).to(tl.int32).to(tl.float32), mask=m & (tl.abs(x) < 1e9))
    tl.store(o + 17 * n, x.to(tl.int32, bitcast=True).to(tl.float32, bitcast=True) * 2.0, mask=m)
    tl.store(i_ptr + offs, tl.where(tl.abs(x) < 1e9, x, 0.0).to(tl.int32) + (y > 0).to(tl.int32), mask=m)


@triton.jit
def math_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    o = out_ptr + offs
    tl.store(o + 0 * n, tl.exp(x), mask=m)
    tl.store(o + 1 * n, tl.exp2(x), mask=m)
    tl.store(o + 2 * n, tl.log(x), mask=m)
    tl.store(o + 3 * n, tl.log2(x), mask=m)
    tl.store(o + 4 * n, tl.sqrt(x), mask=m)
    tl.store(o + 5 * n, tl.rsqrt(x), mask=m)
    tl.store(o + 6 * n, tl.abs(x), mask=m)
    tl.store(o + 7 * n, tl.floor(x), mask=m)
    tl.store(o + 8 * n, tl.ceil(x), mask=m)
    tl.store(o + 9 * n, tl.sin(x), mask=m)
    tl.store(o + 10 * n, tl.cos(x), mask=m)
    tl.store(o + 11 * n, tl.erf(x), mask=m)
    tl.store(o + 12 * n, tl.math.sqrt_rn(x), mask=m)
    tl.store(o + 13 * n, tl.sigmoid(x), mask=m)


@triton.jit
def half_kernel(h_ptr, b_ptr, oh_ptr, ob_ptr, of_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    h = tl.load(h_ptr + offs, mask=m, other=0.0)
    b = tl.load(b_ptr + offs, mask=m, other=0.0)
    tl.store(oh_ptr + offs, h * h + h, mask=m)                         # f16 arithmetic, rounded per op
    tl.store(ob_ptr + offs, (b.to(tl.float32) * 3.0).to(tl.bfloat16), mask=m)
    tl.store(of_ptr + offs, h.to(tl.float32) + b.to(tl.float32), mask=m)
    tl.store(oh_ptr + n + offs, (b.to(tl.float32) / 3.0).to(tl.float16, fp_downcast_rounding="rtz"), mask=m)


@triton.jit
def reduce_kernel(x_ptr, out_ptr, idx_ptr, s_ptr, cum_ptr, M, N, R: tl.constexpr, C: tl.constexpr):
    rows = tl.arange(0, R)
    cols = tl.arange(0, C)
    m = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=m, other=0.0)
    tl.store(out_ptr + rows, tl.sum(x, axis=1), mask=rows < M)
    tl.store(out_ptr + R + cols, tl.max(tl.where(m, x, -float("inf")), axis=0), mask=cols < N)
    tl.store(out_ptr + R + C + rows, tl.reduce(x + 1.0, 1, _mul_combine), mask=rows < M)
    tl.store(idx_ptr + rows, tl.argmax(tl.where(m, x, -float("inf")), axis=1), mask=rows < M)
    tl.store(s_ptr, tl.sum(tl.sum(x, axis=1)))
    tl.store(cum_ptr + rows[:, None] * C + cols[None, :], tl.cumsum(x, axis=1), mask=m)
    tl.store(cum_ptr + R * C + rows[:, None] * C + cols[None, :], tl.cumsum(x, axis=0, reverse=True), mask=m)


@triton.jit
def _mul_combine(a, b):
    return a * b


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def shape_kernel(x_ptr, out_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(x_ptr + r[:, None] * B + r[None, :])
    o = out_ptr + r[:, None] * B + r[None, :]
    tl.store(o, tl.trans(x) * 2.0)
    flat = tl.reshape(x, (B * B,))
    tl.store(out_ptr + B * B + tl.arange(0, B * B), flat + 1.0)
    j = tl.join(x, x + 100.0)                       # (B, B, 2)
    lo, hi = tl.split(tl.trans(j, (1, 0, 2)))       # split the transposed join back
    tl.store(o + 2 * B * B, lo - hi)
    col = tl.sum(x, axis=1)
    tl.store(o + 3 * B * B, x - col[:, None] + tl.expand_dims(col, 0))
    tl.store(o + 4 * B * B, tl.broadcast_to(tl.max(x, axis=0)[None, :], (B, B)))
    one = tl.sum(tl.reshape(x, (1, B * B)), axis=1)  # a rank-1 tensor of one element, broadcast to B
    tl.store(out_ptr + 5 * B * B + r, tl.broadcast_to(one, (B,)) + r.to(tl.float32))


@triton.jit
def flow_kernel(x_ptr, out_ptr, n_valid, steps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid >= n_valid:
        return
    x = tl.load(x_ptr + pid)                        # scalar load
    a = x
    b = x * 0.5
    for _ in range(steps):                          # carried values swap every iteration
        a, b = b, a + b
    k = 0
    v = a
    while v < 1000.0:                               # data-dependent trip count
        v = v * 2.0 + 1.0
        k += 1
    if pid % 2 == 0:
        v = -v
    tl.store(out_ptr + pid * 3, a)                  # scalar stores
    tl.store(out_ptr + pid * 3 + 1, v)
    tl.store(out_ptr + pid * 3 + 2, k.to(tl.float32))


@triton.jit
def carry_kernel(x_ptr, out_ptr, steps, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    ptrs = x_ptr + r
    x = tl.load(ptrs)
    y = x * 0.5
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for _ in range(steps):
        x, y = y, x + y                 # tensors swapped through the loop: no buffer may be reused early
        acc = acc + tl.load(ptrs) * x   # computed in place of the carried acc
        ptrs += 1                       # a pointer tile carried and advanced in place
    tl.store(out_ptr + r, acc)
    tl.store(out_ptr + BLOCK + r, x - y)


@triton.jit
def atomic_kernel(x_ptr, f_ptr, i_ptr, old_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m)
    old = tl.atomic_add(f_ptr + offs % 4, v, mask=m)   # colliding lanes: one atomic each, in order
    tl.store(old_ptr + offs, old, mask=m)
    tl.atomic_max(i_ptr + offs % 2, offs - 5, mask=m)
    tl.atomic_min(i_ptr + 2 + offs % 2, offs - 5, mask=m)
    tl.atomic_max(f_ptr + 4 + offs % 2, v, mask=m)      # float max: Triton's signed/unsigned int trick
    tl.atomic_cas(i_ptr + 4, 0, 7)
    tl.atomic_xchg(i_ptr + 5, n)
    tl.atomic_or(i_ptr + 6 + offs * 0, offs, mask=m)
    tl.atomic_add(i_ptr + 7, 1)


@triton.jit
def poll_kernel(flag_ptr, o_ptr, timeout_ns, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    # one budget for the block; with 0 each lane is still loaded once: the ones holding 1 match, the others time out
    timed = tl.atomic_poll(flag_ptr + offs, 1, timeout_ns=timeout_ns)
    ready = tl.atomic_poll(flag_ptr + BLOCK, 3, sem="relaxed")  # no timeout: polls until the value is there
    tl.store(o_ptr + offs, timed.to(tl.int32) + ready.to(tl.int32) * 2)


@triton.jit
def descriptor_kernel(x_ptr, o_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(o_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pm, pn = tl.program_id(0) * BM, tl.program_id(1) * BN
    dst.store([pm, pn], src.load([pm, pn]) * 2.0 + 1.0)   # rewritten to masked pointer loads/stores


@triton.jit
def _selu(x, alpha):
    if x > 0:  # a branch per element: the region has several blocks
        return x
    else:
        return alpha * (tl.exp(x) - 1)


@triton.jit
def _sum_prod(x, y):
    return x + y, x * y


@triton.jit
def map_kernel(x_ptr, o_ptr, alpha, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(o_ptr + offs, tl.map_elementwise(_selu, x, alpha))
    a, b = tl.map_elementwise(_sum_prod, x, x + 1.0)
    tl.store(o_ptr + BLOCK + offs, a - b)


@triton.jit
def _pair_divmod(a0, a1, b0, b1):  # pack=2: two elements of each operand, two of each result
    return a0 // b0, a1 // b1, a0 % b0 - a1, a1 % b1 + a0


@triton.jit
def map_pack_kernel(a_ptr, b_ptr, o_ptr, R: tl.constexpr, C: tl.constexpr):
    r, c = tl.arange(0, R)[:, None], tl.arange(0, C)[None, :]
    a = tl.load(a_ptr + r * C + c)
    b = tl.broadcast_to(tl.load(b_ptr + c), (R, C))  # a broadcast operand: read through its strides
    q, m = tl.map_elementwise(_pair_divmod, a, b, pack=2)
    tl.store(o_ptr + r * C + c, q)
    tl.store(o_ptr + R * C + r * C + c, m)


@triton.jit
def tensor_flow_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r)
    if n > 3:  # noqa: SIM108 (an scf.if yielding a tile)
        y = x * 2.0
    else:
        y = x - 1.0
    i = 0
    while i < n:                   # an scf.while carrying a tile
        y = y * 0.5 + x
        i += 1
    tl.store(o_ptr + r, y)


@triton.jit
def dot_i8_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b))  # int8 x int8 -> int32


@triton.jit
def dot_3d_kernel(a_ptr, b_ptr, c_ptr, G: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    g = tl.arange(0, G)[:, None, None]
    a = tl.load(a_ptr + g * BM * BK + tl.arange(0, BM)[None, :, None] * BK + tl.arange(0, BK)[None, None, :])
    b = tl.load(b_ptr + g * BK * BN + tl.arange(0, BK)[None, :, None] * BN + tl.arange(0, BN)[None, None, :])
    c = tl.dot(a, b)  # a batch of G products
    tl.store(c_ptr + g * BM * BN + tl.arange(0, BM)[None, :, None] * BN + tl.arange(0, BN)[None, None, :], c)


@triton.jit
def carry_view_kernel(x_ptr, out_ptr, steps, B: tl.constexpr):
    r = tl.arange(0, B)
    t = tl.load(x_ptr + r[:, None] * B + r[None, :])
    for _ in range(steps):
        t = tl.trans(t) * 0.5 + t   # reads the carried tile transposed: it must not be updated in place
    tl.store(out_ptr + r[:, None] * B + r[None, :], t)


@triton.jit
def grid_kernel(out_ptr, BLOCK: tl.constexpr):
    px = tl.program_id(0)
    py = tl.program_id(1)
    pz = tl.program_id(2)
    nx = tl.num_programs(0)
    ny = tl.num_programs(1)
    nz = tl.num_programs(2)
    lin = (pz * ny + py) * nx + px
    vals = lin * 1000 + px * 100 + py * 10 + pz + tl.arange(0, BLOCK) * 0 + nx * ny * nz * 100000
    tl.store(out_ptr + lin * BLOCK + tl.arange(0, BLOCK), vals)


@triton.jit(noinline=True)
def _scaled_row(p, s, BLOCK: tl.constexpr):
    x = tl.load(p + tl.arange(0, BLOCK))
    if s > 0:
        return x * s + 1.0, s * 2.0
    return x, s


@triton.jit
def call_kernel(x_ptr, o_ptr, s, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    y, t = _scaled_row(x_ptr + row * BLOCK, s - row, BLOCK)  # a tt.call of a noinline function
    tl.store(o_ptr + row * BLOCK + tl.arange(0, BLOCK), y + t)


@triton.jit
def index_kernel(x_ptr, i_ptr, o_ptr, h_ptr, n, BLOCK: tl.constexpr):
    tl.assume(n > 0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    idx = tl.load(i_ptr + offs)
    tl.store(h_ptr + offs, tl.histogram(idx, BLOCK))
    tl.store(o_ptr + offs, tl.gather(x, idx, 0))


@triton.jit
def libdevice_cat_kernel(x_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(o_ptr + tl.arange(0, 2 * BLOCK), tl.cat(x, x * 2.0))
    tl.store(o_ptr + 2 * BLOCK + offs, libdevice.tanh(x) + libdevice.pow(tl.abs(x), x))


# ---- launches ------------------------------------------------------------------------------------------


def _edge_floats(rng: np.random.Generator, n: int) -> np.ndarray:
    edges = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 0.5, 2.5, -2.5, 1e-40, 3.0], np.float32)
    return np.concatenate([edges, (rng.standard_normal(n - len(edges)) * 4).astype(np.float32)])


def _bf16_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _bf16_rne(x: np.ndarray) -> np.ndarray:
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return np.where(np.isnan(x), (b >> 16) | 0x40, (b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def _launches() -> dict[str, tuple[KernelCall, dict]]:
    """name -> (launch, comparison options)."""
    rng = np.random.default_rng(2024)
    out: dict[str, tuple[KernelCall, dict]] = {}
    for dt, sig, mask in ((np.int32, "*i32", 31), (np.int64, "*i64", 63)):
        n = 45  # ragged: 3 programs of 16, the last one partial
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        x[:6] = [0, 1, -1, info.min, info.max, -7]
        y = rng.integers(-1000, 1000, n, dtype=dt)
        y[y == 0] = 3
        y[:6] = [5, -3, 7, 3, -2, 2]
        s = {"x_ptr": sig, "y_ptr": sig, "out_ptr": sig, "n": "i32"}
        out[f"int_{sig[1:]}"] = (KernelCall(int_ops_kernel, s, {"SHIFT_MASK": mask, "BLOCK": 16},
                                            [x, y, np.zeros(20 * n, dt), n], (3,)), {})
    n = 61
    x, y, z = (_edge_floats(rng, n) for _ in range(3))
    y = y[::-1].copy()
    s = {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32", "out_ptr": "*fp32", "i_ptr": "*i32", "n": "i32"}
    out["float"] = (KernelCall(float_ops_kernel, s, {"BLOCK": 32},
                               [x, y, z, np.zeros(18 * n, np.float32), np.zeros(n, np.int32), n], (2,)),
                    {"rtol": 1e-6, "atol": 0})
    xm = np.abs(_edge_floats(rng, n)) * np.where(np.arange(n) % 5 == 0, -1, 1).astype(np.float32)
    out["math"] = (KernelCall(math_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64},
                              [xm.astype(np.float32), np.zeros(14 * n, np.float32), n], (1,)),
                   {"rtol": 2e-6, "atol": 1e-7})
    n = 40
    h = (rng.standard_normal(n) * 30).astype(np.float16)
    h[:4] = [np.inf, -0.0, np.nan, 6e-8]
    bf = (rng.standard_normal(n).astype(np.float32) * 100).view(np.uint32)
    bf = (bf >> 16).astype(np.uint16)
    s = {"h_ptr": "*fp16", "b_ptr": "*bf16", "oh_ptr": "*fp16", "ob_ptr": "*bf16", "of_ptr": "*fp32", "n": "i32"}
    # The interpreter casts f32 -> bf16 by truncation; arith.truncf (and GPUs) round to nearest even.
    out["half"] = (KernelCall(half_kernel, s, {"BLOCK": 16},
                              [h, bf, np.zeros(2 * n, np.float16), np.zeros(n, np.uint16), np.zeros(n, np.float32), n],
                              (3,)), {"rtol": 0, "atol": 0, "numpy": {3: _bf16_rne(_bf16_f32(bf) * np.float32(3))}})
    M, N, R, C = 5, 7, 8, 8
    xr = rng.standard_normal((M, N)).astype(np.float32)
    xr[2, 3] = xr[2].max() + 1  # a unique argmax
    xr[4, :] = 0.5  # all tied: argmax must pick the leftmost, whatever order the tree combines in
    s = {"x_ptr": "*fp32", "out_ptr": "*fp32", "idx_ptr": "*i32", "s_ptr": "*fp32", "cum_ptr": "*fp32",
         "M": "i32", "N": "i32"}
    out["reduce"] = (KernelCall(reduce_kernel, s, {"R": R, "C": C},
                                [xr, np.zeros(R + C + R, np.float32), np.zeros(R, np.int32), np.zeros(1, np.float32),
                                 np.zeros(2 * R * C, np.float32), M, N], (1,)), {"rtol": 1e-5, "atol": 1e-5})
    for name, (M, N, K, BM, BN, BK) in {"dot_4x4x4": (4, 4, 4, 4, 4, 4), "dot_ragged": (13, 19, 23, 8, 16, 8)}.items():
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        s = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
        out[name] = (KernelCall(dot_kernel, s, {"BM": BM, "BN": BN, "BK": BK},
                                [a, b, np.zeros((M, N), np.float32), M, N, K], (-(-M // BM), -(-N // BN))),
                     {"rtol": 1e-5, "atol": 1e-5})
    M, N, K = 9, 12, 20
    a16 = rng.standard_normal((M, K)).astype(np.float16)
    b16 = rng.standard_normal((K, N)).astype(np.float16)
    s = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
    out["dot_f16"] = (KernelCall(dot_kernel, s, {"BM": 16, "BN": 8, "BK": 16},
                                 [a16, b16, np.zeros((M, N), np.float32), M, N, K], (1, 2)),
                      {"rtol": 1e-4, "atol": 1e-4})
    abf = (rng.standard_normal((M, K)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bbf = (rng.standard_normal((K, N)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    s = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
    # The interpreter multiplies bf16 tiles as their raw uint16 patterns: numpy is the oracle here.
    out["dot_bf16"] = (KernelCall(dot_kernel, s, {"BM": 16, "BN": 16, "BK": 8},
                                  [abf, bbf, np.zeros((M, N), np.float32), M, N, K], (1, 1)),
                       {"rtol": 1e-5, "atol": 1e-5, "numpy": {2: _bf16_f32(abf) @ _bf16_f32(bbf)}})
    B = 8
    out["shape"] = (KernelCall(shape_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"B": B},
                               [rng.standard_normal((B, B)).astype(np.float32), np.zeros(5 * B * B + B, np.float32)],
                               (1,)), {"rtol": 1e-6, "atol": 1e-6})
    xf = (rng.random(6) * 3 + 0.1).astype(np.float32)
    out["flow"] = (KernelCall(flow_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_valid": "i32", "steps": "i32"},
                              {"BLOCK": 1}, [xf, np.full(3 * 6, -1.0, np.float32), 4, 5], (6,)),
                   {"rtol": 1e-6, "atol": 0})
    out["call"] = (KernelCall(call_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32", "s": "fp32"}, {"BLOCK": 8},
                              [rng.standard_normal(16).astype(np.float32), np.zeros(16, np.float32), 0.5], (2,)),
                   {"rtol": 1e-6, "atol": 0})
    xi = rng.standard_normal(8).astype(np.float32)
    idx = rng.integers(0, 8, 8).astype(np.int32)
    out["index"] = (KernelCall(index_kernel, {"x_ptr": "*fp32", "i_ptr": "*i32", "o_ptr": "*fp32", "h_ptr": "*i32",
                                              "n": "i32"}, {"BLOCK": 8},
                               [xi, idx, np.zeros(8, np.float32), np.zeros(8, np.int32), 5], (1,)), {})
    # The interpreter has no libdevice and its tl.cat stores garbage here: numpy is the only oracle.
    want = np.concatenate([xi, xi * 2, np.tanh(xi) + np.abs(xi) ** xi]).astype(np.float32)
    out["libdevice_cat"] = (KernelCall(libdevice_cat_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32"}, {"BLOCK": 8},
                                       [xi, np.zeros(24, np.float32)], (1,)),
                            {"rtol": 1e-5, "atol": 1e-6, "numpy_only": [xi, want]})
    out["carry"] = (KernelCall(carry_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "steps": "i32"}, {"BLOCK": 16},
                               [rng.standard_normal(24).astype(np.float32), np.zeros(32, np.float32), 6], (1,)),
                    {"rtol": 1e-5, "atol": 1e-6})
    xa = rng.standard_normal(13).astype(np.float32)
    s = {"x_ptr": "*fp32", "f_ptr": "*fp32", "i_ptr": "*i32", "old_ptr": "*fp32", "n": "i32"}
    out["atomic"] = (KernelCall(atomic_kernel, s, {"BLOCK": 8},
                                [xa, np.zeros(6, np.float32) - 10, np.zeros(8, np.int32), np.zeros(13, np.float32), 13],
                                (2,)), {"rtol": 1e-6, "atol": 1e-6})
    flags = np.array([1, 0, 1, 1, -1, 1, 0, 1, 3], np.int16)
    out["atomic_poll"] = (KernelCall(poll_kernel, {"flag_ptr": "*i16", "o_ptr": "*i32", "timeout_ns": "i64"},
                                     {"BLOCK": 8}, [flags, np.zeros(8, np.int32), 0], (1,)), {"rtol": 0, "atol": 0})
    xd = rng.standard_normal((10, 13)).astype(np.float32)
    s = {"x_ptr": "*fp32", "o_ptr": "*fp32", "M": "i32", "N": "i32"}
    out["descriptor"] = (KernelCall(descriptor_kernel, s, {"BM": 4, "BN": 8}, [xd, np.zeros_like(xd), 10, 13], (3, 2)),
                         {"rtol": 0, "atol": 0, "numpy_only": [xd, xd * 2 + 1]})
    xm = np.linspace(-2, 2, 8).astype(np.float32)
    want = np.concatenate([np.where(xm > 0, xm, 1.5 * (np.exp(xm) - 1)), (xm + (xm + 1)) - xm * (xm + 1)])
    # The interpreter cannot run map_elementwise with a scalar argument: numpy is the oracle.
    out["map"] = (KernelCall(map_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32", "alpha": "fp32"}, {"BLOCK": 8},
                             [xm, np.zeros(16, np.float32), 1.5], (1,)),
                  {"rtol": 1e-6, "atol": 1e-7, "numpy_only": [xm, want.astype(np.float32)]})
    pa = rng.integers(-1000, 1000, (4, 8)).astype(np.int32)
    pb = rng.integers(1, 9, 8).astype(np.int32)
    q, m = np.fix(pa / pb).astype(np.int32), np.fmod(pa, pb)  # C division truncates, as arith.divsi
    pairs = lambda x: x.reshape(-1, 2)  # noqa: E731 (consecutive row-major elements share a call)
    m_want = np.stack([pairs(m)[:, 0] - pairs(pa)[:, 1], pairs(m)[:, 1] + pairs(pa)[:, 0]], 1).reshape(4, 8)
    out["map_pack"] = (KernelCall(map_pack_kernel, {"a_ptr": "*i32", "b_ptr": "*i32", "o_ptr": "*i32"},
                                  {"R": 4, "C": 8}, [pa, pb, np.zeros(64, np.int32)], (1,)),
                       {"rtol": 0, "atol": 0, "numpy_only": [pa, pb, np.concatenate([q.ravel(), m_want.ravel()])]})
    xt = rng.standard_normal(16).astype(np.float32)
    for n_iter in (2, 5):
        out[f"tensor_flow_{n_iter}"] = (KernelCall(tensor_flow_kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32", "n": "i32"},
                                                   {"BLOCK": 16}, [xt, np.zeros(16, np.float32), n_iter], (1,)),
                                        {"rtol": 1e-6, "atol": 1e-6})
    a8 = rng.integers(-128, 128, (16, 32), dtype=np.int8)
    b8 = rng.integers(-128, 128, (32, 16), dtype=np.int8)
    out["dot_i8"] = (KernelCall(dot_i8_kernel, {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32"},
                                {"BM": 16, "BN": 16, "BK": 32}, [a8, b8, np.zeros((16, 16), np.int32)], (1,)),
                     {"numpy_only": [a8, b8, a8.astype(np.int32) @ b8.astype(np.int32)]})
    a3 = rng.standard_normal((2, 4, 8)).astype(np.float32)
    b3 = rng.standard_normal((2, 8, 4)).astype(np.float32)
    out["dot_3d"] = (KernelCall(dot_3d_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"},
                                {"G": 2, "BM": 4, "BN": 4, "BK": 8}, [a3, b3, np.zeros((2, 4, 4), np.float32)], (1,)),
                     {"rtol": 1e-5, "atol": 1e-5})
    out["carry_view"] = (KernelCall(carry_view_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "steps": "i32"},
                                    {"B": 8}, [rng.standard_normal((8, 8)).astype(np.float32),
                                               np.zeros((8, 8), np.float32), 3], (1,)),
                         {"rtol": 1e-6, "atol": 1e-6})
    out["grid"] = (KernelCall(grid_kernel, {"out_ptr": "*i32"}, {"BLOCK": 4},
                              [np.zeros(3 * 2 * 2 * 4, np.int32)], (3, 2, 2)), {})
    return out


LAUNCHES = _launches()


@pytest.fixture(scope="module")
def expected() -> dict[str, list[np.ndarray]]:
    names = [n for n, (_, options) in LAUNCHES.items() if "numpy_only" not in options]
    runs = run_interpreter_many([LAUNCHES[n][0] for n in names])
    return dict(zip(names, runs, strict=True)) | {
        n: options["numpy_only"] for n, (_, options) in LAUNCHES.items() if "numpy_only" in options}


@pytest.fixture(scope="module", params=[HOST_ISA, RISCV_ISA])
def actual(request: pytest.FixtureRequest) -> dict[str, list[np.ndarray]]:
    runs = run_c_kernels([call for call, _ in LAUNCHES.values()], request.param)
    return dict(zip(LAUNCHES, runs, strict=True))


@pytest.mark.parametrize("name", list(LAUNCHES))
def test_matches_interpreter(name: str, actual, expected) -> None:
    _call, options = LAUNCHES[name]
    tolerance = {k: v for k, v in options.items() if k not in ("numpy", "numpy_only")}
    want = list(expected[name])
    for index, reference in options.get("numpy", {}).items():
        want[index] = reference.astype(want[index].dtype).reshape(want[index].shape)
    assert_match(actual[name], want, what=name, **tolerance)
