/* rvtune_fp8.h: the 8-bit float types, stored as uint8_t bit patterns and computed in float (included by
 * rvtune_rt.h).
 *
 * One encoder and one decoder for every format, parameterised by exponent bits E, mantissa bits M, bias B
 * and how the format spends its top codes (kind):
 *   RV_F8_IEEE  f8E5M2      (tl.float8e5):   max exponent field = inf (mantissa 0) or NaN; max 57344
 *   RV_F8_FN    f8E4M3FN    (tl.float8e4nv): no inf, only S.1111.111 is NaN;               max 448
 *   RV_F8_FNUZ  f8E4M3FNUZ  (tl.float8e4b8), f8E5M2FNUZ (tl.float8e5b16): no inf, no -0, 0x80 is the NaN
 * Widening is exact. Narrowing rounds once from the double (or float) value, to nearest even or toward
 * zero, and saturates like Triton's GPU lowering (PTX cvt.rn.satfinite): a finite value beyond the largest
 * finite code, and an infinity, become that largest finite value with the sign; NaN stays NaN.
 * Everything is done on the bits: no float->int conversion (see rv_trunc_mag in rvtune_rt.h for why).
 */
#ifndef RVTUNE_FP8_H
#define RVTUNE_FP8_H

#include <stdint.h>

enum { RV_F8_IEEE = 0, RV_F8_FN = 1, RV_F8_FNUZ = 2 };

RV_INLINE float rv_f8_decode(uint8_t c, int E, int M, int B, int kind) {
    uint32_t s = (uint32_t)(c & 0x80u) << 24, ef = ((uint32_t)c >> M) & ((1u << E) - 1u), m = c & ((1u << M) - 1u);
    if (kind == RV_F8_FNUZ && c == 0x80u) return rv_bits_f32(0x7fc00000u);
    if (kind == RV_F8_IEEE && ef == (1u << E) - 1u) return rv_bits_f32(s | (m ? 0x7fc00000u : 0x7f800000u));
    if (kind == RV_F8_FN && (c & 0x7fu) == 0x7fu) return rv_bits_f32(s | 0x7fc00000u);
    if (ef != 0) return rv_bits_f32(s | ((ef + 127u - (uint32_t)B) << 23) | (m << (23 - M)));
    float sub = (float)m * rv_bits_f32((uint32_t)(127 + 1 - B - M) << 23); /* zero or subnormal: exact */
    return s ? -sub : sub;
}

RV_INLINE uint8_t rv_f8_encode(double x, int E, int M, int B, int kind, int rtz) {
    uint64_t b = rv_f64_bits(x), ax = b & 0x7fffffffffffffffull;
    uint32_t sign = (uint32_t)(b >> 56) & 0x80u;
    uint32_t maxcode = kind == RV_F8_IEEE ? ((((1u << E) - 2u) << M) | ((1u << M) - 1u))
                       : kind == RV_F8_FN ? 0x7eu : 0x7fu;
    if (ax > 0x7ff0000000000000ull) return (uint8_t)(kind == RV_F8_FNUZ ? 0x80u : (sign | 0x7fu)); /* NaN */
    if (ax == 0x7ff0000000000000ull) return (uint8_t)(sign | maxcode);                           /* saturate */
    int e = (int)(ax >> 52) - 1023, emin = 1 - B;
    uint64_t mant = (ax & 0xfffffffffffffull) | ((ax >> 52) ? 0x10000000000000ull : 0);
    int qe = (e > emin ? e : emin) - M; /* the result's unit in the last place is 2^qe */
    int sh = 52 + qe - e;               /* value / 2^qe = mant >> sh; sh >= 52 - M */
    uint64_t n = 0;
    if (sh < 64) {
        uint64_t rem = mant & ((1ull << sh) - 1ull), half = 1ull << (sh - 1);
        n = mant >> sh;
        if (!rtz && (rem > half || (rem == half && (n & 1u)))) n++;
    } /* else: below half the smallest subnormal, rounds to zero either way */
    int ex = qe + M; /* the binade of n * 2^qe when n has M+1 bits */
    if (n >> (M + 1)) { n >>= 1; ex++; } /* rounding carried into the next binade */
    uint32_t code;
    if (n < (1ull << M)) {
        code = (uint32_t)n; /* subnormal (ex == emin) or zero */
    } else {
        int ef = ex + B;
        code = ef > (1 << E) - 1 ? 0xffu : (((uint32_t)ef << M) | (uint32_t)(n - (1ull << M)));
    }
    if (code > maxcode) code = maxcode;
    if (kind == RV_F8_FNUZ && code == 0) return 0; /* no negative zero */
    return (uint8_t)(sign | code);
}

#define RV_F8_FORMAT(NAME, E, M, B, KIND)                                                                \
    RV_INLINE float rv_##NAME##_to_f32(uint8_t c) { return rv_f8_decode(c, E, M, B, KIND); }              \
    RV_INLINE uint8_t rv_f32_to_##NAME(double x) { return rv_f8_encode(x, E, M, B, KIND, 0); }           \
    RV_INLINE uint8_t rv_f32_to_##NAME##_rtz(double x) { return rv_f8_encode(x, E, M, B, KIND, 1); }
RV_F8_FORMAT(f8e5m2, 5, 2, 15, RV_F8_IEEE)
RV_F8_FORMAT(f8e4m3fn, 4, 3, 7, RV_F8_FN)
RV_F8_FORMAT(f8e4m3fnuz, 4, 3, 8, RV_F8_FNUZ)
RV_F8_FORMAT(f8e5m2fnuz, 5, 2, 16, RV_F8_FNUZ)
#undef RV_F8_FORMAT

/* OCP MX e2m1 (fp4, tl.dot_scaled's "e2m1"): the low nibble of a byte; 0, 0.5, 1, 1.5, 2, 3, 4, 6 and signs. */
RV_INLINE float rv_e2m1_to_f32(uint8_t nibble) {
    float mag = rv_f8_decode((uint8_t)(nibble & 0x7u), 2, 1, 1, RV_F8_FNUZ);
    return (nibble & 0x8u) ? -mag : mag;
}

/* OCP MX e8m0 scale (a biased power of two): 2^(s-127); 0xff is NaN. Byte 0 is 2^-127, a float subnormal. */
RV_INLINE float rv_e8m0_to_f32(uint8_t s) {
    if (s == 0xffu) return rv_bits_f32(0x7fc00000u);
    return s ? rv_bits_f32((uint32_t)s << 23) : rv_bits_f32(0x00400000u);
}

#endif
