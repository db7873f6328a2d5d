/* device-internal.h: the device's and its queues' structs, inside daemon/device/ only; the rest of
 * the daemon sees an opaque Device (device.h) and reads it through device_get_info(). Locking as
 * in device.h's header comment. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "guest-memory.h"
#include "virtqueue.h"

typedef struct Queue {
        Device *dev;
        unsigned index;

        pthread_mutex_t lock; /* see device.h's header comment */
        VirtQueue vq;         /* ring state; under lock */
        GuestMemory *mem;     /* snapshot the ring is mapped in; under lock */
        int call_fd;          /* under lock: replaced while the queue runs */
        VqElem *free_elems;   /* recycled elements; under lock */
        unsigned n_elems;     /* elements allocated (bounded by the ring size) */
        unsigned unnotified;  /* published without an interrupt yet (queue_complete()); under lock */
        bool starved;         /* every element in flight, entries waiting: a completion wakes the
                               * queue thread (wake_fd); under lock */
        uint64_t faults_seen; /* guest_memory_faults() when last looked at; under lock */
        _Atomic unsigned mem_gen; /* bumped (under lock) when the memory table changes: ends a
                                   * busy-poll window reading the ring through an older snapshot */

        /* Owned by the main thread. */
        int kick_fd, err_fd;
        int wake_fd; /* eventfd: wakes the queue thread for enable/stop */
        int epoll_fd; /* what the queue thread sleeps on: kick_fd and wake_fd; while it runs */
        pthread_t thread;
        bool thread_running;
        bool addr_set;

        atomic_bool enabled;
        atomic_bool stopping;
        _Atomic unsigned inflight; /* popped, not yet pushed; changed under lock */
        pthread_cond_t idle_cond;  /* inflight reached 0; with lock */
        bool broken_logged;

        ExecQueue exec; /* see the header comment */
        /* Busy-poll windows that found requests (no kick, no sleep): written by the queue thread
         * only, read by anyone; kept across resets so the device total only grows. */
        _Atomic uint64_t poll_hits;
        _Atomic uint64_t polls;   /* windows started (same rules) */
        _Atomic uint64_t poll_ns; /* time spent in them (spinning: CPU time, without a system call) */
        _Atomic uint64_t poll_contended; /* auto's looks that found the thread preempted (same rules) */
} Queue;

struct Device {
        RequestHandler handler;
        unsigned n_queues; /* hiprio + request queues */
        Queue queues[DEVICE_MAX_QUEUES];

        uint64_t features;          /* acked by SET_FEATURES */
        uint64_t protocol_features; /* acked by SET_PROTOCOL_FEATURES */
        /* --tag: the virtio-fs config space's tag (NUL-padded, not terminated), served through
         * VHOST_USER_GET_CONFIG (vhost-backend.c); has_tag also offers PROTOCOL_F_CONFIG. */
        char tag[36];
        bool has_tag;
        GuestMemory *mem;           /* the current table; main thread only */
        bool owner_set;

        /* Set once by device_attach() before any queue starts; NULL = inline, no statistics. */
        Executor *executor;
        Stats *stats;

        /* Busy-poll window in microseconds before a request queue thread sleeps (0 = never);
         * read by the queue threads at every idle moment, so it switches at run time. */
        _Atomic unsigned poll_us;     /* or DEVICE_POLL_AUTO: the adaptive window (poll-policy.c) */
        _Atomic unsigned poll_fixed_us; /* the last fixed window set, for SetPollMode("fixed") */
};
