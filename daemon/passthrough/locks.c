/* locks.c: POSIX locks as one OFD per guest lock owner, flock per handle, blocking waits. */
#include "locks.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <sys/file.h>
#include <time.h>

#include "fd-budget.h"
#include "handle-map.h"
#include "inode-fd.h"
#include "lock-set.h"
#include "passthrough-internal.h"
#include "session-journal.h"

/* One guest lock owner's POSIX locks on an inode: an OFD of its own, so that owners conflict and
 * one owner's locks merge as the kernel expects. Remembers the handle the owner first locked
 * through: an OFD lock's owner is the guest's open file, which is that handle, and only its
 * RELEASE ends such locks (FLUSH carries the closing process's owner, not the file's).
 * Reference counted: FLUSH or RELEASE on one queue may drop the entry while a request on another
 * uses its fd; the fd closes with the last user, so its number is never reused under a request. */
typedef struct PLock {
        int fd; /* owned; one fd of the budget */
        uint64_t fh; /* the handle it was taken through (fh values are never reused) */
        uint64_t owner;
        uint64_t nodeid; /* of the inode whose table holds it */
        FdBudget *budget; /* where the fd is given back */
        _Atomic int64_t *ranges_total; /* the passthrough's count of every owner's ranges */
        const int64_t *ranges_max;     /* and its bound (LOCK_RANGES_MAX) */
        _Atomic unsigned refs; /* the table's, plus one per request using fd */
        /* The ranges the kernel granted this owner (lock-set.h), for a saved session. set_lock
         * makes each F_OFD_SETLK and its update one step, so that two queues of one owner record
         * the ranges in the order the kernel applied them; it is held for one non-blocking fcntl,
         * never across a wait (waits poll). */
        pthread_mutex_t set_lock;
        LockSet ranges;
} PLock;

