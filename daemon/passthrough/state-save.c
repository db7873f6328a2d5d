/* state-save.c: the nodes and open handles of the passthrough described in a SessionState. */
#include "passthrough-state.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "beneath.h"
#include "file-handle.h"
#include "handle-map.h"
#include "inode-fd.h"
#include "inode-map.h"
#include "locks.h"
#include "passthrough-internal.h"

typedef struct SaveCtx {
        Passthrough *p;
        const PtStateOptions *o;
        SessionState *s;
        PtStateReport *rep;
        int root_fd;
        PtStateFds *fds; /* NULL: no fd goes beside the stream */
        char root_path[PATH_MAX];
        size_t root_len;
} SaveCtx;

void passthrough_state_fds_done(PtStateFds *f) {
        for (size_t k = 0; k < f->n; k++)
                safe_close(f->fds[k]);
        free(f->fds);
        *f = (PtStateFds) {};
}

/* A duplicate of fd in the next slot: its index, or -1 when there is none to give (no fd, no
 * memory, no fd left: the record then goes without one). */
static int32_t give_fd(SaveCtx *c, int fd) {
        int dup_fd;

        if (!c->fds || fd < 0 || c->fds->n >= INT32_MAX)
                return -1;
        if (c->fds->n == c->fds->cap) {
                size_t cap = c->fds->cap ? c->fds->cap * 2 : 64;
                int *nf = realloc(c->fds->fds, cap * sizeof *nf);
                if (!nf)
                        return -1;
                c->fds->fds = nf;
                c->fds->cap = cap;
        }
        dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0)
                return -1;
        c->fds->fds[c->fds->n] = dup_fd;
        return (int32_t) c->fds->n++;
}

static void lost(PtStateReport *rep, const char *fmt, ...) _printf_(2, 3);
static void lost(PtStateReport *rep, const char *fmt, ...) {
        va_list ap;

        if (rep->first_problem[0])
                return;
        va_start(ap, fmt);
        vsnprintf(rep->first_problem, sizeof rep->first_problem, fmt, ap);
        va_end(ap);
}

/* The kernel's name of fd (its /proc/self/fd link), NUL-terminated in buf: its length, or a
 * negative errno (-ENAMETOOLONG when it does not fit). */
static int fd_path(Passthrough *p, int fd, char *buf, size_t size) {
        char name[16];
        ssize_t n;

        proc_name(name, fd);
        n = readlinkat(p->proc_self_fd, name, buf, size);
        if (n < 0)
                return negative_errno();
        if ((size_t) n >= size)
                return -ENAMETOOLONG;
        buf[n] = '\0';
        return (int) n;
}

/* The part of path below the share's root, or NULL when path is not below it. */
static const char *below_root(const SaveCtx *c, const char *path) {
        if (c->root_len == 1 && c->root_path[0] == '/') /* the sandbox made the share "/" */
                return path[0] == '/' && path[1] ? path + 1 : NULL;
        if (strncmp(path, c->root_path, c->root_len) != 0 || path[c->root_len] != '/' || !path[c->root_len + 1])
                return NULL;
        return path + c->root_len + 1;
}

