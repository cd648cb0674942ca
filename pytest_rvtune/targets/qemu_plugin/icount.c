/*
 * libicount: a QEMU (7.2 plugin API) instruction counter for pytest-rvtune.
 *
 *   qemu-riscv64 -plugin libicount.so,out=<file>,symbol=<kernel>,launch=<launcher>[,helpers=<prefix>] ELF ...
 *
 * At exit it writes one line to <file>:
 *   insns=<n> vector_insns=<n> kernel_insns=<n> launches=<n> [launch_insns=<n>]
 * insns: every executed guest instruction; vector_insns: executed RVV instructions; kernel_insns: executed
 * instructions whose address lies inside the ELF symbol <kernel> (the kernel function) or inside a function whose
 * name starts with <prefix> (the compiler runtime's precompiled parts of kernels, e.g. the GEMM panels, which only
 * kernels call).
 * launches: completed calls of the function <launcher> (`<kernel>_wrap`); launch_insns: every guest instruction
 * executed, on any thread, while a launch was running, i.e. from the launcher's first instruction to the
 * caller's instruction after the call. That covers the grid walk, the kernel, the libc calls the generated code
 * makes (memset, memcpy, logf) and the worker threads the launcher starts (they live inside the launch: the
 * launcher joins them before it returns); it leaves out the harness's file I/O and checks, which run outside.
 * launch_insns is printed only when <launcher> is a function of the ELF.
 *
 * How a launch is seen without reading registers (the 7.2 API cannot): the plugin reads the ELF's symbol table,
 * finds <launcher> and every direct call to it (`jal`, and `auipc`+`jalr` pairs), and so knows before any
 * code runs each call's return address. An exec callback at the launcher's entry opens the window and one at
 * each return address closes it: two callbacks per launch, nothing per instruction. A call through a function
 * pointer is not seen (the harnesses call the launcher directly).
 *
 * Counting uses inline adds (no helper call per instruction), so it is cheap but NOT atomic: counts are exact
 * only with one guest thread (run the ELF with --threads 1).
 *
 * Two optional parts feed the timing model (pytest_rvtune/timing_model.py), both limited to the launch window:
 *   blocks=<file>   per translated block (guest vaddr, its instructions' bytes) the number of times it was
 *                   executed inside launches, one line per block:  <vaddr hex> <count> <insn hex>:<insn hex>...
 *                   (a TB-level inline add per block; the window's counts are deltas taken when it opens and
 *                   closes, so nothing runs per instruction).
 *   l1d=<bytes>:<ways>:<line>,l2=<bytes>:<ways>:<line>
 *                   a data-cache model: every load and store inside a launch goes through a set-associative LRU
 *                   L1D, its misses through a set-associative LRU L2 (write-allocate, no prefetcher, one core);
 *                   the output line gains l1d_accesses=<n> l1d_misses=<n> l2_misses=<n>. This costs a helper call
 *                   per memory access (QEMU calls it also for the element accesses of RVV loads and stores).
 */
#include <elf.h>
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
static const char *helpers; /* name prefix of functions counted as the kernel's own */
static size_t helpers_len;

/* The launch window (see the header comment). */
static const char *launch_symbol;
static int launch_found;        /* the launcher is a function of the ELF */
static uint64_t launch_entry;   /* its address, as linked */
static uint64_t *return_sites;  /* addresses of the instructions after each direct call to it */
static size_t n_return_sites;
static int launch_looked_up;   /* at the first translation: the guest's binary and entry are known then */
static int launch_open;
static unsigned int launch_vcpu; /* the thread that called the launcher */
static uint64_t launch_start;    /* insns when the window opened */
static uint64_t launch_insns;
static uint64_t launches;

/* ------------------------------------------------------------------------- per-block counts (blocks=) */
struct block {
    uint64_t vaddr;
    uint64_t count;     /* executions since translation (inline add at the block's start) */
    uint64_t at_open;   /* count when the current launch window opened */
    uint64_t in_launch; /* executions inside launch windows */
    size_t n_insns;
    unsigned char *sizes; /* each instruction's length in bytes */
    unsigned char *bytes; /* the instructions' bytes, back to back */
    size_t n_bytes;
    struct block *next;   /* hash chain */
};

#define BLOCK_BUCKETS 65536
static const char *blocks_path;
static struct block *buckets[BLOCK_BUCKETS];
static struct block **all_blocks;
static size_t n_blocks;

