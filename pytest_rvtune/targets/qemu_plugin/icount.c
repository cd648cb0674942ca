/*
 * libicount: a QEMU (7.2 plugin API) instruction counter for pytest-rvtune.
 *
 *   qemu-riscv64 -plugin libicount.so,out=<file>,symbol=<kernel>,launch=<launcher>[,helpers=<prefix>] ELF ...
 *
 * At exit it writes one line to <file>:
 *   insns=<n> vector_insns=<n> kernel_insns=<n> launches=<n> [launch_insns=<n> [harts=<n> hart_launch_insns=<n>,..]]
 * insns: every executed guest instruction; vector_insns: executed RVV instructions; kernel_insns: executed
 * instructions whose address lies inside the ELF symbol <kernel> (the kernel function) or inside a function whose
 * name starts with <prefix> (the compiler runtime's precompiled parts of kernels, e.g. the GEMM panels, which only
 * kernels call). All three count every guest thread.
 * launches: completed calls of the function <launcher> (`<kernel>_wrap`); launch_insns: every guest instruction
 * executed, on any thread, while a launch was running, i.e. from the launcher's first instruction to the
 * caller's instruction after the call. That covers the grid walk, the kernel, the libc calls the generated code
 * makes (memset, memcpy, logf) and the worker threads the launcher starts (they live inside the launch: the
 * launcher joins them before it returns, and a thread's last guest instruction, its exit system call, comes
 * before the join returns); it leaves out the harness's file I/O and checks, which run outside.
 * harts, hart_launch_insns: launch_insns per guest thread. Inside a launch its threads are numbered 0 = the thread
 * that called the launcher, then any thread already running when the launch opened (by vCPU index), then the
 * threads started inside the launch in the order they were created (QEMU creates a thread's vCPU in the creating
 * thread, at the clone system call, so that order does not depend on scheduling). hart_launch_insns lists, for
 * each number, its instructions summed over every launch; harts is the length of the list (the most threads one
 * launch had); the list sums to launch_insns. Threads are numbered per launch, not by QEMU's vCPU index: QEMU gives
 * a new thread the index one above the highest live one, so a worker that ends before the next one starts hands
 * its index on, and one index would then hold two threads' work.
 * launch_insns is printed only when <launcher> is a function of the ELF; harts and hart_launch_insns only when a
 * launch had more than one thread (without them, all of launch_insns is thread 0's: the line of a one-thread run
 * is what it was before threads were counted).
 *
 * How a launch is seen without reading registers (the 7.2 API cannot): the plugin reads the ELF's symbol table,
 * finds <launcher> and every direct call to it (`jal`, and `auipc`+`jalr` pairs), and so knows before any
 * code runs each call's return address. The block at the launcher's entry opens the window and the one at the
 * call's return address closes it (both start a translated block: the first is a jump target, the second follows
 * a call, which ends a block). A call through a function pointer is not seen (the harnesses call the launcher
 * directly).
 *
 * Counting is exact with any number of guest threads: each thread adds into its own record (found by the vCPU
 * index QEMU passes to the callback), so no two host threads ever add to the same counter. The 7.2 API has no
 * per-vCPU inline counters, so counting is one callback per executed translated block (TB) that adds the block's
 * instruction, vector and kernel counts, worked out once at translation: a helper call per block, nothing per
 * instruction. A block is counted whole when it starts (the kernels compared get the counts of per-instruction
 * adds to the instruction): QEMU leaves a block half-way only when a guest instruction faults.
 *
 *   threads=1       the guest runs one thread (QemuTarget passes it for our harness with --threads 1): the counts
 *                   are inline adds per block instead (no helper call; an inline add is not atomic, which one
 *                   thread does not need), the window's figures differences of the totals taken when it opens and
 *                   closes. Same counts, less QEMU time on scalar code. If the guest starts a second thread
 *                   anyway, the plugin says so on stderr and writes no counts (an inexact count never passes for
 *                   an exact one).
 *
 * Two optional parts feed the timing model (pytest_rvtune/timing_model.py), both limited to the launch window:
 *   blocks=<file>   per translated block (guest vaddr, its instructions' bytes) the number of times it was
 *                   executed inside launches, one line per block:
 *                     <vaddr hex> <count> <insn hex>:<insn hex>... [h=<n0>,<n1>,...]
 *                   h= splits count by the thread numbers above (harts entries, summing to count), written when
 *                   the out line has harts (without it, every execution is thread 0's): the sum over blocks of
 *                   count x instructions is launch_insns, of h[k] x instructions is hart_launch_insns[k]. Each
 *                   thread keeps its own per-block counts inside a launch, added up when the launch closes.
 *   l1d=<bytes>:<ways>:<line>,l2=<bytes>:<ways>:<line>
 *                   a data-cache model: every load and store inside a launch goes through a set-associative LRU
 *                   L1D, its misses through a set-associative LRU L2 (write-allocate, no prefetcher, one cache for
 *                   all threads); the output line gains l1d_accesses=<n> l1d_misses=<n> l2_misses=<n>. This costs
 *                   a helper call per memory access (QEMU calls it also for the element accesses of RVV loads and
 *                   stores). With several guest threads the accesses take a lock and meet the cache in the order
 *                   the host runs them: exact as counts, but the misses vary from run to run.
 */
