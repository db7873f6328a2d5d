/* state-load.c: the nodes and open handles of a SessionState re-created in the passthrough. */
#include "passthrough-state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>

#include "beneath.h"
#include "file-handle.h"
#include "handle-map.h"
#include "inode-fd-cache.h"
#include "inode-fd.h"
#include "inode-map.h"
#include "locks.h"
#include "lookup.h"
#include "passthrough-internal.h"

typedef struct LoadCtx {
        Passthrough *p;
        const PtStateOptions *o;
        PtStateReport *rep;
        int *fds;
        size_t n_fds;
        Inode *root;
        int root_fd;  /* the root's fd, borrowed for the load */
        int mount_fd; /* file-handles mode: the share's mount, the only one handles open on */
        /* Same host: node id -> 1 + the fd slot of one of its open files; and the nodes found
         * through one, which have no name. */
        GHashTable *open_files, *unnamed;
        GHashTable *deleted; /* ids of the nodes restored whose file has no name left (nlink 0) */
} LoadCtx;

static int problem(PtStateReport *rep, int r, const char *fmt, ...) _printf_(3, 4);
static int problem(PtStateReport *rep, int r, const char *fmt, ...) {
        va_list ap;

        if (!rep->first_problem[0]) {
                va_start(ap, fmt);
                vsnprintf(rep->first_problem, sizeof rep->first_problem, fmt, ap);
                va_end(ap);
        }
        return r;
}

/* The fd passed beside the stream for slot k, taken (charged to the budget), or -1 when there is
 * none. */
static int take_slot(LoadCtx *c, int32_t k) {
        int fd;

        if (k < 0 || (size_t) k >= c->n_fds || c->fds[k] < 0)
                return -1;
        if (!fd_budget_take(&c->p->budget))
                return -ENFILE;
        fd = c->fds[k];
        c->fds[k] = -1;
        return fd;
}

static bool same_handle(const StateNode *n, const struct file_handle *h) {
        return (uint32_t) h->handle_type == n->handle_type && h->handle_bytes == n->handle_len &&
               memcmp(h->f_handle, n->handle, n->handle_len) == 0;
}

/* An O_PATH fd of what n's name in its restored parent leads to now (charged to the budget);
 * report: say why not in the report's first problem. */
static int open_by_name(LoadCtx *c, const StateNode *n, bool report) {
        _cleanup_(inode_unrefp) Inode *parent = NULL;
        _cleanup_(inode_fd_done) InodeFd pf = INODE_FD_NULL;
        int fd, r;

        if (!n->name)
                return report ? problem(c->rep, -ENOENT, "node %" PRIu64 ": the source found no path for it", n->id)
                              : -ENOENT;
        parent = n->parent == STATE_ROOT_ID ? inode_ref(c->root) : get_inode(c->p, n->parent);
        if (!parent)
                return report ? problem(c->rep, -ENOENT, "node %" PRIu64 ": its parent %" PRIu64 " is missing", n->id,
                                        n->parent)
                              : -ENOENT;
        r = inode_fd(c->p, parent, &pf, NULL);
        if (r < 0)
                return report ? problem(c->rep, r, "node %" PRIu64 ": its parent %" PRIu64 " was not found", n->id,
                                        n->parent)
                              : r;
        fd = beneath_open_path(&c->p->budget, pf.fd, n->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && report)
                return problem(c->rep, fd, "node %" PRIu64 ": %s: %s", n->id, n->name, strerror(-fd));
        return fd;
}

/* Whether fd (its statx in *stx) is the file n names on this host: its device, inode number and
 * type. */
static bool is_node(int fd, const StateNode *n, struct statx *stx) {
        InodeKey k;

        if (statx_fd(fd, stx) < 0)
                return false;
        k = inode_key_from_statx(stx);
        return k.dev == n->dev && k.ino == n->ino && (stx->stx_mode & S_IFMT) == n->type;
}

/* An O_PATH fd of what n's file handle opens now, on the share's filesystem only (charged to the
 * budget); report: say why not in the report's first problem. */
