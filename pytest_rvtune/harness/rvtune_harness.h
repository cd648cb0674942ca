/*
 * rvtune_harness.h: the small support library every pytest-rvtune harness stands on (generated or
 * main_cpp/<name>.cpp). Plain C99 + POSIX, header-only (all functions static), usable from C and C++.
 *
 * It gives a harness:
 *   - the command line:  ELF [--warmup N] [--runs N] [--max-time S] [--max-samples N] [--no-check]
 *                            [--threads N] [--atol X] [--rtol X] [--grid X,Y,Z] POSITIONAL...
 *   - a strict golden TXT reader (first line `rows cols`, then rows*cols values); any problem with a
 *     file is `RVTUNE error <file>:<line>: <what>` and exit 2, because a missing or short data file
 *     must never look like a valid run;
 *   - warm-up + timed runs, one `RVTUNE sample <ns>` line per sample (CLOCK_MONOTONIC), with the
 *     output buffers restored before every run so masked stores never leave stale data that a later
 *     check would accept; with --max-time the samples go on until they span that many seconds (at most
 *     --max-samples of them, each then the mean of several runs), so a machine's slow and fast spells
 *     both show in them;
 *   - `RVTUNE launches <n>` once the timing is done: how many times the kernel ran in all;
 *   - output checks |got - exp| <= atol + rtol * |exp| (NaN equal only to NaN; fp16/bf16 compared in double
 *     after widening, which is exact), one
 *     `RVTUNE check <name> ok|bad max_abs=<g> max_rel=<g> first_bad=<i> count=<n>` line each, where
 *     count is the number of mismatching elements and first_bad is -1 when there is none;
 *     an output NaN where a number was expected makes max_abs=nan max_rel=nan and first_bad the first such NaN;
 *   - guard zones: every tensor buffer the TXT reader or rvtune_output_like allocates sits between two
 *     RVTUNE_GUARD_BYTES canary zones; rvtune_check_guards (after the last launch) prints
 *     `RVTUNE check <name>:before|after bad max_abs=0 max_rel=0 first_bad=<k> count=<n>` for a zone the
 *     kernel wrote into (see "guard zones" below). Reads past a buffer are NOT detected: the canaries
 *     are ordinary memory, and page-protecting every buffer would cost an mmap and a 4 KiB alignment each;
 *   - exit status: 0 every check ok (or --no-check), 1 wrong answer, 2 bad input.
 * The machine-readable lines are the contract with pytest_rvtune/harness_output.py (docs/contracts.md).
 */
#ifndef RVTUNE_HARNESS_H
#define RVTUNE_HARNESS_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RVTUNE_EXIT_OK 0
#define RVTUNE_EXIT_WRONG 1
#define RVTUNE_EXIT_BAD_INPUT 2

/* Element types a golden file can be read into (Triton's pointer element types). */
typedef enum {
    RVTUNE_F32,
    RVTUNE_F64,
    RVTUNE_F16,
    RVTUNE_BF16,
    RVTUNE_I8,
    RVTUNE_I16,
    RVTUNE_I32,
    RVTUNE_I64,
    RVTUNE_U8
} rvtune_dtype;

/* One tensor buffer: the contents of a golden file, or an output buffer shaped like its expected file. */
typedef struct {
    const char *name;  /* label in messages and check lines, e.g. "c" */
    const char *path;  /* the file it came from (or is checked against) */
    rvtune_dtype dtype;
    int64_t rows, cols;
    void *data;        /* rows * cols elements, 64-byte aligned (vector loads like aligned data) */
    void *init;        /* contents restored before each run; NULL = restore to zeros */
    uint32_t guard;    /* 0: no guard zones (a buffer the harness did not allocate), else its canaries' tag */
} rvtune_tensor;

typedef struct {
    int warmup;      /* untimed runs before the timed ones */
    int runs;        /* at least this many samples */
    double max_time; /* seconds the samples should span (0: exactly `runs` samples of one run each) */
    int max_samples; /* with max_time: at most this many samples (or `runs`, when larger) */
    int threads;     /* the launcher's num_threads: 0 all harts, 1 serial, N threads */
    int check;       /* 0 with --no-check (profiling runs) */
    double atol, rtol;
    int has_grid;
    uint32_t grid[3];
    int npos;        /* positional arguments (files, scalar values) in order */
    char **pos;
} rvtune_opts;

/* ---------------------------------------------------------------- errors */

/* Bad input: print one machine-readable error line and exit 2. Never returns. */
static inline void rvtune_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((noreturn, format(printf, 1, 2)))
#endif
    ;

static inline void rvtune_fail(const char *fmt, ...) {
    va_list ap;
    fputs("RVTUNE error ", stdout);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
    exit(RVTUNE_EXIT_BAD_INPUT);
}

