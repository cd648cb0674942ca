/* rvtune_dot_panels.c: the RVV GEMM column panels of rvtune_dot.h, compiled once per toolchain into the runtime
 * object every kernel built by compiler/api.py links (runtime_object.py); the kernels call them instead of
 * compiling their own copies (RV_DOT_PANELS_EXTERN).
 *
 * Inlined into a kernel, a panel knew A's row stride (sam: the packed A tile's width, a compile-time constant),
 * so each row's A element was a load at a constant offset from one pointer. Here the usual strides (A packed
 * row-major: sak = 1, sam = the tile's K of 8 to 256) each get their own copy with that constant; any other
 * layout takes the copy with run-time strides (one address computation per row and step more). */
#include "rvtune_rt.h"
#include "rvtune_dot.h"

#if defined(__riscv_v)
#define RV_PANEL_WITH_SAM(LM, SAM)                                                                        \
    case SAM:                                                                                            \
        rv_dot_panel_inline_m##LM(m, k, A, SAM, 1, B, ldb, C, ldc, vl);                                  \
        return;
#define RV_DEF_PANEL_EXTERN(LM)                                                                           \
    void rv_dot_panel_m##LM(int m, int k, const float *A, long sam, long sak, const float *B, long ldb,  \
                            float *C, long ldc, size_t vl) {                                             \
        if (sak == 1) switch (sam) {                                                                     \
            RV_PANEL_WITH_SAM(LM, 8)                                                                     \
            RV_PANEL_WITH_SAM(LM, 16)                                                                    \
            RV_PANEL_WITH_SAM(LM, 32)                                                                    \
            RV_PANEL_WITH_SAM(LM, 64)                                                                    \
            RV_PANEL_WITH_SAM(LM, 128)                                                                   \
            RV_PANEL_WITH_SAM(LM, 256)                                                                   \
            default: break;                                                                              \
            }                                                                                            \
        rv_dot_panel_inline_m##LM(m, k, A, sam, sak, B, ldb, C, ldc, vl);                                \
    }
RV_DEF_PANEL_EXTERN(8)
RV_DEF_PANEL_EXTERN(4)
RV_DEF_PANEL_EXTERN(2)
RV_DEF_PANEL_EXTERN(1)
#endif
