/* executor.c: the worker pool and the helper threads: inline, pool and auto request execution,
 * switchable while requests flow. How it works (hand-off, switching, the auto rules) is written
 * up in docs/threading.md, "Inside the executor"; the auto policy itself is in auto-policy.c. */
#include "executor.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "executor-internal.h"
#include "log.h"
#include "util.h"

#define EXEC_HELPER_LINGER_MS 1000

static const char *const thread_mode_table[_THREAD_MODE_MAX] = {
        [THREAD_MODE_INLINE] = "inline",
        [THREAD_MODE_POOL] = "pool",
        [THREAD_MODE_AUTO] = "auto",
};

DEFINE_STRING_TABLE_LOOKUP(thread_mode, ThreadMode, _THREAD_MODE_MAX);

unsigned executor_default_pool_size(void) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        if (n < 1)
                n = 1;
        return (unsigned) MIN(MAX(2 * n, 4L), 64L);
}

/* ---- worker sets ---- */

static void worker_set_init(WorkerSet *ws, const char *name, bool helpers, unsigned cap) {
        pthread_condattr_t attr;

        *ws = (WorkerSet) { .name = name, .helpers = helpers, .cap = cap };
        pthread_mutex_init(&ws->lock, NULL);
        /* Helpers time out while idle: measure that on the monotonic clock. */
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&ws->work_cond, &attr);
        pthread_condattr_destroy(&attr);
        pthread_cond_init(&ws->exit_cond, NULL);
}

static void worker_set_done(WorkerSet *ws) {
        pthread_mutex_destroy(&ws->lock);
        pthread_cond_destroy(&ws->work_cond);
        pthread_cond_destroy(&ws->exit_cond);
}

/* Whether a pool worker (not a helper) should exit now. Under ws->lock. */
static bool pool_worker_retires_locked(WorkerSet *ws) {
        unsigned live = atomic_load_explicit(&ws->live, memory_order_relaxed);

        if (live <= ws->target)
                return false;
        /* Over target: leave if there is nothing to do, or if enough workers remain to do it. The
         * last one stays until the list is empty (inline mode drains what was handed over). */
        return !ws->head || live - 1 >= MAX(ws->target, 1u);
}

static ExecWork *worker_set_pop_locked(WorkerSet *ws) {
        ExecWork *w = ws->head;

        if (!w)
                return NULL;
        ws->head = w->next;
        if (!ws->head)
                ws->tail = NULL;
        w->next = NULL;
        atomic_store_explicit(&ws->queued, atomic_load_explicit(&ws->queued, memory_order_relaxed) - 1,
                              memory_order_relaxed);
        return w;
}

static void *worker_main(void *userdata) {
        Worker *self = userdata;
        WorkerSet *ws = self->set;
        char name[16];

        snprintf(name, sizeof name, "vufsd-%s%u", ws->name, self->id);
        (void) pthread_setname_np(pthread_self(), name);

        pthread_mutex_lock(&ws->lock);
        for (;;) {
                ExecWork *w;

                if (!ws->helpers && pool_worker_retires_locked(ws))
                        break;
                w = worker_set_pop_locked(ws);
                if (w) {
                        pthread_mutex_unlock(&ws->lock);
                        w->run(w);
                        pthread_mutex_lock(&ws->lock);
                        continue;
                }
                if (ws->stopping)
                        break;

                ws->idle++;
                if (ws->helpers) {
                        struct timespec until;
                        int r;

                        clock_gettime(CLOCK_MONOTONIC, &until);
                        until.tv_sec += EXEC_HELPER_LINGER_MS / 1000;
                        until.tv_nsec += (EXEC_HELPER_LINGER_MS % 1000) * 1000000L;
                        if (until.tv_nsec >= 1000000000L) {
                                until.tv_sec++;
                                until.tv_nsec -= 1000000000L;
                        }
                        r = pthread_cond_timedwait(&ws->work_cond, &ws->lock, &until);
                        ws->idle--;
                        if (r == ETIMEDOUT && !ws->head)
                                break;
                } else {
                        pthread_cond_wait(&ws->work_cond, &ws->lock);
                        ws->idle--;
                }
        }
        atomic_store_explicit(&ws->live, atomic_load_explicit(&ws->live, memory_order_relaxed) - 1,
                              memory_order_relaxed);
        /* Shrinking wakes one idle worker at a time, each passing it on: waking hundreds at once
         * would leave the CPUs to a crowd of exiting threads and stall everything else. */
        if (!ws->helpers && atomic_load_explicit(&ws->live, memory_order_relaxed) > ws->target && ws->idle > 0)
                pthread_cond_signal(&ws->work_cond);
        self->next = ws->dead;
        ws->dead = self;
        if (atomic_load_explicit(&ws->live, memory_order_relaxed) == 0)
                pthread_cond_broadcast(&ws->exit_cond);
        pthread_mutex_unlock(&ws->lock);
        return NULL;
}

