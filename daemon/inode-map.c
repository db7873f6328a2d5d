/* inode-map.c: nodeid and (dev, ino, mount) tables of guest-visible inodes. */
#include "inode-map.h"

#include <errno.h>
#include <fcntl.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <stdlib.h>
#include <sys/sysmacros.h>


struct InodeMap {
        /* One mutex for both tables: a lookup must find-or-insert in both atomically, and every
         * critical section is a few hash operations (no syscalls, fds are closed after unlocking),
         * so contention stays low and a rwlock would buy nothing since gets bump counters. */
        pthread_mutex_t lock;
        GHashTable *by_id;  /* uint64_t* nodeid -> Inode* */
        GHashTable *by_key; /* InodeKey* -> Inode* */
        uint64_t next_id;
        FdBudget *budget;
};

static guint key_hash(gconstpointer p) {
        const InodeKey *k = p;
        uint64_t h = k->ino * 0x9E3779B97F4A7C15ULL ^ k->dev * 0xC2B2AE3D27D4EB4FULL ^ k->mnt_id;
        return (guint) (h ^ (h >> 32));
}

static gboolean key_equal(gconstpointer a, gconstpointer b) {
        const InodeKey *x = a, *y = b;
        return x->dev == y->dev && x->ino == y->ino && x->mnt_id == y->mnt_id;
}

InodeKey inode_key_from_statx(const struct statx *stx) {
        return (InodeKey) {
                .dev = makedev(stx->stx_dev_major, stx->stx_dev_minor),
                .ino = stx->stx_ino,
                .mnt_id = (stx->stx_mask & STATX_MNT_ID) ? stx->stx_mnt_id : 0,
        };
}

int inode_map_new(InodeMap **ret, FdBudget *budget) {
        InodeMap *m = calloc(1, sizeof *m);

        if (!m)
                return -ENOMEM;
        pthread_mutex_init(&m->lock, NULL);
        m->by_id = g_hash_table_new(g_int64_hash, g_int64_equal);
        m->by_key = g_hash_table_new(key_hash, key_equal);
        m->next_id = 2; /* 0 is "no node", 1 is the root */
        m->budget = budget;
        *ret = m;
        return 0;
}

static void inode_destroy(Inode *i) {
        if (i->plocks) {
                GHashTableIter it;
                gpointer k, v;
                g_hash_table_iter_init(&it, i->plocks);
                while (g_hash_table_iter_next(&it, &k, &v)) {
                        safe_close(GPOINTER_TO_INT(v) - 1);
                        fd_budget_release(i->map->budget);
                }
                g_hash_table_destroy(i->plocks);
        }
        pthread_mutex_destroy(&i->plock_mutex);
        safe_close(i->fd);
        fd_budget_release(i->map->budget);
        free(i);
}

/* Under the lock: takes the inode out of both tables. */
static void unlink_locked(InodeMap *m, Inode *i) {
        if (!i->linked)
                return;
        g_hash_table_remove(m->by_id, &i->nodeid);
        if (g_hash_table_lookup(m->by_key, &i->key) == i)
                g_hash_table_remove(m->by_key, &i->key);
        i->linked = false;
}

InodeMap *inode_map_free(InodeMap *m) {
        GHashTableIter it;
        gpointer k, v;

        if (!m)
                return NULL;
        /* By now no request runs: every remaining inode goes, whatever its counts. */
        if (m->by_id) {
                g_hash_table_iter_init(&it, m->by_id);
                while (g_hash_table_iter_next(&it, &k, &v))
                        inode_destroy(v);
                g_hash_table_destroy(m->by_id);
        }
        if (m->by_key)
                g_hash_table_destroy(m->by_key);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
}

static Inode *inode_alloc(InodeMap *m, int fd, const struct statx *stx) {
        Inode *i = calloc(1, sizeof *i);
        if (!i)
                return NULL;
        i->map = m;
        i->fd = fd;
        i->key = inode_key_from_statx(stx);
        i->type = stx->stx_mode & S_IFMT;
        pthread_mutex_init(&i->plock_mutex, NULL);
        return i;
}

int inode_map_set_root(InodeMap *m, int fd, const struct statx *stx) {
        Inode *i;

        if (!fd_budget_take(m->budget))
                return -ENFILE;
        i = inode_alloc(m, fd, stx);
        if (!i) {
                fd_budget_release(m->budget);
                return -ENOMEM;
        }
        i->nodeid = 1;
        i->nlookup = 1;
        i->pinned = true;
        i->linked = true;
        pthread_mutex_lock(&m->lock);
        g_hash_table_insert(m->by_id, &i->nodeid, i);
        g_hash_table_insert(m->by_key, &i->key, i);
        pthread_mutex_unlock(&m->lock);
        return 0;
}

