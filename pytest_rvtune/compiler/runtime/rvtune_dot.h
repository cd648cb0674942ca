/* rvtune_dot.h: what the fast paths of the generated kernel C call (compiler/ptr_analysis.py, dot_kernel.py):
 * index clamps, row copies and fills of structured loads, and tt.dot on fp32 tiles as a
 * register-blocked micro-kernel.
 *
 * C[M x N] += A[M x K] * B[K x N]. B rows are contiguous (ldb apart), C is contiguous (ldc apart), A may
 * have any strides. The work is cut into register tiles (MR rows x a panel of columns, chosen per ISA and
 * panel width, see RV_DOT_TILE below): the accumulators are GCC vector values that never leave registers
 * while k runs (i-k-j order, a broadcast of A[i][k] times a row of B), so clang emits one vfmacc.vf /
 * vfmadd per vector and k step. M, N and K are compile-time constants at every call site (always_inline),
 * so clang specialises the tiles and drops the remainder paths a config does not need. The sum over k is
 * in order, one fused multiply-add per step: the same rounding as a scalar i-k-j loop compiled with
 * -ffp-contract=on.
 */
#ifndef RVTUNE_DOT_H
#define RVTUNE_DOT_H

#include <stdint.h>
#include <string.h>

#ifndef RV_INLINE
#define RV_INLINE static inline __attribute__((always_inline))
#endif

/* Index bounds of structured loads/stores (compiler/ptr_analysis.py): a mask's range clamped to the tile. */
RV_INLINE int64_t rv_max64(int64_t a, int64_t b) { return a > b ? a : b; }
RV_INLINE int64_t rv_min64(int64_t a, int64_t b) { return a < b ? a : b; }
RV_INLINE int64_t rv_clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }
/* Do the bytes [a + a_lo, a + a_hi) and [b + b_lo, b + b_hi) not meet? (Addresses as integers: the offsets may
 * reach past either object, which pointer arithmetic may not.) A deferred load read in a store's loop
 * (ptr_analysis.op_store) is right only then. */
RV_INLINE int rv_disjoint(const void *a, int64_t a_lo, int64_t a_hi, const void *b, int64_t b_lo, int64_t b_hi) {
    const uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa + (uintptr_t)a_hi <= pb + (uintptr_t)b_lo || pb + (uintptr_t)b_hi <= pa + (uintptr_t)a_lo;
}

/* Row copies of structured loads and stores: n elements of W bits, source and destination strides in
 * elements. RVV: vle/vse for unit strides, vlse/vsse otherwise, at LMUL 8 (clang would turn a plain copy
 * loop into a call to glibc's memcpy, which is scalar on riscv64). Elsewhere: memcpy or a plain loop. */
#if defined(__riscv_v)
#include <riscv_vector.h>
#define RV_DEF_COPY(W)                                                                                   \
    RV_INLINE void rv_copy_e##W(void *dst, int64_t ds, const void *src, int64_t ss, int64_t n) {       \
        uint##W##_t *d = (uint##W##_t *)dst;                                                            \
        const uint##W##_t *s = (const uint##W##_t *)src;                                                \
        if (ss == 1 && ds == 1) { /* the common case: no stride multiplies in the loop */               \
            for (size_t vl; n > 0; n -= (int64_t)vl, s += vl, d += vl) {                                 \
                vl = __riscv_vsetvl_e##W##m8((size_t)n);                                                 \
                __riscv_vse##W##_v_u##W##m8(d, __riscv_vle##W##_v_u##W##m8(s, vl), vl);                  \
            }                                                                                            \
            return;                                                                                      \
        }                                                                                                \
        for (size_t vl; n > 0; n -= (int64_t)vl, s += (int64_t)vl * ss, d += (int64_t)vl * ds) {        \
            vl = __riscv_vsetvl_e##W##m8((size_t)n);                                                     \
            vuint##W##m8_t v = ss == 1 ? __riscv_vle##W##_v_u##W##m8(s, vl)                              \
                                       : __riscv_vlse##W##_v_u##W##m8(s, ss * (W / 8), vl);              \
            if (ds == 1)                                                                                 \
                __riscv_vse##W##_v_u##W##m8(d, v, vl);                                                   \
            else                                                                                         \
                __riscv_vsse##W##_v_u##W##m8(d, ds * (W / 8), v, vl);                                    \
        }                                                                                                \
    }
