/* inode-fd-cache.c: the clock over the nodes that hold an O_PATH fd (--max-inode-fds). */
#include "inode-fd-cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "inode-map.h"
#include "util.h"

int fd_cache_init(FdCache *c, FdBudget *budget, unsigned cap) {
        memset(c, 0, sizeof *c);
        if (cap == 0)
                cap = (unsigned) MIN(MAX(budget->max / 4, (uint64_t) 1), (uint64_t) INODE_FDS_DEFAULT_CAP);
        pthread_mutex_init(&c->lock, NULL);
        c->budget = budget;
        c->cap = cap;
        c->ready = true;
        return 0;
}

void fd_cache_done(FdCache *c) {
        if (!c->ready)
                return;
        /* No request runs and every node is gone (inode_map_free() frees them first). */
        free(c->slot);
        free(c->free_slots);
        pthread_mutex_destroy(&c->lock);
        c->ready = false;
}

/* Under lock: room for one more slot (doubling, at most cap); false when out of memory. */
static bool grow_locked(FdCache *c) {
        unsigned n = MIN(MAX(c->allocated * 2, 64u), c->cap);
        Inode **s;
        unsigned *f;

        if (c->used_slots < c->allocated)
                return true;
        s = realloc(c->slot, n * sizeof *s);
        if (!s)
                return false;
        c->slot = s;
        f = realloc(c->free_slots, n * sizeof *f);
        if (!f)
                return false;
        c->free_slots = f;
        c->allocated = n;
        return true;
}

unsigned fd_cache_cap(FdCache *c) {
        return c->cap;
}

unsigned fd_cache_used(FdCache *c) {
        unsigned n;

        pthread_mutex_lock(&c->lock); /* the counts are the lock's */
        n = c->used_slots - c->n_free;
        pthread_mutex_unlock(&c->lock);
        return n;
}

/* Under lock: a free slot's index, or one the clock frees by taking a node's fd (returned in
 * *victim_fd for the caller to close after unlocking): the hand passes nodes in use and, once,
 * nodes used since it last came by (clearing their bit). -1 when two turns found only fds in use. */
static int reserve_locked(FdCache *c, int *victim_fd) {
        *victim_fd = -1;
        if (c->n_free > 0)
                return (int) c->free_slots[--c->n_free];
        if (c->used_slots < c->cap && grow_locked(c)) {
                c->slot[c->used_slots] = NULL;
                return (int) c->used_slots++;
        }
        for (unsigned step = 0; c->used_slots > 0 && step < 2 * c->used_slots + 1; step++) {
                unsigned k = c->hand;
                Inode *v = c->slot[k];
                uint64_t w;

                c->hand = (k + 1) % c->used_slots;
                if (!v) /* reserved by an installer right now */
                        continue;
                w = atomic_load_explicit(&v->fdword, memory_order_relaxed);
                if (w & FDW_USERS)
                        continue;
                if (w & FDW_REF) {
                        /* A second chance; a request taking the fd meanwhile sets it again. */
                        atomic_fetch_and_explicit(&v->fdword, ~FDW_REF, memory_order_relaxed);
                        continue;
                }
                /* Only a word with no users becomes 0: a request that took the fd since we looked
                 * makes this fail, and the hand moves on. Acquire: the users' release orders their
                 * last use before our close. */
                if (!atomic_compare_exchange_strong_explicit(&v->fdword, &w, 0, memory_order_acquire,
                                                             memory_order_relaxed))
                        continue;
                *victim_fd = fdw_fd(w);
                v->slot = -1;
                c->slot[k] = NULL;
                atomic_fetch_add_explicit(&c->evictions, 1, memory_order_relaxed);
                return (int) k;
        }
        return -1;
}

static void put_locked(FdCache *c, Inode *i, int k) {
        c->slot[k] = i;
        i->slot = k;
}

static void free_slot_locked(FdCache *c, Inode *i) {
        if (i->slot < 0)
                return;
        c->slot[i->slot] = NULL;
        c->free_slots[c->n_free++] = (unsigned) i->slot;
        i->slot = -1;
}

/* Under lock: the fd i holds now (if any; i outside the clock) into the clock, another node's
 * fd taken to make room (*victim), or i's own given back (*own) when every fd in the clock is in
 * use and nobody uses i's: it re-opens by name when needed. Both for the caller to close. */
static void enlist_locked(FdCache *c, Inode *i, int *victim, int *own) {
        uint64_t w = atomic_load_explicit(&i->fdword, memory_order_relaxed);
        int k;

        *victim = *own = -1;
        if (i->keep_fd || i->slot >= 0 || !(w & FDW_FD_MASK))
                return;
        k = reserve_locked(c, victim);
        if (k >= 0)
                put_locked(c, i, k);
        else if (!(w & FDW_USERS) && atomic_compare_exchange_strong_explicit(&i->fdword, &w, 0, memory_order_acquire,
                                                                             memory_order_relaxed))
                *own = fdw_fd(w);
}

void fd_cache_enlist(FdCache *c, Inode *i) {
        int victim, own;

        pthread_mutex_lock(&c->lock);
        enlist_locked(c, i, &victim, &own);
        pthread_mutex_unlock(&c->lock);
        fd_budget_close(c->budget, victim);
        fd_budget_close(c->budget, own);
}

void fd_cache_named(FdCache *c, Inode *i) {
        int victim, own;

        pthread_mutex_lock(&c->lock);
        i->keep_fd = false;
        enlist_locked(c, i, &victim, &own);
        pthread_mutex_unlock(&c->lock);
        fd_budget_close(c->budget, victim);
        fd_budget_close(c->budget, own);
}

int fd_cache_install(FdCache *c, Inode *i, int fd, bool *ret_cached) {
        int victim = -1, k = -1, theirs;
        uint64_t w = 0;

        pthread_mutex_lock(&c->lock);
        if (!i->keep_fd) {
                k = reserve_locked(c, &victim);
                if (k < 0) {
                        pthread_mutex_unlock(&c->lock);
                        *ret_cached = false;
                        return fd;
                }
        }
        /* Under the lock so that the slot and the word agree for the clock. Release: the fd's
         * checks happen before another request uses it. */
        if (atomic_compare_exchange_strong_explicit(&i->fdword, &w, fdw_make(fd, 1), memory_order_release,
                                                    memory_order_relaxed)) {
                if (k >= 0)
                        put_locked(c, i, k);
                pthread_mutex_unlock(&c->lock);
                fd_budget_close(c->budget, victim);
                *ret_cached = true;
                return fd;
        }
        /* Another request re-opened it first: use its fd, give our slot and fd back. */
        if (k >= 0) {
                c->slot[k] = NULL;
                c->free_slots[c->n_free++] = (unsigned) k;
        }
        pthread_mutex_unlock(&c->lock);
        fd_budget_close(c->budget, victim);
        theirs = fdword_acquire(&i->fdword);
        if (theirs < 0) { /* and the clock took it again already: ours it is, uncached */
                *ret_cached = false;
                return fd;
        }
        fd_budget_close(c->budget, fd);
        *ret_cached = true;
        return theirs;
}

int fd_cache_forget(FdCache *c, Inode *i) {
        uint64_t w;

        /* The last reference is gone, so no request holds the fd; the clock may still be looking
         * at the node, hence the lock. */
        pthread_mutex_lock(&c->lock);
        free_slot_locked(c, i);
        w = atomic_exchange_explicit(&i->fdword, 0, memory_order_acquire);
        pthread_mutex_unlock(&c->lock);
        return fdw_fd(w);
}
