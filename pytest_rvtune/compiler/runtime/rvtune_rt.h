/* rvtune_rt.h: the small runtime the generated kernel C includes.
 *
 * Plain C11, only stdint/stddef/math/string (and time.h for atomic_poll's clock), so a kernel compiles in a
 * fraction of a second.
 * Everything here gives a DEFINED result where MLIR says "poison" and C says "undefined behaviour":
 * generated code must never hit C UB (clang would exploit it), and tests compare against Triton's
 * interpreter, so the choices follow RISC-V hardware where MLIR leaves them open:
 *   x / 0 = -1 (all ones), x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0;
 *   shifts by >= width give 0 (shli, shrui) or the sign fill (shrsi);
 *   float -> int conversions saturate, NaN -> 0.
 * f16 and bf16 are stored as uint16_t bit patterns and computed in float: one f32 op on two rounded
 * 16-bit inputs then rounding back is exactly the correctly rounded 16-bit op (24 >= 2*11+2 bits).
 */
#ifndef RVTUNE_RT_H
#define RVTUNE_RT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h> /* clock_gettime: tt.atomic_poll's timeout (Linux user programs, host and qemu-riscv64) */

#define RV_INLINE static inline __attribute__((always_inline))

/* Put before a fused element-wise loop (compiler/fusion.py). assume_safety: the result tile never overlaps
 * a leaf except element for element, which clang cannot prove for arena offsets. On RVV the width is
 * pinned: 64 floats (LMUL 8) for short chains over at most 3 tiles (_WIDE), else 32 (LMUL 4). Left alone,
 * clang picks LMUL 2 and fully unrolls constant trip counts, keeping every unrolled address live in a
 * register or on the stack. _WIDE_ROLLED: a _WIDE loop of at least 2 vectors kept a loop (a 256-float tile
 * unrolled 4 times at LMUL 8, 4 register groups in all, spills every other group); shorter loops are left to
 * unroll (then the SLP vectoriser takes a 16- or 32-float row whole). */
#if defined(__riscv_v)
#define RV_VECTORIZE_FUSED _Pragma("clang loop vectorize(assume_safety) vectorize_width(32) interleave_count(1)")
#define RV_VECTORIZE_FUSED_WIDE                                                                          \
    _Pragma("clang loop vectorize(assume_safety) vectorize_width(64) interleave_count(1)")
#define RV_VECTORIZE_FUSED_WIDE_ROLLED                                                                   \
    _Pragma("clang loop vectorize(assume_safety) vectorize_width(64) interleave_count(1) unroll(disable)")
/* A row of n < 64 elements read from global memory by a fused chain (a deferred load): one vector of n lanes,
 * kept a loop. Left to unroll, its loads and the stores into the arena tile are not reordered by the SLP
 * vectoriser and run scalar. */
#define RV_PRAGMA_(text) _Pragma(#text)
#define RV_VECTORIZE_FUSED_ROW(n)                                                                        \
    RV_PRAGMA_(clang loop vectorize(assume_safety) vectorize_width(n) interleave_count(1) unroll(disable))
/* The loop over the rows of such a chain, two rows an iteration: unrolled whole, the scheduler hoists every row's
 * loads to the top and the LMUL 8 register groups spill; two rows of two reads each fill the 32 registers
 * (measured: layer_norm M=8,N=64 2.4 % fewer instructions than one row an iteration, softmax 0.7 % more). */
#define RV_ROWS_PAIRED _Pragma("clang loop unroll_count(2)")
#else
#define RV_ROWS_PAIRED
#define RV_VECTORIZE_FUSED_ROW(n) _Pragma("clang loop vectorize(assume_safety)")
#define RV_VECTORIZE_FUSED _Pragma("clang loop vectorize(assume_safety)")
#define RV_VECTORIZE_FUSED_WIDE _Pragma("clang loop vectorize(assume_safety)")
#define RV_VECTORIZE_FUSED_WIDE_ROLLED _Pragma("clang loop vectorize(assume_safety)")
#endif

/* Tiles live in one stack arena whose bytes are reused by liveness for values of different types. C's
 * effective-type rules would make that undefined (clang's type-based alias analysis really does move a
 * float store past an int load of the same bytes at -O3), so every arena access goes through one of these
 * may_alias types: rv_float *x = (rv_float *)(rv_arena + 64). Kernel arguments keep their plain types. */
