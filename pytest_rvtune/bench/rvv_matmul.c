/* rvv_matmul.c: hand-written RVV-intrinsics fp32 matmuls, the yardsticks of `rvtune bench-compiler`.
 *
 * C[n x n] = A[n x n] * B[n x n], row-major, two register tilings (vsetvl handles the column tail):
 *   rvv_matmul     4 rows x one LMUL-4 vector of columns (32 floats at VLEN 256): per k one vle32 of B's
 *                  row and four vfmacc.vf (A's elements as scalars); 4 + 1 of the 8 LMUL-4 groups.
 *   rvv_matmul_3x8 3 rows x one LMUL-8 vector (64 floats), A's 3-row panel packed k-major: per k one vle32,
 *                  three flw at constant offsets and three vfmacc.vf; 3 + 1 of the 4 LMUL-8 groups, the
 *                  fewest instructions per FLOP a register tile reaches here.
 * Built with the generated kernels' flags (toolchain.py); run: rvv_matmul.elf N REPS [4x4|3x8]. It checks
 * itself against a scalar i-k-j product and exits 1 on a mismatch.
 */
#include <riscv_vector.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

__attribute__((noinline)) void rvv_matmul(int n, const float *A, const float *B, float *C) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        for (int j = 0; j < n;) {
            size_t vl = __riscv_vsetvl_e32m4((size_t)(n - j));
            vfloat32m4_t c0 = __riscv_vfmv_v_f_f32m4(0.0f, vl), c1 = c0, c2 = c0, c3 = c0;
            const float *a = A + (size_t)i * n, *b = B + j;
            for (int k = 0; k < n; ++k) {
                vfloat32m4_t bv = __riscv_vle32_v_f32m4(b + (size_t)k * n, vl);
                c0 = __riscv_vfmacc_vf_f32m4(c0, a[k], bv, vl);
                c1 = __riscv_vfmacc_vf_f32m4(c1, a[n + k], bv, vl);
                c2 = __riscv_vfmacc_vf_f32m4(c2, a[2 * n + k], bv, vl);
                c3 = __riscv_vfmacc_vf_f32m4(c3, a[3 * n + k], bv, vl);
            }
            float *c = C + (size_t)i * n + j;
            __riscv_vse32_v_f32m4(c, c0, vl);
            __riscv_vse32_v_f32m4(c + n, c1, vl);
            __riscv_vse32_v_f32m4(c + 2 * n, c2, vl);
            __riscv_vse32_v_f32m4(c + 3 * n, c3, vl);
            j += (int)vl;
        }
    }
    for (; i < n; ++i) /* rows left over: one accumulator */
        for (int j = 0; j < n;) {
            size_t vl = __riscv_vsetvl_e32m4((size_t)(n - j));
            vfloat32m4_t c0 = __riscv_vfmv_v_f_f32m4(0.0f, vl);
            for (int k = 0; k < n; ++k)
                c0 = __riscv_vfmacc_vf_f32m4(c0, A[(size_t)i * n + k], __riscv_vle32_v_f32m4(B + (size_t)k * n + j, vl), vl);
            __riscv_vse32_v_f32m4(C + (size_t)i * n + j, c0, vl);
            j += (int)vl;
        }
}

__attribute__((noinline)) void rvv_matmul_3x8(int n, const float *A, const float *B, float *C) {
    static float packed[3 * 4096]; /* A's 3-row panel, k-major: the 3 scalars of a k step are adjacent */
    int i = 0;
    for (; i + 3 <= n && n <= 4096; i += 3) {
        for (int k = 0; k < n; ++k)
            for (int r = 0; r < 3; ++r) packed[3 * k + r] = A[(size_t)(i + r) * n + k];
        for (int j = 0; j < n;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(n - j));
            vfloat32m8_t c0 = __riscv_vfmv_v_f_f32m8(0.0f, vl), c1 = c0, c2 = c0;
            const float *a = packed, *b = B + j;
            for (int k = 0; k < n; ++k, a += 3) {
                vfloat32m8_t bv = __riscv_vle32_v_f32m8(b + (size_t)k * n, vl);
                c0 = __riscv_vfmacc_vf_f32m8(c0, a[0], bv, vl);
                c1 = __riscv_vfmacc_vf_f32m8(c1, a[1], bv, vl);
                c2 = __riscv_vfmacc_vf_f32m8(c2, a[2], bv, vl);
            }
            float *c = C + (size_t)i * n + j;
            __riscv_vse32_v_f32m8(c, c0, vl);
            __riscv_vse32_v_f32m8(c + n, c1, vl);
            __riscv_vse32_v_f32m8(c + 2 * n, c2, vl);
            j += (int)vl;
        }
    }
    for (; i < n; ++i) /* rows left over: one accumulator */
        for (int j = 0; j < n;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(n - j));
            vfloat32m8_t c0 = __riscv_vfmv_v_f_f32m8(0.0f, vl);
            for (int k = 0; k < n; ++k)
                c0 = __riscv_vfmacc_vf_f32m8(c0, A[(size_t)i * n + k], __riscv_vle32_v_f32m8(B + (size_t)k * n + j, vl), vl);
            __riscv_vse32_v_f32m8(C + (size_t)i * n + j, c0, vl);
            j += (int)vl;
        }
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s N REPS [4x4|3x8]\n", argv[0]);
        return 2;
    }
    const char *variant = argc == 4 ? argv[3] : "4x4";
    void (*matmul)(int, const float *, const float *, float *) = NULL;
    if (strcmp(variant, "4x4") == 0) matmul = rvv_matmul;
    if (strcmp(variant, "3x8") == 0) matmul = rvv_matmul_3x8;
    if (matmul == NULL) {
        fprintf(stderr, "unknown variant %s: use 4x4 or 3x8\n", variant);
        return 2;
    }
    int n = atoi(argv[1]), reps = atoi(argv[2]);
    if (n <= 0 || reps <= 0) {
        fprintf(stderr, "N and REPS must be positive\n");
        return 2;
    }
    float *A = malloc(sizeof(float) * n * n), *B = malloc(sizeof(float) * n * n), *C = malloc(sizeof(float) * n * n);
    float *R = calloc((size_t)n * n, sizeof(float));
    for (int x = 0; x < n * n; ++x) {
        A[x] = (float)((x * 7 + 3) % 23) / 23.0f - 0.5f;
        B[x] = (float)((x * 5 + 1) % 19) / 19.0f - 0.5f;
    }
    for (int r = 0; r < reps; ++r) matmul(n, A, B, C);
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k)
            for (int j = 0; j < n; ++j) R[i * n + j] += A[i * n + k] * B[k * n + j];
    float worst = 0.0f;
    for (int x = 0; x < n * n; ++x) worst = fmaxf(worst, fabsf(C[x] - R[x]));
    printf("rvv_matmul %s n=%d reps=%d max_abs_err=%g\n", variant, n, reps, worst);
    return worst <= 1e-3f * n ? 0 : 1;
}
