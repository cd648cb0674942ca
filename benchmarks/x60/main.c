/* The harness of benchmarks/x60_fidelity.py's micro-kernels: `x60_micro VARIANT SIZE REPS` prepares the data as
 * rvv-bench's benchmark of that variant does, calls <VARIANT>_wrap REPS times (each call one launch window of the
 * icount plugin: calls are direct, the plugin does not see calls through pointers), checks the result and exits 0;
 * a wrong result or an unknown variant exits 1 with a message on stderr. The C kernels (mandelbrot, the scalar
 * byte loops) are here; the assembly ones in kernels.S. */
#include <riscv_vector.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keeps the compiler from merging or vectorising a scalar loop's iterations (rvv-bench's scalar variants are
 * compiled the same way: one element per trip, a compiler barrier in the body). */
#define BARRIER() __asm__ volatile("" ::: "memory")
#define KEEP(x) __asm__ volatile("" : "+f"(x))

#define MANDEL_ITER 100

/* ---------------------------------------------------------------------------------------- assembly kernels */
#define COPY_DECL(name) void name##_wrap(uint8_t *dst, const uint8_t *src, size_t n);
#define FILL_DECL(name) void name##_wrap(uint8_t *dst, int c, size_t n);
#define LMULS(X, prefix) X(prefix##1) X(prefix##2) X(prefix##4) X(prefix##8)
LMULS(COPY_DECL, copy_vlmax_m)
LMULS(COPY_DECL, copy_vl16_m)
LMULS(FILL_DECL, fill_vlmax_m)
#define STRIDED_DECL(name) void name##_wrap(const float *base, long stride, long trips);
#define TRIPS_DECL(name) void name##_wrap(long trips, float a);
LMULS(STRIDED_DECL, strided_e32m)
LMULS(TRIPS_DECL, redsum_e32m)
LMULS(TRIPS_DECL, fmacc_e32m)
void peak_e32m8_wrap(long trips, float a, float b, float c);

/* ------------------------------------------------------------------------------------ scalar byte loops */
__attribute__((noinline)) void copy_scalar_wrap(uint8_t *dst, const uint8_t *src, size_t n) {
    while (n--) {
        *dst++ = *src++;
        BARRIER();
    }
}

__attribute__((noinline)) void fill_scalar_wrap(uint8_t *dst, int c, size_t n) {
    while (n--) {
        *dst++ = (uint8_t)c;
        BARRIER();
    }
}

__attribute__((noinline)) size_t strlen_scalar_wrap(const char *s) {
    const char *start = s;
    while (*s) {
        ++s;
        BARRIER();
    }
    return (size_t)(s - start);
}

/* ------------------------------------------------------------------------------------------- mandelbrot */
/* Escape counts (at most max_iter) of width x width points c = (x * 2/width - 1.5, y * 2/width - 1). */
#define MANDEL_SCALAR(NAME, FT)                                                                              \
    __attribute__((noinline)) void NAME(size_t width, size_t max_iter, uint32_t *res) {                      \
        for (size_t y = 0; y < width; ++y)                                                                   \
            for (size_t x = 0; x < width; ++x) {                                                             \
                FT cx = (FT)x * 2 / (FT)width - (FT)1.5, cy = (FT)y * 2 / (FT)width - 1;                     \
                FT zx = 0, zy = 0, zx2 = 0, zy2 = 0;                                                         \
                size_t iter = 0;                                                                             \
                KEEP(cy);                                                                                    \
                for (; zx2 + zy2 <= 4 && iter < max_iter; ++iter) {                                          \
                    FT re = zx2 - zy2 + cx;                                                                  \
                    zy = 2 * zx * zy + cy;                                                                   \
                    zx = re;                                                                                 \
                    KEEP(zx);                                                                                \
                    zx2 = zx * zx;                                                                           \
                    zy2 = zy * zy;                                                                           \
                }                                                                                            \
                *res++ = (uint32_t)iter;                                                                     \
            }                                                                                                \
    }
MANDEL_SCALAR(mandel_scalar_f32_wrap, float)
MANDEL_SCALAR(mandel_scalar_f64_wrap, double)
MANDEL_SCALAR(mandel_reference, double) /* the check's, outside the launch windows */

/* The same points, VL at a time: SEW-bit floats at LMUL LM, the counts as u32 at LMUL ILM, masks MB; a lane
 * keeps iterating (masked out of the count) until every lane has escaped or max_iter is reached. */