/* ---------------------------------------------------------------- dtypes */

static inline size_t rvtune_dtype_size(rvtune_dtype dt) {
    switch (dt) {
    case RVTUNE_F64: case RVTUNE_I64: return 8;
    case RVTUNE_F32: case RVTUNE_I32: return 4;
    case RVTUNE_F16: case RVTUNE_BF16: case RVTUNE_I16: return 2;
    default: return 1;
    }
}

static inline int rvtune_dtype_is_int(rvtune_dtype dt) {
    return dt == RVTUNE_I8 || dt == RVTUNE_I16 || dt == RVTUNE_I32 || dt == RVTUNE_I64 || dt == RVTUNE_U8;
}

static inline uint32_t rvtune_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float rvtune_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Half precision by bit manipulation: the rv64gcv build has no Zfh, so no _Float16 arithmetic. */
static inline float rvtune_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return rvtune_bits_f32(sign | 0x7f800000u | (man << 13));  /* inf / nan */
    if (exp == 0) {  /* zero or subnormal: value = man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return rvtune_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t rvtune_f32_to_f16(float f) {
    uint32_t u = rvtune_f32_bits(f), sign = (u >> 16) & 0x8000u;
    int32_t exp = (int32_t)((u >> 23) & 0xffu) - 127 + 15;
    uint32_t man = u & 0x7fffffu;
    if (((u >> 23) & 0xffu) == 0xffu) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0u));
    if (exp >= 0x1f) return (uint16_t)(sign | 0x7c00u);  /* overflow -> inf */
    if (exp <= 0) {  /* subnormal or zero: shift the implicit bit in, round to nearest even */
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp), half = 1u << (shift - 1);
        uint32_t r = man >> shift, rest = man & ((1u << shift) - 1u);
        if (rest > half || (rest == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((uint32_t)exp << 10) | (man >> 13), rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (r & 1u))) r++;  /* may carry into inf: correct */
    return (uint16_t)(sign | r);
}

static inline float rvtune_bf16_to_f32(uint16_t b) { return rvtune_bits_f32((uint32_t)b << 16); }

static inline uint16_t rvtune_f32_to_bf16(float f) {
    uint32_t u = rvtune_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* keep NaN a NaN */
    u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* Element i of t as a double (for checks and for deriving sizes from index tensors). */
static inline double rvtune_get(const rvtune_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RVTUNE_F32: return ((const float *)t->data)[i];
    case RVTUNE_F64: return ((const double *)t->data)[i];
    case RVTUNE_F16: return rvtune_f16_to_f32(((const uint16_t *)t->data)[i]);
    case RVTUNE_BF16: return rvtune_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case RVTUNE_I8: return ((const int8_t *)t->data)[i];
    case RVTUNE_I16: return ((const int16_t *)t->data)[i];
    case RVTUNE_I32: return ((const int32_t *)t->data)[i];
    case RVTUNE_I64: return (double)((const int64_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
    }
}

/* v rounded to a binary float with `mant_bits` fraction bits and smallest normal exponent `min_exp`, to
 * nearest, ties to even, in one step. fp16 is (10, -14), bf16 (7, -126). Going through float instead would
 * round twice: 1 + 2^-11 + 2^-40 is first rounded to 1 + 2^-11 (a half-way point), then to 1.0 for fp16. */
static inline double rvtune_round_binary(double v, int mant_bits, int min_exp) {
    if (v == 0.0 || !isfinite(v)) return v;
    int e;
    frexp(v, &e);  /* |v| = m * 2^e, 0.5 <= m < 1: the leading bit is 2^(e-1) */
    int lead = e - 1 < min_exp ? min_exp : e - 1;  /* subnormals keep the smallest normal's spacing */
    return ldexp(nearbyint(ldexp(v, mant_bits - lead)), lead - mant_bits);  /* exact scalings around one rint */
}

/* A parsed value into element i: a 16-bit float is rounded once from the double (strtod's correctly rounded
 * value), so every value a golden writer printed with enough digits reads back bit for bit. */
static inline void rvtune_store_float(rvtune_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case RVTUNE_F32: ((float *)t->data)[i] = (float)v; break;
    case RVTUNE_F64: ((double *)t->data)[i] = v; break;
    /* the rounded value is exact in float (or beyond its range: inf), so the conversions below do not round */
    case RVTUNE_F16: ((uint16_t *)t->data)[i] = rvtune_f32_to_f16((float)rvtune_round_binary(v, 10, -14)); break;
    default: ((uint16_t *)t->data)[i] = rvtune_f32_to_bf16((float)rvtune_round_binary(v, 7, -126)); break;
    }
}

static inline void rvtune_store_int(rvtune_tensor *t, int64_t i, long long v) {
    switch (t->dtype) {
    case RVTUNE_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case RVTUNE_I16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case RVTUNE_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case RVTUNE_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    default: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    }
}

static inline int64_t rvtune_numel(const rvtune_tensor *t) { return t->rows * t->cols; }

/* A golden tensor's name, file, type and shape, before its data is read (from the TXT or its data image). */
static inline void rvtune_describe(rvtune_tensor *t, const char *name, const char *path, rvtune_dtype dt,
                                   int64_t rows, int64_t cols) {
    t->name = name;
    t->path = path;
    t->dtype = dt;
    t->rows = rows;
    t->cols = cols;
    t->init = NULL;
}
static inline size_t rvtune_nbytes(const rvtune_tensor *t) {
    return (size_t)rvtune_numel(t) * rvtune_dtype_size(t->dtype);
}

/* 64-byte aligned, zeroed; never NULL (an allocation failure is reported as bad input). */
static inline void *rvtune_alloc(size_t bytes, const char *what) {
    size_t rounded = ((bytes ? bytes : 1) + 63u) & ~(size_t)63u;
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded) != 0) p = NULL;
    if (p == NULL) rvtune_fail("out of memory allocating %zu bytes for %s", bytes, what);
    memset(p, 0, rounded);
    return p;
}