static void plock_unref(PLock *l) {
        if (!l)
                return;
        /* acq_rel: every user's fcntl happens before the last one's close. */
        if (atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
                return;
        fd_budget_close(l->budget, l->fd);
        atomic_fetch_sub(l->ranges_total, (int64_t) l->ranges.n);
        lock_set_done(&l->ranges);
        pthread_mutex_destroy(&l->set_lock);
        free(l);
}

static void plock_unrefp(PLock **l) {
        plock_unref(*l);
}

static void plock_unref_void(gpointer l) {
        plock_unref(l);
}

/* The guest's open file fh on nodeid, which a lock request names; EBADF for a handle a migration
 * could not open again (state-load.c, --migration-on-error=guest-error): it has no fd, and its
 * lock owner's OFD would lock the file for a guest that cannot use it. */
static int lock_handle(Passthrough *p, uint64_t fh, uint64_t nodeid, Handle **ret) {
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int r = handle_map_get(p->handles, fh, nodeid, 0, &h);

        if (r < 0)
                return r;
        if (h->fd < 0)
                return -EBADF;
        *ret = TAKE_PTR(h);
        return 0;
}

void plock_drop_owner(Passthrough *p, Inode *i, uint64_t owner) {
        gpointer k = NULL, v = NULL;

        pthread_mutex_lock(&i->plock_mutex);
        if (!i->plocks || !g_hash_table_steal_extended(i->plocks, &owner, &k, &v))
                k = v = NULL;
        pthread_mutex_unlock(&i->plock_mutex);
        if (v)
                journal_plock_gone(i->nodeid, owner);
        /* Outside the lock: the fd closes (and its locks go) now, or when the last request still
         * using it is done. */
        g_free(k);
        plock_unref(v);
}

/* Drops every lock owner's entry on i taken through fh. */
static void drop_through(Inode *i, uint64_t fh) {
        g_autoptr(GPtrArray) gone = g_ptr_array_new_with_free_func(plock_unref_void);
        GHashTableIter it;
        gpointer k, v;

        pthread_mutex_lock(&i->plock_mutex);
        if (i->plocks) {
                g_hash_table_iter_init(&it, i->plocks);
                while (g_hash_table_iter_next(&it, &k, &v))
                        if (((PLock *)v)->fh == fh) {
                                g_hash_table_iter_steal(&it);
                                g_free(k);
                                g_ptr_array_add(gone, v);
                        }
        }
        pthread_mutex_unlock(&i->plock_mutex);
        for (guint n = 0; n < gone->len; n++)
                journal_plock_gone(i->nodeid, ((PLock *) gone->pdata[n])->owner);
}

void plock_drop_handle(Passthrough *p, Handle *h) {
        assert(atomic_load(&h->released));
        drop_through(h->inode, h->fh);
}

/* The entry of one lock owner on h's inode, with a reference for the caller; its OFD is opened on
 * first use with the access mode of the handle the owner locks through (or is fd, an OFD handed
 * over with its locks, taken over: closed when the owner has an entry already). -EBADF once h is
 * released: the check is under plock_mutex, which plock_drop_handle() takes after the release, so
 * no entry for a released handle survives it. */
static int plock_get(Passthrough *p, Handle *h, uint64_t owner, int fd, PLock **ret) {
        Inode *i = h->inode;
        PLock *l = NULL, *found = NULL;
        int r = 0, nfd;
        gpointer v;

        pthread_mutex_lock(&i->plock_mutex);
        if (atomic_load(&h->released))
                r = -EBADF;
        else if (i->plocks && g_hash_table_lookup_extended(i->plocks, &owner, NULL, &v)) {
                found = v;
                atomic_fetch_add_explicit(&found->refs, 1, memory_order_relaxed);
        }
        pthread_mutex_unlock(&i->plock_mutex);
        if (r < 0 || found) {
                fd_budget_close(&p->budget, fd);
                if (found)
                        *ret = found;
                return r;
        }

        nfd = fd >= 0 ? fd : open_inode(p, i, h->flags & O_ACCMODE);
        if (nfd < 0)
                return nfd;
        l = calloc(1, sizeof *l);
        if (!l) {
                fd_budget_close(&p->budget, nfd);
                return -ENOMEM;
        }
        *l = (PLock){ .fd = nfd, .fh = h->fh, .owner = owner, .nodeid = i->nodeid, .budget = &p->budget,
                      .ranges_total = &p->lock_ranges, .ranges_max = &p->lock_ranges_max };
        pthread_mutex_init(&l->set_lock, NULL);
        atomic_init(&l->refs, 2); /* the table's and the caller's */
        pthread_mutex_lock(&i->plock_mutex);
        if (!i->plocks)
                i->plocks = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, plock_unref_void);
        if (atomic_load(&h->released))
                r = -EBADF;
        else if (g_hash_table_lookup_extended(i->plocks, &owner, NULL, &v)) {
                found = v; /* another thread of the same owner won */
                atomic_fetch_add_explicit(&found->refs, 1, memory_order_relaxed);
        } else {
                uint64_t *k = g_new(uint64_t, 1);
                *k = owner;
                g_hash_table_insert(i->plocks, k, l);
                found = TAKE_PTR(l);
        }
        pthread_mutex_unlock(&i->plock_mutex);
        if (l) { /* not inserted: neither reference was given out */
                atomic_store(&l->refs, 1);
                plock_unref(l);
        }
        if (r < 0)
                return r;
        *ret = found;
        return 0;
}

static int flock_from_fs(struct flock *fl, const FsLock *lk) {
        if (lk->type != F_RDLCK && lk->type != F_WRLCK && lk->type != F_UNLCK)
                return -EINVAL;
        if (lk->start > INT64_MAX || lk->end < lk->start)
                return -EINVAL;
        *fl = (struct flock){ .l_type = (short)lk->type, .l_whence = SEEK_SET, .l_start = (off_t)lk->start };
        /* FUSE carries an inclusive end; OFFSET_MAX (or more) means "to the end of the file". */
        fl->l_len = lk->end >= (uint64_t)INT64_MAX ? 0 : (off_t)(lk->end - lk->start + 1);
        return 0;
}