/* Joins workers that left. wait = false only takes those whose threads have fully ended (control
 * calls must not wait for hundreds of retiring threads to be scheduled); the others stay for the
 * next call. Any thread but a worker of ws; never under ws->lock. */
static void worker_set_reap(WorkerSet *ws, bool wait) {
        Worker *dead, *keep = NULL;

        pthread_mutex_lock(&ws->lock);
        dead = TAKE_PTR(ws->dead);
        pthread_mutex_unlock(&ws->lock);
        while (dead) {
                Worker *n = dead->next;

                if (wait ? pthread_join(dead->thread, NULL) == 0 : pthread_tryjoin_np(dead->thread, NULL) == 0)
                        free(dead);
                else {
                        dead->next = keep;
                        keep = dead;
                }
                dead = n;
        }
        if (keep) {
                pthread_mutex_lock(&ws->lock);
                while (keep) {
                        Worker *n = keep->next;
                        keep->next = ws->dead;
                        ws->dead = keep;
                        keep = n;
                }
                pthread_mutex_unlock(&ws->lock);
        }
}

/* Creates n workers whose places the caller already reserved in ws->live. Returns how many were
 * created; the places of the others are given back. Never under ws->lock. */
static unsigned worker_set_spawn(WorkerSet *ws, unsigned n) {
        unsigned created = 0;

        for (; created < n; created++) {
                Worker *w = calloc(1, sizeof *w);
                int r;

                if (!w)
                        break;
                w->set = ws;
                pthread_mutex_lock(&ws->lock);
                w->id = ws->next_id++;
                pthread_mutex_unlock(&ws->lock);
                r = pthread_create(&w->thread, NULL, worker_main, w);
                if (r != 0) {
                        free(w);
                        log_debug("Cannot create a %s thread: %s", ws->name, strerror(r));
                        break;
                }
        }
        if (created < n) {
                pthread_mutex_lock(&ws->lock);
                atomic_store_explicit(&ws->live, atomic_load_explicit(&ws->live, memory_order_relaxed) - (n - created),
                                      memory_order_relaxed);
                if (atomic_load_explicit(&ws->live, memory_order_relaxed) == 0)
                        pthread_cond_broadcast(&ws->exit_cond);
                pthread_mutex_unlock(&ws->lock);
        }
        return created;
}

/* Sets the pool's target, reserving the places of missing workers (returned: the caller creates
 * them with worker_set_spawn()); wakes an idle worker so that surplus ones leave. Control thread only. */
static unsigned pool_set_target(WorkerSet *ws, unsigned target) {
        unsigned live, grow = 0;

        pthread_mutex_lock(&ws->lock);
        ws->target = target;
        live = atomic_load_explicit(&ws->live, memory_order_relaxed);
        if (target > live) {
                grow = target - live;
                atomic_store_explicit(&ws->live, target, memory_order_relaxed);
        } else if (target < live && ws->idle > 0)
                pthread_cond_signal(&ws->work_cond); /* the first of a chain, see worker_main() */
        pthread_mutex_unlock(&ws->lock);
        return grow;
}

/* Runs queued work in the calling thread while the set has no worker at all (thread creation
 * failed): late, but never lost. */
static void worker_set_run_orphans(WorkerSet *ws) {
        for (;;) {
                ExecWork *w = NULL;

                pthread_mutex_lock(&ws->lock);
                if (atomic_load_explicit(&ws->live, memory_order_relaxed) == 0)
                        w = worker_set_pop_locked(ws);
                pthread_mutex_unlock(&ws->lock);
                if (!w)
                        return;
                w->on_submitter = true;
                w->run(w);
        }
}

/* ---- executor ---- */

int executor_new(Executor **ret, ThreadMode mode, unsigned pool_size) {
        Executor *e;
        int r;

        if (mode < 0 || mode >= _THREAD_MODE_MAX)
                return -EINVAL;
        if (pool_size < 1 || pool_size > EXECUTOR_MAX_POOL_SIZE)
                return -ERANGE;
        e = calloc(1, sizeof *e);
        if (!e)
                return -ENOMEM;
        pthread_mutex_init(&e->ctl_lock, NULL);
        worker_set_init(&e->pool, "w", false, EXECUTOR_MAX_POOL_SIZE);
        worker_set_init(&e->helpers, "h", true, EXECUTOR_MAX_HELPERS);
        e->pool_size = pool_size;
        atomic_store(&e->mode, THREAD_MODE_INLINE);

        r = executor_set_mode(e, mode, pool_size);
        if (r < 0) {
                executor_free(e);
                return r;
        }
        e->switches = 0; /* the initial setting is not a switch */
        *ret = e;
        return 0;
}