/* ---------------------------------------------------------------- guard zones
 *
 * Every tensor buffer sits between two canary zones of RVTUNE_GUARD_BYTES: [before | data | after]. A kernel
 * that stores past either end of a buffer (a mask like `offs < n + 5`, an off-by-one row stride) overwrites
 * canaries, which rvtune_check_guards finds after the last launch (the zones are never reset, so a write in
 * any launch stays visible).
 *
 * Size: 4096 bytes a side is 512 elements of an 8-byte dtype, 1024 of fp32, 2048 of fp16: every overrun of
 * 1-64 elements is caught for every dtype with room to spare, and so is the usual bad mask, which overruns
 * by less than one block (BLOCK_SIZE up to 1024 fp32 elements). A store farther out skips the zone and is
 * not seen here. 4096 is a multiple of 64, so the data stays 64-byte aligned; the cost is 8 KiB a buffer
 * and one pass over the zones per run of the ELF.
 *
 * Canary: a signalling NaN for float dtypes (arithmetic never produces one: it yields quiet NaNs) and
 * 0xA5... for integers, with the low 5 bits XORed with a tag that differs per buffer and side, so that a
 * copy kernel reading x's canaries (read overruns are not detected) and storing them past y's end still
 * changes y's canaries. Only a store of exactly the canary's bit pattern goes unnoticed.
 */
#define RVTUNE_GUARD_BYTES 4096u

/* The canary element of dtype dt for tag (its low dtype-size bytes, little-endian like rv64 and x86-64). */
static inline uint64_t rvtune_canary(rvtune_dtype dt, uint32_t tag) {
    uint64_t t = tag & 0x1fu;  /* keeps the float canaries signalling NaNs with a non-zero payload */
    switch (dt) {
    case RVTUNE_F64: return 0x7ff5a5a5a5a5a5a5ull ^ t;
    case RVTUNE_F32: return 0x7fa5a5a5ull ^ t;
    case RVTUNE_F16: return 0x7da5ull ^ t;
    case RVTUNE_BF16: return 0x7fa5ull ^ t;
    default: return 0xa5a5a5a5a5a5a5a5ull ^ t;
    }
}

/* Element k (0 = nearest the data) of t's guard zone `after` (0: before the start, 1: after the end). */
static inline unsigned char *rvtune_guard_element(const rvtune_tensor *t, int after, size_t k) {
    size_t esize = rvtune_dtype_size(t->dtype);
    unsigned char *data = (unsigned char *)t->data;
    return after ? data + rvtune_nbytes(t) + k * esize : data - (k + 1) * esize;
}

/* t->data for t's shape and dtype (zeroed) between two canary zones; sets t->guard. */
static inline void rvtune_alloc_guarded(rvtune_tensor *t, const char *what) {
    static uint32_t tags = 0;  /* one TU (the harness's main) allocates every buffer */
    size_t bytes = rvtune_nbytes(t), esize = rvtune_dtype_size(t->dtype);
    if (bytes > SIZE_MAX - 3 * (size_t)RVTUNE_GUARD_BYTES)
        rvtune_fail("out of memory allocating %zu bytes for %s", bytes, what);
    unsigned char *base = (unsigned char *)rvtune_alloc(bytes + 2 * (size_t)RVTUNE_GUARD_BYTES, what);
    t->data = base + RVTUNE_GUARD_BYTES;
    t->guard = ++tags;
    for (int after = 0; after < 2; after++) {
        uint64_t canary = rvtune_canary(t->dtype, t->guard * 2u + (uint32_t)after);
        for (size_t k = 0; k < RVTUNE_GUARD_BYTES / esize; k++)
            memcpy(rvtune_guard_element(t, after, k), &canary, esize);
    }
}