/* -------------------------------------------------------------------------------- the data-cache model */
struct cache {
    uint64_t sets, ways;
    unsigned line_shift;
    uint64_t *tags;  /* sets x ways; line number + 1, 0 = empty */
    uint64_t *stamp; /* last use, for LRU */
    uint64_t clock;
    uint64_t accesses, misses;
};

static struct cache l1d, l2;
static int cache_model; /* both levels configured */

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

/* ------------------------------------------------------------------------------- the ELF: launcher, calls */
static uint32_t read_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void add_return_site(uint64_t address)
{
    uint64_t *grown = realloc(return_sites, (n_return_sites + 1) * sizeof *return_sites);
    if (grown == NULL) {
        return; /* out of memory: this call is not seen, and its launches are not counted */
    }
    return_sites = grown;
    return_sites[n_return_sites++] = address;
}

/* Record the return address of every direct call to `target` in the code bytes [code, code + size) linked at
 * `address`. RV64 has no c.jal, so calls are `jal rd` (rd != x0) or `auipc r; jalr rd, off(r)`. */
static void scan_calls(const unsigned char *code, uint64_t size, uint64_t address, uint64_t target)
{
    uint64_t at = 0;
    while (at + 2 <= size) {
        if ((code[at] & 3) != 3) {
            at += 2; /* compressed */
            continue;
        }
        if (at + 4 > size) {
            break;
        }
        uint32_t word = read_u32(code + at);
        uint32_t opcode = word & 0x7f;
        uint32_t rd = (word >> 7) & 31;
        if (opcode == 0x6f && rd != 0) { /* jal */
            int64_t imm = (int64_t)(((word >> 31) & 1) << 20 | ((word >> 12) & 0xff) << 12 |
                                    ((word >> 20) & 1) << 11 | ((word >> 21) & 0x3ff) << 1);
            imm = (imm ^ (1 << 20)) - (1 << 20); /* sign-extend 21 bits */
            if (address + at + imm == target) {
                add_return_site(address + at + 4);
            }
        } else if (opcode == 0x17 && at + 8 <= size && (code[at + 4] & 3) == 3) { /* auipc, then jalr? */
            uint32_t next = read_u32(code + at + 4);
            uint32_t next_rd = (next >> 7) & 31;
            uint32_t next_rs1 = (next >> 15) & 31;
            if ((next & 0x7f) == 0x67 && ((next >> 12) & 7) == 0 && next_rd != 0 && next_rs1 == rd) {
                int64_t hi = (int64_t)(int32_t)(word & 0xfffff000u);
                int64_t lo = (int64_t)((int32_t)next >> 20);
                if (address + at + hi + lo == target) {
                    add_return_site(address + at + 8);
                }
            }
        }
        at += 4;
    }
}

/* x86-64 (the ranking-fidelity benchmark counts host builds under qemu-x86_64): direct calls are `call rel32`
 * (E8 + 4 bytes). Variable-length code is not decoded here: every E8 byte whose rel32 lands exactly on the
 * launcher is taken as a call. A stray match inside another instruction would add a return site that is never
 * executed as an instruction start (or, very rarely, is): the launcher's address is the filter. */
static void scan_calls_x86(const unsigned char *code, uint64_t size, uint64_t address, uint64_t target)
{
    for (uint64_t at = 0; at + 5 <= size; at++) {
        if (code[at] == 0xe8) {
            int64_t rel = (int64_t)(int32_t)read_u32(code + at + 1);
            if (address + at + 5 + rel == target) {
                add_return_site(address + at + 5);
            }
        }
    }
}

/* Read the guest ELF's symbol table: find `name` and scan every function for calls to it. Returns 1 when the
 * ELF defines `name` as a function. Any format problem just means "not found" (launch_insns is then absent). */
