/* inode-map.c: nodeid and (dev, ino, mount) tables of guest-visible inodes. */
#include "inode-map.h"
#include "session-journal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include "beneath.h" /* BENEATH_MAX_DEPTH */
#include "fs-ops.h"  /* FS_ROOT_ID */
#include "inode-fd-cache.h"
#include "log.h"

typedef struct InodeShard {
        /* Guards both tables of the shard and nlookup/linked of the inodes in it. A lookup must
         * find-or-insert in both tables atomically, which is why one inode's nodeid and key entries
         * share a shard. Critical sections are a few hash operations: no system calls (fds are
         * closed after unlocking). */
        pthread_mutex_t lock;
        GHashTable *by_id;  /* uint64_t* nodeid -> Inode* (the root is not here) */
        GHashTable *by_key; /* InodeKey* -> Inode* */
        uint64_t next_seq;  /* the next nodeid is next_seq << INODE_MAP_SHARD_BITS | shard */
} __attribute__((aligned(64))) InodeShard; /* a cache line each: queues do not bounce each other's */

struct InodeMap {
        FdBudget *budget;
        /* Nodes in memory against --max-nodes: the same take/release counter as the fd budget
         * (atomic, no lock), charged by inode_alloc() and given back by inode_free(). */
        FdBudget nodes;
        Inode *root; /* nodeid 1, set before requests run; lives as long as the map */
        /* The inode fds kept open (--max-inode-fds): see inode-fd-cache.h for its lock. */
        FdCache fds;
        /* Guards every published node's parent and name. Taken by a lookup only when a node's
         * parent changed, by RENAME/UNLINK/RMDIR through the guest, and by a re-open to read the
         * way down; held for pointer work and string copies only, no system call. One lock for
         * the whole tree: a path change must see the ancestors of the new parent (no cycle),
         * which may lie in any shard. */
        pthread_mutex_t path_lock;
        InodeShard shards[INODE_MAP_SHARDS];
};

static uint64_t key_mix(const InodeKey *k) {
        /* Multiplicative hashing puts the entropy of consecutive inode numbers in the high bits,
         * which pick the shard; the low bits feed the hash table inside it. */
        return k->ino * 0x9E3779B97F4A7C15ULL ^ k->dev * 0xC2B2AE3D27D4EB4FULL ^ k->mnt_id * 0x165667B19E3779F9ULL;
}

static guint key_hash(gconstpointer p) {
        uint64_t h = key_mix(p);
        return (guint) (h ^ (h >> 32));
}

static gboolean key_equal(gconstpointer a, gconstpointer b) {
        const InodeKey *x = a, *y = b;
        return x->dev == y->dev && x->ino == y->ino && x->mnt_id == y->mnt_id;
}

/* By device and inode number alone, not the mount id: a node restored from another process's
 * state (live migration, state-load.c) keeps the nodeid, and so the shard, the source gave it,
 * and must be in the shard a lookup of the same file looks in. Mount ids differ between two
 * processes (each sandbox has its mount namespace); device and inode numbers do not, on one host.
 * Keys on several mounts of one inode share a shard, which costs nothing. */
static unsigned key_shard(const InodeKey *k) {
        uint64_t h = k->ino * 0x9E3779B97F4A7C15ULL ^ k->dev * 0xC2B2AE3D27D4EB4FULL;
        return (unsigned) (h >> (64 - INODE_MAP_SHARD_BITS));
}

/* Any number a guest sends picks a shard; an unknown one is simply not found there. */
static InodeShard *id_shard(InodeMap *m, uint64_t nodeid) {
        return &m->shards[nodeid & (INODE_MAP_SHARDS - 1)];
}

InodeKey inode_key_from_statx(const struct statx *stx) {
        return (InodeKey) {
                .dev = makedev(stx->stx_dev_major, stx->stx_dev_minor),
                .ino = stx->stx_ino,
                .mnt_id = (stx->stx_mask & STATX_MNT_IDS) ? stx->stx_mnt_id : 0,
        };
}

