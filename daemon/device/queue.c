/* queue.c: the data path of one virtio-fs queue: its thread, popping, running and completing
 * requests, busy polling, start and stop. Configuration arrives through device.c. */
#include "queue.h"

#include <linux/virtio_config.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "log.h"
#include "request-progress.h"
#include "poll-policy.h"
#include "stats.h"

/* Requests popped per pass before the queue lock is retaken to publish and re-check. */
#define QUEUE_BATCH 32
/* Requests the queue thread completes in a row, with more of its batch waiting, before it sends the
 * guest an interrupt for them: each reply is published at once (a guest already looking takes it),
 * only the interrupt waits. The batch's last request always notifies. Measured with vufs-bench at
 * queue depth 16 (ops/s against 1 = an interrupt per reply): 4 gave 1.2-1.6x, 8 gave 1.2-1.6x and
 * the lowest CPU per request, 32 (the whole batch) 1.0-1.3x: the guest then idles until the batch
 * ends. Queue depth 1 is unaffected (nothing waits behind the request). */
#define QUEUE_NOTIFY_EVERY 8
/* ...unless the next request is expected to take this long: then the held-back interrupt goes out
 * first, so finished replies do not wait behind a slow one (an fsync, a read from the disk). */
#define QUEUE_NOTIFY_SLOW_NS 50000u
/* How long stopping a queue lets requests still running elsewhere finish before blocking waits are
 * cancelled (see queue_stop()). */
#define QUEUE_STOP_GRACE_MS 200

/* Requests one queue holds in flight at most, whatever its ring size (a ring may have 32768 slots,
 * and each element is about 16.5 KiB: 1024 iovecs): past it the queue thread leaves the guest's
 * requests in the ring until a completion frees an element. 17 queues x 256 x 16.5 KiB = 70 MiB
 * per device at most (docs/security.md, "Bounds"; before, 9 GiB). */
#define QUEUE_MAX_ELEMS 256u
/* Of those, requests waiting for a lock (SETLKW on a helper) at most: a lock wait past it is tried
 * once and answered (ENOLCK when the lock is taken), so the rest of the queue's elements stay free
 * for the requests that would release the locks. */
#define QUEUE_MAX_LOCK_WAITS (QUEUE_MAX_ELEMS / 2)

/* One popped request with what the data path needs to hand it to another thread. Allocated once
 * per ring slot (recycled through Queue.free_elems as its VqElem), never per request. */
typedef struct QueueRequest {
        VqElem elem;
        ExecWork work;   /* link and entry point while handed to the executor */
        Queue *q;
        ExecClass class; /* from the handler's classify(), for the executor's estimates */
        ExecRoute route;
        /* The request's header (RequestHandler.header_size bytes), copied out of guest memory
         * once: the route and the handler both go by this copy, so a guest rewriting the header
         * cannot make a lock wait run inline. */
        _Alignas(8) uint8_t hdr[REQUEST_HEADER_MAX];
        bool have_hdr; /* false: the chain is shorter than a header */
        ChainIter in;  /* the readable bytes after the header (all of them without one): read once */
        bool sample;       /* measure its CPU time for the executor (executor_want_sample()) */
        bool replay;       /* a process that died made (or was making) its host call: see result */
        bool started;      /* ...was making it: result says whether its name existed */
        int64_t result;
        uint64_t start_ns; /* CLOCK_MONOTONIC when dispatched: latency = completion - this */
} QueueRequest;

