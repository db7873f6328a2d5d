/* device.c: the virtio-fs device: its queues' configuration from vhost-user (features, memory
 * tables, rings, fds), creation and reset. The data path is queue.c. */
#include "device-internal.h"
#include "queue.h"

#include <assert.h>
#include <endian.h>
#include <linux/virtio_config.h>
#include <linux/virtio_fs.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "log.h"
#include "stats.h"

/* VHOST_F_LOG_ALL and PROTOCOL_F_LOG_SHMFD: QEMU blocks the migration of a vhost-user device whose
 * backend lacks either (it must see the pages the backend writes while guest memory is copied). */
uint64_t device_offered_features(void) {
        return (1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_RING_F_INDIRECT_DESC) |
               (1ULL << VIRTIO_RING_F_EVENT_IDX) | (1ULL << VHOST_USER_F_PROTOCOL_FEATURES) | (1ULL << VHOST_F_LOG_ALL);
}

uint64_t device_offered_protocol_features(void) {
        return (1ULL << VHOST_USER_PROTOCOL_F_MQ) | (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
               (1ULL << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS) | (1ULL << VHOST_USER_PROTOCOL_F_LOG_SHMFD);
}

/* Hands every queue the log its completions mark: the device's log while VHOST_F_LOG_ALL is acked,
 * else none; the used ring too where SET_VRING_ADDR asked for it. Each queue's under its lock, the
 * old reference dropped after. */
static void device_update_logging(Device *d) {
        bool on = has_feature(d->features, VHOST_F_LOG_ALL) && d->log;

        for (unsigned i = 0; i < d->n_queues; i++) {
                Queue *q = &d->queues[i];
                DirtyLog *old;

                pthread_mutex_lock(&q->lock);
                old = q->log;
                q->log = on ? dirty_log_ref(d->log) : NULL;
                q->log_used = q->addr_log;
                q->used_log_gpa = q->addr_log_gpa;
                pthread_mutex_unlock(&q->lock);
                dirty_log_unref(old);
        }
}

int device_set_log_base(Device *d, uint64_t size, uint64_t offset, int fd) {
        DirtyLog *l;
        int r = dirty_log_new(&l, fd, size, offset);

        safe_close(fd);
        if (r < 0)
                return log_warning_errno(-r, "SET_LOG_BASE: cannot map a %" PRIu64 "-byte log at %" PRIu64 ": %m", size, offset);
        dirty_log_unref(d->log);
        d->log = l;
        device_update_logging(d);
        return 0;
}

int device_set_config_tag(Device *d, const char *tag) {
        size_t n = tag ? strlen(tag) : 0;

        if (n == 0 || n > sizeof d->tag)
                return -EINVAL;
        memset(d->tag, 0, sizeof d->tag);
        memcpy(d->tag, tag, n);
        d->has_tag = true;
        return 0;
}

size_t device_get_config(const Device *d, uint8_t *buf, size_t size) {
        /* virtio spec 5.11.4: tag[36], le32 num_request_queues. */
        struct virtio_fs_config cfg = { .num_request_queues = htole32(d->n_queues - 1) };

        if (!d->has_tag || size < sizeof cfg)
                return 0;
        static_assert(sizeof cfg.tag == sizeof d->tag, "the tag fills the config space's field");
        memcpy(cfg.tag, d->tag, sizeof cfg.tag);
        memcpy(buf, &cfg, sizeof cfg);
        return sizeof cfg;
}

static Queue *device_queue(Device *d, unsigned idx) {
        if (idx >= d->n_queues) {
                log_warning("Frontend named queue %u, but the device has %u queues "
                            "(is num-request-queues larger than --num-request-queues?)",
                            idx, d->n_queues);
                return NULL;
        }
        return &d->queues[idx];
}


int device_new(Device **ret, const RequestHandler *handler, unsigned n_request_queues) {
        _cleanup_(device_freep) Device *d = NULL;
        int r;

        if (n_request_queues < 1 || n_request_queues > DEVICE_MAX_REQUEST_QUEUES)
                return -ERANGE;
        if (!handler || !handler->process || handler->header_size == 0 || handler->header_size > REQUEST_HEADER_MAX)
                return -EINVAL;
        d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        d->handler = *handler;
        d->n_queues = 1 + n_request_queues;
        d->poll_fixed_us = DEVICE_DEFAULT_FIXED_POLL_US;
        r = device_state_init(d);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < d->n_queues; i++) {
                queue_init(&d->queues[i], d, i);
                d->queues[i].wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (d->queues[i].wake_fd < 0)
                        return negative_errno();
        }
        *ret = TAKE_PTR(d);
        return 0;
}