int inode_map_new(InodeMap **ret, FdBudget *budget) {
        /* aligned_alloc: the shards' alignment is part of their type. */
        InodeMap *m = aligned_alloc(_Alignof(InodeMap), sizeof(InodeMap));

        if (!m)
                return -ENOMEM;
        memset(m, 0, sizeof *m);
        m->budget = budget;
        m->nodes.max = INODE_MAP_DEFAULT_MAX_NODES;
        pthread_mutex_init(&m->path_lock, NULL);
        if (fd_cache_init(&m->fds, budget, 0) < 0) {
                pthread_mutex_destroy(&m->path_lock);
                free(m);
                return -ENOMEM;
        }
        for (unsigned k = 0; k < INODE_MAP_SHARDS; k++) {
                InodeShard *s = &m->shards[k];
                pthread_mutex_init(&s->lock, NULL);
                s->by_id = g_hash_table_new(g_int64_hash, g_int64_equal);
                s->by_key = g_hash_table_new(key_hash, key_equal);
                s->next_seq = 1; /* so no nodeid is 0 or 1 (the root) */
        }
        *ret = m;
        return 0;
}

void inode_map_set_max_nodes(InodeMap *m, uint64_t max) {
        m->nodes.max = max > 0 ? max : INODE_MAP_DEFAULT_MAX_NODES;
}

uint64_t inode_map_nodes(InodeMap *m) {
        return atomic_load(&m->nodes.used);
}

uint64_t inode_map_max_nodes(InodeMap *m) {
        return m->nodes.max;
}

int inode_map_set_max_inode_fds(InodeMap *m, uint64_t max) {
        fd_cache_done(&m->fds);
        return fd_cache_init(&m->fds, m->budget, (unsigned) MIN(max, (uint64_t) UINT_MAX));
}

uint64_t inode_map_max_inode_fds(InodeMap *m) {
        return fd_cache_cap(&m->fds);
}

uint64_t inode_map_inode_fds(InodeMap *m) {
        return fd_cache_used(&m->fds);
}

uint64_t inode_map_inode_fd_evictions(InodeMap *m) {
        return atomic_load(&m->fds.evictions);
}

FdCache *inode_map_fd_cache(InodeMap *m) {
        return &m->fds;
}

/* The other half of inode_alloc(): the memory and its charge on the node budget; the fd, if any,
 * is the caller's. */
static void inode_free(Inode *i) {
        pthread_mutex_destroy(&i->plock_mutex);
        fd_budget_release(&i->map->nodes);
        free(i->name);
        free(i); /* the handle with it */
}

/* Frees i; returns its parent, whose reference the caller drops (inode_unref() does, in a loop:
 * a long chain of forgotten directories is freed without recursion). */
static Inode *inode_destroy(Inode *i) {
        Inode *parent = atomic_load_explicit(&i->parent, memory_order_relaxed);

        /* Before its parent's reference goes (the caller drops it next), so the journal never
         * holds a node whose parent it lost. */
        if (i->nodeid > FS_ROOT_ID)
                journal_node_gone(i->nodeid);

        /* The lock table frees its entries itself (locks.c): each closes its fd and gives it back
         * to the budget. */
        if (i->plocks)
                g_hash_table_destroy(i->plocks);
        fd_budget_close(i->map->budget, fd_cache_forget(&i->map->fds, i));
        inode_free(i);
        return parent;
}

/* Under the shard lock: takes the inode out of both tables. The caller then drops the tables'
 * reference, after unlocking. */
static void unlink_locked(InodeShard *s, Inode *i) {
        g_hash_table_remove(s->by_id, &i->nodeid);
        if (g_hash_table_lookup(s->by_key, &i->key) == i)
                g_hash_table_remove(s->by_key, &i->key);
        i->linked = false;
}