#include <elf.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

static const char *out_path;
static const char *symbol;
static const char *helpers; /* name prefix of functions counted as the kernel's own */
static size_t helpers_len;

/* Guards the thread table, the launch window's bookkeeping and the block table (never taken per block
 * execution, only when a thread starts or ends, a window opens or closes, and at translation). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The launch window (see the header comment). */
static const char *launch_symbol;
static int launch_found;        /* the launcher is a function of the ELF */
static uint64_t launch_entry;   /* its address, as linked */
static uint64_t *return_sites;  /* addresses of the instructions after each direct call to it */
static size_t n_return_sites;
static int launch_looked_up;    /* at the first translation: the guest's binary and entry are known then */
static int launch_open;         /* read by every thread at each block: atomic loads and stores */
static uint64_t launch_insns;
static uint64_t launches;
static uint64_t *hart_launch_insns; /* launch_insns per thread number (see the header comment) */
static size_t n_harts;

/* threads=1 (see the header comment): global inline counters, read only when a window opens or closes. */
static int one_thread;
static int second_thread_seen;
static uint64_t one_insns, one_vector_insns, one_kernel_insns;
static uint64_t one_launch_start;

/* ------------------------------------------------------------------------- per-block counts (blocks=) */
enum event { EVENT_NONE, EVENT_ENTRY, EVENT_RETURN };

