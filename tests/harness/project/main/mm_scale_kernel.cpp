// Two kernels in one ELF (like Triton_RVV's attention harness): out = alpha * (A @ B) by mm_kernel, then
// scale_kernel; each kernel's launcher header and block constants come from its own config.
#include "mm_kernel_launcher.h"
#include "scale_kernel_launcher.h"
#include "support/support.h"

#include <chrono>
#include <cstdlib>

int main(int argc, char *argv[]) {
  std::vector<int> shape = splitStringToInts(argc >= 2 ? argv[1] : "4x4x4x2");
  if (shape.size() != 4) {
    printf("shape format: MxNxKxRUN_COUNT\n");
    return 2;
  }
  int M = shape[0], N = shape[1], K = shape[2], RUN_COUNT = shape[3];
  float *a = (float *)calloc(M * K, sizeof(float)), *b = (float *)calloc(K * N, sizeof(float));
  float *c = (float *)calloc(M * N, sizeof(float)), *got = (float *)calloc(M * N, sizeof(float));
  float *want = (float *)calloc(M * N, sizeof(float));
  std::string dims[] = {std::to_string(M) + "x" + std::to_string(K), std::to_string(K) + "x" + std::to_string(N),
                        std::to_string(M) + "x" + std::to_string(N)};
  float *bufs[] = {a, b, want};
  int idx[] = {1, 2, 4};
  for (int i = 0; i < 3; ++i) {
    int rows, cols;
    std::string path = getDB("mm", dims[i], idx[i]);
    if (!readMatrix(path.c_str(), bufs[i], rows, cols)) {
      printf("Failed to read %s\n", path.c_str());
      return -1;
    }
  }
  auto launch = [&] {
    mm_kernel_wrap(ceil(1.0 * M / mm_kernel_BLOCK_M) * ceil(1.0 * N / mm_kernel_BLOCK_N), 1, 1, 1, mm_kernel, a, b,
                   c, M, N, K, K, N, N);
    scale_kernel_wrap(ceil(1.0 * M * N / scale_kernel_BLOCK), 1, 1, 1, scale_kernel, c, got, M * N, 2.0f);
  };
  launch();
  check_tensor(want, got, M * N, "scaled");
  auto begin = std::chrono::high_resolution_clock::now();
  for (int i = 1; i < RUN_COUNT; i++) launch();
  std::chrono::duration<double> spent = std::chrono::high_resolution_clock::now() - begin;
  PRINT_KERNEL_RUNNING_TIME(TRITON_KERNEL, spent.count() / RUN_COUNT)
  return 0;
}