#else
/* may_alias: the copied memory is also read and written as the kernel's own element type */
typedef uint8_t __attribute__((may_alias)) rv_copy_u8;
typedef uint16_t __attribute__((may_alias)) rv_copy_u16;
typedef uint32_t __attribute__((may_alias)) rv_copy_u32;
typedef uint64_t __attribute__((may_alias)) rv_copy_u64;
#define RV_DEF_COPY(W)                                                                                   \
    RV_INLINE void rv_copy_e##W(void *dst, int64_t ds, const void *src, int64_t ss, int64_t n) {       \
        rv_copy_u##W *d = (rv_copy_u##W *)dst;                                                          \
        const rv_copy_u##W *s = (const rv_copy_u##W *)src;                                              \
        if (n <= 0) return;                                                                              \
        if (ds == 1 && ss == 1) {                                                                        \
            memcpy(d, s, (size_t)n * (W / 8));                                                           \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];                                           \
    }
#endif
RV_DEF_COPY(8)
RV_DEF_COPY(16)
RV_DEF_COPY(32)
RV_DEF_COPY(64)

/* The rows of a 2-D block wholly inside its mask, into a contiguous tile: rows x cols elements, source rows
 * sld apart with column stride ss, destination rows dld apart. On RVV one vsetvl serves every row when a
 * row fits one LMUL-8 group (a vle/vlse + vse and two pointer steps per row); the masked path pays a bounds
 * check, a row copy call and a fill per row instead. */
#if defined(__riscv_v)
#define RV_DEF_COPY_ROWS(W)                                                                              \
    RV_INLINE void rv_copy_rows_e##W(void *dst, int64_t dld, const void *src, int64_t sld, int64_t ss,  \
                                     int64_t rows, int64_t cols) {                                       \
        uint##W##_t *d = (uint##W##_t *)dst;                                                            \
        const uint##W##_t *s = (const uint##W##_t *)src;                                                \
        if (cols > (int64_t)__riscv_vsetvlmax_e##W##m8()) {                                              \
            for (int64_t r = 0; r < rows; ++r) rv_copy_e##W(d + r * dld, 1, s + r * sld, ss, cols);      \
            return;                                                                                      \
        }                                                                                                \
        const size_t vl = __riscv_vsetvl_e##W##m8((size_t)cols);                                         \
        if (ss == 1)                                                                                     \
            for (int64_t r = 0; r < rows; ++r, s += sld, d += dld)                                       \
                __riscv_vse##W##_v_u##W##m8(d, __riscv_vle##W##_v_u##W##m8(s, vl), vl);                  \
        else                                                                                             \
            for (int64_t r = 0; r < rows; ++r, s += sld, d += dld)                                       \
                __riscv_vse##W##_v_u##W##m8(d, __riscv_vlse##W##_v_u##W##m8(s, ss * (W / 8), vl), vl);   \
    }
#else
#define RV_DEF_COPY_ROWS(W)                                                                              \
    RV_INLINE void rv_copy_rows_e##W(void *dst, int64_t dld, const void *src, int64_t sld, int64_t ss,  \
                                     int64_t rows, int64_t cols) {                                       \
        for (int64_t r = 0; r < rows; ++r)                                                               \
            rv_copy_e##W((rv_copy_u##W *)dst + r * dld, 1, (const rv_copy_u##W *)src + r * sld, ss, cols); \
    }
#endif
RV_DEF_COPY_ROWS(8)
RV_DEF_COPY_ROWS(16)
RV_DEF_COPY_ROWS(32)
RV_DEF_COPY_ROWS(64)
#undef RV_DEF_COPY_ROWS

