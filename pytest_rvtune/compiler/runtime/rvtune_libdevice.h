/* rvtune_libdevice.h: what Triton's libdevice functions (tl.extra.libdevice, CUDA's __nv_* symbols) compute, for
   the ones without a libm function of the same meaning (compiler/libdevice.py maps every symbol). Included by
   rvtune_rt.h. Directed rounding (_rz, _rd, _ru) sets the floating-point rounding mode around one operation
   (FENV_ACCESS: clang keeps the operation between the mode switches and does not fold it). */
#ifndef RVTUNE_LIBDEVICE_H
#define RVTUNE_LIBDEVICE_H

#include <fenv.h>

/* glibc has these, but declares them only under _GNU_SOURCE, which the kernel C does not define */
double exp10(double);
float exp10f(float);

/* ---- one IEEE operation in a rounding mode (FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD) ----- */
#define RV_LD_ROUNDED(NAME, T, PARAMS, EXPR)                                                             \
    static inline __attribute__((noinline)) T NAME PARAMS {                                             \
        _Pragma("STDC FENV_ACCESS ON") _Pragma("STDC FP_CONTRACT OFF") int old_ = fegetround();          \
        fesetround(mode);                                                                                \
        T r_ = EXPR;                                                                                     \
        fesetround(old_);                                                                                \
        return r_;                                                                                       \
    }
RV_LD_ROUNDED(rv_ld_add_f32, float, (float a, float b, int mode), a + b)
RV_LD_ROUNDED(rv_ld_sub_f32, float, (float a, float b, int mode), a - b)
RV_LD_ROUNDED(rv_ld_mul_f32, float, (float a, float b, int mode), a * b)
RV_LD_ROUNDED(rv_ld_div_f32, float, (float a, float b, int mode), a / b)
RV_LD_ROUNDED(rv_ld_rcp_f32, float, (float a, int mode), 1.0f / a)
RV_LD_ROUNDED(rv_ld_sqrt_f32, float, (float a, int mode), sqrtf(a))
RV_LD_ROUNDED(rv_ld_fma_f32, float, (float a, float b, float c, int mode), fmaf(a, b, c))
RV_LD_ROUNDED(rv_ld_add_f64, double, (double a, double b, int mode), a + b)
RV_LD_ROUNDED(rv_ld_sub_f64, double, (double a, double b, int mode), a - b)
RV_LD_ROUNDED(rv_ld_mul_f64, double, (double a, double b, int mode), a * b)
RV_LD_ROUNDED(rv_ld_div_f64, double, (double a, double b, int mode), a / b)
RV_LD_ROUNDED(rv_ld_rcp_f64, double, (double a, int mode), 1.0 / a)
RV_LD_ROUNDED(rv_ld_sqrt_f64, double, (double a, int mode), sqrt(a))
RV_LD_ROUNDED(rv_ld_fma_f64, double, (double a, double b, double c, int mode), fma(a, b, c))
/* conversions rounded in a mode: double -> float, ints -> float / double */
RV_LD_ROUNDED(rv_ld_f64_to_f32, float, (double a, int mode), (float)a)
RV_LD_ROUNDED(rv_ld_i32_to_f32, float, (int32_t a, int mode), (float)a)
RV_LD_ROUNDED(rv_ld_u32_to_f32, float, (int32_t a, int mode), (float)(uint32_t)a)
RV_LD_ROUNDED(rv_ld_i64_to_f32, float, (int64_t a, int mode), (float)a)
RV_LD_ROUNDED(rv_ld_u64_to_f32, float, (int64_t a, int mode), (float)(uint64_t)a)
RV_LD_ROUNDED(rv_ld_i64_to_f64, double, (int64_t a, int mode), (double)a)
RV_LD_ROUNDED(rv_ld_u64_to_f64, double, (int64_t a, int mode), (double)(uint64_t)a)
#undef RV_LD_ROUNDED

/* round to nearest (the _rn forms): a separate statement, never contracted into a neighbouring fma */
#define RV_LD_RN(NAME, T, OP)                                                                            \
    static inline T NAME(T a, T b) {                                                                     \
        _Pragma("STDC FP_CONTRACT OFF") T r_ = a OP b;                                                   \
        return r_;                                                                                       \
    }
