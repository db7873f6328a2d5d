/* handle-map.h: guest file handles (fh): integer ids over host fds opened for I/O. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dir-stream.h"
#include "fd-budget.h"
#include "inode-map.h"

typedef struct HandleMap HandleMap;

/* Split like the inode map, so queues do not share a lock: a handle lives in the shard its inode's
 * nodeid picks, and its fh carries the shard in the low bits. */
#define HANDLE_MAP_SHARD_BITS 6
#define HANDLE_MAP_SHARDS (1u << HANDLE_MAP_SHARD_BITS)

typedef struct Handle {
        HandleMap *map;
        uint64_t fh;      /* never reused while the map lives */
        Inode *inode;     /* the node it was opened on; one in-flight reference held */
        int fd;           /* opened for I/O (regular file or directory), owned */
        int flags;        /* open flags as used on the host */
        bool dir;
        bool charged;     /* fd is -1 and one fd of the budget is held for it (handle_map_insert()) */
        /* Serialises directory reads on a directory handle: the position lives in the open file and
         * the entries read ahead in stream. Only READDIR(PLUS) takes it. */
        pthread_mutex_t dir_lock;
        DirStream stream; /* directory handles; under dir_lock */
        /* The flock() this open file holds as granted to the guest (F_UNLCK, F_RDLCK or F_WRLCK),
         * so a saved session can carry it (the kernel lists no open file's flock). flock_lock
         * serialises each non-blocking flock() with the update, so two queues flocking through one
         * handle record what the kernel did last; never held across a wait. */
        pthread_mutex_t flock_lock;
        _Atomic short flock_type; /* written under flock_lock, read without it */
        /* The flock a migration could not take again yet (locks.c, "pending": the guest believes it
         * holds it), F_UNLCK when none; under flock_lock. */
        _Atomic short flock_pending;
        /* A lock the guest held through this open file was lost (a pending lock past
         * --migration-lock-timeout): every later use answers EBADF (handle_map_get()), as a handle
         * that could not be opened again does, so the program learns it instead of writing without
         * the lock. */
        _Atomic bool lock_lost;
        /* In-flight users + 1 while in the map. Atomic: only finding a handle by fh takes the shard
         * lock, dropping it takes none. */
        _Atomic uint64_t refs;
        /* Set when RELEASE(DIR) or a session reset takes it out of the map: requests still using
         * it finish, but a lock wait through it ends (locks.c). */
        _Atomic bool released;
} Handle;

int handle_map_new(HandleMap **ret, FdBudget *budget);
/* The cap on directory read-ahead over all handles (dir-stream.h; 0 = the default). Before the
 * first handle is added. */
void handle_map_set_dir_buffer_max(HandleMap *m, uint64_t max);
/* Bytes of directory read-ahead held now, and buffers dropped because of the cap. */
uint64_t handle_map_dir_buffered(HandleMap *m);
uint64_t handle_map_dir_drops(HandleMap *m);
HandleMap *handle_map_free(HandleMap *m);

/* Registers fd (taken over; its budget already taken by the caller) opened on inode (a reference is
 * taken). Returns the new fh. */
int handle_map_add(HandleMap *m, Inode *inode, int fd, int flags, bool dir, uint64_t *ret_fh);

/* The handle fh with one in-flight reference, if it exists and belongs to nodeid (and, with
 * want_dir, is a directory handle or not). -EBADF otherwise: an fh never issued, released, or of
 * another inode is the same error. */
int handle_map_get(HandleMap *m, uint64_t fh, uint64_t nodeid, int want_dir, Handle **ret);
/* handle_map_get() of a file handle for RELEASE: also one whose lock was lost. */
int handle_map_get_to_release(HandleMap *m, uint64_t fh, uint64_t nodeid, Handle **ret);
void handle_unref(Handle *h);
static inline void handle_unrefp(Handle **h) {
        if (*h)
                handle_unref(*h);
}

/* Removes fh (RELEASE/RELEASEDIR); -EBADF as handle_map_get(). The fd closes when the last
 * in-flight user is done. */
int handle_map_remove(HandleMap *m, uint64_t fh, uint64_t nodeid, int want_dir);

/* ---- a session's handles saved and restored (state-save.c, state-load.c) ---- */

/* Calls fn for every handle with an in-flight reference fn must drop (handle_unref()), outside
 * the shard locks. Stops at fn's first negative return and returns it. */
int handle_map_foreach(HandleMap *m, int (*fn)(Handle *h, void *ud), void *ud);

/* Registers fd (taken over; -1: a handle whose every use fails with EBADF, kept so the guest's fh
 * stays valid until it releases it) under the given fh (> 0) on inode. -EEXIST when fh is
 * taken. Later fhs of its shard come after it. Not with requests running. A handle without an fd
 * is charged to the fd budget as if it held one (-ENFILE when it is spent): a migration stream
 * must not make the daemon keep more handles than a guest could (docs/security.md "Bounds"). */
int handle_map_insert(HandleMap *m, uint64_t fh, Inode *inode, int fd, int flags, bool dir);

/* Removes every handle (new session). */
void handle_map_clear(HandleMap *m);
/* fhs issued from now on come from sequence numbers of at least seq (passthrough_took_over()). */
void handle_map_skip_ids(HandleMap *m, uint64_t seq);

unsigned handle_map_size(HandleMap *m);
