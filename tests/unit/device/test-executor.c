/* test-executor.c: threading modes, live switching and the auto rules, with synthetic work items. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "executor.h"
#include "test-main.h"

/* Sanitizers make thread creation 50-100x slower (TSan: ~50 ms per thread here): smaller pools. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_FACTOR 5
#define BIG_POOL 64
#else
#define SLOW_FACTOR 1
#define BIG_POOL EXECUTOR_MAX_POOL_SIZE
#endif

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static void sleep_us(unsigned us) {
        struct timespec ts = { us / 1000000, (long) (us % 1000000) * 1000 };
        nanosleep(&ts, NULL);
}

static ExecutorState state(Executor *e) {
        ExecutorState st;
        executor_get_state(e, &st);
        return st;
}

/* Polls until the pool has n live workers (retirement is asynchronous); returns the time it took. */
static uint64_t wait_live(Executor *e, unsigned n, unsigned timeout_ms) {
        uint64_t t0 = now_ns();

        while (state(e).live_workers != n) {
                if (now_ns() - t0 > (uint64_t) timeout_ms * 1000000)
                        ck_abort_msg("pool still has %u workers, want %u", state(e).live_workers, n);
                sleep_us(200);
        }
        return now_ns() - t0;
}

/* The command-line rules for the mode and size are the config layer's (test-config.c). */
START_TEST(test_strings_and_options) {
        ck_assert_str_eq(thread_mode_to_string(THREAD_MODE_INLINE), "inline");
        ck_assert_str_eq(thread_mode_to_string(THREAD_MODE_POOL), "pool");
        ck_assert_str_eq(thread_mode_to_string(THREAD_MODE_AUTO), "auto");
        ck_assert_ptr_null(thread_mode_to_string(_THREAD_MODE_MAX));
        ck_assert_int_eq(thread_mode_from_string("auto"), THREAD_MODE_AUTO);
        ck_assert_int_eq(thread_mode_from_string("Auto"), -EINVAL);
        ck_assert_int_eq(thread_mode_from_string(NULL), -EINVAL);

}
END_TEST

START_TEST(test_set_mode_validation) {
        Executor *e;
        ExecutorState st;

        ck_assert_int_eq(executor_new(&e, THREAD_MODE_POOL, 0), -ERANGE);
        ck_assert_int_eq(executor_new(&e, THREAD_MODE_POOL, 1025), -ERANGE);
        ck_assert_int_eq(executor_new(&e, (ThreadMode) 7, 4), -EINVAL);
        ck_assert_int_eq(executor_new(&e, THREAD_MODE_POOL, 3), 0);
        st = state(e);
        ck_assert_int_eq(st.mode, THREAD_MODE_POOL);
        ck_assert_uint_eq(st.pool_size, 3);
        ck_assert_uint_eq(st.live_workers, 3);
        ck_assert_uint_eq(st.switches, 0);

        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_AUTO, 0), -ERANGE);
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_AUTO, 1025), -ERANGE);
        ck_assert_int_eq(executor_set_mode(e, _THREAD_MODE_INVALID, 4), -EINVAL);
        ck_assert_int_eq(executor_set_mode(e, _THREAD_MODE_MAX, 4), -EINVAL);
        ck_assert_uint_eq(state(e).switches, 0);

        /* Same setting again: no switch. Inline ignores (keeps) the size. */
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_POOL, 3), 0);
        ck_assert_uint_eq(state(e).switches, 0);
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_INLINE, 999), 0);
        st = state(e);
        ck_assert_int_eq(st.mode, THREAD_MODE_INLINE);
        ck_assert_uint_eq(st.pool_size, 3);
        ck_assert_uint_eq(st.switches, 1);
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_INLINE, 0), 0);
        ck_assert_uint_eq(state(e).switches, 1);
        wait_live(e, 0, 2000 * SLOW_FACTOR);
        executor_free(e);
}
END_TEST

