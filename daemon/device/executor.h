/* executor.h: where requests run: inline in their queue thread, on a shared worker pool, or
 * chosen per request (auto). Mode and pool size switch live; see executor.c for how. */
#pragma once

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>


#include "chain.h"

typedef enum ThreadMode {
        THREAD_MODE_INLINE, /* the queue thread runs each request itself, in guest order */
        THREAD_MODE_POOL,   /* queue threads hand every request to the pool */
        THREAD_MODE_AUTO,   /* inline, except waiting (off-CPU) work when it is slow or backs up */
        _THREAD_MODE_MAX,
        _THREAD_MODE_INVALID = -EINVAL,
} ThreadMode;

#define EXECUTOR_MAX_POOL_SIZE 1024
/* Helper threads for requests that wait on other requests (SETLKW), beyond the pool. */
#define EXECUTOR_MAX_HELPERS 256

const char *thread_mode_to_string(ThreadMode m);
ThreadMode thread_mode_from_string(const char *s);

typedef struct Executor Executor;

/* The current setting, as the control plane shows it. */
typedef struct ExecutorState {
        ThreadMode mode;
        unsigned pool_size;    /* configured workers (pool and auto) */
        unsigned live_workers; /* workers alive or starting (shrinking retires idle ones lazily) */
        uint64_t switches;     /* successful executor_set_mode() calls that changed something */
        uint64_t auto_inline;  /* requests auto mode kept inline */
        uint64_t auto_pool;    /* requests auto mode handed to the pool */
        /* Extensions (any mode): */
        uint64_t inline_runs;  /* requests run by their queue thread */
        uint64_t pool_runs;    /* requests handed to the pool */
        uint64_t helper_runs;  /* requests handed to a helper thread because they wait (SETLKW) */
        unsigned pool_queued;  /* requests waiting in the pool for a worker right now */
        unsigned live_helpers; /* helper threads alive */
} ExecutorState;

int executor_new(Executor **ret, ThreadMode mode, unsigned pool_size);
Executor *executor_free(Executor *e);

/* Switches while requests flow: no request lost, duplicated or answered twice. pool_size 1..1024
 * for pool and auto (ignored for inline, which keeps the last size). -EINVAL / -ERANGE on bad input. */
int executor_set_mode(Executor *e, ThreadMode mode, unsigned pool_size);
void executor_get_state(Executor *e, ExecutorState *ret);

/* Pool size used when a mode needs one and none was given: 2 per CPU, 4..64. */
unsigned executor_default_pool_size(void);

/* ---- the data path (device.c) ---- */

/* A request handed to another thread. Embedded in the caller's request: nothing is allocated per
 * request. run() is called exactly once, on the thread that took the work. */
typedef struct ExecWork ExecWork;
struct ExecWork {
        ExecWork *next; /* list link while queued; owned by the executor */
        void (*run)(ExecWork *w);
        /* Set before run() when no thread could be created and the submitter (a queue thread or
         * the control thread) runs it itself: run() must then not wait for the guest (SETLKW). */
        bool on_submitter;
};

/* What a request is, as far as choosing a thread goes (see executor.c for the rules). */
typedef enum ExecClass {
        EXEC_CLASS_META,      /* lookups, attributes, opens, namespace changes */
        EXEC_CLASS_DIR,       /* READDIR, READDIRPLUS */
        EXEC_CLASS_IO,        /* READ/WRITE below EXEC_LARGE_IO bytes */
        EXEC_CLASS_LARGE_IO,  /* READ/WRITE of EXEC_LARGE_IO bytes or more: may block */
        EXEC_CLASS_SYNC,      /* FSYNC, FSYNCDIR, SYNCFS, FALLOCATE, COPY_FILE_RANGE: may block */
        EXEC_CLASS_LOCK_WAIT, /* SETLKW: waits for another lock owner for as long as it takes */
        _EXEC_CLASS_MAX,
} ExecClass;

#define EXEC_LARGE_IO (128u * 1024u)

/* Which requests are of which class is the request handler's to say (device.h
 * RequestHandler.classify; for FUSE daemon/fuse-handler.c). */

typedef enum ExecRoute {
        EXEC_ROUTE_INLINE, /* the queue thread runs it now */
        EXEC_ROUTE_POOL,   /* executor_submit() to the pool */
        EXEC_ROUTE_HELPER, /* executor_submit() to a helper thread that is free to wait */
} ExecRoute;

/* Per-queue executor state: the auto mode's estimates and the decision counters. Owned by one
 * queue thread (estimates are also lowered by workers finishing that queue's requests: relaxed
 * atomics); never locked on the data path. */
typedef struct ExecQueue {
        Executor *executor;
        struct ExecQueue *next; /* Executor's list; under its control lock */
        _Atomic uint32_t est_ns[_EXEC_CLASS_MAX];    /* service time estimate per class */
        /* Sampled service time per class (executor_account_sample()): on the CPU and off it. */
        _Atomic uint32_t oncpu_ns[_EXEC_CLASS_MAX], offcpu_ns[_EXEC_CLASS_MAX];
        /* Queue thread only: requests of each class until its next CPU time sample. */
        uint16_t sample_in[_EXEC_CLASS_MAX];
        /* Single-writer counters (the queue thread), summed by executor_get_state(). */
        _Atomic uint64_t n_inline, n_pool, n_helper, n_auto_inline, n_auto_pool;
} ExecQueue;

/* Registers a queue's state (counters summed into the executor's state) / folds it back in. */
void executor_attach_queue(Executor *e, ExecQueue *q);
void executor_detach_queue(ExecQueue *q);

/* Decides where one request runs. backlog: requests of this queue waiting behind it (popped and not
 * yet started, plus available in the ring). Lock-free: reads the mode and this queue's state. */
ExecRoute executor_route(ExecQueue *q, ExecClass c, unsigned backlog);

/* The current service time estimate of a class on this queue (any thread). */
static inline uint32_t executor_estimate_ns(ExecQueue *q, ExecClass c) {
        return atomic_load_explicit(&q->est_ns[c], memory_order_relaxed);
}

/* Whether the request just routed (of class c) should have its thread CPU time measured (auto mode
 * samples one request of a class in 8-256: reading a thread's CPU clock is a system call). Queue
 * thread. */
bool executor_want_sample(ExecQueue *q, ExecClass c);
/* A sampled request: service_ns of wall time on the thread that ran it, cpu_ns of it on the CPU.
 * Any thread. */
void executor_account_sample(ExecQueue *q, ExecClass c, uint64_t service_ns, uint64_t cpu_ns);

/* Feeds a measured time back: inline = the service time of a request the queue thread ran itself;
 * otherwise the latency of a handed-off request (an upper bound of its service time, which can only
 * lower the estimate). */
void executor_account(ExecQueue *q, ExecClass c, uint64_t ns, bool ran_inline);

/* Hands w to the pool (EXEC_ROUTE_POOL) or to a helper (EXEC_ROUTE_HELPER). Never fails: if no
 * thread can be created, w (or work queued ahead of it) runs in the caller before this returns,
 * with on_submitter set. A helper request also runs in the caller, with on_submitter set, when all
 * EXECUTOR_MAX_HELPERS helpers are busy: lock waits are never queued behind the cap. */
void executor_submit(Executor *e, ExecWork *w, ExecRoute route);