/* Tile fills (tl.zeros / tl.full, a masked load's ``other`` outside the mask): n contiguous elements set
 * to one value. RVV: one vmv.v.x and a vse per 8 registers' worth; clang would turn the plain loop into a
 * call to glibc's memset (scalar on riscv64, and outside the counted kernel). Elsewhere: the plain loop. */
#if defined(__riscv_v)
#define RV_DEF_FILL_BITS(W)                                                                              \
    RV_INLINE void rv_fill_e##W(void *dst, uint##W##_t bits, int64_t n) {                                \
        uint##W##_t *d = (uint##W##_t *)dst;                                                            \
        const vuint##W##m8_t v = __riscv_vmv_v_x_u##W##m8(bits, __riscv_vsetvlmax_e##W##m8());          \
        for (size_t vl; n > 0; n -= (int64_t)vl, d += vl) {                                              \
            vl = __riscv_vsetvl_e##W##m8((size_t)n);                                                     \
            __riscv_vse##W##_v_u##W##m8(d, v, vl);                                                       \
        }                                                                                                \
    }
#else
#define RV_DEF_FILL_BITS(W)                                                                              \
    RV_INLINE void rv_fill_e##W(void *dst, uint##W##_t bits, int64_t n) {                                \
        rv_copy_u##W *d = (rv_copy_u##W *)dst;                                                          \
        for (int64_t i = 0; i < n; ++i) d[i] = bits;                                                     \
    }
#endif
RV_DEF_FILL_BITS(8)
RV_DEF_FILL_BITS(16)
RV_DEF_FILL_BITS(32)
RV_DEF_FILL_BITS(64)
#undef RV_DEF_FILL_BITS

/* Typed fills: the generated C passes the value in the tile's own element type. */
#define RV_DEF_FILL(NAME, T, W)                                                                          \
    RV_INLINE void rv_fill_##NAME(void *dst, T value, int64_t n) {                                       \
        union { T v; uint##W##_t u; } b;                                                                 \
        b.v = value;                                                                                     \
        rv_fill_e##W(dst, b.u, n);                                                                       \
    }
RV_DEF_FILL(f32, float, 32)
RV_DEF_FILL(f64, double, 64)
RV_DEF_FILL(i8, int8_t, 8)
RV_DEF_FILL(u8, uint8_t, 8)
RV_DEF_FILL(i16, int16_t, 16)
RV_DEF_FILL(u16, uint16_t, 16)
RV_DEF_FILL(i32, int32_t, 32)
RV_DEF_FILL(i64, int64_t, 64)
#undef RV_DEF_FILL

#include "rvtune_exp.h" /* rv_expf and the vector exp rv_exp_f32 */

/* The register tiles. A tile is MR rows x NV vectors of VT (a GCC vector of W floats); its MR * NV
 * accumulators plus NV vectors of one B row fit the vector register file, so they never leave registers
 * while k runs. Per k step: NV vector loads of B, MR scalar loads of A, MR * NV fused multiply-adds.
 * Wider tiles spend fewer instructions per FLOP, so each column panel takes the widest tile that fits.
 *   RVV, VLEN 256 (32 registers of 8 floats): 64 floats = one LMUL-8 group, 3 rows (3 + 1 of 4 groups);
 *     32 floats = LMUL 4, 7 rows (7 + 1 of 8 groups); 16 floats = LMUL 2, 8 rows; 8 floats = LMUL 1.
 *   AVX-512 (32 zmm of 16 floats): 2 zmm x 8 rows, then 1 zmm x 8 rows, then 8 floats x 8 rows.
 *   other: 2 x 8 floats x 4 rows, then 8 floats x 4 rows. */
typedef float rv_vf64 __attribute__((vector_size(256), aligned(4)));
typedef float rv_vf32 __attribute__((vector_size(128), aligned(4)));
typedef float rv_vf16 __attribute__((vector_size(64), aligned(4)));
typedef float rv_vf8 __attribute__((vector_size(32), aligned(4)));