START_TEST(test_grow_immediate_shrink_lazy) {
        Executor *e;
        uint64_t t0, grow_ns, shrink_ns;

        ck_assert_int_eq(executor_new(&e, THREAD_MODE_POOL, 1), 0);
        t0 = now_ns();
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_POOL, BIG_POOL / 4), 0);
        grow_ns = now_ns() - t0;
        /* Growing is immediate: the workers exist when set_mode returns. */
        ck_assert_uint_eq(state(e).live_workers, BIG_POOL / 4);

        /* Shrinking returns at once and idle workers leave promptly. */
        t0 = now_ns();
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_AUTO, 2), 0);
        ck_assert_timing_lt(now_ns() - t0, 100000000ULL * SLOW_FACTOR);
        wait_live(e, 2, 2000 * SLOW_FACTOR);
        shrink_ns = now_ns() - t0;
        printf("executor: grow 1->%u workers %.2f ms; %u->2 idle workers retired %.2f ms after the call\n",
               BIG_POOL / 4, grow_ns / 1e6, BIG_POOL / 4, shrink_ns / 1e6);
        ck_assert_timing_lt(shrink_ns, 100000000ULL * SLOW_FACTOR);

        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_POOL, BIG_POOL), 0);
        ck_assert_uint_eq(state(e).live_workers, BIG_POOL);
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_INLINE, 0), 0);
        wait_live(e, 0, 5000 * SLOW_FACTOR);
        ck_assert_uint_eq(state(e).switches, 4);
        executor_free(e);
}
END_TEST

/* ---- synthetic work ---- */

typedef struct Gate {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool open;
        unsigned waiting;
} Gate;

static void gate_init(Gate *g) {
        pthread_mutex_init(&g->lock, NULL);
        pthread_cond_init(&g->cond, NULL);
        g->open = false;
        g->waiting = 0;
}

static void gate_pass(Gate *g) {
        pthread_mutex_lock(&g->lock);
        g->waiting++;
        pthread_cond_broadcast(&g->cond);
        while (!g->open)
                pthread_cond_wait(&g->cond, &g->lock);
        g->waiting--;
        pthread_mutex_unlock(&g->lock);
}

static void gate_wait_waiting(Gate *g, unsigned n) {
        pthread_mutex_lock(&g->lock);
        while (g->waiting < n)
                pthread_cond_wait(&g->cond, &g->lock);
        pthread_mutex_unlock(&g->lock);
}

static void gate_open(Gate *g) {
        pthread_mutex_lock(&g->lock);
        g->open = true;
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->lock);
}

typedef struct Item {
        ExecWork work;
        _Atomic unsigned runs;
        Gate *gate;      /* wait here if set (a blocking request) */
        unsigned spin_us; /* simulated service time */
        _Atomic unsigned *done;
        pthread_t ran_on;
} Item;

static void item_run(ExecWork *w) {
        Item *it = (Item *) w;

        it->ran_on = pthread_self();
        if (it->gate)
                gate_pass(it->gate);
        if (it->spin_us)
                sleep_us(it->spin_us);
        atomic_fetch_add(&it->runs, 1);
        if (it->done)
                atomic_fetch_add(it->done, 1);
}

static void item_init(Item *it, _Atomic unsigned *done) {
        memset(it, 0, sizeof *it);
        it->work.run = item_run;
        it->done = done;
}

static void wait_done(_Atomic unsigned *done, unsigned n, unsigned timeout_ms) {
        uint64_t t0 = now_ns();

        while (atomic_load(done) < n) {
                if (now_ns() - t0 > (uint64_t) timeout_ms * 1000000)
                        ck_abort_msg("%u of %u items done", atomic_load(done), n);
                sleep_us(200);
        }
}

START_TEST(test_blocking_does_not_stall_pool) {
        Executor *e;
        ExecQueue q;
        Gate gate;
        Item lockw[3], normal[50];
        _Atomic unsigned done = 0;

        gate_init(&gate);
        ck_assert_int_eq(executor_new(&e, THREAD_MODE_POOL, 1), 0);
        executor_attach_queue(e, &q);

        /* Three lock waits block (each needs a thread of its own); a pool of one keeps serving. */
        for (unsigned i = 0; i < 3; i++) {
                item_init(&lockw[i], &done);
                lockw[i].gate = &gate;
                ck_assert_int_eq(executor_route(&q, EXEC_CLASS_LOCK_WAIT, 0), EXEC_ROUTE_HELPER);
                executor_submit(e, &lockw[i].work, EXEC_ROUTE_HELPER);
        }
        gate_wait_waiting(&gate, 3);
        for (unsigned i = 0; i < 50; i++) {
                item_init(&normal[i], &done);
                ck_assert_int_eq(executor_route(&q, EXEC_CLASS_META, 0), EXEC_ROUTE_POOL);
                executor_submit(e, &normal[i].work, EXEC_ROUTE_POOL);
        }
        wait_done(&done, 50, 5000 * SLOW_FACTOR);
        ck_assert_uint_eq(state(e).live_helpers, 3);

        /* Inline mode: a lock wait still goes elsewhere, the queue thread keeps going. */
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_INLINE, 0), 0);
        ck_assert_int_eq(executor_route(&q, EXEC_CLASS_LOCK_WAIT, 0), EXEC_ROUTE_HELPER);
        ck_assert_int_eq(executor_route(&q, EXEC_CLASS_SYNC, 100), EXEC_ROUTE_INLINE);

        gate_open(&gate);
        wait_done(&done, 53, 5000 * SLOW_FACTOR);
        for (unsigned i = 0; i < 3; i++)
                ck_assert_uint_eq(atomic_load(&lockw[i].runs), 1);
        for (unsigned i = 0; i < 50; i++)
                ck_assert_uint_eq(atomic_load(&normal[i].runs), 1);
        ck_assert_uint_eq(state(e).helper_runs, 4);
        executor_detach_queue(&q);
        executor_free(e);
}
END_TEST