int pt_getlk(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, FsLock *lk) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        _cleanup_(plock_unrefp) PLock *l = NULL;
        struct flock fl;
        int r;

        r = lock_handle(p, fh, nodeid, &h);
        if (r < 0)
                return r;
        r = flock_from_fs(&fl, lk);
        if (r < 0)
                return r;
        r = plock_get(p, h, owner, -1, &l);
        if (r < 0)
                return r;
        if (fcntl(l->fd, F_OFD_GETLK, &fl) < 0)
                return negative_errno();
        lk->type = (uint32_t)fl.l_type;
        if (fl.l_type != F_UNLCK) {
                lk->start = (uint64_t)fl.l_start;
                lk->end = fl.l_len == 0 ? (uint64_t)INT64_MAX : (uint64_t)(fl.l_start + fl.l_len - 1);
        }
        lk->pid = 0; /* OFD locks have no owning process to report */
        return 0;
}

/* One pause of a blocking lock wait. Waits poll with a growing pause instead of sleeping in
 * F_OFD_SETLKW/flock(): the guest can cancel them (INTERRUPT), which a thread stuck in the kernel
 * would not notice. The pause stays at most 20 ms so a freed lock is taken quickly. */
static int lock_wait_step(const FsCtx *c, long *delay_us) {
        struct timespec ts = { 0, *delay_us * 1000 };

        if (c->interrupted && atomic_load(c->interrupted))
                return -EINTR;
        nanosleep(&ts, NULL);
        *delay_us = MIN(*delay_us * 2, 20000L);
        if (c->interrupted && atomic_load(c->interrupted))
                return -EINTR;
        return 0;
}

/* One non-blocking attempt of l's owner to lock fl ([start, end] of type), recorded in its ranges
 * when the kernel grants it. The guest makes ranges (locking every other byte, or unlocking inside
 * a range, splits them) and vufsd keeps a copy of each: past LOCK_RANGES_MAX for the whole
 * passthrough, as many as a saved session may carry, a request that could add one answers ENOLCK,
 * as the kernel does when it cannot allocate a lock. An unlock of a whole file always goes
 * through: it only removes. */
static int plock_try(PLock *l, const struct flock *fl, uint64_t start, uint64_t end) {
        struct flock attempt = *fl;
        size_t before;
        int r;

        pthread_mutex_lock(&l->set_lock);
        before = l->ranges.n;
        if (!(fl->l_type == F_UNLCK && start == 0 && end == LOCK_SET_EOF) &&
            atomic_load(l->ranges_total) + 2 > *l->ranges_max)
                r = -ENOLCK;
        else
                r = lock_set_reserve(&l->ranges);
        if (r >= 0)
                r = fcntl(l->fd, F_OFD_SETLK, &attempt) < 0 ? negative_errno() : 0;
        if (r >= 0) {
                lock_set_apply(&l->ranges, start, end, fl->l_type);
                atomic_fetch_add(l->ranges_total, (int64_t) l->ranges.n - (int64_t) before);
                /* Under set_lock: the journal sees this owner's changes in the kernel's order. */
                journal_plock(l->nodeid, l->owner, l->fh, l->fd, l->ranges.r, l->ranges.n);
        }
        pthread_mutex_unlock(&l->set_lock);
        return r == -EACCES ? -EAGAIN : r;
}

/* One non-blocking flock() through h, recorded in h when granted. */
static int flock_try(Handle *h, int op, short type) {
        int r;

        pthread_mutex_lock(&h->flock_lock);
        r = flock(h->fd, op) < 0 ? negative_errno() : 0;
        if (r >= 0) {
                h->flock_type = type;
                journal_handle(h); /* under flock_lock: the journal sees the changes in order */
        }
        pthread_mutex_unlock(&h->flock_lock);
        return r;
}

/* The end of lk's range as the kernel keeps it (LOCK_SET_EOF: to the end). */
static uint64_t fs_lock_end(const FsLock *lk) {
        return lk->end >= LOCK_SET_EOF ? LOCK_SET_EOF : lk->end;
}

