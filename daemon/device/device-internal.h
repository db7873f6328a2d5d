/* device-internal.h: the device's and its queues' structs, inside daemon/device/ only; the rest of
 * the daemon sees an opaque Device (device.h) and reads it through device_get_info(). Locking as
 * in device.h's header comment. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "dirty-log.h"
#include "guest-memory.h"
#include "inflight.h"
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
        /* The dirty log completions mark (a migration is copying guest memory), NULL when off;
         * under lock, with the used ring's guest address it marks (used_log_gpa, valid with
         * log_used). Set by device_update_logging() on the main thread. */
        DirtyLog *log;
        uint64_t used_log_gpa;
        bool log_used;

        /* Owned by the main thread. */
        int kick_fd, err_fd;
        int wake_fd; /* eventfd: wakes the queue thread for enable/stop */
        int epoll_fd; /* what the queue thread sleeps on: kick_fd and wake_fd; while it runs */
        pthread_t thread;
        bool thread_running;
        bool addr_set;
        /* SET_VRING_ADDR's VHOST_VRING_F_LOG and log_guest_addr, as last sent. */
        bool addr_log;
        uint64_t addr_log_gpa;

        atomic_bool enabled;
        atomic_bool stopping;
        _Atomic unsigned inflight; /* popped, not yet pushed; changed under lock */
        /* Requests of this queue routed to a helper (lock waits) and not yet completed: added by the
         * queue thread, taken away by whichever thread completes one; a counter, not a lock. */
        _Atomic unsigned lock_waits;
        pthread_cond_t idle_cond;  /* inflight reached 0; with lock */
        bool broken_logged;

        /* The ring's in-flight table (inflight.h), made at the queue's first start; vq.inflight
         * points to it while the queue runs. */
        Inflight table;
        /* Main thread: a table a previous serving process left (device_set_vring_inflight()), taken
         * by the next start, which resumes the ring from it; -1 when none. */
        int resume_fd;
        /* Heads that process had popped and not answered: popped first by the queue thread. */
        InflightResume resume;
        unsigned rerun_next; /* queue thread */

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
        /* queue_resume_locked() adds each ring's requests run again and replies published again
         * (under that queue's lock; read relaxed for statistics). */
        _Atomic uint64_t replayed;
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

        /* SET_LOG_BASE's dirty log; main thread only (the queues hold their own references). */
        DirtyLog *log;

        /* SET_DEVICE_STATE_FD / CHECK_DEVICE_STATE (device-state.c). */
        DeviceStateHandler state_handler;
        bool has_state_handler;
        struct {
                /* Guards done and result between the transfer thread, which sets them once, and the
                 * main thread, which reads them for CHECK_DEVICE_STATE and waits on cond (with a
                 * deadline) while the transfer has not finished. A lock and a condition rather than
                 * an atomic: the main thread must be able to sleep until the end. */
                pthread_mutex_t lock;
                pthread_cond_t cond;
                bool done;
                int result;
                /* Main thread only: */
                pthread_t thread;
                bool running; /* a thread was started and not joined */
                bool any;     /* a transfer was started since the connection began */
                int cancel_fd; /* eventfd: ends a transfer waiting on a frontend that neither reads nor writes */
                /* The transfer thread's, until done: */
                int fd;
                uint32_t direction;
        } transfer;

        /* Set once by device_attach() before any queue starts; NULL = inline, no statistics. */
        Executor *executor;
        Stats *stats;
        DeviceStepHook step_hook; /* test builds only (device.h); set before any queue starts */
        /* device_set_before_reply(): main thread, set before the frontend connects */
        void (*before_reply)(void *data);
        void *before_reply_data;
        bool track_progress;      /* device_track_progress(); set before any queue starts */

        /* Busy-poll window in microseconds before a request queue thread sleeps (0 = never);
         * read by the queue threads at every idle moment, so it switches at run time. */
        _Atomic unsigned poll_us;     /* or DEVICE_POLL_AUTO: the adaptive window (poll-policy.c) */
        _Atomic unsigned poll_fixed_us; /* the last fixed window set, for SetPollMode("fixed") */
};

/* device-state.c: the transfer's lock, condition and cancel eventfd (device_new()), ending and
 * joining a transfer in progress (reset, free), and freeing them (free). */
int device_state_init(Device *d);
void device_state_cancel(Device *d);
void device_state_done(Device *d);