InodeMap *inode_map_free(InodeMap *m) {
        GHashTableIter it;
        gpointer k, v;

        if (!m)
                return NULL;
        /* By now no request runs: every remaining inode goes, whatever its counts. First the
         * references on parents: a linked parent keeps the table's one and stays, a forgotten one
         * that only children kept goes now. */
        for (unsigned n = 0; n < INODE_MAP_SHARDS; n++) {
                g_hash_table_iter_init(&it, m->shards[n].by_id);
                while (g_hash_table_iter_next(&it, &k, &v)) {
                        Inode *parent = atomic_exchange(&((Inode *) v)->parent, NULL);
                        if (parent)
                                inode_unref(parent);
                }
        }
        for (unsigned n = 0; n < INODE_MAP_SHARDS; n++) {
                InodeShard *s = &m->shards[n];
                g_hash_table_iter_init(&it, s->by_id);
                while (g_hash_table_iter_next(&it, &k, &v))
                        (void) inode_destroy(v);
                g_hash_table_destroy(s->by_id);
                g_hash_table_destroy(s->by_key);
                pthread_mutex_destroy(&s->lock);
        }
        if (m->root)
                (void) inode_destroy(m->root);
        fd_cache_done(&m->fds);
        pthread_mutex_destroy(&m->path_lock);
        free(m);
        return NULL;
}

/* A new node over fd, or over a copy of handle h (the copy in the same allocation, after the
 * Inode, whose size keeps the handle's 4-byte alignment), charged to the node budget: -ENFILE when
 * it is spent. */
static int inode_alloc(InodeMap *m, int fd, const struct file_handle *h, const struct statx *stx, Inode **ret) {
        size_t hsize = h ? sizeof *h + h->handle_bytes : 0;
        Inode *i;

        /* fd + 1 must fit the fd word's 31 bits: always so under RLIMIT_NOFILE's ceiling. */
        if (fd >= (int) (FDW_FD_MASK >> FDW_FD_SHIFT) - 1)
                return -EMFILE;

        if (!fd_budget_take(&m->nodes)) {
                log_guest("The guest holds %" PRIu64 " inodes, the node budget (--max-nodes): answering ENFILE "
                          "until it forgets some",
                          m->nodes.max);
                return -ENFILE;
        }
        i = calloc(1, sizeof *i + hsize);
        if (!i) {
                fd_budget_release(&m->nodes);
                return -ENOMEM;
        }
        if (h) {
                i->handle = (struct file_handle *) (i + 1);
                memcpy(i->handle, h, hsize);
        }
        i->map = m;
        /* The fd with no users; a node with a name moves it into the clock once linked
         * (fd_cache_enlist()), any other keeps it. */
        atomic_init(&i->fdword, fd >= 0 ? fdw_make(fd, 0) : 0);
        i->keep_fd = true;
        i->slot = -1;
        i->mount_fd = -1;
        i->key = inode_key_from_statx(stx);
        i->type = stx->stx_mode & S_IFMT;
        i->has_btime = stx->stx_mask & STATX_BTIME;
        i->btime = stx->stx_btime;
        i->shard = key_shard(&i->key);
        pthread_mutex_init(&i->plock_mutex, NULL);
        *ret = i;
        return 0;
}

int inode_map_set_root(InodeMap *m, int fd, const struct statx *stx) {
        InodeShard *s;
        Inode *i;
        int r;

        if (m->root)
                return -EEXIST;
        if (!fd_budget_take(m->budget))
                return -ENFILE;
        r = inode_alloc(m, fd, NULL, stx, &i);
        if (r < 0) {
                fd_budget_release(m->budget);
                return r;
        }
        i->nodeid = FS_ROOT_ID;
        i->nlookup = 1;
        i->pinned = true;
        i->linked = true;
        i->refs = 1; /* the map's, dropped only by inode_map_free() */
        /* Found by key like any inode (a lookup of ".." that lands on it), by number through
         * m->root, which needs no lock since it never changes while requests run. */
        s = &m->shards[i->shard];
        pthread_mutex_lock(&s->lock);
        g_hash_table_insert(s->by_key, &i->key, i);
        pthread_mutex_unlock(&s->lock);
        m->root = i;
        return 0;
}

