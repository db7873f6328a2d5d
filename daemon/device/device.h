/* device.h: the virtio-fs device: its queues, their threads, and the memory they see.
 *
 * The main thread (vhost-user messages) configures queues; one thread per started queue pops
 * chains and, as the executor decides (executor.h: inline, pool or auto), runs each request itself
 * or hands it to a pool worker or a helper thread. Whoever finishes a request pushes it to the used
 * ring and notifies the guest. Locking, per queue only (no device-wide lock on the data path):
 *   Queue.lock  serialises everything that touches one ring: pop, push/notify, the call fd,
 *               reconfiguration (memory swap, stop), and the in-flight count of the queue
 *               (Queue.idle_cond is signalled under it when that count drops to zero, for
 *               queue_stop()). Held for short ring operations, never across file I/O.
 * Queue.exec (the executor's per-queue estimates and counters) is written without a lock: by the
 * queue thread, and estimates also by workers finishing this queue's requests (relaxed atomics).
 * A request's completion is the last time a worker touches its Queue: after it, queue_stop() may
 * return and the queue be reset or freed. queue_stop() (GET_VRING_BASE, reset) waits for every
 * request of the queue still running elsewhere, cancelling blocking lock waits after a grace period.
 * The memory table is an immutable refcounted snapshot (guest-memory.h): each popped request
 * holds the snapshot its buffers live in. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "chain.h"
#include "executor.h"
#include "poll-policy.h"
#include "util.h"
#include "vhost-user.h"

#define DEVICE_MAX_REQUEST_QUEUES 16
#define DEVICE_MAX_QUEUES (1 + DEVICE_MAX_REQUEST_QUEUES)
#define DEVICE_HIPRIO_QUEUE 0

typedef struct Device Device;
typedef struct Stats Stats; /* stats.h includes this header */

/* What one request was, for statistics: filled in by the request handler. */
typedef struct RequestInfo {
        uint32_t opcode; /* as sent; may be an unknown value */
        int error;       /* 0 or negative errno of the reply */
        uint64_t bytes;  /* payload bytes read or written, else 0 */
        bool replied;    /* false when the request has no reply */
} RequestInfo;

/* The largest request header a handler may ask the device to copy. */
#define REQUEST_HEADER_MAX 64

/* What the device runs its requests through, handed in by whoever composes the daemon: the device
 * moves chains and copies each request's first header_size bytes out of guest memory once; what
 * they mean (the wire format, which requests wait) is the handler's. It knows nothing of the
 * server that answers. */
typedef struct RequestHandler {
        /* Bytes of header the device copies once per request (1..REQUEST_HEADER_MAX); routing and
         * process() both go by that copy, so a guest rewriting its header cannot make a lock wait
         * run on a queue thread. */
        size_t header_size;
        /* What kind of work the request is (executor.h), for choosing a thread: from the header
         * copy h and rest = the bytes after it (a copy of the iterator: read it freely, the guest
         * may change them, they only pick a class). Trusts nothing. NULL: every request is META.
         * Called at most once per request, on its queue thread, and every request classified is
         * then processed with the same header copy (the FUSE handler relies on it to keep an
         * INTERRUPT for a lock wait that has not started yet). */
        ExecClass (*classify)(void *data, const void *h, const ChainIter *rest);
        /* Handles one request: h = the header copy the request was routed by and in = the
         * readable bytes after it; or h = NULL for a chain shorter than a header, in = all of it.
         * out = the writable bytes. may_wait: this thread may block for as long as a lock is held
         * (a helper thread). Returns the bytes written into out (the used length; 0 = no reply)
         * and never fails. Called from several threads at once (queue threads, pool workers,
         * helpers). */
        uint32_t (*process)(void *data, const void *h, ChainIter *in, ChainIter *out, bool may_wait, RequestInfo *info);
        /* Answers a request whose host call a process that died had made, with its result
         * (request-progress.h), without making it again, or (started) was about to make, result
         * saying whether its name existed then; same arguments and return as process().
         * NULL: such requests are run again. */
        uint32_t (*replay)(void *data, const void *h, ChainIter *in, ChainIter *out, bool started,
                           int64_t result, RequestInfo *info);
        /* Ends every blocking wait in progress with an error reply: a queue that must stop cannot
         * wait for the guest. NULL when no request ever blocks. */
        void (*cancel_waits)(void *data);
        void *data;
} RequestHandler;

