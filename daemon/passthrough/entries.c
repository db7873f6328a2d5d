/* entries.c: directory entries made, removed and renamed: MKNOD, MKDIR, SYMLINK, UNLINK, RMDIR, RENAME, LINK. */
#include "entries.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "attributes.h"
#include "credentials.h"
#include "host-permission.h"
#include "inode-fd.h"
#include "lookup.h"
#include "mapped-mode.h"
#include "passthrough-internal.h"
#include "request-progress.h"
#include "util.h"
#include "xattr.h"

/* The directory nodeid for a change of its entries by the guest caller c: get_dir_fd(), and the
 * host's answer to whether c may change entries there (write and search permission on the
 * directory's current attributes, in ret_stx; zeroed, no statx, when nothing is checked). */
static int get_dir_fd_for_change(Passthrough *p, const FsCtx *c, uint64_t nodeid, Inode **ret, InodeFd *ret_fd,
                                 struct statx *ret_stx) {
        _cleanup_(inode_unrefp) Inode *i = NULL;
        int r;

        r = get_dir(p, nodeid, &i);
        if (r < 0)
                return r;
        if (!host_permission_applies(c)) {
                *ret_stx = (struct statx){};
                r = inode_fd(p, i, ret_fd, NULL);
                if (r >= 0)
                        *ret = TAKE_PTR(i);
                return r;
        }
        r = inode_fd(p, i, ret_fd, ret_stx);
        if (r < 0)
                return r;
        r = host_permission(c, ret_stx, W_OK | X_OK);
        if (r < 0) {
                inode_fd_done(ret_fd);
                return r;
        }
        *ret = TAKE_PTR(i);
        return 0;
}

/* The sticky bit of a directory: only the owner of the directory or of the entry may remove or
 * replace it. 0 when name is absent (nothing to protect). */
static int sticky_permission(const FsCtx *c, int dirfd, const struct statx *dir, const char *name) {
        struct stat st;

        if (!host_permission_applies(c) || !(dir->stx_mode & S_ISVTX) || c->uid == dir->stx_uid)
                return 0;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        return st.st_uid == c->uid ? 0 : -EPERM;
}

/* Removes a just-created entry e again, as if its creation had failed: the guest's lookup is
 * dropped and the name (in dirfd; NULL for an unnamed O_TMPFILE) removed if it still names the
 * new inode. */