/* After the last launch: one `RVTUNE check <name>:before|after bad ...` line per guard zone of t the kernel
 * wrote into, with count = canary elements overwritten and first_bad = how far past the edge the nearest of
 * them is (0: the element right after the end, or right before the start). Returns 1 when both are intact
 * (also for a buffer without guard zones). */
static inline int rvtune_check_guards(const rvtune_tensor *t) {
    if (t->guard == 0) return 1;
    size_t esize = rvtune_dtype_size(t->dtype), zone = RVTUNE_GUARD_BYTES / esize;
    int intact = 1;
    for (int after = 0; after < 2; after++) {
        uint64_t canary = rvtune_canary(t->dtype, t->guard * 2u + (uint32_t)after);
        long long count = 0, nearest = -1, farthest = -1;
        for (size_t k = 0; k < zone; k++) {
            if (memcmp(rvtune_guard_element(t, after, k), &canary, esize) == 0) continue;
            if (nearest < 0) nearest = (long long)k;
            farthest = (long long)k;
            count++;
        }
        if (count == 0) continue;
        intact = 0;
        const char *side = after ? "after" : "before";
        printf("RVTUNE check %s:%s bad max_abs=0 max_rel=0 first_bad=%lld count=%lld\n", t->name, side, nearest,
               count);
        printf("  %s: out-of-bounds store: %lld elements %s its %s were overwritten, %lld to %lld elements "
               "past the edge%s\n", t->name, count, side, after ? "end" : "start", nearest, farthest,
               (size_t)farthest + 1 == zone ? " (up to the guard zone's edge: the store may reach farther)" : "");
    }
    fflush(stdout);
    return intact;
}

/* ---------------------------------------------------------------- TXT reader */

static inline int rvtune_is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Next whitespace-separated token of a NUL-terminated buffer (NUL-terminated in place), or NULL at the
 * end; *line counts the newlines passed and *tok_line is the 1-based line the token is on. */
static inline char *rvtune_next_token(char **cursor, int *line, int *tok_line) {
    char *p = *cursor;
    while (rvtune_is_space(*p)) {
        if (*p == '\n') (*line)++;
        p++;
    }
    *tok_line = *line;
    if (*p == '\0') { *cursor = p; return NULL; }
    char *tok = p;
    while (*p && !rvtune_is_space(*p)) p++;
    if (*p) {
        if (*p == '\n') (*line)++;
        *p++ = '\0';
    }
    *cursor = p;
    return tok;
}

static inline char *rvtune_slurp(const char *path, const char *name) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        rvtune_fail("%s:0: cannot open golden file for %s: %s (generate the golden data first)", path, name,
                    strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) rvtune_fail("%s:0: cannot seek: %s", path, strerror(errno));
    long size = ftell(f);
    if (size < 0) rvtune_fail("%s:0: cannot tell size: %s", path, strerror(errno));
    rewind(f);
    char *buf = (char *)malloc((size_t)size + 1);
    if (buf == NULL) rvtune_fail("%s:0: out of memory reading %ld bytes", path, size);
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) rvtune_fail("%s:0: read error", path);
    fclose(f);
    buf[size] = '\0';
    return buf;
}

/* ---------------------------------------------------------------- binary data images
 *
 * A golden TXT file's values, already parsed on the host (harness/data_image.py): parsing text with strtod
 * is most of a run under QEMU. Layout (little-endian): "RVTIMG1\0", int64 rows, int64 cols, int32 kind
 * (1: int64 values, 2: float64 values), int32 length of the TXT's path, the path (messages name the TXT),
 * zero padding to a multiple of 8, then rows*cols values. Each value is stored into the tensor exactly as a
 * parsed one (rvtune_store_int / rvtune_store_float), so an image and its text give the same bits. */
#define RVTUNE_IMAGE_MAGIC "RVTIMG1"
#define RVTUNE_IMAGE_INT 1
#define RVTUNE_IMAGE_FLOAT 2

