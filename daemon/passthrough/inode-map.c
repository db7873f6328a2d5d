/* inode-map.c: nodeid and (dev, ino, mount) tables of guest-visible inodes. */
#include "inode-map.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include "fs-ops.h" /* FS_ROOT_ID */

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
        Inode *root; /* nodeid 1, set before requests run; lives as long as the map */
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

static unsigned key_shard(const InodeKey *k) {
        return (unsigned) (key_mix(k) >> (64 - INODE_MAP_SHARD_BITS));
}

/* Any number a guest sends picks a shard; an unknown one is simply not found there. */
static InodeShard *id_shard(InodeMap *m, uint64_t nodeid) {
        return &m->shards[nodeid & (INODE_MAP_SHARDS - 1)];
}

InodeKey inode_key_from_statx(const struct statx *stx) {
        return (InodeKey) {
                .dev = makedev(stx->stx_dev_major, stx->stx_dev_minor),
                .ino = stx->stx_ino,
                .mnt_id = (stx->stx_mask & STATX_MNT_ID) ? stx->stx_mnt_id : 0,
        };
}

int inode_map_new(InodeMap **ret, FdBudget *budget) {
        /* aligned_alloc: the shards' alignment is part of their type. */
        InodeMap *m = aligned_alloc(_Alignof(InodeMap), sizeof(InodeMap));

        if (!m)
                return -ENOMEM;
        memset(m, 0, sizeof *m);
        m->budget = budget;
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

static void inode_destroy(Inode *i) {
        /* The lock table frees its entries itself (locks.c): each closes its fd and gives it back
         * to the budget. */
        if (i->plocks)
                g_hash_table_destroy(i->plocks);
        pthread_mutex_destroy(&i->plock_mutex);
        fd_budget_close(i->map->budget, i->fd);
        free(i); /* the handle with it */
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
        /* By now no request runs: every remaining inode goes, whatever its counts. */
        for (unsigned n = 0; n < INODE_MAP_SHARDS; n++) {
                InodeShard *s = &m->shards[n];
                g_hash_table_iter_init(&it, s->by_id);
                while (g_hash_table_iter_next(&it, &k, &v))
                        inode_destroy(v);
                g_hash_table_destroy(s->by_id);
                g_hash_table_destroy(s->by_key);
                pthread_mutex_destroy(&s->lock);
        }
        if (m->root)
                inode_destroy(m->root);
        free(m);
        return NULL;
}

/* A new node over fd, or over a copy of handle h (the copy in the same allocation, after the
 * Inode, whose size keeps the handle's 4-byte alignment). */
static Inode *inode_alloc(InodeMap *m, int fd, const struct file_handle *h, const struct statx *stx) {
        size_t hsize = h ? sizeof *h + h->handle_bytes : 0;
        Inode *i = calloc(1, sizeof *i + hsize);
        if (!i)
                return NULL;
        if (h) {
                i->handle = (struct file_handle *) (i + 1);
                memcpy(i->handle, h, hsize);
        }
        i->map = m;
        i->fd = fd;
        i->mount_fd = -1;
        i->key = inode_key_from_statx(stx);
        i->type = stx->stx_mode & S_IFMT;
        i->shard = key_shard(&i->key);
        pthread_mutex_init(&i->plock_mutex, NULL);
        return i;
}

int inode_map_set_root(InodeMap *m, int fd, const struct statx *stx) {
        InodeShard *s;
        Inode *i;

        if (m->root)
                return -EEXIST;
        if (!fd_budget_take(m->budget))
                return -ENFILE;
        i = inode_alloc(m, fd, NULL, stx);
        if (!i) {
                fd_budget_release(m->budget);
                return -ENOMEM;
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
        /* acq_rel: this thread's uses happen before the last one's free. */
        if (atomic_fetch_sub_explicit(&i->refs, 1, memory_order_acq_rel) == 1)
                inode_destroy(i); /* closes outside any lock */
}

static void nlookup_inc(Inode *i) {
        if (i->nlookup < UINT64_MAX) /* saturate: a count that cannot grow just never frees */
                i->nlookup++;
}

/* Whether a node and a new sighting (handle h, NULL when it has none) can be one inode: a node
 * that holds an fd pins its inode, so its number is not recycled while it lives; one remembered
 * by handle must have that very handle (it carries the generation the filesystem gives a reused
 * number). */
static bool same_inode(const Inode *i, const struct file_handle *h) {
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
        if (i && !same_inode(i, h)) {
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
static Inode *known_locked(InodeShard *s, const InodeKey *key, mode_t type, const struct file_handle *h) {
        Inode *i = g_hash_table_lookup(s->by_key, key);

        if (i && i->type == type && same_inode(i, h))
                return i;
        return NULL;
}

/* fd (O_PATH, one budget fd) or handle h on mount_fd (borrowed), whichever the new node is to
 * keep. */
static int add_lookup(InodeMap *m, int fd, const struct file_handle *h, int mount_fd, const struct statx *stx,
                      Inode **ret) {
        InodeKey key = inode_key_from_statx(stx);
        mode_t type = stx->stx_mode & S_IFMT;
        unsigned idx = key_shard(&key);
        InodeShard *s = &m->shards[idx];
        Inode *i, *n;

        /* First without allocating: most sightings by handle are of inodes the map holds (".."
         * lookups, a create that opened an existing file, a lookup that raced another), and h
         * may live on the caller's stack. */
        pthread_mutex_lock(&s->lock);
        i = known_locked(s, &key, type, h);
        if (i) {
                nlookup_inc(i);
                inode_ref(i);
        }
        pthread_mutex_unlock(&s->lock);
        if (i) {
                fd_budget_close(m->budget, fd);
                *ret = i;
                return 0;
        }

        /* A new node, allocated without the lock (no allocator under it); thrown away if another
         * thread linked the inode meanwhile. */
        n = inode_alloc(m, fd, h, stx);
        if (!n) {
                fd_budget_close(m->budget, fd);
                return -ENOMEM;
        }
        n->mount_fd = h ? mount_fd : -1;
        pthread_mutex_lock(&s->lock);
        i = known_locked(s, &key, type, h);
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
        }
        pthread_mutex_unlock(&s->lock);
        if (n) {
                pthread_mutex_destroy(&n->plock_mutex);
                free(n);
                fd_budget_close(m->budget, fd);
        }
        *ret = i;
        return 0;
}

int inode_map_add_lookup(InodeMap *m, int fd, const struct statx *stx, Inode **ret) {
        return add_lookup(m, fd, NULL, -1, stx, ret);
}

int inode_map_add_lookup_handle(InodeMap *m, const struct file_handle *h, int mount_fd, const struct statx *stx,
                                Inode **ret) {
        return add_lookup(m, -1, h, mount_fd, stx, ret);
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
