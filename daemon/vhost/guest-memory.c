/* guest-memory.c: memory-region snapshots and bounds-checked translation. */
#include "guest-memory.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* True if [a, a+len) fits inside [start, start+size); all in u64 without overflow. */
static bool range_inside(uint64_t a, uint64_t len, uint64_t start, uint64_t size) {
        return a >= start && a - start <= size && len <= size - (a - start);
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
        return a < b + blen && b < a + alen;
}

int guest_region_new(GuestRegion **ret, int fd, uint64_t gpa, uint64_t size, uint64_t uaddr, uint64_t mmap_offset) {
        struct stat st;
        GuestRegion *r;
        void *p;

        if (size == 0 || size > SIZE_MAX / 2)
                return -EINVAL;
        /* The guest-physical, frontend and file ranges must not wrap around 2^64. */
        if (gpa + size < gpa || uaddr + size < uaddr || mmap_offset + size < mmap_offset)
                return -EINVAL;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        /* Only file-like memory (memfd, tmpfs/hugetlbfs files); a range past the end of the file would
         * map fine and fault with SIGBUS on the first access. */
        if (!S_ISREG(st.st_mode))
                return -EBADF;
        if ((uint64_t) st.st_size < mmap_offset + size)
                return -ERANGE;

        /* Map from offset 0 and add mmap_offset ourselves, as mmap_offset need not be page aligned
         * (and hugetlbfs needs huge-page aligned offsets). */
        p = mmap(NULL, (size_t) (mmap_offset + size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (p == MAP_FAILED)
                return negative_errno();

        r = calloc(1, sizeof *r);
        if (!r) {
                munmap(p, (size_t) (mmap_offset + size));
                return -ENOMEM;
        }
        atomic_init(&r->n_ref, 1);
        r->gpa = gpa;
        r->size = size;
        r->uaddr = uaddr;
        r->mmap_offset = mmap_offset;
        r->map_base = p;
        r->map_len = (size_t) (mmap_offset + size);
        r->host = (uint8_t *) p + mmap_offset;
        *ret = r;
        return 0;
}

GuestRegion *guest_region_ref(GuestRegion *r) {
        if (r)
                atomic_fetch_add_explicit(&r->n_ref, 1, memory_order_relaxed);
        return r;
}

GuestRegion *guest_region_unref(GuestRegion *r) {
        if (!r)
                return NULL;
        /* acq_rel: the last owner must see every other owner's accesses before unmapping. */
        if (atomic_fetch_sub_explicit(&r->n_ref, 1, memory_order_acq_rel) == 1) {
                munmap(r->map_base, r->map_len);
                free(r);
        }
        return NULL;
}

int guest_memory_new(GuestMemory **ret) {
        GuestMemory *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        atomic_init(&m->n_ref, 1);
        *ret = m;
        return 0;
}

GuestMemory *guest_memory_ref(GuestMemory *m) {
        if (m)
                atomic_fetch_add_explicit(&m->n_ref, 1, memory_order_relaxed);
        return m;
}

GuestMemory *guest_memory_unref(GuestMemory *m) {
        if (!m)
                return NULL;
        if (atomic_fetch_sub_explicit(&m->n_ref, 1, memory_order_acq_rel) == 1) {
                for (unsigned i = 0; i < m->n_regions; i++)
                        guest_region_unref(m->regions[i]);
                free(m);
        }
        return NULL;
}

static int guest_memory_copy(const GuestMemory *m, GuestMemory **ret) {
        GuestMemory *c;
        int r = guest_memory_new(&c);
        if (r < 0)
                return r;
        if (m) {
                c->n_regions = m->n_regions;
                for (unsigned i = 0; i < m->n_regions; i++)
                        c->regions[i] = guest_region_ref(m->regions[i]);
        }
        *ret = c;
        return 0;
}

int guest_memory_add(const GuestMemory *m, GuestRegion *reg, GuestMemory **ret) {
        GuestMemory *c;
        int r;

        if (m && m->n_regions >= GUEST_MEMORY_MAX_REGIONS)
                return -E2BIG;
        for (unsigned i = 0; m && i < m->n_regions; i++) {
                const GuestRegion *o = m->regions[i];
                if (ranges_overlap(reg->gpa, reg->size, o->gpa, o->size) ||
                    ranges_overlap(reg->uaddr, reg->size, o->uaddr, o->size))
                        return -EEXIST;
        }
        r = guest_memory_copy(m, &c);
        if (r < 0)
                return r;
        c->regions[c->n_regions++] = guest_region_ref(reg);
        *ret = c;
        return 0;
}

int guest_memory_remove(const GuestMemory *m, uint64_t gpa, uint64_t size, uint64_t uaddr, GuestMemory **ret) {
        GuestMemory *c;
        int r;

        for (unsigned i = 0; m && i < m->n_regions; i++) {
                const GuestRegion *o = m->regions[i];
                if (o->gpa != gpa || o->size != size || o->uaddr != uaddr)
                        continue;
                r = guest_memory_new(&c);
                if (r < 0)
                        return r;
                for (unsigned j = 0; j < m->n_regions; j++)
                        if (j != i)
                                c->regions[c->n_regions++] = guest_region_ref(m->regions[j]);
                *ret = c;
                return 0;
        }
        return -ENOENT;
}

static const GuestRegion *find_gpa(const GuestMemory *m, uint64_t gpa) {
        for (unsigned i = 0; i < m->n_regions; i++) {
                const GuestRegion *g = m->regions[i];
                if (gpa >= g->gpa && gpa - g->gpa < g->size)
                        return g;
        }
        return NULL;
}

int guest_memory_gpa_to_iov(const GuestMemory *m, uint64_t gpa, uint64_t len, struct iovec *iov, unsigned max) {
        unsigned n = 0;

        if (gpa + len < gpa)
                return -EFAULT;
        while (len > 0) {
                const GuestRegion *g = find_gpa(m, gpa);
                uint64_t off, k;

                if (!g)
                        return -EFAULT;
                if (n >= max)
                        return -E2BIG;
                off = gpa - g->gpa;
                k = MIN(len, g->size - off);
                iov[n++] = (struct iovec) { g->host + off, (size_t) k };
                gpa += k;
                len -= k;
        }
        return (int) n;
}

void *guest_memory_gpa_to_ptr(const GuestMemory *m, uint64_t gpa, uint64_t len) {
        const GuestRegion *g = find_gpa(m, gpa);
        if (!g || !range_inside(gpa, len, g->gpa, g->size))
                return NULL;
        return g->host + (gpa - g->gpa);
}

void *guest_memory_qva_to_ptr(const GuestMemory *m, uint64_t qva, uint64_t len) {
        for (unsigned i = 0; i < m->n_regions; i++) {
                const GuestRegion *g = m->regions[i];
                if (range_inside(qva, len, g->uaddr, g->size))
                        return g->host + (qva - g->uaddr);
        }
        return NULL;
}
