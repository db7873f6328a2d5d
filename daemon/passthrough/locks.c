/* locks.c: POSIX locks as one OFD per guest lock owner, flock per handle, blocking waits. */
#include "locks.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

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
        /* Ranges the guest holds that a migration's load could not take again yet (pending,
         * disjoint from ranges): retried by pending_retry() until taken or lost; under set_lock. */
        LockSet pending;
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
        lock_set_done(&l->pending);
        pthread_mutex_destroy(&l->set_lock);
        free(l);
}

static size_t pending_retry(Passthrough *p, Inode *only);
static uint64_t fs_lock_end(const FsLock *lk);
static bool plock_has_pending(Inode *i, uint64_t owner);
static int lock_wait_step(const FsCtx *c, long *delay_us);
static bool pending_posix_conflict(Passthrough *p, Inode *i, uint64_t owner, uint64_t start, uint64_t end, short type,
                                   LockRange *ret);
static bool pending_flock_conflict(Passthrough *p, Handle *h, short type);

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

/* l's locks end now, before its fd closes: with --crash-restarts the keeper holds a duplicate of the
 * OFD (session-journal.h) until it has handled the removal, and a close would leave them held
 * meanwhile (another owner's lock right after this one's FLUSH or RELEASE would conflict). */
static void plock_end(PLock *l) {
        struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET };

        if (!journal_active())
                return;
        pthread_mutex_lock(&l->set_lock);
        (void) fcntl(l->fd, F_OFD_SETLK, &fl);
        pthread_mutex_unlock(&l->set_lock);
}

void plock_drop_owner(Passthrough *p, Inode *i, uint64_t owner) {
        gpointer k = NULL, v = NULL;

        pthread_mutex_lock(&i->plock_mutex);
        if (!i->plocks || !g_hash_table_steal_extended(i->plocks, &owner, &k, &v))
                k = v = NULL;
        pthread_mutex_unlock(&i->plock_mutex);
        if (v) {
                plock_end(v);
                journal_plock_gone(i->nodeid, owner);
        }
        /* Outside the lock: the fd closes (and its locks go) now, or when the last request still
         * using it is done. */
        g_free(k);
        plock_unref(v);
}

/* Drops every lock owner's entry on i taken through fh. The entries are gathered under the lock
 * and ended outside it, a few at a time: into a plain array on the stack (GLib's slice allocator,
 * behind a GPtrArray, hands memory between threads out of the thread sanitizer's sight). */
