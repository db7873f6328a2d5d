/* file-io.c: open files: OPEN, CREATE, TMPFILE, READ, WRITE, FLUSH, RELEASE, FSYNC and the rest. */
#include "file-io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "attributes.h"
#include "beneath.h"
#include "credentials.h"
#include "entries.h"
#include "handle-map.h"
#include "host-permission.h"
#include "inode-fd.h"
#include "locks.h"
#include "lookup.h"
#include "mapped-mode.h"
#include "passthrough-internal.h"
#include "session-journal.h"
#include "request-progress.h"
#include "util.h"
#include "xattr.h"

/* The flags the host open gets for a guest open: unsupported and dangerous bits dropped. */
static int host_open_flags(Passthrough *p, int flags) {
        flags &= OPEN_FLAGS_ALLOWED;
        if (!p->opts.allow_direct_io)
                flags &= ~O_DIRECT;
        if (!p->opts.preserve_noatime)
                flags &= ~O_NOATIME;
        if (atomic_load(&p->writeback)) {
                /* With a guest-side writeback cache the guest reads pages of write-only files and
                 * keeps the file size itself, so the host fd must be readable and not appending. */
                if ((flags & O_ACCMODE) == O_WRONLY)
                        flags = (flags & ~O_ACCMODE) | O_RDWR;
                flags &= ~O_APPEND;
        }
        return flags;
}

/* What an open with O_TRUNC leaves to the daemon: clearing set-id bits when the guest asked (the
 * daemon truncates with CAP_FSETID for a guest root), and a capability stored under a renamed
 * xattr, which the host kernel does not know to drop. */
static int after_truncating_open(Passthrough *p, Inode *i, int fd, int flags, bool kill_priv) {
        if (!(flags & O_TRUNC))
                return 0;
        if (kill_priv)
                (void) kill_suidgid(p, i, fd);
        return xattr_drop_capability(p, i, fd);
}

int pt_open(void *fs, const FsCtx *c, uint64_t nodeid, int flags, bool kill_priv, uint64_t *ret_fh) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        int fd, r, need;

        if (!i)
                return unknown_node(p);
        if (flags & O_CREAT)
                return -EINVAL;
        if (i->type == S_IFDIR)
                return -EISDIR;
        /* As the daemon, checked on the host's attributes: acting as the caller would lose the
         * supplementary groups the guest kernel granted the open with. */
        need = host_open_need(flags);
        flags = host_open_flags(p, flags) & ~(O_DIRECTORY | O_EXCL);
        fd = open_inode_for(p, i, flags, c, need);
        if (fd < 0)
                return fd;
        r = after_truncating_open(p, i, fd, flags, kill_priv);
        if (r < 0) {
                fd_budget_close(&p->budget, fd);
                return r;
        }
        r = handle_map_add(p->handles, i, fd, flags, false, ret_fh);
        return r;
}

/* An fd for I/O plus an O_PATH twin of it, counted as one guest lookup of dname in dir (NULL/NULL
 * for an unnamed file), and an fh. */
static int register_open_file(Passthrough *p, int fd, int flags, Inode *dir, const char *dname, FsEntry *ret,
                              uint64_t *ret_fh) {
        _cleanup_(inode_unrefp) Inode *i = NULL;
        char name[16];
        struct statx stx;
        int pfd, r;

        /* fd holds one budget fd already; the O_PATH twin needs a second one. */
        proc_name(name, fd);
        pfd = fd_budget_openat(&p->budget, p->proc_self_fd, name, O_PATH | O_CLOEXEC, 0);
        if (pfd < 0) {
                fd_budget_close(&p->budget, fd);
                return pfd;
        }
        r = statx_fd(pfd, &stx);
        if (r < 0) {
                fd_budget_close(&p->budget, pfd);
                fd_budget_close(&p->budget, fd);
                return r;
        }
        r = remember_inode(p, pfd, &stx, dname ? dir : NULL, dname, &i);
        if (r < 0) {
                fd_budget_close(&p->budget, fd);
                return r;
        }
        r = handle_map_add(p->handles, i, fd, flags, false, ret_fh);
        if (r < 0) {
                inode_map_forget(p->inodes, i->nodeid, 1);
                return r;
        }
        *ret = (FsEntry) { .nodeid = i->nodeid };
        r = guest_stat(p, i, -1, &stx, &ret->st);
        if (r < 0) {
                (void) handle_map_remove(p->handles, *ret_fh, i->nodeid, 0);
                inode_map_forget(p->inodes, i->nodeid, 1);
        }
        return r;
}

