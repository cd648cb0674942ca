/*
 * libicount: a QEMU (7.2 plugin API) instruction counter for pytest-rvtune.
 *
 *   qemu-riscv64 -plugin libicount.so,out=<file>,symbol=<name> ELF ...
 *
 * At exit it writes one line to <file>:
 *   insns=<n> vector_insns=<n> kernel_insns=<n>
 * insns: every executed guest instruction; vector_insns: executed RVV instructions; kernel_insns: executed
 * instructions whose address lies inside the ELF symbol <name> (the kernel function).
 *
 * Counting uses inline adds (no helper call per instruction), so it is cheap but NOT atomic: counts are exact
 * only with one guest thread (run the ELF with --threads 1).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

static uint64_t insns;
static uint64_t vector_insns;
static uint64_t kernel_insns;
static const char *out_path;
static const char *symbol;

/* RVV lives in three major opcodes: OP-V (arithmetic, vset*) and the FP load/store opcodes, where the
 * width field (bits 14:12) tells vector accesses (0, 5, 6, 7) from scalar FP ones (1=H, 2=W, 3=D, 4=Q). */
static int is_vector(const unsigned char *bytes, size_t size)
{
    if (size != 4) {
        return 0; /* compressed (16-bit) encodings have no vector instructions */
    }
    uint32_t word = (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 |
                    (uint32_t)bytes[3] << 24;
    uint32_t opcode = word & 0x7f;
    uint32_t width = (word >> 12) & 0x7;
    if (opcode == 0x57) {
        return 1;
    }
    if (opcode == 0x07 || opcode == 0x27) {
        return width == 0 || width >= 5;
    }
    return 0;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &insns, 1);
        if (is_vector(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn))) {
            qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &vector_insns, 1);
        }
        if (symbol != NULL) {
            /* Lookup happens once per translation, not per execution: cheap enough. */
            const char *name = qemu_plugin_insn_symbol(insn);
            if (name != NULL && strcmp(name, symbol) == 0) {
                qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &kernel_insns,
                                                           1);
            }
        }
    }
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
    FILE *f = fopen(out_path, "w");
    if (f == NULL) {
        fprintf(stderr, "libicount: cannot write %s\n", out_path);
        return;
    }
    fprintf(f, "insns=%" PRIu64 " vector_insns=%" PRIu64 " kernel_insns=%" PRIu64 "\n", insns, vector_insns,
            kernel_insns);
    fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    for (int i = 0; i < argc; i++) {
        /* argv stays valid for the plugin's lifetime (qemu-plugin.h), so keep pointers into it. */
        if (strncmp(argv[i], "out=", 4) == 0) {
            out_path = argv[i] + 4;
        } else if (strncmp(argv[i], "symbol=", 7) == 0) {
            symbol = argv[i][7] != '\0' ? argv[i] + 7 : NULL;
        } else {
            fprintf(stderr, "libicount: unknown argument '%s' (expected out=<file>,symbol=<name>)\n", argv[i]);
            return -1;
        }
    }
    if (out_path == NULL || out_path[0] == '\0') {
        fprintf(stderr, "libicount: missing out=<file> argument\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