/* No helper thread can be created: the lock wait runs on the thread that submitted it, and the
 * executor says so (on_submitter), so that it is tried once instead of holding up the queue
 * (issue 13 item 2). Helpers that can be created run it with on_submitter false. */
START_TEST(test_helper_creation_fails) {
        Executor *e;
        ExecQueue q;
        Item it;
        _Atomic unsigned done = 0;
        pthread_attr_t saved, huge;

        ck_assert_int_eq(executor_new(&e, THREAD_MODE_INLINE, 1), 0);
        executor_attach_queue(e, &q);

        /* Every new thread now asks for a stack larger than the address space. */
        ck_assert_int_eq(pthread_getattr_default_np(&saved), 0);
        ck_assert_int_eq(pthread_attr_init(&huge), 0);
        ck_assert_int_eq(pthread_attr_setstacksize(&huge, (size_t)1 << 50), 0);
        ck_assert_int_eq(pthread_setattr_default_np(&huge), 0);

        item_init(&it, &done);
        ck_assert_int_eq(executor_route(&q, EXEC_CLASS_LOCK_WAIT, 0), EXEC_ROUTE_HELPER);
        executor_submit(e, &it.work, EXEC_ROUTE_HELPER);
        ck_assert_int_eq(pthread_setattr_default_np(&saved), 0);
        /* It ran before submit returned, here, and was told so. */
        ck_assert_uint_eq(atomic_load(&it.runs), 1);
        ck_assert(pthread_equal(it.ran_on, pthread_self()));
        ck_assert(it.work.on_submitter);
        ck_assert_uint_eq(state(e).live_helpers, 0);

        /* With threads again: a helper runs it, not told to hurry. */
        item_init(&it, &done);
        it.work.on_submitter = true; /* stale from earlier use: submit resets it */
        executor_submit(e, &it.work, EXEC_ROUTE_HELPER);
        wait_done(&done, 2, 5000 * SLOW_FACTOR);
        ck_assert(!pthread_equal(it.ran_on, pthread_self()));
        ck_assert(!it.work.on_submitter);

        pthread_attr_destroy(&huge);
        pthread_attr_destroy(&saved);
        executor_detach_queue(&q);
        executor_free(e);
}
END_TEST

START_TEST(test_queued_work_survives_switch) {
        Executor *e;
        Gate gate;
        Item first, rest[200];
        _Atomic unsigned done = 0;

        gate_init(&gate);
        ck_assert_int_eq(executor_new(&e, THREAD_MODE_POOL, 1), 0);
        item_init(&first, &done);
        first.gate = &gate;
        executor_submit(e, &first.work, EXEC_ROUTE_POOL);
        gate_wait_waiting(&gate, 1);
        for (unsigned i = 0; i < 200; i++) {
                item_init(&rest[i], &done);
                executor_submit(e, &rest[i].work, EXEC_ROUTE_POOL);
        }
        ck_assert_uint_eq(state(e).pool_queued, 200);

        /* Back to inline with 200 requests waiting in the pool: they finish there. The switch
         * itself does not wait for them. */
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_INLINE, 0), 0);
        ck_assert_uint_eq(state(e).live_workers, 1);
        gate_open(&gate);
        wait_done(&done, 201, 5000 * SLOW_FACTOR);
        ck_assert_uint_eq(atomic_load(&first.runs), 1);
        for (unsigned i = 0; i < 200; i++)
                ck_assert_uint_eq(atomic_load(&rest[i].runs), 1);
        wait_live(e, 0, 2000 * SLOW_FACTOR);

        /* A queue thread that chose the pool just before the switch finds an empty pool: a worker is
         * started for it and leaves afterwards. */
        done = 0;
        item_init(&first, &done);
        executor_submit(e, &first.work, EXEC_ROUTE_POOL);
        wait_done(&done, 1, 5000 * SLOW_FACTOR);
        wait_live(e, 0, 2000 * SLOW_FACTOR);
        executor_free(e);
}
END_TEST

