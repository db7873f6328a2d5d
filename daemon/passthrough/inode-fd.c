/* inode-fd.c: the fds of an inode for one operation: its O_PATH fd, an fd for I/O, its statx. */
#include "inode-fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "beneath.h"
#include "file-handle.h"
#include "host-permission.h"
#include "passthrough-internal.h"
#include "util.h"

int statx_fd(int fd, struct statx *stx) {
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT, STATX_WANT, stx) < 0)
                return negative_errno();
        return 0;
}

void stat_from_statx(struct stat *st, const struct statx *x) {
        *st = (struct stat) {
                .st_dev = makedev(x->stx_dev_major, x->stx_dev_minor),
                .st_ino = x->stx_ino,
                .st_mode = x->stx_mode,
                .st_nlink = x->stx_nlink,
                .st_uid = x->stx_uid,
                .st_gid = x->stx_gid,
                .st_rdev = makedev(x->stx_rdev_major, x->stx_rdev_minor),
                .st_size = (off_t) x->stx_size,
                .st_blksize = x->stx_blksize,
                .st_blocks = (blkcnt_t) x->stx_blocks,
                .st_atim = { x->stx_atime.tv_sec, x->stx_atime.tv_nsec },
                .st_mtim = { x->stx_mtime.tv_sec, x->stx_mtime.tv_nsec },
                .st_ctim = { x->stx_ctime.tv_sec, x->stx_ctime.tv_nsec },
        };
}

/* The inode's fd is no longer open (the clock took it back): re-opened by name from the nearest
 * ancestor that holds an fd, one name at a time with beneath_openat() (no symlink, no magic link,
 * no ".."; under the share's root, where the walk starts at worst), each step checked to be the node
 * it stands for (inode_is(): device, inode number, mount, type, birth time). A name that is gone, or
 * leads to another inode, a symlink or a non-directory on the way, turns that node stale: ESTALE.
 * The fds opened on the way are kept for those nodes, as far as the clock has room. */
static int reopen(Passthrough *p, Inode *i, InodeFd *ret, struct statx *ret_stx) {
        FdCache *cache = inode_map_fd_cache(p->inodes);
        _cleanup_(inode_unrefp) Inode *top = NULL;
        InodeStep *steps = NULL;
        InodeFd at = INODE_FD_NULL;
        struct statx stx;
        size_t n = 0;
        int r, fd;

        if (atomic_load(&i->stale))
                return -ESTALE;
        r = inode_map_way_down(i, &top, &fd, &steps, &n);
        if (r < 0)
                return r;
        at = (InodeFd){ .budget = &p->budget, .fd = fd, .pin = top };
        for (size_t k = 0; k < n; k++) {
                Inode *node = steps[k].inode;
                bool cached;

                fd = beneath_openat(&p->budget, at.fd, steps[k].name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
                if (fd >= 0) {
                        r = statx_fd(fd, &stx);
                        if (r >= 0 && !inode_is(node, &stx))
                                r = -ESTALE;
                        if (r < 0)
                                fd = fd_budget_close(&p->budget, fd);
                } else
                        r = fd;
                if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -EXDEV || r == -ESTALE) {
                        inode_map_mark_stale(node);
                        r = -ESTALE;
                }
                if (r < 0)
                        break;
                inode_fd_done(&at);
                fd = fd_cache_install(cache, node, fd, &cached);
                at = (InodeFd){ .budget = &p->budget, .fd = fd, .owned = !cached, .pin = cached ? node : NULL };
        }
        if (r >= 0) {
                /* at.pin (if any) is i, which the caller holds a reference on. */
                *ret = at;
                at = INODE_FD_NULL;
                if (ret_stx)
                        *ret_stx = stx;
        }
        inode_fd_done(&at); /* before top's reference goes */
        inode_steps_free(steps, n);
        return r;
}

