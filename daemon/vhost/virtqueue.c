/* virtqueue.c: split ring mechanics (virtio 1.x, split layout, indirect descriptors, event idx). */
#include "virtqueue.h"

#include <stdatomic.h>
#include <string.h>

/* Ring fields live in memory the guest writes concurrently: read and write them through volatile
 * accesses so the compiler neither caches nor tears them. x86 and the other targets we care about
 * are little endian; virtio 1.x rings are little endian. */
#define RING_LOAD(x) (*(volatile __typeof__(x) *) &(x))
#define RING_STORE(x, v) (*(volatile __typeof__(x) *) &(x) = (v))

static size_t desc_size(unsigned num) {
        return (size_t) num * sizeof(struct vring_desc);
}
static size_t avail_size(unsigned num, bool event_idx) {
        return sizeof(struct vring_avail) + (size_t) num * sizeof(__virtio16) + (event_idx ? 2 : 0);
}
static size_t used_size(unsigned num, bool event_idx) {
        return sizeof(struct vring_used) + (size_t) num * sizeof(struct vring_used_elem) + (event_idx ? 2 : 0);
}

int vq_map(VirtQueue *vq, const GuestMemory *mem) {
        struct vring_desc *desc;
        struct vring_avail *avail;
        struct vring_used *used;

        if (vq->num == 0 || !mem)
                return -EINVAL;
        /* Map the event-idx trailers too, whether negotiated or not, so a later SET_FEATURES cannot
         * make us touch unmapped bytes. Nothing changes unless all three fit: on failure the ring
         * stays on the mapping it had (the caller still holds that snapshot). */
        desc = guest_memory_qva_to_ptr(mem, vq->desc_qva, desc_size(vq->num));
        avail = guest_memory_qva_to_ptr(mem, vq->avail_qva, avail_size(vq->num, true));
        used = guest_memory_qva_to_ptr(mem, vq->used_qva, used_size(vq->num, true));
        if (!desc || !avail || !used)
                return -EFAULT;
        if (((uintptr_t) desc & 15) || ((uintptr_t) avail & 1) || ((uintptr_t) used & 3))
                return -EFAULT;
        vq->desc = desc;
        vq->avail = avail;
        vq->used = used;
        vq->used_idx = RING_LOAD(vq->used->idx);
        vq->avail_ahead = 0; /* a new base or table: read the index anew */
        vq->signalled_used_valid = false;
        return 0;
}

unsigned vq_pending(const VirtQueue *vq) {
        if (!vq->avail)
                return 0;
        return (uint16_t) (RING_LOAD(vq->avail->idx) - vq->last_avail);
}

static void set_avail_event(VirtQueue *vq, uint16_t v) {
        /* avail_event sits right after the used ring entries. */
        RING_STORE(*(__virtio16 *) &vq->used->ring[vq->num], v);
}

/* Appends the guest buffer [addr, addr+len) to elem. */
static int elem_add(VirtQueue *vq, const GuestMemory *mem, VqElem *elem, uint64_t addr, uint32_t len, bool writable) {
        unsigned used = elem->n_in + elem->n_out;
        int n;

        uint8_t *p;

        if (len == 0) /* nothing to read or write; harmless, skip it */
                return 0;
        p = guest_memory_gpa_in_region(mem, vq->region_hint, addr, len);
        if (p) {
                if (used >= VQ_ELEM_MAX_IOV)
                        return -E2BIG;
                elem->iov[used] = (struct iovec) { p, len };
                n = 1;
        } else {
                n = guest_memory_gpa_to_iov(mem, addr, len, elem->iov + used, VQ_ELEM_MAX_IOV - used);
                if (n < 0)
                        return n;
                vq->region_hint = (unsigned) guest_memory_region_of(mem, addr); /* found: n > 0 */
        }
        if (writable)
                elem->n_out += (unsigned) n;
        else
                elem->n_in += (unsigned) n;
        return 0;
}

/* Walks the chain at head. Returns 0 or a negative errno describing what is malformed. */
static int walk_chain(VirtQueue *vq, const GuestMemory *mem, uint16_t head, VqElem *elem) {
        const struct vring_desc *table = vq->desc;
        unsigned table_size = vq->num, count = 0, i = head;
        bool indirect = false;
        uint64_t total = 0;

        for (;;) {
                struct vring_desc d;
                int r;

                if (i >= table_size)
                        return -ERANGE; /* next index outside the table */
                if (++count > table_size)
                        return -ELOOP;
                memcpy(&d, (const void *) &table[i], sizeof d);
                /* The guest may keep writing the table; everything below uses the copy only. */
                atomic_signal_fence(memory_order_seq_cst);

                if (d.flags & VRING_DESC_F_INDIRECT) {
                        if (!vq->indirect || indirect || (d.flags & VRING_DESC_F_NEXT))
                                return -EINVAL; /* not negotiated, nested, or chained: all forbidden */
                        if (d.len == 0 || d.len % sizeof(struct vring_desc) ||
                            d.len / sizeof(struct vring_desc) > VQ_MAX_INDIRECT)
                                return -EINVAL;
                        table = (const struct vring_desc *) guest_memory_gpa_in_region(mem, vq->region_hint,
                                                                                       d.addr, d.len);
                        if (!table)
                                table = guest_memory_gpa_to_ptr(mem, d.addr, d.len);
                        if (!table || ((uintptr_t) table & 7))
                                return -EFAULT;
                        table_size = d.len / sizeof(struct vring_desc);
                        indirect = true;
                        count = 0;
                        i = 0;
                        continue;
                }

                if (d.flags & VRING_DESC_F_WRITE)
                        ;
                else if (elem->n_out > 0)
                        return -EPROTO; /* readable after writable */
                total += d.len;
                if (total > VQ_MAX_CHAIN_BYTES)
                        return -EFBIG;
                r = elem_add(vq, mem, elem, d.addr, d.len, d.flags & VRING_DESC_F_WRITE);
                if (r < 0)
                        return r;
                if (!(d.flags & VRING_DESC_F_NEXT))
                        return 0;
                i = d.next;
        }
}