Inode *inode_map_get(InodeMap *m, uint64_t nodeid) {
        InodeShard *s;
        Inode *i;

        if (nodeid == FS_ROOT_ID)
                return m->root ? inode_ref(m->root) : NULL;
        s = id_shard(m, nodeid);
        pthread_mutex_lock(&s->lock);
        i = g_hash_table_lookup(s->by_id, &nodeid);
        if (i)
                inode_ref(i); /* safe: the table's reference keeps it alive while we hold the lock */
        pthread_mutex_unlock(&s->lock);
        return i;
}

Inode *inode_ref(Inode *i) {
        /* Relaxed: the caller already holds a reference or the shard lock, which order it. */
        atomic_fetch_add_explicit(&i->refs, 1, memory_order_relaxed);
        return i;
}

void inode_unref(Inode *i) {
        /* acq_rel: this thread's uses happen before the last one's free. The parent's reference
         * goes next, in this loop rather than by recursion. */
        while (i && atomic_fetch_sub_explicit(&i->refs, 1, memory_order_acq_rel) == 1)
                i = inode_destroy(i); /* closes outside any lock */
}

static void nlookup_inc(Inode *i) {
        if (i->nlookup < UINT64_MAX) /* saturate: a count that cannot grow just never frees */
                i->nlookup++;
}

/* Whether a node and a new sighting (handle h, NULL when it has none) can be one inode: a node
 * that holds an fd pins its inode, so its number is not recycled while it lives; one remembered
 * by handle must have that very handle (it carries the generation the filesystem gives a reused
 * number). */
static bool same_birth(const Inode *i, const struct statx *stx) {
        return !i->has_btime || !(stx->stx_mask & STATX_BTIME) ||
               (i->btime.tv_sec == stx->stx_btime.tv_sec && i->btime.tv_nsec == stx->stx_btime.tv_nsec);
}

/* The same, and a node that gave its fd back pins nothing either: its birth time, where the
 * filesystem keeps one, tells it from a recycled number. */
static bool same_inode(const Inode *i, const struct statx *stx, const struct file_handle *h) {
        if (!same_birth(i, stx))
                return false;
        if (!i->handle)
                return true;
        return h && h->handle_type == i->handle->handle_type && h->handle_bytes == i->handle->handle_bytes &&
               memcmp(h->f_handle, i->handle->f_handle, h->handle_bytes) == 0;
}

Inode *inode_map_find_lookup(InodeMap *m, const struct statx *stx, const struct file_handle *h) {
        InodeKey key = inode_key_from_statx(stx);
        InodeShard *s = &m->shards[key_shard(&key)];
        Inode *i;

        pthread_mutex_lock(&s->lock);
        i = g_hash_table_lookup(s->by_key, &key);
        if (i && !same_inode(i, stx, h)) {
                g_hash_table_remove(s->by_key, &i->key); /* stale: see inode-map.h */
                i = NULL;
        }
        if (i && i->type == (stx->stx_mode & S_IFMT)) {
                nlookup_inc(i);
                inode_ref(i);
        } else
                i = NULL;
        pthread_mutex_unlock(&s->lock);
        return i;
}

/* Under the shard lock: the node of key that a new sighting (type, handle h or NULL) is, or NULL.
 * Same (dev, ino) but another type, or another handle, means the old node's file is gone and the
 * number was recycled while we held no pin on it; a node by handle and a sighting without one
 * cannot be compared. Those keep their key here: add_lookup() takes it from them when it links
 * the newcomer. */
static Inode *known_locked(InodeShard *s, const InodeKey *key, const struct statx *stx,
                            const struct file_handle *h) {
        Inode *i = g_hash_table_lookup(s->by_key, key);

        if (i && i->type == (stx->stx_mode & S_IFMT) && same_inode(i, stx, h))
                return i;
        return NULL;
}