static int find_launcher(const char *path, const char *name)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return 0;
    }
    unsigned char *image = NULL;
    long length = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (length = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        image = malloc((size_t)length);
        if (image != NULL && fread(image, 1, (size_t)length, f) != (size_t)length) {
            free(image);
            image = NULL;
        }
    }
    fclose(f);
    if (image == NULL || (size_t)length < sizeof(Elf64_Ehdr)) {
        free(image);
        return 0;
    }
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    int found = 0;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        (eh->e_machine != EM_RISCV && eh->e_machine != EM_X86_64) || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > (uint64_t)length) {
        goto done;
    }
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(image + eh->e_shoff);
    for (unsigned s = 0; s < eh->e_shnum && !found; s++) {
        if (sh[s].sh_type != SHT_SYMTAB || sh[s].sh_link >= eh->e_shnum ||
            sh[s].sh_offset + sh[s].sh_size > (uint64_t)length) {
            continue;
        }
        const Elf64_Shdr *strtab = &sh[sh[s].sh_link];
        if (strtab->sh_offset + strtab->sh_size > (uint64_t)length) {
            continue;
        }
        const Elf64_Sym *syms = (const Elf64_Sym *)(image + sh[s].sh_offset);
        size_t n = sh[s].sh_size / sizeof(Elf64_Sym);
        const char *names = (const char *)(image + strtab->sh_offset);
        for (size_t i = 0; i < n; i++) {
            if (ELF64_ST_TYPE(syms[i].st_info) == STT_FUNC && syms[i].st_name < strtab->sh_size &&
                strcmp(names + syms[i].st_name, name) == 0) {
                launch_entry = syms[i].st_value;
                found = 1;
                break;
            }
        }
        /* Every function's code, scanned from its own start so 16/32-bit decoding never loses step. */
        for (size_t i = 0; found && i < n; i++) {
            const Elf64_Sym *sym = &syms[i];
            if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC || sym->st_size == 0 || sym->st_shndx >= eh->e_shnum) {
                continue;
            }
            const Elf64_Shdr *text = &sh[sym->st_shndx];
            if (text->sh_type != SHT_PROGBITS || !(text->sh_flags & SHF_EXECINSTR) ||
                sym->st_value < text->sh_addr || sym->st_value + sym->st_size > text->sh_addr + text->sh_size ||
                text->sh_offset + text->sh_size > (uint64_t)length) {
                continue;
            }
            const unsigned char *code = image + text->sh_offset + (sym->st_value - text->sh_addr);
            if (eh->e_machine == EM_X86_64) {
                scan_calls_x86(code, sym->st_size, sym->st_value, launch_entry);
            } else {
                scan_calls(code, sym->st_size, sym->st_value, launch_entry);
            }
        }
    }
    if (found) {
        /* Run-time addresses differ from link-time ones by the load bias (0 for the static, non-PIE ELFs we
         * build): keep them relative to the entry point, whose run-time address the caller adds. */
        launch_entry -= eh->e_entry;
        for (size_t i = 0; i < n_return_sites; i++) {
            return_sites[i] -= eh->e_entry;
        }
    }
done:
    free(image);
    return found;
}

/* --------------------------------------------------------------------------------------- blocks (TBs) */
static size_t block_hash(uint64_t vaddr, size_t n_bytes)
{
    return (size_t)((vaddr >> 1) ^ (vaddr >> 17) ^ n_bytes) % BLOCK_BUCKETS;
}

/* The record of a translated block: QEMU may translate the same code more than once (after a TB flush, or
 * when another thread needs it), and every translation counts into the one record of that code. */
static struct block *block_of(struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
    size_t n_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        n_bytes += qemu_plugin_insn_size(qemu_plugin_tb_get_insn(tb, i));
    }
    unsigned char *bytes = malloc(n_bytes ? n_bytes : 1);
    unsigned char *sizes = malloc(n ? n : 1);
    if (bytes == NULL || sizes == NULL) {
        free(bytes);
        free(sizes);
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t size = qemu_plugin_insn_size(insn);
        memcpy(bytes + at, qemu_plugin_insn_data(insn), size);
        sizes[i] = (unsigned char)size;
        at += size;
    }
    size_t h = block_hash(vaddr, n_bytes);
    for (struct block *b = buckets[h]; b != NULL; b = b->next) {
        if (b->vaddr == vaddr && b->n_bytes == n_bytes && b->n_insns == n && memcmp(b->bytes, bytes, n_bytes) == 0) {
            free(bytes);
            free(sizes);
            return b;
        }
    }
    struct block *b = calloc(1, sizeof *b);
    struct block **grown = realloc(all_blocks, (n_blocks + 1) * sizeof *all_blocks);
    if (b == NULL || grown == NULL) {
        free(b);
        free(bytes);
        free(sizes);
        return NULL;
    }
    all_blocks = grown;
    all_blocks[n_blocks++] = b;
    b->vaddr = vaddr;
    b->n_insns = n;
    b->bytes = bytes;
    b->sizes = sizes;
    b->n_bytes = n_bytes;
    b->next = buckets[h];
    buckets[h] = b;
    return b;
}