static void drop_through(Inode *i, uint64_t fh) {
        for (;;) {
                PLock *gone[16];
                size_t n = 0;
                GHashTableIter it;
                gpointer k, v;

                pthread_mutex_lock(&i->plock_mutex);
                if (i->plocks) {
                        g_hash_table_iter_init(&it, i->plocks);
                        while (n < ELEMENTSOF(gone) && g_hash_table_iter_next(&it, &k, &v))
                                if (((PLock *) v)->fh == fh) {
                                        g_hash_table_iter_steal(&it);
                                        g_free(k);
                                        gone[n++] = v;
                                }
                }
                pthread_mutex_unlock(&i->plock_mutex);
                for (size_t j = 0; j < n; j++) {
                        plock_end(gone[j]);
                        journal_plock_gone(i->nodeid, gone[j]->owner);
                        plock_unref(gone[j]);
                }
                if (n < ELEMENTSOF(gone))
                        return;
        }
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
        LockRange pr;
        long delay_us = 1000;
        int r;

        r = lock_handle(p, fh, nodeid, &h);
        if (r < 0)
                return r;
        r = flock_from_fs(&fl, lk);
        if (r < 0)
                return r;
        /* The owner's own pending ranges: the kernel would report them as another's (the source
         * vufsd still holds them), the guest knows them as its own; answered once they are taken
         * (or lost: EBADF), as its SETLK is (own_pending()). */
        while (pending_retry(p, h->inode) > 0 && plock_has_pending(h->inode, owner)) {
                r = lock_wait_step(c, &delay_us);
                if (r < 0)
                        return r;
        }
        if (atomic_load(&h->lock_lost))
                return -EBADF;
        /* Another owner's pending range is the guest's lock as far as the guest knows: reported as
         * held, whatever the host holds there now. */
        if (pending_posix_conflict(p, h->inode, owner, lk->start, fs_lock_end(lk), fl.l_type, &pr)) {
                *lk = (FsLock) { .start = pr.start, .end = pr.end, .type = (uint32_t) pr.type, .pid = 0 };
                return 0;
        }
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
static int plock_try_locked(PLock *l, const struct flock *fl, uint64_t start, uint64_t end) {
        struct flock attempt = *fl;
        size_t before;
        int r;

        before = l->ranges.n;
        if (!(fl->l_type == F_UNLCK && start == 0 && end == LOCK_SET_EOF) &&
            atomic_load(l->ranges_total) + 2 > *l->ranges_max)
                r = -ENOLCK;
        else
                r = lock_set_reserve(&l->ranges);
        /* An unlock by the owner drops what it covers of its pending ranges too (they are the
         * guest's as much as the granted ones): room for the split first. */
        if (r >= 0 && fl->l_type == F_UNLCK && l->pending.n > 0)
                r = lock_set_reserve(&l->pending);
        if (r >= 0)
                r = fcntl(l->fd, F_OFD_SETLK, &attempt) < 0 ? negative_errno() : 0;
        if (r >= 0) {
                lock_set_apply(&l->ranges, start, end, fl->l_type);
                atomic_fetch_add(l->ranges_total, (int64_t) l->ranges.n - (int64_t) before);
                /* Under set_lock: the journal sees this owner's changes in the kernel's order. */
                journal_plock(l->nodeid, l->owner, l->fh, l->fd, l->ranges.r, l->ranges.n);
                if (fl->l_type == F_UNLCK && l->pending.n > 0)
                        lock_set_apply(&l->pending, start, end, F_UNLCK);
        }
        return r == -EACCES ? -EAGAIN : r;
}

static int plock_try(PLock *l, const struct flock *fl, uint64_t start, uint64_t end) {
        int r;

        pthread_mutex_lock(&l->set_lock);
        r = plock_try_locked(l, fl, start, end);
        pthread_mutex_unlock(&l->set_lock);
        return r;
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

/* ---- pending locks ----
 *
 * A migration's destination takes the guest's locks again while the source vufsd may still hold
 * them (QEMU loads the destination before the source's session ends), or another process on this
 * host holds a conflicting one. Such a lock is pending: the load succeeds, the guest holds the lock
 * as far as it can tell, and vufsd takes it as soon as it is free (the serving loop retries every
 * 10 ms, and every lock request on the node retries first) until the deadline; then it is lost and
 * the open file the guest took it through answers EBADF, as --migration-on-error=guest-error does
 * for a lock it could not take. Meanwhile no other guest lock owner is answered as if it were free:
 * GETLK reports it, SETLK conflicts with it. */

typedef struct PendingLock {
        Handle *h;      /* the handle the guest took it through; a reference */
        uint64_t owner; /* POSIX: its owner (its PLock on h's inode holds the pending ranges) */
        bool flock;     /* flock: h->flock_pending */
} PendingLock;

static void pending_free(gpointer x) {
        PendingLock *pl = x;
        handle_unref(pl->h);
        free(pl);
}

static uint64_t now_usec(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t) t.tv_sec * 1000000 + (uint64_t) t.tv_nsec / 1000;
}

int locks_pending_init(Passthrough *p) {
        /* The list's lock: the serving loop's retries, each lock request's retries of its node and a
         * migration's load (transfer thread) change the list. */
        pthread_mutex_init(&p->pending_lock, NULL);
        p->pending = g_ptr_array_new_with_free_func(pending_free);
        p->pending_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        return p->pending_efd < 0 ? negative_errno() : 0;
}

void locks_pending_done(Passthrough *p) {
        if (p->pending)
                g_ptr_array_unref(p->pending);
        p->pending = NULL;
        p->pending_efd = safe_close(p->pending_efd);
        pthread_mutex_destroy(&p->pending_lock);
}

void locks_pending_begin(Passthrough *p, uint64_t timeout_usec) {
        pthread_mutex_lock(&p->pending_lock);
        p->pending_deadline = now_usec() + timeout_usec;
        pthread_mutex_unlock(&p->pending_lock);
}

int passthrough_locks_pending_fd(Passthrough *p) {
        return p->pending_efd;
}

void passthrough_lock_counts(Passthrough *p, uint64_t *pending, uint64_t *lost) {
        *pending = atomic_load(&p->pending_n);
        *lost = atomic_load(&p->locks_lost_total);
}

/* Registers h's pending flock, or owner's pending ranges through h (once per pair), and wakes the
 * serving loop. */
static int pending_add(Passthrough *p, Handle *h, uint64_t owner, bool flock) {
        GPtrArray *a = p->pending;
        PendingLock *pl;
        uint64_t one = 1;

        pthread_mutex_lock(&p->pending_lock);
        for (guint k = 0; k < a->len; k++) {
                pl = a->pdata[k];
                if (pl->h == h && pl->flock == flock && (flock || pl->owner == owner)) {
                        pthread_mutex_unlock(&p->pending_lock);
                        return 0;
                }
        }
        pl = calloc(1, sizeof *pl);
        if (!pl) {
                pthread_mutex_unlock(&p->pending_lock);
                return -ENOMEM;
        }
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed); /* the caller holds one */
        *pl = (PendingLock) { .h = h, .owner = owner, .flock = flock };
        g_ptr_array_add(a, pl);
        atomic_store(&p->pending_n, a->len);
        pthread_mutex_unlock(&p->pending_lock);
        atomic_fetch_add(&p->locks_pending_total, 1);
        (void) !write(p->pending_efd, &one, sizeof one);
        return 0;
}