/* A file CREATE or TMPFILE just made (name in dirfd; NULL when unnamed): registered as an open
 * file (register_open_file()), labelled and given its mapped metadata; when that fails the handle
 * goes again. */
static int register_new_file(Passthrough *p, const FsCtx *c, int fd, int flags, Inode *dir, int dirfd,
                             const char *name, const MappedMeta *map, FsEntry *ret, uint64_t *ret_fh) {
        int r;

        r = register_open_file(p, fd, flags, dir, name, ret, ret_fh);
        if (r < 0)
                return r;
        r = finish_new_entry(p, c, dirfd, name, ret, map);
        if (r < 0)
                (void) handle_map_remove(p->handles, *ret_fh, ret->nodeid, 0);
        return r;
}

/* CREATE without O_EXCL of a name that exists: opens what the name holds as the caller, with the
 * flags OPEN would use. The name is resolved once, without following it, to an O_PATH fd; only a
 * regular file is opened (never a symlink's target, a FIFO or a device node), and it is opened
 * through that fd, so the node replied is the inode the caller's open was checked on even when
 * the name is replaced meanwhile. */
static int create_open_existing(Passthrough *p, const FsCtx *c, Inode *dir, int dirfd, const char *name,
                                int flags, bool kill_priv, FsEntry *ret, uint64_t *ret_fh) {
        _cleanup_(handle_unrefp) Handle *h = NULL;
        struct statx stx;
        Credentials cr;
        char pname[16];
        int pfd, fd, r;

        pfd = beneath_openat(&p->budget, dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
        if (pfd < 0)
                return pfd;
        r = statx_fd(pfd, &stx);
        if (r >= 0 && !S_ISREG(stx.stx_mode))
                r = S_ISDIR(stx.stx_mode) ? -EISDIR : S_ISLNK(stx.stx_mode) ? -ELOOP : -ENXIO;
        if (r >= 0) {
                proc_name(pname, pfd);
                r = credentials_enter(&cr, c->uid, c->gid, c->groups, c->n_groups, false, 0);
        }
        if (r >= 0) {
                fd = fd_budget_openat(&p->budget, p->proc_self_fd, pname, flags | O_CLOEXEC, 0);
                r = MIN(fd, 0);
                credentials_leave(&cr);
        }
        fd_budget_close(&p->budget, pfd);
        if (r < 0)
                return r;
        r = register_open_file(p, fd, flags, dir, name, ret, ret_fh);
        if (r < 0)
                return r;
        r = handle_map_get(p->handles, *ret_fh, ret->nodeid, 0, &h);
        if (r >= 0)
                r = after_truncating_open(p, h->inode, h->fd, flags, kill_priv);
        if (r >= 0 && (flags & O_TRUNC))
                r = guest_stat_inode(p, h->inode, &ret->st); /* the mode kill_priv may have changed */
        if (r < 0) {
                (void) handle_map_remove(p->handles, *ret_fh, ret->nodeid, 0);
                inode_map_forget(p->inodes, ret->nodeid, 1);
        }
        return r;
}

int pt_create(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, int flags,
              bool kill_priv, FsEntry *ret, uint64_t *ret_fh) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        const MappedMeta *map;
        MappedMeta mm;
        Credentials cr;
        mode_t hmode;
        int fd, r, hflags;

        r = get_dir_fd(p, parent, &dir, &d);
        if (r < 0)
                return r;
        if ((mode & S_IFMT) && (mode & S_IFMT) != S_IFREG)
                return -EINVAL;
        hmode = mode & 07777;
        map = new_entry_map(p, c, hmode, 0, &mm, &hmode);
        hflags = host_open_flags(p, flags) & ~O_DIRECTORY;
        /* A name removed between the two steps below is created again: a few times, as a guest
         * racing a remover would see either outcome. */
        for (unsigned attempt = 0;; attempt++) {
                entry_progress_started(d.fd, name);
                r = credentials_enter(&cr, c->uid, c->gid, c->groups, c->n_groups, c->has_umask, c->umask);
                if (r < 0)
                        return r;
                /* O_EXCL first: an existing name is never opened by this call, so a FIFO or device
                 * node that sits there (or a symlink) is never opened for I/O. */
                fd = beneath_openat(&p->budget, d.fd, name, hflags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                    guest_mode(p, hmode, S_IFREG));
                r = MIN(fd, 0);
                credentials_leave(&cr);
                if (r != -EEXIST || (flags & O_EXCL)) {
                        /* At once: a process killed from here on must not create the file again
                         * (an O_EXCL one would answer EEXIST to its own create); the next one
                         * opens it (pt_open_created()). An existing name opened below changes
                         * nothing an open again would not: no record. */
                        request_progress_host_done(r);
                        break;
                }
                /* Plain O_CREAT on an existing name: the guest kernel took it for absent and checked
                 * only the parent, so the open is the caller's, checked by the host. */
                r = create_open_existing(p, c, dir, d.fd, name, hflags & ~O_EXCL, kill_priv, ret, ret_fh);
                if (r != -ENOENT || attempt >= 3)
                        return r;
        }
        if (r < 0)
                return r;
        return register_new_file(p, c, fd, hflags, dir, d.fd, name, map, ret, ret_fh);
}