/* --migration-confirm-paths: rel, opened again from the root, is the inode stx describes. */
static int confirm_path(SaveCtx *c, const char *rel, const struct statx *stx) {
        struct statx now;
        int fd, r;

        fd = beneath_open_path(&c->p->budget, c->root_fd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return fd;
        r = statx_fd(fd, &now);
        fd_budget_close(&c->p->budget, fd);
        if (r < 0)
                return r;
        if (now.stx_ino != stx->stx_ino || now.stx_dev_major != stx->stx_dev_major ||
            now.stx_dev_minor != stx->stx_dev_minor)
                return -ESTALE;
        return 0;
}

static void set_handle(StateNode *n, const struct file_handle *h) {
        if (h->handle_bytes > STATE_HANDLE_MAX)
                return;
        n->handle_type = (uint32_t) h->handle_type;
        n->handle_len = (uint16_t) h->handle_bytes;
        memcpy(n->handle, h->f_handle, h->handle_bytes);
}

/* Where node i is: its handle and/or its path, from f (an O_PATH fd of it) and stx. */
static void describe(SaveCtx *c, Inode *i, int fd, const struct statx *stx, StateNode *n, char *path) {
        const char *rel;
        int r;

        /* A file with no name left lives only as long as the source holds it: nothing on the
         * destination can find it, by path or by handle. */
        if (stx->stx_nlink == 0) {
                n->flags |= STATE_NODE_UNLINKED;
                lost(c->rep, "node %" PRIu64 ": deleted while the guest holds it", n->id);
                return;
        }
        if (i->handle)
                set_handle(n, i->handle);
        else if (c->o->by_handle || c->o->verify_handles) {
                FileHandleBuf hb;
                int mnt_id;
                if (file_handle_of_fd(fd, &hb, &mnt_id) == 0)
                        set_handle(n, &hb.fh);
        }
        if (c->o->by_handle) {
                if (n->handle_len == 0)
                        lost(c->rep, "node %" PRIu64 ": its filesystem gives no file handle", n->id);
                return;
        }
        r = fd_path(c->p, fd, path, PATH_MAX);
        rel = r >= 0 ? below_root(c, path) : NULL;
        if (!rel) {
                lost(c->rep, "node %" PRIu64 ": no path below the share (%s)", n->id, r < 0 ? strerror(-r) : path);
                return;
        }
        if (c->o->confirm_paths) {
                r = confirm_path(c, rel, stx);
                if (r < 0) {
                        lost(c->rep, "node %" PRIu64 ": its path %s no longer leads to it (%s)", n->id, rel, strerror(-r));
                        return;
                }
        }
        n->parent = STATE_ROOT_ID;
        n->name = (char *) rel;
}

static int save_node(Inode *i, uint64_t nlookup, void *ud) {
        SaveCtx *c = ud;
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        _cleanup_free_ char *path = malloc(PATH_MAX);
        StateNode n = {
                .id = i->nodeid, .nlookup = nlookup, .dev = i->key.dev, .ino = i->key.ino, .mnt_id = i->key.mnt_id,
                .type = i->type, .fd_slot = -1,
        };
        struct statx stx;
        int r;

        if (!path) {
                inode_unref(i);
                return -ENOMEM;
        }
        r = inode_fd(c->p, i, &f, &stx);
        if (r < 0)
                lost(c->rep, "node %" PRIu64 ": %s", n.id, strerror(-r));
        else
                describe(c, i, f.fd, &stx, &n, path);
        if (r >= 0)
                n.fd_slot = give_fd(c, f.fd);
        inode_fd_done(&f);
        inode_unref(i);
        if (n.fd_slot < 0 && (c->o->by_handle ? n.handle_len == 0 : n.parent == 0))
                c->rep->nodes_lost++;
        c->rep->nodes++;
        return session_state_add_node(c->s, &n);
}

static int save_handle(Handle *h, void *ud) {
        SaveCtx *c = ud;
        StateHandle x = {
                .fh = h->fh, .node = h->inode->nodeid, .open_flags = h->flags, .flags = h->dir ? STATE_HANDLE_DIR : 0,
                .fd_slot = -1,
        };
        bool linked = h->inode->nodeid == FS_ROOT_ID || h->inode->linked;
        short flock_type = h->dir ? F_UNLCK : handle_flock_type(h);
        int r = 0;

        if (h->dir) {
                pthread_mutex_lock(&h->dir_lock);
                x.dir_offset = h->stream.next_off;
                pthread_mutex_unlock(&h->dir_lock);
        }
        if (linked)
                x.fd_slot = give_fd(c, h->fd);
        handle_unref(h);
        /* A handle on a node the guest forgot (a guest that broke FUSE's rules): nothing on the
         * other side could carry it. */
        if (!linked) {
                c->rep->handles_lost++;
                lost(c->rep, "handle %" PRIu64 ": its node %" PRIu64 " was forgotten", x.fh, x.node);
                return 0;
        }
        r = session_state_add_handle(c->s, &x);
        if (r < 0)
                return r;
        c->rep->handles++;
        if (flock_type != F_UNLCK) {
                StateLock l = { .node = x.node, .fh = x.fh, .start = 0, .end = STATE_LOCK_END_MAX, .kind = STATE_LOCK_FLOCK,
                                .type = flock_type == F_RDLCK ? STATE_LOCK_READ : STATE_LOCK_WRITE, .fd_slot = -1 };
                r = session_state_add_lock(c->s, &l);
                if (r < 0)
                        return r;
                c->rep->locks++;
        }
        return 0;
}

typedef struct OwnerCtx {
        SaveCtx *c;
        Inode *i;
} OwnerCtx;

/* One POSIX lock owner's ranges on a node, its OFD in an fd slot on the first. */
static int save_owner(uint64_t owner, uint64_t fh, int fd, const LockRange *r, size_t n, void *ud) {
        OwnerCtx *o = ud;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int ret;

        if (n == 0)
                return 0;
        /* Entries go with their handle's RELEASE: one whose handle is not there holds nothing
         * the guest could still reach. */
        if (handle_map_get(o->c->p->handles, fh, o->i->nodeid, 0, &h) < 0)
                return 0;
        for (size_t k = 0; k < n; k++) {
                StateLock l = { .owner = owner, .node = o->i->nodeid, .fh = fh, .start = r[k].start, .end = r[k].end,
                                .kind = STATE_LOCK_POSIX, .type = r[k].type == F_RDLCK ? STATE_LOCK_READ : STATE_LOCK_WRITE,
                                .fd_slot = k == 0 ? give_fd(o->c, fd) : -1 };
                ret = session_state_add_lock(o->c->s, &l);
                if (ret < 0)
                        return ret;
                o->c->rep->locks++;
        }
        return 0;
}

static int save_node_locks(Inode *i, uint64_t nlookup, void *ud) {
        OwnerCtx o = { ud, i };
        int r = plock_foreach(i, save_owner, &o);

        inode_unref(i);
        return r;
}

int passthrough_state_save(Passthrough *p, const PtStateOptions *o, SessionState *s, PtStateReport *rep) {
        return passthrough_state_save_fds(p, o, s, NULL, rep);
}

int passthrough_state_save_fds(Passthrough *p, const PtStateOptions *o, SessionState *s, PtStateFds *fds,
                               PtStateReport *rep) {
        _cleanup_(inode_unrefp) Inode *root = get_inode(p, FS_ROOT_ID);
        _cleanup_(inode_fd_done) InodeFd rf = INODE_FD_NULL; /* the root keeps its fd: borrowed */
        _cleanup_free_ SaveCtx *c = calloc(1, sizeof *c);
        int r;

        *rep = (PtStateReport) {};
        if (!c || !root)
                return -ENOMEM;
        r = inode_fd(p, root, &rf, NULL);
        if (r < 0)
                return r;
        *c = (SaveCtx) { .p = p, .o = o, .s = s, .rep = rep, .root_fd = rf.fd, .fds = fds };
        if (!o->by_handle) {
                r = fd_path(p, rf.fd, c->root_path, sizeof c->root_path);
                if (r < 0)
                        return r;
                c->root_len = (size_t) r;
        }
        r = inode_map_foreach(p->inodes, save_node, c);
        if (r < 0)
                return r;
        r = handle_map_foreach(p->handles, save_handle, c);
        if (r < 0)
                return r;
        r = save_node_locks(inode_ref(root), 0, c);
        if (r < 0)
                return r;
        return inode_map_foreach(p->inodes, save_node_locks, c);
}