/* One record per distinct translated code (vaddr and bytes): the userdata of its execution callback. */
struct block {
    uint64_t vaddr;
    size_t id;            /* index in all_blocks */
    uint32_t n_insns;
    uint32_t n_vector;    /* RVV instructions among them */
    uint32_t n_kernel;    /* instructions of the kernel (or a helpers= function) among them */
    uint32_t event_at;    /* index of the instruction where the launch window opens or closes */
    enum event event;
    uint64_t in_launch;   /* executions inside launch windows (added up when a window closes) */
    uint64_t count;       /* threads=1: executions since translation (an inline add at the block's start) */
    uint64_t at_open;     /* threads=1: count when the open window opened */
    uint64_t *harts;      /* the same per thread number */
    size_t n_harts;
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

/* ------------------------------------------------------------------------------------- guest threads */
/* One record per guest thread (a vCPU's life in user mode). Only the thread itself writes its counters while it
 * runs; they are read when a launch closes (its workers have ended by then: joined) and at exit. */
struct thread {
    uint64_t insns, vector_insns, kernel_insns;
    uint64_t window_insns;    /* inside the open launch, not yet added to the launch's figures */
    uint64_t *window_blocks;  /* blocks=: executions per block id inside the open launch, not yet added */
    size_t window_blocks_len;
    long number;              /* in the open launch (see the header comment), -1 = not in one */
    int alive;
    struct thread *next;      /* every thread seen, for the totals */
    struct thread *next_in_launch;
};

/* vCPU index -> its current thread, two levels so that a table that grows never moves under a reader. */
#define VCPU_CHUNK 256
#define VCPU_CHUNKS 4096
static struct thread **vcpu_table[VCPU_CHUNKS];
static unsigned int vcpu_max;           /* one above the highest index seen */
static struct thread *all_threads;
static struct thread *launch_threads;   /* the open launch's threads */
static struct thread *launch_caller;    /* the thread that called the launcher */
static long next_number;                /* the number the next thread joining the open launch gets */
static int threads_alive;

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

static int is_return_site(uint64_t address)
{
    for (size_t i = 0; i < n_return_sites; i++) {
        if (return_sites[i] == address) {
            return 1;
        }
    }
    return 0;
}

/* What a block's execution adds, worked out once: its instructions, the vector and kernel ones among them, and
 * where in it a launch window opens or closes. */
static void describe_block(struct block *b, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (is_vector(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn))) {
            b->n_vector++;
        }
        if (symbol != NULL) {
            const char *name = qemu_plugin_insn_symbol(insn);
            if (name != NULL &&
                (strcmp(name, symbol) == 0 || (helpers != NULL && strncmp(name, helpers, helpers_len) == 0))) {
                b->n_kernel++;
            }
        }
        if (launch_found && b->event == EVENT_NONE) { /* the entry and a return site never share a block */
            uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
            if (vaddr == launch_entry) {
                b->event = EVENT_ENTRY;
                b->event_at = (uint32_t)i;
            } else if (is_return_site(vaddr)) {
                b->event = EVENT_RETURN;
                b->event_at = (uint32_t)i;
            }
        }
    }
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
    pthread_mutex_lock(&lock);
    for (struct block *b = buckets[h]; b != NULL; b = b->next) {
        if (b->vaddr == vaddr && b->n_bytes == n_bytes && b->n_insns == n && memcmp(b->bytes, bytes, n_bytes) == 0) {
            pthread_mutex_unlock(&lock);
            free(bytes);
            free(sizes);
            return b;
        }
    }
    struct block *b = calloc(1, sizeof *b);
    struct block **grown = realloc(all_blocks, (n_blocks + 1) * sizeof *all_blocks);
    if (b == NULL || grown == NULL) {
        pthread_mutex_unlock(&lock);
        free(b);
        free(bytes);
        free(sizes);
        return NULL;
    }
    all_blocks = grown;
    b->id = n_blocks;
    b->vaddr = vaddr;
    b->n_insns = (uint32_t)n;
    b->bytes = bytes;
    b->sizes = sizes;
    b->n_bytes = n_bytes;
    describe_block(b, tb);
    all_blocks[n_blocks++] = b;
    b->next = buckets[h];
    buckets[h] = b;
    pthread_mutex_unlock(&lock);
    return b;
}

static void write_list(FILE *f, const uint64_t *values, size_t n, size_t width)
{
    for (size_t k = 0; k < width; k++) {
        fprintf(f, "%s%" PRIu64, k > 0 ? "," : "", k < n ? values[k] : 0);
    }
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
        if (n_harts > 1) {
            fputs(" h=", f);
            write_list(f, b->harts, b->n_harts, n_harts);
        }
        fputc('\n', f);
    }
    fclose(f);
}

/* ------------------------------------------------------------------------------------- guest threads */
static struct thread **vcpu_slot(unsigned int vcpu_index)
{
    if (vcpu_index >= (unsigned)VCPU_CHUNK * VCPU_CHUNKS) {
        fprintf(stderr, "libicount: guest vCPU index %u: more than %d threads at once are not counted\n",
                vcpu_index, VCPU_CHUNK * VCPU_CHUNKS);
        abort();
    }
    struct thread **chunk = vcpu_table[vcpu_index / VCPU_CHUNK];
    if (chunk == NULL) { /* under the lock: only thread creation adds chunks */
        chunk = calloc(VCPU_CHUNK, sizeof *chunk);
        if (chunk == NULL) {
            fprintf(stderr, "libicount: out of memory for the thread table\n");
            abort();
        }
        __atomic_store_n(&vcpu_table[vcpu_index / VCPU_CHUNK], chunk, __ATOMIC_RELEASE);
    }
    return &chunk[vcpu_index % VCPU_CHUNK];
}