int pt_open_created(void *fs, const FsCtx *c, uint64_t parent, const char *name, int flags, FsEntry *ret,
                    uint64_t *ret_fh) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        int r;

        r = get_dir_fd(p, parent, &dir, &d);
        if (r < 0)
                return r;
        /* As the caller, as a CREATE of an existing name: never as the daemon, even though the
         * file is (most likely) the caller's own. */
        return create_open_existing(p, c, dir, d.fd, name,
                                    host_open_flags(p, flags) & ~(O_DIRECTORY | O_CREAT | O_EXCL | O_TRUNC), false, ret,
                                    ret_fh);
}

int pt_tmpfile(void *fs, const FsCtx *c, uint64_t parent, mode_t mode, int flags, FsEntry *ret,
               uint64_t *ret_fh) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        const MappedMeta *map;
        MappedMeta mm;
        Credentials cr;
        mode_t hmode;
        int fd, r, hflags;

        r = get_dir_fd(p, parent, &dir, &d);
        if (r < 0)
                return r;
        hmode = mode & 07777;
        map = new_entry_map(p, c, hmode, 0, &mm, &hmode);
        hflags = host_open_flags(p, flags) & ~(O_DIRECTORY | O_EXCL | O_TRUNC | O_APPEND);
        if ((hflags & O_ACCMODE) == O_RDONLY)
                return -EINVAL; /* O_TMPFILE needs write access, as the kernel says */
        r = credentials_enter(&cr, c->uid, c->gid, c->groups, c->n_groups, c->has_umask, c->umask);
        if (r < 0)
                return r;
        fd = beneath_openat(&p->budget, d.fd, ".", hflags | O_TMPFILE | O_CLOEXEC | (flags & O_EXCL),
                              guest_mode(p, hmode, S_IFREG));
        r = MIN(fd, 0);
        credentials_leave(&cr);
        if (r < 0)
                return r;
        /* Unnamed: when labelling fails, dropping the handle and the lookup removes the file. */
        return register_new_file(p, c, fd, hflags, dir, d.fd, NULL, map, ret, ret_fh);
}

/* The handle a read or write goes through, and its offset checked: the host takes an off_t, so an
 * offset past INT64_MAX is the guest's error (EINVAL), never a wrap to a negative one. */
static int io_handle(Passthrough *p, uint64_t nodeid, uint64_t fh, uint64_t off, Handle **ret) {
        if (off > INT64_MAX)
                return -EINVAL;
        return handle_map_get(p->handles, fh, nodeid, 0, ret);
}

ssize_t pt_read(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off,
                const struct iovec *iov, unsigned niov) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        ssize_t n;
        int r;

        r = io_handle(p, nodeid, fh, off, &h);
        if (r < 0)
                return r;
        n = preadv(h->fd, iov, (int) niov, (off_t) off);
        return n < 0 ? negative_errno() : n;
}

ssize_t pt_write(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off,
                 const struct iovec *iov, unsigned niov, bool kill_priv) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        ssize_t n;
        int r;

        r = io_handle(p, nodeid, fh, off, &h);
        if (r < 0)
                return r;
        if (kill_priv) {
                /* The daemon writes with CAP_FSETID, so the host keeps setuid/setgid: clear them as
                 * the guest asked (the host does drop security.capability on its own). */
                r = kill_suidgid(p, h->inode, h->fd);
                if (r < 0)
                        return r;
        }
        /* Every write, as the kernel's file_remove_privs() for the real name. */
        r = xattr_drop_capability(p, h->inode, h->fd);
        if (r < 0)
                return r;
        n = pwritev(h->fd, iov, (int) niov, (off_t) off);
        n = n < 0 ? negative_errno() : n;
        request_progress_host_done(n); /* at once: an O_APPEND write must not happen twice */
        return n;
}

