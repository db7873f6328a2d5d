/* lookup.c: how a name becomes a counted inode (LOOKUP, FORGET), and the directories requests act in. */
#include "lookup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "beneath.h"
#include "file-handle.h"
#include "inode-fd.h"
#include "log.h"
#include "mapped-mode.h"
#include "passthrough-internal.h"
#include "util.h"

/* Whether a directory with key k sits on another host mount than the directory dir: the mount id
 * tells bind mounts of one filesystem apart; without it the device number is all there is. */
static bool is_submount(const Inode *dir, const struct statx *stx) {
        InodeKey k = inode_key_from_statx(stx);

        if (!S_ISDIR(stx->stx_mode))
                return false;
        if (k.mnt_id != 0 && dir->key.mnt_id != 0)
                return k.mnt_id != dir->key.mnt_id;
        return k.dev != dir->key.dev;
}

/* The mount fd table's key for an inode with stx whose handle came with mnt_id: the id statx gave
 * (the unique one where the kernel has it), the handle's reusable one only without. */
uint64_t mount_key(const struct statx *stx, int mnt_id) {
        return stx->stx_mask & STATX_MNT_IDS ? stx->stx_mnt_id : (uint64_t)mnt_id;
}

/* In prefer mode, said once: which inodes keep an fd after all, and why. */
static void handle_fallback_note(Passthrough *p, int err) {
        if (!atomic_exchange(&p->handle_fallback_logged, true))
                log_notice("--inode-file-handles=prefer: an inode keeps an O_PATH fd, no file handle (%s); "
                           "others may too, this is said once",
                           err == -EXDEV   ? "its mount is a subtree of a larger filesystem"
                           : err == -E2BIG ? "too many mounts in the share"
                                           : strerror(-err));
}

/* A counted lookup (nodeid 0; fd found as name in dir, NULL/NULL when unknown), or a node restored
 * under nodeid with nlookup (state-load.c; it keeps its fd: no single name re-opens it): over fd,
 * or over the handle h on mount_fd when h is given (fd is closed then). */
static int link_node(Passthrough *p, int fd, const struct file_handle *h, int mount_fd, const struct statx *stx,
                     Inode *dir, const char *name, uint64_t nodeid, uint64_t nlookup, Inode **ret) {
        if (h)
                fd = fd_budget_close(&p->budget, fd);
        if (nodeid != 0)
                return inode_map_insert(p->inodes, nodeid, nlookup, fd, h, mount_fd, stx, ret);
        return h ? inode_map_add_lookup_handle(p->inodes, h, mount_fd, stx, ret)
                 : inode_map_add_lookup_at(p->inodes, fd, stx, dir, name, ret);
}

/* Counts a guest lookup of the inode fd (O_PATH, one budget fd, taken over) refers to (or restores
 * the node nodeid, remember_inode_at()): by file handle when the share uses them (the fd is closed
 * then), else by fd, which enters the clock of cached inode fds (re-opened by that name once
 * evicted; an inode without a name keeps it). In prefer mode an inode that cannot have a handle (a
 * filesystem without them below a submount, a mount that is a subtree, the mount table full) keeps
 * its fd; in mandatory mode that is the lookup's error. */
static int remember(Passthrough *p, int fd, const struct statx *stx, Inode *dir, const char *name, uint64_t nodeid,
                    uint64_t nlookup, Inode **ret) {
        FileHandleBuf h;
        int mnt_id, err, mfd;

        if (!p->use_handles)
                return link_node(p, fd, NULL, -1, stx, dir, name, nodeid, nlookup, ret);
        /* The handle on the stack and the mount fd found without a lock: an inode the map holds
         * already costs no allocation and no shared lock (the map copies the handle for a new
         * node only). */
        err = file_handle_of_fd(fd, &h, &mnt_id);
        if (err == 0) {
                mfd = mount_fds_get(&p->mounts, mount_key(stx, mnt_id), fd);
                if (mfd >= 0)
                        return link_node(p, fd, &h.fh, mfd, stx, dir, name, nodeid, nlookup, ret);
                err = mfd;
        }
        if (p->handles_mandatory) {
                fd_budget_close(&p->budget, fd);
                return err == -EXDEV || err == -E2BIG ? -EOPNOTSUPP : err;
        }
        handle_fallback_note(p, err);
        return link_node(p, fd, NULL, -1, stx, dir, name, nodeid, nlookup, ret);
}

int remember_inode(Passthrough *p, int fd, const struct statx *stx, Inode *dir, const char *name, Inode **ret) {
        return remember(p, fd, stx, dir, name, 0, 0, ret);
}

int remember_inode_at(Passthrough *p, int fd, const struct statx *stx, uint64_t nodeid, uint64_t nlookup, Inode **ret) {
        return remember(p, fd, stx, NULL, NULL, nodeid, nlookup, ret);
}

/* Counts a guest lookup of the child fd (O_PATH, one budget fd already taken) and fills e; dir (if
 * given) is the directory fd was found in as name, for the submount check and the node's path. */
static int entry_from_fd(Passthrough *p, int fd, Inode *dir, const char *name, FsEntry *e) {
        _cleanup_(inode_unrefp) Inode *i = NULL;
        struct statx stx;
        int r;

        r = statx_fd(fd, &stx);
        if (r < 0) {
                fd_budget_close(&p->budget, fd);
                return r;
        }
        r = remember_inode(p, fd, &stx, dir, name, &i);
        if (r < 0)
                return r;
        *e = (FsEntry) { .nodeid = i->nodeid, .submount = dir && is_submount(dir, &stx) };
        r = guest_stat(p, i, -1, &stx, &e->st);
        if (r < 0)
                inode_map_forget(p->inodes, i->nodeid, 1);
        return r;
}

