/* stats-histogram.h: the latency histogram layout, shared by the daemon's statistics and fsctl.
 *
 * Log2 buckets of µs: bucket 0 holds [0, 1] µs, bucket b (1 <= b < STATS_HIST_BUCKETS - 1) holds
 * (2^(b-1), 2^b] µs, and the last bucket everything above 2^(STATS_HIST_BUCKETS - 2) µs (~4.2 s).
 * GetStatistics sends the buckets in this order (docs/dbus.md). */
#pragma once

#include <stdint.h>

#define STATS_HIST_BUCKETS 24

/* The bucket a latency falls in. */
static inline unsigned stats_hist_bucket(uint64_t latency_us) {
        unsigned b;

        if (latency_us <= 1)
                return 0;
        b = 64 - (unsigned) __builtin_clzll(latency_us - 1); /* ceil(log2(latency_us)) */
        return b < STATS_HIST_BUCKETS - 1 ? b : STATS_HIST_BUCKETS - 1;
}

/* Upper edge of bucket b in µs; UINT64_MAX for the last (open) bucket. */
static inline uint64_t stats_hist_bucket_upper_us(unsigned b) {
        if (b >= STATS_HIST_BUCKETS - 1)
                return UINT64_MAX;
        return b == 0 ? 1 : 1ULL << b;
}

/* Lower edge of the last (open) bucket in µs. */
static inline uint64_t stats_hist_open_lower_us(void) {
        return 1ULL << (STATS_HIST_BUCKETS - 2);
}