int plock_foreach(Inode *i, int (*fn)(uint64_t owner, uint64_t fh, int fd, const LockRange *r, size_t n, void *ud),
                  void *ud) {
        g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func(plock_unref_void);
        GHashTableIter it;
        gpointer v;
        int r = 0;

        pthread_mutex_lock(&i->plock_mutex);
        if (i->plocks) {
                g_hash_table_iter_init(&it, i->plocks);
                while (g_hash_table_iter_next(&it, NULL, &v)) {
                        atomic_fetch_add_explicit(&((PLock *) v)->refs, 1, memory_order_relaxed);
                        g_ptr_array_add(all, v);
                }
        }
        pthread_mutex_unlock(&i->plock_mutex);
        for (guint k = 0; k < all->len && r >= 0; k++) {
                PLock *l = all->pdata[k];
                pthread_mutex_lock(&l->set_lock);
                r = fn(l->owner, l->fh, l->fd, l->ranges.r, l->ranges.n, ud);
                pthread_mutex_unlock(&l->set_lock);
        }
        return r;
}

short handle_flock_type(Handle *h) {
        return atomic_load(&h->flock_type);
}

int plock_restore(Passthrough *p, Handle *h, uint64_t owner, int fd, uint64_t start, uint64_t end, short type) {
        FsLock lk = { .start = start, .end = end, .type = (uint32_t) type };
        _cleanup_(plock_unrefp) PLock *l = NULL;
        struct flock fl;
        int r;

        r = flock_from_fs(&fl, &lk);
        if (r < 0) {
                fd_budget_close(&p->budget, fd);
                return r;
        }
        r = plock_get(p, h, owner, fd, &l);
        if (r < 0)
                return r;
        return plock_try(l, &fl, start, fs_lock_end(&lk));
}

int flock_restore(Handle *h, short type) {
        return flock_try(h, (type == F_RDLCK ? LOCK_SH : LOCK_EX) | LOCK_NB, type);
}

int pt_setlk(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, const FsLock *lk, bool is_flock,
             bool wait) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        struct flock fl;
        long delay_us = 1000;
        int r;

        r = lock_handle(p, fh, nodeid, &h);
        if (r < 0)
                return r;
        if (is_flock) {
                int op;

                if (lk->type == F_RDLCK)
                        op = LOCK_SH | LOCK_NB;
                else if (lk->type == F_WRLCK)
                        op = LOCK_EX | LOCK_NB;
                else if (lk->type == F_UNLCK)
                        op = LOCK_UN;
                else
                        return -EINVAL;
                /* flock() belongs to the open file, which is the guest's fh. */
                for (;;) {
                        /* A wait through a handle the guest released is answered, not kept. */
                        if (atomic_load(&h->released))
                                return -EBADF;
                        r = flock_try(h, op, (short) lk->type);
                        if (r >= 0)
                                return 0;
                        if (r != -EWOULDBLOCK || !wait)
                                return r;
                        r = lock_wait_step(c, &delay_us);
                        if (r < 0)
                                return r;
                }
        }
        r = flock_from_fs(&fl, lk);
        if (r < 0)
                return r;
        for (;;) {
                PLock *l = NULL;

                /* The owner's entry afresh for every attempt: FLUSH of this owner on another queue
                 * may drop it meanwhile (its POSIX locks go, its wait goes on with a new one), and
                 * RELEASE of h ends the wait (EBADF). The reference keeps the fd open during the
                 * attempt, so its number never names another file. */
                r = plock_get(p, h, owner, -1, &l);
                if (r < 0)
                        return r;
                r = plock_try(l, &fl, lk->start, fs_lock_end(lk));
                plock_unref(l);
                if (r == 0)
                        return 0;
                if (r != -EAGAIN || !wait)
                        return r;
                r = lock_wait_step(c, &delay_us);
                if (r < 0)
                        return r;
        }
}
