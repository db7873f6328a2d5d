/* state-journal.c: a SessionState from a journal of records kept one entry at a time
 * (session-state.h, "journal"). */
#include <errno.h>
#include <string.h>

#include "state-internal.h"

/* Drops from array a (of elements of size sz) every element keep() refuses; returns how many. */
static size_t filter(GArray *a, bool (*keep)(const void *x, void *ud), void (*drop)(void *x), void *ud) {
        size_t gone = 0;

        for (guint i = a->len; i-- > 0;) {
                void *x = a->data + (size_t) i * g_array_get_element_size(a);
                if (keep(x, ud))
                        continue;
                if (drop)
                        drop(x);
                g_array_remove_index_fast(a, i);
                gone++;
        }
        return gone;
}

static bool node_has_parent(const void *x, void *ud) {
        const StateNode *n = x;
        return n->parent == 0 || n->parent == STATE_ROOT_ID || g_hash_table_contains(ud, GSIZE_TO_POINTER(n->parent));
}

static void node_drop(void *x) {
        free(((StateNode *) x)->name);
}

static bool handle_has_node(const void *x, void *ud) {
        const StateHandle *h = x;
        return h->node == STATE_ROOT_ID || g_hash_table_contains(ud, GSIZE_TO_POINTER(h->node));
}

static bool lock_has_handle(const void *x, void *ud) {
        const StateLock *l = x;
        const StateHandle *h = g_hash_table_lookup(ud, &l->fh);
        return h && h->node == l->node;
}

/* The node ids of s, as values (ids are below 2^62: they fit a pointer of a 64-bit host, which is
 * all vufsd builds for), so that removing from the array does not move the keys. */
G_STATIC_ASSERT(sizeof(gsize) >= sizeof(uint64_t));
static GHashTable *node_ids(SessionState *s) {
        GHashTable *ids = g_hash_table_new(g_direct_hash, g_direct_equal);

        for (guint i = 0; i < s->nodes->len; i++)
                g_hash_table_add(ids, GSIZE_TO_POINTER(g_array_index(s->nodes, StateNode, i).id));
        return ids;
}

int session_state_from_journal(const StateSession *session, const StateJournalEntry *e, size_t n, uint64_t max_nodes,
                               SessionState **ret, size_t *ret_dropped, int32_t *ret_fd_entry, char *err,
                               size_t errlen) {
        _cleanup_(session_state_freep) SessionState *s = NULL;
        g_autoptr(GHashTable) fhs = g_hash_table_new(g_int64_hash, g_int64_equal);
        size_t dropped = 0;
        int32_t n_slots = 0;
        int r;

        r = session_state_new(&s);
        if (r < 0)
                return r;
        for (size_t k = 0; k < n; k++) {
                guint nodes = s->nodes->len, handles = s->handles->len, locks = s->locks->len;
                bool has_slot = false;

                /* Each entry through the reader's record checks; one that fails is dropped alone
                 * (its records removed again), with the first reason kept. */
                r = state_read_records(s, e[k].data, e[k].len, UINT32_MAX, max_nodes, err, errlen);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || s->has_session) {
                        for (guint i = nodes; i < s->nodes->len; i++)
                                node_drop(&g_array_index(s->nodes, StateNode, i));
                        g_array_set_size(s->nodes, nodes);
                        g_array_set_size(s->handles, handles);
                        g_array_set_size(s->locks, locks);
                        s->has_session = false;
                        dropped++;
                        continue;
                }
                /* A record's fd slot names its entry's fd, whatever number the writer put there. */
#define SLOT(arr, type, from)                                                          \
        for (guint i = from; i < s->arr->len; i++) {                                   \
                type *x = &g_array_index(s->arr, type, i);                             \
                if (x->fd_slot >= 0 && e[k].fd >= 0 && !has_slot) {                    \
                        x->fd_slot = n_slots;                                          \
                        has_slot = true;                                               \
                } else                                                                 \
                        x->fd_slot = -1;                                               \
        }
                SLOT(nodes, StateNode, nodes)
                SLOT(handles, StateHandle, handles)
                SLOT(locks, StateLock, locks)
#undef SLOT
                if (has_slot)
                        ret_fd_entry[n_slots++] = (int32_t) k;
        }
        if (err && errlen)
                err[0] = '\0';
        /* What a death between two entries of one change can leave: a node whose parent is
         * gone, a handle whose node is, a lock whose handle is. Dropped until none is left. */
        for (size_t gone = 1; gone > 0;) {
                g_autoptr(GHashTable) ids = node_ids(s);
                gone = filter(s->nodes, node_has_parent, node_drop, ids);
                dropped += gone;
        }
        {
                g_autoptr(GHashTable) ids = node_ids(s);
                dropped += filter(s->handles, handle_has_node, NULL, ids);
        }
        for (guint i = 0; i < s->handles->len; i++)
                g_hash_table_insert(fhs, &g_array_index(s->handles, StateHandle, i).fh,
                                    &g_array_index(s->handles, StateHandle, i));
        dropped += filter(s->locks, lock_has_handle, NULL, fhs);
        session_state_set_session(s, session);
        r = state_check_relations(s, err, errlen);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        *ret_dropped = dropped;
        return n_slots;
}
