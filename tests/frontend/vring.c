/* vring.c: split virtqueue driver side: descriptor free list, avail publishing, kicks and used collection. */
#include "vring.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "util.h"

/* Ring fields are shared with the backend: every access goes through these. */
#define LOAD16(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE16(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static size_t ring_layout(uint16_t num, size_t *avail_off, size_t *used_off) {
        /* Linux's modern split layout: desc, avail right after, used 64-byte aligned (desc+0x800, +0x940 for 128). */
        *avail_off = (size_t) num * 16;
        *used_off = ALIGN_TO(*avail_off + 6 + 2 * (size_t) num, (size_t) 64);
        return *used_off + 6 + 8 * (size_t) num;
}

int fe_vring_new(FeVring **ret, FeMem *mem, unsigned index, uint16_t num, int region) {
        size_t avail_off, used_off;
        FeVring *vr;

        if (num == 0 || (num & (num - 1)) || num > 32768)
                return -EINVAL;
        vr = calloc(1, sizeof(*vr));
        if (!vr)
                return -ENOMEM;
        vr->mem = mem;
        vr->index = index;
        vr->num = num;
        vr->kick_fd = vr->call_fd = vr->err_fd = -1;
        vr->area_len = ring_layout(num, &avail_off, &used_off);
        vr->area = fe_mem_alloc(mem, vr->area_len, region, &vr->area_gpa);
        vr->slots = calloc(num, sizeof(FeVringSlot));
        if (!vr->area || !vr->slots)
                goto nomem;
        memset(vr->area, 0, vr->area_len);
        vr->desc = vr->area;
        vr->avail = (struct vring_avail *) ((uint8_t *) vr->area + avail_off);
        vr->used = (struct vring_used *) ((uint8_t *) vr->area + used_off);

        for (uint16_t i = 0; i < num; i++)
                vr->desc[i].next = (uint16_t) (i + 1);
        vr->free_head = 0;
        vr->num_free = num;

        vr->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        vr->call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        vr->err_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (vr->kick_fd < 0 || vr->call_fd < 0 || vr->err_fd < 0) {
                int r = negative_errno();
                fe_vring_free(vr);
                return r;
        }
        *ret = vr;
        return 0;
nomem:
        fe_vring_free(vr);
        return -ENOMEM;
}

FeVring *fe_vring_free(FeVring *vr) {
        if (!vr)
                return NULL;
        if (vr->slots)
                for (unsigned i = 0; i < vr->num; i++)
                        if (vr->slots[i].ind_gpa)
                                fe_mem_release(vr->mem, vr->slots[i].ind_gpa, vr->slots[i].ind_len);
        if (vr->area)
                fe_mem_release(vr->mem, vr->area_gpa, vr->area_len);
        free(vr->slots);
        safe_close(vr->kick_fd);
        safe_close(vr->call_fd);
        safe_close(vr->err_fd);
        free(vr);
        return NULL;
}

void fe_vring_addr(FeVring *vr, struct vhost_vring_addr *ret) {
        uint64_t used_gpa = 0;

        (void) fe_mem_host_to_gpa(vr->mem, vr->used, &used_gpa);
        *ret = (struct vhost_vring_addr) {
                .index = vr->index,
                .flags = 0,
                .desc_user_addr = fe_mem_host_to_uaddr(vr->desc),
                .used_user_addr = fe_mem_host_to_uaddr(vr->used),
                .avail_user_addr = fe_mem_host_to_uaddr(vr->avail),
                .log_guest_addr = used_gpa,
        };
}

int fe_vring_new_call_fd(FeVring *vr) {
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        safe_close(vr->call_fd);
        vr->call_fd = fd;
        return fd;
}

static uint16_t take_desc(FeVring *vr) {
        uint16_t i = vr->free_head;
        vr->free_head = vr->desc[i].next;
        vr->num_free--;
        return i;
}