static QueueRequest *queue_request(VqElem *e) {
        return (QueueRequest *) ((char *) e - offsetof(QueueRequest, elem));
}

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* CPU time of the calling thread (a system call: only for sampled requests). */
static uint64_t thread_cpu_ns(void) {
        struct timespec ts;

        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
                return 0;
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* Involuntary context switches of the calling thread so far (a system call: auto polling looks
 * every POLL_CPU_SAMPLE_EVERY idle moments). 0 if unknown, which never looks like a preemption. */
static uint64_t thread_preemptions(void) {
        struct rusage ru;

        if (getrusage(RUSAGE_THREAD, &ru) < 0)
                return 0;
        return (uint64_t) ru.ru_nivcsw;
}

static VqElem *queue_get_elem(Queue *q) {
        VqElem *e = q->free_elems;
        QueueRequest *r;

        if (e) {
                q->free_elems = e->next_free;
                return e;
        }
        /* At most one element per ring slot is ever in flight, and at most QUEUE_MAX_ELEMS, so this
         * allocation happens only while the queue warms up, not per request. */
        if (q->n_elems >= MIN(q->vq.num, QUEUE_MAX_ELEMS))
                return NULL;
        r = malloc(sizeof *r);
        if (!r)
                return NULL;
        r->q = q;
        q->n_elems++;
        return &r->elem;
}

static void queue_free_elems(Queue *q) {
        while (q->free_elems) {
                VqElem *e = q->free_elems;
                q->free_elems = e->next_free;
                free(queue_request(e));
                q->n_elems--;
        }
}

/* Publishes what was pushed and interrupts the guest if it asked for it. */
static void queue_notify_locked(Queue *q) {
        q->unnotified = 0;
        if (vq_flush(&q->vq) && q->call_fd >= 0)
                (void) eventfd_write(q->call_fd, 1);
}

void queue_mark_broken_locked(Queue *q, const char *why) {
        q->vq.broken = true;
        if (!q->broken_logged) {
                q->broken_logged = true;
                log_guest("Queue %u: %s; the queue stops until the guest resets it", q->index, why);
        }
}

/* With q->lock, before a used element is written: a migration copying guest memory sees the used
 * ring (its index, the element, the event field after them) as written. */
static void queue_log_used_locked(Queue *q) {
        if (q->log && q->log_used)
                dirty_log_mark(q->log, q->used_log_gpa,
                               sizeof(struct vring_used) + (uint64_t) q->vq.num * sizeof(struct vring_used_elem) + 2);
}

/* Tells the test build's hook (vufsd-test-hooks, crash survival) that a request reached a step of
 * its life; no hook in vufsd itself. */
static inline void queue_step(Queue *q, DeviceStep step, VqElem *e) {
        if (__builtin_expect(q->dev->step_hook != NULL, 0))
                q->dev->step_hook(step, queue_request(e)->hdr);
}

/* Completes one request: the used-ring entry, the guest notification, the element recycled. On a
 * worker this is its last access to the queue: once inflight drops to zero under the lock,
 * queue_stop() may return and the queue be reset or freed. may_defer: the queue thread has more of
 * its batch to run and will notify for this one later (queue_process()). */
static void queue_complete(Queue *q, VqElem *e, uint32_t len, bool may_defer) {
        GuestMemory *mem;

        pthread_mutex_lock(&q->lock);
        /* A migration copying guest memory sees what this request wrote (the whole writable part:
         * more than needed at times, never less) and the used ring entry below. */
        if (q->log && (e->mem || q->mem)) /* an inline request runs under the batch's snapshot, the queue's */
                dirty_log_mark_iov(q->log, e->mem ? e->mem : q->mem, e->iov + e->n_in, e->n_out);
        queue_log_used_locked(q);
        /* A broken queue's ring is not touched again (its memory may be gone, see
         * device_publish_memory()): the reply is dropped, the guest resets the queue. */
        if (!q->vq.broken) {
                vq_push(&q->vq, e->head, len);
                queue_step(q, DEVICE_STEP_PUSHED, e);
                if (may_defer && ++q->unnotified < QUEUE_NOTIFY_EVERY) {
                        vq_publish(&q->vq);
                        queue_step(q, DEVICE_STEP_PUBLISHED, e);
                } else {
                        if (__builtin_expect(q->dev->step_hook != NULL, 0)) {
                                vq_publish(&q->vq);
                                queue_step(q, DEVICE_STEP_PUBLISHED, e);
                        }
                        queue_notify_locked(q);
                }
        }
        /* The queue thread found every element in flight and waits for this one (queue_process()). */
        if (q->starved) {
                q->starved = false;
                (void) eventfd_write(q->wake_fd, 1);
        }
        mem = e->mem;
        e->mem = NULL;
        e->next_free = q->free_elems;
        q->free_elems = e;
        /* Every change of inflight is made under the lock: a load and a store, no locked
         * read-modify-write (two of those per request were a fifth of its atomics). */
        {
                unsigned n = atomic_load_explicit(&q->inflight, memory_order_relaxed) - 1;
                atomic_store_explicit(&q->inflight, n, memory_order_release);
                if (n == 0)
                        pthread_cond_broadcast(&q->idle_cond);
        }
        pthread_mutex_unlock(&q->lock);

        guest_memory_unref(mem); /* the snapshot is refcounted on its own, not part of the queue */
}

/* Runs one request to completion, on the queue thread or on whichever thread it was handed to. */
static void device_cancel_waits(Device *d) {
        if (d->handler.cancel_waits)
                d->handler.cancel_waits(d->handler.data);
}

/* Returns when it ended (CLOCK_MONOTONIC), which the queue thread takes as the start of the next
 * request of its batch. */
/* request-progress.h's hook for the request this thread runs. */
typedef struct QueueProgress {
        RequestProgress p;
        Queue *q;
        VqElem *e;
} QueueProgress;

static void queue_host_done(RequestProgress *p, int64_t result) {
        QueueProgress *qp = (QueueProgress *) p;

        inflight_host_done(&qp->q->table, qp->e->head, result);
        queue_step(qp->q, DEVICE_STEP_HOST_DONE, qp->e);
}

static void queue_started(RequestProgress *p, bool existed) {
        QueueProgress *qp = (QueueProgress *) p;

        inflight_started(&qp->q->table, qp->e->head, existed);
}

static uint64_t queue_run_request(Queue *q, QueueRequest *r, bool may_defer, bool may_wait) {
        Device *d = q->dev;
        VqElem *e = &r->elem;
        ChainIter out;
        RequestInfo info = {};
        uint64_t lat_ns, end_ns, run_ns = 0, cpu_ns = 0;
        uint32_t len;
        QueueProgress progress = { .p.host_done = queue_host_done, .p.started = queue_started, .q = q, .e = e };

        chain_iter_init(&out, e->iov + e->n_in, e->n_out);
        if (r->sample) {
                run_ns = now_ns();
                cpu_ns = thread_cpu_ns();
        }
        queue_step(q, DEVICE_STEP_POPPED, e);
        request_progress = d->track_progress ? &progress.p : NULL;
        if (__builtin_expect(r->replay, 0) && r->have_hdr)
                len = d->handler.replay(d->handler.data, r->hdr, &r->in, &out, r->started, r->result, &info);
        else
                len = d->handler.process(d->handler.data, r->have_hdr ? r->hdr : NULL /* "no header" */, &r->in,
                                         &out, may_wait, &info);
        request_progress = NULL;
        /* Answered: from here a process that takes over publishes this reply, never runs the
         * request again (a WRITE would be doubled, a MKDIR answer EEXIST). */
        inflight_replied(&q->table, e->head, len);
        queue_step(q, DEVICE_STEP_REPLIED, e);

        /* The one clock read of this request (sampled ones read two more): statistics and the
         * executor's estimates share it, and inline the next request of the batch starts at it. A
         * clock read costs ~0.1 µs on this kind of VM (kvm-clock), 7 % of a cheap request. Both
         * before the completion, which may free the queue. */
        end_ns = now_ns();
        lat_ns = end_ns - r->start_ns;
        if (d->executor) {
                executor_account(&q->exec, r->class, lat_ns, r->route == EXEC_ROUTE_INLINE);
                if (r->sample)
                        executor_account_sample(&q->exec, r->class, end_ns - run_ns, thread_cpu_ns() - cpu_ns);
        }
        if (d->stats)
                stats_record(d->stats, q->index, info.opcode, info.error, info.bytes, lat_ns / 1000);
        if (r->route == EXEC_ROUTE_HELPER) /* before the completion, which may free the queue */
                atomic_fetch_sub_explicit(&q->lock_waits, 1, memory_order_relaxed);
        queue_complete(q, e, len, may_defer);
        return end_ns;
}

static void queue_run_work(ExecWork *w) {
        QueueRequest *r = (QueueRequest *) ((char *) w - offsetof(QueueRequest, work));

        /* Only a helper thread of its own may wait for a lock: not a pool worker, and not the queue
         * thread that ran it because no helper could be created. */
        (void) queue_run_request(r->q, r, false, r->route == EXEC_ROUTE_HELPER && !w->on_submitter);
}

/* The dispatch seam: runs the request here or hands it to the executor. backlog = requests of this
 * queue waiting behind it. *clock_ns: when the previous request of this batch ended inline (0 = not
 * known), the start of this one; updated. *deferred: whether the last request this thread completed
 * left its interrupt for later (queue_complete()'s may_defer); updated. Queue thread only. */
static void queue_dispatch(Queue *q, VqElem *e, unsigned backlog, GuestMemory *batch_mem, uint64_t *clock_ns,
                           bool *deferred) {
        Device *d = q->dev;
        QueueRequest *r = queue_request(e);
        ChainIter *in = &r->in;

        r->route = EXEC_ROUTE_INLINE;
        r->class = EXEC_CLASS_META;
        r->sample = false;
        chain_iter_init(in, e->iov, e->n_in);
        r->have_hdr = chain_read(in, r->hdr, d->handler.header_size) >= 0;
        if (!r->have_hdr) /* the handler gets all of it, to answer "no header" */
                chain_iter_init(in, e->iov, e->n_in);
        if (d->stats)
                stats_begin(d->stats);
        if (d->executor) {
                if (r->have_hdr && d->handler.classify)
                        r->class = d->handler.classify(d->handler.data, r->hdr, in);
                /* hiprio carries FORGET and INTERRUPT: always here, except a (misplaced) lock wait. */
                if (q->index != DEVICE_HIPRIO_QUEUE || r->class == EXEC_CLASS_LOCK_WAIT)
                        r->route = executor_route(&q->exec, r->class, backlog);
                /* Only this thread adds lock waits, so the check and the add need no lock. */
                if (r->route == EXEC_ROUTE_HELPER) {
                        if (atomic_load_explicit(&q->lock_waits, memory_order_relaxed) >= QUEUE_MAX_LOCK_WAITS)
                                r->route = EXEC_ROUTE_INLINE; /* may not wait: one attempt */
                        else
                                atomic_fetch_add_explicit(&q->lock_waits, 1, memory_order_relaxed);
                }
                /* Lock waits last as long as the guest makes them: no measure of anything. */
                r->sample = r->route != EXEC_ROUTE_HELPER && executor_want_sample(&q->exec, r->class);
        }
        if (r->route == EXEC_ROUTE_INLINE && d->executor &&
            executor_estimate_ns(&q->exec, r->class) >= QUEUE_NOTIFY_SLOW_NS) {
                pthread_mutex_lock(&q->lock);
                if (q->unnotified > 0)
                        queue_notify_locked(q);
                pthread_mutex_unlock(&q->lock);
        }
        /* One clock read per request: where the previous one of the batch ended inline, this one
         * starts (its latency then includes the previous one's completion, under a µs). */
        r->start_ns = *clock_ns ?: now_ns();
        if (r->route == EXEC_ROUTE_INLINE) {
                *clock_ns = queue_run_request(q, r, backlog > 0, false);
                *deferred = backlog > 0;
                return;
        }
        *clock_ns = 0;
        /* Running elsewhere, it may outlive the batch: its own reference to the memory its
         * iovecs point into (an inline one runs under the batch's, see queue_process()). */
        e->mem = guest_memory_ref(batch_mem);
        r->work.run = queue_run_work;
        executor_submit(d->executor, &r->work, r->route);
}

/* Pops and runs everything available, then re-arms notifications. */
static void queue_process(Queue *q) {
        VqElem *batch[QUEUE_BATCH];

        for (;;) {
                unsigned n = 0, pending = 0;
                bool more, starved = false;
                GuestMemory *batch_mem;

                if (!atomic_load(&q->enabled) || atomic_load(&q->stopping))
                        return;

                pthread_mutex_lock(&q->lock);
                /* Guest memory shrank under us (guest-memory.c survived the SIGBUS with zero
                 * pages): what the ring says now is not what the guest wrote. */
                if (guest_memory_faults() != q->faults_seen) {
                        q->faults_seen = guest_memory_faults();
                        queue_mark_broken_locked(q, "guest memory was truncated by the frontend");
                }
                vq_disable_notify(&q->vq);
                while (n < QUEUE_BATCH) {
                        VqElem *e = queue_get_elem(q);
                        int r;

                        if (!e) {
                                /* Every element is in flight (all num of them, or an allocation
                                 * failed): popping more is impossible, and looking again at once
                                 * would spin on this lock while the guest keeps entries posted. A
                                 * completion wakes the thread (queue_complete()). With nothing in
                                 * flight no completion will come: the queue cannot go on. */
                                if (atomic_load_explicit(&q->inflight, memory_order_relaxed) == 0)
                                        queue_mark_broken_locked(q, "no memory for a request element");
                                else if (vq_pending(&q->vq) > 0)
                                        starved = true;
                                q->starved = starved;
                                break;
                        }
                        /* Requests a previous serving process popped and did not answer
                         * (queue_resume()) before any new one. */
                        queue_request(e)->replay = false;
                        if (__builtin_expect(q->rerun_next < q->resume.n_rerun, 0)) {
                                uint16_t head = q->resume.rerun[q->rerun_next++];
                                const InflightDesc *t = &q->table.h->desc[head];

                                r = vq_pop_head(&q->vq, q->mem, head, e);
                                if ((t->state == INFLIGHT_HOST_DONE || t->state == INFLIGHT_STARTED) &&
                                    q->dev->handler.replay) {
                                        queue_request(e)->replay = true;
                                        queue_request(e)->started = t->state == INFLIGHT_STARTED;
                                        queue_request(e)->result = t->result;
                                }
                        } else
                                r = vq_pop(&q->vq, q->mem, e);
                        if (r == VQ_POP_EMPTY || r < 0) {
                                e->next_free = q->free_elems;
                                q->free_elems = e;
                                if (r < 0)
                                        queue_mark_broken_locked(q, "corrupt ring (bad index or head)");
                                break;
                        }
                        if (r == VQ_POP_BAD_CHAIN) {
                                /* The head is valid: hand it back empty so the guest's slot is not leaked. */
                                log_guest("Queue %u: malformed descriptor chain at head %u, failing it",
                                          q->index, e->head);
                                queue_log_used_locked(q);
                                vq_push(&q->vq, e->head, 0);
                                queue_notify_locked(q);
                                e->next_free = q->free_elems;
                                q->free_elems = e;
                                continue;
                        }
                        e->mem = NULL; /* the batch's reference covers it, see below */
                        atomic_store_explicit(&q->inflight,
                                              atomic_load_explicit(&q->inflight, memory_order_relaxed) + 1,
                                              memory_order_relaxed); /* under the lock, as every change */
                        batch[n++] = e;
                }
                if (n > 0 && q->dev->executor)
                        pending = vq_pending(&q->vq); /* for auto: how far the guest is ahead of us */
                /* One reference to the memory snapshot the batch was popped from keeps it mapped
                 * while its requests run here, whatever the frontend does to the table meanwhile;
                 * one per request was two locked instructions each. */
                batch_mem = n > 0 ? guest_memory_ref(q->mem) : NULL;
                pthread_mutex_unlock(&q->lock);

                uint64_t clock_ns = 0;
                bool deferred = false;
                for (unsigned i = 0; i < n; i++) {
                        /* The guest wrote the next request's header and owns its reply's lines on
                         * its CPU: start fetching both while this one runs. */
                        if (i + 1 < n)
                                vq_elem_prefetch(batch[i + 1]);
                        queue_dispatch(q, batch[i], n - 1 - i + pending, batch_mem, &clock_ns, &deferred);
                }
                /* Only this thread holds interrupts back (workers notify at once, and every notify
                 * clears what was held), so when its last completion did not, nothing is held and
                 * the lock is not needed: at depth 1 and at the end of most batches. */
                if (deferred) {
                        /* Interrupts held back while the batch ran (the last request of the batch
                         * may have been handed off, or ring requests counted in its backlog). */
                        pthread_mutex_lock(&q->lock);
                        if (q->unnotified > 0)
                                queue_notify_locked(q);
                        pthread_mutex_unlock(&q->lock);
                }
                batch_mem = guest_memory_unref(batch_mem);

                if (starved)
                        return; /* until a completion (or the guest's next kick) */
                if (n == QUEUE_BATCH)
                        continue;
                pthread_mutex_lock(&q->lock);
                more = !q->vq.broken && vq_enable_notify(&q->vq);
                pthread_mutex_unlock(&q->lock);
                if (!more)
                        return;
        }
}

void device_set_poll_us(Device *d, unsigned us) {
        if (us != DEVICE_POLL_AUTO) {
                us = MIN(us, DEVICE_MAX_POLL_US);
                if (us > 0) /* what SetPollMode("fixed") returns to */
                        atomic_store_explicit(&d->poll_fixed_us, us, memory_order_relaxed);
        }
        atomic_store_explicit(&d->poll_us, us, memory_order_relaxed);
}

unsigned device_get_poll_us(Device *d) {
        return atomic_load_explicit(&d->poll_us, memory_order_relaxed);
}

unsigned device_get_poll_fixed_us(Device *d) {
        return atomic_load_explicit(&d->poll_fixed_us, memory_order_relaxed);
}

void device_get_poll_stats(Device *d, DevicePollStats *ret) {
        *ret = (DevicePollStats) {};
        for (unsigned i = 0; i < d->n_queues; i++) {
                Queue *q = &d->queues[i];
                ret->polls += atomic_load_explicit(&q->polls, memory_order_relaxed);
                ret->hits += atomic_load_explicit(&q->poll_hits, memory_order_relaxed);
                ret->poll_ns += atomic_load_explicit(&q->poll_ns, memory_order_relaxed);
                ret->contended += atomic_load_explicit(&q->poll_contended, memory_order_relaxed);
        }
}

uint64_t device_replayed(Device *d) {
        return atomic_load_explicit(&d->replayed, memory_order_relaxed);
}

uint64_t device_poll_hits(Device *d) {
        DevicePollStats st;

        device_get_poll_stats(d, &st);
        return st.hits;
}

/* Single writer (the queue thread): a plain load and store, no locked add. */
static inline void counter_bump(_Atomic uint64_t *c, uint64_t v) {
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
}

/* Watches the ring for up to window_ns with guest kicks suppressed; true if requests arrived (or the
 * memory table changed). *spent_ns: how long it watched (to the request found, or the window).
 * Leaves kicks suppressed: the caller processes, or re-enables them (and re-checks) before
 * sleeping. */
static bool queue_busy_poll(Queue *q, uint64_t window_ns, uint64_t *spent_ns) {
        uint64_t start = now_ns(), deadline = start + window_ns, t = start;
        unsigned spins = 0, gen;
        const struct vring_avail *avail;
        uint16_t last_avail;
        GuestMemory *mem;
        bool found = false;

        /* The ring is read without the lock below: through a snapshot this thread holds, so a
         * memory-table change cannot unmap it meanwhile. A change ends the window (mem_gen): the
         * caller then looks at the ring under the lock, mapped in the new table. */
        pthread_mutex_lock(&q->lock);
        if (q->vq.broken || !q->vq.avail || q->starved) {
                pthread_mutex_unlock(&q->lock);
                *spent_ns = 0;
                return false;
        }
        vq_suppress_notify(&q->vq);
        mem = guest_memory_ref(q->mem);
        avail = q->vq.avail;
        last_avail = q->vq.last_avail; /* only this thread changes it */
        gen = atomic_load_explicit(&q->mem_gen, memory_order_relaxed);
        pthread_mutex_unlock(&q->lock);
        for (;;) {
                if ((uint16_t) (((volatile const struct vring_avail *) avail)->idx - last_avail) > 0 ||
                    atomic_load_explicit(&q->mem_gen, memory_order_relaxed) != gen) {
                        found = true;
                        t = now_ns();
                        break;
                }
                if (atomic_load_explicit(&q->stopping, memory_order_relaxed) ||
                    !atomic_load_explicit(&q->enabled, memory_order_relaxed))
                        break;
                cpu_relax();
                /* A clock read (vDSO, ~20 ns) every 16 pauses: a window of a few µs ends on time. */
                if (++spins % 16 == 0 && (t = now_ns()) >= deadline)
                        break;
        }
        guest_memory_unref(mem);
        *spent_ns = t - start;
        return found;
}

/* The queue thread sleeps in epoll_wait() on its kick fd, edge-triggered, and its wake fd. Edge-
 * triggered because the kick counter then never needs reading: each guest kick queues one wake-up
 * and the ring itself says what there is to do. poll() + read() cost one system call more per
 * wake-up, and at queue depth 1 every request is a wake-up. (The counter cannot overflow: that
 * takes 2^64 kicks.) */
enum { QUEUE_EVENT_KICK, QUEUE_EVENT_WAKE };

static int queue_epoll_new(Queue *q) {
        struct epoll_event kick = { .events = EPOLLIN | EPOLLET, .data.u32 = QUEUE_EVENT_KICK };
        struct epoll_event wake = { .events = EPOLLIN, .data.u32 = QUEUE_EVENT_WAKE };
        _cleanup_close_ int ep = epoll_create1(EPOLL_CLOEXEC);

        if (ep < 0)
                return -errno;
        /* Fails for an fd that cannot be polled (a regular file as kick fd): refused at once,
         * rather than a thread that would find it always readable. */
        if (epoll_ctl(ep, EPOLL_CTL_ADD, q->kick_fd, &kick) < 0 ||
            epoll_ctl(ep, EPOLL_CTL_ADD, q->wake_fd, &wake) < 0)
                return -errno;
        return TAKE_FD(ep);
}

/* The busy-poll window for this idle moment in ns (0 = sleep at once): --poll-us fixed, or what the
 * adaptive policy decides (auto). The hiprio queue never polls. */
static uint64_t queue_poll_window(Queue *q, PollPolicy *policy, bool *adaptive) {
        unsigned poll_us = atomic_load_explicit(&q->dev->poll_us, memory_order_relaxed);

        *adaptive = poll_us == DEVICE_POLL_AUTO;
        if (q->index == DEVICE_HIPRIO_QUEUE || poll_us == 0)
                return 0;
        if (*adaptive) {
                /* Now and then: was this thread preempted since the last look? Then another task
                 * wants its CPU, and spinning would take from it (poll-policy.c). */
                if (poll_policy_sample_due(policy) && poll_policy_cpu(policy, thread_preemptions()))
                        counter_bump(&q->poll_contended, 1);
                return poll_policy_window(policy);
        }
        return (uint64_t) poll_us * 1000;
}

static void *queue_thread(void *userdata) {
        Queue *q = userdata;
        PollPolicy policy; /* this thread's: it learns this queue's guest, from scratch per start */
        char name[16];

        snprintf(name, sizeof name, "vufsd-q%u", q->index);
        pthread_setname_np(pthread_self(), name);
        poll_policy_init(&policy);

        queue_process(q); /* requests may have been posted before the kick fd arrived */
        while (!atomic_load(&q->stopping)) {
                struct epoll_event ev[2];
                eventfd_t v;
                bool adaptive, kicked = false;
                uint64_t window_ns = queue_poll_window(q, &policy, &adaptive), idle_start = 0;
                int n;

                /* Polling: look at the ring a while before sleeping, so a request that comes soon
                 * costs neither a guest kick nor our wake-up. */
                if (window_ns > 0) {
                        uint64_t spent_ns;
                        bool more = queue_busy_poll(q, window_ns, &spent_ns);

                        counter_bump(&q->polls, 1);
                        counter_bump(&q->poll_ns, spent_ns);
                        if (more)
                                counter_bump(&q->poll_hits, 1);
                        else {
                                pthread_mutex_lock(&q->lock);
                                more = !q->vq.broken && !q->starved && vq_enable_notify(&q->vq);
                                pthread_mutex_unlock(&q->lock);
                        }
                        if (more) {
                                if (adaptive)
                                        poll_policy_update(&policy, (uint32_t) window_ns, spent_ns, true);
                                queue_process(q);
                                continue;
                        }
                        idle_start = now_ns() - spent_ns; /* when the idle moment began */
                }
                n = epoll_wait(q->epoll_fd, ev, (int) ELEMENTSOF(ev), -1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        log_error_errno(errno, "Queue %u: epoll_wait failed: %m", q->index);
                        break;
                }
                for (int k = 0; k < n; k++)
                        if (ev[k].data.u32 == QUEUE_EVENT_WAKE) /* level-triggered: drain it */
                                (void) eventfd_read(q->wake_fd, &v);
                        else
                                kicked = true;
                /* An empty window: a kick says when the request came (a wake-up is a completion
                 * or a stop, and says nothing about the guest). */
                if (adaptive && window_ns > 0)
                        poll_policy_update(&policy, (uint32_t) window_ns, kicked ? now_ns() - idle_start : window_ns,
                                           false);
                queue_process(q);
        }
        return NULL;
}

/* deadline = now + QUEUE_STOP_GRACE_MS on the monotonic clock, or on the realtime clock
 * (pthread_timedjoin_np() measures that one). */
static struct timespec stop_deadline(clockid_t clock) {
        struct timespec until;

        clock_gettime(clock, &until);
        until.tv_nsec += QUEUE_STOP_GRACE_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        return until;
}

/* Stops the queue thread and waits for the requests it popped. Main thread only. */
void queue_stop(Queue *q) {
        if (!q->thread_running)
                return;
        atomic_store(&q->stopping, true);
        (void) eventfd_write(q->wake_fd, 1);
        /* The queue thread finishes its batch before it exits. It never waits for a lock itself
         * (the handler's may_wait), but should it ever, joining first and
         * cancelling after would wait forever: blocking waits are cancelled every grace period
         * while the join waits, as below for requests running elsewhere. */
        for (;;) {
                struct timespec until = stop_deadline(CLOCK_REALTIME);
                int r = pthread_timedjoin_np(q->thread, NULL, &until);

                if (r == 0)
                        break;
                if (r != ETIMEDOUT) {
                        (void) pthread_join(q->thread, NULL);
                        break;
                }
                log_debug("Queue %u: stopping with its thread busy, cancelling blocking waits", q->index);
                device_cancel_waits(q->dev);
        }
        q->thread_running = false;
        q->epoll_fd = safe_close(q->epoll_fd);
        /* Inline processing completes everything before the thread exits; requests handed to pool
         * workers or helpers finish on their own and are waited for here. A lock wait (SETLKW) may
         * never finish on its own (its holder may be in the stopped guest): after a grace period
         * blocking waits are cancelled, which answers them with EINTR. */
        pthread_mutex_lock(&q->lock);
        while (atomic_load_explicit(&q->inflight, memory_order_acquire) > 0) {
                struct timespec until = stop_deadline(CLOCK_MONOTONIC);

                while (atomic_load_explicit(&q->inflight, memory_order_acquire) > 0)
                        if (pthread_cond_timedwait(&q->idle_cond, &q->lock, &until) == ETIMEDOUT)
                                break;
                if (atomic_load_explicit(&q->inflight, memory_order_acquire) == 0)
                        break;
                /* Again every grace period: a wait that began after the last round is cancelled
                 * in the next. */
                pthread_mutex_unlock(&q->lock);
                log_debug("Queue %u: stopping with a blocking wait in flight, cancelling it", q->index);
                device_cancel_waits(q->dev);
                pthread_mutex_lock(&q->lock);
        }
        pthread_mutex_unlock(&q->lock);
        atomic_store(&q->stopping, false);
}

/* The table this start records in: the one a previous process left (resume_fd), or this queue's
 * own, emptied (a stopped queue has nothing in flight), or a new one at the first start. */
static int queue_table_prepare(Queue *q) {
        int r;

        inflight_resume_done(&q->resume);
        q->rerun_next = 0;
        if (q->resume_fd >= 0) {
                Inflight t;

                r = inflight_adopt(&t, TAKE_FD(q->resume_fd), q->vq.num);
                if (r >= 0) {
                        inflight_done(&q->table);
                        q->table = t;
                        q->vq.inflight = &q->table;
                        return 1;
                }
                log_warning_errno(r, "Queue %u: the previous process's in-flight table is unusable, "
                                     "starting with an empty one: %m", q->index);
        }
        if (q->table.h && q->table.h->num == q->vq.num) {
                memset(q->table.h->desc, 0, (size_t) q->vq.num * sizeof(InflightDesc));
                q->table.n_pushed = 0;
        } else {
                inflight_done(&q->table);
                r = inflight_new(&q->table, q->vq.num);
                if (r < 0)
                        return r;
        }
        inflight_set_last_avail(&q->table, q->vq.last_avail);
        q->vq.inflight = &q->table;
        return 0;
}

/* A table from a previous process: where the ring goes on, replies written and not published
 * published now (their requests are not run again), requests popped and not answered queued for
 * the thread. Under the queue lock, the ring mapped. */
static int queue_resume_locked(Queue *q) {
        VirtQueue *vq = &q->vq;
        int r;

        r = inflight_resume(&q->table, vq->used_idx, &q->resume);
        if (r < 0)
                return r;
        vq->last_avail = q->resume.last_avail;
        for (unsigned i = 0; i < q->resume.n_repush; i++) {
                uint16_t head = q->resume.repush[i];
                vq_push(vq, head, q->table.h->desc[head].len);
        }
        /* Always: the dead process may have published replies and died before their interrupt
         * (after a remap the first look always sends one; a spurious one costs the guest a look). */
        queue_notify_locked(q);
        log_info("Queue %u resumed: next avail %u, %u requests run again, %u replies published again",
                 q->index, vq->last_avail, q->resume.n_rerun, q->resume.n_repush);
        atomic_fetch_add_explicit(&q->dev->replayed, (uint64_t) q->resume.n_rerun + q->resume.n_repush,
                                  memory_order_relaxed);
        return 0;
}

int queue_start(Queue *q) {
        Device *d = q->dev;
        bool adopted;
        int r;

        if (q->thread_running || q->kick_fd < 0)
                return 0;
        if (q->vq.num == 0 || !q->addr_set || !d->mem)
                return log_warning_errno(EINVAL, "Queue %u kicked before its size, addresses and memory were set",
                                         q->index);

        r = queue_table_prepare(q);
        if (r < 0)
                return log_warning_errno(r, "Queue %u: no in-flight table: %m", q->index);
        adopted = r > 0;
        pthread_mutex_lock(&q->lock);
        q->vq.event_idx = has_feature(d->features, VIRTIO_RING_F_EVENT_IDX);
        q->vq.indirect = has_feature(d->features, VIRTIO_RING_F_INDIRECT_DESC);
        q->vq.broken = false;
        q->broken_logged = false;
        q->faults_seen = guest_memory_faults();
        guest_memory_unref(q->mem);
        q->mem = guest_memory_ref(d->mem);
        r = vq_map(&q->vq, q->mem);
        if (r < 0) /* no pointers into an earlier mapping survive a failed start */
                q->vq.desc = NULL, q->vq.avail = NULL, q->vq.used = NULL;
        else if (adopted)
                r = queue_resume_locked(q);
        pthread_mutex_unlock(&q->lock);
        if (r < 0)
                return log_warning_errno(r, "Queue %u: ring addresses are outside guest memory", q->index);

        /* Without protocol features rings start enabled; with them SET_VRING_ENABLE decides. */
        if (!has_feature(d->features, VHOST_USER_F_PROTOCOL_FEATURES))
                atomic_store(&q->enabled, true);
        atomic_store(&q->stopping, false);
        r = queue_epoll_new(q);
        if (r < 0)
                return log_warning_errno(r, "Queue %u: cannot wait on its kick fd: %m", q->index);
        q->epoll_fd = r;
        r = -pthread_create(&q->thread, NULL, queue_thread, q);
        if (r < 0) {
                q->epoll_fd = safe_close(q->epoll_fd);
                return log_error_errno(r, "Failed to start thread for queue %u: %m", q->index);
        }
        q->thread_running = true;
        log_debug("Queue %u started: size %u, next avail %u, used %u", q->index, q->vq.num, q->vq.last_avail,
                  q->vq.used_idx);
        return 0;
}

void queue_init(Queue *q, Device *d, unsigned index) {
        *q = (Queue) {
                .dev = d,
                .index = index,
                .call_fd = -1,
                .kick_fd = -1,
                .err_fd = -1,
                .wake_fd = -1,
                .epoll_fd = -1,
                .resume_fd = -1,
                .table = { .fd = -1 },
        };
        q->vq.index = index;
        pthread_mutex_init(&q->lock, NULL);
        {
                /* queue_stop() waits on it with a deadline: measure that on the monotonic clock. */
                pthread_condattr_t attr;

                pthread_condattr_init(&attr);
                pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
                pthread_cond_init(&q->idle_cond, &attr);
                pthread_condattr_destroy(&attr);
        }
}

/* Back to the state of a fresh connection; keeps the wake fd. */
void queue_reset(Queue *q) {
        queue_stop(q);
        pthread_mutex_lock(&q->lock);
        q->call_fd = safe_close(q->call_fd);
        q->mem = guest_memory_unref(q->mem);
        queue_free_elems(q);
        q->vq = (VirtQueue) { .index = q->index };
        inflight_done(&q->table);
        inflight_resume_done(&q->resume);
        q->rerun_next = 0;
        q->unnotified = 0;
        q->starved = false;
        pthread_mutex_unlock(&q->lock);
        q->kick_fd = safe_close(q->kick_fd);
        q->err_fd = safe_close(q->err_fd);
        q->resume_fd = safe_close(q->resume_fd);
        q->addr_set = false;
        atomic_store(&q->enabled, false);
}