#define RV_ARENA_TYPE(T)                                                                                 \
    typedef T rv_##T __attribute__((may_alias));                                                         \
    typedef T *rv_##T##_ptr __attribute__((may_alias));
RV_ARENA_TYPE(uint8_t)
RV_ARENA_TYPE(int8_t)
RV_ARENA_TYPE(int16_t)
RV_ARENA_TYPE(uint16_t)
RV_ARENA_TYPE(int32_t)
RV_ARENA_TYPE(int64_t)
RV_ARENA_TYPE(float)
RV_ARENA_TYPE(double)
#undef RV_ARENA_TYPE

/* ---- bit casts ---------------------------------------------------------------------------------- */
RV_INLINE uint32_t rv_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
RV_INLINE float rv_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
RV_INLINE uint64_t rv_f64_bits(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }
RV_INLINE double rv_bits_f64(uint64_t u) { double f; memcpy(&f, &u, 8); return f; }

/* ---- truncation without fcvt.rtz ---------------------------------------------------------------------
 * QEMU 7.2 (Debian's qemu-user) aborts on the vector float->int conversions with static round-toward-zero
 * (vfcvt.rtz.x.f.v: "decode_save_opc: Assertion `ctx->insn_start != NULL'", QEMU issue 1441), which clang
 * emits for every vectorised C cast float -> int and for truncf. So truncation is done on the bits. */

/* |x| rounded toward zero, for finite |x| < 2^63. */
RV_INLINE uint64_t rv_trunc_mag(double x) {
    uint64_t b = rv_f64_bits(x), m = (b & 0xfffffffffffffull) | 0x10000000000000ull;
    int e = (int)((b >> 52) & 0x7ffu) - 1075;
    if (e >= 0) return m << e;
    if (e <= -53) return 0;
    return m >> -e;
}

RV_INLINE float rv_truncf(float x) {
    uint32_t b = rv_f32_bits(x);
    int e = (int)((b >> 23) & 0xffu) - 127;
    if (e >= 23) return x; /* already integral, inf or NaN */
    if (e < 0) return rv_bits_f32(b & 0x80000000u);
    return rv_bits_f32(b & ~(0x7fffffu >> e));
}

RV_INLINE double rv_trunc(double x) {
    uint64_t b = rv_f64_bits(x);
    int e = (int)((b >> 52) & 0x7ffu) - 1023;
    if (e >= 52) return x;
    if (e < 0) return rv_bits_f64(b & 0x8000000000000000ull);
    return rv_bits_f64(b & ~(0xfffffffffffffull >> e));
}

/* fmod without the folding into truncation: for a power-of-two constant divisor clang rewrites fmodf(x, y)
 * as x - trunc(x / y) * y, vectorised with vfcvt.rtz (the QEMU 7.2 abort above). On rv64 the divisor is made
 * opaque to the optimiser, so it stays a libm call (exact, as the folding was); other targets keep the folding. */
RV_INLINE float rv_fmodf(float x, float y) {
#if defined(__riscv)
    __asm__("" : "+f"(y));
#endif
    return fmodf(x, y);
}

RV_INLINE double rv_fmod(double x, double y) {
#if defined(__riscv)
    __asm__("" : "+f"(y));
#endif
    return fmod(x, y);
}

/* ---- f16 / bf16 <-> f32 ------------------------------------------------------------------------- */
RV_INLINE float rv_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return rv_bits_f32(sign | 0x7f800000u | (m << 13)); /* inf / NaN */
    if (e != 0) return rv_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
    float sub = (float)m * 0x1p-24f; /* zero or subnormal: exact */
    return sign ? -sub : sub;
}

/* Round to nearest even (what arith.truncf does by default). */
RV_INLINE uint16_t rv_f32_to_f16(float f) {
    uint32_t x = rv_f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* quiet NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                        /* rounds to inf */
    if (ax < 0x38800000u) {                      /* below 2^-14: f16 subnormal or zero */
        /* |f| * 2^24 + 2^23 rounds (to nearest even) the count of 2^-24 steps into the low mantissa bits */
        return (uint16_t)(sign | (rv_f32_bits(rv_bits_f32(ax) * 0x1p24f + 0x1p23f) - 0x4b000000u));
    }
    ax += 0xc8000fffu + ((ax >> 13) & 1u);       /* rebias exponent 127 -> 15, round half to even */
    return (uint16_t)(sign | (ax >> 13));
}

