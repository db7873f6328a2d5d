/* fe-mem.h: guest memory of the test frontend: memfd regions and a small allocator in guest-physical space. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vu-proto.h"

#define FE_MEM_MAX_REGIONS 4
/* Allocation granularity in guest memory; also the alignment of every allocation. */
#define FE_MEM_UNIT 64u

typedef enum FeMemLayout {
        FE_MEM_ONE_REGION,  /* one region: gpa [0, size), mmap_offset 0 */
        FE_MEM_QEMU_SPLIT,  /* QEMU's -m layout: {gpa 0, 0xa0000} + {gpa 0xc0000, rest}, one memfd, mmap_offset = gpa */
        FE_MEM_SEPARATE,    /* two memfds mapped apart: {gpa 0, 0xa0000} + {gpa 4 GiB, rest}; uaddr-gpa differs */
} FeMemLayout;

typedef struct FeMemRegion {
        uint64_t gpa;
        uint64_t size;
        uint64_t mmap_offset;   /* offset of gpa inside fd */
        int fd;                 /* borrowed from FeMem.fds[] */
        uint8_t *host;          /* gpa maps to host here; this is also the userspace_addr sent to the backend */
        uint64_t *bitmap;       /* one bit per FE_MEM_UNIT, set = allocated */
        size_t nunits;
        size_t hint;            /* next-fit start */
} FeMemRegion;

typedef struct FeMem {
        FeMemLayout layout;
        uint64_t size;
        FeMemRegion regions[FE_MEM_MAX_REGIONS];
        unsigned n_regions;
        int fds[FE_MEM_MAX_REGIONS];
        void *maps[FE_MEM_MAX_REGIONS];
        size_t map_sizes[FE_MEM_MAX_REGIONS];
        unsigned n_maps;
        /* Serialises the bitmaps: a load generator allocates from several queue threads. */
        pthread_mutex_t lock;
} FeMem;

/* Creates size bytes of shared guest memory laid out as layout. */
int fe_mem_new(FeMem **ret, uint64_t size, FeMemLayout layout);
FeMem *fe_mem_free(FeMem *m);

/* Host pointer for [gpa, gpa+len) if it lies inside one region, else NULL. */
void *fe_mem_gpa_to_host(FeMem *m, uint64_t gpa, uint64_t len);
/* Guest-physical address of a host pointer into guest memory; -ENOENT if it is not guest memory. */
int fe_mem_host_to_gpa(FeMem *m, const void *p, uint64_t *ret_gpa);
/* The frontend virtual address (userspace_addr space) of a host pointer: ring addresses use this. */
static inline uint64_t fe_mem_host_to_uaddr(const void *p) {
        return (uint64_t) (uintptr_t) p;
}

/* Allocates len bytes (FE_MEM_UNIT aligned) in region (or any region if region < 0, largest first).
 * Returns the host pointer and the gpa, NULL when full. Memory is not cleared. */
void *fe_mem_alloc(FeMem *m, size_t len, int region, uint64_t *ret_gpa);
void fe_mem_release(FeMem *m, uint64_t gpa, size_t len);
/* Units currently allocated (leak checks in tests). */
size_t fe_mem_allocated(FeMem *m);

/* Fills the vhost-user description of region i and returns its fd. */
int fe_mem_region_msg(FeMem *m, unsigned i, FeVuRegion *ret);

/* A guest-physical address that is in no region (between regions or past the end). */
uint64_t fe_mem_hole_gpa(FeMem *m);