#define MANDEL_RVV(NAME, FT, SEW, LM, ILM, MB, TO_FLOAT)                                                     \
    __attribute__((noinline)) void NAME##_wrap(size_t width, size_t max_iter, uint32_t *res) {               \
        FT scale = (FT)2 / (FT)width;                                                                        \
        for (size_t y = 0; y < width; ++y, res += width) {                                                   \
            FT cy_s = (FT)y * scale - 1;                                                                     \
            for (size_t x = 0, vl; x < width; x += vl) {                                                     \
                vl = __riscv_vsetvl_e##SEW##LM(width - x);                                                   \
                vuint32##ILM##_t index = __riscv_vadd_vx_u32##ILM(__riscv_vid_v_u32##ILM(vl), (uint32_t)x, vl); \
                vfloat##SEW##LM##_t cx = __riscv_vfadd_vf_f##SEW##LM(                                        \
                    __riscv_vfmul_vf_f##SEW##LM(TO_FLOAT(index, vl), scale, vl), (FT)-1.5, vl);              \
                vfloat##SEW##LM##_t cy = __riscv_vfmv_v_f_f##SEW##LM(cy_s, vl);                              \
                vfloat##SEW##LM##_t zx = __riscv_vfmv_v_f_f##SEW##LM(0, vl), zy = zx, zx2 = zx, zy2 = zx;     \
                vuint32##ILM##_t iters = __riscv_vmv_v_x_u32##ILM(0, vl);                                    \
                vbool##MB##_t live = __riscv_vmset_m_b##MB(vl);                                              \
                for (uint32_t iter = 1; iter <= max_iter && __riscv_vfirst_m_b##MB(live, vl) >= 0; ++iter) { \
                    live = __riscv_vmflt_vf_f##SEW##LM##_b##MB(__riscv_vfadd_vv_f##SEW##LM(zx2, zy2, vl), 4, vl); \
                    vfloat##SEW##LM##_t re = __riscv_vfadd_vv_f##SEW##LM(__riscv_vfsub_vv_f##SEW##LM(zx2, zy2, vl), cx, vl); \
                    zy = __riscv_vfmacc_vv_f##SEW##LM(cy, __riscv_vfadd_vv_f##SEW##LM(zx, zx, vl), zy, vl);  \
                    zx = re;                                                                                 \
                    zx2 = __riscv_vfmul_vv_f##SEW##LM(zx, zx, vl);                                           \
                    zy2 = __riscv_vfmul_vv_f##SEW##LM(zy, zy, vl);                                           \
                    iters = __riscv_vmerge_vxm_u32##ILM(iters, iter, live, vl);                              \
                }                                                                                            \
                __riscv_vse32_v_u32##ILM(res + x, iters, vl);                                                \
            }                                                                                                \
        }                                                                                                    \
    }
#define F32_M1(v, vl) __riscv_vfcvt_f_xu_v_f32m1(v, vl)
#define F32_M2(v, vl) __riscv_vfcvt_f_xu_v_f32m2(v, vl)
#define F64_M2(v, vl) __riscv_vfwcvt_f_xu_v_f64m2(v, vl)
MANDEL_RVV(mandel_rvv_f32_m1, float, 32, m1, m1, 32, F32_M1)
MANDEL_RVV(mandel_rvv_f32_m2, float, 32, m2, m2, 16, F32_M2)
MANDEL_RVV(mandel_rvv_f64_m2, double, 64, m2, m1, 32, F64_M2)

/* ------------------------------------------------------------------------------------------------ driver */
#define MAX_MEM (32u << 20) /* rvv-bench's buffer: copies read from its second half */