/* fd (O_PATH, one budget fd) or handle h on mount_fd (borrowed), whichever the new node is to
 * keep; found as name in parent (both NULL when unknown). */
static int add_lookup(InodeMap *m, int fd, const struct file_handle *h, int mount_fd, const struct statx *stx,
                      Inode *parent, const char *name, Inode **ret) {
        InodeKey key = inode_key_from_statx(stx);
        unsigned idx = key_shard(&key);
        InodeShard *s = &m->shards[idx];
        Inode *i, *n;
        int r;

        /* First without allocating: most sightings by handle are of inodes the map holds (".."
         * lookups, a create that opened an existing file, a lookup that raced another), and h
         * may live on the caller's stack. */
        pthread_mutex_lock(&s->lock);
        i = known_locked(s, &key, stx, h);
        if (i) {
                nlookup_inc(i);
                inode_ref(i);
        }
        pthread_mutex_unlock(&s->lock);
        if (i) {
                fd_budget_close(m->budget, fd);
                if (parent)
                        inode_map_note_path(i, parent, name);
                *ret = i;
                return 0;
        }

        /* A new node, allocated without the lock (no allocator under it); thrown away if another
         * thread linked the inode meanwhile. */
        r = inode_alloc(m, fd, h, stx, &n);
        if (r < 0) {
                fd_budget_close(m->budget, fd);
                return r;
        }
        n->mount_fd = h ? mount_fd : -1;
        if (parent) {
                /* Not published yet: no lock. A node without a name keeps its fd. */
                n->name = strdup(name);
                if (!n->name) {
                        inode_free(n);
                        fd_budget_close(m->budget, fd);
                        return -ENOMEM;
                }
                atomic_init(&n->parent, inode_ref(parent));
                n->keep_fd = false;
        }
        pthread_mutex_lock(&s->lock);
        i = known_locked(s, &key, stx, h);
        if (i) {
                nlookup_inc(i);
                inode_ref(i);
        } else {
                Inode *stale = g_hash_table_lookup(s->by_key, &key);
                if (stale) /* see known_locked(): the newcomer gets its own node and the key */
                        g_hash_table_remove(s->by_key, &stale->key);
                i = TAKE_PTR(n);
                i->nodeid = s->next_seq++ << INODE_MAP_SHARD_BITS | idx;
                i->nlookup = 1;
                i->refs = 2; /* the tables' and the caller's */
                i->linked = true;
                g_hash_table_insert(s->by_id, &i->nodeid, i);
                g_hash_table_insert(s->by_key, &i->key, i);
                /* Under the lock: a lookup on another queue that finds it replies only after
                 * this, so no reply names a node the journal does not hold. */
                journal_node(i, fd);
        }
        pthread_mutex_unlock(&s->lock);
        if (n) {
                Inode *np = atomic_load_explicit(&n->parent, memory_order_relaxed);
                inode_free(n);
                fd_budget_close(m->budget, fd);
                if (np)
                        inode_unref(np);
                if (parent)
                        inode_map_note_path(i, parent, name);
        } else if (fd >= 0 && !i->keep_fd)
                fd_cache_enlist(&m->fds, i);
        *ret = i;
        return 0;
}

int inode_map_add_lookup(InodeMap *m, int fd, const struct statx *stx, Inode **ret) {
        return add_lookup(m, fd, NULL, -1, stx, NULL, NULL, ret);
}

int inode_map_add_lookup_at(InodeMap *m, int fd, const struct statx *stx, Inode *parent, const char *name,
                            Inode **ret) {
        return add_lookup(m, fd, NULL, -1, stx, parent, name, ret);
}

int inode_map_add_lookup_handle(InodeMap *m, const struct file_handle *h, int mount_fd, const struct statx *stx,
                                Inode **ret) {
        return add_lookup(m, -1, h, mount_fd, stx, NULL, NULL, ret);
}