/* Looks name up in dir without following a symlink and counts the lookup. */
int lookup_child(Passthrough *p, Inode *dir, int dirfd, const char *name, FsEntry *e) {
        _cleanup_(inode_unrefp) Inode *i = NULL;
        const struct file_handle *h = NULL;
        FileHandleBuf hb;
        struct statx stx;
        int fd;

        /* Most lookups are of inodes the guest already knows (it revalidates its cached entries,
         * READDIRPLUS lists them again): one statx of the name finds those in the map, where the
         * O_PATH handle path below costs an open and a close more. The map's handle pins its inode,
         * so a matching (dev, ino, mount) cannot be a recycled number: the name referred to this
         * very inode when statx looked, as if the lookup had happened at that moment. */
        if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_SYNC_AS_STAT, STATX_WANT, &stx) < 0)
                return negative_errno();
        if (p->use_handles) {
                /* A node remembered by handle pins nothing: the handle the name has now tells the
                 * same inode from a recycled number (inode-map.h). No fd is opened for it, and
                 * the handle lives on the stack: a known inode costs no allocation. */
                int mnt_id;
                if (file_handle_of_name(dirfd, name, &hb, &mnt_id) == 0)
                        h = &hb.fh;
        }
        i = inode_map_find_lookup(p->inodes, &stx, h);
        if (i) {
                int r;

                inode_map_note_path(i, dir, name); /* no lock unless its parent changed */
                *e = (FsEntry) { .nodeid = i->nodeid, .submount = is_submount(dir, &stx) };
                r = guest_stat(p, i, -1, &stx, &e->st);
                if (r < 0)
                        inode_map_forget(p->inodes, i->nodeid, 1);
                return r;
        }

        fd = beneath_openat(&p->budget, dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
        if (fd < 0)
                return fd;
        return entry_from_fd(p, fd, dir, name, e);
}

/* ".." of a directory other than the share root: its parent, only while that is the root or lies
 * beneath it. A directory the host moved out of the share keeps for the guest what it holds (the
 * node, its subtree), never what lies above it (docs/security.md "Paths beneath the share"). */
static int lookup_parent(Passthrough *p, uint64_t nodeid, int dirfd, FsEntry *e) {
        _cleanup_(inode_unrefp) Inode *root = get_inode(p, FS_ROOT_ID);
        int fd;

        if (!root)
                return -EBADF;
        fd = beneath_open_parent(&p->budget, dirfd, &root->key);
        if (fd == -ENOENT)
                log_guest("LOOKUP \"..\" of node %" PRIu64 ": its parent is gone or not beneath the share "
                          "(moved on the host?)",
                          nodeid);
        if (fd < 0)
                return fd;
        /* No submount check: the parent of a mount root is not a submount of it. */
        return entry_from_fd(p, fd, NULL, NULL, e);
}

Inode *inode_of_name(Passthrough *p, int dirfd, const char *name) {
        struct statx stx;

        /* A name the host changes between this and the caller's change makes the path wrong,
         * never the file: a re-open checks what the name leads to (inode-fd.c). */
        if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_SYNC_AS_STAT, STATX_WANT, &stx) < 0)
                return NULL;
        return inode_map_find(p->inodes, &stx);
}

/* Counts one more lookup of an inode already held and fills e. */
int entry_again(Passthrough *p, Inode *i, FsEntry *e) {
        int r;

        *e = (FsEntry){ .nodeid = i->nodeid };
        r = guest_stat_inode(p, i, &e->st);
        if (r < 0)
                return r;
        inode_map_lookup_again(i);
        return 0;
}

int get_dir(Passthrough *p, uint64_t nodeid, Inode **ret) {
        Inode *i = get_inode(p, nodeid);
        if (!i)
                return unknown_node(p);
        if (i->type != S_IFDIR) {
                inode_unref(i);
                return -ENOTDIR;
        }
        *ret = i;
        return 0;
}

/* The directory nodeid with an fd for one operation relative to it. */
int get_dir_fd(Passthrough *p, uint64_t nodeid, Inode **ret, InodeFd *ret_fd) {
        _cleanup_(inode_unrefp) Inode *i = NULL;
        int r;

        r = get_dir(p, nodeid, &i);
        if (r < 0)
                return r;
        r = inode_fd(p, i, ret_fd, NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(i);
        return 0;
}

int pt_lookup(void *fs, const FsCtx *c, uint64_t parent, const char *name, FsEntry *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        int r;

        r = get_dir(p, parent, &dir);
        if (r < 0)
                return r;
        /* "." is the directory itself, and ".." of the share root is the root: the guest never
         * sees what lies above the share. */
        if (strcmp(name, ".") == 0 || (dir->pinned && strcmp(name, "..") == 0))
                return entry_again(p, dir, ret);
        r = inode_fd(p, dir, &d, NULL);
        if (r < 0)
                return r;
        if (strcmp(name, "..") == 0)
                return lookup_parent(p, parent, d.fd, ret);
        return lookup_child(p, dir, d.fd, name, ret);
}

void pt_forget(void *fs, uint64_t nodeid, uint64_t nlookup) {
        Passthrough *p = fs;
        inode_map_forget(p->inodes, nodeid, nlookup);
}
