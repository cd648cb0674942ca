/* rvv_moe.c: a hand-written RVV-intrinsics fused mixture-of-experts GEMM, the yardstick of `rvtune bench-compiler`.
 *
 * The work of kernels/fused_moe.py (MUL_ROUTED_WEIGHT): for every (token, k) slot s = token * top_k + k routed to
 * expert e, C[s] = w[s] * A[token] @ B[e]^T, with A [M][K], B [E][N][K] (vLLM's layout: out feature, in feature),
 * C [M * top_k][N]. It reads the same routing inputs as the kernel: moe_align_block_size's sorted slot ids
 * (padded per block of BLOCK_M with the value num_valid) and one expert id per block.
 * Per expert: B[e]^T packed once, k-major (bt[k * N + j], one vle32 + one strided vsse32 per output feature),
 * then its slots (padding skipped, consecutive blocks of the expert joined) in tiles of 3 slots x one LMUL-8
 * vector of 64 output features, rvv_matmul.c's best shape: the 3 token rows packed k-major, per k one vle32 of
 * bt, three flw, three vfmacc.vf; the routing weight applied by one vfmul.vf per row before the store.
 * A tail of 2 or 1 slots takes the same tile with fewer rows.
 * `rvv_moe_wrap` makes the QEMU plugin count the whole call as `launch_insns`. Run:
 *   rvv_moe.elf M E K N TOP_K EM BLOCK_M REPS A.bin B.bin W.bin SORTED_IDS.bin EXPERT_IDS.bin C.bin
 */
#include <riscv_vector.h>
#include <stdio.h>
#include <stdlib.h>

#include "rvv_io.h"

#define MAX_K 4096
#define MAX_KN (1 << 20)
#define MAX_SLOTS (1 << 16)

/* B[e]^T, k-major: bt[k * n + j] = b[j * k_dim + k]. */
static inline void pack_bt(int n, int k_dim, const float *b, float *bt) {
    for (int j = 0; j < n; ++j)
        for (int k = 0; k < k_dim;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(k_dim - k));
            vfloat32m8_t row = __riscv_vle32_v_f32m8(b + (size_t)j * k_dim + k, vl);
            __riscv_vsse32_v_f32m8(bt + (size_t)k * n + j, (ptrdiff_t)(n * sizeof(float)), row, vl);
            k += (int)vl;
        }
}

/* `rows` (1..3, a constant once inlined) slots against the packed expert: C[slot] = w[slot] * A[token] @ bt. */
static inline __attribute__((always_inline)) void tile(int rows, const int *slots, int top_k, int n, int k_dim,
                                                       const float *A, const float *bt, const float *w, float *C) {
    static float ap[3 * MAX_K]; /* the tile's token rows, k-major: the rows' scalars of a k step are adjacent */
    for (int r = 0; r < rows; ++r) {
        const float *a = A + (size_t)(slots[r] / top_k) * k_dim;
        for (int k = 0; k < k_dim;) {
            size_t vl = __riscv_vsetvl_e32m8((size_t)(k_dim - k));
            __riscv_vsse32_v_f32m8(ap + 3 * k + r, 3 * sizeof(float), __riscv_vle32_v_f32m8(a + k, vl), vl);
            k += (int)vl;
        }
    }
    for (int j = 0; j < n;) {
        size_t vl = __riscv_vsetvl_e32m8((size_t)(n - j));
        vfloat32m8_t c0 = __riscv_vfmv_v_f_f32m8(0.0f, vl), c1 = c0, c2 = c0;
        const float *a = ap, *b = bt + j;
        for (int k = 0; k < k_dim; ++k, a += 3, b += n) {
            vfloat32m8_t bv = __riscv_vle32_v_f32m8(b, vl);
            c0 = __riscv_vfmacc_vf_f32m8(c0, a[0], bv, vl);
            if (rows > 1) c1 = __riscv_vfmacc_vf_f32m8(c1, a[1], bv, vl);
            if (rows > 2) c2 = __riscv_vfmacc_vf_f32m8(c2, a[2], bv, vl);
        }
        __riscv_vse32_v_f32m8(C + (size_t)slots[0] * n + j, __riscv_vfmul_vf_f32m8(c0, w[slots[0]], vl), vl);
        if (rows > 1)
            __riscv_vse32_v_f32m8(C + (size_t)slots[1] * n + j, __riscv_vfmul_vf_f32m8(c1, w[slots[1]], vl), vl);
        if (rows > 2)
            __riscv_vse32_v_f32m8(C + (size_t)slots[2] * n + j, __riscv_vfmul_vf_f32m8(c2, w[slots[2]], vl), vl);
        j += (int)vl;
    }
}

