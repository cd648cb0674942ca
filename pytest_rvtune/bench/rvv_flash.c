/* rvv_flash.c: a hand-written RVV-intrinsics flash-attention forward, the yardstick of `rvtune bench-compiler`.
 *
 * out = softmax(Q K^T * scale) V per head (fp32, [heads][n][d] row-major, d <= 64), L = logsumexp of each score
 * row (what the kernel writes too), causal or not. Per head, K is transposed once (K^T, d rows of n keys), so
 * a block of up to 64 scores of a query row is an LMUL-8 vector built by d vfmacc.vf (a scalar of q times a
 * K^T row); non-causal, three query rows share each K^T and V row load (flash_rows3, a 3-row GEMM tile).
 * Online softmax per key block: vfredmax, exp(s - m) in registers (vexp, rvv_exp.h), vfredusum, the
 * running output row (one LMUL-8 vector of d floats) rescaled by exp(m_old - m_new) and updated by one
 * vfmacc.vf per key (p_j times V's row j). No score matrix in memory beyond one block of p per row.
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

/* One query row i of a head against keys [0, keys): the online softmax, one LMUL-8 score block at a time. */
static inline void flash_row(int n, int d, int keys, float scale, const float *qi, const float *kt, const float *v,
                             float *oi, float *li) {
    static float p[64]; /* one block of exp(s - m) */
    const size_t vd = __riscv_vsetvl_e32m8((size_t)d);
    vfloat32m1_t lowest = __riscv_vfmv_v_f_f32m1(-INFINITY, 1), zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);
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
    __riscv_vse32_v_f32m8(oi, __riscv_vfmul_vf_f32m8(acc, 1.0f / l, vd), vd);
    *li = m + logf(l);
}

/* Three query rows i..i+2 against keys [0, keys) (non-causal: the same keys for all three), as a GEMM tile: per
 * head dimension c one K^T row load feeds three vfmacc.vf (3 score vectors + 1 = the 4 LMUL-8 groups); per key
 * one V row load feeds three. The score rows, exp blocks and output rows go through small buffers between the
 * phases, since each phase needs all four groups. */
static inline void flash_rows3(int n, int d, int keys, float scale, const float *q, const float *kt, const float *v,
                               float *o, float *lse) {
    static float sbuf[3][64], acc[3][64];
    const size_t vd = __riscv_vsetvl_e32m8((size_t)d);
    vfloat32m1_t lowest = __riscv_vfmv_v_f_f32m1(-INFINITY, 1), zero = __riscv_vfmv_v_f_f32m1(0.0f, 1);
    float m[3] = {-INFINITY, -INFINITY, -INFINITY}, l[3] = {0.0f, 0.0f, 0.0f};
    for (int r = 0; r < 3; ++r) __riscv_vse32_v_f32m8(acc[r], __riscv_vfmv_v_f_f32m8(0.0f, vd), vd);
    const float *q0 = q, *q1 = q + d, *q2 = q + 2 * d;
    for (int j0 = 0; j0 < keys;) {
        const size_t vl = __riscv_vsetvl_e32m8((size_t)(keys - j0));
        vfloat32m8_t s0 = __riscv_vfmv_v_f_f32m8(0.0f, vl), s1 = s0, s2 = s0;
        const float *ktj = kt + j0;
        for (int c = 0; c < d; ++c, ktj += n) {
            vfloat32m8_t kv = __riscv_vle32_v_f32m8(ktj, vl);
            s0 = __riscv_vfmacc_vf_f32m8(s0, q0[c], kv, vl);
            s1 = __riscv_vfmacc_vf_f32m8(s1, q1[c], kv, vl);
            s2 = __riscv_vfmacc_vf_f32m8(s2, q2[c], kv, vl);
        }
        __riscv_vse32_v_f32m8(sbuf[0], s0, vl);
        __riscv_vse32_v_f32m8(sbuf[1], s1, vl);
        __riscv_vse32_v_f32m8(sbuf[2], s2, vl);
        for (int r = 0; r < 3; ++r) {
            vfloat32m8_t s = __riscv_vfmul_vf_f32m8(__riscv_vle32_v_f32m8(sbuf[r], vl), scale, vl);
            const float block_max = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32m8_f32m1(s, lowest, vl));
            const float m_new = fmaxf(m[r], block_max);
            vfloat32m8_t e = vexp(__riscv_vfsub_vf_f32m8(s, m_new, vl), vl);
            const float block_sum = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m8_f32m1(e, zero, vl));
            __riscv_vse32_v_f32m8(sbuf[r], e, vl);
            const float alpha = __riscv_vfmv_f_s_f32m8_f32(vexp(__riscv_vfmv_v_f_f32m8(m[r] - m_new, 1), 1));
            l[r] = l[r] * alpha + block_sum;
            m[r] = m_new;
            __riscv_vse32_v_f32m8(acc[r], __riscv_vfmul_vf_f32m8(__riscv_vle32_v_f32m8(acc[r], vd), alpha, vd), vd);
        }
        vfloat32m8_t a0 = __riscv_vle32_v_f32m8(acc[0], vd), a1 = __riscv_vle32_v_f32m8(acc[1], vd);
        vfloat32m8_t a2 = __riscv_vle32_v_f32m8(acc[2], vd);
        const float *vj = v + (size_t)j0 * d;
        for (size_t j = 0; j < vl; ++j, vj += d) {
            vfloat32m8_t vv = __riscv_vle32_v_f32m8(vj, vd);
            a0 = __riscv_vfmacc_vf_f32m8(a0, sbuf[0][j], vv, vd);
            a1 = __riscv_vfmacc_vf_f32m8(a1, sbuf[1][j], vv, vd);
            a2 = __riscv_vfmacc_vf_f32m8(a2, sbuf[2][j], vv, vd);
        }
        __riscv_vse32_v_f32m8(acc[0], a0, vd);
        __riscv_vse32_v_f32m8(acc[1], a1, vd);
        __riscv_vse32_v_f32m8(acc[2], a2, vd);
        j0 += (int)vl;
    }
    for (int r = 0; r < 3; ++r) {
        __riscv_vse32_v_f32m8(o + (size_t)r * d, __riscv_vfmul_vf_f32m8(__riscv_vle32_v_f32m8(acc[r], vd), 1.0f / l[r], vd),
                              vd);
        lse[r] = m[r] + logf(l[r]);
    }
}

__attribute__((noinline)) void rvv_flash(int heads, int n, int d, int causal, float scale, const float *Q,
                                         const float *K, const float *V, float *O, float *L) {
    static float kt[MAX_D * MAX_N]; /* K^T of one head: kt[c * n + j] = K[j][c] */
    const size_t vd = __riscv_vsetvl_e32m8((size_t)d);
    for (int h = 0; h < heads; ++h) {
        const size_t base = (size_t)h * n * d;
        const float *q = Q + base, *k = K + base, *v = V + base;
        for (int j = 0; j < n; ++j)
            __riscv_vsse32_v_f32m8(kt + j, (ptrdiff_t)(n * sizeof(float)), __riscv_vle32_v_f32m8(k + (size_t)j * d, vd),
                                   vd);
        int i = 0;
        if (!causal) /* causal rows see different key counts: one row at a time */
            for (; i + 3 <= n; i += 3)
                flash_rows3(n, d, n, scale, q + (size_t)i * d, kt, v, O + base + (size_t)i * d, L + (size_t)h * n + i);
        for (; i < n; ++i)
            flash_row(n, d, causal ? i + 1 : n, scale, q + (size_t)i * d, kt, v, O + base + (size_t)i * d,
                      L + (size_t)h * n + i);
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
