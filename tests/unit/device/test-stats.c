/* test-stats.c: per-thread request counters: sums across threads, reset, histogram edges, reuse,
 * errors by errno. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "stats.h"
#include "test-main.h"

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static void sum_rows(const StatsCounters *rows, unsigned n, StatsCounters *ret) {
        memset(ret, 0, sizeof *ret);
        for (unsigned i = 0; i < n; i++) {
                ret->requests += rows[i].requests;
                ret->bytes += rows[i].bytes;
                ret->errors += rows[i].errors;
                for (unsigned b = 0; b < STATS_HIST_BUCKETS; b++)
                        ret->latency_hist[b] += rows[i].latency_hist[b];
        }
}

START_TEST(test_bucket_edges) {
        ck_assert_uint_eq(stats_hist_bucket(0), 0);
        ck_assert_uint_eq(stats_hist_bucket(1), 0);
        ck_assert_uint_eq(stats_hist_bucket(2), 1);
        ck_assert_uint_eq(stats_hist_bucket(3), 2);
        ck_assert_uint_eq(stats_hist_bucket(4), 2);
        ck_assert_uint_eq(stats_hist_bucket(5), 3);
        ck_assert_uint_eq(stats_hist_bucket(8), 3);
        ck_assert_uint_eq(stats_hist_bucket(9), 4);
        ck_assert_uint_eq(stats_hist_bucket(1000), 10); /* (512, 1024] */
        ck_assert_uint_eq(stats_hist_bucket(1ULL << 22), 22);
        ck_assert_uint_eq(stats_hist_bucket((1ULL << 22) + 1), 23);
        ck_assert_uint_eq(stats_hist_bucket(UINT64_MAX), STATS_HIST_BUCKETS - 1);

        ck_assert_uint_eq(stats_hist_bucket_upper_us(0), 1);
        ck_assert_uint_eq(stats_hist_bucket_upper_us(1), 2);
        ck_assert_uint_eq(stats_hist_bucket_upper_us(22), 1ULL << 22);
        ck_assert_uint_eq(stats_hist_bucket_upper_us(STATS_HIST_BUCKETS - 1), UINT64_MAX);
        /* Every edge belongs to its bucket; one more goes to the next. */
        for (unsigned b = 0; b + 1 < STATS_HIST_BUCKETS; b++) {
                uint64_t up = stats_hist_bucket_upper_us(b);
                ck_assert_uint_eq(stats_hist_bucket(up), b);
                ck_assert_uint_eq(stats_hist_bucket(up + 1), b + 1);
        }
}
END_TEST

START_TEST(test_record_rows) {
        Stats *s;
        StatsSnapshot *snap = malloc(sizeof *snap);

        ck_assert_int_eq(stats_new(&s), 0);
        stats_record(s, 1, 15 /* READ */, 0, 4096, 3);
        stats_record(s, 1, 15, -EIO, 0, 0);
        stats_record(s, 2, 16 /* WRITE */, 0, 100, 1000);
        stats_record(s, 2, 4096 /* CUSE_INIT: no row of its own */, -ENOSYS, 0, 10);
        stats_record(s, DEVICE_MAX_QUEUES + 5, 1, 0, 0, 1); /* bogus queue: opcode row only */
        stats_snapshot(s, snap);

        ck_assert_uint_eq(snap->op[15].requests, 2);
        ck_assert_uint_eq(snap->op[15].bytes, 4096);
        ck_assert_uint_eq(snap->op[15].errors, 1);
        ck_assert_uint_eq(snap->op[15].latency_hist[2], 1);
        ck_assert_uint_eq(snap->op[15].latency_hist[0], 1);
        ck_assert_uint_eq(snap->op[16].latency_hist[10], 1);
        ck_assert_uint_eq(snap->op[15].latency_sum_us, 3);
        ck_assert_uint_eq(snap->op[16].latency_sum_us, 1000);
        ck_assert_uint_eq(snap->queue[2].latency_sum_us, 1010);
        ck_assert_uint_eq(snap->op[0].requests, 1);
        ck_assert_uint_eq(snap->op[0].errors, 1);
        ck_assert_uint_eq(snap->op[1].requests, 1);
        ck_assert_uint_eq(snap->queue[1].requests, 2);
        ck_assert_uint_eq(snap->queue[1].bytes, 4096);
        ck_assert_uint_eq(snap->queue[2].requests, 2);
        ck_assert_uint_eq(snap->queue[2].bytes, 100);
        ck_assert_uint_eq(snap->queue[2].errors, 1);
        ck_assert_uint_eq(snap->in_flight, 0);
        free(snap);
        stats_free(s);
}
END_TEST

