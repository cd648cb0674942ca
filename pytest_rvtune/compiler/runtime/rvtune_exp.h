/* rvtune_exp.h: exp in fp32 without libm, the scalar rv_expf and the vector rv_exp_f32 (what fusion.py emits for
 * an fp32 tl.exp). Both give the same bits for every input. */
#ifndef RVTUNE_EXP_H
#define RVTUNE_EXP_H

#include <stdint.h>

#ifndef RV_INLINE
#define RV_INLINE static inline __attribute__((always_inline))
#endif

/* exp(x) in fp32 without libm, branch-free so that clang vectorises a loop of it (glibc's expf is a scalar
 * call: a quarter of flash attention's time). k = round(x / ln 2) by the 1.5 * 2^23 trick (the integer is
 * read from the float's bits: no float -> int conversion, which QEMU 7.2 mishandles when vectorised),
 * r = x - k ln 2 in two parts (Cody-Waite), exp(r) by cephes' degree-5 polynomial (max error ~1.5 ulp on
 * the reduced range), 2^k applied as two halves so that subnormal results come out right. */
RV_INLINE float rv_expf(float x) {
    /* unions, not memcpy: the bit casts must not leave memory operations that stop the vectoriser */
    union { float f; uint32_t u; } kf, s1, s2;
    const float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
    kf.f = xc * 1.44269504088896341f + 12582912.0f;
    const int32_t k = (int32_t)(kf.u - 0x4B400000u);
    const float kr = kf.f - 12582912.0f;
    const float r = (xc - kr * 0.693359375f) - kr * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = (p * r * r + r) + 1.0f;
    const int32_t k1 = k / 2, k2 = k - k1;
    s1.u = (uint32_t)(k1 + 127) << 23;
    s2.u = (uint32_t)(k2 + 127) << 23;
    const float y = e * s1.f * s2.f;
    return x != x ? x + x : y;
}

/* out[i] = rv_expf(in[i]) for n elements (out == in is fine).
 * RVV: the same operations as rv_expf, in the same order and with the same fused multiply-adds (so the same
 * bits), with every constant a scalar operand (.vf forms, or one vfmv.v.f just before its use). Left to clang,
 * the loop of rv_expf is vectorised at LMUL 2 with its constants hoisted into vector registers, which then
 * spill and reload inside the loop.
 *   Fast path, LMUL 8 (64 lanes at VLEN 256): when every lane of a chunk has |x| <= 86 (no NaN, no inf), k lies
 *   in [-125, 125] and e * 2^k is a normal float: 2^k is applied by adding k << 23 to e's bits (2 instructions,
 *   exactly e * s1 * s2), no clamp, no NaN test. Four register groups live at most (x / r, k, p, a constant):
 *   no spills.
 *   Any other chunk (overflow, subnormal results, inf, NaN: e.g. softmax's masked -inf lanes) goes to
 *   rv_exp_f32_any, the whole algorithm at LMUL 4. The test costs 4 instructions per 64 lanes. */
#if defined(__riscv_v)
#include <riscv_vector.h>

/* The full-range path: clamp, 2^k as two halves, NaN in -> NaN out. noinline: its registers stay out of the fast
 * loop's allocation. */
