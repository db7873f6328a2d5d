/* guest-memory.c: memory-region snapshots and bounds-checked translation. */
#include "guest-memory.h"

#include <fcntl.h>

#include <linux/magic.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* Surviving a frontend that truncates guest memory under us.
 *
 * Guest memory is a shared mapping of the frontend's file. A frontend that shrinks the file (a
 * memfd without F_SEAL_SHRINK, or a file on tmpfs/hugetlbfs, which cannot be sealed) turns our next
 * load or store there into SIGBUS. Sealing cannot be required (QEMU's file and hugetlbfs backends
 * have no seals), so every mapping is registered here, and a SIGBUS inside one replaces the
 * faulting page with a private zero page: the access is retried and reads zeros, the fault is
 * counted (guest_memory_faults(); the device then stops its queues, see device.c). A SIGBUS
 * anywhere else goes to the handler that was there before (or kills the process as it would have).
 * System calls on such memory (preadv into a guest buffer) fail with EFAULT; they never signal.
 * The table is written under a mutex and read by the handler without one (atomics only). */
#define GUEST_MAPS_MAX 1024

static struct {
        _Atomic uintptr_t start; /* 0 = free slot */
        _Atomic uintptr_t end;
        _Atomic uintptr_t page; /* mapping granularity: the huge page size on hugetlbfs */
} guest_maps[GUEST_MAPS_MAX];
static pthread_mutex_t guest_maps_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t guest_faults;
static struct sigaction sigbus_prev;
static pthread_once_t sigbus_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
        uintptr_t a = (uintptr_t) si->si_addr;
        int saved_errno = errno;

        for (unsigned i = 0; i < GUEST_MAPS_MAX; i++) {
                uintptr_t start = atomic_load_explicit(&guest_maps[i].start, memory_order_acquire), base, page;

                if (start == 0 || a < start || a >= atomic_load_explicit(&guest_maps[i].end, memory_order_relaxed))
                        continue;
                page = atomic_load_explicit(&guest_maps[i].page, memory_order_relaxed);
                base = a & ~(page - 1);
                if (mmap((void *) base, page, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) !=
                    MAP_FAILED) {
                        atomic_fetch_add_explicit(&guest_faults, 1, memory_order_relaxed);
                        errno = saved_errno;
                        return;
                }
                break;
        }
        /* Not guest memory: what would have happened without us. */
        if (sigbus_prev.sa_handler == SIG_DFL || sigbus_prev.sa_handler == SIG_IGN) {
                struct sigaction dfl = { .sa_handler = SIG_DFL };
                (void) sigaction(SIGBUS, &dfl, NULL);
                (void) raise(SIGBUS); /* blocked until we return; a fault faults again anyway */
        } else if (sigbus_prev.sa_flags & SA_SIGINFO)
                sigbus_prev.sa_sigaction(sig, si, uc);
        else
                sigbus_prev.sa_handler(sig);
        errno = saved_errno;
}

static void sigbus_install(void) {
        struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK };

        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, &sigbus_prev) < 0)
                sigbus_prev = (struct sigaction) { .sa_handler = SIG_DFL };
}

static int guest_map_register(void *p, size_t len, size_t page) {
        int r = -ENOSPC;

        (void) pthread_once(&sigbus_once, sigbus_install);
        pthread_mutex_lock(&guest_maps_lock);
        for (unsigned i = 0; i < GUEST_MAPS_MAX; i++)
                if (atomic_load_explicit(&guest_maps[i].start, memory_order_relaxed) == 0) {
                        atomic_store_explicit(&guest_maps[i].end, (uintptr_t) p + len, memory_order_relaxed);
                        atomic_store_explicit(&guest_maps[i].page, page, memory_order_relaxed);
                        atomic_store_explicit(&guest_maps[i].start, (uintptr_t) p, memory_order_release);
                        r = 0;
                        break;
                }
        pthread_mutex_unlock(&guest_maps_lock);
        return r;
}

/* Before the munmap: a fault there afterwards is not ours to paper over. */
static void guest_map_unregister(void *p) {
        pthread_mutex_lock(&guest_maps_lock);
        for (unsigned i = 0; i < GUEST_MAPS_MAX; i++)
                if (atomic_load_explicit(&guest_maps[i].start, memory_order_relaxed) == (uintptr_t) p) {
                        atomic_store_explicit(&guest_maps[i].start, 0, memory_order_release);
                        break;
                }
        pthread_mutex_unlock(&guest_maps_lock);
}

int guest_mapping_protect(void *p, size_t len) {
        return guest_map_register(p, len, (size_t) sysconf(_SC_PAGESIZE));
}

void guest_mapping_unprotect(void *p) {
        guest_map_unregister(p);
}

uint64_t guest_memory_faults(void) {
        return atomic_load_explicit(&guest_faults, memory_order_relaxed);
}

/* True if [a, a+len) fits inside [start, start+size); all in u64 without overflow. */
static bool range_inside(uint64_t a, uint64_t len, uint64_t start, uint64_t size) {
        return a >= start && a - start <= size && len <= size - (a - start);
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
        return a < b + blen && b < a + alen;
}

int guest_region_new(GuestRegion **ret, int fd, uint64_t gpa, uint64_t size, uint64_t uaddr, uint64_t mmap_offset) {
        struct stat st;
        struct statfs sfs;
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        GuestRegion *r;
        void *p;
        int k;

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
        /* A later truncation is survived, not prevented (see on_sigbus()): the handler replaces
         * whole pages of the mapping, huge ones on hugetlbfs. */
        if (fstatfs(fd, &sfs) == 0 && sfs.f_type == HUGETLBFS_MAGIC && sfs.f_bsize > 0 &&
            ((size_t) sfs.f_bsize & ((size_t) sfs.f_bsize - 1)) == 0)
                page = (size_t) sfs.f_bsize;
        (void) pthread_once(&sigbus_once, sigbus_install);

        /* Map from offset 0 and add mmap_offset ourselves, as mmap_offset need not be page aligned
         * (and hugetlbfs needs huge-page aligned offsets). */
        p = mmap(NULL, (size_t) (mmap_offset + size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (p == MAP_FAILED)
                return negative_errno();

        k = guest_map_register(p, (size_t) (mmap_offset + size), page);
        if (k < 0) {
                munmap(p, (size_t) (mmap_offset + size));
                return k;
        }
        r = calloc(1, sizeof *r);
        if (r)
                r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (!r || r->fd < 0) {
                free(r);
                guest_map_unregister(p);
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
                guest_map_unregister(r->map_base);
                munmap(r->map_base, r->map_len);
                safe_close(r->fd);
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

int guest_memory_region_of(const GuestMemory *m, uint64_t gpa) {
        for (unsigned i = 0; i < m->n_regions; i++) {
                const GuestRegion *g = m->regions[i];
                if (gpa >= g->gpa && gpa - g->gpa < g->size)
                        return (int) i;
        }
        return -ENOENT;
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