START_TEST(test_errno_rows) {
        Stats *s;
        StatsSnapshot *snap = malloc(sizeof *snap);
        uint64_t total = 0;

        ck_assert_int_eq(stats_new(&s), 0);
        stats_record(s, 1, 1 /* LOOKUP */, -ENOENT, 0, 1);
        stats_record(s, 1, 1, -ENOENT, 0, 1);
        stats_record(s, 2, 35 /* CREATE */, -EEXIST, 0, 1);
        stats_record(s, 2, 4096, -ENOSYS, 0, 1); /* an opcode without a row still counts its errno */
        stats_record(s, 1, 15, 0, 4096, 1); /* success: no errno row */
        stats_record(s, 1, 15, -EHWPOISON, 0, 1); /* the largest errno Linux returns has its own row */
        stats_record(s, 1, 15, -STATS_MAX_ERRNO, 0, 1);
        stats_record(s, 1, 15, -511, 0, 1);
        stats_snapshot(s, snap);

        ck_assert_int_lt(EHWPOISON, STATS_MAX_ERRNO);
        ck_assert_uint_eq(snap->errnos[ENOENT], 2);
        ck_assert_uint_eq(snap->errnos[EEXIST], 1);
        ck_assert_uint_eq(snap->errnos[ENOSYS], 1);
        ck_assert_uint_eq(snap->errnos[EHWPOISON], 1);
        ck_assert_uint_eq(snap->errnos[0], 2); /* beyond the table: "other" */
        for (unsigned e = 0; e < STATS_MAX_ERRNO; e++)
                total += snap->errnos[e];
        ck_assert_uint_eq(total, 7);

        /* Reset clears them like every other counter. */
        stats_reset(s);
        stats_record(s, 1, 1, -ENOENT, 0, 7);
        stats_snapshot(s, snap);
        ck_assert_uint_eq(snap->op[1].latency_sum_us, 7); /* and the latency sums */
        ck_assert_uint_eq(snap->errnos[ENOENT], 1);
        ck_assert_uint_eq(snap->errnos[EEXIST], 0);
        ck_assert_uint_eq(snap->errnos[0], 0);
        free(snap);
        stats_free(s);
}
END_TEST

#define N_THREADS 8
#define N_PER_THREAD 20000

typedef struct Worker {
        Stats *s;
        unsigned id;
} Worker;

static void *record_thread(void *userdata) {
        Worker *w = userdata;

        for (unsigned i = 0; i < N_PER_THREAD; i++) {
                stats_begin(w->s);
                stats_record(w->s, (w->id + i) % DEVICE_MAX_QUEUES, i % 70,
                             i % 7 == 0 ? -EIO : i % 11 == 0 ? -ENOENT : 0, i % 3, i % 5000);
        }
        return NULL;
}

static void *snapshot_thread(void *userdata) {
        Stats *s = userdata;
        StatsSnapshot *snap = malloc(sizeof *snap);
        StatsCounters total;
        uint64_t last = 0;

        /* Totals seen while threads record only ever grow. */
        for (unsigned k = 0; k < 200; k++) {
                stats_snapshot(s, snap);
                sum_rows(snap->op, STATS_MAX_OPCODE, &total);
                ck_assert_uint_ge(total.requests, last);
                last = total.requests;
        }
        free(snap);
        return NULL;
}