int fe_vring_add(FeVring *vr, const FeSeg *segs, unsigned n, bool indirect, void *user, uint16_t *ret_head) {
        uint16_t head;
        FeVringSlot *slot;

        if (n == 0)
                return -EINVAL;
        if (indirect) {
                uint64_t ind_gpa;
                size_t ind_len = (size_t) n * sizeof(struct vring_desc);
                struct vring_desc *t;

                if (vr->num_free < 1)
                        return -ENOSPC;
                t = fe_mem_alloc(vr->mem, ind_len, -1, &ind_gpa);
                if (!t)
                        return -ENOMEM;
                for (unsigned i = 0; i < n; i++)
                        t[i] = (struct vring_desc) {
                                .addr = segs[i].gpa,
                                .len = segs[i].len,
                                .flags = (uint16_t) ((i + 1 < n ? VRING_DESC_F_NEXT : 0) |
                                                     (segs[i].write ? VRING_DESC_F_WRITE : 0)),
                                .next = (uint16_t) (i + 1 < n ? i + 1 : 0),
                        };
                head = take_desc(vr);
                vr->desc[head].addr = ind_gpa;
                vr->desc[head].len = (uint32_t) ind_len;
                vr->desc[head].flags = VRING_DESC_F_INDIRECT;
                vr->desc[head].next = 0;
                slot = &vr->slots[head];
                *slot = (FeVringSlot) { .busy = true, .ndesc = 1, .ind_gpa = ind_gpa, .ind_len = ind_len };
        } else {
                uint16_t prev = 0;

                if (vr->num_free < n)
                        return -ENOSPC;
                head = vr->free_head;
                for (unsigned i = 0; i < n; i++) {
                        uint16_t d = take_desc(vr);
                        if (i > 0)
                                vr->desc[prev].next = d;
                        vr->desc[d].addr = segs[i].gpa;
                        vr->desc[d].len = segs[i].len;
                        vr->desc[d].flags = (uint16_t) ((i + 1 < n ? VRING_DESC_F_NEXT : 0) |
                                                        (segs[i].write ? VRING_DESC_F_WRITE : 0));
                        prev = d;
                }
                /* Keep the free list intact: the tail's next still points into the free list. */
                slot = &vr->slots[head];
                *slot = (FeVringSlot) { .busy = true, .ndesc = n };
        }
        slot->user = user;
        fe_vring_put_avail(vr, head);
        if (ret_head)
                *ret_head = head;
        return 0;
}

void fe_vring_put_avail(FeVring *vr, uint16_t head) {
        if (head < vr->num && vr->slots[head].raw)
                vr->slots[head].busy = true;
        STORE16(&vr->avail->ring[vr->avail_shadow % vr->num], head);
        vr->avail_shadow++;
}

void fe_vring_set_avail_idx(FeVring *vr, uint16_t idx) {
        atomic_thread_fence(memory_order_release);
        STORE16(&vr->avail->idx, idx);
        vr->avail_shadow = idx;
}

void fe_vring_publish(FeVring *vr) {
        /* Descriptors and ring entries must be visible before the index that exposes them. */
        atomic_thread_fence(memory_order_release);
        STORE16(&vr->avail->idx, vr->avail_shadow);
}

bool fe_vring_kick_needed(FeVring *vr) {
        uint16_t old = vr->kicked_idx, new = vr->avail_shadow;
        bool need;

        /* Store of avail->idx before the load of avail_event / used flags (store→load needs a full fence). */
        atomic_thread_fence(memory_order_seq_cst);
        if (vr->event_idx) {
                uint16_t ev = LOAD16((uint16_t *) &vr->used->ring[vr->num]);
                need = vring_need_event(ev, new, old);
        } else
                need = !(LOAD16(&vr->used->flags) & VRING_USED_F_NO_NOTIFY);
        vr->kicked_idx = new;
        return need;
}

