/* handle-map.c: the fh table. */
#include "handle-map.h"
#include "session-journal.h"

#include <errno.h>
#include <fcntl.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <stdlib.h>
#include <string.h>


typedef struct HandleShard {
        /* Guards the table and next_seq: critical sections are one hash operation, and fds are
         * closed after unlocking. */
        pthread_mutex_t lock;
        GHashTable *by_fh; /* uint64_t* fh -> Handle* */
        uint64_t next_seq; /* the next fh is next_seq << HANDLE_MAP_SHARD_BITS | shard */
} __attribute__((aligned(64))) HandleShard; /* a cache line each */

struct HandleMap {
        FdBudget *budget;
        DirStreamPool dir_pool; /* the read-ahead of every directory handle, under one cap */
        HandleShard shards[HANDLE_MAP_SHARDS];
};

int handle_map_new(HandleMap **ret, FdBudget *budget) {
        /* aligned_alloc: the shards' alignment is part of their type. */
        HandleMap *m = aligned_alloc(_Alignof(HandleMap), sizeof(HandleMap));

        if (!m)
                return -ENOMEM;
        memset(m, 0, sizeof *m);
        m->budget = budget;
        dir_stream_pool_init(&m->dir_pool, 0);
        for (unsigned k = 0; k < HANDLE_MAP_SHARDS; k++) {
                HandleShard *s = &m->shards[k];
                pthread_mutex_init(&s->lock, NULL);
                s->by_fh = g_hash_table_new(g_int64_hash, g_int64_equal);
                s->next_seq = 1; /* fh 0 is never issued */
        }
        *ret = m;
        return 0;
}

void handle_map_set_dir_buffer_max(HandleMap *m, uint64_t max) {
        dir_stream_pool_done(&m->dir_pool);
        dir_stream_pool_init(&m->dir_pool, max);
}

uint64_t handle_map_dir_buffered(HandleMap *m) {
        return dir_stream_pool_used(&m->dir_pool);
}

uint64_t handle_map_dir_drops(HandleMap *m) {
        return dir_stream_pool_drops(&m->dir_pool);
}

static void handle_destroy(Handle *h) {
        fd_budget_close(h->map->budget, h->fd);
        if (h->charged)
                fd_budget_release(h->map->budget);
        dir_stream_done(&h->stream);
        pthread_mutex_destroy(&h->dir_lock);
        pthread_mutex_destroy(&h->flock_lock);
        inode_unref(h->inode);
        free(h);
}

HandleMap *handle_map_free(HandleMap *m) {
        if (!m)
                return NULL;
        handle_map_clear(m);
        for (unsigned k = 0; k < HANDLE_MAP_SHARDS; k++) {
                g_hash_table_destroy(m->shards[k].by_fh);
                pthread_mutex_destroy(&m->shards[k].lock);
        }
        dir_stream_pool_done(&m->dir_pool);
        free(m);
        return NULL;
}

/* Any fh a guest sends picks a shard; one never issued is simply not found there. */
static HandleShard *fh_shard(HandleMap *m, uint64_t fh) {
        return &m->shards[fh & (HANDLE_MAP_SHARDS - 1)];
}

static Handle *handle_alloc(HandleMap *m, Inode *inode, int fd, int flags, bool dir) {
        Handle *h = calloc(1, sizeof *h);

        if (!h) {
                fd_budget_close(m->budget, fd);
                return NULL;
        }
        h->map = m;
        h->inode = inode_ref(inode);
        h->fd = fd;
        h->flags = flags;
        h->dir = dir;
        h->refs = 1;
        pthread_mutex_init(&h->dir_lock, NULL);
        pthread_mutex_init(&h->flock_lock, NULL);
        h->flock_type = F_UNLCK;
        h->flock_pending = F_UNLCK;
        dir_stream_init(&h->stream, dir ? &m->dir_pool : NULL);
        return h;
}

int handle_map_insert(HandleMap *m, uint64_t fh, Inode *inode, int fd, int flags, bool dir) {
        HandleShard *s = fh_shard(m, fh);
        Handle *h;

        if (fh == 0) {
                fd_budget_close(m->budget, fd);
                return -EINVAL;
        }
        /* No fd, no charge otherwise: four million such handles held 700 MB under any fd budget. */
        if (fd < 0 && !fd_budget_take(m->budget))
                return -ENFILE;
        h = handle_alloc(m, inode, fd, flags, dir);
        if (!h) {
                if (fd < 0)
                        fd_budget_release(m->budget);
                return -ENOMEM;
        }
        h->charged = fd < 0;
        h->fh = fh;
        pthread_mutex_lock(&s->lock);
        if (g_hash_table_contains(s->by_fh, &fh)) {
                pthread_mutex_unlock(&s->lock);
                handle_unref(h);
                return -EEXIST;
        }
        g_hash_table_insert(s->by_fh, &h->fh, h);
        if (s->next_seq <= fh >> HANDLE_MAP_SHARD_BITS)
                s->next_seq = (fh >> HANDLE_MAP_SHARD_BITS) + 1;
        pthread_mutex_unlock(&s->lock);
        return 0;
}