START_TEST(test_sum_across_threads) {
        Stats *s;
        pthread_t t[N_THREADS], reader;
        Worker w[N_THREADS];
        StatsSnapshot *snap = malloc(sizeof *snap);
        StatsCounters ops, queues;
        uint64_t want_bytes = 0, want_eio = 0, want_enoent = 0, want_op0 = 0, want_hist[STATS_HIST_BUCKETS] = { 0 };

        ck_assert_int_eq(stats_new(&s), 0);
        ck_assert_int_eq(pthread_create(&reader, NULL, snapshot_thread, s), 0);
        for (unsigned i = 0; i < N_THREADS; i++) {
                w[i] = (Worker) { .s = s, .id = i };
                ck_assert_int_eq(pthread_create(&t[i], NULL, record_thread, &w[i]), 0);
        }
        for (unsigned i = 0; i < N_THREADS; i++)
                pthread_join(t[i], NULL);
        pthread_join(reader, NULL);

        for (unsigned i = 0; i < N_PER_THREAD; i++) {
                want_bytes += i % 3;
                want_eio += i % 7 == 0;
                want_enoent += i % 7 != 0 && i % 11 == 0;
                want_op0 += i % 70 == 0 || i % 70 >= STATS_MAX_OPCODE;
                want_hist[stats_hist_bucket(i % 5000)]++;
        }
        stats_snapshot(s, snap);
        sum_rows(snap->op, STATS_MAX_OPCODE, &ops);
        sum_rows(snap->queue, DEVICE_MAX_QUEUES, &queues);
        ck_assert_uint_eq(ops.requests, (uint64_t) N_THREADS * N_PER_THREAD);
        ck_assert_uint_eq(queues.requests, (uint64_t) N_THREADS * N_PER_THREAD);
        ck_assert_uint_eq(ops.bytes, N_THREADS * want_bytes);
        ck_assert_uint_eq(queues.bytes, N_THREADS * want_bytes);
        ck_assert_uint_eq(ops.errors, N_THREADS * (want_eio + want_enoent));
        ck_assert_uint_eq(snap->errnos[EIO], N_THREADS * want_eio);
        ck_assert_uint_eq(snap->errnos[ENOENT], N_THREADS * want_enoent);
        ck_assert_uint_eq(snap->op[0].requests, N_THREADS * want_op0);
        for (unsigned b = 0; b < STATS_HIST_BUCKETS; b++) {
                ck_assert_uint_eq(ops.latency_hist[b], N_THREADS * want_hist[b]);
                ck_assert_uint_eq(queues.latency_hist[b], N_THREADS * want_hist[b]);
        }
        ck_assert_uint_eq(snap->in_flight, 0);
        ck_assert_uint_le(stats_n_shards(s), N_THREADS + 1);
        free(snap);
        stats_free(s);
}
END_TEST

typedef struct Handoff {
        Stats *s;
        unsigned n;
} Handoff;

static void *end_thread(void *userdata) {
        Handoff *h = userdata;

        for (unsigned i = 0; i < h->n; i++)
                stats_record(h->s, 1, 15, 0, 0, 1);
        return NULL;
}

START_TEST(test_in_flight_and_reset) {
        Stats *s;
        StatsSnapshot *snap = malloc(sizeof *snap);
        pthread_t t;
        Handoff h;

        ck_assert_int_eq(stats_new(&s), 0);
        for (unsigned i = 0; i < 10; i++)
                stats_begin(s);
        stats_record(s, 1, 15, 0, 10, 1);
        stats_snapshot(s, snap);
        ck_assert_uint_eq(snap->in_flight, 9);

        /* Begun on this thread, ended on another (a pool worker). */
        h = (Handoff) { .s = s, .n = 6 };
        ck_assert_int_eq(pthread_create(&t, NULL, end_thread, &h), 0);
        pthread_join(t, NULL);
        stats_snapshot(s, snap);
        ck_assert_uint_eq(snap->in_flight, 3);
        ck_assert_uint_eq(snap->op[15].requests, 7);

        /* Reset clears counts, not what is in flight. */
        stats_reset(s);
        stats_snapshot(s, snap);
        ck_assert_uint_eq(snap->op[15].requests, 0);
        ck_assert_uint_eq(snap->op[15].bytes, 0);
        ck_assert_uint_eq(snap->queue[1].latency_hist[0], 0);
        ck_assert_uint_eq(snap->in_flight, 3);

        stats_record(s, 1, 15, -EIO, 5, 2);
        h.n = 2; /* the exited thread's shard is reused (counts kept) and its baseline applies */
        ck_assert_int_eq(pthread_create(&t, NULL, end_thread, &h), 0);
        pthread_join(t, NULL);
        stats_snapshot(s, snap);
        ck_assert_uint_eq(snap->op[15].requests, 3);
        ck_assert_uint_eq(snap->op[15].bytes, 5);
        ck_assert_uint_eq(snap->op[15].errors, 1);
        ck_assert_uint_eq(snap->queue[1].latency_hist[1], 1);
        ck_assert_uint_eq(snap->queue[1].latency_hist[0], 2);
        ck_assert_uint_eq(snap->in_flight, 0);
        free(snap);
        stats_free(s);
}
END_TEST

START_TEST(test_shard_reuse) {
        Stats *s;
        StatsSnapshot *snap = malloc(sizeof *snap);
        Handoff h;

        ck_assert_int_eq(stats_new(&s), 0);
        h = (Handoff) { .s = s, .n = 3 };
        /* Worker churn (live switching) must not grow memory: one thread at a time, one shard. */
        for (unsigned i = 0; i < 100; i++) {
                pthread_t t;
                ck_assert_int_eq(pthread_create(&t, NULL, end_thread, &h), 0);
                pthread_join(t, NULL);
        }
        ck_assert_uint_eq(stats_n_shards(s), 1);
        stats_snapshot(s, snap);
        ck_assert_uint_eq(snap->op[15].requests, 300);
        free(snap);
        stats_free(s);
}
END_TEST

