/* handle-map.c: the fh table. */
#include "handle-map.h"

#include <errno.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <stdlib.h>


struct HandleMap {
        /* Guards the table and every handle's refs: critical sections are one hash operation and
         * a counter, and fds are closed after unlocking. */
        pthread_mutex_t lock;
        GHashTable *by_fh; /* uint64_t* fh -> Handle* */
        uint64_t next_fh;
        FdBudget *budget;
};

int handle_map_new(HandleMap **ret, FdBudget *budget) {
        HandleMap *m = calloc(1, sizeof *m);

        if (!m)
                return -ENOMEM;
        pthread_mutex_init(&m->lock, NULL);
        m->by_fh = g_hash_table_new(g_int64_hash, g_int64_equal);
        m->next_fh = 1;
        m->budget = budget;
        *ret = m;
        return 0;
}

static void handle_destroy(Handle *h) {
        safe_close(h->fd);
        fd_budget_release(h->map->budget);
        dir_stream_done(&h->stream);
        pthread_mutex_destroy(&h->dir_lock);
        inode_unref(h->inode);
        free(h);
}

HandleMap *handle_map_free(HandleMap *m) {
        if (!m)
                return NULL;
        if (m->by_fh) {
                handle_map_clear(m);
                g_hash_table_destroy(m->by_fh);
        }
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
}

int handle_map_add(HandleMap *m, Inode *inode, int fd, int flags, bool dir, uint64_t *ret_fh) {
        Handle *h = calloc(1, sizeof *h);

        if (!h) {
                safe_close(fd);
                fd_budget_release(m->budget);
                return -ENOMEM;
        }
        h->map = m;
        h->inode = inode_ref(inode);
        h->fd = fd;
        h->flags = flags;
        h->dir = dir;
        h->refs = 1;
        pthread_mutex_init(&h->dir_lock, NULL);
        pthread_mutex_lock(&m->lock);
        h->fh = m->next_fh++;
        g_hash_table_insert(m->by_fh, &h->fh, h);
        pthread_mutex_unlock(&m->lock);
        *ret_fh = h->fh;
        return 0;
}

static Handle *find_locked(HandleMap *m, uint64_t fh, uint64_t nodeid, int want_dir) {
        Handle *h = g_hash_table_lookup(m->by_fh, &fh);
        if (!h || h->inode->nodeid != nodeid)
                return NULL;
        if (want_dir >= 0 && h->dir != !!want_dir)
                return NULL;
        return h;
}

int handle_map_get(HandleMap *m, uint64_t fh, uint64_t nodeid, int want_dir, Handle **ret) {
        Handle *h;

        pthread_mutex_lock(&m->lock);
        h = find_locked(m, fh, nodeid, want_dir);
        if (h)
                h->refs++;
        pthread_mutex_unlock(&m->lock);
        if (!h)
                return -EBADF;
        *ret = h;
        return 0;
}

void handle_unref(Handle *h) {
        HandleMap *m = h->map;
        bool dead;

        pthread_mutex_lock(&m->lock);
        dead = --h->refs == 0;
        pthread_mutex_unlock(&m->lock);
        if (dead)
                handle_destroy(h);
}

int handle_map_remove(HandleMap *m, uint64_t fh, uint64_t nodeid, int want_dir) {
        Handle *h;
        bool dead = false;

        pthread_mutex_lock(&m->lock);
        h = find_locked(m, fh, nodeid, want_dir);
        if (h) {
                g_hash_table_remove(m->by_fh, &fh);
                dead = --h->refs == 0;
        }
        pthread_mutex_unlock(&m->lock);
        if (!h)
                return -EBADF;
        if (dead)
                handle_destroy(h);
        return 0;
}

void handle_map_clear(HandleMap *m) {
        GHashTableIter it;
        gpointer k, v;
        GPtrArray *dead = g_ptr_array_new();

        pthread_mutex_lock(&m->lock);
        g_hash_table_iter_init(&it, m->by_fh);
        while (g_hash_table_iter_next(&it, &k, &v)) {
                Handle *h = v;
                g_hash_table_iter_remove(&it);
                if (--h->refs == 0)
                        g_ptr_array_add(dead, h);
        }
        pthread_mutex_unlock(&m->lock);
        for (guint j = 0; j < dead->len; j++)
                handle_destroy(dead->pdata[j]);
        g_ptr_array_free(dead, TRUE);
}

unsigned handle_map_size(HandleMap *m) {
        unsigned n;
        pthread_mutex_lock(&m->lock);
        n = g_hash_table_size(m->by_fh);
        pthread_mutex_unlock(&m->lock);
        return n;
}