/* All slots of one expert, 3 at a time. */
static void expert_slots(const int *slots, int count, int top_k, int n, int k_dim, const float *A, const float *bt,
                         const float *w, float *C) {
    int s = 0;
    for (; s + 3 <= count; s += 3) tile(3, slots + s, top_k, n, k_dim, A, bt, w, C);
    if (count - s == 2) tile(2, slots + s, top_k, n, k_dim, A, bt, w, C);
    if (count - s == 1) tile(1, slots + s, top_k, n, k_dim, A, bt, w, C);
}

__attribute__((noinline)) void rvv_moe(int n, int k_dim, int top_k, int em, int block_m, int num_valid,
                                       const int *sorted_ids, const int *expert_ids, const float *A, const float *B,
                                       const float *w, float *C) {
    static float bt[MAX_KN];
    static int slots[MAX_SLOTS]; /* the current expert's valid slots, padding dropped */
    int count = 0, expert = -1;
    for (int blk = 0; blk * block_m < em; ++blk) {
        if (expert_ids[blk] != expert) {
            expert_slots(slots, count, top_k, n, k_dim, A, bt, w, C);
            count = 0;
            expert = expert_ids[blk];
            pack_bt(n, k_dim, B + (size_t)expert * n * k_dim, bt);
        }
        for (int i = blk * block_m; i < (blk + 1) * block_m && i < em; ++i)
            if (sorted_ids[i] < num_valid) slots[count++] = sorted_ids[i];
    }
    expert_slots(slots, count, top_k, n, k_dim, A, bt, w, C);
}

__attribute__((noinline)) void rvv_moe_wrap(int n, int k_dim, int top_k, int em, int block_m, int num_valid,
                                            const int *sorted_ids, const int *expert_ids, const float *A,
                                            const float *B, const float *w, float *C) {
    rvv_moe(n, k_dim, top_k, em, block_m, num_valid, sorted_ids, expert_ids, A, B, w, C);
}

int main(int argc, char **argv) {
    if (argc != 15) {
        fprintf(stderr, "usage: %s M E K N TOP_K EM BLOCK_M REPS A.bin B.bin W.bin SORTED_IDS.bin EXPERT_IDS.bin "
                        "C.bin\n", argv[0]);
        return 2;
    }
    int m = atoi(argv[1]), e = atoi(argv[2]), k_dim = atoi(argv[3]), n = atoi(argv[4]), top_k = atoi(argv[5]);
    int em = atoi(argv[6]), block_m = atoi(argv[7]), reps = atoi(argv[8]);
    if (m <= 0 || e <= 0 || k_dim <= 0 || k_dim > MAX_K || n <= 0 || (size_t)n * k_dim > MAX_KN || top_k <= 0 ||
        m * top_k > MAX_SLOTS || em <= 0 || block_m <= 0 || em % block_m != 0 || reps <= 0) {
        fprintf(stderr, "need positive sizes, K <= %d, N * K <= %d, M * TOP_K <= %d, EM a multiple of BLOCK_M\n",
                MAX_K, MAX_KN, MAX_SLOTS);
        return 2;
    }
    const int num_valid = m * top_k;
    const float *a = read_floats(argv[9], (size_t)m * k_dim), *b = read_floats(argv[10], (size_t)e * n * k_dim);
    const float *w = read_floats(argv[11], (size_t)num_valid);
    const int *sorted_ids = read_ints(argv[12], (size_t)em), *expert_ids = read_ints(argv[13], (size_t)(em / block_m));
    for (int i = 0; i < em / block_m; ++i)
        if (expert_ids[i] < 0 || expert_ids[i] >= e) {
            fprintf(stderr, "expert id %d of block %d is not in [0, %d)\n", expert_ids[i], i, e);
            return 2;
        }
    float *c = calloc((size_t)num_valid * n, sizeof(float));
    for (int r = 0; r < reps; ++r) rvv_moe_wrap(n, k_dim, top_k, em, block_m, num_valid, sorted_ids, expert_ids, a, b, w, c);
    write_floats(argv[14], c, (size_t)num_valid * n);
    return 0;
}