/* C[0..mr) x [0..NV*W) += A[0..mr) x [0..K) * B[0..K) x [0..NV*W), mr <= MR. The k loop is unrolled UNROLL
 * times on RVV (one loop branch and pointer step per UNROLL steps) where registers are left for the next
 * steps' B rows: not for the LMUL-8 tile (all four groups in use: clang would spill). */
#define RV_PRAGMA(x) _Pragma(#x)
#if defined(__riscv_v)
#define RV_UNROLL_K(N) RV_PRAGMA(clang loop unroll_count(N))
#define RV_TILE_LOOP RV_PRAGMA(clang loop unroll(disable)) /* see RV_DOT_PANEL */
#else /* clang's own choices: any unroll hint made the AVX-512 tiles slower */
#define RV_UNROLL_K(N)
#define RV_TILE_LOOP
#endif
#define RV_DOT_TILE(NAME, VT, MR, NV, UNROLL)                                                             \
    RV_INLINE void NAME(int mr, int K, const float *A, long sam, long sak, const float *B, long ldb,     \
                        float *C, long ldc) {                                                            \
        enum { W = (int)(sizeof(VT) / sizeof(float)) };                                                  \
        VT acc[MR][NV];                                                                                  \
        for (int r = 0; r < mr; ++r)                                                                     \
            for (int v = 0; v < NV; ++v) memcpy(&acc[r][v], C + r * ldc + v * W, sizeof(VT));            \
        RV_UNROLL_K(UNROLL)                                                                              \
        for (int k = 0; k < K; ++k) {                                                                    \
            VT b[NV];                                                                                    \
            for (int v = 0; v < NV; ++v) memcpy(&b[v], B + k * ldb + v * W, sizeof(VT));                 \
            for (int r = 0; r < mr; ++r) {                                                               \
                const float a = A[r * sam + k * sak];                                                    \
                for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];                                      \
            }                                                                                            \
        }                                                                                                \
        for (int r = 0; r < mr; ++r)                                                                     \
            for (int v = 0; v < NV; ++v) memcpy(C + r * ldc + v * W, &acc[r][v], sizeof(VT));            \
    }

/* One column panel, all rows: full MR-row tiles, then the rows left over as one tile (M is a constant
 * at every call site, so clang specialises the tile for that row count). On RVV the tile loop stays a
 * loop: fully unrolled, clang's scheduler hoists the next tile's loads into this one's and spills LMUL-8
 * registers (on x86 the unrolled loop is the faster one). */
#define RV_DOT_PANEL(TILE, MR)                                                                            \
    do {                                                                                                 \
        int i = 0;                                                                                       \
        RV_TILE_LOOP                                                                                     \
        for (; i + (MR) <= M; i += (MR))                                                                 \
            TILE(MR, K, A + i * sam, sam, sak, B + j, ldb, C + i * ldc + j, ldc);                         \
        if (i < M) TILE(M - i, K, A + i * sam, sam, sak, B + j, ldb, C + i * ldc + j, ldc);              \
    } while (0)

#if defined(__riscv_v)
/* RVV: the tiles are written with intrinsics so that a column panel's width is a run-time vl: a block's
 * last panel covers only the columns that hold data (a 160-wide matrix in 64-wide blocks: the third block's
 * 32 columns run as 32 lanes, not 64 with half of them zeros). Rows are a compile-time MR (one named
 * accumulator per row, c0..c7, the unused ones dead code), so the accumulators stay in registers. */