Inode *inode_map_find(InodeMap *m, const struct statx *stx) {
        InodeKey key = inode_key_from_statx(stx);
        InodeShard *s = &m->shards[key_shard(&key)];
        Inode *i;

        pthread_mutex_lock(&s->lock);
        i = g_hash_table_lookup(s->by_key, &key);
        if (i && i->type == (stx->stx_mode & S_IFMT) && same_birth(i, stx))
                inode_ref(i);
        else
                i = NULL;
        pthread_mutex_unlock(&s->lock);
        return i;
}

bool inode_is(const Inode *i, const struct statx *stx) {
        InodeKey k = inode_key_from_statx(stx);

        /* The mount only where both know it, as beneath.c compares places. */
        return k.dev == i->key.dev && k.ino == i->key.ino &&
               (k.mnt_id == 0 || i->key.mnt_id == 0 || k.mnt_id == i->key.mnt_id) &&
               (stx->stx_mode & S_IFMT) == i->type && same_birth(i, stx);
}

/* Under path_lock: whether i is anc or lies beneath it by parent links (a path that would make a
 * node its own ancestor is refused). */
static bool descends_locked(Inode *i, const Inode *anc) {
        for (unsigned depth = 0; i && depth <= BENEATH_MAX_DEPTH; depth++) {
                if (i == anc)
                        return true;
                i = atomic_load_explicit(&i->parent, memory_order_relaxed);
        }
        return i != NULL; /* too deep to tell: refused as well */
}

/* Sets i's path to (parent, name); the old parent's reference and name are dropped after
 * unlocking. only_if_parent_differs: leave a path whose parent is parent (the lookup case). */
static void set_path(Inode *i, Inode *parent, const char *name, bool only_if_parent_differs) {
        InodeMap *m = i->map;
        _cleanup_free_ char *copy = NULL;
        char *old_name = NULL;
        Inode *old;
        bool named = false;

        if (i->pinned || i->handle)
                return; /* the root never moves; a node by handle re-opens by its handle */
        copy = strdup(name);
        if (!copy)
                return; /* keeps the old path: a re-open that fails on it answers ESTALE */
        pthread_mutex_lock(&m->path_lock);
        old = atomic_load_explicit(&i->parent, memory_order_relaxed);
        if ((!only_if_parent_differs || old != parent) && !descends_locked(parent, i)) {
                old_name = i->name;
                i->name = TAKE_PTR(copy);
                atomic_store_explicit(&i->parent, inode_ref(parent), memory_order_relaxed);
                named = !old;
                /* Under the path lock, which orders the changes of a path, and before the old
                 * parent may go (its entry must outlive this one's reference to it). */
                journal_node(i, -1);
        } else
                old = NULL;
        pthread_mutex_unlock(&m->path_lock);
        free(old_name);
        if (old)
                inode_unref(old);
        if (named) /* a node found through ".." now has a name: its fd is bounded like the others' */
                fd_cache_named(&m->fds, i);
}

void inode_map_note_path(Inode *i, Inode *parent, const char *name) {
        /* Relaxed, no lock: only whether it is parent is asked; set_path() looks again under it. */
        if (atomic_load_explicit(&i->parent, memory_order_relaxed) != parent)
                set_path(i, parent, name, true);
}

void inode_map_set_path(Inode *i, Inode *parent, const char *name) {
        set_path(i, parent, name, false);
}

void inode_map_mark_stale(Inode *i) {
        InodeShard *s = &i->map->shards[i->shard];

        if (i->pinned)
                return;
        atomic_store(&i->stale, true);
        pthread_mutex_lock(&s->lock);
        if (g_hash_table_lookup(s->by_key, &i->key) == i)
                g_hash_table_remove(s->by_key, &i->key);
        pthread_mutex_unlock(&s->lock);
}