START_TEST(test_shrink_busy_pool) {
        Executor *e;
        Gate gate;
        Item busy[8], more[100];
        _Atomic unsigned done = 0;
        uint64_t t0;

        gate_init(&gate);
        ck_assert_int_eq(executor_new(&e, THREAD_MODE_POOL, 8), 0);
        for (unsigned i = 0; i < 8; i++) {
                item_init(&busy[i], &done);
                busy[i].gate = &gate;
                executor_submit(e, &busy[i].work, EXEC_ROUTE_POOL);
        }
        gate_wait_waiting(&gate, 8);
        for (unsigned i = 0; i < 100; i++) {
                item_init(&more[i], &done);
                executor_submit(e, &more[i].work, EXEC_ROUTE_POOL);
        }
        /* Shrinking while every worker is busy returns at once... */
        t0 = now_ns();
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_POOL, 2), 0);
        ck_assert_timing_lt(now_ns() - t0, 50000000ULL * SLOW_FACTOR);
        /* ...and surplus workers leave as they finish, while the queued work still completes. */
        gate_open(&gate);
        wait_done(&done, 108, 5000 * SLOW_FACTOR);
        wait_live(e, 2, 2000 * SLOW_FACTOR);
        for (unsigned i = 0; i < 100; i++)
                ck_assert_uint_eq(atomic_load(&more[i].runs), 1);
        executor_free(e);
}
END_TEST

/* Routes one request in auto mode and tallies the decision, to check the executor's counters. */
static unsigned n_auto_inline, n_auto_pool;
static ExecRoute route_auto(ExecQueue *q, ExecClass c, unsigned backlog) {
        ExecRoute r = executor_route(q, c, backlog);
        if (r == EXEC_ROUTE_INLINE)
                n_auto_inline++;
        else if (r == EXEC_ROUTE_POOL)
                n_auto_pool++;
        return r;
}

/* Feeds n samples of a class: service time, of which CPU time (as executor_account_sample()), and
 * the same service time as an inline measurement. */
static void feed(ExecQueue *q, ExecClass c, uint64_t service_ns, uint64_t cpu_ns, unsigned n) {
        for (unsigned i = 0; i < n; i++) {
                executor_account(q, c, service_ns, true);
                executor_account_sample(q, c, service_ns, cpu_ns);
        }
}

