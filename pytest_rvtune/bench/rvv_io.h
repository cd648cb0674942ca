/* rvv_io.h: the yardsticks' file I/O: raw little-endian float32 (and int32) arrays, written and checked by
 * `rvtune bench-compiler` (numpy makes the inputs and judges the outputs, so no C reference can be wrong
 * in the same way as the kernel). */
#ifndef RVV_IO_H
#define RVV_IO_H
#include <stdio.h>
#include <stdlib.h>

static float *read_floats(const char *path, size_t count) {
    float *data = malloc(sizeof(float) * (count ? count : 1));
    FILE *f = fopen(path, "rb");
    if (data == NULL || f == NULL || fread(data, sizeof(float), count, f) != count) {
        fprintf(stderr, "cannot read %zu float32 values from %s\n", count, path);
        exit(2);
    }
    fclose(f);
    return data;
}

static int *read_ints(const char *path, size_t count) {
    int *data = malloc(sizeof(int) * (count ? count : 1));
    FILE *f = fopen(path, "rb");
    if (data == NULL || f == NULL || fread(data, sizeof(int), count, f) != count) {
        fprintf(stderr, "cannot read %zu int32 values from %s\n", count, path);
        exit(2);
    }
    fclose(f);
    return data;
}

static void write_floats(const char *path, const float *data, size_t count) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, sizeof(float), count, f) != count || fclose(f) != 0) {
        fprintf(stderr, "cannot write %zu float32 values to %s\n", count, path);
        exit(2);
    }
}
#endif
