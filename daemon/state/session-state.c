/* session-state.c: the records of a session's state and the checks that tie them together. */
#include "session-state.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>

#include "state-internal.h"

int session_state_new(SessionState **ret) {
        SessionState *s = calloc(1, sizeof *s);

        if (!s)
                return -ENOMEM;
        s->nodes = g_array_new(false, true, sizeof(StateNode));
        s->handles = g_array_new(false, true, sizeof(StateHandle));
        s->locks = g_array_new(false, true, sizeof(StateLock));
        *ret = s;
        return 0;
}

SessionState *session_state_free(SessionState *s) {
        if (!s)
                return NULL;
        for (guint i = 0; i < s->nodes->len; i++)
                free(g_array_index(s->nodes, StateNode, i).name);
        g_array_free(s->nodes, true);
        g_array_free(s->handles, true);
        g_array_free(s->locks, true);
        if (s->index)
                g_hash_table_destroy(s->index);
        free(s);
        return NULL;
}

int state_error(char *err, size_t errlen, int r, const char *fmt, ...) {
        va_list ap;

        if (err && errlen > 0) {
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return r;
}

void session_state_set_session(SessionState *s, const StateSession *session) {
        s->session = *session;
        s->has_session = true;
}

const StateSession *session_state_session(const SessionState *s) {
        return s->has_session ? &s->session : NULL;
}

/* One name, or a relative path of several names separated by single slashes: each name 1 to
 * STATE_NAME_MAX bytes, none "." or "..", no NUL anywhere. */
int state_check_name(const char *name, size_t len, char *err, size_t errlen) {
        size_t start = 0;

        if (len == 0 || len > STATE_PATH_MAX)
                return state_error(err, errlen, -EBADMSG, "a name of %zu bytes (1 to %u allowed)", len, STATE_PATH_MAX);
        if (memchr(name, '\0', len))
                return state_error(err, errlen, -EBADMSG, "a name holds NUL");
        while (start <= len) {
                const char *slash = memchr(name + start, '/', len - start);
                size_t end = slash ? (size_t) (slash - name) : len, n = end - start;
                const char *c = name + start;
                if (n == 0)
                        return state_error(err, errlen, -EBADMSG, "a name with an empty component (a leading, trailing or double '/')");
                if (n > STATE_NAME_MAX)
                        return state_error(err, errlen, -EBADMSG, "a component of %zu bytes (at most %u)", n, STATE_NAME_MAX);
                if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return state_error(err, errlen, -EBADMSG, "a name with a \".\" or \"..\" component");
                start = end + 1;
        }
        return 0;
}

/* What one node record may hold, alone. */
int state_check_node(const StateNode *n, char *err, size_t errlen) {
        int r;

        if (n->id == 0 || n->id == STATE_ROOT_ID || n->id > STATE_ID_MAX)
                return state_error(err, errlen, -EBADMSG,
                                   "node id %" PRIu64 " (0 and the root are never records, at most %" PRIu64 ")", n->id,
                                   (uint64_t) STATE_ID_MAX);
        if (n->handle_len > STATE_HANDLE_MAX)
                return state_error(err, errlen, -EBADMSG, "node %" PRIu64 ": a file handle of %u bytes", n->id,
                                   n->handle_len);
        if (n->fd_slot < -1)
                return state_error(err, errlen, -EBADMSG, "node %" PRIu64 ": fd slot %d", n->id, n->fd_slot);
        if ((n->parent == 0) != (n->name == NULL))
                return state_error(err, errlen, -EBADMSG, "node %" PRIu64 ": a parent without a name or a name without one",
                                   n->id);
        if (n->name) {
                r = state_check_name(n->name, strlen(n->name), err, errlen);
                if (r < 0)
                        return state_error(err, errlen, r, "node %" PRIu64 ": bad name", n->id);
        }
        if (n->parent == n->id)
                return state_error(err, errlen, -EBADMSG, "node %" PRIu64 " is its own parent", n->id);
        return 0;
}

int state_check_handle(const StateHandle *h, char *err, size_t errlen) {
        if (h->fh == 0 || h->fh > STATE_ID_MAX)
                return state_error(err, errlen, -EBADMSG, "handle %" PRIu64 " (fh 0 is never issued, at most %" PRIu64 ")",
                                   h->fh, (uint64_t) STATE_ID_MAX);
        if (h->node == 0)
                return state_error(err, errlen, -EBADMSG, "handle %" PRIu64 " on node 0", h->fh);
        if (h->fd_slot < -1)
                return state_error(err, errlen, -EBADMSG, "handle %" PRIu64 ": fd slot %d", h->fh, h->fd_slot);
        return 0;
}

/* What one lock record may hold, alone. */
int state_check_lock(const StateLock *l, char *err, size_t errlen) {
        if (l->fh == 0 || l->node == 0)
                return state_error(err, errlen, -EBADMSG, "a lock through handle %" PRIu64 " on node %" PRIu64, l->fh,
                                   l->node);
        if (l->kind != STATE_LOCK_POSIX && l->kind != STATE_LOCK_FLOCK)
                return state_error(err, errlen, -EBADMSG, "lock through handle %" PRIu64 ": unknown kind %u", l->fh,
                                   l->kind);
        if (l->type != STATE_LOCK_READ && l->type != STATE_LOCK_WRITE)
                return state_error(err, errlen, -EBADMSG, "lock through handle %" PRIu64 ": bad type %u", l->fh, l->type);
        if (l->start > l->end)
                return state_error(err, errlen, -EBADMSG, "lock through handle %" PRIu64 ": start %" PRIu64 " > end %" PRIu64,
                                   l->fh, l->start, l->end);
        if (l->end > STATE_LOCK_END_MAX)
                return state_error(err, errlen, -EBADMSG, "lock through handle %" PRIu64 ": end %" PRIu64 " past the largest offset",
                                   l->fh, l->end);
        if (l->fd_slot < -1)
                return state_error(err, errlen, -EBADMSG, "lock through handle %" PRIu64 ": fd slot %d", l->fh, l->fd_slot);
        if (l->kind == STATE_LOCK_FLOCK && (l->start != 0 || l->end != STATE_LOCK_END_MAX || l->fd_slot != -1))
                return state_error(err, errlen, -EBADMSG, "flock through handle %" PRIu64 ": not the whole file, or an fd slot",
                                   l->fh);
        return 0;
}

int session_state_add_node(SessionState *s, const StateNode *n) {
        StateNode c = *n;
        int r = state_check_node(n, NULL, 0);

        if (r < 0)
                return -EINVAL;
        if (s->nodes->len >= STATE_MAX_NODES)
                return -E2BIG;
        c.name = NULL;
        if (n->name) {
                c.name = strdup(n->name);
                if (!c.name)
                        return -ENOMEM;
        }
        g_array_append_val(s->nodes, c);
        if (s->index) { /* rebuilt by the next check */
                g_hash_table_destroy(s->index);
                s->index = NULL;
        }
        return 0;
}

/* One record more in a, at most cap: -E2BIG past it. */
static int append_record(GArray *a, const void *x, guint cap) {
        if (a->len >= cap)
                return -E2BIG;
        g_array_append_vals(a, x, 1);
        return 0;
}

int session_state_add_handle(SessionState *s, const StateHandle *h) {
        if (state_check_handle(h, NULL, 0) < 0)
                return -EINVAL;
        return append_record(s->handles, h, STATE_MAX_HANDLES);
}

int session_state_add_lock(SessionState *s, const StateLock *l) {
        if (state_check_lock(l, NULL, 0) < 0)
                return -EINVAL;
        return append_record(s->locks, l, STATE_MAX_LOCKS);
}

size_t session_state_lock_count(const SessionState *s) {
        return s->locks->len;
}

const StateLock *session_state_lock(const SessionState *s, size_t i) {
        return i < s->locks->len ? &g_array_index(s->locks, StateLock, i) : NULL;
}

size_t session_state_node_count(const SessionState *s) {
        return s->nodes->len;
}

const StateNode *session_state_node(const SessionState *s, size_t i) {
        return i < s->nodes->len ? &g_array_index(s->nodes, StateNode, i) : NULL;
}

size_t session_state_handle_count(const SessionState *s) {
        return s->handles->len;
}

const StateHandle *session_state_handle(const SessionState *s, size_t i) {
        return i < s->handles->len ? &g_array_index(s->handles, StateHandle, i) : NULL;
}

const StateNode *session_state_find_node(const SessionState *s, uint64_t id) {
        gpointer v;

        if (!s->index) { /* still being built: the index comes with the checks */
                for (guint i = 0; i < s->nodes->len; i++)
                        if (g_array_index(s->nodes, StateNode, i).id == id)
                                return &g_array_index(s->nodes, StateNode, i);
                return NULL;
        }
        v = g_hash_table_lookup(s->index, &id);
        return v ? &g_array_index(s->nodes, StateNode, GPOINTER_TO_UINT(v) - 1) : NULL;
}

/* Marks fd slot k used: -EBADMSG when it was. */
static int take_slot(GHashTable *slots, int32_t k, const char *what, uint64_t id, char *err, size_t errlen) {
        if (k < 0)
                return 0;
        /* Unsigned: slot INT32_MAX + 1 must not overflow (found by fuzz-state). */
        if (!g_hash_table_add(slots, GUINT_TO_POINTER((guint) k + 1u)))
                return state_error(err, errlen, -EBADMSG, "%s %" PRIu64 ": fd slot %d used twice", what, id, k);
        return 0;
}

/* Reorders the nodes so that every parent comes before its children (depth-first from each node up
 * its chain of parents, iteratively: a hostile chain of millions of nodes needs no stack). A chain
 * that comes back to a node on it is a loop. */
static int order_parents_first(SessionState *s, char *err, size_t errlen) {
        guint n = s->nodes->len;
        g_autofree uint8_t *mark = g_new0(uint8_t, n);  /* 0 new, 1 on the current chain, 2 placed */
        g_autofree guint *chain = g_new(guint, n);
        GArray *out = g_array_sized_new(false, true, sizeof(StateNode), n);

        for (guint i = 0; i < n; i++) {
                guint depth = 0, k = i;
                bool top = false;
                while (mark[k] == 0) {
                        const StateNode *x = &g_array_index(s->nodes, StateNode, k);
                        mark[k] = 1;
                        chain[depth++] = k;
                        if (x->parent == 0 || x->parent == STATE_ROOT_ID) {
                                top = true;
                                break;
                        }
                        k = GPOINTER_TO_UINT(g_hash_table_lookup(s->index, &x->parent)) - 1;
                }
                if (!top && mark[k] == 1) { /* back on this very chain: every earlier one is placed */
                        g_array_free(out, true);
                        return state_error(err, errlen, -EBADMSG, "node %" PRIu64 ": its parents loop",
                                           g_array_index(s->nodes, StateNode, k).id);
                }
                while (depth > 0) { /* the top of the chain first */
                        guint c = chain[--depth];
                        mark[c] = 2;
                        g_array_append_val(out, g_array_index(s->nodes, StateNode, c));
                }
        }
        g_array_free(s->nodes, true); /* the names moved to out */
        s->nodes = out;
        return 0;
}

/* A POSIX lock owner on a node: the key of its ranges. */
static guint owner_hash(gconstpointer p) {
        const StateLock *l = p;
        return g_int64_hash(&l->owner) * 31u + g_int64_hash(&l->node);
}

static gboolean owner_equal(gconstpointer a, gconstpointer b) {
        const StateLock *x = a, *y = b;
        return x->owner == y->owner && x->node == y->node;
}

/* POSIX ranges by owner, node and start: the order overlaps are found in. */
static gint by_owner_start(gconstpointer a, gconstpointer b) {
        const StateLock *x = *(StateLock *const *) a, *y = *(StateLock *const *) b;

        if (x->owner != y->owner)
                return x->owner < y->owner ? -1 : 1;
        if (x->node != y->node)
                return x->node < y->node ? -1 : 1;
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return 0;
}

/* The locks against the handles (fhs: fh -> StateHandle) and one another. */
static int check_locks(SessionState *s, GHashTable *fhs, GHashTable *slots, char *err, size_t errlen) {
        g_autoptr(GHashTable) owners = g_hash_table_new(owner_hash, owner_equal); /* first record of each */
        g_autoptr(GHashTable) with_slot = g_hash_table_new(owner_hash, owner_equal);
        g_autoptr(GHashTable) flocks = g_hash_table_new(g_int64_hash, g_int64_equal);
        g_autoptr(GPtrArray) posix = g_ptr_array_new();
        int r;

        for (guint i = 0; i < s->locks->len; i++) {
                StateLock *l = &g_array_index(s->locks, StateLock, i);
                const StateHandle *h = g_hash_table_lookup(fhs, &l->fh);
                StateLock *first;
                if (l->node != STATE_ROOT_ID && !session_state_find_node(s, l->node))
                        return state_error(err, errlen, -EBADMSG, "a lock on node %" PRIu64 ", which is not in the state", l->node);
                if (!h)
                        return state_error(err, errlen, -EBADMSG, "a lock through handle %" PRIu64 ", which is not in the state",
                                           l->fh);
                if (h->node != l->node)
                        return state_error(err, errlen, -EBADMSG, "a lock on node %" PRIu64 " through handle %" PRIu64 " of node %" PRIu64,
                                           l->node, l->fh, h->node);
                r = take_slot(slots, l->fd_slot, "lock through handle", l->fh, err, errlen);
                if (r < 0)
                        return r;
                if (l->kind == STATE_LOCK_FLOCK) {
                        if (!g_hash_table_add(flocks, &l->fh))
                                return state_error(err, errlen, -EBADMSG, "two flocks through handle %" PRIu64, l->fh);
                        continue;
                }
                g_ptr_array_add(posix, l);
                if (l->fd_slot >= 0 && !g_hash_table_add(with_slot, l))
                        return state_error(err, errlen, -EBADMSG, "lock owner %" PRIx64 " on node %" PRIu64 " with two fd slots",
                                           l->owner, l->node);
                first = g_hash_table_lookup(owners, l);
                if (!first)
                        g_hash_table_add(owners, l);
                else if (first->fh != l->fh)
                        return state_error(err, errlen, -EBADMSG, "lock owner %" PRIx64 " on node %" PRIu64 " through two handles",
                                           l->owner, l->node);
        }
        g_ptr_array_sort(posix, by_owner_start);
        for (guint i = 1; i < posix->len; i++) {
                const StateLock *a = posix->pdata[i - 1], *b = posix->pdata[i];
                if (a->owner == b->owner && a->node == b->node && a->end >= b->start)
                        return state_error(err, errlen, -EBADMSG, "lock owner %" PRIx64 " on node %" PRIu64 ": ranges overlap at %" PRIu64,
                                           b->owner, b->node, b->start);
        }
        return 0;
}

int state_check_relations(SessionState *s, char *err, size_t errlen) {
        g_autoptr(GHashTable) fhs = g_hash_table_new(g_int64_hash, g_int64_equal);
        g_autoptr(GHashTable) slots = g_hash_table_new(g_direct_hash, g_direct_equal);
        int r;

        if (!s->has_session)
                return state_error(err, errlen, -EBADMSG, "no session record");
        if (s->index)
                g_hash_table_destroy(s->index);
        s->index = g_hash_table_new(g_int64_hash, g_int64_equal);
        for (guint i = 0; i < s->nodes->len; i++) {
                StateNode *x = &g_array_index(s->nodes, StateNode, i);
                if (!g_hash_table_insert(s->index, &x->id, GUINT_TO_POINTER(i + 1)))
                        return state_error(err, errlen, -EBADMSG, "node %" PRIu64 " twice", x->id);
                r = take_slot(slots, x->fd_slot, "node", x->id, err, errlen);
                if (r < 0)
                        return r;
        }
        for (guint i = 0; i < s->nodes->len; i++) {
                const StateNode *x = &g_array_index(s->nodes, StateNode, i), *p;
                if (x->parent == 0 || x->parent == STATE_ROOT_ID)
                        continue;
                p = session_state_find_node(s, x->parent);
                if (!p)
                        return state_error(err, errlen, -EBADMSG, "node %" PRIu64 ": parent %" PRIu64 " is not in the state",
                                           x->id, x->parent);
                if (p->type != S_IFDIR)
                        return state_error(err, errlen, -EBADMSG, "node %" PRIu64 ": parent %" PRIu64 " is no directory", x->id,
                                           x->parent);
        }
        r = order_parents_first(s, err, errlen);
        if (r < 0)
                return r;
        /* The order moved the nodes: index them again where they are now. */
        g_hash_table_remove_all(s->index);
        for (guint i = 0; i < s->nodes->len; i++)
                g_hash_table_insert(s->index, &g_array_index(s->nodes, StateNode, i).id, GUINT_TO_POINTER(i + 1));

        for (guint i = 0; i < s->handles->len; i++) {
                StateHandle *h = &g_array_index(s->handles, StateHandle, i);
                if (!g_hash_table_insert(fhs, &h->fh, h))
                        return state_error(err, errlen, -EBADMSG, "handle %" PRIu64 " twice", h->fh);
                if (h->node != STATE_ROOT_ID && !session_state_find_node(s, h->node))
                        return state_error(err, errlen, -EBADMSG, "handle %" PRIu64 ": node %" PRIu64 " is not in the state",
                                           h->fh, h->node);
                r = take_slot(slots, h->fd_slot, "handle", h->fh, err, errlen);
                if (r < 0)
                        return r;
        }
        return check_locks(s, fhs, slots, err, errlen);
}