START_TEST(test_auto_rules) {
        Executor *e;
        ExecQueue q;
        Gate gate;
        Item blocker, filler[3];
        _Atomic unsigned done = 0;
        ExecutorState st;
        unsigned samples = 0;

        n_auto_inline = n_auto_pool = 0;
        ck_assert_int_eq(executor_new(&e, THREAD_MODE_AUTO, 1), 0);
        executor_attach_queue(e, &q);

        /* CPU-bound work (the starting assumption for metadata and small I/O) stays inline however
         * deep the backlog: a worker could only take turns with the queue thread. */
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_META, 0), EXEC_ROUTE_INLINE);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_META, 100), EXEC_ROUTE_INLINE);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_IO, 100), EXEC_ROUTE_INLINE);

        /* Sampled as waiting (90 of 100 µs off the CPU): to the pool with one request behind it. */
        feed(&q, EXEC_CLASS_META, 100000, 10000, 100);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_META, 0), EXEC_ROUTE_INLINE);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_META, 1), EXEC_ROUTE_POOL);
        /* Cheaper (22 µs, all of it waiting) raises the threshold to two. */
        feed(&q, EXEC_CLASS_META, 22000, 0, 100);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_META, 1), EXEC_ROUTE_INLINE);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_META, 2), EXEC_ROUTE_POOL);
        /* Short waits (preemption, a page fault: 10 of 12 µs here) are not worth a hand-off. */
        feed(&q, EXEC_CLASS_IO, 12000, 2000, 100);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_IO, 100), EXEC_ROUTE_INLINE);
        /* A handed-off request's latency never raises an estimate. */
        for (unsigned i = 0; i < 100; i++)
                executor_account(&q, EXEC_CLASS_META, 1000000, false);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_META, 1), EXEC_ROUTE_INLINE);
        /* Waiting turned into computing: back inline at any depth. */
        feed(&q, EXEC_CLASS_META, 30000, 29000, 100);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_META, 100), EXEC_ROUTE_INLINE);
        /* Slow waiting I/O for the congestion check below. */
        feed(&q, EXEC_CLASS_IO, 100000, 10000, 100);

        /* May-block classes start as slow and waiting: they leave even when nothing waits... */
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_SYNC, 0), EXEC_ROUTE_POOL);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_LARGE_IO, 0), EXEC_ROUTE_POOL);
        /* ...until they prove fast (handed-off latencies lower the estimate)... */
        for (unsigned i = 0; i < 100; i++)
                executor_account(&q, EXEC_CLASS_LARGE_IO, 30000, false);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_LARGE_IO, 0), EXEC_ROUTE_INLINE);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_SYNC, 0), EXEC_ROUTE_POOL);
        /* ...or CPU-bound (an fsync on tmpfs): inline even when slow. */
        for (unsigned i = 0; i < 100; i++)
                executor_account_sample(&q, EXEC_CLASS_SYNC, 1000000, 990000);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_SYNC, 0), EXEC_ROUTE_INLINE);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_SYNC, 50), EXEC_ROUTE_INLINE);
        ck_assert_int_eq(executor_route(&q, EXEC_CLASS_LOCK_WAIT, 0), EXEC_ROUTE_HELPER);

        /* A pool already behind (2 waiting per worker) is not fed more: the queue thread works. */
        gate_init(&gate);
        item_init(&blocker, &done);
        blocker.gate = &gate;
        executor_submit(e, &blocker.work, EXEC_ROUTE_POOL);
        gate_wait_waiting(&gate, 1);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_IO, 10), EXEC_ROUTE_POOL);
        for (unsigned i = 0; i < 2; i++) {
                item_init(&filler[i], &done);
                executor_submit(e, &filler[i].work, EXEC_ROUTE_POOL);
        }
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_IO, 10), EXEC_ROUTE_INLINE);
        /* ...but slow waiting work still leaves the queue thread. */
        feed(&q, EXEC_CLASS_DIR, 400000, 20000, 100);
        ck_assert_int_eq(route_auto(&q, EXEC_CLASS_DIR, 10), EXEC_ROUTE_POOL);
        gate_open(&gate);
        wait_done(&done, 3, 5000 * SLOW_FACTOR);

        st = state(e);
        ck_assert_uint_eq(st.auto_inline, n_auto_inline);
        ck_assert_uint_eq(st.auto_pool, n_auto_pool);
        ck_assert_uint_eq(st.helper_runs, 1);

        /* One request of a class in 256 (metadata) or 8 (sync) is sampled, counted per class, in
         * auto mode only. */
        for (unsigned i = 0; i < 2048; i++) {
                samples += executor_want_sample(&q, EXEC_CLASS_META);
                if (i % 8 == 0)
                        samples += 100 * executor_want_sample(&q, EXEC_CLASS_SYNC);
        }
        ck_assert_uint_eq(samples, 8 + 100 * 32);

        /* Pool mode: no auto accounting, no sampling. */
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_POOL, 1), 0);
        ck_assert_int_eq(executor_route(&q, EXEC_CLASS_META, 0), EXEC_ROUTE_POOL);
        for (unsigned i = 0; i < 128; i++)
                ck_assert(!executor_want_sample(&q, EXEC_CLASS_META));
        st = state(e);
        ck_assert_uint_eq(st.auto_inline + st.auto_pool, n_auto_inline + n_auto_pool);
        ck_assert_uint_eq(st.pool_runs, n_auto_pool + 1);
        /* Detaching keeps the counts. */
        executor_detach_queue(&q);
        st = state(e);
        ck_assert_uint_eq(st.auto_inline, n_auto_inline);
        ck_assert_uint_eq(st.pool_runs, n_auto_pool + 1);
        executor_free(e);
}
END_TEST

