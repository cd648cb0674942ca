"""A small Triton_RVV-style checkout written by us (same layout and conventions as theirs, our own code)."""

from __future__ import annotations

import textwrap
from pathlib import Path

SCALE_MODULE = '''
import os

import torch
import triton
import triton.language as tl

DTYPE = getattr(torch, os.getenv("DTYPE", "float32"))


def scale_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym, stride_yn,
                 BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    offs_m = (pid // num_pid_n) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = (pid % num_pid_n) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :] * stride_xn, mask=mask, other=0.0)
    tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn, x * 2.0, mask=mask)


def get_scale_kernel_autotune_config(num_threads=1):
    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n}, num_threads=num_threads)
            for m in (4, 8) for n in (8, 16)]


def benchmark_triton(shape, x, parallel=False):
    fn_jit = triton.jit(scale_kernel)
    tuned = triton.runtime.Autotuner(fn_jit, fn_jit.arg_names, configs=get_scale_kernel_autotune_config(), key=[])
    M, N = shape
    y = torch.empty((M, N), dtype=DTYPE)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)
    tuned[grid](x, y, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1))


if __name__ == "__main__":
    triton.runtime.driver.set_active_to_cpu()
    raise SystemExit("the __main__ block must never run under pytest-rvtune")
    x = torch.randn((8, 12), dtype=DTYPE)  # as their __main__ makes the input (and says its rank)
    benchmark_triton((8, 12), x)
'''

SCALE_HARNESS = '''
#include "scale_kernel_launcher.h"
#include "support/support.h"
#include <cassert>
#include <chrono>
#include <cstdlib>
#include <cstring>

int main(int argc, char *argv[]) {
  int M = 8;
  int N = 12;
  int RUN_COUNT = 3;
  if (argc >= 2) {
    std::vector<int> Shape = splitStringToInts(argv[1]);
    if (Shape.size()) {
      assert(Shape.size() == 3 && "Invalid shape format: MxNxRUN_COUNT\\n");
      M = Shape.at(0);
      N = Shape.at(1);
      RUN_COUNT = Shape.at(2);
    }
  }
  float *arg0 = (float *)malloc(M * N * sizeof(float));
  float *ref_out = (float *)malloc(M * N * sizeof(float));
  float *real_out = (float *)malloc(M * N * sizeof(float));
  std::string file1 = getDB("scale", std::to_string(M) + "x" + std::to_string(N), 1);
  if (!readMatrix(file1.c_str(), arg0, M, N)) { printf("Failed to read input\\n"); return -1; }
  std::string file2 = getDB("scale", std::to_string(M) + "x" + std::to_string(N), 2);
  if (!readMatrix(file2.c_str(), ref_out, M, N)) { printf("Failed to read reference\\n"); return -1; }
  int num_thread = 1;
  // stride_xn and stride_yn are 1 at JIT time: triton-cpu specialised them away, so 6 kernel arguments.
  uint32_t grid = ((M + scale_kernel_BLOCK_SIZE_M - 1) / scale_kernel_BLOCK_SIZE_M) *
                  ((N + scale_kernel_BLOCK_SIZE_N - 1) / scale_kernel_BLOCK_SIZE_N);
  scale_kernel_wrap(grid, 1, 1, num_thread, scale_kernel, arg0, real_out, M, N, N, N);
  check_tensor(ref_out, real_out, M * N, "out");
  auto begin = std::chrono::high_resolution_clock::now();
  for (int i = 1; i < RUN_COUNT; i++)
    scale_kernel_wrap(grid, 1, 1, num_thread, scale_kernel, arg0, real_out, M, N, N, N);
  std::chrono::duration<double> t = std::chrono::high_resolution_clock::now() - begin;
  PRINT_KERNEL_RUNNING_TIME(TRITON_KERNEL, t.count() / RUN_COUNT)
  return 0;
}
'''