Inode *inode_map_get(InodeMap *m, uint64_t nodeid) {
        Inode *i;

        pthread_mutex_lock(&m->lock);
        i = g_hash_table_lookup(m->by_id, &nodeid);
        if (i)
                i->refs++;
        pthread_mutex_unlock(&m->lock);
        return i;
}

Inode *inode_ref(Inode *i) {
        pthread_mutex_lock(&i->map->lock);
        i->refs++;
        pthread_mutex_unlock(&i->map->lock);
        return i;
}

void inode_unref(Inode *i) {
        InodeMap *m = i->map;
        bool dead;

        pthread_mutex_lock(&m->lock);
        i->refs--;
        dead = i->refs == 0 && !i->linked;
        pthread_mutex_unlock(&m->lock);
        if (dead)
                inode_destroy(i); /* closes outside the lock */
}

static void nlookup_inc(Inode *i) {
        if (i->nlookup < UINT64_MAX) /* saturate: a count that cannot grow just never frees */
                i->nlookup++;
}

Inode *inode_map_find_lookup(InodeMap *m, const struct statx *stx) {
        InodeKey key = inode_key_from_statx(stx);
        Inode *i;

        pthread_mutex_lock(&m->lock);
        i = g_hash_table_lookup(m->by_key, &key);
        if (i && i->type == (stx->stx_mode & S_IFMT)) {
                nlookup_inc(i);
                i->refs++;
        } else
                i = NULL;
        pthread_mutex_unlock(&m->lock);
        return i;
}

int inode_map_add_lookup(InodeMap *m, int fd, const struct statx *stx, Inode **ret) {
        InodeKey key = inode_key_from_statx(stx);
        Inode *i, *n = NULL;

        /* Allocate before taking the lock; thrown away if the inode is already known. */
        n = inode_alloc(m, fd, stx);
        if (!n) {
                safe_close(fd);
                fd_budget_release(m->budget);
                return -ENOMEM;
        }
        pthread_mutex_lock(&m->lock);
        i = g_hash_table_lookup(m->by_key, &key);
        if (i && (i->type != n->type)) {
                /* Same (dev, ino) but another type: the old node's file is gone and the number was
                 * recycled while we held no pin on it. The new file gets its own node. */
                g_hash_table_remove(m->by_key, &i->key);
                i = NULL;
        }
        if (i) {
                nlookup_inc(i);
                i->refs++;
        } else {
                i = TAKE_PTR(n);
                i->nodeid = m->next_id++;
                i->nlookup = 1;
                i->refs = 1;
                i->linked = true;
                g_hash_table_insert(m->by_id, &i->nodeid, i);
                g_hash_table_insert(m->by_key, &i->key, i);
        }
        pthread_mutex_unlock(&m->lock);
        if (n) {
                pthread_mutex_destroy(&n->plock_mutex);
                free(n);
                safe_close(fd);
                fd_budget_release(m->budget);
        }
        *ret = i;
        return 0;
}

void inode_map_lookup_again(Inode *i) {
        pthread_mutex_lock(&i->map->lock);
        nlookup_inc(i);
        pthread_mutex_unlock(&i->map->lock);
}

void inode_map_forget(InodeMap *m, uint64_t nodeid, uint64_t n) {
        Inode *i;
        bool dead = false;

        pthread_mutex_lock(&m->lock);
        i = g_hash_table_lookup(m->by_id, &nodeid);
        if (i && !i->pinned) {
                i->nlookup = n >= i->nlookup ? 0 : i->nlookup - n;
                if (i->nlookup == 0) {
                        unlink_locked(m, i);
                        dead = i->refs == 0;
                }
        }
        pthread_mutex_unlock(&m->lock);
        if (dead)
                inode_destroy(i);
}

void inode_map_clear(InodeMap *m) {
        GHashTableIter it;
        gpointer k, v;
        GPtrArray *dead = g_ptr_array_new();

        pthread_mutex_lock(&m->lock);
        g_hash_table_iter_init(&it, m->by_id);
        while (g_hash_table_iter_next(&it, &k, &v)) {
                Inode *i = v;
                if (i->pinned)
                        continue;
                if (g_hash_table_lookup(m->by_key, &i->key) == i)
                        g_hash_table_remove(m->by_key, &i->key);
                g_hash_table_iter_remove(&it);
                i->linked = false;
                i->nlookup = 0;
                if (i->refs == 0)
                        g_ptr_array_add(dead, i);
        }
        pthread_mutex_unlock(&m->lock);
        for (guint j = 0; j < dead->len; j++)
                inode_destroy(dead->pdata[j]);
        g_ptr_array_free(dead, TRUE);
}

unsigned inode_map_size(InodeMap *m) {
        unsigned n;
        pthread_mutex_lock(&m->lock);
        n = g_hash_table_size(m->by_id);
        pthread_mutex_unlock(&m->lock);
        return n;
}