Device *device_free(Device *d) {
        if (!d)
                return NULL;
        device_state_cancel(d);
        device_state_done(d);
        for (unsigned i = 0; i < d->n_queues; i++) {
                queue_reset(&d->queues[i]);
                d->queues[i].log = dirty_log_unref(d->queues[i].log);
                safe_close(d->queues[i].wake_fd);
                executor_detach_queue(&d->queues[i].exec);
                pthread_mutex_destroy(&d->queues[i].lock);
                pthread_cond_destroy(&d->queues[i].idle_cond);
        }
        guest_memory_unref(d->mem);
        dirty_log_unref(d->log);
        free(d);
        return NULL;
}

void device_attach(Device *d, Executor *e, Stats *s) {
        d->executor = e;
        d->stats = s;
        if (e)
                for (unsigned i = 0; i < d->n_queues; i++)
                        executor_attach_queue(e, &d->queues[i].exec);
}

void device_reset(Device *d) {
        device_state_cancel(d); /* a transfer of the frontend that went */
        for (unsigned i = 0; i < d->n_queues; i++) {
                queue_reset(&d->queues[i]);
                d->queues[i].addr_log = false;
        }
        d->mem = guest_memory_unref(d->mem);
        d->log = dirty_log_unref(d->log);
        d->features = 0;
        d->protocol_features = 0;
        d->owner_set = false;
        device_update_logging(d);
}

unsigned device_running_queues(Device *d) {
        unsigned n = 0;
        for (unsigned i = 0; i < d->n_queues; i++)
                n += d->queues[i].thread_running;
        return n;
}

void device_get_info(Device *d, DeviceInfo *ret) {
        *ret = (DeviceInfo) {
                .n_queues = d->n_queues,
                .running_queues = device_running_queues(d),
                .features = d->features,
                .protocol_features = d->protocol_features,
        };
}

int device_set_features(Device *d, uint64_t features) {
        if (features & ~device_offered_features())
                return log_warning_errno(EINVAL, "Frontend acked features we did not offer: 0x%" PRIx64,
                                         features & ~device_offered_features());
        if (!has_feature(features, VIRTIO_F_VERSION_1))
                return log_warning_errno(EINVAL, "Frontend did not ack VIRTIO_F_VERSION_1; virtio-fs is modern only");
        d->features = features;
        device_update_logging(d); /* VHOST_F_LOG_ALL turns logging on and off while queues run */
        return 0;
}

/* Publishes a new memory snapshot to the device and every queue (rings re-translated). A running
 * ring that does not fit the new table keeps the snapshot it is mapped in (so nothing it points to
 * is unmapped) and is marked broken: nothing reads or writes it again, completions included, until
 * the frontend stops and restarts it. */
static int device_publish_memory(Device *d, GuestMemory *m) {
        guest_memory_unref(d->mem);
        d->mem = m;
        for (unsigned i = 0; i < d->n_queues; i++) {
                Queue *q = &d->queues[i];
                GuestMemory *old = NULL;

                if (!q->thread_running)
                        continue;
                pthread_mutex_lock(&q->lock);
                if (q->vq.broken)
                        ; /* stays on what it holds */
                else if (vq_map(&q->vq, m) < 0)
                        queue_mark_broken_locked(q, "ring no longer inside guest memory after a memory table change");
                else {
                        old = q->mem;
                        q->mem = guest_memory_ref(m);
                }
                /* Ends a busy-poll window that reads the ring through the previous snapshot. */
                atomic_fetch_add_explicit(&q->mem_gen, 1, memory_order_relaxed);
                pthread_mutex_unlock(&q->lock);
                guest_memory_unref(old);
        }
        return 0;
}

int device_set_mem_table(Device *d, const VhostUserMemory *m, const int *fds, unsigned n_fds) {
        _cleanup_(guest_memory_unrefp) GuestMemory *mem = NULL;
        int r;

        if (m->nregions == 0 || m->nregions > VHOST_USER_MAX_RAM_SLOTS || m->nregions != n_fds)
                return log_warning_errno(EINVAL, "SET_MEM_TABLE with %u regions and %u fds", m->nregions, n_fds);
        r = guest_memory_new(&mem);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < m->nregions; i++) {
                const VhostUserMemoryRegion *reg = &m->regions[i];
                _cleanup_(guest_region_unrefp) GuestRegion *g = NULL;
                GuestMemory *next;

                r = guest_region_new(&g, fds[i], reg->guest_phys_addr, reg->memory_size, reg->userspace_addr,
                                     reg->mmap_offset);
                if (r < 0)
                        return log_warning_errno(r, "Cannot map memory region %u: %m", i);
                r = guest_memory_add(mem, g, &next);
                if (r < 0)
                        return log_warning_errno(r, "Memory region %u overlaps another: %m", i);
                guest_memory_unref(mem);
                mem = next;
        }
        return device_publish_memory(d, TAKE_PTR(mem));
}

