/* rvv_flash.c: a hand-written RVV-intrinsics flash-attention forward, the yardstick of `rvtune bench-compiler`.
 *
 * out = softmax(Q K^T * scale) V per head (fp32, [heads][n][d] row-major, d <= 64), L = logsumexp of each score
 * row (what the kernel writes too), causal or not. Per head, K is transposed once (K^T, d rows of n keys), so
 * a block of up to 64 scores of one query row is an LMUL-8 vector built by d vfmacc.vf (a scalar of q times a
 * K^T row). Online softmax per key block: vfredmax, exp(s - m) in registers (vexp, rvv_exp.h), vfredusum, the
 * running output row (one LMUL-8 vector of d floats) rescaled by exp(m_old - m_new) and updated by one
 * vfmacc.vf per key (p_j times V's row j). No score matrix in memory beyond one block of p. clang keeps one
 * LMUL-8 spill/reload pair per key block (acc around the one-lane exp): 2 of ~600 instructions per block.
 * `rvv_flash_wrap` makes the QEMU plugin count the whole call as `launch_insns`. Run:
 *   rvv_flash.elf HEADS N D CAUSAL REPS Q.bin K.bin V.bin OUT.bin L.bin
 */
#include <math.h>
#include <riscv_vector.h>
#include <stdio.h>
#include <stdlib.h>

#include "rvv_exp.h"
#include "rvv_io.h"

#define MAX_N 4096
#define MAX_D 64

__attribute__((noinline)) void rvv_flash(int heads, int n, int d, int causal, float scale, const float *Q,
                                         const float *K, const float *V, float *O, float *L) {
    static float kt[MAX_D * MAX_N]; /* K^T of one head: kt[c * n + j] = K[j][c] */
    static float p[64];             /* one block of exp(s - m) */
    const size_t vd = __riscv_vsetvl_e32m8((size_t)d);
    vfloat32m1_t lowest = __riscv_vfmv_v_f_f32m1(-INFINITY, 1), zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);
    for (int h = 0; h < heads; ++h) {
        const size_t base = (size_t)h * n * d;
        const float *q = Q + base, *k = K + base, *v = V + base;
        for (int j = 0; j < n; ++j)
            __riscv_vsse32_v_f32m8(kt + j, (ptrdiff_t)(n * sizeof(float)), __riscv_vle32_v_f32m8(k + (size_t)j * d, vd),
                                   vd);
        for (int i = 0; i < n; ++i) {
            const float *qi = q + (size_t)i * d;
            const int keys = causal ? i + 1 : n;
            float m = -INFINITY, l = 0.0f;
            vfloat32m8_t acc = __riscv_vfmv_v_f_f32m8(0.0f, vd);
            for (int j0 = 0; j0 < keys;) {
                const size_t vl = __riscv_vsetvl_e32m8((size_t)(keys - j0));
                vfloat32m8_t s = __riscv_vfmv_v_f_f32m8(0.0f, vl);
                const float *ktj = kt + j0;
                for (int c = 0; c < d; ++c, ktj += n) s = __riscv_vfmacc_vf_f32m8(s, qi[c], __riscv_vle32_v_f32m8(ktj, vl), vl);
                s = __riscv_vfmul_vf_f32m8(s, scale, vl);
                const float block_max = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32m8_f32m1(s, lowest, vl));
                const float m_new = fmaxf(m, block_max);
                vfloat32m8_t e = vexp(__riscv_vfsub_vf_f32m8(s, m_new, vl), vl);
                const float block_sum = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m8_f32m1(e, zero, vl));
                __riscv_vse32_v_f32m8(p, e, vl);
                /* alpha = exp(m - m_new) by vexp on one lane once s and e are dead, not expf: a call would spill
                 * acc (vector registers are caller-saved). For m = -inf it is ~1e-38, multiplying acc = l = 0. */
                const float alpha = __riscv_vfmv_f_s_f32m8_f32(vexp(__riscv_vfmv_v_f_f32m8(m - m_new, 1), 1));
                l = l * alpha + block_sum;
                acc = __riscv_vfmul_vf_f32m8(acc, alpha, vd);
                const float *vj = v + (size_t)j0 * d;
                for (size_t j = 0; j < vl; ++j, vj += d)
                    acc = __riscv_vfmacc_vf_f32m8(acc, p[j], __riscv_vle32_v_f32m8(vj, vd), vd);
                m = m_new;
                j0 += (int)vl;
            }
            __riscv_vse32_v_f32m8(O + base + (size_t)i * d, __riscv_vfmul_vf_f32m8(acc, 1.0f / l, vd), vd);
            L[(size_t)h * n + i] = m + logf(l);
        }
    }
}

__attribute__((noinline)) void rvv_flash_wrap(int heads, int n, int d, int causal, float scale, const float *Q,
                                              const float *K, const float *V, float *O, float *L) {
    rvv_flash(heads, n, d, causal, scale, Q, K, V, O, L);
}

int main(int argc, char **argv) {
    if (argc != 11) {
        fprintf(stderr, "usage: %s HEADS N D CAUSAL REPS Q.bin K.bin V.bin OUT.bin L.bin\n", argv[0]);
        return 2;
    }
    int heads = atoi(argv[1]), n = atoi(argv[2]), d = atoi(argv[3]), causal = atoi(argv[4]), reps = atoi(argv[5]);
    if (heads <= 0 || n <= 0 || n > MAX_N || d <= 0 || d > MAX_D || reps <= 0) {
        fprintf(stderr, "need HEADS > 0, 0 < N <= %d, 0 < D <= %d, REPS > 0\n", MAX_N, MAX_D);
        return 2;
    }
    size_t count = (size_t)heads * n * d;
    const float *q = read_floats(argv[6], count), *k = read_floats(argv[7], count), *v = read_floats(argv[8], count);
    float *out = malloc(sizeof(float) * count), *lse = malloc(sizeof(float) * (size_t)heads * n);
    for (int r = 0; r < reps; ++r) rvv_flash_wrap(heads, n, d, causal, 1.0f / sqrtf((float)d), q, k, v, out, lse);
    write_floats(argv[9], out, count);
    write_floats(argv[10], lse, (size_t)heads * n);
    return 0;
}
