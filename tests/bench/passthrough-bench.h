/* passthrough-bench.h: what the benchmarks of the passthrough alone (bench-lookup, bench-reopen)
 * share: a monotonic clock in ns and a check that exits on failure. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

/* r, or exit with "PROGRAM: what: error" when it is negative (-1: errno). */
static inline int must(int r, const char *what) {
        if (r < 0) {
                fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(r == -1 ? errno : -r));
                exit(EXIT_FAILURE);
        }
        return r;
}