static __attribute__((noinline)) void rv_exp_f32_any(float *out, const float *in, int64_t n) {
    /* The coefficients as opaque f-register values: inlined into a big kernel, clang would otherwise
     * reload each one from the constant pool (auipc + flw) inside the loop. */
    float c0 = 1.9875691500e-4f, c1 = 1.3981999507e-3f, c2 = 8.3334519073e-3f, c3 = 4.1665795894e-2f,
          c4 = 1.6666665459e-1f, c5 = 5.0000001201e-1f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f,
          log2e = 1.44269504088896341f;
    __asm__("" : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3), "+f"(c4), "+f"(c5), "+f"(ln2_hi), "+f"(ln2_lo),
            "+f"(log2e));
    for (size_t vl; n > 0; n -= (int64_t)vl, in += vl, out += vl) {
        vl = __riscv_vsetvl_e32m4((size_t)n);
        const vfloat32m4_t x = __riscv_vle32_v_f32m4(in, vl);
        const vfloat32m4_t xc = __riscv_vfmin_vf_f32m4(__riscv_vfmax_vf_f32m4(x, -104.0f, vl), 89.0f, vl);
        const vfloat32m4_t kf = __riscv_vfmacc_vf_f32m4(__riscv_vfmv_v_f_f32m4(12582912.0f, vl), log2e, xc, vl);
        const vint32m4_t k = __riscv_vsub_vx_i32m4(__riscv_vreinterpret_v_f32m4_i32m4(kf), 0x4B400000, vl);
        const vfloat32m4_t kr = __riscv_vfsub_vf_f32m4(kf, 12582912.0f, vl);
        vfloat32m4_t r = __riscv_vfnmsac_vf_f32m4(xc, ln2_hi, kr, vl);
        r = __riscv_vfnmsac_vf_f32m4(r, ln2_lo, kr, vl);
        vfloat32m4_t p = __riscv_vfmv_v_f_f32m4(c0, vl);
        p = __riscv_vfmacc_vv_f32m4(__riscv_vfmv_v_f_f32m4(c1, vl), p, r, vl);
        p = __riscv_vfmacc_vv_f32m4(__riscv_vfmv_v_f_f32m4(c2, vl), p, r, vl);
        p = __riscv_vfmacc_vv_f32m4(__riscv_vfmv_v_f_f32m4(c3, vl), p, r, vl);
        p = __riscv_vfmacc_vv_f32m4(__riscv_vfmv_v_f_f32m4(c4, vl), p, r, vl);
        p = __riscv_vfmacc_vv_f32m4(__riscv_vfmv_v_f_f32m4(c5, vl), p, r, vl);
        /* e = (p * r * r + r) + 1 */
        const vfloat32m4_t e =
            __riscv_vfadd_vf_f32m4(__riscv_vfmadd_vv_f32m4(__riscv_vfmul_vv_f32m4(p, r, vl), r, r, vl), 1.0f, vl);
        /* 2^k as two halves, k1 = k / 2 rounded toward zero */
        const vint32m4_t k1 = __riscv_vsra_vx_i32m4(
            __riscv_vadd_vv_i32m4(k, __riscv_vreinterpret_v_u32m4_i32m4(__riscv_vsrl_vx_u32m4(
                                         __riscv_vreinterpret_v_i32m4_u32m4(k), 31, vl)), vl), 1, vl);
        const vint32m4_t k2 = __riscv_vsub_vv_i32m4(k, k1, vl);
        const vfloat32m4_t s1 = __riscv_vreinterpret_v_i32m4_f32m4(
            __riscv_vsll_vx_i32m4(__riscv_vadd_vx_i32m4(k1, 127, vl), 23, vl));
        const vfloat32m4_t s2 = __riscv_vreinterpret_v_i32m4_f32m4(
            __riscv_vsll_vx_i32m4(__riscv_vadd_vx_i32m4(k2, 127, vl), 23, vl));
        vfloat32m4_t y = __riscv_vfmul_vv_f32m4(__riscv_vfmul_vv_f32m4(e, s1, vl), s2, vl);
        y = __riscv_vfadd_vv_f32m4_mu(__riscv_vmfne_vv_f32m4_b8(x, x, vl), y, x, x, vl); /* NaN: x + x */
        __riscv_vse32_v_f32m4(out, y, vl);
    }
}

/* The fast path's constants as opaque f-register values, made once before a loop: inlined into a big kernel,
 * clang would otherwise rematerialise each one (auipc + flw) inside the loop. */
typedef struct {
    float c0, c1, c2, c3, c4, c5, ln2_hi, ln2_lo, log2e, magic, fast_max;
} rv_exp_consts;

RV_INLINE rv_exp_consts rv_exp_consts_opaque(void) {
    rv_exp_consts k = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f,
                       5.0000001201e-1f, 0.693359375f, -2.12194440e-4f, 1.44269504088896341f, 12582912.0f, 86.0f};
    __asm__("" : "+f"(k.c0), "+f"(k.c1), "+f"(k.c2), "+f"(k.c3), "+f"(k.c4), "+f"(k.c5), "+f"(k.ln2_hi),
            "+f"(k.ln2_lo), "+f"(k.log2e), "+f"(k.magic), "+f"(k.fast_max));
    return k;
}