int inode_fd(Passthrough *p, Inode *i, InodeFd *ret, struct statx *ret_stx) {
        int fd, r;

        *ret = INODE_FD_NULL;
        if (!i->handle) {
                fd = fdword_acquire(&i->fdword);
                /* A node restored without its file (--migration-on-error=guest-error) has nothing
                 * to re-open. */
                if (fd < 0 && i->lost)
                        return -EIO;
                if (fd < 0)
                        return reopen(p, i, ret, ret_stx);
                *ret = (InodeFd){ .budget = &p->budget, .fd = fd, .pin = i };
                if (ret_stx) {
                        r = statx_fd(fd, ret_stx);
                        if (r < 0) {
                                inode_fd_done(ret);
                                return r;
                        }
                }
                return 0;
        }
        /* Remembered by handle: opened for this operation only, and checked to be the inode. */
        if (!fd_budget_take(&p->budget))
                return -ENFILE;
        fd = file_handle_open_checked(i->mount_fd, i->handle, i->key.dev, i->key.ino, O_PATH, ret_stx);
        if (fd < 0) {
                fd_budget_release(&p->budget);
                return fd;
        }
        *ret = (InodeFd){ .budget = &p->budget, .fd = fd, .owned = true };
        return 0;
}

int stat_inode(Passthrough *p, Inode *i, struct stat *st) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        struct statx stx;
        int r = inode_fd(p, i, &f, &stx);
        if (r < 0)
                return r;
        stat_from_statx(st, &stx);
        return 0;
}

void proc_name(char buf[static 16], int fd) {
        snprintf(buf, 16, "%i", fd);
}

/* Re-opens an inode for I/O through /proc/self/fd, the fd charged to the budget. Only regular
 * files and directories: opening a device node or FIFO the guest created would reach host devices
 * or block (CVE-2020-35517). With a caller c, the open needs what host_permission() grants c on the
 * inode's current attributes (statx of the fd inode_fd() holds anyway in handle mode). */
int open_inode_for(Passthrough *p, Inode *i, int flags, const FsCtx *c, int need) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        bool check = c && host_permission_applies(c);
        struct statx stx;
        char name[16];
        int r;

        if (i->type == S_IFLNK)
                return -ELOOP;
        if (i->type != S_IFREG && i->type != S_IFDIR)
                return -ENXIO;
        if (i->type == S_IFDIR && (flags & O_ACCMODE) != O_RDONLY)
                return -EISDIR;
        flags &= OPEN_FLAGS_ALLOWED & ~O_EXCL;
        /* By handle too through an O_PATH fd first: it is checked to be the inode before anything
         * opens it for I/O. */
        r = inode_fd(p, i, &f, check ? &stx : NULL);
        if (r < 0)
                return r;
        if (check) {
                r = host_permission(c, &stx, need);
                if (r < 0)
                        return r;
        }
        proc_name(name, f.fd);
        return fd_budget_openat(&p->budget, p->proc_self_fd, name, flags | O_CLOEXEC, 0);
}

int open_inode(Passthrough *p, Inode *i, int flags) {
        return open_inode_for(p, i, flags, NULL, 0);
}

/* The calling thread's working directory before proc_cwd_enter(), restored by proc_cwd_leave():
 * the passthrough is a library too (tests, fuzzers) and must not leave a thread somewhere else.
 * Nested enters (an xattr operation that reads the mapped metadata too) count. */
static _Thread_local int proc_cwd_saved = -1;
static _Thread_local unsigned proc_cwd_depth;

int proc_cwd_enter(Passthrough *p) {
        if (proc_cwd_depth > 0) {
                proc_cwd_depth++;
                return 0;
        }
        /* An fs_struct of the thread's own first (a no-op when it has one already), so no other
         * thread's working directory moves. */
        if (unshare(CLONE_FS) < 0)
                return negative_errno();
        proc_cwd_saved = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fchdir(p->proc_self_fd) < 0) {
                int r = negative_errno();
                proc_cwd_saved = safe_close(proc_cwd_saved);
                return r;
        }
        proc_cwd_depth = 1;
        return 0;
}

void proc_cwd_leave(void) {
        int saved = errno;

        if (proc_cwd_depth == 0 || --proc_cwd_depth > 0)
                return;
        /* Best effort: the daemon itself resolves nothing relative to a thread's working directory. */
        if (proc_cwd_saved < 0 || fchdir(proc_cwd_saved) < 0)
                (void) !chdir("/");
        proc_cwd_saved = safe_close(proc_cwd_saved);
        errno = saved;
}