/* Read `path` into t when it is an image (returns 1), else return 0 and leave the text to rvtune_read_txt. */
static inline int rvtune_read_image(rvtune_tensor *t, const char *name, const char *path, rvtune_dtype dt) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;  /* rvtune_read_txt reports it */
    char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, RVTUNE_IMAGE_MAGIC, 8) != 0) {
        fclose(f);
        return 0;
    }
    int64_t dims[2];
    int32_t kind_len[2];
    if (fread(dims, 8, 2, f) != 2 || fread(kind_len, 4, 2, f) != 2 || dims[0] < 0 || dims[1] < 0 ||
        kind_len[1] < 0 || kind_len[1] > 65536 || (dims[0] > 0 && dims[1] > (INT64_MAX / 8) / dims[0]))
        rvtune_fail("%s:0: damaged data image (header); delete it, it is made again", path);
    char *txt = (char *)malloc((size_t)kind_len[1] + 1);
    if (txt == NULL || fread(txt, 1, (size_t)kind_len[1], f) != (size_t)kind_len[1])
        rvtune_fail("%s:0: damaged data image (path); delete it, it is made again", path);
    txt[kind_len[1]] = '\0';  /* kept for the tensor's life: messages name the TXT */
    long pad = (long)(-(8 + 16 + 8 + kind_len[1]) & 7);
    if (pad && fseek(f, pad, SEEK_CUR) != 0) rvtune_fail("%s:0: damaged data image (padding)", path);
    rvtune_describe(t, name, txt, dt, dims[0], dims[1]);
    if (kind_len[0] == RVTUNE_IMAGE_FLOAT && rvtune_dtype_is_int(dt))
        rvtune_fail("%s:2: %s is an integer tensor, the file holds non-integer numbers", txt, name);
    if (kind_len[0] != RVTUNE_IMAGE_INT && kind_len[0] != RVTUNE_IMAGE_FLOAT)
        rvtune_fail("%s:0: damaged data image (kind %d)", path, (int)kind_len[0]);
    rvtune_alloc_guarded(t, txt);
    int64_t n = rvtune_numel(t);
    enum { CHUNK = 4096 };
    int64_t *buf = (int64_t *)malloc(CHUNK * sizeof(int64_t));  /* 8-byte raw values: int64 or double bits */
    if (buf == NULL) rvtune_fail("%s:0: out of memory reading its values", path);
    for (int64_t done = 0; done < n;) {
        size_t want = (size_t)(n - done < CHUNK ? n - done : CHUNK);
        if (fread(buf, 8, want, f) != want)
            rvtune_fail("%s:0: data image is short (%lld of %lld values); delete it, it is made again", path,
                        (long long)done, (long long)n);
        for (size_t k = 0; k < want; k++) {
            int64_t i = done + (int64_t)k;
            if (kind_len[0] == RVTUNE_IMAGE_FLOAT) {
                double v;
                memcpy(&v, &buf[k], sizeof v);
                rvtune_store_float(t, i, v);
            } else if (rvtune_dtype_is_int(dt)) {
                rvtune_store_int(t, i, buf[k]);
            } else {
                rvtune_store_float(t, i, (double)buf[k]);  /* as strtod reads "123" */
            }
        }
        done += (int64_t)want;
    }
    free(buf);
    fclose(f);
    return 1;
}

/*
 * Read golden file `path` into t as dtype (its binary image when given one: rvtune_read_image). Rejects
 * (exit 2, naming file and line): a file that cannot be opened, a header that is not two non-negative
 * integers `rows cols`, a value that does not parse (or is not an integer for an integer dtype), fewer than
 * rows*cols values, and extra values.
 */
static inline void rvtune_read_txt(rvtune_tensor *t, const char *name, const char *path, rvtune_dtype dt) {
    if (rvtune_read_image(t, name, path, dt)) return;
    char *buf = rvtune_slurp(path, name), *cur = buf, *end;
    int line = 1, tok_line = 1, last_line = 1;
    long long dims[2];
    for (int d = 0; d < 2; d++) {
        char *tok = rvtune_next_token(&cur, &line, &tok_line);
        if (tok == NULL || tok_line != 1)
            rvtune_fail("%s:1: header must be `rows cols` (two integers), found %s", path,
                        tok == NULL && d == 0 ? "an empty file" : "fewer than two values on line 1");
        errno = 0;
        dims[d] = strtoll(tok, &end, 10);
        if (*end != '\0' || errno != 0 || dims[d] < 0)
            rvtune_fail("%s:1: header must be `rows cols` (two non-negative integers), found '%s'", path, tok);
    }
    if (dims[0] > 0 && dims[1] > (long long)(INT64_MAX / 8) / dims[0])
        rvtune_fail("%s:1: header `%lld %lld` declares more values than fit in memory", path, dims[0], dims[1]);
    rvtune_describe(t, name, path, dt, dims[0], dims[1]);
    rvtune_alloc_guarded(t, path);
    int64_t n = rvtune_numel(t), i = 0;
    int is_int = rvtune_dtype_is_int(dt);
    for (;;) {
        char *tok = rvtune_next_token(&cur, &line, &tok_line);
        if (tok == NULL) break;
        if (tok_line == 1) rvtune_fail("%s:1: header must be `rows cols` only, found extra '%s'", path, tok);
        if (i == n)
            rvtune_fail("%s:%d: more values than the %lld x %lld the header declares (found '%s')", path,
                        tok_line, (long long)t->rows, (long long)t->cols, tok);
        errno = 0;
        if (is_int) {
            long long v = strtoll(tok, &end, 10);
            if (*end != '\0' || errno != 0)
                rvtune_fail("%s:%d: malformed integer '%s' (value %lld of %s)", path, tok_line, tok,
                            (long long)i, name);
            rvtune_store_int(t, i, v);
        } else {
            double v = strtod(tok, &end);
            if (*end != '\0' || end == tok)
                rvtune_fail("%s:%d: malformed number '%s' (value %lld of %s)", path, tok_line, tok,
                            (long long)i, name);
            rvtune_store_float(t, i, v);
        }
        last_line = tok_line;
        i++;
    }
    if (i < n)
        rvtune_fail("%s:%d: file is short: %lld values, the header `%lld %lld` declares %lld", path, last_line,
                    (long long)i, (long long)t->rows, (long long)t->cols, (long long)n);
    free(buf);
}

