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

typedef struct Inode Inode;
struct Inode {
        InodeMap *map;
        uint64_t nodeid; /* never 0, never reused while the map lives; root = 1 */
        /* Its O_PATH|O_NOFOLLOW fd when it holds one, owned, with its users and the clock bit
         * (inode-fd-cache.h); always 0 when remembered by handle. */
        _Atomic uint64_t fdword;
        /* --inode-file-handles: the inode's file handle (stored in the same allocation as the
         * Inode, right after it) and the mount fd it opens on (borrowed from the Passthrough's
         * MountFds, which outlive every inode). */
        struct file_handle *handle;
        int mount_fd;
        InodeKey key;
        mode_t type;      /* S_IFMT bits, fixed for the inode's life */
        unsigned shard;   /* index of the shard that holds it */
        /* Its birth time when the filesystem tells it (statx STATX_BTIME): with key and type, what
         * a re-open by name checks, so that a recycled inode number is not taken for it. */
        bool has_btime;
        struct statx_timestamp btime;
        /* Under the map's FdCache lock: its index in the clock (-1: not in it), and whether it keeps
         * its fd for good (the root, nodes without a name to re-open by). */
        int slot;
        bool keep_fd;
        /* Restored from a saved session without its file (--migration-on-error=guest-error): it
         * holds no fd, no handle and no name, and every operation on it answers EIO. */
        bool lost;
        /* Where the guest last reached it: its parent node (one reference held) and its name
         * there, so that once its fd is given back it can be re-opened from the nearest ancestor
         * holding one; NULL/NULL for the root and nodes with no name (found through "..", an
         * unnamed O_TMPFILE). A name removed (UNLINK, RMDIR, a RENAME over it) stays: a re-open
         * then finds it gone or taken by another inode, ESTALE. Written under the map's path lock;
         * parent is atomic only so that a lookup can see without the lock whether it changed. */
        struct Inode *_Atomic parent;
        char *name;
        /* Its name no longer leads to it (a change on the host): requests that need its fd answer
         * ESTALE, and the guest's next lookup makes a new node. */
        _Atomic bool stale;
        /* Under the shard's lock: */
        uint64_t nlookup; /* guest references (LOOKUP/CREATE/... minus FORGET), saturating */
        bool linked;      /* reachable through the map (by nodeid and key) */
        bool pinned;      /* the root: never forgotten */
        /* In-flight users, plus one while linked; freed at 0. Atomic: only finding an inode by
         * number or key needs the shard lock (the table's reference keeps it alive meanwhile), so
         * dropping a reference, the other half of every request, takes no lock. */
        _Atomic uint64_t refs;
        /* --privileged-files=map: seen with the marker, or given mapped metadata, while vufsd knew
         * it; only then do writes look for metadata to clear (mapped-mode.h). A hint, set once. */
        _Atomic bool mapped;

        /* POSIX locks: one OFD per guest lock owner, so owners conflict and one owner's locks
         * merge as the kernel expects. plock_mutex guards the table (lock owner -> PLock, see
         * locks.c); it is held
         * only to find or add an entry, never across a blocking fcntl. */
        pthread_mutex_t plock_mutex;
        void *plocks;     /* GHashTable*, created on first use */
};

/* The node budget by default: what one node costs (about 470 bytes with its table entries, measured
 * by tests/test-flood.c) times this is what a guest can make the daemon hold in nodes (~470 MB);
 * an ordinary guest's kernel forgets inodes long before (docs/security.md, "Bounds"). */
#define INODE_MAP_DEFAULT_MAX_NODES 1000000u

/* The map's clock of cached inode fds gets a quarter of budget->max by default (at most
 * INODE_FDS_DEFAULT_CAP): set budget->max first. */
int inode_map_new(InodeMap **ret, FdBudget *budget);
/* How many O_PATH fds nodes keep open at once (0 = the default); before requests run. */
int inode_map_set_max_inode_fds(InodeMap *m, uint64_t max);
uint64_t inode_map_max_inode_fds(InodeMap *m);
/* Node fds in the clock now, and how many it took back since the start. */
uint64_t inode_map_inode_fds(InodeMap *m);
uint64_t inode_map_inode_fd_evictions(InodeMap *m);
struct FdCache *inode_map_fd_cache(InodeMap *m);
/* The most nodes the map holds at once, the root and nodes still used by a request after their
 * FORGET included (0 = INODE_MAP_DEFAULT_MAX_NODES). Whether a node holds an fd, a file handle or
 * nothing, it counts: past the budget, a lookup of an inode the map does not hold answers ENFILE
 * (logged, rate-limited, with the option's name) until the guest forgets some. Before requests run. */
void inode_map_set_max_nodes(InodeMap *m, uint64_t max);
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
 * closed (and its budget returned); otherwise a new node is created, or -ENFILE when the node
 * budget is spent (fd closed too). Returns the inode with one in-flight reference. */