static int open_by_handle(LoadCtx *c, const StateNode *n, bool report) {
        FileHandleBuf hb = {};
        struct statx rs;
        int fd, r;

        if (n->handle_len == 0)
                return report ? problem(c->rep, -ENOENT, "node %" PRIu64 ": no file handle in the state", n->id) : -ENOENT;
        hb.fh.handle_bytes = n->handle_len;
        hb.fh.handle_type = (int) n->handle_type;
        memcpy(hb.fh.f_handle, n->handle, n->handle_len);
        r = statx_fd(c->root_fd, &rs);
        if (r < 0)
                return r;
        if (!fd_budget_take(&c->p->budget))
                return -ENFILE;
        /* On the share's filesystem only: the device is the root's, the inode number the source's. */
        fd = file_handle_open_checked(c->mount_fd, &hb.fh, makedev(rs.stx_dev_major, rs.stx_dev_minor), n->ino, O_PATH,
                                      NULL);
        if (fd < 0) {
                fd_budget_release(&c->p->budget);
                if (report)
                        return problem(c->rep, fd, "node %" PRIu64 ": its file handle does not open (%s)", n->id,
                                       strerror(-fd));
        }
        return fd;
}

/* An O_PATH fd of the file node n names (charged to the budget), checked to be of its type. */
static int locate(LoadCtx *c, const StateNode *n, struct statx *stx) {
        int fd, r;

        fd = take_slot(c, n->fd_slot);
        /* On this host, a node handed over with its fd (live upgrade) is found again in this
         * process by its name or its file handle where that still leads to it, and the fd handed
         * over serves only where not (a file deleted or moved meanwhile). That fd lies on the
         * previous process's copy of the share's mount (each serving process has a mount
         * namespace of its own): a node keyed by that mount's id is not the one this process's
         * lookups find (a second node for a known name), its subdirectories would look like
         * submounts, and in file-handles mode that mount is none this process may open handles
         * on. */
        if (fd >= 0 && c->o->same_host && (n->name || (c->o->by_handle && n->handle_len > 0))) {
                struct statx here;
                int alt = n->name ? open_by_name(c, n, false) : open_by_handle(c, n, false);
                if (alt >= 0 && is_node(alt, n, &here)) {
                        fd_budget_close(&c->p->budget, fd);
                        fd = alt;
                } else if (alt >= 0)
                        fd_budget_close(&c->p->budget, alt);
        }
        if (fd == -1)
                fd = c->o->by_handle ? open_by_handle(c, n, true) : open_by_name(c, n, true);
        if (fd < 0)
                return fd;
        r = statx_fd(fd, stx);
        /* On this host the record's device and inode number are the ones it had: also for an fd
         * handed over, which a taken-over predecessor could have swapped for another of its fds. */
        if (r >= 0 && c->o->same_host) {
                InodeKey k = inode_key_from_statx(stx);
                if (k.dev != n->dev || k.ino != n->ino)
                        r = problem(c->rep, -ESTALE, "node %" PRIu64 ": %s is another file now", n->id,
                                    n->name ?: "(handle)");
        }
        if (r >= 0 && (stx->stx_mode & S_IFMT) != n->type)
                r = problem(c->rep, -ESTALE, "node %" PRIu64 ": %s is another type of file now", n->id, n->name ?: "(handle)");
        if (r >= 0 && c->o->verify_handles && n->handle_len > 0) {
                FileHandleBuf hb;
                int mnt_id;
                r = file_handle_of_fd(fd, &hb, &mnt_id);
                if (r < 0 || !same_handle(n, &hb.fh))
                        r = problem(c->rep, -ESTALE, "node %" PRIu64 ": %s is not the file the source had (its handle differs)",
                                    n->id, n->name ?: "(handle)");
        }
        if (r < 0) {
                fd_budget_close(&c->p->budget, fd);
                return r;
        }
        return fd;
}

/* On this host, a node its name no longer leads to (deleted, renamed over, moved) that the guest
 * holds open: an O_PATH fd of the file through one of its open files passed beside the state,
 * checked as locate() checks, or -ENOENT. The node keeps the file its open files are, as it would
 * without the death; it has no name (name_restored() skips it: that name is another file now). */
static int locate_through_open_file(LoadCtx *c, const StateNode *n, struct statx *stx) {
        gpointer slot = c->open_files ? g_hash_table_lookup(c->open_files, &n->id) : NULL;
        int32_t k = GPOINTER_TO_INT(slot) - 1; /* -1: none */
        char name[16];
        int fd;

        if (k < 0 || (size_t) k >= c->n_fds || c->fds[k] < 0)
                return -ENOENT;
        proc_name(name, c->fds[k]);
        /* Following the magic link: the open file's inode, not the link. */
        fd = fd_budget_openat(&c->p->budget, c->p->proc_self_fd, name, O_PATH | O_CLOEXEC, 0);
        if (fd >= 0 && !is_node(fd, n, stx)) {
                fd_budget_close(&c->p->budget, fd);
                return -ESTALE;
        }
        return fd;
}