#ifdef TEST_TIMING
/* What the data path pays per request for the executor: the route (inline path, lock-free; the
 * request handler's classify() is measured with it in test-fuse-handler), and a hand-off to the
 * pool (lock, list, wake-up) measured as throughput through one worker. */
START_TEST(test_costs) {
        const unsigned n = 1000000, n_pool = 100000;
        _Atomic unsigned done = 0;
        Executor *e;
        ExecQueue q;
        Item *items;
        uint64_t t0, t_inline, t_auto, t_pool;
        unsigned not_inline = 0, bad = 0;

        /* No ck_assert inside the timed loops: each one reports its location to Check's parent. */
        ck_assert_int_eq(executor_new(&e, THREAD_MODE_INLINE, 1), 0);
        executor_attach_queue(e, &q);
        t0 = now_ns();
        for (unsigned i = 0; i < n; i++)
                not_inline += executor_route(&q, EXEC_CLASS_META, i & 7) != EXEC_ROUTE_INLINE;
        t_inline = now_ns() - t0;
        ck_assert_uint_eq(not_inline, 0);
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_AUTO, 1), 0);
        t0 = now_ns();
        for (unsigned i = 0; i < n; i++)
                (void) executor_route(&q, EXEC_CLASS_META, i & 1);
        t_auto = now_ns() - t0;

        items = calloc(n_pool, sizeof *items);
        ck_assert_int_eq(executor_set_mode(e, THREAD_MODE_POOL, 1), 0);
        t0 = now_ns();
        for (unsigned i = 0; i < n_pool; i++) {
                item_init(&items[i], &done);
                executor_submit(e, &items[i].work, EXEC_ROUTE_POOL);
        }
        wait_done(&done, n_pool, 30000 * SLOW_FACTOR);
        t_pool = now_ns() - t0;
        printf("executor: classify+route %.1f ns inline, %.1f ns auto; pool hand-off %.2f µs per item "
               "(throughput through one worker)\n",
               (double) t_inline / n, (double) t_auto / n, t_pool / 1e3 / n_pool);
        for (unsigned i = 0; i < n_pool; i++)
                bad += atomic_load(&items[i].runs) != 1;
        ck_assert_uint_eq(bad, 0);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
        ck_assert_timing_lt(t_inline / n, 500);
#endif
        free(items);
        executor_detach_queue(&q);
        executor_free(e);
}
END_TEST
#endif

/* ---- switch storm ---- */

#define STORM_SUBMITTERS 4
#define STORM_MAX_ITEMS 400000 /* per submitter */
#define STORM_SECONDS 3

typedef struct Storm {
        Executor *e;
        uint64_t deadline_ns;
        atomic_bool stop;
        _Atomic unsigned done;
        _Atomic uint64_t max_switch_ns;
        _Atomic unsigned n_switches;
} Storm;

typedef struct Submitter {
        Storm *storm;
        ExecQueue q;
        Item *items;
        unsigned n_items;
        unsigned seed;
} Submitter;

static void *submitter_main(void *userdata) {
        Submitter *s = userdata;
        Executor *e = s->storm->e;

        for (unsigned i = 0; i < STORM_MAX_ITEMS; i++) {
                Item *it = &s->items[i];

                if (i % 256 == 0 && now_ns() > s->storm->deadline_ns)
                        break;
                s->n_items = i + 1;
                unsigned r = (unsigned) rand_r(&s->seed);
                ExecClass c = (ExecClass) (r % 100 < 2 ? EXEC_CLASS_LOCK_WAIT
                                           : r % 100 < 6 ? EXEC_CLASS_SYNC
                                                         : EXEC_CLASS_META);
                ExecRoute route;

                item_init(it, &s->storm->done);
                it->spin_us = c == EXEC_CLASS_META ? 0 : 50 + r % 200;
                /* a backlog that varies like a guest's queue depth */
                route = executor_route(&s->q, c, (r >> 8) % 32);
                if (route == EXEC_ROUTE_INLINE) {
                        uint64_t t0 = now_ns();
                        item_run(&it->work);
                        executor_account(&s->q, c, now_ns() - t0, true);
                } else
                        executor_submit(e, &it->work, route);
                if (i % 64 == 0)
                        sched_yield();
        }
        return NULL;
}