#define DEVICE_MAX_POLL_US 1000000u
/* device_set_poll_us(d, DEVICE_POLL_AUTO): each request queue thread spins only as long as its
 * guest's requests come quickly after the replies (poll-policy.h), at most DEVICE_AUTO_POLL_MAX_US. */
#define DEVICE_POLL_AUTO UINT32_MAX
#define DEVICE_AUTO_POLL_MAX_US (POLL_AUTO_MAX_NS / 1000)
/* The fixed window SetPollMode("fixed") selects before any was set. */
#define DEVICE_DEFAULT_FIXED_POLL_US 50u

/* Sets the busy-poll window: 0 disables it, DEVICE_POLL_AUTO adapts it, any other value is a fixed
 * window (at most DEVICE_MAX_POLL_US). Any thread; takes effect at the queue threads' next idle
 * moment. */
void device_set_poll_us(Device *d, unsigned us);
unsigned device_get_poll_us(Device *d);
/* The last fixed window set (DEVICE_DEFAULT_FIXED_POLL_US before any). */
unsigned device_get_poll_fixed_us(Device *d);

typedef struct DevicePollStats {
        uint64_t polls;   /* busy-poll windows started, all request queues, since start */
        uint64_t hits;    /* ...that found requests (no kick, no sleep) */
        uint64_t poll_ns; /* time spent spinning in them: CPU time, as the thread spins */
        uint64_t contended; /* auto's looks that found a queue thread preempted: no polling after */
} DevicePollStats;
void device_get_poll_stats(Device *d, DevicePollStats *ret);
/* DevicePollStats.hits alone. */
uint64_t device_poll_hits(Device *d);
/* Requests this process ran again and replies it published again when it resumed its rings from
 * the in-flight tables of the process it took over from (docs/survival.md). */
uint64_t device_replayed(Device *d);