#define RV_ROWS8(S, LM) S(0, LM) S(1, LM) S(2, LM) S(3, LM) S(4, LM) S(5, LM) S(6, LM) S(7, LM)
#define RV_ACC_DECL(r, LM) vfloat32m##LM##_t c##r = __riscv_vundefined_f32m##LM();
#define RV_ACC_LOAD(r, LM) if ((r) < MR) c##r = __riscv_vle32_v_f32m##LM(C + (r) * ldc, vl);
#define RV_ACC_FMA(r, LM) if ((r) < MR) c##r = __riscv_vfmacc_vf_f32m##LM(c##r, A[(r) * sam], b, vl);
#define RV_ACC_FMA_NEXT(r, LM) if ((r) < MR) c##r = __riscv_vfmacc_vf_f32m##LM(c##r, A[(r) * sam + sak], b, vl);
#define RV_ACC_STORE(r, LM) if ((r) < MR) __riscv_vse32_v_f32m##LM(C + (r) * ldc, c##r, vl);
/* C[0..MR) x [0..vl) += A[0..MR) x [0..K) * B[0..K) x [0..vl): per k one vle32 of B's row, MR scalar loads
 * of A at constant offsets (A is a packed arena tile: sam is a constant) and MR vfmacc.vf. */
#define RV_DEF_TILE_V(LM, UNROLL)                                                                                 \
    RV_INLINE void rv_dot_tile_m##LM(const int MR, int K, const float *A, long sam, long sak, const float *B, \
                                    long ldb, float *C, long ldc, size_t vl) {                           \
        RV_ROWS8(RV_ACC_DECL, LM)                                                                        \
        RV_ROWS8(RV_ACC_LOAD, LM)                                                                        \
        if (sak != 0) { /* a constant: the loops end on A's address, no counter */                     \
            /* k steps in pairs by hand (clang's own unrolling of a run-time trip count keeps a counter):  \
             * per pair two B rows, one step of A and B, one branch */                                   \
            const float *const a_pairs = A + (long)(K & ~1) * sak, *const a_end = A + (long)K * sak;       \
            RV_UNROLL_K(UNROLL / 2)                                                                      \
            for (; A != a_pairs; A += 2 * sak, B += 2 * ldb) {                                           \
                vfloat32m##LM##_t b = __riscv_vle32_v_f32m##LM(B, vl);                                   \
                RV_ROWS8(RV_ACC_FMA, LM)                                                                 \
                b = __riscv_vle32_v_f32m##LM(B + ldb, vl);                                               \
                RV_ROWS8(RV_ACC_FMA_NEXT, LM)                                                            \
            }                                                                                            \
            if (A != a_end) {                                                                            \
                const vfloat32m##LM##_t b = __riscv_vle32_v_f32m##LM(B, vl);                             \
                RV_ROWS8(RV_ACC_FMA, LM)                                                                 \
            }                                                                                            \
        } else {                                                                                         \
            RV_UNROLL_K(UNROLL)                                                                          \
            for (int k = 0; k < K; ++k, B += ldb) {                                                      \
                const vfloat32m##LM##_t b = __riscv_vle32_v_f32m##LM(B, vl);                             \
                RV_ROWS8(RV_ACC_FMA, LM)                                                                 \
            }                                                                                            \
        }                                                                                                \
        RV_ROWS8(RV_ACC_STORE, LM)                                                                       \
    }
#ifndef U8
#define U8 2
#define U4 2
#define U2 4
#define U1 4
#endif
RV_DEF_TILE_V(8, U8)
RV_DEF_TILE_V(4, U4)
RV_DEF_TILE_V(2, U2)
RV_DEF_TILE_V(1, U1)
#undef RV_DEF_TILE_V

/* One column panel at LMUL LM, rows [0, m): full MR-row tiles, then the rows left over as at most three tiles of
 * 4, 2 and 1 rows (m is a run-time extent; every tile height is a compile-time MR, so each is a separate copy of
 * the tile, and powers of two need 4 copies per LMUL where one per height needed 8). The tile loop stays a loop
 * (see RV_DOT_PANEL). */