/* exp of one vector of vl lanes in registers (a fused chain's loop, rvv_chain.py, calls it with the chain's value
 * and keeps going): the fast path below; a vector with any lane outside it goes through memory to
 * rv_exp_f32_any. */
RV_INLINE vfloat32m8_t rv_vexp_f32m8(vfloat32m8_t x, size_t vl, const rv_exp_consts *k) {
    /* |x| <= 86 in every lane (false for NaN): else the full-range path for this vector */
    const vbool4_t fast = __riscv_vmfle_vf_f32m8_b4(__riscv_vfabs_v_f32m8(x, vl), k->fast_max, vl);
    if (__builtin_expect(__riscv_vcpop_m_b4(fast, vl) != vl, 0)) {
        float any[256]; /* vl <= VLEN / 4 lanes at LMUL 8: VLEN up to 1024 */
        __riscv_vse32_v_f32m8(any, x, vl);
        rv_exp_f32_any(any, any, (int64_t)vl);
        return __riscv_vle32_v_f32m8(any, vl);
    }
    /* kf = 1.5 * 2^23 + k: its bits are 0x4B400000 + k, whose low 23 bits shifted up by 23 are k << 23 */
    const vfloat32m8_t kf = __riscv_vfmacc_vf_f32m8(__riscv_vfmv_v_f_f32m8(k->magic, vl), k->log2e, x, vl);
    const vfloat32m8_t kr = __riscv_vfsub_vf_f32m8(kf, k->magic, vl);
    vfloat32m8_t r = __riscv_vfnmsac_vf_f32m8(x, k->ln2_hi, kr, vl);
    r = __riscv_vfnmsac_vf_f32m8(r, k->ln2_lo, kr, vl);
    vfloat32m8_t p = __riscv_vfmacc_vf_f32m8(__riscv_vfmv_v_f_f32m8(k->c1, vl), k->c0, r, vl);
    p = __riscv_vfmacc_vv_f32m8(__riscv_vfmv_v_f_f32m8(k->c2, vl), p, r, vl);
    p = __riscv_vfmacc_vv_f32m8(__riscv_vfmv_v_f_f32m8(k->c3, vl), p, r, vl);
    p = __riscv_vfmacc_vv_f32m8(__riscv_vfmv_v_f_f32m8(k->c4, vl), p, r, vl);
    p = __riscv_vfmacc_vv_f32m8(__riscv_vfmv_v_f_f32m8(k->c5, vl), p, r, vl);
    /* e = (p * r * r + r) + 1, then e * 2^k by adding k to its exponent */
    const vfloat32m8_t e =
        __riscv_vfadd_vf_f32m8(__riscv_vfmadd_vv_f32m8(__riscv_vfmul_vv_f32m8(p, r, vl), r, r, vl), 1.0f, vl);
    const vuint32m8_t scale = __riscv_vsll_vx_u32m8(__riscv_vreinterpret_v_f32m8_u32m8(kf), 23, vl);
    const vuint32m8_t y = __riscv_vadd_vv_u32m8(__riscv_vreinterpret_v_f32m8_u32m8(e), scale, vl);
    return __riscv_vreinterpret_v_u32m8_f32m8(y);
}

RV_INLINE void rv_exp_f32(float *out, const float *in, int64_t n) {
    const rv_exp_consts k = rv_exp_consts_opaque();
    for (size_t vl; n > 0; n -= (int64_t)vl, in += vl, out += vl) {
        vl = __riscv_vsetvl_e32m8((size_t)n);
        __riscv_vse32_v_f32m8(out, rv_vexp_f32m8(__riscv_vle32_v_f32m8(in, vl), vl, &k), vl);
    }
}
#else
RV_INLINE void rv_exp_f32(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = rv_expf(in[i]);
}
#endif

#endif /* RVTUNE_EXP_H */