void inode_steps_free(InodeStep *steps, size_t n) {
        for (size_t k = 0; k < n; k++) {
                free(steps[k].name);
                inode_unref(steps[k].inode);
        }
        free(steps);
}

int inode_map_way_down(Inode *i, Inode **ret_top, int *ret_top_fd, InodeStep **ret_steps, size_t *ret_n) {
        InodeMap *m = i->map;
        InodeStep *steps = NULL;
        size_t n = 0, cap = 0;
        Inode *at = i;
        int r = -ESTALE, fd;

        pthread_mutex_lock(&m->path_lock);
        for (;;) {
                Inode *up = atomic_load_explicit(&at->parent, memory_order_relaxed);
                if (n > BENEATH_MAX_DEPTH || !up || atomic_load(&at->stale))
                        break; /* no name to re-open by: ESTALE */
                if (n == cap) {
                        InodeStep *ns = realloc(steps, (cap = cap ? cap * 2 : 8) * sizeof *ns);
                        if (!ns) {
                                r = -ENOMEM;
                                break;
                        }
                        steps = ns;
                }
                steps[n].name = strdup(at->name);
                if (!steps[n].name) {
                        r = -ENOMEM;
                        break;
                }
                steps[n++].inode = inode_ref(at);
                /* The parent's fd is taken with a user while the lock keeps the parent's place:
                 * the nearest ancestor holding one is where the walk starts. */
                fd = fdword_acquire(&up->fdword);
                if (fd >= 0) {
                        *ret_top = inode_ref(up);
                        *ret_top_fd = fd;
                        r = 0;
                        break;
                }
                at = up;
        }
        pthread_mutex_unlock(&m->path_lock);
        if (r < 0) {
                inode_steps_free(steps, n);
                return r;
        }
        /* steps runs from i up; the walk goes down. */
        for (size_t a = 0, b = n - 1; a < b; a++, b--) {
                InodeStep t = steps[a];
                steps[a] = steps[b];
                steps[b] = t;
        }
        *ret_steps = steps;
        *ret_n = n;
        return 0;
}

void inode_map_lookup_again(Inode *i) {
        InodeShard *s = &i->map->shards[i->shard];

        pthread_mutex_lock(&s->lock);
        nlookup_inc(i);
        pthread_mutex_unlock(&s->lock);
}

void inode_map_forget(InodeMap *m, uint64_t nodeid, uint64_t n) {
        InodeShard *s = id_shard(m, nodeid);
        bool drop = false;
        Inode *i;

        /* The root is not in by_id: forgetting it is a no-op, as FUSE wants. */
        pthread_mutex_lock(&s->lock);
        i = g_hash_table_lookup(s->by_id, &nodeid);
        if (i) {
                i->nlookup = n >= i->nlookup ? 0 : i->nlookup - n;
                if (i->nlookup == 0) {
                        unlink_locked(s, i);
                        drop = true;
                }
        }
        pthread_mutex_unlock(&s->lock);
        if (drop)
                inode_unref(i); /* the tables' reference; freed now unless a request uses it */
}

typedef struct Collected {
        Inode *inode;
        uint64_t nlookup;
} Collected;

int inode_map_foreach(InodeMap *m, int (*fn)(Inode *i, uint64_t nlookup, void *ud), void *ud) {
        g_autoptr(GArray) all = g_array_new(false, false, sizeof(Collected));
        GHashTableIter it;
        gpointer k, v;
        int r = 0;

        for (unsigned n = 0; n < INODE_MAP_SHARDS; n++) {
                InodeShard *s = &m->shards[n];
                pthread_mutex_lock(&s->lock);
                g_hash_table_iter_init(&it, s->by_id);
                while (g_hash_table_iter_next(&it, &k, &v)) {
                        Collected c = { inode_ref(v), ((Inode *) v)->nlookup };
                        g_array_append_val(all, c);
                }
                pthread_mutex_unlock(&s->lock);
        }
        for (guint j = 0; j < all->len; j++) {
                Collected *c = &g_array_index(all, Collected, j);
                if (r >= 0)
                        r = fn(c->inode, c->nlookup, ud);
                else
                        inode_unref(c->inode);
        }
        return r;
}

