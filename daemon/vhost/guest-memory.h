/* guest-memory.h: the guest's memory regions and the one bounds-checked address translation.
 *
 * A GuestMemory is an immutable snapshot of the memory table, reference counted: every request in
 * flight holds the snapshot its iovecs point into, so a table change (SET_MEM_TABLE, ADD_MEM_REG,
 * REM_MEM_REG) never unmaps memory a worker is still using, and the data path takes no lock to
 * translate. Regions are shared between snapshots and unmapped with their last reference. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#include "util.h"

/* Slots offered by GET_MAX_MEM_SLOTS; QEMU caps it at 256 (ACPI) anyway. */
#define GUEST_MEMORY_MAX_REGIONS 32

typedef struct GuestRegion {
        _Atomic unsigned n_ref;
        uint64_t gpa;   /* guest physical start */
        uint64_t size;  /* bytes */
        uint64_t uaddr; /* start in the frontend's own address space (ring addresses use it) */
        uint64_t mmap_offset;
        uint8_t *host; /* our mapping of gpa */
        int fd;        /* the frontend's fd, kept for a process that takes over (docs/survival.md) */
        void *map_base;
        size_t map_len;
} GuestRegion;

typedef struct GuestMemory {
        _Atomic unsigned n_ref;
        unsigned n_regions;
        GuestRegion *regions[GUEST_MEMORY_MAX_REGIONS];
} GuestMemory;

/* Maps `size` bytes of fd starting at file offset mmap_offset. Checks the ranges do not wrap and
 * that the file is large enough (a shorter file would SIGBUS us on access). Does not take fd. A
 * file the frontend shrinks later is survived: the first mapping installs a SIGBUS handler that
 * turns a fault inside guest memory into a zero page and counts it (guest_memory_faults()). */
int guest_region_new(GuestRegion **ret, int fd, uint64_t gpa, uint64_t size, uint64_t uaddr, uint64_t mmap_offset);
GuestRegion *guest_region_ref(GuestRegion *r);
/* Faults (SIGBUS on a truncated file) papered over with zero pages since the process started. */
uint64_t guest_memory_faults(void);
GuestRegion *guest_region_unref(GuestRegion *r);
/* Another shared mapping of a frontend's file (the dirty log) survives a truncation the same way:
 * registered before the first access, unregistered before munmap. */
int guest_mapping_protect(void *p, size_t len);
void guest_mapping_unprotect(void *p);

int guest_memory_new(GuestMemory **ret);
GuestMemory *guest_memory_ref(GuestMemory *m);
GuestMemory *guest_memory_unref(GuestMemory *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(GuestMemory *, guest_memory_unref);
DEFINE_TRIVIAL_CLEANUP_FUNC(GuestRegion *, guest_region_unref);

/* A new snapshot: m plus r (-EEXIST if it overlaps a region in guest-physical or frontend address
 * space, -E2BIG when all slots are used). */
int guest_memory_add(const GuestMemory *m, GuestRegion *r, GuestMemory **ret);
/* A new snapshot: m without the region matching gpa, size and uaddr (-ENOENT if none). */
int guest_memory_remove(const GuestMemory *m, uint64_t gpa, uint64_t size, uint64_t uaddr, GuestMemory **ret);

/* Translates [gpa, gpa+len) into at most max iovecs (split where it crosses regions). Returns the
 * number of iovecs, -EFAULT if any byte lies outside guest memory or the range wraps, -E2BIG if it
 * needs more than max iovecs. len 0 gives 0 iovecs. */
int guest_memory_gpa_to_iov(const GuestMemory *m, uint64_t gpa, uint64_t len, struct iovec *iov, unsigned max);

/* Translates [gpa, gpa+len) that must lie inside one region (descriptor tables). NULL if not. */
void *guest_memory_gpa_to_ptr(const GuestMemory *m, uint64_t gpa, uint64_t len);

/* The index of the region holding gpa, or -ENOENT. */
int guest_memory_region_of(const GuestMemory *m, uint64_t gpa);

/* The ring's common case without the region search: [gpa, gpa+len) inside region number hint (a
 * guess the caller keeps from guest_memory_region_of(); any value is safe, a stale one just
 * misses). Returns the host address, or NULL when the caller must take the general path (another
 * region, a range crossing regions, or outside guest memory). Descriptors nearly always fall in
 * the region of the one before: this saves the search and the call for each. */
static inline uint8_t *guest_memory_gpa_in_region(const GuestMemory *m, unsigned hint, uint64_t gpa, uint64_t len) {
        const GuestRegion *g;

        if (hint >= m->n_regions)
                return NULL;
        g = m->regions[hint];
        /* Written so that no sum can wrap: the offset is checked before it is used. */
        if (gpa < g->gpa || gpa - g->gpa > g->size || len > g->size - (gpa - g->gpa))
                return NULL;
        return g->host + (gpa - g->gpa);
}

/* Translates a frontend virtual address range (SET_VRING_ADDR) that must lie in one region. */
void *guest_memory_qva_to_ptr(const GuestMemory *m, uint64_t qva, uint64_t len);