int device_add_mem_region(Device *d, const VhostUserMemoryRegion *reg, int fd) {
        _cleanup_(guest_region_unrefp) GuestRegion *g = NULL;
        _cleanup_(guest_memory_unrefp) GuestMemory *empty = NULL;
        GuestMemory *next;
        int r;

        r = guest_region_new(&g, fd, reg->guest_phys_addr, reg->memory_size, reg->userspace_addr, reg->mmap_offset);
        if (r < 0)
                return log_warning_errno(r, "Cannot map added memory region: %m");
        if (!d->mem) {
                r = guest_memory_new(&empty);
                if (r < 0)
                        return r;
        }
        r = guest_memory_add(d->mem ?: empty, g, &next);
        if (r < 0)
                return log_warning_errno(r, "Cannot add memory region: %m");
        return device_publish_memory(d, next);
}

int device_remove_mem_region(Device *d, const VhostUserMemoryRegion *reg) {
        GuestMemory *next;
        int r;

        r = guest_memory_remove(d->mem, reg->guest_phys_addr, reg->memory_size, reg->userspace_addr, &next);
        if (r < 0)
                return log_warning_errno(r, "REM_MEM_REG for a region we do not have (gpa 0x%" PRIx64 ")",
                                         reg->guest_phys_addr);
        return device_publish_memory(d, next);
}

int device_set_vring_num(Device *d, unsigned idx, unsigned num) {
        Queue *q = device_queue(d, idx);

        if (!q)
                return -ERANGE;
        if (num == 0 || num > VQ_MAX_SIZE || (num & (num - 1)))
                return log_warning_errno(EINVAL, "Queue %u: size %u is not a power of two up to %u", idx, num,
                                         VQ_MAX_SIZE);
        if (q->thread_running)
                return log_warning_errno(EBUSY, "Queue %u: size change while running", idx);
        q->vq.num = num;
        return 0;
}

int device_set_vring_addr(Device *d, const struct vhost_vring_addr *addr) {
        Queue *q = device_queue(d, addr->index);

        if (!q)
                return -ERANGE;
        /* QEMU sends the same addresses again with the log flag when a migration starts (and
         * without when it ends): only that may change under a running queue. */
        if (q->thread_running && (addr->desc_user_addr != q->vq.desc_qva || addr->avail_user_addr != q->vq.avail_qva ||
                                  addr->used_user_addr != q->vq.used_qva))
                return log_warning_errno(EBUSY, "Queue %u: address change while running", addr->index);
        q->addr_log = addr->flags & (1u << VHOST_VRING_F_LOG);
        q->addr_log_gpa = addr->log_guest_addr;
        device_update_logging(d);
        if (q->thread_running)
                return 0;
        q->vq.desc_qva = addr->desc_user_addr;
        q->vq.avail_qva = addr->avail_user_addr;
        q->vq.used_qva = addr->used_user_addr;
        q->addr_set = true;
        return 0;
}

int device_set_vring_base(Device *d, unsigned idx, unsigned base) {
        Queue *q = device_queue(d, idx);

        if (!q)
                return -ERANGE;
        if (q->thread_running)
                return log_warning_errno(EBUSY, "Queue %u: base change while running", idx);
        if (base > UINT16_MAX)
                return log_warning_errno(EINVAL, "Queue %u: base %u out of range", idx, base);
        q->vq.last_avail = (uint16_t) base;
        return 0;
}

int device_get_vring_base(Device *d, unsigned idx, unsigned *ret) {
        Queue *q = device_queue(d, idx);

        if (!q)
                return -ERANGE;
        /* GET_VRING_BASE is the stop signal: finish in-flight requests, then report where we are, and
         * never touch the ring again until it is started anew. */
        queue_stop(q);
        pthread_mutex_lock(&q->lock);
        *ret = q->vq.last_avail;
        q->call_fd = safe_close(q->call_fd);
        pthread_mutex_unlock(&q->lock);
        q->kick_fd = safe_close(q->kick_fd);
        atomic_store(&q->enabled, false);
        return 0;
}

