/* rvv_exp.h: the yardsticks' vectorised exp at LMUL 8 (softmax, flash attention). */
#ifndef RVV_EXP_H
#define RVV_EXP_H
#include <riscv_vector.h>

/* exp(x) for x <= 0 (softmax's x - max), relative error ~2 ulp: x clamped at -87 (below it the answer is
 * < 2e-38 and becomes that, never the exact 0); n = round(x / ln2) by a float -> int conversion, r = x - n ln2
 * in two parts (Cody-Waite), exp(r) by its degree-6 Taylor polynomial on |r| <= ln2 / 2 (truncation < 2e-8),
 * scaled by 2^n by adding n to the exponent bits. Three LMUL-8 values live at a time (x/r, n, p): no spills. */
static inline vfloat32m8_t vexp(vfloat32m8_t x, size_t vl) {
    x = __riscv_vfmax_vf_f32m8(x, -87.0f, vl);
    vint32m8_t n = __riscv_vfcvt_x_f_v_i32m8(__riscv_vfmul_vf_f32m8(x, 1.44269504f, vl), vl);
    vfloat32m8_t nf = __riscv_vfcvt_f_x_v_f32m8(n, vl);
    x = __riscv_vfnmsac_vf_f32m8(x, 0.693359375f, nf, vl);     /* ln2's high part: exact n * hi */
    x = __riscv_vfnmsac_vf_f32m8(x, -2.12194440e-4f, nf, vl);  /* and the rest */
    vfloat32m8_t p = __riscv_vfmul_vf_f32m8(x, 1.0f / 720.0f, vl);
    p = __riscv_vfadd_vf_f32m8(p, 1.0f / 120.0f, vl);
    p = __riscv_vfmul_vv_f32m8(p, x, vl);
    p = __riscv_vfadd_vf_f32m8(p, 1.0f / 24.0f, vl);
    p = __riscv_vfmul_vv_f32m8(p, x, vl);
    p = __riscv_vfadd_vf_f32m8(p, 1.0f / 6.0f, vl);
    p = __riscv_vfmul_vv_f32m8(p, x, vl);
    p = __riscv_vfadd_vf_f32m8(p, 0.5f, vl);
    p = __riscv_vfmul_vv_f32m8(p, x, vl);
    p = __riscv_vfadd_vf_f32m8(p, 1.0f, vl);
    p = __riscv_vfmul_vv_f32m8(p, x, vl);
    p = __riscv_vfadd_vf_f32m8(p, 1.0f, vl);
    vint32m8_t bits = __riscv_vadd_vv_i32m8(__riscv_vreinterpret_v_f32m8_i32m8(p), __riscv_vsll_vx_i32m8(n, 23, vl), vl);
    return __riscv_vreinterpret_v_i32m8_f32m8(bits);
}

#endif