static void write_blocks(void)
{
    FILE *f = fopen(blocks_path, "w");
    if (f == NULL) {
        fprintf(stderr, "libicount: cannot write %s\n", blocks_path);
        return;
    }
    for (size_t i = 0; i < n_blocks; i++) {
        const struct block *b = all_blocks[i];
        if (b->in_launch == 0) {
            continue;
        }
        fprintf(f, "%" PRIx64 " %" PRIu64 " ", b->vaddr, b->in_launch);
        size_t at = 0;
        for (size_t k = 0; k < b->n_insns; k++) {
            if (k > 0) {
                fputc(':', f);
            }
            for (size_t j = 0; j < b->sizes[k]; j++) {
                fprintf(f, "%02x", b->bytes[at + j]);
            }
            at += b->sizes[k];
        }
        fputc('\n', f);
    }
    fclose(f);
}

/* ---------------------------------------------------------------------------------------- the caches */
/* "<bytes>:<ways>:<line bytes>", each a power of two, sets = bytes / ways / line >= 1. */
static int cache_init(struct cache *c, const char *spec, const char *name)
{
    unsigned long long size, ways, line;
    if (sscanf(spec, "%llu:%llu:%llu", &size, &ways, &line) != 3 || size == 0 || ways == 0 || line == 0 ||
        (line & (line - 1)) != 0 || size % (ways * line) != 0) {
        fprintf(stderr, "libicount: %s=%s: expected <bytes>:<ways>:<line bytes> (line a power of two, bytes a "
                "multiple of ways x line)\n", name, spec);
        return -1;
    }
    c->ways = ways;
    c->sets = size / (ways * line);
    c->line_shift = 0;
    while ((1ull << c->line_shift) < line) {
        c->line_shift++;
    }
    c->tags = calloc(c->sets * c->ways, sizeof *c->tags);
    c->stamp = calloc(c->sets * c->ways, sizeof *c->stamp);
    if (c->tags == NULL || c->stamp == NULL) {
        fprintf(stderr, "libicount: out of memory for the %s model\n", name);
        return -1;
    }
    return 0;
}

/* One access to the line holding `address`: 1 on a hit; on a miss the least recently used way is replaced. */
static int cache_access(struct cache *c, uint64_t address)
{
    uint64_t line = address >> c->line_shift;
    uint64_t *tags = c->tags + (line % c->sets) * c->ways;
    uint64_t *stamp = c->stamp + (line % c->sets) * c->ways;
    uint64_t victim = 0;
    c->accesses++;
    c->clock++;
    for (uint64_t w = 0; w < c->ways; w++) {
        if (tags[w] == line + 1) {
            stamp[w] = c->clock;
            return 1;
        }
        if (stamp[w] < stamp[victim]) {
            victim = w;
        }
    }
    c->misses++;
    tags[victim] = line + 1;
    stamp[victim] = c->clock;
    return 0;
}

static void on_memory(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *userdata)
{
    if (!launch_open) {
        return;
    }
    uint64_t size = 1ull << qemu_plugin_mem_size_shift(info);
    uint64_t first = vaddr >> l1d.line_shift, last = (vaddr + size - 1) >> l1d.line_shift;
    for (uint64_t line = first; line <= last; line++) { /* an access across a line boundary touches both */
        uint64_t address = line << l1d.line_shift;
        if (!cache_access(&l1d, address)) {
            cache_access(&l2, address);
        }
    }
}

/* -------------------------------------------------------------------------------------- the launch window */
/* `userdata` is the record of the block holding the launcher's entry or the return site (or NULL): its
 * execution counter was bumped at the block's start, before this callback, so it is corrected by one to keep
 * the launcher's first block inside the window and the caller's block after the call outside. */
static void on_launch_entry(unsigned int vcpu_index, void *userdata)
{
    if (!launch_open) { /* the launcher is not recursive; an inner call would belong to the outer launch */
        launch_open = 1;
        launch_vcpu = vcpu_index;
        launch_start = insns;
        for (size_t i = 0; i < n_blocks; i++) {
            all_blocks[i]->at_open = all_blocks[i]->count;
        }
        struct block *here = userdata;
        if (here != NULL && here->at_open > 0) {
            here->at_open--;
        }
    }
}

static void on_launch_return(unsigned int vcpu_index, void *userdata)
{
    if (launch_open && vcpu_index == launch_vcpu) {
        launch_insns += insns - launch_start;
        launches++;
        launch_open = 0;
        for (size_t i = 0; i < n_blocks; i++) {
            all_blocks[i]->in_launch += all_blocks[i]->count - all_blocks[i]->at_open;
        }
        struct block *here = userdata;
        if (here != NULL && here->in_launch > 0) {
            here->in_launch--;
        }
    }
}

