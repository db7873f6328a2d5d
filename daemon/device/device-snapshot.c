/* device-snapshot.c: the device's configuration as one record and its fds (device-snapshot.h). */
#include "device-snapshot.h"

#include <string.h>

#include "device-internal.h"
#include "log.h"

static int8_t add_fd(int fd, int *fds, int *n) {
        if (fd < 0)
                return -1;
        fds[*n] = fd;
        return (int8_t) (*n)++;
}

int device_snapshot(Device *d, DeviceSnapshot *ret, int fds[static DEVICE_SNAPSHOT_MAX_FDS]) {
        int n = 0;

        memset(ret, 0, sizeof *ret);
        ret->magic = DEVICE_SNAPSHOT_MAGIC;
        ret->version = DEVICE_SNAPSHOT_VERSION;
        ret->n_queues = d->n_queues;
        ret->features = d->features;
        ret->protocol_features = d->protocol_features;
        ret->owner_set = d->owner_set;
        if (d->mem) {
                ret->n_regions = d->mem->n_regions;
                for (unsigned i = 0; i < d->mem->n_regions; i++) {
                        const GuestRegion *g = d->mem->regions[i];
                        ret->regions[i] = (VhostUserMemoryRegion) { .guest_phys_addr = g->gpa, .memory_size = g->size,
                                                                    .userspace_addr = g->uaddr,
                                                                    .mmap_offset = g->mmap_offset };
                        fds[n++] = g->fd;
                }
        }
        for (unsigned i = 0; i < d->n_queues; i++) {
                Queue *q = &d->queues[i];
                DeviceSnapshotQueue *s = &ret->queues[i];

                s->num = q->vq.num;
                s->last_avail = q->vq.last_avail;
                s->addr_set = q->addr_set;
                s->started = q->thread_running;
                s->enabled = atomic_load(&q->enabled);
                s->desc = q->vq.desc_qva;
                s->avail = q->vq.avail_qva;
                s->used = q->vq.used_qva;
                s->kick = add_fd(q->kick_fd, fds, &n);
                s->call = add_fd(q->call_fd, fds, &n); /* replaced only by this (the main) thread */
                s->err = add_fd(q->err_fd, fds, &n);
                s->table = q->thread_running ? add_fd(q->table.fd, fds, &n) : -1;
        }
        return n;
}

/* Takes fd number i of fds (-1 when the snapshot names none or one out of range). */
static int take_fd(int *fds, unsigned n, int8_t i) {
        int fd;

        if (i < 0 || (unsigned) i >= n)
                return -1;
        fd = fds[i];
        fds[i] = -1;
        return fd;
}

int device_restore(Device *d, const DeviceSnapshot *s, int *fds, unsigned n) {
        int r = 0;

        if (s->magic != DEVICE_SNAPSHOT_MAGIC || s->version != DEVICE_SNAPSHOT_VERSION ||
            s->n_queues != d->n_queues || s->n_regions > GUEST_MEMORY_MAX_REGIONS || s->n_regions > n) {
                r = log_error_errno(EBADMSG, "The device state kept for this process does not fit this device");
                goto out;
        }
        if (s->features && (r = device_set_features(d, s->features)) < 0)
                goto out;
        d->protocol_features = s->protocol_features & device_offered_protocol_features();
        d->owner_set = s->owner_set;
        /* One region at a time: the same checks as ADD_MEM_REG (a table of more than a
         * SET_MEM_TABLE's eight is one the frontend built that way). */
        for (unsigned i = 0; i < s->n_regions; i++) {
                int fd = take_fd(fds, n, (int8_t) i);
                r = device_add_mem_region(d, &s->regions[i], fd);
                safe_close(fd);
                if (r < 0)
                        goto out;
        }
        for (unsigned i = 0; i < d->n_queues; i++) {
                const DeviceSnapshotQueue *q = &s->queues[i];

                if (q->num && (r = device_set_vring_num(d, i, q->num)) < 0)
                        goto out;
                if (q->addr_set &&
                    (r = device_set_vring_addr(d, &(struct vhost_vring_addr) { .index = i, .desc_user_addr = q->desc,
                                                                             .avail_user_addr = q->avail,
                                                                             .used_user_addr = q->used })) < 0)
                        goto out;
                if ((r = device_set_vring_base(d, i, q->last_avail)) < 0)
                        goto out;
                if (q->call >= 0 && (r = device_set_vring_call(d, i, take_fd(fds, n, q->call))) < 0)
                        goto out;
                if (q->err >= 0 && (r = device_set_vring_err(d, i, take_fd(fds, n, q->err))) < 0)
                        goto out;
                if (q->table >= 0 && (r = device_set_vring_inflight(d, i, take_fd(fds, n, q->table))) < 0)
                        goto out;
                if ((r = device_set_vring_enable(d, i, q->enabled)) < 0)
                        goto out;
                if (q->started && (r = device_set_vring_kick(d, i, take_fd(fds, n, q->kick))) < 0)
                        goto out;
                if (!q->started && q->kick >= 0) /* kept, not started: as SET_VRING_KICK would */
                        safe_close(take_fd(fds, n, q->kick));
        }
out:
        for (unsigned i = 0; i < n; i++)
                safe_close(fds[i]);
        return r;
}