/* A bad shape is bad input: name the file and say what was expected. */
static inline void rvtune_expect_shape(const rvtune_tensor *t, int64_t rows, int64_t cols) {
    if (t->rows != rows || t->cols != cols)
        rvtune_fail("%s:1: %s must be %lld x %lld, the file holds %lld x %lld", t->path, t->name,
                    (long long)rows, (long long)cols, (long long)t->rows, (long long)t->cols);
}

static inline void rvtune_expect_numel(const rvtune_tensor *t, int64_t n) {
    if (rvtune_numel(t) != n)
        rvtune_fail("%s:1: %s must hold %lld values, the file holds %lld x %lld", t->path, t->name,
                    (long long)n, (long long)t->rows, (long long)t->cols);
}

/* An output buffer shaped like its expected file; zeroed before every run. */
static inline void rvtune_output_like(rvtune_tensor *out, const rvtune_tensor *expected) {
    *out = *expected;
    rvtune_alloc_guarded(out, expected->name);
    out->init = NULL;
}

/* An in-out buffer (read and written by the kernel): its input contents are restored before every run. */
static inline void rvtune_make_inout(rvtune_tensor *t) {
    t->init = rvtune_alloc(rvtune_nbytes(t), t->name);
    memcpy(t->init, t->data, rvtune_nbytes(t));
}

static inline void rvtune_reset(rvtune_tensor *t) {
    if (t->init != NULL) memcpy(t->data, t->init, rvtune_nbytes(t));
    else memset(t->data, 0, rvtune_nbytes(t));
}

/* ---------------------------------------------------------------- command line */

static inline long long rvtune_parse_ll(const char *s, const char *what, long long lo, long long hi) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
        rvtune_fail("argument %s: expected an integer in [%lld, %lld], got '%s'", what, lo, hi, s);
    return v;
}

static inline double rvtune_parse_double(const char *s, const char *what) {
    char *end;
    double v = strtod(s, &end);
    if (s[0] == '\0' || *end != '\0') rvtune_fail("argument %s: expected a number, got '%s'", what, s);
    return v;
}

static inline rvtune_opts rvtune_default_opts(double atol, double rtol) {
    rvtune_opts o;
    memset(&o, 0, sizeof o);
    o.warmup = 1;
    o.runs = 3;
    o.max_samples = 200;
    o.threads = 1;
    o.check = 1;
    o.atol = atol;
    o.rtol = rtol;
    return o;
}