static void drop_new_entry(Passthrough *p, int dirfd, const char *name, const FsEntry *e) {
        struct stat st;

        inode_map_forget(p->inodes, e->nodeid, 1);
        if (name && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && st.st_dev == e->st.st_dev &&
            st.st_ino == e->st.st_ino)
                (void)unlinkat(dirfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
}

/* Gives a just-created entry e (name in dir; NULL for an unnamed O_TMPFILE) the security labels of
 * the request and, map given, its mapped metadata (mapped-mode.h), replying the attributes the
 * guest then sees. When that fails the entry goes again (drop_new_entry()). */
int finish_new_entry(Passthrough *p, const FsCtx *c, int dirfd, const char *name, FsEntry *e,
                     const MappedMeta *map) {
        _cleanup_(inode_unrefp) Inode *i = NULL;
        int r = 0;

        if (c->n_labels == 0 && !map)
                return 0;
        i = get_inode(p, e->nodeid);
        if (!i)
                r = -EBADF;
        if (r >= 0 && c->n_labels > 0)
                r = xattr_set_labels(p, i, c);
        if (r >= 0 && map) {
                r = mapped_put(p, i, map, (mode_t) -1);
                if (r >= 0)
                        r = guest_stat_inode(p, i, &e->st);
        }
        if (r < 0)
                drop_new_entry(p, dirfd, name, e);
        return r;
}

void entry_progress_started(int dirfd, const char *name) {
        struct stat st;

        if (request_progress_wanted())
                request_progress_started(fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0);
}

/* The guest's mode carries its type (0 from CREATE and TMPFILE: a regular file); the request's
 * umask is applied by the host to what it makes, by us to a device's mapped bits. *host_mode is
 * changed only where metadata is returned. */
const MappedMeta *new_entry_map(Passthrough *p, const FsCtx *c, mode_t mode, dev_t rdev, MappedMeta *m,
                                mode_t *host_mode) {
        mode_t type = mode & S_IFMT;

        if (!mapped_on(p))
                return NULL;
        if (type == S_IFCHR || type == S_IFBLK) {
                /* An empty regular file with no permission beyond its owner's: the guest's device
                 * node lives only in the metadata. */
                *m = (MappedMeta){ .mode = type | (mode & 07777 & ~(c->has_umask ? c->umask : 0)), .rdev = rdev };
                *host_mode = S_IFREG | (mode & 0600);
                return m;
        }
        if ((type != S_IFREG && type != 0) || !(mode & 07000))
                return NULL;
        *m = (MappedMeta){ .mode = mode & 07000 };
        *host_mode = mode & ~(mode_t) 07000;
        return m;
}

/* Runs a creating operation as the caller, then looks the new name up and labels it. */
typedef int (*CreateFn)(int dirfd, const char *name, const void *arg);

static int create_as_caller(Passthrough *p, const FsCtx *c, uint64_t parent, const char *name, CreateFn fn,
                            const void *arg, const MappedMeta *map, FsEntry *ret) {
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        Credentials cr;
        int r;

        r = get_dir_fd(p, parent, &dir, &d);
        if (r < 0)
                return r;
        entry_progress_started(d.fd, name);
        r = credentials_enter(&cr, c->uid, c->gid, c->groups, c->n_groups, c->has_umask, c->umask);
        if (r < 0)
                return r;
        r = fn(d.fd, name, arg);
        credentials_leave(&cr);
        /* At once, not after the lookup below: a process killed from here on must not make the
         * name again (request-progress.h; the FUSE layer records the final result after). */
        request_progress_host_done(r);
        if (r < 0)
                return r;
        r = lookup_child(p, dir, d.fd, name, ret);
        if (r < 0)
                return r;
        return finish_new_entry(p, c, d.fd, name, ret, map);
}

typedef struct MknodArgs {
        mode_t mode;
        dev_t rdev;
} MknodArgs;

static int do_mknod(int dirfd, const char *name, const void *arg) {
        const MknodArgs *m = arg;
        return mknodat(dirfd, name, m->mode, m->rdev) < 0 ? negative_errno() : 0;
}

int pt_mknod(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
             FsEntry *ret) {
        Passthrough *p = fs;
        MknodArgs m = { guest_mode(p, mode, mode & S_IFMT), rdev };
        const MappedMeta *map = NULL;
        MappedMeta mm;

        switch (mode & S_IFMT) {
        case S_IFREG:
                map = new_entry_map(p, c, mode, 0, &mm, &m.mode);
                break;
        case S_IFIFO:
        case S_IFSOCK:
                break;
        case S_IFCHR:
        case S_IFBLK:
                /* A whiteout (character device 0:0, what an overlayfs upper layer on the share
                 * makes for a deleted file) opens nothing and needs no CAP_MKNOD: always made. */
                if ((mode & S_IFMT) == S_IFCHR && rdev == makedev(0, 0))
                        break;
                /* A device node in the share opens that device for every host user its mode lets
                 * in. map: a regular file with the device in its metadata; allow: the node itself
                 * (where the caller is privileged: the host kernel decides); refuse: EPERM. */
                if (p->privileged == PRIVILEGED_FILES_MAP)
                        map = new_entry_map(p, c, mode, rdev, &mm, &m.mode);
                else if (p->privileged != PRIVILEGED_FILES_ALLOW)
                        return -EPERM;
                break;
        case S_IFDIR:
                return -EPERM;
        default:
                return -EINVAL;
        }
        if ((m.mode & S_IFMT) != S_IFCHR && (m.mode & S_IFMT) != S_IFBLK)
                m.rdev = 0;
        return create_as_caller(p, c, parent, name, do_mknod, &m, map, ret);
}

static int do_mkdir(int dirfd, const char *name, const void *arg) {
        return mkdirat(dirfd, name, *(const mode_t *)arg) < 0 ? negative_errno() : 0;
}

int pt_mkdir(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, FsEntry *ret) {
        mode = guest_mode(fs, mode & 07777, S_IFDIR);
        return create_as_caller(fs, c, parent, name, do_mkdir, &mode, NULL, ret);
}

static int do_symlink(int dirfd, const char *name, const void *arg) {
        /* The target is stored as data; nothing here resolves it. */
        return symlinkat((const char *)arg, dirfd, name) < 0 ? negative_errno() : 0;
}

int pt_symlink(void *fs, const FsCtx *c, uint64_t parent, const char *name, const char *target,
               FsEntry *ret) {
        FsCtx c2 = *c;
        c2.has_umask = false;
        return create_as_caller(fs, &c2, parent, name, do_symlink, target, NULL, ret);
}

/* UNLINK, RMDIR, RENAME and LINK act as the daemon, checked on the host's attributes of the
 * directories: write permission there often comes through a group (a shared project directory),
 * which these requests do not carry. */
static int remove_name(Passthrough *p, const FsCtx *c, uint64_t parent, const char *name, int flags) {
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        struct statx dstx;
        int r = get_dir_fd_for_change(p, c, parent, &dir, &d, &dstx);
        if (r < 0)
                return r;
        r = sticky_permission(c, d.fd, &dstx, name);
        if (r < 0)
                return r;
        entry_progress_started(d.fd, name);
        r = unlinkat(d.fd, name, flags) < 0 ? negative_errno() : 0;
        request_progress_host_done(r);
        return r;
}

int pt_unlink(void *fs, const FsCtx *c, uint64_t parent, const char *name) {
        return remove_name(fs, c, parent, name, 0);
}

int pt_rmdir(void *fs, const FsCtx *c, uint64_t parent, const char *name) {
        return remove_name(fs, c, parent, name, AT_REMOVEDIR);
}

int pt_rename(void *fs, const FsCtx *c, uint64_t parent, const char *name, uint64_t newparent,
              const char *newname, unsigned flags) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *a = NULL, *b = NULL, *moved = NULL, *over = NULL;
        _cleanup_(inode_fd_done) InodeFd fa = INODE_FD_NULL, fb = INODE_FD_NULL;
        struct statx sa, sb;
        int r;

        if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
                return -EINVAL;
        r = get_dir_fd_for_change(p, c, parent, &a, &fa, &sa);
        if (r < 0)
                return r;
        r = get_dir_fd_for_change(p, c, newparent, &b, &fb, &sb);
        if (r < 0)
                return r;
        r = sticky_permission(c, fa.fd, &sa, name);
        if (r >= 0)
                r = sticky_permission(c, fb.fd, &sb, newname);
        if (r < 0)
                return r;
        /* The nodes' paths follow (inode-map.h), so that what the guest moved re-opens by its new
         * name. A node the rename replaced keeps its old path, which a re-open finds taken by
         * another inode: ESTALE, as for a removed name (UNLINK and RMDIR change no path). */
        moved = inode_of_name(p, fa.fd, name);
        if (flags & RENAME_EXCHANGE)
                over = inode_of_name(p, fb.fd, newname);
        entry_progress_started(fa.fd, name);
        r = syscall(SYS_renameat2, fa.fd, name, fb.fd, newname, flags) < 0 ? negative_errno() : 0;
        request_progress_host_done(r);
        if (r < 0)
                return r;
        if (over)
                inode_map_set_path(over, a, name);
        if (moved)
                inode_map_set_path(moved, b, newname);
        return 0;
}

int pt_link(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t newparent, const char *newname,
            FsEntry *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid), *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL, d = INODE_FD_NULL;
        struct statx dstx;
        char name[16];
        int r;

        if (!i)
                return unknown_node(p);
        if (i->type == S_IFDIR)
                return -EPERM;
        r = get_dir_fd_for_change(p, c, newparent, &dir, &d, &dstx);
        if (r < 0)
                return r;
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        /* Linking the O_PATH handle through its /proc/self/fd entry names exactly the inode we hold
         * (no path is resolved) and needs no CAP_DAC_READ_SEARCH, unlike AT_EMPTY_PATH. */
        proc_name(name, f.fd);
        entry_progress_started(d.fd, newname);
        r = linkat(p->proc_self_fd, name, d.fd, newname, AT_SYMLINK_FOLLOW) < 0 ? negative_errno() : 0;
        request_progress_host_done(r); /* at once: a process killed from here on must not link again */
        if (r < 0)
                return r;
        return entry_again(p, i, ret);
}
