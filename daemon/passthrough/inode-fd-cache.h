/* inode-fd-cache.h: the bounded set of O_PATH fds that inodes keep open (--max-inode-fds, issue 34):
 * a clock over the nodes that hold one. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fd-budget.h"

typedef struct Inode Inode;

/* The most O_PATH fds inodes keep by default: a quarter of the fd budget, and at most this. A
 * quarter leaves three for open files, lock fds, directory streams and the re-open walks; 16384
 * cached fds pin about as many host dentries and inodes (some tens of MB of host kernel memory),
 * which covers the hot set of a large build while a tree of any size can be walked. */
#define INODE_FDS_DEFAULT_CAP 16384u

/* Inode.fdword: the inode's O_PATH fd, how many requests use it now, and the clock's bit, in one
 * word, so that taking the fd for a request is one compare-and-swap on the inode and giving it back
 * one atomic subtraction; no lock, no system call (the hot path costs what reading a plain fd
 * did, plus those two atomics on a cache line the request touches anyway for its reference).
 *   bits  0..31  users: requests between inode_fd_acquire() and inode_fd_release()
 *   bits 32..62  fd + 1, 0 when the inode holds no fd (users is 0 then)
 *   bit  63      referenced since the clock hand last passed (set by every acquire)
 * The clock closes an fd only by swapping a word with no users to 0, so an fd a request holds is
 * never closed under it. */
#define FDW_USERS 0xffffffffULL
#define FDW_FD_SHIFT 32
#define FDW_FD_MASK (0x7fffffffULL << FDW_FD_SHIFT)
#define FDW_REF (1ULL << 63)

static inline int fdw_fd(uint64_t w) {
        return (int) ((w & FDW_FD_MASK) >> FDW_FD_SHIFT) - 1;
}

static inline uint64_t fdw_make(int fd, uint64_t users) {
        return ((uint64_t) (fd + 1) << FDW_FD_SHIFT) | users | FDW_REF;
}

/* The fd of the word with one more user, or -1 when there is none. Acquire: what the installer
 * did before publishing the fd happens before its use here. */
static inline int fdword_acquire(_Atomic uint64_t *word) {
        uint64_t w = atomic_load_explicit(word, memory_order_relaxed);

        do {
                if (!(w & FDW_FD_MASK))
                        return -1;
        } while (!atomic_compare_exchange_weak_explicit(word, &w, (w + 1) | FDW_REF, memory_order_acquire,
                                                        memory_order_relaxed));
        return fdw_fd(w);
}

/* Release: this user's uses of the fd happen before the clock's close. */
static inline void fdword_release(_Atomic uint64_t *word) {
        atomic_fetch_sub_explicit(word, 1, memory_order_release);
}

typedef struct FdCache {
        /* Guards slot, free_slots, n_free, hand and every Inode's slot and keep_fd. Taken to put an
         * fd in the clock or take one out (a node's new fd, a re-open, a node freed or losing its
         * name), never by a request whose inode's fd is cached, and never across a system call:
         * the fds the clock takes are closed after unlocking. */
        pthread_mutex_t lock;
        /* The nodes whose fd the clock may take: slot[0..used_slots), NULL = free, and then listed
         * in free_slots (n_free of them). Both arrays hold room for allocated entries and grow by
         * doubling up to cap, so that a large --max-inode-fds costs memory only once used. */
        Inode **slot;
        unsigned *free_slots;
        unsigned n_free;
        unsigned used_slots;
        unsigned allocated;
        unsigned cap;
        unsigned hand;
        bool ready; /* between fd_cache_init() and fd_cache_done() */
        FdBudget *budget;
        _Atomic uint64_t evictions; /* fds the clock took back, for statistics and tests */
} FdCache;

int fd_cache_init(FdCache *c, FdBudget *budget, unsigned cap);
void fd_cache_done(FdCache *c);
unsigned fd_cache_cap(FdCache *c);
/* Nodes whose fd sits in the clock now (not counting the nodes that keep theirs for good). */
unsigned fd_cache_used(FdCache *c);

/* A node that was just given an fd in its word (users 0, a budget fd) and has a name to re-open
 * by: the fd goes into the clock, which may take another node's fd to make room (closed here). When
 * every fd in the clock is in use, this node gives its own back instead (it re-opens when needed). */
void fd_cache_enlist(FdCache *c, Inode *i);

/* Installs fd (O_PATH, checked to be i's inode, one budget fd, taken over) as the fd of i, which
 * holds none, with one user for the caller, and puts it in the clock (i->keep_fd: outside it).
 * Returns the fd the caller now uses with *ret_cached true (give it back with fdword_release()),
 * which is another thread's when one installed i's fd meanwhile (fd is closed then); or fd itself
 * with *ret_cached false when the clock has no room (every fd in it in use): the caller closes it
 * after its operation. */
int fd_cache_install(FdCache *c, Inode *i, int fd, bool *ret_cached);

/* i had no name to re-open by (found through "..") and a LOOKUP gave it one: the fd it keeps, if any,
 * goes into the clock like any other's. A name is never taken away again (inode-map.h). */
void fd_cache_named(FdCache *c, Inode *i);

/* i is being freed: out of the clock; returns its fd (or -1) for the caller to close. */
int fd_cache_forget(FdCache *c, Inode *i);