/* Parse options (any order, before or among positionals; `--` ends options). Exit 2 on a bad option. */
static inline void rvtune_parse_args(int argc, char **argv, rvtune_opts *o) {
    o->pos = (char **)calloc((size_t)argc + 1, sizeof(char *));
    o->npos = 0;
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] != '-') {  /* "-1.5" is a scalar value, not an option */
            o->pos[o->npos++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) { only_pos = 1; continue; }
        if (strcmp(a, "--no-check") == 0) { o->check = 0; continue; }
        if (i + 1 >= argc) rvtune_fail("argument %s: needs a value", a);
        const char *v = argv[++i];
        if (strcmp(a, "--warmup") == 0) o->warmup = (int)rvtune_parse_ll(v, a, 0, 1000000);
        else if (strcmp(a, "--runs") == 0) o->runs = (int)rvtune_parse_ll(v, a, 0, 1000000);
        else if (strcmp(a, "--max-samples") == 0) o->max_samples = (int)rvtune_parse_ll(v, a, 1, 1000000);
        else if (strcmp(a, "--max-time") == 0) {
            o->max_time = rvtune_parse_double(v, a);
            if (!(o->max_time >= 0.0 && o->max_time <= 86400.0))
                rvtune_fail("argument --max-time: seconds between 0 and 86400, got '%s'", v);
        }
        else if (strcmp(a, "--threads") == 0) o->threads = (int)rvtune_parse_ll(v, a, 0, 4096);
        else if (strcmp(a, "--atol") == 0 || strcmp(a, "--rtol") == 0) {
            double tol = rvtune_parse_double(v, a);
            if (!(tol >= 0.0)) rvtune_fail("argument %s: a tolerance must be >= 0, got '%s'", a, v);
            *(a[2] == 'a' ? &o->atol : &o->rtol) = tol;
        }
        else if (strcmp(a, "--grid") == 0) {
            unsigned long long g[3];
            int used = 0;
            if (sscanf(v, "%llu,%llu,%llu%n", &g[0], &g[1], &g[2], &used) != 3 || v[used] != '\0' ||
                g[0] > 0xffffffffull || g[1] > 0xffffffffull || g[2] > 0xffffffffull)
                rvtune_fail("argument --grid: expected X,Y,Z (three unsigned integers), got '%s'", v);
            for (int d = 0; d < 3; d++) o->grid[d] = (uint32_t)g[d];
            o->has_grid = 1;
        } else {
            rvtune_fail("unknown option %s (known: --warmup N --runs N --max-time S --max-samples N --no-check "
                        "--threads N --atol X --rtol X --grid X,Y,Z)", a);
        }
    }
}

/* Exactly n positionals, else a usage error listing what they are. */
static inline void rvtune_expect_positionals(const rvtune_opts *o, int n, const char *usage) {
    if (o->npos != n)
        rvtune_fail("expected %d positional arguments (%s), got %d", n, usage, o->npos);
}

/* ---------------------------------------------------------------- timing */

static inline int64_t rvtune_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef void (*rvtune_run_fn)(void *ctx);

/* One run of the kernel with its outputs reset first (outside the timed region); its duration in ns. */
static inline int64_t rvtune_timed_run(rvtune_run_fn run, void *ctx, rvtune_tensor *const *outs, int nouts) {
    for (int k = 0; k < nouts; k++) rvtune_reset(outs[k]);
    int64_t t0 = rvtune_now_ns();
    run(ctx);
    return rvtune_now_ns() - t0;
}

/* rvtune_timed_run's whole round trip (reset + run) in ns: what one more launch costs the sampling loop. */
static inline int64_t rvtune_round_trip(rvtune_run_fn run, void *ctx, rvtune_tensor *const *outs, int nouts) {
    int64_t t0 = rvtune_now_ns();
    rvtune_timed_run(run, ctx, outs, nouts);
    return rvtune_now_ns() - t0;
}

/*
 * warmup untimed runs, then the samples, one `RVTUNE sample <ns>` line each. Without max_time: `runs`
 * samples of one run each. With max_time: samples until they span max_time seconds (and at least `runs`);
 * when that takes more runs than max_samples, each sample is the mean of `per` consecutive runs, `per`
 * sized from the fastest warm-up round trip and re-sized before each sample from the rate seen so far.
 * Spanning time matters on shared machines: a VM's speed changes in spells of seconds, and samples from
 * one short burst all come from one spell. Outputs are reset before
 * every run, so the buffers checked afterwards hold exactly one run's result. With no runs at all the
 * kernel still runs once, so a check always sees real output.
 */