uint64_t device_quiesce(Device *d) {
        uint64_t stopped = 0;

        /* As GET_VRING_BASE stops a ring (queue_stop(): nothing more is popped, what was popped
         * finishes and is published), but every fd stays: the keeper's record names them and the
         * next process resumes each ring from its in-flight table, now without a request in it. */
        for (unsigned i = 0; i < d->n_queues && i < 64; i++)
                if (d->queues[i].thread_running) {
                        queue_stop(&d->queues[i]);
                        stopped |= 1ull << i;
                }
        return stopped;
}

void device_unquiesce(Device *d, uint64_t stopped) {
        for (unsigned i = 0; i < d->n_queues && i < 64; i++)
                if (stopped & (1ull << i))
                        (void) queue_start(&d->queues[i]);
}

int device_set_vring_kick(Device *d, unsigned idx, int fd) {
        _cleanup_close_ int owned = fd;
        Queue *q = device_queue(d, idx);

        if (!q)
                return -ERANGE;
        if (fd < 0)
                return log_warning_errno(EOPNOTSUPP, "Queue %u: polling without a kick fd is not supported", idx);
        /* A new kick fd while running (restart without GET_VRING_BASE): stop first, keep indices. */
        queue_stop(q);
        safe_close(q->kick_fd);
        q->kick_fd = TAKE_FD(owned);
        return queue_start(q);
}

/* The call fd is written with the queue lock held, by whichever thread completes a request: it must
 * be an eventfd (a pipe or socket fills up), and non-blocking (a blocking eventfd whose counter is
 * near its maximum blocks the writer). An eventfd is the only anonymous-inode fd that takes an
 * 8-byte write of 0 (timerfd, signalfd, epoll and the others refuse writes); that write adds
 * nothing, at most the guest sees one spurious interrupt. */
static int check_call_fd(int fd) {
        struct statfs sfs;
        uint64_t zero = 0;
        int flags;

        if (fstatfs(fd, &sfs) < 0)
                return -errno;
        if (sfs.f_type != ANON_INODE_FS_MAGIC)
                return -EBADF;
        flags = fcntl(fd, F_GETFL);
        if (flags < 0)
                return -errno;
        if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        if (write(fd, &zero, sizeof zero) != (ssize_t) sizeof zero && errno != EAGAIN)
                return -EBADF;
        return 0;
}

int device_set_vring_call(Device *d, unsigned idx, int fd) {
        _cleanup_close_ int owned = fd;
        Queue *q = device_queue(d, idx);
        int r;

        if (!q)
                return -ERANGE;
        if (fd >= 0) {
                r = check_call_fd(fd);
                if (r < 0)
                        return log_warning_errno(r, "Queue %u: call fd is not an eventfd: %m", idx);
        }
        /* Swapped under the queue lock: a worker notifying right now uses either the old fd (still
         * open) or the new one, never a closed or reused number. */
        pthread_mutex_lock(&q->lock);
        safe_close(q->call_fd);
        q->call_fd = TAKE_FD(owned);
        pthread_mutex_unlock(&q->lock);
        return 0;
}

int device_set_vring_err(Device *d, unsigned idx, int fd) {
        _cleanup_close_ int owned = fd;
        Queue *q = device_queue(d, idx);

        if (!q)
                return -ERANGE;
        safe_close(q->err_fd);
        q->err_fd = TAKE_FD(owned);
        return 0;
}

int device_set_vring_enable(Device *d, unsigned idx, bool enable) {
        Queue *q = device_queue(d, idx);

        if (!q)
                return -ERANGE;
        atomic_store(&q->enabled, enable);
        if (enable && q->thread_running)
                (void) eventfd_write(q->wake_fd, 1); /* process what queued up while disabled */
        return 0;
}

int device_vring_inflight_fd(Device *d, unsigned idx) {
        Queue *q = device_queue(d, idx);

        return q ? q->table.fd : -1;
}

int device_set_vring_inflight(Device *d, unsigned idx, int fd) {
        _cleanup_close_ int owned = fd;
        Queue *q = device_queue(d, idx);

        if (!q)
                return -ERANGE;
        if (q->thread_running)
                return log_warning_errno(EBUSY, "Queue %u: in-flight table while running", idx);
        safe_close(q->resume_fd);
        q->resume_fd = TAKE_FD(owned);
        return 0;
}

void device_set_before_reply(Device *d, void (*fn)(void *data), void *data) {
        d->before_reply = fn;
        d->before_reply_data = data;
}

void device_set_step_hook(Device *d, DeviceStepHook hook) {
        d->step_hook = hook;
}

void device_track_progress(Device *d, bool on) {
        d->track_progress = on;
}