/* Under the lock: a new record for the thread now running as vCPU `vcpu_index`. */
static struct thread *new_thread(unsigned int vcpu_index)
{
    struct thread *t = calloc(1, sizeof *t);
    if (t == NULL) {
        fprintf(stderr, "libicount: out of memory for a thread's counters\n");
        abort();
    }
    t->alive = 1;
    t->number = -1;
    if (one_thread && threads_alive > 0 && !second_thread_seen) {
        second_thread_seen = 1;
        fprintf(stderr, "libicount: threads=1 but the guest started a second thread: its counts would not be exact, "
                "so none are written (run the plugin without threads=1)\n");
    }
    t->next = all_threads;
    all_threads = t;
    threads_alive++;
    if (__atomic_load_n(&launch_open, __ATOMIC_RELAXED)) { /* started inside a launch: it belongs to it */
        t->number = next_number++;
        t->next_in_launch = launch_threads;
        launch_threads = t;
    }
    if (vcpu_index >= vcpu_max) {
        vcpu_max = vcpu_index + 1;
    }
    /* Published before the thread runs: QEMU creates the vCPU (and calls vcpu_init) in the creating thread. */
    __atomic_store_n(vcpu_slot(vcpu_index), t, __ATOMIC_RELEASE);
    return t;
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    pthread_mutex_lock(&lock);
    new_thread(vcpu_index);
    pthread_mutex_unlock(&lock);
}

static void on_vcpu_exit(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    pthread_mutex_lock(&lock);
    struct thread *t = *vcpu_slot(vcpu_index);
    if (t != NULL && t->alive) {
        t->alive = 0;
        threads_alive--;
    }
    pthread_mutex_unlock(&lock);
}

static inline struct thread *thread_of(unsigned int vcpu_index)
{
    struct thread *t = NULL;
    if (vcpu_index < (unsigned)VCPU_CHUNK * VCPU_CHUNKS) {
        struct thread **chunk = __atomic_load_n(&vcpu_table[vcpu_index / VCPU_CHUNK], __ATOMIC_ACQUIRE);
        if (chunk != NULL) {
            t = __atomic_load_n(&chunk[vcpu_index % VCPU_CHUNK], __ATOMIC_ACQUIRE);
        }
    }
    if (t == NULL) { /* a vCPU whose creation the plugin did not see */
        pthread_mutex_lock(&lock);
        t = *vcpu_slot(vcpu_index);
        if (t == NULL) {
            t = new_thread(vcpu_index);
        }
        pthread_mutex_unlock(&lock);
    }
    return t;
}

/* blocks=: one more execution of block `id` by `t` inside the open launch (only `t` writes its array). */
static void count_block(struct thread *t, size_t id)
{
    if (id >= t->window_blocks_len) {
        size_t len = t->window_blocks_len ? t->window_blocks_len : 1024;
        while (len <= id) {
            len *= 2;
        }
        uint64_t *grown = realloc(t->window_blocks, len * sizeof *grown);
        if (grown == NULL) {
            return; /* out of memory: this execution is missing from the blocks file */
        }
        memset(grown + t->window_blocks_len, 0, (len - t->window_blocks_len) * sizeof *grown);
        t->window_blocks = grown;
        t->window_blocks_len = len;
    }
    t->window_blocks[id]++;
}

/* ----------------------------------------------------------------------------------- the launch window */
static int grow_list(uint64_t **values, size_t *n, size_t wanted)
{
    if (wanted <= *n) {
        return 1;
    }
    uint64_t *grown = realloc(*values, wanted * sizeof *grown);
    if (grown == NULL) {
        return 0;
    }
    memset(grown + *n, 0, (wanted - *n) * sizeof *grown);
    *values = grown;
    *n = wanted;
    return 1;
}

