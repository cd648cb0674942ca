// A harness in the Triton_RVV style for mm_kernel (tests/harness/ext_kernels.py): argv[1] = MxNxKxRUN_COUNT,
// data from relative paths, one checked launch, then RUN_COUNT - 1 timed ones. mm_kernel_wrap gets 9 kernel
// arguments for 12 parameters: stride_ak, stride_bn and stride_cn are 1 and specialised away.
#ifdef TRITON_KERNEL_ENABLE
#include "mm_kernel_launcher.h"
#endif
#include "support/support.h"

#include <cassert>
#include <chrono>
#include <cstdlib>
#include <cstring>

int main(int argc, char *argv[]) {
  int M = 4, N = 4, K = 4, RUN_COUNT = 3;
  if (argc >= 2) {
    std::vector<int> shape = splitStringToInts(argv[1]);
    assert(shape.size() == 4 && "shape format: MxNxKxRUN_COUNT");
    M = shape[0], N = shape[1], K = shape[2], RUN_COUNT = shape[3];
  }
  float *a = (float *)calloc(M * K, sizeof(float)), *b = (float *)calloc(K * N, sizeof(float));
  float *want = (float *)calloc(M * N, sizeof(float)), *got = (float *)calloc(M * N, sizeof(float));
#ifdef CHECK_ACCURACY
  std::string fa = getDB("mm", std::to_string(M) + "x" + std::to_string(K), 1);
  if (!readMatrix(fa.c_str(), a, M, K)) {
    printf("Failed to read first input matrix\n");
    return -1;
  }
  std::string fb = getDB("mm", std::to_string(K) + "x" + std::to_string(N), 2);
  if (!readMatrix(fb.c_str(), b, K, N)) {
    printf("Failed to read second input matrix\n");
    return -1;
  }
  std::string fc = getDB("mm", std::to_string(M) + "x" + std::to_string(N), 3);
  if (!readMatrix(fc.c_str(), want, M, N)) {
    printf("Failed to read reference output matrix\n");
    return -1;
  }
#endif
#ifdef TRITON_KERNEL_ENABLE
  uint32_t grid = ceil(1.0 * M / mm_kernel_BLOCK_M) * ceil(1.0 * N / mm_kernel_BLOCK_N);
  mm_kernel_wrap(grid, 1, 1, 1, mm_kernel, a, b, got, M, N, K, K, N, N);
#ifdef CHECK_ACCURACY
  check_tensor(want, got, M * N, "out");
#endif
  auto begin = std::chrono::high_resolution_clock::now();
  for (int i = 1; i < RUN_COUNT; i++) mm_kernel_wrap(grid, 1, 1, 1, mm_kernel, a, b, got, M, N, K, K, N, N);
  std::chrono::duration<double> spent = std::chrono::high_resolution_clock::now() - begin;
  PRINT_KERNEL_RUNNING_TIME(TRITON_KERNEL, spent.count() / RUN_COUNT)
#endif
  free(a), free(b), free(want), free(got);
  return 0;
}