#define RV_DEF_PANEL_V(LM, MR)                                                                            \
    RV_INLINE void rv_dot_panel_inline_m##LM(int m, int k, const float *A, long sam, long sak, const float *B, \
                                             long ldb, float *C, long ldc, size_t vl) {                   \
        int i = 0;                                                                                       \
        RV_TILE_LOOP                                                                                     \
        for (; i + (MR) <= m; i += (MR))                                                                 \
            rv_dot_tile_m##LM(MR, k, A + i * sam, sam, sak, B, ldb, C + i * ldc, ldc, vl);               \
        if ((MR) > 4 && m - i >= 4) {                                                                    \
            rv_dot_tile_m##LM(4, k, A + i * sam, sam, sak, B, ldb, C + i * ldc, ldc, vl);                \
            i += 4;                                                                                      \
        }                                                                                                \
        if ((MR) > 2 && m - i >= 2) {                                                                    \
            rv_dot_tile_m##LM(2, k, A + i * sam, sam, sak, B, ldb, C + i * ldc, ldc, vl);                \
            i += 2;                                                                                      \
        }                                                                                                \
        if (m - i >= 1) rv_dot_tile_m##LM(1, k, A + i * sam, sam, sak, B, ldb, C + i * ldc, ldc, vl);     \
    }
RV_DEF_PANEL_V(8, 3)
RV_DEF_PANEL_V(4, 7)
RV_DEF_PANEL_V(2, 8)
RV_DEF_PANEL_V(1, 8)
#undef RV_DEF_PANEL_V

/* The panels are most of a kernel's compile time (each is several copies of an unrolled tile). A kernel built by
 * compiler/api.py is compiled with RV_DOT_PANELS_EXTERN and calls the copies in the runtime object
 * (rvtune_dot_panels.c, compiled once per toolchain, specialised there for the usual A row strides); a kernel C
 * compiled alone keeps them inline. One call per panel and K block: a few instructions against the panel's
 * K x (1 + 2 MR). Their names start with "rv_dot_panel_" (runtime_object.KERNEL_HELPER_PREFIX): the instruction
 * counter counts them as the kernel's own (kernel_insns). */
#define RV_DECL_PANEL_V(LM)                                                                               \
    void rv_dot_panel_m##LM(int m, int k, const float *A, long sam, long sak, const float *B, long ldb,  \
                            float *C, long ldc, size_t vl);
RV_DECL_PANEL_V(8)
RV_DECL_PANEL_V(4)
RV_DECL_PANEL_V(2)
RV_DECL_PANEL_V(1)
#undef RV_DECL_PANEL_V
#if defined(RV_DOT_PANELS_EXTERN)
#define RV_DOT_PANEL_CALL(LM) rv_dot_panel_m##LM(m, k, A, sam, sak, B + j, ldb, C + j, ldc, vl)
#else
#define RV_DOT_PANEL_CALL(LM) rv_dot_panel_inline_m##LM(m, k, A, sam, sak, B + j, ldb, C + j, ldc, vl)
#endif

/* Column panels over [0, n): the widest LMUL whose half is still exceeded by the columns left (so a 32-wide
 * rest runs as LMUL 4 with 7 rows, not LMUL 8 at half width with 3), vl = the columns left, at most one
 * register group. N (a constant) bounds n, so clang drops the panels a block cannot have. */
#define RV_DOT_PANELS_PART                                                                                \
    if (N > 32)                                                                                          \
        for (; n - j > 32; j += 64) {                                                                    \
            const size_t vl = __riscv_vsetvl_e32m8((size_t)(n - j));                                     \
            RV_DOT_PANEL_CALL(8);                                                                        \
        }                                                                                                \
    if (N > 16)                                                                                          \
        for (; n - j > 16; j += 32) {                                                                    \
            const size_t vl = __riscv_vsetvl_e32m4((size_t)(n - j));                                     \
            RV_DOT_PANEL_CALL(4);                                                                        \
        }                                                                                                \
    if (N > 8)                                                                                           \
        for (; n - j > 8; j += 16) {                                                                     \
            const size_t vl = __riscv_vsetvl_e32m2((size_t)(n - j));                                     \
            RV_DOT_PANEL_CALL(2);                                                                        \
        }                                                                                                \
    for (; j < n; j += 8) {                                                                              \
        const size_t vl = __riscv_vsetvl_e32m1((size_t)(n - j));                                         \
        RV_DOT_PANEL_CALL(1);                                                                            \
    }