static void *switcher_main(void *userdata) {
        Storm *st = userdata;
        unsigned seed = 12345;

        while (!atomic_load(&st->stop)) {
                unsigned r = (unsigned) rand_r(&seed);
                ThreadMode m = (ThreadMode) (r % 3);
                unsigned size = 1 + (r >> 4) % (r % 7 == 0 ? BIG_POOL / 4 : 16);
                uint64_t t0 = now_ns(), dt;

                ck_assert_int_eq(executor_set_mode(st->e, m, size), 0);
                dt = now_ns() - t0;
                if (dt > atomic_load(&st->max_switch_ns))
                        atomic_store(&st->max_switch_ns, dt);
                atomic_fetch_add(&st->n_switches, 1);
                sleep_us(500 + r % 1500);
        }
        return NULL;
}

START_TEST(test_switch_storm) {
        Storm storm = { .done = 0, .deadline_ns = now_ns() + STORM_SECONDS * 1000000000ULL };
        Submitter subs[STORM_SUBMITTERS];
        pthread_t sub_threads[STORM_SUBMITTERS], switcher;
        ExecutorState st;
        uint64_t t0 = now_ns();
        unsigned total = 0;

        ck_assert_int_eq(executor_new(&storm.e, THREAD_MODE_AUTO, 4), 0);
        ck_assert_int_eq(pthread_create(&switcher, NULL, switcher_main, &storm), 0);
        for (unsigned i = 0; i < STORM_SUBMITTERS; i++) {
                subs[i] = (Submitter) { .storm = &storm, .seed = 7 * i + 1 };
                subs[i].items = calloc(STORM_MAX_ITEMS, sizeof(Item));
                executor_attach_queue(storm.e, &subs[i].q);
                ck_assert_int_eq(pthread_create(&sub_threads[i], NULL, submitter_main, &subs[i]), 0);
        }
        for (unsigned i = 0; i < STORM_SUBMITTERS; i++) {
                pthread_join(sub_threads[i], NULL);
                total += subs[i].n_items;
        }
        wait_done(&storm.done, total, 30000 * SLOW_FACTOR);
        atomic_store(&storm.stop, true);
        pthread_join(switcher, NULL);

        /* Every item ran exactly once, whatever the switches did to it. */
        for (unsigned i = 0; i < STORM_SUBMITTERS; i++)
                for (unsigned k = 0; k < subs[i].n_items; k++)
                        if (atomic_load(&subs[i].items[k].runs) != 1)
                                ck_abort_msg("submitter %u item %u ran %u times", i, k,
                                             atomic_load(&subs[i].items[k].runs));
        st = state(storm.e);
        ck_assert_uint_eq(st.inline_runs + st.pool_runs + st.helper_runs, total);
        ck_assert_uint_gt(st.pool_runs, 0);
        ck_assert_uint_gt(st.inline_runs, 0);
        ck_assert_uint_gt(st.helper_runs, 0);
        ck_assert_uint_gt(st.auto_inline + st.auto_pool, 0);
        printf("executor storm: %u items in %.2f s, %u switches (max set_mode %.2f ms), inline %" PRIu64
               " pool %" PRIu64 " helper %" PRIu64 " auto inline/pool %" PRIu64 "/%" PRIu64 "\n",
               total, (now_ns() - t0) / 1e9, atomic_load(&storm.n_switches),
               atomic_load(&storm.max_switch_ns) / 1e6, st.inline_runs, st.pool_runs, st.helper_runs,
               st.auto_inline, st.auto_pool);
        ck_assert_uint_gt(atomic_load(&storm.n_switches), 10);
        for (unsigned i = 0; i < STORM_SUBMITTERS; i++) {
                executor_detach_queue(&subs[i].q);
                free(subs[i].items);
        }
        executor_free(storm.e);
}
END_TEST

static Suite *executor_suite(void) {
        Suite *s = suite_create("executor");
        TCase *tc = tcase_create("core");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_strings_and_options);
        tcase_add_test(tc, test_set_mode_validation);
        tcase_add_test(tc, test_grow_immediate_shrink_lazy);
        tcase_add_test(tc, test_blocking_does_not_stall_pool);
        tcase_add_test(tc, test_helper_creation_fails);
        tcase_add_test(tc, test_queued_work_survives_switch);
        tcase_add_test(tc, test_shrink_busy_pool);
        tcase_add_test(tc, test_auto_rules);
#ifdef TEST_TIMING
        /* A micro-benchmark: only where its bound is checked. */
        tcase_add_test(tc, test_costs);
#endif
        tcase_add_test(tc, test_switch_storm);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(executor_suite)
