/* stats.h: request statistics with per-thread counters, summed only when read. */
#pragma once

#include <stdint.h>

#include "device.h"
#include "stats-histogram.h" /* the bucket layout: STATS_HIST_BUCKETS, stats_hist_bucket() */
#define STATS_MAX_OPCODE 64 /* FUSE opcodes below this get their own row; others count as opcode 0 */
/* Errors are also counted by errno, device-wide: 1 to STATS_MAX_ERRNO - 1 get their own counter,
 * others count as errno 0 ("other"). Linux's largest errno is EHWPOISON (133); the FUSE server
 * turns anything beyond 511 into EIO. */
#define STATS_MAX_ERRNO 134

typedef struct StatsCounters {
        uint64_t requests;
        uint64_t bytes;
        uint64_t errors;
        uint64_t latency_hist[STATS_HIST_BUCKETS];
        uint64_t latency_sum_us; /* the sum of the latencies the histogram counts (for a mean) */
} StatsCounters;

typedef struct StatsSnapshot {
        StatsCounters op[STATS_MAX_OPCODE];
        StatsCounters queue[DEVICE_MAX_QUEUES];
        uint64_t errnos[STATS_MAX_ERRNO]; /* failed requests by errno (positive), all opcodes */
        uint64_t in_flight; /* begun (stats_begin) and not yet recorded; not affected by reset */
} StatsSnapshot;

typedef struct Stats Stats;

int stats_new(Stats **ret);
Stats *stats_free(Stats *s);

/* A request entered the data path (for in_flight). Same thread rules as stats_record(). */
void stats_begin(Stats *s);

/* Called by whichever thread completed the request; touches only that thread's counters. */
void stats_record(Stats *s, unsigned queue, uint32_t opcode, int error, uint64_t bytes, uint64_t latency_us);

/* Sums every thread's counters (relaxed: a snapshot may be a few requests behind). */
void stats_snapshot(Stats *s, StatsSnapshot *ret);
void stats_reset(Stats *s);

/* Number of per-thread counter sets allocated (threads that ever recorded, minus reuse after
 * thread exit). For tests and diagnostics. */
unsigned stats_n_shards(Stats *s);