int inode_map_add_lookup(InodeMap *m, int fd, const struct statx *stx, Inode **ret);
/* The same for fd found as name in the directory node parent (NULL/NULL: no name, e.g. through
 * ".."): a new node remembers them to re-open by once its fd is given back (fd enters the clock),
 * a known one takes them as its path when its parent changed (inode_map_note_path()). A node
 * without a name keeps its fd. */
int inode_map_add_lookup_at(InodeMap *m, int fd, const struct statx *stx, Inode *parent, const char *name,
                            Inode **ret);

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

/* The node whose key, type (and birth time where both have one) stx shows, with one in-flight
 * reference and no lookup counted; NULL if none (RENAME and UNLINK find what they move or remove). */
Inode *inode_map_find(InodeMap *m, const struct statx *stx);

/* Whether stx (of an fd just opened by name for i) is i's inode: key, type, birth time. */
bool inode_is(const Inode *i, const struct statx *stx);

/* The guest reached i as name in parent: i takes that as its path when its parent node differs
 * (the fast test needs no lock: a lookup of a node in the directory it was found in does not
 * write). A path that would make i its own ancestor is not taken. */
void inode_map_note_path(Inode *i, Inode *parent, const char *name);
/* The guest renamed i to name in parent (RENAME through the guest): i's path from now on. */
void inode_map_set_path(Inode *i, Inode *parent, const char *name);
/* i's name no longer leads to it: ESTALE for its requests, and its key goes so that the guest's
 * next lookup makes a new node. */
void inode_map_mark_stale(Inode *i);

/* One step of a re-open: a node and its name in the previous step's directory. */
typedef struct InodeStep {
        Inode *inode; /* one reference */
        char *name;
} InodeStep;
/* The way from the nearest ancestor of i that holds an fd down to i, taken under the path lock:
 * *ret_top (one reference) with its fd acquired (*ret_top_fd, fdword_release() it), and the steps
 * below it, the last being i (*ret_n >= 1; free with inode_steps_free()). -ESTALE when a node on
 * the way has no name, or the way is longer than BENEATH_MAX_DEPTH. */
int inode_map_way_down(Inode *i, Inode **ret_top, int *ret_top_fd, InodeStep **ret_steps, size_t *ret_n);
void inode_steps_free(InodeStep *steps, size_t n);

/* Counts one more guest lookup of an inode the caller holds (e.g. LINK's existing node, "."). */
void inode_map_lookup_again(Inode *i);

/* Subtracts n guest lookups (saturating at 0); at 0 the nodeid becomes invalid and the inode is
 * freed once its last in-flight user is gone. Unknown nodeids and the root are ignored. */
void inode_map_forget(InodeMap *m, uint64_t nodeid, uint64_t n);

/* ---- a session's nodes saved and restored (state-save.c, state-load.c) ---- */

/* Calls fn for every linked inode but the root, with an in-flight reference fn must drop
 * (inode_unref()) and the lookup count it had, outside the shard locks: the inodes are collected
 * under each shard's lock first. Stops at fn's first negative return and returns it. */
int inode_map_foreach(InodeMap *m, int (*fn)(Inode *i, uint64_t nlookup, void *ud), void *ud);

/* Links a node under the given nodeid (> 1) with nlookup guest lookups, over fd (O_PATH, one budget
 * fd, taken over), over a copy of the handle h on mount_fd, or over nothing (fd -1, h NULL: a node
 * that answers -EIO, kept so the guest's nodeid stays valid until it forgets it). stx gives its
 * key and type (only the type, S_IFMT in stx_mode, for a node over nothing). -EEXIST when the
 * nodeid is taken, -ENFILE when the node budget is spent (fd closed in both cases). Later nodeids
 * of the nodeid's shard come after it. Its key is found by lookups only when its shard is the one
 * the key picks and no other node holds it: otherwise a LOOKUP of the same file gives it another
 * nodeid (FUSE allows it; the guest forgets the old one in time). Not with requests running. */
int inode_map_insert(InodeMap *m, uint64_t nodeid, uint64_t nlookup, int fd, const struct file_handle *h,
                     int mount_fd, const struct statx *stx, Inode **ret);

/* Node ids issued from now on come from sequence numbers of at least seq (passthrough_took_over()). */
void inode_map_skip_ids(InodeMap *m, uint64_t seq);
/* Forgets every inode but the root (new session). */
void inode_map_clear(InodeMap *m);

/* Number of linked inodes, the root included (for tests and statistics). */
unsigned inode_map_size(InodeMap *m);
/* Nodes in memory, charged to the node budget (linked ones and forgotten ones a request still
 * uses), and the budget. */
uint64_t inode_map_nodes(InodeMap *m);
uint64_t inode_map_max_nodes(InodeMap *m);

/* statx()'s mount id that the kernel never hands out again (Linux 6.8); older kernels ignore the
 * bit and answer STATX_MNT_ID, whose ids are reused as soon as a mount is freed. Every statx whose
 * answer becomes an InodeKey asks for STATX_MNT_IDS, so that keys compare like with like. */
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif
#define STATX_MNT_IDS (STATX_MNT_ID | STATX_MNT_ID_UNIQUE)

InodeKey inode_key_from_statx(const struct statx *stx);