#elif defined(__AVX512F__)
RV_DOT_TILE(rv_dot_tile_2x16, rv_vf16, 8, 2, 1)
RV_DOT_TILE(rv_dot_tile_16, rv_vf16, 8, 1, 1)
RV_DOT_TILE(rv_dot_tile_8, rv_vf8, 8, 1, 1)
#define RV_DOT_PANELS                                                                                     \
    for (; j + 32 <= N; j += 32) RV_DOT_PANEL(rv_dot_tile_2x16, 8);                                      \
    for (; j + 16 <= N; j += 16) RV_DOT_PANEL(rv_dot_tile_16, 8);                                        \
    for (; j + 8 <= N; j += 8) RV_DOT_PANEL(rv_dot_tile_8, 8);
#else
RV_DOT_TILE(rv_dot_tile_2x8, rv_vf8, 4, 2, 1)
RV_DOT_TILE(rv_dot_tile_8, rv_vf8, 4, 1, 1)
#define RV_DOT_PANELS                                                                                     \
    for (; j + 16 <= N; j += 16) RV_DOT_PANEL(rv_dot_tile_2x8, 4);                                       \
    for (; j + 8 <= N; j += 8) RV_DOT_PANEL(rv_dot_tile_8, 4);
#endif

/* Whether a whole B block is read in place instead of copied (dot_kernel.InPlaceB, decided per block at run
 * time): on RVV the copy is instructions the dot does not need; on x86 the copy is worth its cost (a packed
 * panel: B rows of a large matrix are a power of two apart and evict each other from L1). */
#if defined(__riscv_v)
#define RV_DOT_B_IN_PLACE 1
#else
#define RV_DOT_B_IN_PLACE 0
#endif

/* Whether rv_dot_f32_part reads only the data of a masked tile (RVV: its panels run over the data extents),
 * so that a tile loaded for it alone needs no zeros written past its mask (ptr_analysis: the fills are
 * `if (!RV_DOT_DATA_ONLY)`). Elsewhere the whole tiles are multiplied and the zeros are needed. */
#if defined(__riscv_v)
#define RV_DOT_DATA_ONLY 1
#else
#define RV_DOT_DATA_ONLY 0
#endif

/* C[m x n] += A[m x k] * B[k x n] of a block whose tiles are M x K and K x N (compile-time) but hold data only in
 * their first m rows / k columns of A and k rows / n columns of B, the rest zeros (a masked load's tail):
 * the zero part adds nothing, so only the data is multiplied (C's rows >= m and columns >= n keep what they
 * had; exact, but for a NaN that an inf of the data times a padding zero would have put there). RVV: the
 * panels above run over the data only. Elsewhere the whole tiles are multiplied, zeros included (the x86
 * tiles are specialised for their compile-time shapes). */
RV_INLINE void rv_dot_f32_part(int M, int N, int K, int m, int n, int k, const float *A, long sam, long sak,
                               const float *B, long ldb, float *C, long ldc) {
    int j = 0;
#if defined(__riscv_v)
    m = m < M ? m : M;
    n = n < N ? n : N;
    k = k < K ? k : K;
    RV_DOT_PANELS_PART
#else
    (void)m, (void)n, (void)k; /* the tiles keep the compile-time K their k loops are specialised for */
    RV_DOT_PANELS
    for (; j < N; ++j)
        for (int i = 0; i < M; ++i) {
            float acc = C[i * ldc + j];
            for (int kk = 0; kk < K; ++kk) acc += A[i * sam + kk * sak] * B[kk * ldb + j];
            C[i * ldc + j] = acc;
        }
#endif
}

/* C[M x N] += A[M x K] * B[K x N]: column panels of the widest tile that fits, then (not RVV) the columns
 * left over (N not a multiple of 8) in plain i-k order. */
RV_INLINE void rv_dot_f32(int M, int N, int K, const float *A, long sam, long sak, const float *B, long ldb,
                          float *C, long ldc) {
    rv_dot_f32_part(M, N, K, M, N, K, A, sam, sak, B, ldb, C, ldc);
}

#endif