static int is_return_site(uint64_t address)
{
    for (size_t i = 0; i < n_return_sites; i++) {
        if (return_sites[i] == address) {
            return 1;
        }
    }
    return 0;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    if (launch_symbol != NULL && !launch_looked_up) {
        /* Not at install time: QEMU loads the plugin before the guest's binary and first vCPU exist. */
        launch_looked_up = 1;
        char *binary = (char *)qemu_plugin_path_to_binary();
        launch_found = binary != NULL && find_launcher(binary, launch_symbol);
        free(binary); /* g_strdup'ed: glib's allocator is malloc's */
        if (launch_found) {
            /* find_launcher left addresses relative to the ELF's entry point: add where it was loaded. */
            uint64_t entry = qemu_plugin_entry_code();
            launch_entry += entry;
            for (size_t i = 0; i < n_return_sites; i++) {
                return_sites[i] += entry;
            }
        }
    }
    struct block *block = NULL;
    if (blocks_path != NULL && launch_found) {
        block = block_of(tb);
        if (block != NULL) {
            qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &block->count, 1);
        }
    }
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
            if (name != NULL &&
                (strcmp(name, symbol) == 0 || (helpers != NULL && strncmp(name, helpers, helpers_len) == 0))) {
                qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &kernel_insns,
                                                           1);
            }
        }
        if (launch_found) {
            uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
            if (vaddr == launch_entry) {
                qemu_plugin_register_vcpu_insn_exec_cb(insn, on_launch_entry, QEMU_PLUGIN_CB_NO_REGS, block);
            } else if (is_return_site(vaddr)) {
                qemu_plugin_register_vcpu_insn_exec_cb(insn, on_launch_return, QEMU_PLUGIN_CB_NO_REGS, block);
            }
            if (cache_model) {
                qemu_plugin_register_vcpu_mem_cb(insn, on_memory, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
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
    fprintf(f, "insns=%" PRIu64 " vector_insns=%" PRIu64 " kernel_insns=%" PRIu64 " launches=%" PRIu64, insns,
            vector_insns, kernel_insns, launches);
    if (launch_found) {
        fprintf(f, " launch_insns=%" PRIu64, launch_insns);
        if (cache_model) {
            fprintf(f, " l1d_accesses=%" PRIu64 " l1d_misses=%" PRIu64 " l2_misses=%" PRIu64, l1d.accesses,
                    l1d.misses, l2.misses);
        }
    }
    fprintf(f, "\n");
    fclose(f);
    if (blocks_path != NULL) {
        write_blocks();
    }
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
        } else if (strncmp(argv[i], "helpers=", 8) == 0) {
            helpers = argv[i][8] != '\0' ? argv[i] + 8 : NULL;
            helpers_len = helpers != NULL ? strlen(helpers) : 0;
        } else if (strncmp(argv[i], "launch=", 7) == 0) {
            launch_symbol = argv[i][7] != '\0' ? argv[i] + 7 : NULL;
        } else if (strncmp(argv[i], "blocks=", 7) == 0) {
            blocks_path = argv[i][7] != '\0' ? argv[i] + 7 : NULL;
        } else if (strncmp(argv[i], "l1d=", 4) == 0) {
            if (cache_init(&l1d, argv[i] + 4, "l1d") != 0) {
                return -1;
            }
        } else if (strncmp(argv[i], "l2=", 3) == 0) {
            if (cache_init(&l2, argv[i] + 3, "l2") != 0) {
                return -1;
            }
        } else {
            fprintf(stderr, "libicount: unknown argument '%s' (expected out=<file>,symbol=<name>,launch=<name>,"
                    "helpers=<prefix>,blocks=<file>,l1d=<bytes>:<ways>:<line>,l2=<bytes>:<ways>:<line>)\n", argv[i]);
            return -1;
        }
    }
    if ((l1d.tags == NULL) != (l2.tags == NULL)) {
        fprintf(stderr, "libicount: the cache model needs both l1d= and l2=\n");
        return -1;
    }
    if (l1d.tags != NULL && l1d.line_shift != l2.line_shift) {
        fprintf(stderr, "libicount: l1d= and l2= must have the same line size\n");
        return -1;
    }
    cache_model = l1d.tags != NULL;
    if (out_path == NULL || out_path[0] == '\0') {
        fprintf(stderr, "libicount: missing out=<file> argument\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