static int load_node(LoadCtx *c, const StateNode *n) {
        _cleanup_(inode_unrefp) Inode *i = NULL;
        struct statx stx = {};
        int fd, r;

        fd = locate(c, n, &stx);
        if (fd < 0 && fd != -ENOMEM && fd != -ENFILE && c->o->same_host) {
                int alt = locate_through_open_file(c, n, &stx);
                if (alt >= 0) {
                        fd = alt;
                        g_hash_table_add(c->unnamed, (gpointer) &n->id);
                }
        }
        if (fd >= 0) {
                r = remember_inode_at(c->p, fd, &stx, n->id, n->nlookup, &i);
                if (r < 0)
                        return problem(c->rep, r, "node %" PRIu64 ": %s", n->id, strerror(-r));
                if (stx.stx_nlink == 0)
                        g_hash_table_add(c->deleted, (gpointer) &n->id);
                c->rep->nodes++;
                return 0;
        }
        if (c->o->same_host && fd != -ENOMEM) {
                c->rep->nodes_lost++; /* unknown: ESTALE, the guest looks its path up again */
                return 0;
        }
        if (!c->o->guest_error || fd == -ENOMEM || fd == -ENFILE)
                return fd;
        /* Kept, answering EIO: the guest's nodeid stays valid until it forgets it. */
        stx.stx_mode = (uint16_t) n->type;
        r = inode_map_insert(c->p->inodes, n->id, n->nlookup, -1, NULL, -1, &stx, &i);
        if (r < 0)
                return problem(c->rep, r, "node %" PRIu64 ": %s", n->id, strerror(-r));
        c->rep->nodes_lost++;
        return 0;
}

static int load_handle(LoadCtx *c, const StateHandle *h) {
        _cleanup_(inode_unrefp) Inode *i = get_inode(c->p, h->node);
        bool dir = h->flags & STATE_HANDLE_DIR;
        int fd, r, flags;

        if (!i && c->o->same_host) { /* its node was left out: EBADF, as any fh this process never issued */
                c->rep->handles_lost++;
                return 0;
        }
        if (!i) /* the decoder checked it is in the state: a node that failed in guest-error mode is */
                return problem(c->rep, -ENOENT, "handle %" PRIu64 ": node %" PRIu64 " is missing", h->fh, h->node);
        if (dir != (i->type == S_IFDIR))
                return problem(c->rep, -EBADMSG, "handle %" PRIu64 ": a %s handle on a %s", h->fh, dir ? "directory" : "file",
                               dir ? "file" : "directory");
        flags = dir ? O_RDONLY | O_DIRECTORY : h->open_flags & ~(O_TRUNC | O_CREAT | O_EXCL);
        /* The stream's flags are the frontend's: what this daemon's options forbid an open stays
         * forbidden (open_inode() keeps only the flags a guest may pass at all). */
        if (c->p->opts.readonly)
                flags &= ~O_ACCMODE;
        if (!c->p->opts.allow_direct_io)
                flags &= ~O_DIRECT;
        fd = take_slot(c, h->fd_slot);
        if (fd == -1)
                /* Opened again as it was, less what would change the file a second time. */
                fd = open_inode(c->p, i, flags);
        if (fd < 0) {
                problem(c->rep, fd, "handle %" PRIu64 " on node %" PRIu64 ": %s", h->fh, h->node, strerror(-fd));
                if (!c->o->guest_error || fd == -ENOMEM || fd == -ENFILE)
                        return fd;
                c->rep->handles_lost++;
                fd = -1; /* kept, answering EBADF */
        } else
                c->rep->handles++;
        r = handle_map_insert(c->p->handles, h->fh, i, fd, flags, dir);
        if (r < 0)
                return problem(c->rep, r, "handle %" PRIu64 ": %s", h->fh, strerror(-r));
        return 0;
}

/* The restored nodes that hold an O_PATH fd get a parent node and a name where their path's
 * directory is the root or a restored directory node, so that they are ordinary members of the
 * clock of cached inode fds (--max-inode-fds): evictable, re-opened by that name and checked to be
 * the same inode. A stream names nodes by their path from the root (live migration) or in a
 * parent node: every node's path from the root is put together first (parents come first), then
 * looked up. Nodes with no such directory (it is no node the guest holds) keep their fd, outside
 * the clock, as nodes found through ".." do. */