/* handler is copied; what its data points to must outlive the device. */
int device_new(Device **ret, const RequestHandler *handler, unsigned n_request_queues);
Device *device_free(Device *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(Device *, device_free);

/* Where requests run and where they are counted; both outlive the device. Before any queue starts. */
void device_attach(Device *d, Executor *e, Stats *s);

uint64_t device_offered_features(void);
uint64_t device_offered_protocol_features(void);

int device_set_features(Device *d, uint64_t features);

/* --tag: the tag (1..36 bytes) the device's config space reports; from then on
 * VHOST_USER_PROTOCOL_F_CONFIG is offered and GET_CONFIG answers. -EINVAL for a bad length. */
int device_set_config_tag(Device *d, const char *tag);
/* The virtio-fs config space (tag, number of request queues) into buf; its length, 0 without a tag
 * or when it does not fit. */
size_t device_get_config(const Device *d, uint8_t *buf, size_t size);

/* Memory table changes publish a new snapshot to every queue. */
int device_set_mem_table(Device *d, const VhostUserMemory *m, const int *fds, unsigned n_fds);
int device_add_mem_region(Device *d, const VhostUserMemoryRegion *reg, int fd);
int device_remove_mem_region(Device *d, const VhostUserMemoryRegion *reg);

int device_set_vring_num(Device *d, unsigned idx, unsigned num);
int device_set_vring_addr(Device *d, const struct vhost_vring_addr *addr);
int device_set_vring_base(Device *d, unsigned idx, unsigned base);
/* Stops the queue (after its in-flight requests complete) and returns the next avail index. */
int device_get_vring_base(Device *d, unsigned idx, unsigned *ret);
/* These take ownership of fd (-1 = no fd). */
int device_set_vring_kick(Device *d, unsigned idx, int fd);
/* Live upgrade: stops popping every running ring and waits for the requests in flight, keeping
 * every fd (the queues a bit each, for device_unquiesce() when the upgrade does not go ahead). */
uint64_t device_quiesce(Device *d);
void device_unquiesce(Device *d, uint64_t stopped);
int device_set_vring_call(Device *d, unsigned idx, int fd);
int device_set_vring_err(Device *d, unsigned idx, int fd);
int device_set_vring_enable(Device *d, unsigned idx, bool enable);
/* The points of a request's life a test build may stop the process at (tests/frontend/
 * test-hooks.c, in vufsd-test-hooks only): after the pop, after the host call, with the reply
 * written into the chain,
 * with its used entry written, with the used index published (before the call eventfd). */
typedef enum DeviceStep {
        DEVICE_STEP_POPPED,
        DEVICE_STEP_HOST_DONE, /* a request that tells (request-progress.h): its host call returned */
        DEVICE_STEP_REPLIED,
        DEVICE_STEP_PUSHED,
        DEVICE_STEP_PUBLISHED,
        _DEVICE_STEP_MAX,
} DeviceStep;
typedef void (*DeviceStepHook)(DeviceStep step, const void *header);
/* NULL in vufsd: manager.c installs one only where a test build defines it. */
void device_set_step_hook(Device *d, DeviceStepHook hook);
/* Called right before any vhost-user reply or ack goes to the frontend, the request applied
 * (VhostUserBackendOps.before_reply): the composition stores the device's state for a process that
 * takes over there (survive_checkpoint()), so that no change the frontend was answered for dies with
 * this process. Before the frontend connects; main thread. */
void device_set_before_reply(Device *d, void (*fn)(void *data), void *data);
/* Requests tell their host call's progress (request-progress.h) into the in-flight tables: with
 * --crash-restarts only (it costs a name operation one more system call). */
void device_track_progress(Device *d, bool on);

/* The in-flight table of queue idx (its memfd, still the device's; -1 before its first start), for
 * a keeper to hold across this process's death (docs/survival.md). */
int device_vring_inflight_fd(Device *d, unsigned idx);
/* A table a previous serving process left for queue idx (fd taken): its next start resumes from
 * it instead of from the base alone (queue.c). */
int device_set_vring_inflight(Device *d, unsigned idx, int fd);

/* ---- live migration (device-state.c, docs/migration.md) ---- */

/* What saves and restores the state behind the device (the FUSE session), handed in by the
 * composition. Both run on the device's transfer thread, never on the main thread, and only while
 * every queue is stopped. */
typedef struct DeviceStateHandler {
        /* The whole state into *ret (malloc'd), or a negative errno with the reason in err. */
        int (*save)(void *data, uint8_t **ret, size_t *ret_len, char *err, size_t errlen);
        /* Restores buf (untrusted: the frontend's bytes); on failure the state behind the device
         * is as after a reset, and err says why. */
        int (*load)(void *data, const uint8_t *buf, size_t len, char *err, size_t errlen);
        uint64_t max_len; /* a load stream longer than this is refused unread */
        void *data;
} DeviceStateHandler;

/* With a handler, VHOST_USER_PROTOCOL_F_DEVICE_STATE is offered. Before the frontend connects. */
void device_set_state_handler(Device *d, const DeviceStateHandler *h);
/* SET_DEVICE_STATE_FD: starts saving into (VHOST_USER_TRANSFER_SAVE) or loading from fd (taken
 * over) on a thread of its own. -EBUSY while a queue runs or another transfer is in progress. */
int device_set_state_fd(Device *d, uint32_t direction, int fd);
/* CHECK_DEVICE_STATE: the outcome of the last transfer, waiting for it at most
 * DEVICE_STATE_CHECK_TIMEOUT_MS (a load still being applied; then -ETIMEDOUT and the transfer is
 * cancelled). -ENOENT when none was started. Main thread. */
#define DEVICE_STATE_CHECK_TIMEOUT_MS 20000
int device_check_state(Device *d);
/* SET_LOG_BASE: the dirty log (fd not taken). */
int device_set_log_base(Device *d, uint64_t size, uint64_t offset, int fd);

/* The device as the backend of vhost-user messages (vhost_user_handle(&device_vhost_ops, d, ...)). */
extern const VhostUserBackendOps device_vhost_ops;

/* Stops every queue and forgets memory and ring state (frontend gone or RESET_OWNER). */
void device_reset(Device *d);

/* Number of started queues (for status lines). */
unsigned device_running_queues(Device *d);

/* What the composition may read of the device (the struct is private to daemon/device/): the
 * queue count it was made with, and what the frontend negotiated. The negotiated values are
 * written by vhost-user messages on the main thread: read them there. */
typedef struct DeviceInfo {
        unsigned n_queues;          /* hiprio + request queues */
        unsigned running_queues;    /* device_running_queues() */
        uint64_t features;          /* acked by SET_FEATURES, 0 before */
        uint64_t protocol_features; /* acked by SET_PROTOCOL_FEATURES, 0 before */
} DeviceInfo;
void device_get_info(Device *d, DeviceInfo *ret);