static uint8_t *mem;
static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint8_t random_byte(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

static int fail(const char *variant, const char *what) {
    fprintf(stderr, "x60_micro %s: %s\n", variant, what);
    return 1;
}

/* rvv-bench "memcpy aligned": dst at the buffer's start (cleared before each call), src 9 bytes past its middle. */
#define RUN_COPY(name)                                                                                       \
    if (strcmp(variant, #name) == 0) {                                                                       \
        uint8_t *dst = mem, *src = mem + MAX_MEM / 2 + 9;                                                    \
        for (size_t i = 0; i < n; i++) src[i] = random_byte();                                               \
        for (int r = 0; r < reps; r++) {                                                                     \
            memset(dst, 0, n + 9);                                                                           \
            name##_wrap(dst, src, n);                                                                        \
        }                                                                                                    \
        return memcmp(dst, src, n) != 0 || dst[n] != 0 ? fail(variant, "copy differs") : 0;                  \
    }

/* rvv-bench "memset aligned": dst at the buffer's start, set to another value before each call. */
#define RUN_FILL(name)                                                                                       \
    if (strcmp(variant, #name) == 0) {                                                                       \
        int c = 0x5a;                                                                                        \
        for (int r = 0; r < reps; r++) {                                                                     \
            memset(mem, c + 3, n + 9);                                                                       \
            name##_wrap(mem, c, n);                                                                          \
        }                                                                                                    \
        for (size_t i = 0; i < n; i++)                                                                       \
            if (mem[i] != c) return fail(variant, "fill differs");                                           \
        return mem[n] != c + 3 ? fail(variant, "fill overran") : 0;                                          \
    }

/* The instruction streams: SIZE is the number of loop trips (64 instructions each). */
#define RUN_STRIDED(name)                                                                                    \
    if (strcmp(variant, #name) == 0) {                                                                       \
        for (int r = 0; r < reps; r++) name##_wrap((const float *)mem, 12, (long)n);                         \
        return 0;                                                                                            \
    }
#define RUN_TRIPS(name)                                                                                      \
    if (strcmp(variant, #name) == 0) {                                                                       \
        for (int r = 0; r < reps; r++) name##_wrap((long)n, 0.5f);                                           \
        return 0;                                                                                            \
    }

/* rvv-bench mandelbrot: width = floor(sqrt(SIZE)), 100 iterations at most; checked against the scalar f64 loop
 * (a lane may differ by rounding near the boundary: at most 1 % of the points). */
static size_t usqrt(size_t n) {
    size_t r = 0;
    while ((r + 1) * (r + 1) <= n) r++;
    return r;
}

#define RUN_MANDEL(name)                                                                                     \
    if (strcmp(variant, #name) == 0) {                                                                       \
        size_t width = usqrt(n);                                                                             \
        uint32_t *res = (uint32_t *)mem, *ref = res + width * width;                                         \
        for (int r = 0; r < reps; r++) name##_wrap(width, MANDEL_ITER, res);                                 \
        mandel_reference(width, MANDEL_ITER, ref);                                                     \
        size_t off = 0;                                                                                      \
        for (size_t i = 0; i < width * width; i++) off += res[i] != ref[i];                                  \
        return off * 100 > width * width ? fail(variant, "escape counts differ from the f64 reference") : 0; \
    }

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: x60_micro VARIANT SIZE REPS\n");
        return 2;
    }
    const char *variant = argv[1];
    size_t n = strtoull(argv[2], NULL, 10);
    int reps = atoi(argv[3]);
    mem = aligned_alloc(4096, MAX_MEM + 4096);
    if (mem == NULL || n + 64 > MAX_MEM / 2) return fail(variant, "SIZE too large");
    LMULS(RUN_COPY, copy_vlmax_m)
    LMULS(RUN_COPY, copy_vl16_m)
    RUN_COPY(copy_scalar)
    LMULS(RUN_FILL, fill_vlmax_m)
    RUN_FILL(fill_scalar)
    LMULS(RUN_STRIDED, strided_e32m)
    LMULS(RUN_TRIPS, redsum_e32m)
    LMULS(RUN_TRIPS, fmacc_e32m)
    if (strcmp(variant, "peak_e32m8") == 0) {
        for (int r = 0; r < reps; r++) peak_e32m8_wrap((long)n, 0.5f, 0.25f, 0.125f);
        return 0;
    }
    /* rvv-bench "strlen": non-zero bytes, a terminator at SIZE, the string 255 bytes into the buffer */
    if (strcmp(variant, "strlen_scalar") == 0) {
        char *s = (char *)mem + 255;
        for (size_t i = 0; i < n; i++) s[i] = (char)(random_byte() | 1);
        s[n] = 0;
        size_t got = 0;
        for (int r = 0; r < reps; r++) got = strlen_scalar_wrap(s);
        return got != n ? fail(variant, "wrong length") : 0;
    }
    RUN_MANDEL(mandel_scalar_f32)
    RUN_MANDEL(mandel_scalar_f64)
    RUN_MANDEL(mandel_rvv_f32_m1)
    RUN_MANDEL(mandel_rvv_f32_m2)
    RUN_MANDEL(mandel_rvv_f64_m2)
    return fail(variant, "unknown variant");
}