/* Under the lock, on the thread calling the launcher: number it 0, then the threads already running. */
static void open_launch(struct thread *caller)
{
    launch_caller = caller;
    launch_threads = caller;
    caller->number = 0;
    caller->next_in_launch = NULL;
    next_number = 1;
    for (unsigned int v = 0; v < vcpu_max; v++) {
        struct thread **chunk = vcpu_table[v / VCPU_CHUNK];
        struct thread *t = chunk != NULL ? chunk[v % VCPU_CHUNK] : NULL;
        if (t != NULL && t != caller && t->alive) {
            t->number = next_number++;
            t->next_in_launch = launch_threads;
            launch_threads = t;
        }
    }
    __atomic_store_n(&launch_open, 1, __ATOMIC_RELEASE);
}

/* Under the lock, on the thread that called the launcher, after the launch's last instruction: add every
 * thread's share to the launch's figures. The workers have ended (joined), so their counts are final. */
static void close_launch(void)
{
    __atomic_store_n(&launch_open, 0, __ATOMIC_RELEASE);
    for (struct thread *t = launch_threads; t != NULL; t = t->next_in_launch) {
        size_t k = t->number >= 0 ? (size_t)t->number : 0;
        launch_insns += t->window_insns;
        if (grow_list(&hart_launch_insns, &n_harts, k + 1)) {
            hart_launch_insns[k] += t->window_insns;
        }
        t->window_insns = 0;
        for (size_t id = 0; id < t->window_blocks_len && id < n_blocks; id++) {
            uint64_t c = t->window_blocks[id];
            if (c != 0) {
                struct block *b = all_blocks[id];
                b->in_launch += c;
                if (grow_list(&b->harts, &b->n_harts, k + 1)) {
                    b->harts[k] += c;
                }
                t->window_blocks[id] = 0;
            }
        }
        if (!t->alive) {
            free(t->window_blocks);
            t->window_blocks = NULL;
            t->window_blocks_len = 0;
        }
        t->number = -1;
    }
    launch_threads = NULL;
    launch_caller = NULL;
    launches++;
}

/* The callback of every executed block: the thread's counts, and inside a launch its window counts. A block
 * where the window opens or closes splits at that instruction; the block itself (blocks=) belongs to the
 * window if its first instruction does: the launcher's first block is inside, the caller's block after the
 * call outside. */
static void on_block(unsigned int vcpu_index, void *userdata)
{
    const struct block *b = userdata;
    struct thread *t = thread_of(vcpu_index);
    t->insns += b->n_insns;
    t->vector_insns += b->n_vector;
    t->kernel_insns += b->n_kernel;
    int open = __atomic_load_n(&launch_open, __ATOMIC_ACQUIRE);
    if (b->event == EVENT_ENTRY && !open) {
        /* the launcher is not recursive; an inner call (open already) belongs to the outer launch */
        pthread_mutex_lock(&lock);
        int opens = !launch_open; /* another thread may have opened one since */
        if (opens) {
            open_launch(t);
        }
        pthread_mutex_unlock(&lock);
        if (opens) {
            t->window_insns += b->n_insns - b->event_at;
            if (b->event_at == 0 && blocks_path != NULL) {
                count_block(t, b->id);
            }
            return;
        }
        open = 1;
    } else if (b->event == EVENT_RETURN && open && t == launch_caller) {
        t->window_insns += b->event_at;
        if (b->event_at > 0 && blocks_path != NULL) {
            count_block(t, b->id);
        }
        pthread_mutex_lock(&lock);
        close_launch();
        pthread_mutex_unlock(&lock);
        return;
    }
    if (open) {
        t->window_insns += b->n_insns;
        if (blocks_path != NULL) {
            count_block(t, b->id);
        }
    }
}

/* threads=1: a QEMU 7.2 block runs its callbacks before its inline adds, so the totals read here leave out the
 * block where the window opens or closes: the launcher's first block falls inside the window, the caller's block
 * after the call outside (tests/test_icount_plugin.py checks both modes give the same counts). */
