/* vring.h: the driver side of a split virtqueue in the test frontend's guest memory. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <linux/vhost_types.h>
#include <linux/virtio_ring.h>

#include "fe-mem.h"

/* One descriptor of a chain as the caller describes it. */
typedef struct FeSeg {
        uint64_t gpa;
        uint32_t len;
        bool write;
} FeSeg;

typedef struct FeVringSlot {
        bool busy;
        bool raw;               /* head reserved for hand-written descriptors */
        unsigned ndesc;         /* descriptors of the main table used by this chain */
        uint64_t ind_gpa;       /* indirect table, 0 if direct */
        size_t ind_len;
        void *user;
} FeVringSlot;

typedef struct FeVring {
        FeMem *mem;
        unsigned index;
        uint16_t num;
        bool event_idx;         /* VIRTIO_RING_F_EVENT_IDX negotiated */

        struct vring_desc *desc;
        struct vring_avail *avail;
        struct vring_used *used;
        void *area;
        uint64_t area_gpa;
        size_t area_len;

        int kick_fd;            /* we write it, the backend reads it */
        int call_fd;            /* the backend writes it, we poll it */
        int err_fd;

        uint16_t avail_shadow;  /* next avail idx, including entries not yet published */
        uint16_t kicked_idx;    /* avail idx at the last kick decision */
        uint16_t last_used;     /* next used entry to consume */
        uint16_t free_head;
        unsigned num_free;
        unsigned num_raw;       /* top descriptors reserved by fe_vring_reserve_raw() */
        FeVringSlot *slots;     /* indexed by head */

        unsigned kicks, calls_seen;
} FeVring;

/* Allocates a ring of num entries in region (any if < 0) with fresh kick/call/err eventfds. */
int fe_vring_new(FeVring **ret, FeMem *mem, unsigned index, uint16_t num, int region);
FeVring *fe_vring_free(FeVring *vr);

/* Ring addresses for SET_VRING_ADDR: desc/used/avail in frontend virtual addresses, log = gpa of used. */
void fe_vring_addr(FeVring *vr, struct vhost_vring_addr *ret);
/* Replaces the call eventfd (QEMU hands out new ones on every SET_VRING_CALL); returns the new fd. */
int fe_vring_new_call_fd(FeVring *vr);

/* Writes a chain (indirect if asked and n > 1 or force), puts the head in the avail ring (unpublished). */
int fe_vring_add(FeVring *vr, const FeSeg *segs, unsigned n, bool indirect, void *user, uint16_t *ret_head);
/* Publishes all added entries (avail->idx store after a release fence). */
void fe_vring_publish(FeVring *vr);
/* Whether the backend asked to be kicked for the entries published since the last kick. */
bool fe_vring_kick_needed(FeVring *vr);
/* Writes the kick eventfd unconditionally. */
int fe_vring_kick(FeVring *vr);
/* Publish + kick if needed (what a well-behaved driver does). */
int fe_vring_notify(FeVring *vr);

/* Takes one used element: 1 if one was there, 0 if none, -EPROTO on an id the backend must not return. */
int fe_vring_pop_used(FeVring *vr, uint32_t *ret_id, uint32_t *ret_len, void **ret_user);
/* Waits until a used element is available (re-enabling interrupts via used_event / flags);
 * 0, -ETIMEDOUT, or -errno. */
int fe_vring_wait(FeVring *vr, int timeout_ms);
unsigned fe_vring_in_flight(FeVring *vr);

/* Hostile hooks: reserve the top n descriptors of a fresh ring for hand-written chains; put an arbitrary
 * head into the avail ring; set avail->idx to anything. */
int fe_vring_reserve_raw(FeVring *vr, unsigned n);
void fe_vring_put_avail(FeVring *vr, uint16_t head);
void fe_vring_set_avail_idx(FeVring *vr, uint16_t idx);