def write_matrix(path: Path, rows: list[list[float]], fmt: str = "%.9f") -> None:
    """Their Python writer's format: `rows cols`, then one row per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{len(rows)} {len(rows[0])}"] + [" ".join(fmt % v for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


#: Our own support library with their API shape (written for tests/harness): getDB, readMatrix, check_tensor...
SUPPORT = Path(__file__).resolve().parent.parent / "harness" / "project" / "support"


def make_tree(root: Path, *, m: int = 8, n: int = 12, wrong: bool = False) -> Path:
    """A checkout with one kernel `scale` (y = 2 x), its harness, our support library and data for M x N."""
    (root / "benchmark/src/triton").mkdir(parents=True)
    (root / "benchmark/src/main").mkdir(parents=True)
    (root / "benchmark/src/support").mkdir(parents=True)
    (root / "env_build/include/support").mkdir(parents=True)
    (root / "benchmark/src/triton/scale.py").write_text(textwrap.dedent(SCALE_MODULE))
    (root / "benchmark/src/main/scale_kernel.cpp").write_text(SCALE_HARNESS)
    (root / "env_build/include/support/support.h").write_text((SUPPORT / "support.h").read_text())
    (root / "benchmark/src/support/support.cpp").write_text((SUPPORT / "support.cpp").read_text())
    x = [[(i * n + j) * 0.25 - 3 for j in range(n)] for i in range(m)]
    y = [[2 * v + (1.0 if wrong and (i, j) == (1, 2) else 0.0) for j, v in enumerate(row)] for i, row in enumerate(x)]
    data = root / "benchmark/auto-tuner/scale/run/test_data"
    write_matrix(data / f"matrix_{m}x{n}_1.txt", x)
    write_matrix(data / f"matrix_{m}x{n}_2.txt", y, "%.6f")
    return root


PIPE_MODULE = '''
import triton
import triton.language as tl

triton.runtime.driver.set_active_to_cpu()


def pipe_scale_kernel(x_ptr, y_ptr, M, N, stride_m, stride_n, BLOCK_SIZE_M: tl.constexpr, COLS: tl.constexpr):
    pid = tl.program_id(axis=0)
    src = tl.make_block_ptr(base=x_ptr, shape=(M, N), strides=(stride_m, stride_n), offsets=(pid * BLOCK_SIZE_M, 0),
                            block_shape=(BLOCK_SIZE_M, COLS), order=(1, 0))
    dst = tl.make_block_ptr(base=y_ptr, shape=(M, N), strides=(stride_m, stride_n), offsets=(pid * BLOCK_SIZE_M, 0),
                            block_shape=(BLOCK_SIZE_M, COLS), order=(1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1)) * 2.0, boundary_check=(0, 1))


def pipe_shift_kernel(y_ptr, z_ptr, M, N, stride_m, stride_n, BLOCK_SIZE_M: tl.constexpr, COLS: tl.constexpr):
    pid = tl.program_id(axis=0)
    src = tl.make_block_ptr(base=y_ptr, shape=(M, N), strides=(stride_m, stride_n), offsets=(pid * BLOCK_SIZE_M, 0),
                            block_shape=(BLOCK_SIZE_M, COLS), order=(1, 0))
    dst = tl.make_block_ptr(base=z_ptr, shape=(M, N), strides=(stride_m, stride_n), offsets=(pid * BLOCK_SIZE_M, 0),
                            block_shape=(BLOCK_SIZE_M, COLS), order=(1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1)) + 1.0, boundary_check=(0, 1))


def get_pipe_kernel_autotune_config(N, num_threads=1):
    # COLS covers a whole row: the problem size lands inside every config, as in their attention getter.
    cols = triton.next_power_of_2(N)
    return [triton.Config({"BLOCK_SIZE_M": m, "COLS": cols}, num_threads=num_threads) for m in (2, 4)]


def benchmark_triton(shape, x):
    import torch
    M, N = shape
    assert x.dim() == 2
    y, z = torch.empty_like(x), torch.empty_like(x)
    scale = triton.runtime.Autotuner(triton.jit(pipe_scale_kernel), [], configs=get_pipe_kernel_autotune_config(N),
                                     key=[])
    scale[(M,)](x, y, M, N, x.stride(0), x.stride(1))
    shift_jit = triton.jit(pipe_shift_kernel)
    shift_jit[(M,)](y, z, M, N, y.stride(0), y.stride(1), BLOCK_SIZE_M=2, COLS=16)
'''

PIPE_HARNESS = '''
#include "pipe_scale_kernel_launcher.h"
#include "pipe_shift_kernel_launcher.h"
#include "support/support.h"
#include <chrono>
#include <cstdlib>

int main(int argc, char *argv[]) {
  int M = 8;
  int N = 12;
  int RUN_COUNT = 2;
  if (argc >= 2) {
    std::vector<int> Shape = splitStringToInts(argv[1]);
    if (Shape.size() == 3) {
      M = Shape.at(0);
      N = Shape.at(1);
      RUN_COUNT = Shape.at(2);
    }
  }
  float *arg0 = (float *)malloc(M * N * sizeof(float));
  float *mid = (float *)malloc(M * N * sizeof(float));
  float *ref_out = (float *)malloc(M * N * sizeof(float));
  float *real_out = (float *)malloc(M * N * sizeof(float));
  std::string file1 = getDB("pipe", std::to_string(M) + "x" + std::to_string(N), 1);
  if (!readMatrix(file1.c_str(), arg0, M, N)) return -1;
  std::string file2 = getDB("pipe", std::to_string(M) + "x" + std::to_string(N), 2);
  if (!readMatrix(file2.c_str(), ref_out, M, N)) return -1;
  uint32_t grid_scale = (M + pipe_scale_kernel_BLOCK_SIZE_M - 1) / pipe_scale_kernel_BLOCK_SIZE_M;
  uint32_t grid_shift = (M + pipe_shift_kernel_BLOCK_SIZE_M - 1) / pipe_shift_kernel_BLOCK_SIZE_M;
  auto begin = std::chrono::high_resolution_clock::now();
  for (int i = 0; i < RUN_COUNT; i++) {
    pipe_scale_kernel_wrap(grid_scale, 1, 1, 1, pipe_scale_kernel, arg0, mid, M, N, N);
    pipe_shift_kernel_wrap(grid_shift, 1, 1, 1, pipe_shift_kernel, mid, real_out, M, N, N);
  }
  std::chrono::duration<double> t = std::chrono::high_resolution_clock::now() - begin;
  check_tensor(ref_out, real_out, M * N, "out");
  PRINT_KERNEL_RUNNING_TIME(TRITON_KERNEL, t.count() / RUN_COUNT)
  return 0;
}
'''


def add_pipe(root: Path, *, m: int = 8, n: int = 12) -> Path:
    """A second entry: two block-pointer kernels in one harness (as their attention), a getter taking N."""
    (root / "benchmark/src/triton/pipe.py").write_text(textwrap.dedent(PIPE_MODULE))
    (root / "benchmark/src/main/pipe_kernel.cpp").write_text(PIPE_HARNESS)
    x = [[(i * n + j) * 0.5 - 7 for j in range(n)] for i in range(m)]
    data = root / "benchmark/auto-tuner/pipe/run/test_data"
    write_matrix(data / f"matrix_{m}x{n}_1.txt", x)
    write_matrix(data / f"matrix_{m}x{n}_2.txt", [[2 * v + 1 for v in row] for row in x])
    return root