RV_LD_RN(rv_ld_add_rn_f32, float, +)
RV_LD_RN(rv_ld_sub_rn_f32, float, -)
RV_LD_RN(rv_ld_mul_rn_f32, float, *)
RV_LD_RN(rv_ld_add_rn_f64, double, +)
RV_LD_RN(rv_ld_sub_rn_f64, double, -)
RV_LD_RN(rv_ld_mul_rn_f64, double, *)
#undef RV_LD_RN

/* ---- float -> integer in a rounding mode: rounded to an integral value first, then saturated --------- */
static inline double rv_ld_round_mode(double x, int mode) {
    return mode == FE_TOWARDZERO ? rv_trunc(x) : mode == FE_DOWNWARD ? floor(x) : mode == FE_UPWARD ? ceil(x)
                                                                              : nearbyint(x);
}

/* ---- small functions ------------------------------------------------------------------------------- */
static inline float rv_ld_saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; } /* NaN: 0 */

static inline int32_t rv_ld_ilogb(double x) { /* CUDA's: 0 and NaN give INT_MIN, infinities INT_MAX */
    if (x != x || x == 0.0) return INT32_MIN;
    if (isinf(x)) return INT32_MAX;
    return (int32_t)ilogb(x);
}

/* sin(pi x), cos(pi x): reduced exactly (fmod) first, so large arguments and the integers are exact */
static inline double rv_ld_sinpi(double x) {
    if (isinf(x)) return x - x; /* NaN */
    double r = rv_fmod(x, 2.0); /* exact, in (-2, 2); rv_fmod: see rvtune_rt.h (QEMU 7.2) */
    if (r > 1.0) r -= 2.0;      /* exact (Sterbenz): r in [-1, 1] */
    else if (r < -1.0) r += 2.0;
    if (r > 0.5) r = 1.0 - r;   /* sin(pi r) = sin(pi (1 - r)), exact: r in [-1/2, 1/2] */
    else if (r < -0.5) r = -1.0 - r;
    if (r == 0.0) return copysign(0.0, x);
    return sin(M_PI * r);
}
static inline double rv_ld_cospi(double x) {
    if (isinf(x)) return x - x;
    double r = fabs(rv_fmod(x, 2.0)); /* exact, in [0, 2) */
    if (r > 1.0) r = 2.0 - r;      /* exact: cos(pi r) = cos(pi (2 - r)); r in [0, 1] */
    if (r == 0.5) return 0.0;
    if (r == 0.0) return 1.0;
    if (r == 1.0) return -1.0;
    return r < 0.5 ? sin(M_PI * (0.5 - r)) : -sin(M_PI * (r - 0.5)); /* 0.5 - r exact (Sterbenz) */
}

/* ---- error function inverses and relatives (double; the f32 forms round the double result) ----------- */
#define RV_LD_2_SQRTPI 1.1283791670955126 /* 2 / sqrt(pi) */

/* erfcx(x) = exp(x^2) erfc(x): directly for small |x|; for x >= 2 the continued fraction
   erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))) evaluated from the back */
static inline double rv_ld_erfcx(double x) {
    if (x != x) return x;
    if (x < 2.0) {
        if (x < -26.7) return INFINITY;
        if (x >= 0.0) return exp(x * x) * erfc(x);
        /* erfcx(-a) = 2 exp(a^2) - erfcx(a) */
        double a = -x;
        return 2.0 * exp(a * a) - (a < 2.0 ? exp(a * a) * erfc(a) : rv_ld_erfcx(a));
    }
    if (isinf(x)) return 0.0;
    double f = x;
    for (int k = 200; k >= 1; k--) f = x + (0.5 * k) / f;
    return 0.56418958354775628695 / f; /* 1 / sqrt(pi) */
}

