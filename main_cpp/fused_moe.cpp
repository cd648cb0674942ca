// Custom harness of fused_moe_kernel: the worked example of a main_cpp/<name>.cpp (the seeds' convention).
//
// ONE file serves every block config. The grid comes from the block constants the linked config defines
// (`extern const int fused_moe_kernel_BLOCK_SIZE_*`, declared by the compiler's launcher header), and every
// size comes from the golden files. The BLOCK_SIZE_M-dependent inputs (sorted_token_ids, expert_ids,
// num_tokens_post_padded and hence EM) are the golden variant for this config's BLOCK_SIZE_M; the
// consistency checks below reject a variant made for another BLOCK_SIZE_M instead of computing garbage.
//
// Command line (docs/contracts.md, "Harness"): common options, then the golden files, inputs in kernel
// parameter order and then the expected output:
//   fused_moe.elf [--warmup N] [--runs N] [--no-check] [--threads N] [--atol X] [--rtol X]
//       a.txt b.txt topk_weights.txt sorted_token_ids.txt expert_ids.txt num_tokens_post_padded.txt
//       expected_c.txt
// Shapes (rank > 2 flattened to (prod(leading), last)): a [M, K]; b [E, N, K] -> (E*N, K);
// topk_weights [M, top_k] (its own shape is irrelevant: M*top_k values); sorted_token_ids [EM];
// expert_ids [EM / BLOCK_SIZE_M]; num_tokens_post_padded [1]; c [M, top_k, N] -> (M*top_k, N).
#include <cstdint>

#include "fused_moe_kernel_launcher.h"
#include "rvtune_harness.h"

