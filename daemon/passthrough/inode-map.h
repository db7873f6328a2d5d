/* inode-map.h: guest-visible inodes: integer nodeids over O_PATH fds or file handles, with lookup
 * counts. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fd-budget.h"

typedef struct InodeMap InodeMap;

/* The map is split into shards, each with its own lock, so that request queues working on
 * different inodes never wait for one another. An inode lives in the shard its (dev, ino, mount)
 * hash picks, and its nodeid carries that shard in the low bits: both the nodeid table (every
 * request) and the key table (lookups) of one inode are under one lock. */
#define INODE_MAP_SHARD_BITS 6
#define INODE_MAP_SHARDS (1u << INODE_MAP_SHARD_BITS)

/* What makes two O_PATH handles the same inode: hard links share one node. */
typedef struct InodeKey {
        uint64_t dev;
        uint64_t ino;
        uint64_t mnt_id; /* 0 when the kernel cannot tell */
} InodeKey;

typedef struct Inode {
        InodeMap *map;
        uint64_t nodeid; /* never 0, never reused while the map lives; root = 1 */
        int fd; /* O_PATH|O_NOFOLLOW handle, owned; -1 when remembered by handle */
        /* --inode-file-handles: the inode's file handle (stored in the same allocation as the
         * Inode, right after it) and the mount fd it opens on (borrowed from the Passthrough's
         * MountFds, which outlive every inode), when fd is -1. */
        struct file_handle *handle;
        int mount_fd;
        InodeKey key;
        mode_t type;      /* S_IFMT bits, fixed for the inode's life */
        unsigned shard;   /* index of the shard that holds it */
        /* Under the shard's lock: */
        uint64_t nlookup; /* guest references (LOOKUP/CREATE/... minus FORGET), saturating */
        bool linked;      /* reachable through the map (by nodeid and key) */
        bool pinned;      /* the root: never forgotten */
        /* In-flight users, plus one while linked; freed at 0. Atomic: only finding an inode by
         * number or key needs the shard lock (the table's reference keeps it alive meanwhile), so
         * dropping a reference, the other half of every request, takes no lock. */
        _Atomic uint64_t refs;

        /* POSIX locks: one OFD per guest lock owner, so owners conflict and one owner's locks
         * merge as the kernel expects. plock_mutex guards the table (lock owner -> PLock, see
         * locks.c); it is held
         * only to find or add an entry, never across a blocking fcntl. */
        pthread_mutex_t plock_mutex;
        void *plocks;     /* GHashTable*, created on first use */
} Inode;

int inode_map_new(InodeMap **ret, FdBudget *budget);
InodeMap *inode_map_free(InodeMap *m);

/* Installs the root inode (nodeid 1) over fd (an O_PATH directory fd, taken over). */
int inode_map_set_root(InodeMap *m, int fd, const struct statx *stx);

/* The inode behind nodeid with one in-flight reference, or NULL when the nodeid is unknown or
 * forgotten. Drop the reference with inode_unref(). */
Inode *inode_map_get(InodeMap *m, uint64_t nodeid);
Inode *inode_ref(Inode *i);
void inode_unref(Inode *i);
static inline void inode_unrefp(Inode **i) {
        if (*i)
                inode_unref(*i);
}

/* Counts one guest lookup of the inode that fd (O_PATH, taken over; one fd of the budget already
 * taken by the caller) refers to. When the map already holds that inode its count goes up and fd is
 * closed (and its budget returned); otherwise a new node is created. Returns the inode with one
 * in-flight reference. */
int inode_map_add_lookup(InodeMap *m, int fd, const struct statx *stx, Inode **ret);

/* The same for an inode remembered by its file handle h (borrowed: it may live on the caller's
 * stack; a new node keeps a copy, a known inode costs no allocation) on mount_fd: the new node
 * holds no fd. */
struct file_handle;
int inode_map_add_lookup_handle(InodeMap *m, const struct file_handle *h, int mount_fd, const struct statx *stx,
                                Inode **ret);

/* Counts one guest lookup of the inode stx describes if the map already holds it (same key and
 * type) and returns it with one in-flight reference; NULL (nothing counted) otherwise. An inode
 * remembered by handle pins nothing, so its key may be a recycled inode number of a new file: it
 * matches only when h (the handle the name has now, NULL if none could be made) is its handle;
 * otherwise it is stale, and loses its key so the new file gets a node of its own (the old nodeid
 * stays valid until forgotten, and answers ESTALE). */
struct file_handle;
Inode *inode_map_find_lookup(InodeMap *m, const struct statx *stx, const struct file_handle *h);

/* Counts one more guest lookup of an inode the caller holds (e.g. LINK's existing node, "."). */
void inode_map_lookup_again(Inode *i);

/* Subtracts n guest lookups (saturating at 0); at 0 the nodeid becomes invalid and the inode is
 * freed once its last in-flight user is gone. Unknown nodeids and the root are ignored. */
void inode_map_forget(InodeMap *m, uint64_t nodeid, uint64_t n);

/* Forgets every inode but the root (new session). */
void inode_map_clear(InodeMap *m);

/* Number of linked inodes, the root included (for tests and statistics). */
unsigned inode_map_size(InodeMap *m);

InodeKey inode_key_from_statx(const struct statx *stx);