static void worker_set_stop(WorkerSet *ws) {
        pthread_mutex_lock(&ws->lock);
        ws->stopping = true;
        ws->target = 0;
        pthread_cond_broadcast(&ws->work_cond);
        while (atomic_load_explicit(&ws->live, memory_order_relaxed) > 0)
                pthread_cond_wait(&ws->exit_cond, &ws->lock);
        pthread_mutex_unlock(&ws->lock);
        worker_set_reap(ws, true);
}

Executor *executor_free(Executor *e) {
        if (!e)
                return NULL;
        /* Queues are stopped (nothing submits any more); workers finish what was handed to them. */
        worker_set_stop(&e->pool);
        worker_set_stop(&e->helpers);
        pthread_mutex_lock(&e->ctl_lock);
        while (e->queues) {
                ExecQueue *q = e->queues;
                e->queues = q->next;
                q->executor = NULL;
                q->next = NULL;
        }
        pthread_mutex_unlock(&e->ctl_lock);
        worker_set_done(&e->pool);
        worker_set_done(&e->helpers);
        pthread_mutex_destroy(&e->ctl_lock);
        free(e);
        return NULL;
}

int executor_set_mode(Executor *e, ThreadMode mode, unsigned pool_size) {
        unsigned grow;
        bool changed;

        if (mode < 0 || mode >= _THREAD_MODE_MAX)
                return -EINVAL;
        if (mode != THREAD_MODE_INLINE && (pool_size < 1 || pool_size > EXECUTOR_MAX_POOL_SIZE))
                return -ERANGE;

        pthread_mutex_lock(&e->ctl_lock);
        if (mode == THREAD_MODE_INLINE)
                pool_size = e->pool_size;
        changed = atomic_load(&e->mode) != (int) mode || pool_size != e->pool_size;
        e->pool_size = pool_size;
        /* The new target first: a request handed over right after the mode flips finds the pool's
         * new places reserved (live > 0), so it waits for a worker instead of starting one. Then the
         * mode, at once: creating hundreds of threads takes a while (about 0.3 ms each here), and
         * the switch must not wait for it; requests queue until the workers come up. */
        grow = pool_set_target(&e->pool, mode == THREAD_MODE_INLINE ? 0 : pool_size);
        atomic_store_explicit(&e->mode, mode, memory_order_release);
        if (changed)
                e->switches++;
        pthread_mutex_unlock(&e->ctl_lock);

        /* Outside ctl_lock, so that reading the state (the control plane, statistics) does not
         * wait for thread creation. The places are reserved: a concurrent switch counts them. */
        if (grow > 0) {
                unsigned made = worker_set_spawn(&e->pool, grow);
                if (made < grow) {
                        log_warning("Pool: created %u of %u workers", made, grow);
                        worker_set_run_orphans(&e->pool);
                }
        }

        worker_set_reap(&e->pool, false);
        worker_set_reap(&e->helpers, false);
        if (changed)
                log_debug("Threads: %s, pool of %u", thread_mode_to_string(mode), pool_size);
        return 0;
}

static uint64_t counter_get(_Atomic uint64_t *c) {
        return atomic_load_explicit(c, memory_order_relaxed);
}

void executor_get_state(Executor *e, ExecutorState *ret) {
        pthread_mutex_lock(&e->ctl_lock);
        *ret = (ExecutorState) {
                .mode = (ThreadMode) atomic_load(&e->mode),
                .pool_size = e->pool_size,
                .live_workers = atomic_load(&e->pool.live),
                .switches = e->switches,
                .auto_inline = e->gone_auto_inline,
                .auto_pool = e->gone_auto_pool,
                .inline_runs = e->gone_inline,
                .pool_runs = e->gone_pool,
                .helper_runs = e->gone_helper,
                .pool_queued = atomic_load(&e->pool.queued),
                .live_helpers = atomic_load(&e->helpers.live),
        };
        for (ExecQueue *q = e->queues; q; q = q->next) {
                ret->auto_inline += counter_get(&q->n_auto_inline);
                ret->auto_pool += counter_get(&q->n_auto_pool);
                ret->inline_runs += counter_get(&q->n_inline);
                ret->pool_runs += counter_get(&q->n_pool);
                ret->helper_runs += counter_get(&q->n_helper);
        }
        pthread_mutex_unlock(&e->ctl_lock);
}

void executor_attach_queue(Executor *e, ExecQueue *q) {
        *q = (ExecQueue) { .executor = e };
        auto_policy_init_queue(q);
        pthread_mutex_lock(&e->ctl_lock);
        q->next = e->queues;
        e->queues = q;
        pthread_mutex_unlock(&e->ctl_lock);
}