int inode_map_insert(InodeMap *m, uint64_t nodeid, uint64_t nlookup, int fd, const struct file_handle *h,
                     int mount_fd, const struct statx *stx, Inode **ret) {
        InodeShard *s = id_shard(m, nodeid);
        unsigned idx = (unsigned) (nodeid & (INODE_MAP_SHARDS - 1));
        bool lost = fd < 0 && !h;
        Inode *i;
        int r;

        if (nodeid <= FS_ROOT_ID) {
                fd_budget_close(m->budget, fd);
                return -EINVAL;
        }
        r = inode_alloc(m, fd, h, stx, &i);
        if (r < 0) {
                fd_budget_close(m->budget, fd);
                return r;
        }
        i->mount_fd = h ? mount_fd : -1;
        i->shard = idx; /* the nodeid's shard, whatever the key picks: see inode-map.h */
        i->nodeid = nodeid;
        i->nlookup = nlookup > 0 ? nlookup : 1;
        i->refs = 2; /* the tables' and the caller's */
        i->linked = true;
        if (lost)
                i->key = (InodeKey) { 0 };
        i->lost = lost;
        pthread_mutex_lock(&s->lock);
        if (g_hash_table_contains(s->by_id, &nodeid)) {
                pthread_mutex_unlock(&s->lock);
                inode_free(i);
                fd_budget_close(m->budget, fd);
                return -EEXIST;
        }
        g_hash_table_insert(s->by_id, &i->nodeid, i);
        if (!lost && key_shard(&i->key) == idx && !g_hash_table_contains(s->by_key, &i->key))
                g_hash_table_insert(s->by_key, &i->key, i);
        if (s->next_seq <= nodeid >> INODE_MAP_SHARD_BITS)
                s->next_seq = (nodeid >> INODE_MAP_SHARD_BITS) + 1;
        pthread_mutex_unlock(&s->lock);
        *ret = i;
        return 0;
}

void inode_map_skip_ids(InodeMap *m, uint64_t seq) {
        for (unsigned n = 0; n < INODE_MAP_SHARDS; n++) {
                InodeShard *s = &m->shards[n];
                pthread_mutex_lock(&s->lock);
                s->next_seq = MAX(s->next_seq, seq);
                pthread_mutex_unlock(&s->lock);
        }
}

void inode_map_clear(InodeMap *m) {
        g_autoptr(GPtrArray) gone = g_ptr_array_new();
        GHashTableIter it;
        gpointer k, v;

        for (unsigned n = 0; n < INODE_MAP_SHARDS; n++) {
                InodeShard *s = &m->shards[n];
                pthread_mutex_lock(&s->lock);
                g_hash_table_iter_init(&it, s->by_id);
                while (g_hash_table_iter_next(&it, &k, &v)) {
                        Inode *i = v;
                        if (g_hash_table_lookup(s->by_key, &i->key) == i)
                                g_hash_table_remove(s->by_key, &i->key);
                        g_hash_table_iter_remove(&it);
                        i->linked = false;
                        i->nlookup = 0;
                        g_ptr_array_add(gone, i);
                }
                pthread_mutex_unlock(&s->lock);
        }
        for (guint j = 0; j < gone->len; j++)
                inode_unref(gone->pdata[j]);
}

unsigned inode_map_size(InodeMap *m) {
        unsigned n = m->root ? 1 : 0;

        for (unsigned k = 0; k < INODE_MAP_SHARDS; k++) {
                InodeShard *s = &m->shards[k];
                pthread_mutex_lock(&s->lock);
                n += g_hash_table_size(s->by_id);
                pthread_mutex_unlock(&s->lock);
        }
        return n;
}