static int name_restored(LoadCtx *c, const SessionState *s) {
        g_autoptr(GHashTable) paths = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free); /* id -> path */
        g_autoptr(GHashTable) dirs = g_hash_table_new(g_str_hash, g_str_equal); /* path -> StateNode of a directory */
        size_t n = session_state_node_count(s);

        for (size_t k = 0; k < n; k++) { /* parents first */
                const StateNode *x = session_state_node(s, k);
                const char *pp;
                char *full;
                if (!x->name)
                        continue;
                if (x->parent == STATE_ROOT_ID)
                        full = g_strdup(x->name);
                else if ((pp = g_hash_table_lookup(paths, &x->parent)))
                        full = g_strconcat(pp, "/", x->name, NULL);
                else
                        continue;
                if (!full)
                        return -ENOMEM;
                g_hash_table_insert(paths, (gpointer) &x->id, full);
                if (x->type == S_IFDIR)
                        g_hash_table_insert(dirs, full, (gpointer) x);
        }
        for (size_t k = 0; k < n; k++) {
                const StateNode *x = session_state_node(s, k), *d;
                _cleanup_(inode_unrefp) Inode *i = get_inode(c->p, x->id), *dir = NULL;
                const char *full = g_hash_table_lookup(paths, &x->id), *slash;
                if (!i || i->lost || i->handle || atomic_load_explicit(&i->parent, memory_order_relaxed))
                        continue; /* not restored here, or no fd to bound */
                if (g_hash_table_contains(c->unnamed, &x->id)) { /* its name is another file's */
                        c->rep->nodes_unnamed++;
                        if (g_hash_table_contains(c->deleted, &x->id))
                                fd_cache_named(inode_map_fd_cache(c->p->inodes), i);
                        continue;
                }
                slash = full ? strrchr(full, '/') : NULL;
                if (full && !slash)
                        dir = inode_ref(c->root);
                else if (slash) {
                        g_autofree char *up = g_strndup(full, (gsize) (slash - full));
                        d = g_hash_table_lookup(dirs, up);
                        dir = d ? get_inode(c->p, d->id) : NULL;
                        if (dir && (dir->lost || dir->type != S_IFDIR))
                                dir = (inode_unref(dir), NULL);
                }
                if (dir && !g_hash_table_contains(c->deleted, &x->id))
                        inode_map_set_path(i, dir, slash ? slash + 1 : full);
                if (atomic_load_explicit(&i->parent, memory_order_relaxed))
                        continue;
                c->rep->nodes_unnamed++;
                /* A deleted file's node: in the clock of --max-inode-fds as it was in the process
                 * before (where its removed name stayed, leading nowhere), evictable and ESTALE
                 * once evicted. Outside it, each upgrade would add up to a clock's worth of such
                 * fds. The others without a name (found through "..") keep theirs, as before. */
                if (g_hash_table_contains(c->deleted, &x->id))
                        fd_cache_named(inode_map_fd_cache(c->p->inodes), i);
        }
        return 0;
}

static const char *lock_what(const StateLock *l) {
        if (l->kind == STATE_LOCK_FLOCK)
                return l->type == STATE_LOCK_READ ? "shared flock" : "exclusive flock";
        return l->type == STATE_LOCK_READ ? "read lock" : "write lock";
}

/* Takes the guest's lock l again, without waiting. */
static int load_lock(LoadCtx *c, const StateLock *l) {
        _cleanup_(handle_unrefp) Handle *h = NULL;
        short type = l->type == STATE_LOCK_READ ? F_RDLCK : F_WRLCK;
        int fd, r;

        fd = take_slot(c, l->fd_slot);
        if (fd < -1)
                return fd;
        r = handle_map_get(c->p->handles, l->fh, l->node, 0, &h);
        if (r < 0 && c->o->same_host) { /* its handle was left out */
                fd_budget_close(&c->p->budget, fd);
                c->rep->locks_lost++;
                return 0;
        }
        if (r < 0) {
                fd_budget_close(&c->p->budget, fd);
                return problem(c->rep, -EBADMSG, "a lock through handle %" PRIu64 ", which is no open file of node %" PRIu64,
                               l->fh, l->node);
        }
        if (h->fd < 0) { /* the handle itself was lost (guest-error): it answers EBADF already */
                fd_budget_close(&c->p->budget, fd);
                c->rep->locks_lost++;
                return 0;
        }
        if (l->kind == STATE_LOCK_FLOCK)
                r = flock_restore(c->p, h, type);
        else
                r = plock_restore(c->p, h, l->owner, fd, l->start, l->end, type);
        if (r == 1) {
                /* Held on this host now (by the source vufsd until its session ends, or another
                 * process): pending, taken once free (locks.c), lost past the deadline. */
                c->rep->locks_pending++;
                if (!c->rep->first_pending[0])
                        snprintf(c->rep->first_pending, sizeof c->rep->first_pending,
                                 "node %" PRIu64 ": the guest's %s on [%" PRIu64 ", %" PRIu64 "] through handle %" PRIu64,
                                 l->node, lock_what(l), l->start, l->end, l->fh);
                return 0;
        }
        if (r >= 0) {
                c->rep->locks++;
                return 0;
        }
        problem(c->rep, r, "node %" PRIu64 ": the guest's %s through handle %" PRIu64 ": %s", l->node, lock_what(l), l->fh,
                strerror(-r));
        if (!c->o->guest_error || r == -ENOMEM || r == -ENFILE)
                return r;
        /* The guest believes it holds the lock: the open file it took it through answers EBADF from
         * now on (as a handle that could not be opened again), so that the program learns at its
         * next use of the file instead of writing unprotected. The owner's other ranges on the node
         * go too: it holds all of them or none. */
        if (l->kind == STATE_LOCK_POSIX)
                plock_drop_owner(c->p, h->inode, l->owner);
        /* Closed, its budget fd kept as the charge of a handle without one (handle_map_insert()). */
        h->fd = safe_close(h->fd);
        h->charged = true;
        c->rep->locks_lost++;
        return 0;
}