/* Round toward zero (tt.fp_to_fp with rounding = rtz). */
RV_INLINE uint16_t rv_f32_to_f16_rtz(float f) {
    uint32_t x = rv_f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x47800000u) return (uint16_t)(sign | 0x7bffu); /* largest finite */
    if (ax < 0x38800000u) return (uint16_t)(sign | (uint32_t)rv_trunc_mag(rv_bits_f32(ax) * 0x1p24f));
    return (uint16_t)(sign | ((ax - 0x38000000u) >> 13));
}

RV_INLINE float rv_bf16_to_f32(uint16_t h) { return rv_bits_f32((uint32_t)h << 16); }

RV_INLINE uint16_t rv_f32_to_bf16(float f) {
    uint32_t x = rv_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

RV_INLINE uint16_t rv_f32_to_bf16_rtz(float f) {
    uint32_t x = rv_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)(x >> 16);
}

#include "rvtune_fp8.h" /* the 8-bit floats: uses RV_INLINE and the bit casts above */

/* ---- integer division, remainder and shifts: defined for every input ---------------------------- */
#define RV_INT_OPS(W, UW)                                                                                \
    RV_INLINE int##W##_t rv_divsi##W(int##W##_t a, int##W##_t b) {                                       \
        if (b == 0) return -1;                                                                           \
        if (b == -1) return (int##W##_t)(UW)(0u - (UW)(uint##W##_t)a);                                   \
        return (int##W##_t)(a / b);                                                                      \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_remsi##W(int##W##_t a, int##W##_t b) {                                       \
        if (b == 0) return a;                                                                            \
        if (b == -1) return 0;                                                                           \
        return (int##W##_t)(a % b);                                                                      \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_divui##W(int##W##_t a, int##W##_t b) {                                       \
        if (b == 0) return -1;                                                                           \
        return (int##W##_t)((uint##W##_t)a / (uint##W##_t)b);                                            \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_remui##W(int##W##_t a, int##W##_t b) {                                       \
        if (b == 0) return a;                                                                            \
        return (int##W##_t)((uint##W##_t)a % (uint##W##_t)b);                                           \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_floordivsi##W(int##W##_t a, int##W##_t b) {                                  \
        int##W##_t q = rv_divsi##W(a, b);                                                                \
        if (b != 0 && b != -1 && (a % b) != 0 && ((a < 0) != (b < 0))) q = (int##W##_t)(q - 1);          \
        return q;                                                                                        \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_ceildivsi##W(int##W##_t a, int##W##_t b) {                                   \
        int##W##_t q = rv_divsi##W(a, b);                                                                \
        if (b != 0 && b != -1 && (a % b) != 0 && ((a < 0) == (b < 0))) q = (int##W##_t)(q + 1);          \
        return q;                                                                                        \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_ceildivui##W(int##W##_t a, int##W##_t b) {                                   \
        if (b == 0) return -1;                                                                           \
        uint##W##_t ua = (uint##W##_t)a, ub = (uint##W##_t)b;                                            \
        return (int##W##_t)(uint##W##_t)(ua / ub + (ua % ub != 0));                                      \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_shli##W(int##W##_t a, int##W##_t b) {                                        \
        return (uint##W##_t)b >= W ? 0 : (int##W##_t)(uint##W##_t)((UW)(uint##W##_t)a << b);            \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_shrui##W(int##W##_t a, int##W##_t b) {                                       \
        return (uint##W##_t)b >= W ? 0 : (int##W##_t)((uint##W##_t)a >> b);                              \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_shrsi##W(int##W##_t a, int##W##_t b) {                                       \
        return (uint##W##_t)b >= W ? (int##W##_t)(a < 0 ? -1 : 0) : (int##W##_t)(a >> b);               \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_absi##W(int##W##_t a) {                                                      \
        return (int##W##_t)(uint##W##_t)(a < 0 ? (UW)0u - (UW)(uint##W##_t)a : (UW)(uint##W##_t)a);     \
    }

RV_INT_OPS(8, uint32_t)
RV_INT_OPS(16, uint32_t)
RV_INT_OPS(32, uint32_t)
RV_INT_OPS(64, uint64_t)
#undef RV_INT_OPS

RV_INLINE int32_t rv_mulhiui32(int32_t a, int32_t b) {
    return (int32_t)(uint32_t)(((uint64_t)(uint32_t)a * (uint32_t)b) >> 32);
}
RV_INLINE int64_t rv_mulhiui64(int64_t a, int64_t b) {
    return (int64_t)(uint64_t)(((unsigned __int128)(uint64_t)a * (uint64_t)b) >> 64);
}

/* ---- float -> int: saturating, NaN -> 0 (C leaves out-of-range conversions undefined) ------------ */
#define RV_FPTOSI(W, LO, HI)                                                                             \
    RV_INLINE int##W##_t rv_fptosi##W(double x) {                                                        \
        if (x != x) return 0;                                                                            \
        if (x >= HI) return INT##W##_MAX;                                                                \
        if (x <= LO) return INT##W##_MIN;                                                                \
        uint64_t mag = rv_trunc_mag(x);                                                                  \
        return (int##W##_t)(x < 0 ? 0u - mag : mag);                                                     \
    }                                                                                                    \
    RV_INLINE int##W##_t rv_fptoui##W(double x) {                                                        \
        if (x != x || x <= -1.0) return 0;                                                               \
        if (x >= 2.0 * (HI)) return (int##W##_t)UINT##W##_MAX;                                           \
        return (int##W##_t)(uint##W##_t)(x < 0 ? 0u : rv_trunc_mag(x));                                 \
    }
RV_FPTOSI(8, -129.0, 128.0)
RV_FPTOSI(16, -32769.0, 32768.0)
RV_FPTOSI(32, -2147483649.0, 2147483648.0)
RV_FPTOSI(64, -9223372036854775808.0 * 1.0000000000000002, 9223372036854775808.0)
#undef RV_FPTOSI

/* ---- float min / max flavours ---------------------------------------------------------------------- */
/* maximumf / minimumf: NaN propagates, -0.0 < +0.0 (IEEE 754-2019 maximum / minimum). */
RV_INLINE float rv_maximumf(float a, float b) {
    if (a != a || b != b) return a + b;
    if (a == b) return signbit(a) ? b : a;
    return a > b ? a : b;
}
RV_INLINE float rv_minimumf(float a, float b) {
    if (a != a || b != b) return a + b;
    if (a == b) return signbit(a) ? a : b;
    return a < b ? a : b;
}
RV_INLINE double rv_maximum(double a, double b) {
    if (a != a || b != b) return a + b;
    if (a == b) return signbit(a) ? b : a;
    return a > b ? a : b;
}
RV_INLINE double rv_minimum(double a, double b) {
    if (a != a || b != b) return a + b;
    if (a == b) return signbit(a) ? a : b;
    return a < b ? a : b;
}

/* ---- row reductions: tt.reduce over a contiguous last axis with a one-op combiner -----------------------
 * rv_reduce_<combiner>_<type>(x, n) combines x[0..n), n >= 1; compiler/lower_struct.py emits one call per
 * row. Triton leaves the combining order of tl.sum / tl.max free (GPUs reduce in butterflies), so:
 *  - RVV: the row is folded into one LMUL-8 register group lane by lane (lane l combines x[l], x[l + 64],
 *    ... at VLEN 256), then ONE vfredusum / vfredmax / vredsum ... combines the lanes. vfredusum is the
 *    unordered sum (the hardware picks the tree; QEMU adds in order), so a row's sum may differ from a
 *    sequential sum in the last bits, as it does on a GPU. vfredosum (ordered) is not used: it is slow on
 *    real hardware and the order it pins is not Triton's either. Sums start from -0.0 (the identity of
 *    +: a row of -0.0 sums to -0.0); idempotent combiners start from x[0].
 *  - elsewhere: the same fold over 16 lanes in plain C (clang vectorises it), then a halving tree.
 * maxnum / minnum are arith.maxnumf / minnumf (what tl.max / tl.min emit: a NaN loses unless all are NaN,
 * exactly vfmax / vfmin); maximum / minimum are arith.maximumf / minimumf (a NaN wins). Both order
 * -0.0 < +0.0, as RISC-V does. Integer sums wrap. */
RV_INLINE float rv_comb_sum_f32(float a, float b) { return a + b; }
RV_INLINE float rv_comb_maxnum_f32(float a, float b) { return fmaxf(a, b); }
RV_INLINE float rv_comb_minnum_f32(float a, float b) { return fminf(a, b); }
RV_INLINE float rv_comb_maximum_f32(float a, float b) { return rv_maximumf(a, b); }
RV_INLINE float rv_comb_minimum_f32(float a, float b) { return rv_minimumf(a, b); }
RV_INLINE int32_t rv_comb_sum_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
RV_INLINE int32_t rv_comb_and_i32(int32_t a, int32_t b) { return a & b; }
RV_INLINE int32_t rv_comb_or_i32(int32_t a, int32_t b) { return a | b; }
RV_INLINE int32_t rv_comb_xor_i32(int32_t a, int32_t b) { return a ^ b; }
RV_INLINE int32_t rv_comb_maxsi_i32(int32_t a, int32_t b) { return a > b ? a : b; }
RV_INLINE int32_t rv_comb_minsi_i32(int32_t a, int32_t b) { return a < b ? a : b; }
RV_INLINE int32_t rv_comb_maxui_i32(int32_t a, int32_t b) { return (uint32_t)a > (uint32_t)b ? a : b; }
RV_INLINE int32_t rv_comb_minui_i32(int32_t a, int32_t b) { return (uint32_t)a < (uint32_t)b ? a : b; }

#if defined(__riscv_v)
#include <riscv_vector.h>
/* Lane-wise fold of x[0..n) into one m8 group (returned), vl0 = the lanes in use. The _tu fold leaves the
 * lanes past a short last chunk as they were. */
#define RV_FOLD_M8(VT, SFX, FOLD)                                                                        \
    size_t vl0 = __riscv_vsetvl_e32m8((size_t)n);                                                       \
    VT acc = __riscv_vle32_v_##SFX##m8(x, vl0);                                                         \
    for (int64_t i = (int64_t)vl0; i < n;) {                                                            \
        const size_t vl = __riscv_vsetvl_e32m8((size_t)(n - i));                                        \
        acc = FOLD(acc, acc, __riscv_vle32_v_##SFX##m8(x + i, vl), vl);                                 \
        i += (int64_t)vl;                                                                               \
    }

#define RV_REDUCE_F32(NAME, FOLD, RED, START)                                                            \
    RV_INLINE float rv_reduce_##NAME##_f32(const float *x, int64_t n) {                                 \
        RV_FOLD_M8(vfloat32m8_t, f32, FOLD)                                                             \
        return __riscv_vfmv_f_s_f32m1_f32(RED(acc, __riscv_vfmv_s_f_f32m1(START, 1), vl0));             \
    }
RV_REDUCE_F32(sum, __riscv_vfadd_vv_f32m8_tu, __riscv_vfredusum_vs_f32m8_f32m1, -0.0f)
RV_REDUCE_F32(maxnum, __riscv_vfmax_vv_f32m8_tu, __riscv_vfredmax_vs_f32m8_f32m1, x[0])
RV_REDUCE_F32(minnum, __riscv_vfmin_vv_f32m8_tu, __riscv_vfredmin_vs_f32m8_f32m1, x[0])
#undef RV_REDUCE_F32

/* maximum / minimum: maxnum / minnum, unless the row holds a NaN (then that NaN). */
RV_INLINE float rv_first_nan_f32(const float *x, int64_t n) {
    for (int64_t i = 0; i < n;) {
        const size_t vl = __riscv_vsetvl_e32m8((size_t)(n - i));
        const vfloat32m8_t v = __riscv_vle32_v_f32m8(x + i, vl);
        const long k = __riscv_vfirst_m_b4(__riscv_vmfne_vv_f32m8_b4(v, v, vl), vl);
        if (k >= 0) return x[i + k];
        i += (int64_t)vl;
    }
    return 0.0f; /* no NaN */
}
RV_INLINE float rv_reduce_maximum_f32(const float *x, int64_t n) {
    const float r = rv_reduce_maxnum_f32(x, n), nan = rv_first_nan_f32(x, n);
    return nan != nan ? nan : r;
}
RV_INLINE float rv_reduce_minimum_f32(const float *x, int64_t n) {
    const float r = rv_reduce_minnum_f32(x, n), nan = rv_first_nan_f32(x, n);
    return nan != nan ? nan : r;
}

#define RV_REDUCE_I32(NAME, FOLD, RED, START)                                                            \
    RV_INLINE int32_t rv_reduce_##NAME##_i32(const int32_t *x, int64_t n) {                             \
        RV_FOLD_M8(vint32m8_t, i32, FOLD)                                                               \
        return __riscv_vmv_x_s_i32m1_i32(RED(acc, __riscv_vmv_s_x_i32m1(START, 1), vl0));               \
    }
RV_REDUCE_I32(sum, __riscv_vadd_vv_i32m8_tu, __riscv_vredsum_vs_i32m8_i32m1, 0)
RV_REDUCE_I32(and, __riscv_vand_vv_i32m8_tu, __riscv_vredand_vs_i32m8_i32m1, x[0])
RV_REDUCE_I32(or, __riscv_vor_vv_i32m8_tu, __riscv_vredor_vs_i32m8_i32m1, 0)
RV_REDUCE_I32(xor, __riscv_vxor_vv_i32m8_tu, __riscv_vredxor_vs_i32m8_i32m1, 0)
RV_REDUCE_I32(maxsi, __riscv_vmax_vv_i32m8_tu, __riscv_vredmax_vs_i32m8_i32m1, x[0])
RV_REDUCE_I32(minsi, __riscv_vmin_vv_i32m8_tu, __riscv_vredmin_vs_i32m8_i32m1, x[0])
#undef RV_REDUCE_I32

#define RV_REDUCE_U32(NAME, FOLD, RED)                                                                   \
    RV_INLINE int32_t rv_reduce_##NAME##_i32(const int32_t *xs, int64_t n) {                            \
        const uint32_t *x = (const uint32_t *)xs;                                                       \
        RV_FOLD_M8(vuint32m8_t, u32, FOLD)                                                              \
        return (int32_t)__riscv_vmv_x_s_u32m1_u32(RED(acc, __riscv_vmv_s_x_u32m1(x[0], 1), vl0));       \
    }
RV_REDUCE_U32(maxui, __riscv_vmaxu_vv_u32m8_tu, __riscv_vredmaxu_vs_u32m8_u32m1)
RV_REDUCE_U32(minui, __riscv_vminu_vv_u32m8_tu, __riscv_vredminu_vs_u32m8_u32m1)
#undef RV_REDUCE_U32
#undef RV_FOLD_M8

#else
#define RV_LANES 16
#define RV_REDUCE_PORTABLE(NAME, T)                                                                      \
    RV_INLINE T rv_reduce_##NAME(const T *x, int64_t n) {                                               \
        T lane[RV_LANES];                                                                               \
        const int64_t used = n < RV_LANES ? n : RV_LANES;                                               \
        int64_t i = 0;                                                                                  \
        for (; i < used; ++i) lane[i] = x[i];                                                           \
        for (; i + RV_LANES <= n; i += RV_LANES)                                                        \
            for (int l = 0; l < RV_LANES; ++l) lane[l] = rv_comb_##NAME(lane[l], x[i + l]);             \
        for (int l = 0; i < n; ++i, ++l) lane[l] = rv_comb_##NAME(lane[l], x[i]);                       \
        for (int w = RV_LANES / 2; w >= 1; w /= 2) /* lane k joins lane k - w, w the top power of 2 <= k */ \
            for (int l = 0; l < w; ++l)                                                                 \
                if (l + w < used) lane[l] = rv_comb_##NAME(lane[l], lane[l + w]);                       \
        return lane[0];                                                                                 \
    }
RV_REDUCE_PORTABLE(sum_f32, float)
RV_REDUCE_PORTABLE(maxnum_f32, float)
RV_REDUCE_PORTABLE(minnum_f32, float)
RV_REDUCE_PORTABLE(maximum_f32, float)
RV_REDUCE_PORTABLE(minimum_f32, float)
RV_REDUCE_PORTABLE(sum_i32, int32_t)
RV_REDUCE_PORTABLE(and_i32, int32_t)
RV_REDUCE_PORTABLE(or_i32, int32_t)
RV_REDUCE_PORTABLE(xor_i32, int32_t)
RV_REDUCE_PORTABLE(maxsi_i32, int32_t)
RV_REDUCE_PORTABLE(minsi_i32, int32_t)
RV_REDUCE_PORTABLE(maxui_i32, int32_t)
RV_REDUCE_PORTABLE(minui_i32, int32_t)
#undef RV_REDUCE_PORTABLE
#undef RV_LANES
#endif

/* tt.clampf: propagate_nan=none returns the bound for NaN (like fmax/fmin), =all returns NaN. */
RV_INLINE float rv_clampf(float x, float lo, float hi, int propagate_nan) {
    if (propagate_nan && x != x) return x;
    return fminf(fmaxf(x, lo), hi);
}

/* ---- atomics (tt.atomic_rmw fadd, tt.atomic_cas on floats): compare-and-swap loops on the bits ------- */
#define RV_ATOMIC_FLOAT(NAME, T, U, TO_F, FROM_F)                                                        \
    RV_INLINE T rv_atomic_fadd_##NAME(T *p, T v) {                                                      \
        U *q = (U *)p, old = __atomic_load_n(q, __ATOMIC_RELAXED), nw;                                   \
        do {                                                                                             \
            T cur;                                                                                       \
            memcpy(&cur, &old, sizeof cur);                                                              \
            T sum = FROM_F(TO_F(cur) + TO_F(v));                                                         \
            memcpy(&nw, &sum, sizeof nw);                                                                \
        } while (!__atomic_compare_exchange_n(q, &old, nw, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));      \
        T out;                                                                                           \
        memcpy(&out, &old, sizeof out);                                                                  \
        return out;                                                                                      \
    }                                                                                                    \
    RV_INLINE T rv_atomic_xchg_##NAME(T *p, T v) {                                                      \
        U nw, old;                                                                                       \
        memcpy(&nw, &v, sizeof nw);                                                                      \
        old = __atomic_exchange_n((U *)p, nw, __ATOMIC_ACQ_REL);                                         \
        T out;                                                                                           \
        memcpy(&out, &old, sizeof out);                                                                  \
        return out;                                                                                      \
    }                                                                                                    \
    RV_INLINE T rv_atomic_cas_##NAME(T *p, T cmp, T v) {                                                \
        U expected, nw;                                                                                  \
        memcpy(&expected, &cmp, sizeof expected);                                                        \
        memcpy(&nw, &v, sizeof nw);                                                                      \
        __atomic_compare_exchange_n((U *)p, &expected, nw, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);       \
        T out;                                                                                           \
        memcpy(&out, &expected, sizeof out);                                                             \
        return out;                                                                                      \
    }
#define RV_ID(x) (x)
RV_ATOMIC_FLOAT(f32, float, uint32_t, RV_ID, RV_ID)
RV_ATOMIC_FLOAT(f64, double, uint64_t, RV_ID, RV_ID)
RV_ATOMIC_FLOAT(f16, uint16_t, uint16_t, rv_f16_to_f32, rv_f32_to_f16)
RV_ATOMIC_FLOAT(bf16, uint16_t, uint16_t, rv_bf16_to_f32, rv_f32_to_bf16)
#undef RV_ATOMIC_FLOAT

RV_INLINE int32_t rv_atomic_cas_i32(int32_t *p, int32_t cmp, int32_t v) {
    __atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return cmp; /* the old value, whether or not the swap happened */
}
RV_INLINE int64_t rv_atomic_cas_i64(int64_t *p, int64_t cmp, int64_t v) {
    __atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return cmp;
}

/* ---- tt.atomic_poll: spin until *p == expected ------------------------------------------------------------
 * A timeout is one budget for the whole op (Triton: "shared polling time budget"), so the deadline is taken once
 * before the op's elements; every element is loaded at least once, even past it. No timeout polls for ever, as a
 * GPU would: the program asked to wait. */
RV_INLINE int64_t rv_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
RV_INLINE int64_t rv_poll_deadline(uint64_t timeout_ns) {
    int64_t now = rv_now_ns();
    return timeout_ns > (uint64_t)(INT64_MAX - now) ? INT64_MAX : now + (int64_t)timeout_ns;
}
#define RV_ATOMIC_POLL(NAME, T)                                                                          \
    RV_INLINE _Bool rv_atomic_poll_##NAME(T *p, T expected, int acquire, int timed, int64_t deadline_ns) { \
        for (;;) {                                                                                       \
            T v = acquire ? __atomic_load_n(p, __ATOMIC_ACQUIRE) : __atomic_load_n(p, __ATOMIC_RELAXED); \
            if (v == expected) return 1;                                                                 \
            if (timed && rv_now_ns() >= deadline_ns) return 0;                                           \
        }                                                                                                \
    }
RV_ATOMIC_POLL(i16, int16_t)
RV_ATOMIC_POLL(i32, int32_t)
RV_ATOMIC_POLL(i64, int64_t)
#undef RV_ATOMIC_POLL

#include "rvtune_libdevice.h" /* Triton's libdevice functions without a libm twin (compiler/libdevice.py) */

#endif /* RVTUNE_RT_H */
