/* dirty-log.c: marking the pages the backend writes in the frontend's dirty log. */
#include "dirty-log.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

int dirty_log_new(DirtyLog **ret, int fd, uint64_t size, uint64_t offset) {
        struct stat st;
        DirtyLog *l;
        void *p;
        size_t len;
        int r;

        if (size == 0 || size > DIRTY_LOG_MAX_BYTES || offset > DIRTY_LOG_MAX_BYTES)
                return -EINVAL;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADF;
        if ((uint64_t) st.st_size < offset + size)
                return -ERANGE;
        len = (size_t) (offset + size);
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (p == MAP_FAILED)
                return negative_errno();
        /* The frontend may shrink the file later: a write there must not kill us. */
        r = guest_mapping_protect(p, len);
        if (r < 0) {
                munmap(p, len);
                return r;
        }
        l = calloc(1, sizeof *l);
        if (!l) {
                guest_mapping_unprotect(p);
                munmap(p, len);
                return -ENOMEM;
        }
        atomic_init(&l->n_ref, 1);
        l->bits = (uint8_t *) p + offset;
        l->size = size;
        l->map_base = p;
        l->map_len = len;
        *ret = l;
        return 0;
}

DirtyLog *dirty_log_ref(DirtyLog *l) {
        if (l)
                atomic_fetch_add_explicit(&l->n_ref, 1, memory_order_relaxed);
        return l;
}

DirtyLog *dirty_log_unref(DirtyLog *l) {
        if (!l || atomic_fetch_sub_explicit(&l->n_ref, 1, memory_order_acq_rel) != 1)
                return NULL;
        guest_mapping_unprotect(l->map_base);
        munmap(l->map_base, l->map_len);
        free(l);
        return NULL;
}

void dirty_log_mark(DirtyLog *l, uint64_t gpa, uint64_t len) {
        uint64_t first, last;

        if (len == 0 || gpa + len < gpa)
                return;
        first = gpa / DIRTY_LOG_PAGE;
        last = (gpa + len - 1) / DIRTY_LOG_PAGE;
        for (uint64_t page = first; page <= last; page++) {
                if (page / 8 >= l->size)
                        return;
                __atomic_fetch_or(&l->bits[page / 8], (uint8_t) (1u << (page % 8)), __ATOMIC_RELAXED);
        }
}

void dirty_log_mark_iov(DirtyLog *l, const GuestMemory *mem, const struct iovec *iov, unsigned n) {
        for (unsigned k = 0; k < n; k++) {
                const uint8_t *a = iov[k].iov_base;
                for (unsigned j = 0; j < mem->n_regions; j++) {
                        const GuestRegion *g = mem->regions[j];
                        if (a >= g->host && (uint64_t) (a - g->host) < g->size) {
                                dirty_log_mark(l, g->gpa + (uint64_t) (a - g->host), iov[k].iov_len);
                                break;
                        }
                }
        }
}
