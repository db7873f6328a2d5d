/* fe-mem.c: memfd-backed guest memory regions and a next-fit bitmap allocator over them. */
#include "fe-mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util.h"

#define LOW_SIZE 0xa0000ull      /* QEMU's first region: below the VGA hole */
#define QEMU_HIGH_GPA 0xc0000ull
#define SEPARATE_HIGH_GPA (1ull << 32)

static int memfd_sized(uint64_t size) {
        _cleanup_close_ int fd = memfd_create("fe-guest-ram", MFD_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (ftruncate(fd, (off_t) size) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

static int add_map(FeMem *m, int fd, size_t len, void **ret) {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return negative_errno();
        m->maps[m->n_maps] = p;
        m->map_sizes[m->n_maps] = len;
        m->n_maps++;
        *ret = p;
        return 0;
}

static int add_region(FeMem *m, uint64_t gpa, uint64_t size, uint64_t off, int fd, uint8_t *host) {
        FeMemRegion *r = &m->regions[m->n_regions];

        *r = (FeMemRegion) { .gpa = gpa, .size = size, .mmap_offset = off, .fd = fd, .host = host };
        r->nunits = size / FE_MEM_UNIT;
        r->bitmap = calloc((r->nunits + 63) / 64, sizeof(uint64_t));
        if (!r->bitmap)
                return -ENOMEM;
        m->n_regions++;
        return 0;
}

int fe_mem_new(FeMem **ret, uint64_t size, FeMemLayout layout) {
        FeMem *m;
        void *p;
        int r;

        if (size < 4 * LOW_SIZE || size % 4096)
                return -EINVAL;
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->layout = layout;
        m->size = size;
        pthread_mutex_init(&m->lock, NULL);
        for (unsigned i = 0; i < FE_MEM_MAX_REGIONS; i++)
                m->fds[i] = -1;

        switch (layout) {
        case FE_MEM_ONE_REGION:
        case FE_MEM_QEMU_SPLIT:
                r = memfd_sized(size);
                if (r < 0)
                        goto fail;
                m->fds[0] = r;
                r = add_map(m, m->fds[0], size, &p);
                if (r < 0)
                        goto fail;
                if (layout == FE_MEM_ONE_REGION)
                        r = add_region(m, 0, size, 0, m->fds[0], p);
                else {
                        r = add_region(m, 0, LOW_SIZE, 0, m->fds[0], p);
                        if (r >= 0)
                                r = add_region(m, QEMU_HIGH_GPA, size - QEMU_HIGH_GPA, QEMU_HIGH_GPA, m->fds[0],
                                               (uint8_t *) p + QEMU_HIGH_GPA);
                }
                if (r < 0)
                        goto fail;
                break;
        case FE_MEM_SEPARATE:
                for (unsigned i = 0; i < 2; i++) {
                        uint64_t len = i == 0 ? LOW_SIZE : size - LOW_SIZE;
                        r = memfd_sized(len);
                        if (r < 0)
                                goto fail;
                        m->fds[i] = r;
                        r = add_map(m, m->fds[i], len, &p);
                        if (r < 0)
                                goto fail;
                        r = add_region(m, i == 0 ? 0 : SEPARATE_HIGH_GPA, len, 0, m->fds[i], p);
                        if (r < 0)
                                goto fail;
                }
                break;
        default:
                r = -EINVAL;
                goto fail;
        }

        /* Keep gpa 0 unallocated: a zero address in a descriptor then always means a test bug. */
        m->regions[0].bitmap[0] |= 1;
        *ret = m;
        return 0;
fail:
        fe_mem_free(m);
        return r;
}

FeMem *fe_mem_free(FeMem *m) {
        if (!m)
                return NULL;
        for (unsigned i = 0; i < m->n_regions; i++)
                free(m->regions[i].bitmap);
        pthread_mutex_destroy(&m->lock);
        for (unsigned i = 0; i < m->n_maps; i++)
                munmap(m->maps[i], m->map_sizes[i]);
        for (unsigned i = 0; i < FE_MEM_MAX_REGIONS; i++)
                safe_close(m->fds[i]);
        free(m);
        return NULL;
}

void *fe_mem_gpa_to_host(FeMem *m, uint64_t gpa, uint64_t len) {
        for (unsigned i = 0; i < m->n_regions; i++) {
                FeMemRegion *r = &m->regions[i];
                if (gpa >= r->gpa && gpa - r->gpa <= r->size && len <= r->size - (gpa - r->gpa))
                        return r->host + (gpa - r->gpa);
        }
        return NULL;
}

int fe_mem_host_to_gpa(FeMem *m, const void *p, uint64_t *ret_gpa) {
        uintptr_t a = (uintptr_t) p;
        for (unsigned i = 0; i < m->n_regions; i++) {
                FeMemRegion *r = &m->regions[i];
                if (a >= (uintptr_t) r->host && a < (uintptr_t) r->host + r->size) {
                        *ret_gpa = r->gpa + (a - (uintptr_t) r->host);
                        return 0;
                }
        }
        return -ENOENT;
}

static bool unit_used(const FeMemRegion *r, size_t u) {
        return r->bitmap[u / 64] & (1ull << (u % 64));
}

static void units_set(FeMemRegion *r, size_t first, size_t n, bool on) {
        for (size_t u = first; u < first + n; u++) {
                if (on)
                        r->bitmap[u / 64] |= 1ull << (u % 64);
                else
                        r->bitmap[u / 64] &= ~(1ull << (u % 64));
        }
}

/* Looks for n free units starting in [from, to); the run may extend up to nunits. */
static bool region_scan(FeMemRegion *r, size_t from, size_t to, size_t n, size_t *ret) {
        size_t run = 0, run_start = 0;

        for (size_t u = from; u < r->nunits && (run > 0 || u < to); u++) {
                if (run == 0 && u % 64 == 0 && r->bitmap[u / 64] == UINT64_MAX) {
                        u += 63;
                        continue;
                }
                if (unit_used(r, u)) {
                        run = 0;
                        continue;
                }
                if (run++ == 0)
                        run_start = u;
                if (run == n) {
                        *ret = run_start;
                        return true;
                }
        }
        return false;
}

/* Next-fit: from the hint to the end, then from the start. */
static bool region_find(FeMemRegion *r, size_t n, size_t *ret) {
        if (n > r->nunits)
                return false;
        return region_scan(r, r->hint, r->nunits, n, ret) || region_scan(r, 0, r->hint, n, ret);
}

void *fe_mem_alloc(FeMem *m, size_t len, int region, uint64_t *ret_gpa) {
        size_t n = (MAX(len, (size_t) 1) + FE_MEM_UNIT - 1) / FE_MEM_UNIT, first;
        unsigned order[FE_MEM_MAX_REGIONS], norder = 0;

        if (region >= 0) {
                if ((unsigned) region >= m->n_regions)
                        return NULL;
                order[norder++] = region;
        } else {
                /* Largest region first (the last one in every layout), then the others. */
                for (int i = (int) m->n_regions - 1; i >= 0; i--)
                        order[norder++] = i;
        }
        pthread_mutex_lock(&m->lock);
        for (unsigned k = 0; k < norder; k++) {
                FeMemRegion *r = &m->regions[order[k]];
                if (!region_find(r, n, &first))
                        continue;
                units_set(r, first, n, true);
                r->hint = first + n;
                pthread_mutex_unlock(&m->lock);
                *ret_gpa = r->gpa + first * FE_MEM_UNIT;
                return r->host + first * FE_MEM_UNIT;
        }
        pthread_mutex_unlock(&m->lock);
        return NULL;
}

void fe_mem_release(FeMem *m, uint64_t gpa, size_t len) {
        size_t n = (MAX(len, (size_t) 1) + FE_MEM_UNIT - 1) / FE_MEM_UNIT;
        for (unsigned i = 0; i < m->n_regions; i++) {
                FeMemRegion *r = &m->regions[i];
                if (gpa >= r->gpa && gpa < r->gpa + r->size) {
                        pthread_mutex_lock(&m->lock);
                        units_set(r, (gpa - r->gpa) / FE_MEM_UNIT, n, false);
                        pthread_mutex_unlock(&m->lock);
                        return;
                }
        }
}

size_t fe_mem_allocated(FeMem *m) {
        size_t total = 0;
        pthread_mutex_lock(&m->lock);
        for (unsigned i = 0; i < m->n_regions; i++)
                for (size_t w = 0; w < (m->regions[i].nunits + 63) / 64; w++)
                        total += (size_t) __builtin_popcountll(m->regions[i].bitmap[w]);
        pthread_mutex_unlock(&m->lock);
        return total;
}

int fe_mem_region_msg(FeMem *m, unsigned i, FeVuRegion *ret) {
        FeMemRegion *r = &m->regions[i];
        *ret = (FeVuRegion) {
                .guest_phys_addr = r->gpa,
                .memory_size = r->size,
                .userspace_addr = fe_mem_host_to_uaddr(r->host),
                .mmap_offset = r->mmap_offset,
        };
        return r->fd;
}

uint64_t fe_mem_hole_gpa(FeMem *m) {
        if (m->n_regions > 1)
                return m->regions[0].gpa + m->regions[0].size + 0x1000;
        return m->regions[m->n_regions - 1].gpa + m->regions[m->n_regions - 1].size + 0x1000;
}