/* owner's entry on i, with a reference, or NULL: never creates one. */
static PLock *plock_find(Inode *i, uint64_t owner) {
        PLock *l = NULL;
        gpointer v;

        pthread_mutex_lock(&i->plock_mutex);
        if (i->plocks && g_hash_table_lookup_extended(i->plocks, &owner, NULL, &v)) {
                l = v;
                atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
        }
        pthread_mutex_unlock(&i->plock_mutex);
        return l;
}

static void pending_lost(Passthrough *p, const PendingLock *pl, const char *what) {
        atomic_fetch_add(&p->locks_lost_total, 1);
        atomic_store(&pl->h->lock_lost, true);
        log_error("Migration: the guest's %s through handle %" PRIu64 " on node %" PRIu64 " is still held by another "
                  "open file on this host after --migration-lock-timeout: the lock is lost, and that open file answers "
                  "EBADF from now on",
                  what, pl->h->fh, pl->h->inode->nodeid);
}

/* One attempt at pl; true when it is settled (taken, given up by the guest, gone with its handle
 * or owner, or lost past the deadline). Under p->pending_lock. */
static bool pending_try(Passthrough *p, PendingLock *pl, bool past_deadline) {
        _cleanup_(plock_unrefp) PLock *l = NULL;
        Handle *h = pl->h;
        bool done;

        if (atomic_load(&h->released))
                return true;
        if (pl->flock) {
                short t;

                pthread_mutex_lock(&h->flock_lock);
                t = atomic_load(&h->flock_pending);
                done = t == F_UNLCK || flock(h->fd, (t == F_RDLCK ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0;
                if (t != F_UNLCK && done)
                        h->flock_type = t;
                if (done || past_deadline)
                        h->flock_pending = F_UNLCK;
                pthread_mutex_unlock(&h->flock_lock);
                if (!done && past_deadline)
                        pending_lost(p, pl, t == F_RDLCK ? "shared flock" : "exclusive flock");
                return done || past_deadline;
        }
        l = plock_find(h->inode, pl->owner);
        if (!l || l->fh != h->fh)
                return true; /* the owner's locks went (FLUSH, RELEASE): its pending ranges with them */
        pthread_mutex_lock(&l->set_lock);
        for (size_t k = 0; k < l->pending.n;) {
                LockRange x = l->pending.r[k];
                FsLock lk = { .start = x.start, .end = x.end, .type = (uint32_t) x.type };
                struct flock fl;

                if (flock_from_fs(&fl, &lk) >= 0 && plock_try_locked(l, &fl, x.start, x.end) >= 0)
                        lock_set_apply(&l->pending, x.start, x.end, F_UNLCK); /* a whole range: no split */
                else
                        k++;
        }
        done = l->pending.n == 0;
        if (!done && past_deadline)
                lock_set_apply(&l->pending, 0, LOCK_SET_EOF, F_UNLCK);
        pthread_mutex_unlock(&l->set_lock);
        if (!done && past_deadline) {
                /* All or none, as a lock the load could not take in guest-error mode: the owner's
                 * granted ranges on the node go too. */
                plock_drop_owner(p, h->inode, pl->owner);
                pending_lost(p, pl, "POSIX lock");
        }
        return done || past_deadline;
}

/* Retries the pending locks (only those on node `only` unless NULL); how many are still pending. */
static size_t pending_retry(Passthrough *p, Inode *only) {
        GPtrArray *a = p->pending;
        bool past;
        size_t n;

        if (atomic_load(&p->pending_n) == 0)
                return 0;
        pthread_mutex_lock(&p->pending_lock);
        past = now_usec() >= p->pending_deadline;
        for (guint k = 0; k < a->len;) {
                PendingLock *pl = a->pdata[k];
                if ((!only || pl->h->inode == only) && pending_try(p, pl, past))
                        g_ptr_array_remove_index_fast(a, k);
                else
                        k++;
        }
        n = a->len;
        atomic_store(&p->pending_n, n);
        pthread_mutex_unlock(&p->pending_lock);
        return n;
}

size_t passthrough_locks_retry(Passthrough *p) {
        return pending_retry(p, NULL);
}

static bool ranges_conflict(const LockRange *x, uint64_t start, uint64_t end, short type) {
        return x->start <= end && start <= x->end && (x->type == F_WRLCK || type == F_WRLCK);
}

/* Whether another owner than owner has a pending range on i that conflicts with [start, end] of
 * type (the first in *ret). */
static bool pending_posix_conflict(Passthrough *p, Inode *i, uint64_t owner, uint64_t start, uint64_t end, short type,
                                   LockRange *ret) {
        g_autoptr(GPtrArray) all = NULL;
        GHashTableIter it;
        gpointer v;
        bool found = false;

        if (atomic_load(&p->pending_n) == 0)
                return false;
        all = g_ptr_array_new_with_free_func(plock_unref_void);
        pthread_mutex_lock(&i->plock_mutex);
        if (i->plocks) {
                g_hash_table_iter_init(&it, i->plocks);
                while (g_hash_table_iter_next(&it, NULL, &v))
                        if (((PLock *) v)->owner != owner) {
                                atomic_fetch_add_explicit(&((PLock *) v)->refs, 1, memory_order_relaxed);
                                g_ptr_array_add(all, v);
                        }
        }
        pthread_mutex_unlock(&i->plock_mutex);
        for (guint k = 0; k < all->len && !found; k++) {
                PLock *l = all->pdata[k];
                pthread_mutex_lock(&l->set_lock);
                for (size_t j = 0; j < l->pending.n && !found; j++)
                        if (ranges_conflict(&l->pending.r[j], start, end, type)) {
                                *ret = l->pending.r[j];
                                found = true;
                        }
                pthread_mutex_unlock(&l->set_lock);
        }
        return found;
}

/* Whether another open file of h's node has a pending flock that conflicts with type. */
static bool pending_flock_conflict(Passthrough *p, Handle *h, short type) {
        GPtrArray *a = p->pending;
        bool found = false;

        if (atomic_load(&p->pending_n) == 0)
                return false;
        pthread_mutex_lock(&p->pending_lock);
        for (guint k = 0; k < a->len && !found; k++) {
                PendingLock *pl = a->pdata[k];
                short t;
                if (!pl->flock || pl->h == h || pl->h->inode != h->inode)
                        continue;
                t = atomic_load(&pl->h->flock_pending);
                found = t != F_UNLCK && (t == F_WRLCK || type == F_WRLCK);
        }
        pthread_mutex_unlock(&p->pending_lock);
        return found;
}

/* Whether owner still has pending ranges on i. */
static bool plock_has_pending(Inode *i, uint64_t owner) {
        _cleanup_(plock_unrefp) PLock *l = plock_find(i, owner);
        bool r = false;

        if (l) {
                pthread_mutex_lock(&l->set_lock);
                r = l->pending.n > 0;
                pthread_mutex_unlock(&l->set_lock);
        }
        return r;
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
                /* Pending ranges are the guest's too: a session saved meanwhile carries them (the
                 * OFD with the first record of the owner, whichever set it is in). */
                if (r >= 0 && l->pending.n > 0)
                        r = fn(l->owner, l->fh, l->ranges.n > 0 ? -1 : l->fd, l->pending.r, l->pending.n, ud);
                pthread_mutex_unlock(&l->set_lock);
        }
        return r;
}

short handle_flock_type(Handle *h) {
        short pending = atomic_load(&h->flock_pending);

        /* A pending flock is the guest's as far as it knows: saved as held. */
        return pending != F_UNLCK ? pending : atomic_load(&h->flock_type);
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
        r = plock_try(l, &fl, start, fs_lock_end(&lk));
        if (r != -EAGAIN)
                return r;
        /* Held elsewhere on this host (the source vufsd, until its session ends): pending. */
        pthread_mutex_lock(&l->set_lock);
        r = lock_set_reserve(&l->pending);
        if (r >= 0)
                lock_set_apply(&l->pending, start, fs_lock_end(&lk), type);
        pthread_mutex_unlock(&l->set_lock);
        if (r >= 0)
                r = pending_add(p, h, owner, false);
        return r < 0 ? r : 1;
}

int flock_restore(Passthrough *p, Handle *h, short type) {
        int r = flock_try(h, (type == F_RDLCK ? LOCK_SH : LOCK_EX) | LOCK_NB, type);

        if (r != -EWOULDBLOCK)
                return r;
        atomic_store(&h->flock_pending, type); /* the rings are stopped: no request races this */
        r = pending_add(p, h, 0, true);
        return r < 0 ? r : 1;
}

/* Whether the guest's request must wait for a pending lock to settle first: a lock (not an unlock)
 * by the owner of pending ranges on the node, or through the open file of a pending flock. The
 * guest believes it holds those; its new request changes them, and the kernel must hold them for
 * the outcome to be what the guest expects. The wait is bounded by the deadline (then the lock is
 * lost and the request answers EBADF). */
static bool own_pending(Handle *h, uint64_t owner, const FsLock *lk, bool is_flock) {
        if (lk->type == F_UNLCK)
                return false;
        if (is_flock)
                return atomic_load(&h->flock_pending) != F_UNLCK;
        return plock_has_pending(h->inode, owner);
}

int pt_setlk(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, const FsLock *lk, bool is_flock,
             bool wait) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        struct flock fl;
        LockRange pr;
        long delay_us = 1000;
        int r;

        r = lock_handle(p, fh, nodeid, &h);
        if (r < 0)
                return r;
        /* Pending locks of this node first: a lock request neither overtakes them nor waits on
         * them longer than it must. */
        while (pending_retry(p, h->inode) > 0 && own_pending(h, owner, lk, is_flock)) {
                r = lock_wait_step(c, &delay_us);
                if (r < 0)
                        return r;
        }
        if (atomic_load(&h->lock_lost))
                return -EBADF;
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
                if (lk->type == F_UNLCK) { /* the guest gives up its pending flock too */
                        pthread_mutex_lock(&h->flock_lock);
                        h->flock_pending = F_UNLCK;
                        pthread_mutex_unlock(&h->flock_lock);
                }
                /* flock() belongs to the open file, which is the guest's fh. */
                for (;;) {
                        /* A wait through a handle the guest released is answered, not kept. */
                        if (atomic_load(&h->released))
                                return -EBADF;
                        /* Another open file's pending flock is the guest's: it conflicts. */
                        if (lk->type != F_UNLCK && pending_flock_conflict(p, h, (short) lk->type))
                                r = -EWOULDBLOCK;
                        else
                                r = flock_try(h, op, (short) lk->type);
                        if (r >= 0)
                                return 0;
                        if (r != -EWOULDBLOCK || !wait)
                                return r;
                        r = lock_wait_step(c, &delay_us);
                        if (r < 0)
                                return r;
                        pending_retry(p, h->inode);
                }
        }
        r = flock_from_fs(&fl, lk);
        if (r < 0)
                return r;
        for (;;) {
                PLock *l = NULL;

                /* Another owner's pending range is the guest's lock: it conflicts as a granted one. */
                if (lk->type != F_UNLCK &&
                    pending_posix_conflict(p, h->inode, owner, lk->start, fs_lock_end(lk), fl.l_type, &pr))
                        r = -EAGAIN;
                else {
                        /* The owner's entry afresh for every attempt: FLUSH of this owner on another
                         * queue may drop it meanwhile (its POSIX locks go, its wait goes on with a new
                         * one), and RELEASE of h ends the wait (EBADF). The reference keeps the fd
                         * open during the attempt, so its number never names another file. */
                        r = plock_get(p, h, owner, -1, &l);
                        if (r < 0)
                                return r;
                        r = plock_try(l, &fl, lk->start, fs_lock_end(lk));
                        plock_unref(l);
                }
                if (r == 0)
                        return 0;
                if (r != -EAGAIN || !wait)
                        return r;
                r = lock_wait_step(c, &delay_us);
                if (r < 0)
                        return r;
                pending_retry(p, h->inode);
        }
}
