/* virtqueue.h: one split virtqueue: popping descriptor chains, pushing used elements, notifying.
 *
 * Not thread-safe by itself: the device layer serialises pop, push, notify and reconfiguration of
 * one queue with that queue's lock (see device.c). The guest writes the ring concurrently, so every
 * ring field is read once, copied, and then validated. */
#pragma once

#include <linux/virtio_ring.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "guest-memory.h"
#include "inflight.h"

#define VQ_MAX_SIZE 32768         /* largest split ring the spec allows */
#define VQ_MAX_INDIRECT 1024      /* entries in one indirect table, as QEMU and Linux cap it */
#define VQ_ELEM_MAX_IOV 1024      /* iovecs in one chain: 256 data pages + headers with room */
#define VQ_MAX_CHAIN_BYTES (1ULL << 32)

/* One popped request: the readable iovecs first (n_in), then the writable ones (n_out). */
typedef struct VqElem {
        struct VqElem *next_free; /* free-list link while not in use */
        GuestMemory *mem;         /* the snapshot iov points into; held until the element is pushed */
        uint16_t head;
        unsigned n_in, n_out;
        struct iovec iov[VQ_ELEM_MAX_IOV];
} VqElem;

typedef struct VirtQueue {
        unsigned index;
        unsigned num; /* ring size, a power of two, 0 = not set */

        /* Ring addresses as the frontend sent them (its own virtual addresses) and our mapping. */
        uint64_t desc_qva, avail_qva, used_qva;
        struct vring_desc *desc;
        struct vring_avail *avail;
        struct vring_used *used;

        uint16_t last_avail; /* next avail entry to consume */
        /* Entries from last_avail on that the guest's avail index published when last read: popped
         * without reading the index again (a cache line the guest keeps writing). Reset by
         * vq_map(), which every start and memory-table change goes through. */
        uint16_t avail_ahead;
        uint16_t used_idx;   /* our copy of used->idx */
        uint16_t signalled_used;
        bool signalled_used_valid;

        /* Region of the last descriptor translated (guest_memory_gpa_in_region()): a guess, only
         * ever used after checking it against the snapshot at hand. Queue thread only. */
        unsigned region_hint;

        bool event_idx;
        bool indirect;
        bool broken;

        /* The in-flight table every pop, push and publication is recorded in (inflight.h); NULL:
         * none (the unit tests' rings). Set by the device while the queue is stopped. */
        Inflight *inflight;
} VirtQueue;

typedef enum VqPopResult {
        VQ_POP_EMPTY = 0,
        VQ_POP_OK = 1,
        VQ_POP_BAD_CHAIN = 2, /* *head is valid: complete it with length 0 */
} VqPopResult;

/* Maps the ring addresses in mem. -EFAULT if any part lies outside guest memory or is misaligned;
 * the ring pointers are then left as they were (a running queue keeps the snapshot they point
 * into, see device.c). Reads the used index from the ring (the frontend does not send it). */
int vq_map(VirtQueue *vq, const GuestMemory *mem);

/* Pops the next chain into elem (translating through mem). Returns VQ_POP_EMPTY, VQ_POP_OK,
 * VQ_POP_BAD_CHAIN (elem->head set, the chain was malformed: logged by the caller), or -EPROTO when
 * the ring itself is corrupt (the caller marks the queue broken). */
int vq_pop(VirtQueue *vq, const GuestMemory *mem, VqElem *elem);

/* Builds elem from the chain at head without consuming an avail entry: a request the in-flight
 * table says was popped by a process that died (inflight_resume()). VQ_POP_OK or VQ_POP_BAD_CHAIN. */
int vq_pop_head(VirtQueue *vq, const GuestMemory *mem, uint16_t head, VqElem *elem);

/* Hints the CPU to fetch the first readable and the first writable buffer of elem (no access). */
static inline void vq_elem_prefetch(const VqElem *elem) {
        if (elem->n_in > 0)
                __builtin_prefetch(elem->iov[0].iov_base, 0);
        if (elem->n_out > 0)
                __builtin_prefetch(elem->iov[elem->n_in].iov_base, 1);
}

/* Puts one completed chain on the used ring (not yet visible to the guest). */
void vq_push(VirtQueue *vq, uint16_t head, uint32_t len);

/* Makes pushed elements visible to the guest (a polling guest can take them at once). No full
 * fence: the store may still sit in this CPU's store buffer, which vq_need_notify() drains. */
void vq_publish(VirtQueue *vq);
/* Whether the guest wants an interrupt for what was published since the last interrupt it was
 * sent: true means the caller sends one now. A caller may publish several times before asking. */
bool vq_need_notify(VirtQueue *vq);
/* vq_publish() then vq_need_notify(). */
bool vq_flush(VirtQueue *vq);

/* Asks the guest for a kick on the next request (before sleeping) and returns true if requests
 * arrived meanwhile, so the caller processes them instead of sleeping. */
bool vq_enable_notify(VirtQueue *vq);
/* Tells the guest kicks are not needed while we are busy popping. */
void vq_disable_notify(VirtQueue *vq);
/* Tells the guest no kick is needed at all (even with event idx) while we poll the ring ourselves;
 * vq_enable_notify() undoes it. */
void vq_suppress_notify(VirtQueue *vq);

/* Requests available and not yet popped. */
unsigned vq_pending(const VirtQueue *vq);
