/* rvv_io.h: the yardsticks' file I/O: raw little-endian float32 (and int32) arrays, written and checked by
 * `rvtune bench-compiler` (numpy makes the inputs and judges the outputs, so no C reference can be wrong
 * in the same way as the kernel). */
#ifndef RVV_IO_H
#define RVV_IO_H
#include <stdio.h>
#include <stdlib.h>

/* `count` values of `size` bytes each, or exit 2 naming the file and what was expected. */
static void *read_values(const char *path, size_t count, size_t size, const char *what) {
    void *data = malloc(size * (count ? count : 1));
    FILE *f = fopen(path, "rb");
    if (data == NULL || f == NULL || fread(data, size, count, f) != count) {
        fprintf(stderr, "cannot read %zu %s values from %s\n", count, what, path);
        exit(2);
    }
    fclose(f);
    return data;
}

static float *read_floats(const char *path, size_t count) { return read_values(path, count, sizeof(float), "float32"); }

static int *read_ints(const char *path, size_t count) { return read_values(path, count, sizeof(int), "int32"); }

static void write_floats(const char *path, const float *data, size_t count) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, sizeof(float), count, f) != count || fclose(f) != 0) {
        fprintf(stderr, "cannot write %zu float32 values to %s\n", count, path);
        exit(2);
    }
}
#endif