int vq_pop(VirtQueue *vq, const GuestMemory *mem, VqElem *elem) {
        uint16_t avail_idx, head;

        if (vq->broken || !vq->avail)
                return -EPROTO;
        if (vq->avail_ahead == 0) {
                avail_idx = RING_LOAD(vq->avail->idx);
                if ((uint16_t) (avail_idx - vq->last_avail) > vq->num)
                        return -EPROTO; /* the guest claims more entries than the ring holds */
                if (avail_idx == vq->last_avail)
                        return VQ_POP_EMPTY;
                /* Read the ring entry and descriptors only after the index that published them. */
                atomic_thread_fence(memory_order_acquire);
                vq->avail_ahead = (uint16_t) (avail_idx - vq->last_avail);
        }

        /* avail_event is left alone: while the caller pops, a kick would only wake a thread that is
         * awake, and vq_enable_notify() asks for one (and looks again) before it sleeps. */
        head = RING_LOAD(vq->avail->ring[vq->last_avail & (vq->num - 1)]);
        vq->last_avail++;
        vq->avail_ahead--;
        if (head >= vq->num)
                return -EPROTO; /* cannot be returned to the guest: the ring is unusable */
        if (vq->inflight)
                inflight_popped(vq->inflight, head, (uint16_t) (vq->last_avail - 1));
        return vq_pop_head(vq, mem, head, elem);
}

int vq_pop_head(VirtQueue *vq, const GuestMemory *mem, uint16_t head, VqElem *elem) {
        int r;

        if (head >= vq->num)
                return -EPROTO;
        elem->head = head;
        elem->n_in = elem->n_out = 0;
        r = walk_chain(vq, mem, head, elem);
        if (r < 0) {
                elem->n_in = elem->n_out = 0;
                return VQ_POP_BAD_CHAIN;
        }
        return VQ_POP_OK;
}

void vq_push(VirtQueue *vq, uint16_t head, uint32_t len) {
        struct vring_used_elem *u = &vq->used->ring[vq->used_idx & (vq->num - 1)];

        if (vq->inflight) /* first: a kill after it re-writes the entry, see inflight_resume() */
                inflight_pushed(vq->inflight, head, vq->used_idx, len);
        RING_STORE(u->id, head);
        RING_STORE(u->len, len);
        vq->used_idx++;
}

void vq_publish(VirtQueue *vq) {
        /* The element (and the reply bytes) must be visible before the index that publishes them. */
        atomic_thread_fence(memory_order_release);
        RING_STORE(vq->used->idx, vq->used_idx);
        if (vq->inflight)
                inflight_published(vq->inflight);
}

bool vq_need_notify(VirtQueue *vq) {
        uint16_t old, new = vq->used_idx;

        /* Store-to-load ordering: the guest must not miss our index while we read its event index
         * (or flags), else both sides wait for each other. Here, not in vq_publish(): a reply that
         * is only published leaves its store to drain on its own, without stalling this CPU. */
        atomic_thread_fence(memory_order_seq_cst);

        if (!vq->event_idx)
                return !(RING_LOAD(vq->avail->flags) & VRING_AVAIL_F_NO_INTERRUPT);

        /* After (re)mapping we do not know what the guest last saw: notify once to be safe. */
        if (!vq->signalled_used_valid) {
                vq->signalled_used_valid = true;
                vq->signalled_used = new;
                return true;
        }
        /* Everything published since the last check counts: the guest's event index may lie
         * anywhere in [old, new). */
        old = vq->signalled_used;
        vq->signalled_used = new;
        return vring_need_event(RING_LOAD(vq->avail->ring[vq->num]), new, old);
}

bool vq_flush(VirtQueue *vq) {
        vq_publish(vq);
        return vq_need_notify(vq);
}

void vq_disable_notify(VirtQueue *vq) {
        if (!vq->used || vq->event_idx)
                return; /* with event idx, avail_event already trails last_avail */
        RING_STORE(vq->used->flags, RING_LOAD(vq->used->flags) | VRING_USED_F_NO_NOTIFY);
}

void vq_suppress_notify(VirtQueue *vq) {
        if (!vq->used)
                return;
        if (vq->event_idx)
                /* An event index just behind what we consumed: the guest's next kick would only be
                 * due after the index wraps around, and we look long before that. */
                set_avail_event(vq, (uint16_t) (vq->last_avail - 1));
        else
                RING_STORE(vq->used->flags, RING_LOAD(vq->used->flags) | VRING_USED_F_NO_NOTIFY);
}

bool vq_enable_notify(VirtQueue *vq) {
        if (!vq->used)
                return false;
        if (vq->event_idx)
                set_avail_event(vq, vq->last_avail);
        else
                RING_STORE(vq->used->flags, RING_LOAD(vq->used->flags) & ~VRING_USED_F_NO_NOTIFY);
        /* Publish the request for a kick before looking at the index again; otherwise a request
         * posted in between would wait for a kick the guest decided not to send. */
        atomic_thread_fence(memory_order_seq_cst);
        return vq_pending(vq) > 0;
}