static inline void rvtune_bench(const rvtune_opts *o, rvtune_run_fn run, void *ctx, rvtune_tensor *const *outs,
                                int nouts) {
    /* the fastest warm-up round trip (reset + run) sizes the samples; the reset counts, as it costs time too */
    int64_t fastest = 0, launches = 0;
    for (int w = 0; w < o->warmup; w++, launches++) {
        int64_t d = rvtune_round_trip(run, ctx, outs, nouts);
        if (fastest == 0 || d < fastest) fastest = d;
    }
    if (o->runs == 0) {
        if (o->warmup == 0) {  /* the lone check run is no sample */
            rvtune_timed_run(run, ctx, outs, nouts);
            launches++;
        }
        printf("RVTUNE launches %lld\n", (long long)launches);
        return;
    }
    int cap = o->max_samples > o->runs ? o->max_samples : o->runs;
    int64_t per = 1;
    if (o->max_time > 0.0) {
        if (fastest == 0) {  /* no warm-up: one sizing run */
            fastest = rvtune_round_trip(run, ctx, outs, nouts);
            launches++;
        }
        double wanted_runs = o->max_time * 1e9 / (double)(fastest > 0 ? fastest : 1);
        per = (int64_t)ceil(wanted_runs / cap);
        if (per < 1) per = 1;
    }
    int64_t span_ns = (int64_t)(o->max_time * 1e9), started = rvtune_now_ns(), sampled = 0;
    for (int s = 0; s < o->runs || (s < cap && rvtune_now_ns() - started < span_ns); s++) {
        int64_t elapsed = rvtune_now_ns() - started;
        if (o->max_time > 0.0 && sampled > 0 && elapsed < span_ns) {
            /* re-size from the rate of the samples so far: warm-ups under load (or in a slow spell) make `per`
               too small, and the cap would then end the samples well before they span max_time */
            double launch_ns = (double)elapsed / (double)sampled;
            per = (int64_t)ceil((double)(span_ns - elapsed) / launch_ns / (double)(cap - s));
            if (per < 1) per = 1;
        }
        int64_t sum = 0;
        for (int64_t r = 0; r < per; r++) sum += rvtune_timed_run(run, ctx, outs, nouts);
        launches += per;
        sampled += per;
        printf("RVTUNE sample %lld\n", (long long)((sum + per / 2) / per));
        fflush(stdout);  /* a run killed at its timeout keeps the samples it produced */
    }
    /* whole-process counters (perf, QEMU) are divided by this to give per-launch figures */
    printf("RVTUNE launches %lld\n", (long long)launches);
}

/* ---------------------------------------------------------------- checks */

/* Compare got with exp element-wise; print one check line; return 1 when all elements match. */
static inline int rvtune_check(const char *name, const rvtune_tensor *got, const rvtune_tensor *exp, double atol,
                               double rtol) {
    int64_t n = rvtune_numel(exp), first_bad = -1, bad = 0, first_nan = -1, nans = 0;
    double max_abs = 0.0, max_rel = 0.0;
    if (rvtune_numel(got) != n)
        rvtune_fail("%s:1: check %s: output holds %lld values, expected file %lld", exp->path, name,
                    (long long)rvtune_numel(got), (long long)n);
    for (int64_t i = 0; i < n; i++) {
        double g = rvtune_get(got, i), e = rvtune_get(exp, i);
        int ok;
        double diff;
        if (isnan(e) || isnan(g)) {
            ok = isnan(e) && isnan(g);
            diff = ok ? 0.0 : INFINITY;
            if (!ok && isnan(g) && nans++ == 0) first_nan = i;  /* a NaN output where a number was expected */
        } else if (g == e) {  /* also equal infinities, whose difference would be NaN */
            ok = 1;
            diff = 0.0;
        } else if (isinf(g) || isinf(e)) {  /* an unequal infinity is never within an (infinite) tolerance */
            ok = 0;
            diff = INFINITY;
        } else {
            diff = fabs(g - e);
            ok = diff <= atol + rtol * fabs(e);
        }
        double rel = diff == 0.0 ? 0.0 : (e != 0.0 && isfinite(e) && isfinite(diff) ? diff / fabs(e) : INFINITY);
        if (diff > max_abs) max_abs = diff;
        if (rel > max_rel) max_rel = rel;
        if (!ok) {
            if (first_bad < 0) first_bad = i;
            bad++;
        }
    }
    if (nans) {  /* the NaN is the fault to point at: "max abs error inf" would hide it */
        max_abs = max_rel = NAN;
        printf("  %s: %lld NaN values where numbers were expected, the first at %s[%lld]\n", name, (long long)nans,
               name, (long long)first_nan);
        first_bad = first_nan;
    }
    printf("RVTUNE check %s %s max_abs=%.9g max_rel=%.9g first_bad=%lld count=%lld\n", name, bad ? "bad" : "ok",
           max_abs, max_rel, (long long)first_bad, (long long)bad);
    if (bad) {  /* free text for a human reading the log: where the first mismatch is */
        printf("  %s: %lld of %lld elements differ; first %s[%lld] (row %lld, col %lld) = %.9g, expected %.9g (%s)\n",
               name, (long long)bad, (long long)n, name, (long long)first_bad,
               (long long)(exp->cols ? first_bad / exp->cols : 0), (long long)(exp->cols ? first_bad % exp->cols : 0),
               rvtune_get(got, first_bad), rvtune_get(exp, first_bad), exp->path);
    }
    fflush(stdout);
    return bad == 0;
}

/* The exit status: 0 when every check passed or checks were skipped, else 1. */
static inline int rvtune_exit_code(const rvtune_opts *o, int all_ok) {
    fflush(stdout);
    return (!o->check || all_ok) ? RVTUNE_EXIT_OK : RVTUNE_EXIT_WRONG;
}

#ifdef __cplusplus
}
#endif

#endif /* RVTUNE_HARNESS_H */