/* erfcinv(y) for y in (0, 1/2] (the result x >= 0.47): Newton on log erfc(x) = log(erfcx(x)) - x^2, which keeps its
   relative accuracy down to the smallest y, from Giles' single-precision erfinv approximation ("Approximating
   the erfinv function", GPU Computing Gems, 2011) or, for tiny y, from sqrt(-log y) */
static inline double rv_ld_erfcinv_small(double y) {
    double w = -log(y * (2.0 - y)), p, x;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w; p = 1.50140941 + p * w;
        x = p * (1.0 - y);
    } else {
        x = sqrt(-log(y));
    }
    double log_y = log(y);
    for (int i = 0; i < 30; i++) {
        double e = rv_ld_erfcx(x);
        double step = (log(e) - x * x - log_y) * e * 0.88622692545275801; /* sqrt(pi) / 2 */
        x += step;
        if (x < 0.0) x = 0.0;
        if (fabs(step) <= 1e-16 * x) break;
    }
    return x;
}
static inline double rv_ld_erfinv(double x);
static inline double rv_ld_erfcinv(double y) {
    if (!(y >= 0.0 && y <= 2.0)) return NAN;
    if (y == 0.0) return INFINITY;
    if (y == 2.0) return -INFINITY;
    if (y >= 0.5 && y <= 1.5) return rv_ld_erfinv(1.0 - y); /* 1 - y exact (Sterbenz): no relative loss near 1 */
    return y < 0.5 ? rv_ld_erfcinv_small(y) : -rv_ld_erfcinv_small(2.0 - y);
}
static inline double rv_ld_erfinv(double x) {
    if (!(x >= -1.0 && x <= 1.0)) return NAN;
    if (x == 0.0) return x; /* keeps -0 */
    double ax = fabs(x), r;
    if (ax == 1.0) return copysign(INFINITY, x);
    if (ax > 0.5) {
        r = rv_ld_erfcinv_small(1.0 - ax); /* 1 - ax exact (Sterbenz) */
    } else { /* Newton on erf, accurate relative to x near 0, from the series' first terms */
        r = ax * (0.88622692545275801 + ax * ax * (0.23201366653465440 + ax * ax * 0.12755617530559795));
        for (int i = 0; i < 6; i++) r -= (erf(r) - ax) / (exp(-r * r) * RV_LD_2_SQRTPI);
    }
    return copysign(r, x);
}
static inline double rv_ld_normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752440); }
static inline double rv_ld_normcdfinv(double p) { return -1.4142135623730950488 * rv_ld_erfcinv(2.0 * p); }
/* modified Bessel functions of the first kind: the power series (positive terms) up to |x| < 30, then the
   asymptotic series of e^x / sqrt(2 pi x) */
static inline double rv_ld_bessel_i(double x, int order) {
    if (x != x) return x;
    double ax = fabs(x), result;
    if (ax < 30.0) {
        double q = 0.25 * ax * ax, term = order ? 0.5 * ax : 1.0, sum = term;
        for (int k = 1; k < 500 && term > sum * 1e-18; k++) {
            term *= q / ((double)k * (double)(k + order));
            sum += term;
        }
        result = sum;
    } else {
        double mu = 4.0 * order * order, term = 1.0, sum = 1.0;
        for (int k = 1; k < 30; k++) {
            double next = term * -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * ax);
            if (fabs(next) >= fabs(term)) break;
            term = next;
            sum += term;
        }
        result = ax > 709.0 ? INFINITY : exp(ax) / sqrt(2.0 * M_PI * ax) * sum;
    }
    return order && x < 0 ? -result : result;
}

/* ---- integer functions ------------------------------------------------------------------------------ */
static inline int32_t rv_ld_byte_perm(int32_t x, int32_t y, int32_t s) {
    uint64_t bytes = ((uint64_t)(uint32_t)y << 32) | (uint32_t)x;
    uint32_t out = 0;
    for (int n = 0; n < 4; n++) out |= (uint32_t)((bytes >> (8 * (((uint32_t)s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return (int32_t)out;
}
static inline int32_t rv_ld_sext24(int32_t x) { return (int32_t)((uint32_t)x << 8) >> 8; }

#endif /* RVTUNE_LIBDEVICE_H */
