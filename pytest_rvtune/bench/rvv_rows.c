/* rvv_rows.c: hand-written RVV-intrinsics row kernels, the softmax and layer_norm yardsticks of
 * `rvtune bench-compiler` (fp32, row-major, rows of any length: vsetvl takes the column tail).
 *
 *   rvv_softmax    y = softmax(x) per row in three sweeps at LMUL 8 (64 floats at VLEN 256): the row max
 *                  (vfmax.vv into one vector, one vfredmax), exp(x - max) written to y and summed (vfadd.vv,
 *                  one vfredusum), then y *= 1 / sum. exp is vectorised in registers (vexp, rvv_exp.h).
 *   rvv_layer_norm y = (x - mean) * rstd * w + b per row, mean and rstd written too (what the kernel writes):
 *                  sum (vfadd.vv, vfredusum), sum of squared deviations (vfsub.vf, vfmacc.vv, vfredusum),
 *                  then one sweep of vfsub.vf, vfmul.vf, vfmadd.vv at LMUL 8.
 * Every kernel has a noinline `<kernel>_wrap` so the QEMU plugin counts the whole call as `launch_insns`,
 * the counter of our generated kernels' launches. Built with the generated kernels' flags; run:
 *   rvv_rows.elf softmax ROWS COLS REPS X.bin Y.bin
 *   rvv_rows.elf layer_norm ROWS COLS REPS X.bin W.bin B.bin Y.bin MEAN.bin RSTD.bin
 * bench-compiler writes the inputs and checks the outputs against numpy.
 */
#include <riscv_vector.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rvv_exp.h"
#include "rvv_io.h"

__attribute__((noinline)) void rvv_softmax(int rows, int cols, const float *X, float *Y) {
    size_t vlmax = __riscv_vsetvlmax_e32m8();
    for (int i = 0; i < rows; ++i) {
        const float *x = X + (size_t)i * cols;
        float *y = Y + (size_t)i * cols;
        /* max: whole vectors folded element-wise (tail elements keep their old value: tu), one reduction */
        vfloat32m8_t acc = __riscv_vfmv_v_f_f32m8(-__builtin_inff(), vlmax);
        for (int j = 0; j < cols;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(cols - j));
            acc = __riscv_vfmax_vv_f32m8_tu(acc, acc, __riscv_vle32_v_f32m8(x + j, vl), vl);
            j += (int)vl;
        }
        vfloat32m1_t lo = __riscv_vfmv_v_f_f32m1(-__builtin_inff(), 1);
        float max = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32m8_f32m1(acc, lo, vlmax));
        /* exp(x - max) into y, summed the same way */
        acc = __riscv_vfmv_v_f_f32m8(0.0f, vlmax);
        for (int j = 0; j < cols;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(cols - j));
            vfloat32m8_t e = vexp(__riscv_vfsub_vf_f32m8(__riscv_vle32_v_f32m8(x + j, vl), max, vl), vl);
            __riscv_vse32_v_f32m8(y + j, e, vl);
            acc = __riscv_vfadd_vv_f32m8_tu(acc, acc, e, vl);
            j += (int)vl;
        }
        vfloat32m1_t zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);
        float inv = 1.0f / __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m8_f32m1(acc, zero, vlmax));
        for (int j = 0; j < cols;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(cols - j));
            __riscv_vse32_v_f32m8(y + j, __riscv_vfmul_vf_f32m8(__riscv_vle32_v_f32m8(y + j, vl), inv, vl), vl);
            j += (int)vl;
        }
    }
}