namespace {

constexpr const char *kUsage =
    "a.txt b.txt topk_weights.txt sorted_token_ids.txt expert_ids.txt num_tokens_post_padded.txt "
    "expected_c.txt";

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Everything one kernel launch needs; the timed function takes it by pointer (rvtune_bench's ctx).
struct Launch {
    uint32_t grid;
    int threads;
    rvtune_tensor a, b, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded;
    int32_t N, K, EM, num_valid_tokens;
};

void run_kernel(void *ctx) {
    const Launch &l = *static_cast<const Launch *>(ctx);
    const int32_t K = l.K, N = l.N;
    fused_moe_kernel_wrap(l.grid, 1, 1, l.threads, fused_moe_kernel,
                          static_cast<float *>(l.a.data), static_cast<float *>(l.b.data),
                          static_cast<float *>(l.c.data), static_cast<float *>(l.topk_weights.data),
                          static_cast<int32_t *>(l.sorted_token_ids.data), static_cast<int32_t *>(l.expert_ids.data),
                          static_cast<int32_t *>(l.num_tokens_post_padded.data), N, K, l.EM, l.num_valid_tokens,
                          /*stride_am*/ K, /*stride_ak*/ 1,
                          /*stride_be*/ N * K, /*stride_bk*/ 1, /*stride_bn*/ K,
                          /*stride_cm*/ N, /*stride_cn*/ 1);
}

// A value that must fit the kernel's int32 arguments (the kernel indexes with 32-bit offsets).
int32_t as_i32(int64_t v, const rvtune_tensor &from, const char *what) {
    if (v < 0 || v > INT32_MAX)
        rvtune_fail("%s:1: %s = %lld from %s does not fit int32", from.path, what, static_cast<long long>(v),
                    from.name);
    return static_cast<int32_t>(v);
}

}  // namespace

int main(int argc, char **argv) {
    rvtune_opts o = rvtune_default_opts(1e-4, 1e-4);
    rvtune_parse_args(argc, argv, &o);
    rvtune_expect_positionals(&o, 7, kUsage);

    static Launch l;  // static: large tensors' headers live for the whole run, never on the stack
    rvtune_tensor expected_c;
    rvtune_read_txt(&l.a, "a", o.pos[0], RVTUNE_F32);
    rvtune_read_txt(&l.b, "b", o.pos[1], RVTUNE_F32);
    rvtune_read_txt(&l.topk_weights, "topk_weights", o.pos[2], RVTUNE_F32);
    rvtune_read_txt(&l.sorted_token_ids, "sorted_token_ids", o.pos[3], RVTUNE_I32);
    rvtune_read_txt(&l.expert_ids, "expert_ids", o.pos[4], RVTUNE_I32);
    rvtune_read_txt(&l.num_tokens_post_padded, "num_tokens_post_padded", o.pos[5], RVTUNE_I32);
    rvtune_read_txt(&expected_c, "c", o.pos[6], RVTUNE_F32);

    const int top_k = fused_moe_kernel_top_k, bm = fused_moe_kernel_BLOCK_SIZE_M, bn = fused_moe_kernel_BLOCK_SIZE_N;
    const int64_t M = l.a.rows, K = l.a.cols, N = expected_c.cols;
    if (top_k <= 0 || bm <= 0 || bn <= 0)
        rvtune_fail("fused_moe_kernel: top_k=%d BLOCK_SIZE_M=%d BLOCK_SIZE_N=%d must be positive", top_k, bm, bn);

    // Sizes agree across files, so a wrong or stale file is named instead of read out of bounds.
    rvtune_expect_shape(&expected_c, M * top_k, N);
    if (N == 0 || l.b.cols != K || l.b.rows % N != 0)
        rvtune_fail("%s:1: b must be [E, N=%lld, K=%lld] flattened to (E*N, K), the file holds %lld x %lld", l.b.path,
                    static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(l.b.rows),
                    static_cast<long long>(l.b.cols));
    const int64_t E = l.b.rows / N;
    rvtune_expect_numel(&l.topk_weights, M * top_k);
    rvtune_expect_numel(&l.num_tokens_post_padded, 1);
    const int64_t EM = rvtune_numel(&l.sorted_token_ids);
    const int64_t em_file = static_cast<int32_t *>(l.num_tokens_post_padded.data)[0];
    if (em_file != EM)
        rvtune_fail("%s:2: num_tokens_post_padded = %lld but %s holds %lld slots: files from different variants",
                    l.num_tokens_post_padded.path, static_cast<long long>(em_file), l.sorted_token_ids.path,
                    static_cast<long long>(EM));
    // The per-BLOCK_SIZE_M variant: padding makes EM a multiple of BLOCK_SIZE_M, one expert id per block.
    if (EM % bm != 0 || rvtune_numel(&l.expert_ids) != EM / bm)
        rvtune_fail("%s:1: %lld sorted slots and %lld expert blocks do not fit BLOCK_SIZE_M=%d: use the golden "
                    "variant generated for BLOCK_SIZE_M=%d",
                    l.expert_ids.path, static_cast<long long>(EM), static_cast<long long>(rvtune_numel(&l.expert_ids)),
                    bm, bm);
    for (int64_t i = 0; i < rvtune_numel(&l.expert_ids); i++) {
        const int32_t e = static_cast<int32_t *>(l.expert_ids.data)[i];
        if (e < 0 || e >= E)
            rvtune_fail("%s:2: expert_ids[%lld] = %d is not an expert of b (E=%lld)", l.expert_ids.path,
                        static_cast<long long>(i), e, static_cast<long long>(E));
    }
    for (int64_t i = 0; i < EM; i++) {  // padding slots hold M*top_k (masked off); real slots index c
        const int32_t s = static_cast<int32_t *>(l.sorted_token_ids.data)[i];
        if (s < 0 || s > M * top_k)
            rvtune_fail("%s:2: sorted_token_ids[%lld] = %d is outside [0, %lld]", l.sorted_token_ids.path,
                        static_cast<long long>(i), s, static_cast<long long>(M * top_k));
    }

    l.N = as_i32(N, expected_c, "N");
    l.K = as_i32(K, l.a, "K");
    l.EM = as_i32(EM, l.sorted_token_ids, "EM");
    l.num_valid_tokens = as_i32(M * top_k, l.a, "num_valid_tokens");
    l.threads = o.threads;
    // The seeds' grid: one program per (BLOCK_SIZE_M slots, BLOCK_SIZE_N columns) tile of the padded slots.
    l.grid = static_cast<uint32_t>(cdiv(EM, bm) * cdiv(N, bn));
    // c is zeroed before every run: padding slots are never stored, so only a clean buffer shows that
    // every real slot was written by this run.
    rvtune_output_like(&l.c, &expected_c);

    rvtune_tensor *const outs[] = {&l.c};
    rvtune_bench(&o, run_kernel, &l, outs, 1);
    int ok = 1;
    if (o.check) {
        ok &= rvtune_check("c", &l.c, &expected_c, o.atol, o.rtol);
        // every buffer the kernel got: a store past either end overwrote its guard zone's canaries
        const rvtune_tensor *const kernel_buffers[] = {&l.a, &l.b, &l.c, &l.topk_weights, &l.sorted_token_ids,
                                                       &l.expert_ids, &l.num_tokens_post_padded};
        for (const rvtune_tensor *t : kernel_buffers) ok &= rvtune_check_guards(t);
    }
    return rvtune_exit_code(&o, ok);
}
