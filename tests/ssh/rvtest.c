/* A stand-in for a kernel harness, for the SSH target tests: speaks the harness protocol of
 * docs/contracts.md (RVTUNE sample/check/error lines, exit 0/1/2, FILE arguments) and can be told to
 * misbehave.
 *
 *   rvtest [--hang] [--crash] [--sleep-ms N] [--note TEXT] [--] FILE...
 *
 * Every argument is echoed as `arg<i>=<text>`, and $RVTEST_ENV as `env=<text>` (free text: the tests check
 * quoting with it). Each FILE is
 * read as white-space separated numbers; `sum<i>=<sum>` proves its content arrived, and a check line per
 * file reports ok. A missing file is an `RVTUNE error` and exit 2, as the real harness does.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    int first_file = 1;
    long sleep_ms = 0;
    for (int i = 0; i < argc; i++) printf("arg%d=%s\n", i, argv[i]);
    if (getenv("RVTEST_ENV")) printf("env=%s\n", getenv("RVTEST_ENV"));
    fflush(stdout);
    for (; first_file < argc; first_file++) {
        const char *a = argv[first_file];
        if (strcmp(a, "--hang") == 0) {
            for (;;) sleep(1);
        } else if (strcmp(a, "--crash") == 0) {
            fflush(stdout);
            raise(SIGSEGV);
        } else if (strcmp(a, "--note") == 0 && first_file + 1 < argc) {
            first_file++;  /* only echoed above */
        } else if (strcmp(a, "--sleep-ms") == 0 && first_file + 1 < argc) {
            sleep_ms = atol(argv[++first_file]);
        } else if (strcmp(a, "--") == 0) {
            first_file++;
            break;
        } else if (strncmp(a, "--", 2) != 0) {
            break;
        }
    }
    fflush(stdout);
    for (int run = 0; run < 3; run++) {
        long long t0 = now_ns();
        if (sleep_ms) usleep(sleep_ms * 1000 / 3);
        printf("RVTUNE sample %lld\n", now_ns() - t0);
    }
    for (int i = first_file; i < argc; i++) {
        FILE *fh = fopen(argv[i], "r");
        if (!fh) {
            printf("RVTUNE error cannot open %s\n", argv[i]);
            return 2;
        }
        double x, sum = 0;
        long n = 0;
        while (fscanf(fh, "%lf", &x) == 1) { sum += x; n++; }
        fclose(fh);
        printf("sum%d=%g\n", i - first_file, sum);
        printf("RVTUNE check f%d ok max_abs=0 max_rel=0 first_bad=-1 count=%ld\n", i - first_file, n);
    }
    return 0;
}