int handle_map_foreach(HandleMap *m, int (*fn)(Handle *h, void *ud), void *ud) {
        g_autoptr(GPtrArray) all = g_ptr_array_new();
        GHashTableIter it;
        gpointer k, v;
        int r = 0;

        for (unsigned n = 0; n < HANDLE_MAP_SHARDS; n++) {
                HandleShard *s = &m->shards[n];
                pthread_mutex_lock(&s->lock);
                g_hash_table_iter_init(&it, s->by_fh);
                while (g_hash_table_iter_next(&it, &k, &v)) {
                        atomic_fetch_add_explicit(&((Handle *) v)->refs, 1, memory_order_relaxed);
                        g_ptr_array_add(all, v);
                }
                pthread_mutex_unlock(&s->lock);
        }
        for (guint j = 0; j < all->len; j++) {
                if (r >= 0)
                        r = fn(all->pdata[j], ud);
                else
                        handle_unref(all->pdata[j]);
        }
        return r;
}

int handle_map_add(HandleMap *m, Inode *inode, int fd, int flags, bool dir, uint64_t *ret_fh) {
        unsigned idx = inode->nodeid & (HANDLE_MAP_SHARDS - 1);
        HandleShard *s = &m->shards[idx];
        Handle *h = handle_alloc(m, inode, fd, flags, dir);

        if (!h)
                return -ENOMEM;
        pthread_mutex_lock(&s->lock);
        h->fh = s->next_seq++ << HANDLE_MAP_SHARD_BITS | idx;
        g_hash_table_insert(s->by_fh, &h->fh, h);
        pthread_mutex_unlock(&s->lock);
        /* Before the reply that gives the guest the fh: nothing else uses it until then. */
        journal_handle(h);
        *ret_fh = h->fh;
        return 0;
}

static Handle *find_locked(HandleShard *s, uint64_t fh, uint64_t nodeid, int want_dir) {
        Handle *h = g_hash_table_lookup(s->by_fh, &fh);
        if (!h || h->inode->nodeid != nodeid)
                return NULL;
        if (want_dir >= 0 && h->dir != !!want_dir)
                return NULL;
        return h;
}

static int get(HandleMap *m, uint64_t fh, uint64_t nodeid, int want_dir, bool even_lost, Handle **ret) {
        HandleShard *s = fh_shard(m, fh);
        Handle *h;

        pthread_mutex_lock(&s->lock);
        h = find_locked(s, fh, nodeid, want_dir);
        if (h && !even_lost && atomic_load(&h->lock_lost))
                h = NULL; /* its lock was lost (locks.c): EBADF as a handle never issued */
        if (h) /* relaxed: the table's reference keeps it alive while we hold the lock */
                atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
        pthread_mutex_unlock(&s->lock);
        if (!h)
                return -EBADF;
        *ret = h;
        return 0;
}

int handle_map_get(HandleMap *m, uint64_t fh, uint64_t nodeid, int want_dir, Handle **ret) {
        return get(m, fh, nodeid, want_dir, false, ret);
}

int handle_map_get_to_release(HandleMap *m, uint64_t fh, uint64_t nodeid, Handle **ret) {
        return get(m, fh, nodeid, 0, true, ret);
}

void handle_unref(Handle *h) {
        /* acq_rel: this thread's uses happen before the last one's close. */
        if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
                handle_destroy(h);
}

int handle_map_remove(HandleMap *m, uint64_t fh, uint64_t nodeid, int want_dir) {
        HandleShard *s = fh_shard(m, fh);
        Handle *h;

        pthread_mutex_lock(&s->lock);
        h = find_locked(s, fh, nodeid, want_dir);
        if (h) {
                g_hash_table_remove(s->by_fh, &fh);
                atomic_store(&h->released, true);
        }
        pthread_mutex_unlock(&s->lock);
        if (!h)
                return -EBADF;
        journal_handle_gone(fh);
        handle_unref(h); /* the table's reference; closes now unless a request still uses it */
        return 0;
}

void handle_map_skip_ids(HandleMap *m, uint64_t seq) {
        for (unsigned n = 0; n < HANDLE_MAP_SHARDS; n++) {
                HandleShard *s = &m->shards[n];
                pthread_mutex_lock(&s->lock);
                s->next_seq = MAX(s->next_seq, seq);
                pthread_mutex_unlock(&s->lock);
        }
}

void handle_map_clear(HandleMap *m) {
        g_autoptr(GPtrArray) gone = g_ptr_array_new();
        GHashTableIter it;
        gpointer k, v;

        for (unsigned n = 0; n < HANDLE_MAP_SHARDS; n++) {
                HandleShard *s = &m->shards[n];
                pthread_mutex_lock(&s->lock);
                g_hash_table_iter_init(&it, s->by_fh);
                while (g_hash_table_iter_next(&it, &k, &v)) {
                        g_hash_table_iter_steal(&it);
                        atomic_store(&((Handle *) v)->released, true);
                        g_ptr_array_add(gone, v);
                }
                pthread_mutex_unlock(&s->lock);
        }
        for (guint j = 0; j < gone->len; j++)
                handle_unref(gone->pdata[j]);
}

unsigned handle_map_size(HandleMap *m) {
        unsigned n = 0;

        for (unsigned k = 0; k < HANDLE_MAP_SHARDS; k++) {
                HandleShard *s = &m->shards[k];
                pthread_mutex_lock(&s->lock);
                n += g_hash_table_size(s->by_fh);
                pthread_mutex_unlock(&s->lock);
        }
        return n;
}