static void on_event_one_thread(unsigned int vcpu_index, void *userdata)
{
    const struct block *b = userdata;
    if (b->event == EVENT_ENTRY && !launch_open) {
        launch_open = 1;
        one_launch_start = one_insns;
        for (size_t i = 0; i < n_blocks; i++) {
            all_blocks[i]->at_open = all_blocks[i]->count;
        }
    } else if (b->event == EVENT_RETURN && launch_open) {
        launch_open = 0;
        uint64_t window = one_insns - one_launch_start;
        launch_insns += window;
        if (grow_list(&hart_launch_insns, &n_harts, 1)) {
            hart_launch_insns[0] += window;
        }
        for (size_t i = 0; i < n_blocks; i++) {
            struct block *block = all_blocks[i];
            uint64_t c = block->count - block->at_open;
            if (c != 0) {
                block->in_launch += c;
                if (grow_list(&block->harts, &block->n_harts, 1)) {
                    block->harts[0] += c;
                }
            }
        }
        launches++;
    }
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


static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_memory(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *userdata)
{
    if (!__atomic_load_n(&launch_open, __ATOMIC_RELAXED)) {
        return;
    }
    /* One thread: no lock. The count of live threads changes only in a thread creating another (before the new
     * one runs) or in one that ends, so a thread that sees 1 is the only one. */
    int shared = __atomic_load_n(&threads_alive, __ATOMIC_RELAXED) > 1;
    if (shared) {
        pthread_mutex_lock(&cache_lock);
    }
    uint64_t size = 1ull << qemu_plugin_mem_size_shift(info);
    uint64_t first = vaddr >> l1d.line_shift, last = (vaddr + size - 1) >> l1d.line_shift;
    for (uint64_t line = first; line <= last; line++) { /* an access across a line boundary touches both */
        uint64_t address = line << l1d.line_shift;
        if (!cache_access(&l1d, address)) {
            cache_access(&l2, address);
        }
    }
    if (shared) {
        pthread_mutex_unlock(&cache_lock);
    }
}

/* ------------------------------------------------------------------------------------------ translation */
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
    struct block *block = block_of(tb);
    if (block == NULL) {
        fprintf(stderr, "libicount: out of memory at translation: counts would be wrong\n");
        abort();
    }
    if (one_thread) {
        if (block->event != EVENT_NONE) { /* registered first: it runs before the adds (see on_event_one_thread) */
            qemu_plugin_register_vcpu_tb_exec_cb(tb, on_event_one_thread, QEMU_PLUGIN_CB_NO_REGS, block);
        }
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &one_insns, block->n_insns);
        if (block->n_vector > 0) {
            qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &one_vector_insns,
                                                     block->n_vector);
        }
        if (block->n_kernel > 0) {
            qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &one_kernel_insns,
                                                     block->n_kernel);
        }
        if (blocks_path != NULL && launch_found) {
            qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &block->count, 1);
        }
    } else {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, block);
    }
    if (launch_found && cache_model) {
        size_t n = qemu_plugin_tb_n_insns(tb);
        for (size_t i = 0; i < n; i++) {
            qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), on_memory, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW, NULL);
        }
    }
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
    if (second_thread_seen) {
        return; /* said on stderr when it happened */
    }
    FILE *f = fopen(out_path, "w");
    if (f == NULL) {
        fprintf(stderr, "libicount: cannot write %s\n", out_path);
        return;
    }
    uint64_t insns = one_insns, vector_insns = one_vector_insns, kernel_insns = one_kernel_insns;
    pthread_mutex_lock(&lock);
    for (const struct thread *t = all_threads; t != NULL; t = t->next) {
        insns += t->insns;
        vector_insns += t->vector_insns;
        kernel_insns += t->kernel_insns;
    }
    pthread_mutex_unlock(&lock);
    fprintf(f, "insns=%" PRIu64 " vector_insns=%" PRIu64 " kernel_insns=%" PRIu64 " launches=%" PRIu64, insns,
            vector_insns, kernel_insns, launches);
    if (launch_found) {
        fprintf(f, " launch_insns=%" PRIu64, launch_insns);
        if (n_harts > 1) {
            fprintf(f, " harts=%zu hart_launch_insns=", n_harts);
            write_list(f, hart_launch_insns, n_harts, n_harts);
        }
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
        } else if (strcmp(argv[i], "threads=1") == 0) {
            one_thread = 1;
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
                    "helpers=<prefix>,blocks=<file>,threads=1,l1d=<bytes>:<ways>:<line>,l2=<bytes>:<ways>:<line>)\n",
                    argv[i]);
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
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