void executor_detach_queue(ExecQueue *q) {
        Executor *e = q->executor;

        if (!e)
                return;
        pthread_mutex_lock(&e->ctl_lock);
        for (ExecQueue **p = &e->queues; *p; p = &(*p)->next)
                if (*p == q) {
                        *p = q->next;
                        break;
                }
        e->gone_auto_inline += counter_get(&q->n_auto_inline);
        e->gone_auto_pool += counter_get(&q->n_auto_pool);
        e->gone_inline += counter_get(&q->n_inline);
        e->gone_pool += counter_get(&q->n_pool);
        e->gone_helper += counter_get(&q->n_helper);
        pthread_mutex_unlock(&e->ctl_lock);
        q->executor = NULL;
        q->next = NULL;
}

/* Single-writer counter bump (the queue thread owns these). */
static inline void qcount(_Atomic uint64_t *c) {
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

ExecRoute executor_route(ExecQueue *q, ExecClass c, unsigned backlog) {
        Executor *e = q->executor;
        ExecRoute r;

        if (c == EXEC_CLASS_LOCK_WAIT) {
                qcount(&q->n_helper);
                return EXEC_ROUTE_HELPER;
        }
        switch ((ThreadMode) atomic_load_explicit(&e->mode, memory_order_relaxed)) {
        case THREAD_MODE_POOL:
                r = EXEC_ROUTE_POOL;
                break;
        case THREAD_MODE_AUTO:
                r = auto_route(e, q, c, backlog);
                qcount(r == EXEC_ROUTE_INLINE ? &q->n_auto_inline : &q->n_auto_pool);
                break;
        default:
                r = EXEC_ROUTE_INLINE;
                break;
        }
        qcount(r == EXEC_ROUTE_INLINE ? &q->n_inline : &q->n_pool);
        return r;
}

void executor_submit(Executor *e, ExecWork *w, ExecRoute route) {
        WorkerSet *ws = route == EXEC_ROUTE_HELPER ? &e->helpers : &e->pool;
        unsigned live, queued, spawn = 0;
        bool wake;

        w->next = NULL;
        w->on_submitter = false;
        pthread_mutex_lock(&ws->lock);
        if (ws->helpers && atomic_load_explicit(&ws->live, memory_order_relaxed) >= ws->cap &&
            ws->idle <= atomic_load_explicit(&ws->queued, memory_order_relaxed)) {
                /* Every helper is taken (each waits for a lock as long as the guest likes) and none
                 * is idle for this one: queued, it would hold its ring element and be out of reach
                 * of INTERRUPT behind waits that may never end. It runs here instead, on_submitter:
                 * one attempt, ENOLCK when the lock is taken (issue 31; docs/security.md, "Bounds"). */
                pthread_mutex_unlock(&ws->lock);
                w->on_submitter = true;
                w->run(w);
                return;
        }
        if (ws->tail)
                ws->tail->next = w;
        else
                ws->head = w;
        ws->tail = w;
        queued = atomic_load_explicit(&ws->queued, memory_order_relaxed) + 1;
        atomic_store_explicit(&ws->queued, queued, memory_order_relaxed);
        atomic_store_explicit(&ws->submitted, atomic_load_explicit(&ws->submitted, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        live = atomic_load_explicit(&ws->live, memory_order_relaxed);
        if (ws->helpers) {
                /* Every waiting request needs a thread of its own: an idle helper each, or a new one. */
                if (ws->idle < queued && live < ws->cap)
                        spawn = 1;
        } else if (live == 0)
                /* Switched to inline just after this queue thread chose the pool: start a worker to
                 * drain it (the target is 0, so it leaves once the list is empty). */
                spawn = 1;
        atomic_store_explicit(&ws->live, live + spawn, memory_order_relaxed);
        wake = ws->idle > 0;
        pthread_mutex_unlock(&ws->lock);

        if (wake)
                pthread_cond_signal(&ws->work_cond);
        if (spawn == 0)
                return;

        worker_set_reap(ws, false); /* exited helpers: helper churn has no control call */
        if (worker_set_spawn(ws, 1) == 1)
                return;

        /* No thread could be created. Rather than lose requests, run them here: for the pool, the
         * whole list if no worker is left; for helpers, one (this one or one ahead of it), marked
         * on_submitter: the lock wait is then tried once and answered (ENOLCK when the lock is
         * taken) instead of holding up this queue for as long as the guest likes. */
        if (!ws->helpers) {
                worker_set_run_orphans(ws);
                return;
        }
        pthread_mutex_lock(&ws->lock);
        w = worker_set_pop_locked(ws);
        pthread_mutex_unlock(&ws->lock);
        if (w) {
                w->on_submitter = true; /* it must not wait for the guest here (device.c) */
                w->run(w);
        }
}