static void *many_stats_thread(void *userdata) {
        Stats **all = userdata;

        for (unsigned k = 0; k < 1000; k++)
                stats_record(all[k % 6], 0, 1, 0, 1, 0);
        return NULL;
}

START_TEST(test_many_stats_per_thread) {
        Stats *all[6];
        StatsSnapshot *snap = malloc(sizeof *snap);
        pthread_t t;

        for (unsigned i = 0; i < 6; i++)
                ck_assert_int_eq(stats_new(&all[i]), 0);
        /* More Stats than a thread caches: bindings get evicted and re-established, shards reused. */
        ck_assert_int_eq(pthread_create(&t, NULL, many_stats_thread, all), 0);
        pthread_join(t, NULL);
        many_stats_thread(all);
        for (unsigned i = 0; i < 6; i++) {
                stats_snapshot(all[i], snap);
                ck_assert_uint_eq(snap->op[1].requests, i < 4 ? 334 : 332);
                ck_assert_uint_le(stats_n_shards(all[i]), 2);
                stats_free(all[i]);
        }
        free(snap);
}
END_TEST

typedef struct Outlive {
        Stats *s;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int step;
} Outlive;

static void *outlive_thread(void *userdata) {
        Outlive *o = userdata;

        stats_record(o->s, 0, 1, 0, 0, 0);
        pthread_mutex_lock(&o->lock);
        o->step = 1;
        pthread_cond_broadcast(&o->cond);
        while (o->step != 2)
                pthread_cond_wait(&o->cond, &o->lock);
        pthread_mutex_unlock(&o->lock);
        return NULL; /* exits after its Stats is gone: the exit hook must not touch it */
}

START_TEST(test_thread_outlives_stats) {
        Outlive o = { .step = 0 };
        pthread_t t;

        pthread_mutex_init(&o.lock, NULL);
        pthread_cond_init(&o.cond, NULL);
        ck_assert_int_eq(stats_new(&o.s), 0);
        ck_assert_int_eq(pthread_create(&t, NULL, outlive_thread, &o), 0);
        pthread_mutex_lock(&o.lock);
        while (o.step != 1)
                pthread_cond_wait(&o.cond, &o.lock);
        stats_free(o.s);
        /* A new Stats may get the same address; the old thread's binding must not match it. */
        ck_assert_int_eq(stats_new(&o.s), 0);
        o.step = 2;
        pthread_cond_broadcast(&o.cond);
        pthread_mutex_unlock(&o.lock);
        pthread_join(t, NULL);
        ck_assert_uint_eq(stats_n_shards(o.s), 0);
        stats_free(o.s);
}
END_TEST

START_TEST(test_overhead) {
        Stats *s;
        const unsigned n = 2000000;
        uint64_t t0, t1, t2;
        struct timespec ts;
        volatile uint64_t sink = 0;

        ck_assert_int_eq(stats_new(&s), 0);
        t0 = now_ns();
        for (unsigned i = 0; i < n; i++) {
                stats_begin(s);
                stats_record(s, 1 + (i & 3), i & 63, 0, 4096, i & 255);
        }
        t1 = now_ns();
        /* For scale: the clock pair each request pays for its latency. */
        for (unsigned i = 0; i < n / 2; i++) {
                clock_gettime(CLOCK_MONOTONIC, &ts);
                sink += (uint64_t) ts.tv_nsec;
        }
        (void) sink; /* only there so that the loop is not optimized away */
        t2 = now_ns();
        printf("stats: begin+record %.1f ns per request; clock_gettime %.1f ns per call\n",
               (double) (t1 - t0) / n, (double) (t2 - t1) / (n / 2));
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
        /* Generous (a loaded 2-CPU machine), but recording must never approach a syscall. */
        ck_assert_uint_lt((t1 - t0) / n, 200);
#endif
        stats_free(s);
}
END_TEST

static Suite *stats_suite(void) {
        Suite *s = suite_create("stats");
        TCase *tc = tcase_create("core");
        tcase_add_test(tc, test_bucket_edges);
        tcase_add_test(tc, test_record_rows);
        tcase_add_test(tc, test_errno_rows);
        tcase_add_test(tc, test_sum_across_threads);
        tcase_add_test(tc, test_in_flight_and_reset);
        tcase_add_test(tc, test_shard_reuse);
        tcase_add_test(tc, test_many_stats_per_thread);
        tcase_add_test(tc, test_thread_outlives_stats);
        tcase_add_test(tc, test_overhead);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(stats_suite)
