/* executor-internal.h: the executor's state, shared by executor.c and auto-policy.c. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "executor.h"

typedef struct WorkerSet WorkerSet;

typedef struct Worker {
        struct Worker *next; /* WorkerSet.dead once exited */
        pthread_t thread;
        WorkerSet *set;
        unsigned id;
} Worker;

struct WorkerSet {
        const char *name;
        bool helpers; /* on demand, linger, one request per thread; else a sized pool */

        /* Guards the work list and the worker bookkeeping below. Taken by queue threads handing work
         * over, by workers taking it, and by control calls; held only for list and counter updates,
         * never while a request runs or a thread is created. */
        pthread_mutex_t lock;
        pthread_cond_t work_cond; /* idle workers: work arrived, or the target shrank */
        pthread_cond_t exit_cond; /* executor_free(): the last worker exited */
        ExecWork *head, *tail;
        _Atomic unsigned queued; /* length of the list; written under lock, read lock-free by auto */
        _Atomic unsigned live; /* workers alive or being created; written under lock */
        unsigned idle; /* workers waiting on work_cond */
        unsigned target; /* pool: workers wanted; helpers: 0 */
        unsigned cap;
        bool stopping;
        Worker *dead; /* exited, waiting to be joined */
        unsigned next_id;
        _Atomic uint64_t submitted;
};

struct Executor {
        _Atomic int mode; /* ThreadMode; written under ctl_lock, read by every queue thread */

        /* Serialises control-plane decisions (set_mode, get_state, queue attach/detach, free); not
         * held while set_mode creates threads. Never taken on the data path. */
        pthread_mutex_t ctl_lock;
        unsigned pool_size;
        uint64_t switches;
        ExecQueue *queues;
        /* Counters of detached queues. */
        uint64_t gone_inline, gone_pool, gone_helper, gone_auto_inline, gone_auto_pool;

        WorkerSet pool, helpers;
};

/* auto-policy.c: the starting estimates of a queue just attached. */
void auto_policy_init_queue(ExecQueue *q);
/* auto-policy.c: where auto mode runs one request. */
ExecRoute auto_route(Executor *e, ExecQueue *q, ExecClass c, unsigned backlog);
