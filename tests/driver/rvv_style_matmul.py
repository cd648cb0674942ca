'''
A matmul benchmark script in the style of Triton_RVV's benchmark/src/triton/*.py (written for these tests):
an undecorated kernel, jitted with triton.jit(fn) inside benchmark_triton(), a triton.runtime.Autotuner over
triton.Config(..., num_threads=n) configs with key=[], and CPU tensors. It must run unchanged once the rvtune
CPU driver is active.
'''

import torch
import triton
import triton.language as tl


def matmul_kernel(
        # Pointers to matrices
        a_ptr, b_ptr, c_ptr,
        # Matrix dimensions
        M, N, K,
        # Strides
        stride_am, stride_ak,  #
        stride_bk, stride_bn,  #
        stride_cm, stride_cn,
        # Meta-parameters
        BLOCK_SIZE_M: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_K: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_tile_ptr = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_tile_ptr = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k * BLOCK_SIZE_K
        a = tl.load(a_tile_ptr, mask=(offs_am[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_tile_ptr, mask=(offs_k[:, None] < k_left) & (offs_bn[None, :] < N), other=0.0)
        accumulator = tl.dot(a, b, accumulator, out_dtype=tl.float32)
        a_tile_ptr += BLOCK_SIZE_K * stride_ak
        b_tile_ptr += BLOCK_SIZE_K * stride_bk

    c = accumulator
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_tile_ptr = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_tile_ptr, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


# Triton Benchmark
def get_matmul_kernel_autotune_config(num_threads=1):
    configs = []

    block_sizes_M = [4, 8]
    block_sizes_N = [8]
    block_sizes_K = [4, 8]

    for block_m in block_sizes_M:
        for block_n in block_sizes_N:
            for block_k in block_sizes_K:
                configs.append(
                    triton.Config({
                                'BLOCK_SIZE_M': block_m,
                                'BLOCK_SIZE_N': block_n,
                                'BLOCK_SIZE_K': block_k,
                            }, num_threads=num_threads)
                    )

    return configs


def benchmark_triton(shape, a, b, parallel=False):
    fn = matmul_kernel
    fn_jit = triton.jit(fn)
    fn_jit_tuned = triton.runtime.Autotuner(fn_jit, fn_jit.arg_names,
        reset_to_zero=None,
        restore_value=None,
        configs=get_matmul_kernel_autotune_config(0 if parallel else 1),
        key=[],
    )

    M, N, K = shape
    c = torch.empty((M, N), dtype=torch.float32, device="cpu")
    assert a.shape[1] == b.shape[0], "Incompatible matrix dimensions"

    # 1D launch kernel where each block gets its own program.
    grid = lambda META: (  # noqa: E731 (their style)
        triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),
    )

    def run_triton_kernel():
        fn_jit_tuned[grid](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1),
            b.stride(0), b.stride(1),
            c.stride(0), c.stride(1)
        )

    run_triton_kernel()  # autotunes over every config, then runs the best one
    print(f"best config: {fn_jit_tuned.best_config}")
    return c, fn_jit_tuned


if __name__ == "__main__":
    import pytest_rvtune.cpu_driver

    pytest_rvtune.cpu_driver.activate()
    M, N, K = 20, 12, 10
    a = torch.randn((M, K), device='cpu', dtype=torch.float32)
    b = torch.randn((K, N), device='cpu', dtype=torch.float32)
    c, _ = benchmark_triton((M, N, K), a, b)
    print("match:", torch.allclose(c, a @ b, atol=1e-4, rtol=1e-4))
