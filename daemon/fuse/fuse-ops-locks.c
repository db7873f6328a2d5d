/* fuse-ops-locks.c: the lock opcodes (getlk, setlk, setlkw), the waiters of blocking locks and INTERRUPT. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>

#include "fuse-internal.h"
#include "log.h"

/* Interrupts every blocking wait, running or announced and not yet started. */
void interrupt_all_waits(FuseServer *s) {
        GHashTableIter it;
        gpointer k, v;

        pthread_mutex_lock(&s->waiters_lock);
        g_hash_table_iter_init(&it, s->waiters);
        while (g_hash_table_iter_next(&it, &k, &v))
                atomic_store(&((Waiter *) v)->interrupted, true);
        g_hash_table_iter_init(&it, s->queued);
        while (g_hash_table_iter_next(&it, &k, &v))
                ((QueuedWait *) v)->interrupted = true;
        pthread_mutex_unlock(&s->waiters_lock);
}

/* Under waiters_lock: ends one announcement of unique (fuse_server_lock_wait_queued()); whether an
 * INTERRUPT came for it meanwhile. */
bool queued_wait_end_locked(FuseServer *s, uint64_t unique) {
        QueuedWait *q = g_hash_table_lookup(s->queued, &unique);
        bool interrupted;

        if (!q)
                return false;
        interrupted = q->interrupted;
        if (--q->count == 0)
                g_hash_table_remove(s->queued, &unique); /* frees q */
        return interrupted;
}

void fuse_server_lock_wait_queued(FuseServer *s, const struct fuse_in_header *h) {
        QueuedWait *q;

        if (h->opcode != FUSE_SETLKW)
                return;
        pthread_mutex_lock(&s->waiters_lock);
        q = g_hash_table_lookup(s->queued, &h->unique);
        if (!q) {
                q = calloc(1, sizeof *q);
                if (q) {
                        q->unique = h->unique;
                        g_hash_table_insert(s->queued, &q->unique, q);
                }
        }
        if (q)
                q->count++; /* without memory it goes unannounced: an early INTERRUPT is lost, as before */
        pthread_mutex_unlock(&s->waiters_lock);
}

unsigned fuse_server_lock_waiters(FuseServer *s) {
        unsigned n;

        pthread_mutex_lock(&s->waiters_lock);
        n = g_hash_table_size(s->waiters);
        pthread_mutex_unlock(&s->waiters_lock);
        return n;
}

void fuse_server_cancel_waits(FuseServer *s) {
        interrupt_all_waits(s);
}

static bool locks_enabled(Req *r, const struct fuse_lk_in *l) {
        if (l->lk_flags & FUSE_LK_FLOCK)
                return r->s->opts.flock && negotiated(r, FUSE_FLOCK_LOCKS);
        return r->s->opts.posix_lock && negotiated(r, FUSE_POSIX_LOCKS);
}

int do_getlk(Req *r) {
        const struct fuse_lk_in *l = ARG(r, struct fuse_lk_in);
        struct fuse_lk_out o = { 0 };
        FsLock lk = { l->lk.start, l->lk.end, l->lk.type, l->lk.pid };
        int k;

        if (!locks_enabled(r, l))
                return -ENOSYS;
        k = r->s->ops->getlk(r->s->fs, &r->ctx, r->in.nodeid, l->fh, l->owner, &lk);
        if (k < 0)
                return k;
        o.lk = (struct fuse_file_lock) { .start = lk.start, .end = lk.end, .type = lk.type, .pid = lk.pid };
        return reply_data(r, &o, sizeof o);
}

static int setlk_common(Req *r, bool wait) {
        const struct fuse_lk_in *l = ARG(r, struct fuse_lk_in);
        FsLock lk = { l->lk.start, l->lk.end, l->lk.type, l->lk.pid };
        FuseServer *s = r->s;
        Waiter w = { .unique = r->in.unique };
        bool early = false;
        int k;

        if (!locks_enabled(r, l))
                return -ENOSYS;
        if (!wait || lk.type == F_UNLCK)
                return s->ops->setlk(s->fs, &r->ctx, r->in.nodeid, l->fh, l->owner, &lk,
                                     (l->lk_flags & FUSE_LK_FLOCK) != 0, false);
        if (!r->may_wait) {
                /* No thread of its own could be had (the executor could not create a helper): one
                 * attempt, and "no lock available" rather than holding up a queue or the pool for as
                 * long as another owner keeps the lock. */
                k = s->ops->setlk(s->fs, &r->ctx, r->in.nodeid, l->fh, l->owner, &lk,
                                  (l->lk_flags & FUSE_LK_FLOCK) != 0, false);
                if (k == -EAGAIN) {
                        log_guest("FUSE SETLKW: no thread to wait on, answering ENOLCK");
                        k = -ENOLCK;
                }
                return k;
        }

        /* A blocking lock: registered so INTERRUPT (or a session reset) can cancel it. The table's
         * key and value both live in this frame, so they must be this request's alone: a second
         * blocking request with a unique already waiting (the guest's protocol forbids it) is
         * refused, never put in the first one's place. Replacing the value would leave the first
         * waiter out of reach of INTERRUPT and cancel, and the key pointing into whichever frame
         * returns first. */
        pthread_mutex_lock(&s->waiters_lock);
        /* Queued until now: an INTERRUPT that came meanwhile is answered here. */
        if (r->announced) {
                r->announced = false;
                early = queued_wait_end_locked(s, w.unique);
        }
        if (early)
                k = -EINTR;
        else if (g_hash_table_contains(s->waiters, &w.unique))
                k = -EINVAL;
        else {
                g_hash_table_insert(s->waiters, &w.unique, &w);
                k = 0;
        }
        pthread_mutex_unlock(&s->waiters_lock);
        if (k == -EINVAL)
                log_guest("FUSE SETLKW: unique %" PRIu64 " is already waiting", w.unique);
        if (k < 0)
                return k;
        r->ctx.interrupted = &w.interrupted;
        k = s->ops->setlk(s->fs, &r->ctx, r->in.nodeid, l->fh, l->owner, &lk, (l->lk_flags & FUSE_LK_FLOCK) != 0,
                          true);
        pthread_mutex_lock(&s->waiters_lock);
        assert(g_hash_table_lookup(s->waiters, &w.unique) == &w);
        g_hash_table_remove(s->waiters, &w.unique);
        pthread_mutex_unlock(&s->waiters_lock);
        r->ctx.interrupted = NULL;
        return k;
}

int do_setlk(Req *r) {
        return setlk_common(r, false);
}

int do_setlkw(Req *r) {
        return setlk_common(r, true);
}

int do_interrupt(Req *r) {
        uint64_t target = ARG(r, struct fuse_interrupt_in)->unique;
        FuseServer *s = r->s;
        QueuedWait *q;
        Waiter *w;

        pthread_mutex_lock(&s->waiters_lock);
        w = g_hash_table_lookup(s->waiters, &target);
        if (w)
                atomic_store(&w->interrupted, true);
        else if ((q = g_hash_table_lookup(s->queued, &target)))
                q->interrupted = true; /* not started yet: it answers EINTR when it does */
        pthread_mutex_unlock(&s->waiters_lock);
        return 0;
}