__attribute__((noinline)) void rvv_layer_norm(int rows, int cols, const float *X, const float *W, const float *B,
                                              float *Y, float *Mean, float *Rstd, float eps) {
    size_t vlmax = __riscv_vsetvlmax_e32m8();
    vfloat32m1_t zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);
    for (int i = 0; i < rows; ++i) {
        const float *x = X + (size_t)i * cols;
        float *y = Y + (size_t)i * cols;
        vfloat32m8_t acc = __riscv_vfmv_v_f_f32m8(0.0f, vlmax);
        for (int j = 0; j < cols;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(cols - j));
            acc = __riscv_vfadd_vv_f32m8_tu(acc, acc, __riscv_vle32_v_f32m8(x + j, vl), vl);
            j += (int)vl;
        }
        float mean = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m8_f32m1(acc, zero, vlmax)) / (float)cols;
        acc = __riscv_vfmv_v_f_f32m8(0.0f, vlmax);
        for (int j = 0; j < cols;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(cols - j));
            vfloat32m8_t d = __riscv_vfsub_vf_f32m8(__riscv_vle32_v_f32m8(x + j, vl), mean, vl);
            acc = __riscv_vfmacc_vv_f32m8_tu(acc, d, d, vl);
            j += (int)vl;
        }
        float var = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m8_f32m1(acc, zero, vlmax)) / (float)cols;
        float rstd = 1.0f / __builtin_sqrtf(var + eps);
        Mean[i] = mean;
        Rstd[i] = rstd;
        for (int j = 0; j < cols;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(cols - j));
            vfloat32m8_t d = __riscv_vfsub_vf_f32m8(__riscv_vle32_v_f32m8(x + j, vl), mean, vl);
            d = __riscv_vfmul_vf_f32m8(d, rstd, vl);
            d = __riscv_vfmadd_vv_f32m8(d, __riscv_vle32_v_f32m8(W + j, vl), __riscv_vle32_v_f32m8(B + j, vl), vl);
            __riscv_vse32_v_f32m8(y + j, d, vl);
            j += (int)vl;
        }
    }
}

/* The launches the QEMU plugin counts (`<kernel>_wrap`): one call of the kernel, nothing else. */
__attribute__((noinline)) void rvv_softmax_wrap(int rows, int cols, const float *X, float *Y) {
    rvv_softmax(rows, cols, X, Y);
}

__attribute__((noinline)) void rvv_layer_norm_wrap(int rows, int cols, const float *X, const float *W,
                                                   const float *B, float *Y, float *Mean, float *Rstd, float eps) {
    rvv_layer_norm(rows, cols, X, W, B, Y, Mean, Rstd, eps);
}

/* Must match kernels/layer_norm.py's EPS. */
#define LAYER_NORM_EPS 1e-5f

int main(int argc, char **argv) {
    int softmax = argc == 7 && strcmp(argv[1], "softmax") == 0;
    int layer_norm = argc == 11 && strcmp(argv[1], "layer_norm") == 0;
    if (!softmax && !layer_norm) {
        fprintf(stderr, "usage: %s softmax ROWS COLS REPS X.bin Y.bin\n"
                        "       %s layer_norm ROWS COLS REPS X.bin W.bin B.bin Y.bin MEAN.bin RSTD.bin\n",
                argv[0], argv[0]);
        return 2;
    }
    int rows = atoi(argv[2]), cols = atoi(argv[3]), reps = atoi(argv[4]);
    if (rows <= 0 || cols <= 0 || reps <= 0) {
        fprintf(stderr, "ROWS, COLS and REPS must be positive\n");
        return 2;
    }
    size_t count = (size_t)rows * cols;
    const float *x = read_floats(argv[5], count);
    float *y = malloc(sizeof(float) * count);
    if (softmax) {
        for (int r = 0; r < reps; ++r) rvv_softmax_wrap(rows, cols, x, y);
        write_floats(argv[6], y, count);
        return 0;
    }
    const float *w = read_floats(argv[6], (size_t)cols), *b = read_floats(argv[7], (size_t)cols);
    float *mean = malloc(sizeof(float) * rows), *rstd = malloc(sizeof(float) * rows);
    for (int r = 0; r < reps; ++r) rvv_layer_norm_wrap(rows, cols, x, w, b, y, mean, rstd, LAYER_NORM_EPS);
    write_floats(argv[8], y, count);
    write_floats(argv[9], mean, (size_t)rows);
    write_floats(argv[10], rstd, (size_t)rows);
    return 0;
}