int pt_flush(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int r, fd;

        r = handle_map_get(p->handles, fh, nodeid, 0, &h);
        if (r < 0)
                return r;
        /* close() of a duplicate reports delayed write errors (NFS-style) as the guest's close
         * would see them, without giving up the handle. */
        fd = dup(h->fd);
        if (fd < 0)
                return negative_errno();
        r = close(fd) < 0 ? negative_errno() : 0;
        /* A close releases the POSIX locks of its owner. */
        plock_drop_owner(p, h->inode, lock_owner);
        return r;
}

int pt_handle_kept(void *fs, uint64_t nodeid, uint64_t fh, bool dir) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;

        return handle_map_get(p->handles, fh, nodeid, dir, &h);
}

int pt_release(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner,
               bool flock_unlock) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int r;

        r = handle_map_get_to_release(p->handles, fh, nodeid, &h);
        if (r < 0)
                return r;
        /* The open file's flock ends with the guest's last close. With --crash-restarts the keeper
         * holds a duplicate of the fd until it has handled the release (session-journal.h): the
         * flock is taken off now rather than when the last copy closes. */
        if (flock_unlock || (journal_active() && handle_flock_type(h) != F_UNLCK))
                (void) flock(h->fd, LOCK_UN);
        r = handle_map_remove(p->handles, fh, nodeid, 0);
        if (r < 0)
                return r;
        /* The last close of the guest's open file: the POSIX locks of its owners are gone already
         * (FLUSH), what is left was taken through this file (OFD locks) and ends with it. */
        plock_drop_handle(p, h);
        return 0;
}

/* FSYNC and FSYNCDIR: is_dir says which kind of handle fh must be. */
int fsync_handle(Passthrough *p, uint64_t nodeid, uint64_t fh, int is_dir, bool datasync) {
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int r;

        r = handle_map_get(p->handles, fh, nodeid, is_dir, &h);
        if (r < 0)
                return r;
        r = datasync ? fdatasync(h->fd) : fsync(h->fd);
        return r < 0 ? negative_errno() : 0;
}

int pt_fsync(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync) {
        return fsync_handle(fs, nodeid, fh, 0, datasync);
}

int pt_fallocate(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int mode, uint64_t off,
                 uint64_t len) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int r;

        if (off > INT64_MAX || len > INT64_MAX)
                return -EINVAL;
        r = handle_map_get(p->handles, fh, nodeid, 0, &h);
        if (r < 0)
                return r;
        r = xattr_drop_capability(p, h->inode, h->fd); /* the kernel's vfs_fallocate() does too */
        if (r < 0)
                return r;
        r = fallocate(h->fd, mode, (off_t) off, (off_t) len) < 0 ? negative_errno() : 0;
        /* At once: COLLAPSE_RANGE and INSERT_RANGE done twice would move the data twice. */
        request_progress_host_done(r);
        return r;
}

int64_t pt_lseek(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int64_t off, int whence) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        off_t o;
        int r;

        if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END && whence != SEEK_DATA &&
            whence != SEEK_HOLE)
                return -EINVAL;
        r = handle_map_get(p->handles, fh, nodeid, 0, &h);
        if (r < 0)
                return r;
        o = lseek(h->fd, (off_t) off, whence);
        return o < 0 ? negative_errno() : (int64_t) o;
}

ssize_t pt_copy_file_range(void *fs, const FsCtx *c, uint64_t nodeid_in, uint64_t fh_in, uint64_t off_in,
                           uint64_t nodeid_out, uint64_t fh_out, uint64_t off_out, uint64_t len,
                           unsigned flags) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *a = NULL, *b = NULL;
        loff_t oi = (loff_t) off_in, oo = (loff_t) off_out;
        ssize_t n;
        int r;

        if (off_in > INT64_MAX || off_out > INT64_MAX || flags != 0)
                return -EINVAL;
        r = handle_map_get(p->handles, fh_in, nodeid_in, 0, &a);
        if (r < 0)
                return r;
        r = handle_map_get(p->handles, fh_out, nodeid_out, 0, &b);
        if (r < 0)
                return r;
        r = xattr_drop_capability(p, b->inode, b->fd); /* a write to the destination */
        if (r < 0)
                return r;
        n = copy_file_range(a->fd, &oi, b->fd, &oo, (size_t) MIN(len, (uint64_t) SSIZE_MAX), 0);
        n = n < 0 ? negative_errno() : n;
        request_progress_host_done(n); /* at once: the next process answers this count */
        return n;
}