int passthrough_state_load(Passthrough *p, const PtStateOptions *o, const SessionState *s, int *fds, size_t n_fds,
                           PtStateReport *rep) {
        _cleanup_(inode_unrefp) Inode *root = get_inode(p, FS_ROOT_ID);
        _cleanup_(inode_fd_done) InodeFd rf = INODE_FD_NULL; /* the root keeps its fd: borrowed */
        LoadCtx c = { .p = p, .o = o, .rep = rep, .fds = fds, .n_fds = n_fds, .root = root, .mount_fd = -1 };
        int r;

        *rep = (PtStateReport) {};
        if (!root)
                return -EIO;
        r = inode_fd(p, root, &rf, NULL);
        if (r < 0)
                return r;
        c.root_fd = rf.fd;
        if (o->by_handle) {
                uint64_t key;
                /* A handle opens any file of its filesystem: only where this share may use them
                 * (--inode-file-handles in force: the share shows its whole filesystem, or
                 * --allow-handles-beyond-share), or a hostile stream could name files outside. */
                if (!p->use_handles)
                        return problem(rep, -EPERM, "file-handles migration needs --inode-file-handles in force on the destination");
                r = mount_id_of_fd(rf.fd, p->mounts.unique_ids, &key);
                if (r < 0)
                        return problem(rep, r, "the share's mount id: %s", strerror(-r));
                c.mount_fd = mount_fds_get(&p->mounts, key, rf.fd);
                if (c.mount_fd < 0)
                        return problem(rep, c.mount_fd, "no mount fd for the share: %s", strerror(-c.mount_fd));
        }
        g_autoptr(GHashTable) open_files = NULL, unnamed = g_hash_table_new(g_int64_hash, g_int64_equal);
        if (o->same_host) {
                open_files = g_hash_table_new(g_int64_hash, g_int64_equal);
                for (size_t k = 0; k < session_state_handle_count(s); k++) {
                        const StateHandle *x = session_state_handle(s, k);
                        if (x->fd_slot >= 0 && (size_t) x->fd_slot < n_fds && fds[x->fd_slot] >= 0)
                                g_hash_table_insert(open_files, (gpointer) &x->node, GINT_TO_POINTER(x->fd_slot + 1));
                }
        }
        g_autoptr(GHashTable) deleted = g_hash_table_new(g_int64_hash, g_int64_equal);
        c.open_files = open_files;
        c.unnamed = unnamed;
        c.deleted = deleted;
        for (size_t k = 0; k < session_state_node_count(s); k++) { /* parents first */
                r = load_node(&c, session_state_node(s, k));
                if (r < 0)
                        return r;
        }
        r = name_restored(&c, s);
        if (r < 0)
                return r;
        for (size_t k = 0; k < session_state_handle_count(s); k++) {
                r = load_handle(&c, session_state_handle(s, k));
                if (r < 0)
                        return r;
        }
        /* Locks held elsewhere on this host become pending until the deadline. */
        locks_pending_begin(p, o->lock_timeout_usec);
        for (size_t k = 0; k < session_state_lock_count(s); k++) {
                r = load_lock(&c, session_state_lock(s, k));
                if (r < 0)
                        return r;
        }
        return 0;
}