int fe_vring_kick(FeVring *vr) {
        uint64_t one = 1;
        vr->kicked_idx = vr->avail_shadow;
        vr->kicks++;
        if (write(vr->kick_fd, &one, sizeof(one)) != sizeof(one))
                return negative_errno();
        return 0;
}

int fe_vring_notify(FeVring *vr) {
        fe_vring_publish(vr);
        if (fe_vring_kick_needed(vr))
                return fe_vring_kick(vr);
        return 0;
}

static void free_chain(FeVring *vr, uint16_t head) {
        FeVringSlot *s = &vr->slots[head];
        uint16_t tail = head;

        for (unsigned i = 1; i < s->ndesc; i++)
                tail = vr->desc[tail].next;
        vr->desc[tail].next = vr->free_head;
        vr->free_head = head;
        vr->num_free += s->ndesc;
        if (s->ind_gpa)
                fe_mem_release(vr->mem, s->ind_gpa, s->ind_len);
        *s = (FeVringSlot) {};
}

int fe_vring_pop_used(FeVring *vr, uint32_t *ret_id, uint32_t *ret_len, void **ret_user) {
        uint16_t idx = __atomic_load_n(&vr->used->idx, __ATOMIC_ACQUIRE);
        struct vring_used_elem e;

        if (idx == vr->last_used)
                return 0;
        e.id = __atomic_load_n(&vr->used->ring[vr->last_used % vr->num].id, __ATOMIC_RELAXED);
        e.len = __atomic_load_n(&vr->used->ring[vr->last_used % vr->num].len, __ATOMIC_RELAXED);
        vr->last_used++;
        *ret_id = e.id;
        *ret_len = e.len;
        if (ret_user)
                *ret_user = NULL;
        if (e.id >= vr->num || !vr->slots[e.id].busy)
                return -EPROTO;
        if (ret_user)
                *ret_user = vr->slots[e.id].user;
        if (vr->slots[e.id].raw)
                vr->slots[e.id].busy = false;
        else
                free_chain(vr, (uint16_t) e.id);
        return 1;
}

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int fe_vring_wait(FeVring *vr, int timeout_ms) {
        int64_t deadline = now_ms() + timeout_ms;

        for (;;) {
                struct pollfd p = { .fd = vr->call_fd, .events = POLLIN };
                uint64_t v;
                int64_t left;

                /* Ask for an interrupt for the next used entry, then re-check: the backend may have
                 * completed between our last look and the request. */
                if (vr->event_idx)
                        STORE16(&vr->avail->ring[vr->num], vr->last_used);
                else
                        STORE16(&vr->avail->flags, 0);
                atomic_thread_fence(memory_order_seq_cst);
                if (__atomic_load_n(&vr->used->idx, __ATOMIC_ACQUIRE) != vr->last_used)
                        return 0;

                left = deadline - now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                if (poll(&p, 1, (int) left) < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (p.revents & POLLIN) {
                        if (read(vr->call_fd, &v, sizeof(v)) == sizeof(v))
                                vr->calls_seen++;
                        /* With a proper notification the entry must be there now; the loop re-checks. */
                }
        }
}

unsigned fe_vring_in_flight(FeVring *vr) {
        unsigned n = 0;
        for (unsigned i = 0; i < vr->num; i++)
                if (vr->slots[i].busy && !vr->slots[i].raw)
                        n++;
        return n;
}

int fe_vring_reserve_raw(FeVring *vr, unsigned n) {
        uint16_t first;

        /* Only with nothing in flight: the free list is rebuilt as 0, 1, ..., num-n-1. */
        if (vr->num_free != vr->num || vr->num_raw > 0 || n >= vr->num)
                return -EBUSY;
        first = (uint16_t) (vr->num - n);
        for (uint16_t i = 0; i < first; i++)
                vr->desc[i].next = (uint16_t) (i + 1);
        vr->free_head = 0;
        vr->num_free = first;
        vr->num_raw = n;
        for (unsigned i = first; i < vr->num; i++)
                vr->slots[i].raw = true;
        return first;
}
