/* passthrough-internal.h: the Passthrough state shared by the files of daemon/passthrough/. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "fd-budget.h"
#include "file-handle.h"
#include "fs-options.h"
#include "handle-map.h"
#include "inode-map.h"
#include "passthrough.h"

struct Passthrough {
        FsOptions opts;
        /* What a request on a node id this process does not know answers (unknown_node()). */
        int unknown_node_error;
        char *shared_dir;
        FdBudget budget;
        /* POSIX lock ranges every guest lock owner holds (locks.c), bounded by LOCK_RANGES_MAX. */
        _Atomic int64_t lock_ranges;
        int64_t lock_ranges_max;
        /* The guest's locks a migration's load found held on this host (locks.c, "pending"): retried
         * until taken or pending_deadline (CLOCK_MONOTONIC µs) passes. pending_lock guards the list
         * (PendingLock *, a GPtrArray) and the deadline; it is taken before an owner's set_lock, a
         * handle's flock_lock or an inode's plock_mutex, never after. pending_n is the list's length,
         * read without the lock (the fast path of every lock request). pending_efd (an eventfd) wakes
         * the serving loop, which retries every 10 ms while any is pending. */
        pthread_mutex_t pending_lock;
        void *pending;
        _Atomic size_t pending_n;
        uint64_t pending_deadline;
        int pending_efd;
        _Atomic uint64_t locks_pending_total, locks_lost_total; /* since start, for the log and stats */
        InodeMap *inodes;
        HandleMap *handles;
        int proc_self_fd; /* /proc/self/fd: re-opening O_PATH handles without following links */
        _Atomic bool writeback; /* negotiated for the current session */
        /* --inode-file-handles: whether new inodes are remembered by handle (prefer/mandatory and
         * the share allows it, decided at start), and the mount fds the handles open on. */
        bool use_handles;
        bool handles_mandatory;
        MountFds mounts;
        _Atomic bool handle_fallback_logged; /* prefer: the first inode that kept an fd was logged */
        /* --privileged-files in force: map works as refuse without a key or user xattrs on the
         * share (mapped_mode_init(), at start; read-only afterwards). */
        PrivilegedFiles privileged;
};

/* A node id this process does not know: EBADF, or ESTALE in a serving process that took over from
 * one that died (passthrough_took_over()): its guest still holds the dead process's ids, and
 * Linux answers ESTALE by walking the path again with every name looked up anew (the VFS retries
 * an open, create, mkdir, unlink, rename... once with LOOKUP_REVAL), which finds the new ids. */
static inline int unknown_node(const Passthrough *p) {
        return p->unknown_node_error;
}

static inline Inode *get_inode(Passthrough *p, uint64_t nodeid) {
        return inode_map_get(p->inodes, nodeid);
}
