/* ring-fixture.h: one guest memory region in a memfd, laid out for a split ring of NUM entries at
 * fixed guest addresses, for the ring tests (test-virtqueue, test-inflight). */
#pragma once

#include <check.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest-memory.h"
#include "virtqueue.h"

#define NUM 16
#define UADDR 0x7f0000000000ULL
#define DESC_GPA 0x0
#define AVAIL_GPA 0x1000
#define USED_GPA 0x2000
#define BUF_GPA 0x10000
#define MEM_SIZE (1 << 20)

/* The test's ring: its memory, memfd, our mapping, the queue and the guest's avail index. */
static int memfd = -1;
static GuestMemory *mem;
static uint8_t *host;
static VirtQueue vq;
static uint16_t avail_idx;

static inline struct vring_desc *desc(void) {
        return (struct vring_desc *) (host + DESC_GPA);
}
static inline struct vring_avail *avail(void) {
        return (struct vring_avail *) (host + AVAIL_GPA);
}
static inline struct vring_used *used(void) {
        return (struct vring_used *) (host + USED_GPA);
}

/* Sets memfd, mem and host (the test's teardown closes and drops them). */
static inline void ring_fixture_memory(void) {
        GuestRegion *g;
        GuestMemory *m0;

        memfd = memfd_create("vq", MFD_CLOEXEC);
        ck_assert_int_ge(memfd, 0);
        ck_assert_int_eq(ftruncate(memfd, MEM_SIZE), 0);
        ck_assert_int_eq(guest_region_new(&g, memfd, 0, MEM_SIZE, UADDR, 0), 0);
        ck_assert_int_eq(guest_memory_new(&m0), 0);
        ck_assert_int_eq(guest_memory_add(m0, g, &mem), 0);
        host = g->host;
        guest_region_unref(g);
        guest_memory_unref(m0);
}
