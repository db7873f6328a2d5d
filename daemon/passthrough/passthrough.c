/* passthrough.c: FsOps over a host directory with O_PATH inode handles. */
#include "passthrough.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <linux/fs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "credentials.h"
#include "file-handle.h"
#include "log.h"
#include "fd-budget.h"
#include "dir-stream.h"
#include "handle-map.h"
#include "inode-map.h"
#include "locks.h"
#include "passthrough-internal.h"
#include "xattr.h"

#define STATX_WANT (STATX_BASIC_STATS | STATX_MNT_ID)

/* Open flags a guest may pass through to the host for I/O; everything else is dropped. */
#define OPEN_FLAGS_ALLOWED                                                                                            \
        (O_ACCMODE | O_APPEND | O_TRUNC | O_DIRECT | O_SYNC | O_DSYNC | O_NOATIME | O_NONBLOCK | O_LARGEFILE |        \
         O_DIRECTORY | O_EXCL)

static Inode *get_inode(Passthrough *p, uint64_t nodeid) {
        return inode_map_get(p->inodes, nodeid);
}

int statx_fd(int fd, struct statx *stx) {
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT, STATX_WANT, stx) < 0)
                return negative_errno();
        return 0;
}

static void stat_from_statx(struct stat *st, const struct statx *x) {
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

int inode_fd(Passthrough *p, Inode *i, InodeFd *ret, struct statx *ret_stx) {
        int fd, r;

        *ret = INODE_FD_NULL;
        if (i->fd >= 0) {
                if (ret_stx) {
                        r = statx_fd(i->fd, ret_stx);
                        if (r < 0)
                                return r;
                }
                *ret = (InodeFd){ .budget = &p->budget, .fd = i->fd };
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

static int stat_inode(Passthrough *p, Inode *i, struct stat *st) {
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
 * or block (CVE-2020-35517). */
int open_inode(Passthrough *p, Inode *i, int flags) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
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
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        proc_name(name, f.fd);
        return fd_budget_openat(&p->budget, p->proc_self_fd, name, flags | O_CLOEXEC, 0);
}

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

/* Set-id bits the guest asks for (issue 13 item 10). The share is a host directory: a set-user-id
 * file a guest made runs with its owner's host identity for any host user who executes it (guest
 * root makes host-root programs). Dropped unless --allow-privileged-files; a directory keeps
 * set-group-id, which only makes new entries inherit its group. */
static mode_t guest_mode(const Passthrough *p, mode_t mode, bool dir) {
        if (p->opts.privileged_files)
                return mode;
        return mode & ~(mode_t) (S_ISUID | (dir ? 0 : S_ISGID));
}

/* Clears setuid, and setgid when group-executable, as an unprivileged write or truncate would. */
static int kill_suidgid(Passthrough *p, Inode *i, int io_fd) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        struct statx stx;
        mode_t mode;
        char name[16];
        int r;

        r = inode_fd(p, i, &f, &stx);
        if (r < 0)
                return r;
        if (i->type != S_IFREG)
                return 0;
        mode = stx.stx_mode & 07777;
        if (!(mode & S_ISUID) && !((mode & S_ISGID) && (mode & S_IXGRP)))
                return 0;
        mode &= ~S_ISUID;
        if (mode & S_IXGRP)
                mode &= ~S_ISGID;
        if (io_fd >= 0)
                r = fchmod(io_fd, mode);
        else {
                proc_name(name, f.fd);
                r = fchmodat(p->proc_self_fd, name, mode, 0);
        }
        return r < 0 ? negative_errno() : 0;
}

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

/* In prefer mode, said once: which inodes keep an fd after all, and why. */
static void handle_fallback_note(Passthrough *p, int err) {
        if (!atomic_exchange(&p->handle_fallback_logged, true))
                log_notice("--inode-file-handles=prefer: an inode keeps an O_PATH fd, no file handle (%s); "
                           "others may too, this is said once",
                           err == -EXDEV   ? "its mount is a subtree of a larger filesystem"
                           : err == -E2BIG ? "too many mounts in the share"
                                           : strerror(-err));
}

/* Counts a guest lookup of the inode fd (O_PATH, one budget fd, taken over) refers to: by file
 * handle when the share uses them (the fd is closed then), else by fd. In prefer mode an inode
 * that cannot have a handle (a filesystem without them below a submount, a mount that is a
 * subtree, the mount table full) keeps its fd; in mandatory mode that is the lookup's error. */
static int remember_inode(Passthrough *p, int fd, const struct statx *stx, Inode **ret) {
        FileHandleBuf h;
        int mnt_id, err, mfd;

        if (!p->use_handles)
                return inode_map_add_lookup(p->inodes, fd, stx, ret);
        /* The handle on the stack and the mount fd found without a lock: an inode the map holds
         * already costs no allocation and no shared lock (the map copies the handle for a new
         * node only). */
        err = file_handle_of_fd(fd, &h, &mnt_id);
        if (err == 0) {
                mfd = mount_fds_get(&p->mounts, mnt_id, fd);
                if (mfd >= 0) {
                        fd_budget_close(&p->budget, fd);
                        return inode_map_add_lookup_handle(p->inodes, &h.fh, mfd, stx, ret);
                }
                err = mfd;
        }
        if (p->handles_mandatory) {
                fd_budget_close(&p->budget, fd);
                return err == -EXDEV || err == -E2BIG ? -EOPNOTSUPP : err;
        }
        handle_fallback_note(p, err);
        return inode_map_add_lookup(p->inodes, fd, stx, ret);
}

/* Counts a guest lookup of the child fd (O_PATH, one budget fd already taken) and fills e; dir (if
 * given) is the directory fd was found in, for the submount check. */
static int entry_from_fd(Passthrough *p, int fd, const Inode *dir, FsEntry *e) {
        _cleanup_(inode_unrefp) Inode *i = NULL;
        struct statx stx;
        int r;

        r = statx_fd(fd, &stx);
        if (r < 0) {
                fd_budget_close(&p->budget, fd);
                return r;
        }
        r = remember_inode(p, fd, &stx, &i);
        if (r < 0)
                return r;
        *e = (FsEntry) { .nodeid = i->nodeid, .submount = dir && is_submount(dir, &stx) };
        stat_from_statx(&e->st, &stx);
        return 0;
}

/* Looks name up in dir without following a symlink and counts the lookup. */
static int lookup_child(Passthrough *p, Inode *dir, int dirfd, const char *name, FsEntry *e) {
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
                *e = (FsEntry) { .nodeid = i->nodeid, .submount = is_submount(dir, &stx) };
                stat_from_statx(&e->st, &stx);
                return 0;
        }

        fd = fd_budget_openat(&p->budget, dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
        if (fd < 0)
                return fd;
        return entry_from_fd(p, fd, dir, e);
}

/* Counts one more lookup of an inode already held and fills e. */
static int entry_again(Passthrough *p, Inode *i, FsEntry *e) {
        int r;

        *e = (FsEntry){ .nodeid = i->nodeid };
        r = stat_inode(p, i, &e->st);
        if (r < 0)
                return r;
        inode_map_lookup_again(i);
        return 0;
}

static int get_dir(Passthrough *p, uint64_t nodeid, Inode **ret) {
        Inode *i = get_inode(p, nodeid);
        if (!i)
                return -EBADF;
        if (i->type != S_IFDIR) {
                inode_unref(i);
                return -ENOTDIR;
        }
        *ret = i;
        return 0;
}

/* The directory nodeid with an fd for one operation relative to it. */
static int get_dir_fd(Passthrough *p, uint64_t nodeid, Inode **ret, InodeFd *ret_fd) {
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

/* ---- lifecycle ---- */

/* /proc/self/fd as the root of a detached mount of its own (issue 13 item 6): ".." from it stays
 * where it is, so nothing else of procfs (/proc/sys/kernel/core_pattern, other processes) is
 * reachable through it, in the sandbox or not. An anonymous mount needs CAP_SYS_ADMIN; without it
 * (an unprivileged daemon, chroot mode in a container) the plain directory, which ".." leaves:
 * docs/security.md says what that means. */
static int open_proc_fd_dir(void) {
        int fd = (int) syscall(SYS_open_tree, AT_FDCWD, "/proc/self/fd", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);

        if (fd >= 0)
                return fd;
        if (errno != EPERM && errno != ENOSYS)
                return negative_errno();
        fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

/* --inode-file-handles at start: whether this share's inodes are remembered by handle. The root's
 * handle must be made and opened (the filesystem supports handles, the daemon has
 * CAP_DAC_READ_SEARCH), and the share's mount must show its whole filesystem, or handles would
 * reach outside the share (docs/security.md). prefer falls back to never with a notice; mandatory
 * refuses to start. */
static int setup_handles(Passthrough *p, int root, const struct statx *stx) {
        FileHandleBuf h;
        const char *why = NULL;
        int mnt_id, err = 0, fd, r, *whole = NULL;
        size_t n_whole = 0;

        if (p->opts.inode_file_handles == INODE_FILE_HANDLES_NEVER)
                return 0;
        p->handles_mandatory = p->opts.inode_file_handles == INODE_FILE_HANDLES_MANDATORY;
        r = mountinfo_whole_fs_mounts(&whole, &n_whole);
        if (r < 0 && !p->opts.handles_beyond_share)
                log_debug("Cannot read /proc/self/mountinfo: %s", strerror(-r));
        mount_fds_done(&p->mounts); /* the placeholder from passthrough_new() */
        mount_fds_init(&p->mounts, &p->budget, whole, n_whole, p->opts.handles_beyond_share);

        err = file_handle_of_fd(root, &h, &mnt_id);
        if (err < 0)
                why = err == -EOPNOTSUPP ? "the shared directory's filesystem cannot make file handles"
                                         : "name_to_handle_at() of the shared directory failed";
        if (!why) {
                r = mount_fds_get(&p->mounts, mnt_id, root);
                if (r == -EXDEV) {
                        err = r;
                        why = "the shared directory is a subdirectory (or a bind mount of one) of a larger "
                              "filesystem, whose every file a handle could open; share a whole filesystem or "
                              "pass --allow-handles-beyond-share";
                } else if (r < 0) {
                        err = r;
                        why = "no mount fd for the shared directory";
                }
        }
        if (!why) {
                fd = file_handle_open_checked(r, &h.fh, inode_key_from_statx(stx).dev, stx->stx_ino, O_PATH, NULL);
                if (fd == -EPERM) {
                        err = fd;
                        why = "open_by_handle_at() needs CAP_DAC_READ_SEARCH, which the daemon does not have";
                } else if (fd < 0) {
                        err = fd;
                        why = "open_by_handle_at() of the shared directory's handle failed";
                } else
                        safe_close(fd);
        }
        if (!why) {
                p->use_handles = true;
                log_debug("--inode-file-handles=%s: inodes are remembered by file handle",
                          p->handles_mandatory ? "mandatory" : "prefer");
                return 0;
        }
        if (err == -EXDEV) /* why says it all */
                err = 0;
        if (p->handles_mandatory) {
                log_error("--inode-file-handles=mandatory: %s%s%s%s", why, err ? " (" : "", err ? strerror(-err) : "",
                          err ? ")" : "");
                return err < 0 ? err : -EXDEV;
        }
        log_notice("--inode-file-handles=prefer: %s%s%s%s; every inode keeps an O_PATH fd, as with never", why,
                   err ? " (" : "", err ? strerror(-err) : "", err ? ")" : "");
        return 0;
}

int passthrough_new(Passthrough **ret, const FsOptions *opts) {
        _cleanup_(passthrough_freep) Passthrough *p = NULL;
        _cleanup_close_ int root = -1;
        struct statx stx;
        int r;

        if (!opts->shared_dir)
                return -EINVAL;
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->proc_self_fd = -1;
        mount_fds_init(&p->mounts, &p->budget, NULL, 0, false);
        p->opts = *opts;
        p->shared_dir = strdup(opts->shared_dir);
        if (!p->shared_dir)
                return -ENOMEM;
        p->opts.shared_dir = p->shared_dir;
        p->budget.max = opts->max_fds > 0 ? opts->max_fds : fd_budget_default_max();

        r = inode_map_new(&p->inodes, &p->budget);
        if (r < 0)
                return r;
        r = handle_map_new(&p->handles, &p->budget);
        if (r < 0)
                return r;
        handle_map_set_dir_buffer_max(p->handles, opts->dir_buffer_max);
        p->proc_self_fd = open_proc_fd_dir();
        if (p->proc_self_fd < 0)
                return p->proc_self_fd;
        /* The administrator's path may contain symlinks; everything below it is never followed. */
        root = open(opts->shared_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return negative_errno();
        r = statx_fd(root, &stx);
        if (r < 0)
                return r;
        r = inode_map_set_root(p->inodes, root, &stx);
        if (r < 0)
                return r;
        r = setup_handles(p, root, &stx); /* root stays valid: the root inode owns it now */
        TAKE_FD(root);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

Passthrough *passthrough_free(Passthrough *p) {
        if (!p)
                return NULL;
        /* Handles first: they hold references on inodes. */
        handle_map_free(p->handles);
        inode_map_free(p->inodes);
        mount_fds_done(&p->mounts); /* after the inodes: they borrow the mount fds */
        safe_close(p->proc_self_fd);
        free(p->shared_dir);
        free(p);
        return NULL;
}

int passthrough_drop_supplementary_groups(void) {
        return credentials_drop_supplementary_groups();
}

int64_t passthrough_raise_fd_limit(uint64_t rlimit_nofile) {
        return fd_budget_raise_rlimit(rlimit_nofile);
}

unsigned passthrough_inode_count(Passthrough *p) {
        return inode_map_size(p->inodes);
}

unsigned passthrough_handle_count(Passthrough *p) {
        return handle_map_size(p->handles);
}

bool passthrough_uses_handles(Passthrough *p) {
        return p->use_handles;
}

unsigned passthrough_mount_fd_count(Passthrough *p) {
        return mount_fds_count(&p->mounts);
}

uint64_t passthrough_fds_used(Passthrough *p) {
        return atomic_load(&p->budget.used);
}

static void pt_session_reset(void *fs, bool writeback) {
        Passthrough *p = fs;
        handle_map_clear(p->handles);
        inode_map_clear(p->inodes);
        atomic_store(&p->writeback, writeback);
}

/* ---- names ---- */

static int pt_lookup(void *fs, const FsCtx *c, uint64_t parent, const char *name, FsEntry *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        int r, fd;

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
        if (strcmp(name, "..") == 0) {
                fd = fd_budget_openat(&p->budget, d.fd, "..", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
                if (fd < 0)
                        return fd;
                /* No submount check: the parent of a mount root is not a submount of it. */
                return entry_from_fd(p, fd, NULL, ret);
        }
        return lookup_child(p, dir, d.fd, name, ret);
}

static void pt_forget(void *fs, uint64_t nodeid, uint64_t nlookup) {
        Passthrough *p = fs;
        inode_map_forget(p->inodes, nodeid, nlookup);
}

static int pt_getattr(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, struct stat *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int r;

        if (!i)
                return -EBADF;
        if (fh != FS_NO_FH) {
                r = handle_map_get(p->handles, fh, nodeid, -1, &h);
                if (r < 0)
                        return r;
        }
        return stat_inode(p, i, ret);
}

static int pt_setattr(void *fs, const FsCtx *c, uint64_t nodeid, const FsSetattr *a, struct stat *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(handle_unrefp) Handle *h = NULL;
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        char name[16];
        int r;

        if (!i)
                return -EBADF;
        if (a->valid & FS_SET_FH) {
                r = handle_map_get(p->handles, a->fh, nodeid, 0, &h);
                if (r < 0)
                        return r;
        }
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        proc_name(name, f.fd);

        if (a->valid & FS_SET_MODE) {
                mode_t mode = guest_mode(p, a->mode & 07777, i->type == S_IFDIR);
                if (h)
                        r = fchmod(h->fd, mode);
                else if (i->type == S_IFLNK)
                        r = (errno = EOPNOTSUPP, -1); /* Linux has no mode on symlinks */
                else
                        r = fchmodat(p->proc_self_fd, name, mode, 0);
                if (r < 0)
                        return negative_errno();
        }
        if (a->valid & (FS_SET_UID | FS_SET_GID)) {
                uid_t uid = (a->valid & FS_SET_UID) ? a->uid : (uid_t)-1;
                gid_t gid = (a->valid & FS_SET_GID) ? a->gid : (gid_t)-1;
                /* The host kernel clears setuid/setgid on chown of a non-directory, as the guest's
                 * would (killpriv on chown); a renamed capability is ours to drop. */
                r = xattr_drop_capability(p, i, h ? h->fd : -1);
                if (r < 0)
                        return r;
                if (fchownat(f.fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
                        /* EINVAL: an id the user namespace does not map (docs/id-mapping.md). */
                        return errno == EINVAL ? -EPERM : negative_errno();
        }
        if (a->valid & FS_SET_SIZE) {
                if (a->size > INT64_MAX)
                        return -EFBIG;
                if (h) {
                        r = xattr_drop_capability(p, i, h->fd);
                        if (r >= 0)
                                r = ftruncate(h->fd, (off_t) a->size) < 0 ? negative_errno() : 0;
                }
                else if (i->type == S_IFDIR)
                        r = -EISDIR;
                else if (i->type != S_IFREG)
                        r = -EINVAL;
                else {
                        _cleanup_close_ int fd = -1;
                        fd = open_inode(p, i, O_WRONLY);
                        if (fd < 0)
                                return fd;
                        r = xattr_drop_capability(p, i, fd);
                        if (r >= 0)
                                r = ftruncate(fd, (off_t) a->size) < 0 ? negative_errno() : 0;
                        fd = fd_budget_close(&p->budget, fd);
                }
                if (r < 0)
                        return r;
        }
        if ((a->valid & FS_SET_KILL_SUIDGID) && !(a->valid & FS_SET_MODE)) {
                r = kill_suidgid(p, i, h ? h->fd : -1);
                if (r < 0)
                        return r;
        }
        if (a->valid & (FS_SET_ATIME | FS_SET_MTIME)) {
                struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };

                if (a->valid & FS_SET_ATIME_NOW)
                        ts[0].tv_nsec = UTIME_NOW;
                else if (a->valid & FS_SET_ATIME)
                        ts[0] = a->atime;
                if (a->valid & FS_SET_MTIME_NOW)
                        ts[1].tv_nsec = UTIME_NOW;
                else if (a->valid & FS_SET_MTIME)
                        ts[1] = a->mtime;
                if (h)
                        r = futimens(h->fd, ts);
                else
                        r = utimensat(f.fd, "", ts, AT_EMPTY_PATH);
                if (r < 0)
                        return negative_errno();
        }
        /* ctime: the host sets it itself on every change above; it cannot be chosen. */
        inode_fd_done(&f);
        return stat_inode(p, i, ret);
}

static int pt_readlink(void *fs, const FsCtx *c, uint64_t nodeid, char *buf, size_t size) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        ssize_t n;

        if (!i)
                return -EBADF;
        if (i->type != S_IFLNK)
                return -EINVAL;
        n = inode_fd(p, i, &f, NULL);
        if (n < 0)
                return (int)n;
        n = readlinkat(f.fd, "", buf, size);
        if (n < 0)
                return negative_errno();
        if ((size_t) n >= size)
                return -ENAMETOOLONG;
        return (int) n;
}


/* Gives a just-created entry e (name in dir; NULL for an unnamed O_TMPFILE) the security labels of
 * the request. When that fails the entry goes again, as if the creation had failed: the guest's
 * lookup is dropped and the name removed if it still names the new inode. */
static int label_new_entry(Passthrough *p, const FsCtx *c, int dirfd, const char *name, const FsEntry *e) {
        _cleanup_(inode_unrefp) Inode *i = NULL;
        struct stat st;
        int r;

        if (c->n_labels == 0)
                return 0;
        i = get_inode(p, e->nodeid);
        r = i ? xattr_set_labels(p, i, c) : -EBADF;
        if (r >= 0)
                return 0;
        inode_map_forget(p->inodes, e->nodeid, 1);
        if (name && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && st.st_dev == e->st.st_dev &&
            st.st_ino == e->st.st_ino)
                (void)unlinkat(dirfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
        return r;
}

/* Runs a creating operation as the caller, then looks the new name up and labels it. */
typedef int (*CreateFn)(int dirfd, const char *name, const void *arg);

static int create_as_caller(Passthrough *p, const FsCtx *c, uint64_t parent, const char *name, CreateFn fn,
                            const void *arg, FsEntry *ret) {
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        Credentials cr;
        int r;

        r = get_dir_fd(p, parent, &dir, &d);
        if (r < 0)
                return r;
        r = credentials_enter(&cr, c->uid, c->gid, c->groups, c->n_groups, c->has_umask, c->umask);
        if (r < 0)
                return r;
        r = fn(d.fd, name, arg);
        credentials_leave(&cr);
        if (r < 0)
                return r;
        r = lookup_child(p, dir, d.fd, name, ret);
        if (r < 0)
                return r;
        return label_new_entry(p, c, d.fd, name, ret);
}

typedef struct MknodArgs {
        mode_t mode;
        dev_t rdev;
} MknodArgs;

static int do_mknod(int dirfd, const char *name, const void *arg) {
        const MknodArgs *m = arg;
        return mknodat(dirfd, name, m->mode, m->rdev) < 0 ? negative_errno() : 0;
}

static int pt_mknod(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
                    FsEntry *ret) {
        MknodArgs m = { guest_mode(fs, mode, false), rdev };

        switch (mode & S_IFMT) {
        case S_IFREG:
        case S_IFIFO:
        case S_IFSOCK:
                break;
        case S_IFCHR:
        case S_IFBLK:
                /* A device node in the share opens that device for every host user its mode lets
                 * in. Only with --allow-privileged-files (and then where the caller is privileged:
                 * the host kernel decides). A whiteout (character device 0:0, what an overlayfs
                 * upper layer on the share makes for a deleted file) opens nothing and needs no
                 * CAP_MKNOD: always allowed. */
                if (!((const Passthrough *)fs)->opts.privileged_files &&
                    !((mode & S_IFMT) == S_IFCHR && rdev == makedev(0, 0)))
                        return -EPERM;
                break;
        case S_IFDIR:
                return -EPERM;
        default:
                return -EINVAL;
        }
        if ((mode & S_IFMT) != S_IFCHR && (mode & S_IFMT) != S_IFBLK)
                m.rdev = 0;
        return create_as_caller(fs, c, parent, name, do_mknod, &m, ret);
}

static int do_mkdir(int dirfd, const char *name, const void *arg) {
        return mkdirat(dirfd, name, *(const mode_t *)arg) < 0 ? negative_errno() : 0;
}

static int pt_mkdir(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, FsEntry *ret) {
        mode = guest_mode(fs, mode & 07777, true);
        return create_as_caller(fs, c, parent, name, do_mkdir, &mode, ret);
}

static int do_symlink(int dirfd, const char *name, const void *arg) {
        /* The target is stored as data; nothing here resolves it. */
        return symlinkat((const char *)arg, dirfd, name) < 0 ? negative_errno() : 0;
}

static int pt_symlink(void *fs, const FsCtx *c, uint64_t parent, const char *name, const char *target,
                      FsEntry *ret) {
        FsCtx c2 = *c;
        c2.has_umask = false;
        return create_as_caller(fs, &c2, parent, name, do_symlink, target, ret);
}

static int remove_name(Passthrough *p, uint64_t parent, const char *name, int flags) {
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        int r = get_dir_fd(p, parent, &dir, &d);
        if (r < 0)
                return r;
        return unlinkat(d.fd, name, flags) < 0 ? negative_errno() : 0;
}

static int pt_unlink(void *fs, const FsCtx *c, uint64_t parent, const char *name) {
        return remove_name(fs, parent, name, 0);
}

static int pt_rmdir(void *fs, const FsCtx *c, uint64_t parent, const char *name) {
        return remove_name(fs, parent, name, AT_REMOVEDIR);
}

static int pt_rename(void *fs, const FsCtx *c, uint64_t parent, const char *name, uint64_t newparent,
                     const char *newname, unsigned flags) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *a = NULL, *b = NULL;
        _cleanup_(inode_fd_done) InodeFd fa = INODE_FD_NULL, fb = INODE_FD_NULL;
        int r;

        if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
                return -EINVAL;
        r = get_dir_fd(p, parent, &a, &fa);
        if (r < 0)
                return r;
        r = get_dir_fd(p, newparent, &b, &fb);
        if (r < 0)
                return r;
        if (syscall(SYS_renameat2, fa.fd, name, fb.fd, newname, flags) < 0)
                return negative_errno();
        return 0;
}

static int pt_link(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t newparent, const char *newname,
                   FsEntry *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid), *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL, d = INODE_FD_NULL;
        char name[16];
        int r;

        if (!i)
                return -EBADF;
        if (i->type == S_IFDIR)
                return -EPERM;
        r = get_dir_fd(p, newparent, &dir, &d);
        if (r < 0)
                return r;
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        /* Linking the O_PATH handle through its /proc/self/fd entry names exactly the inode we hold
         * (no path is resolved) and needs no CAP_DAC_READ_SEARCH, unlike AT_EMPTY_PATH. */
        proc_name(name, f.fd);
        if (linkat(p->proc_self_fd, name, d.fd, newname, AT_SYMLINK_FOLLOW) < 0)
                return negative_errno();
        return entry_again(p, i, ret);
}

/* ---- files ---- */

static int pt_open(void *fs, const FsCtx *c, uint64_t nodeid, int flags, bool kill_priv, uint64_t *ret_fh) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        int fd, r;

        if (!i)
                return -EBADF;
        if (flags & O_CREAT)
                return -EINVAL;
        if (i->type == S_IFDIR)
                return -EISDIR;
        flags = host_open_flags(p, flags) & ~(O_DIRECTORY | O_EXCL);
        fd = open_inode(p, i, flags);
        if (fd < 0)
                return fd;
        if (kill_priv && (flags & O_TRUNC))
                (void) kill_suidgid(p, i, fd);
        if (flags & O_TRUNC) {
                r = xattr_drop_capability(p, i, fd);
                if (r < 0) {
                        fd_budget_close(&p->budget, fd);
                        return r;
                }
        }
        r = handle_map_add(p->handles, i, fd, flags, false, ret_fh);
        return r;
}

/* An fd for I/O plus an O_PATH twin of it, counted as one guest lookup, and an fh. */
static int register_open_file(Passthrough *p, int fd, int flags, FsEntry *ret, uint64_t *ret_fh) {
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
        r = remember_inode(p, pfd, &stx, &i);
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
        stat_from_statx(&ret->st, &stx);
        return 0;
}

static int pt_create(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, int flags,
                     bool kill_priv, FsEntry *ret, uint64_t *ret_fh) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        Credentials cr;
        int fd, r, hflags;

        r = get_dir_fd(p, parent, &dir, &d);
        if (r < 0)
                return r;
        if ((mode & S_IFMT) && (mode & S_IFMT) != S_IFREG)
                return -EINVAL;
        hflags = host_open_flags(p, flags) & ~O_DIRECTORY;
        r = credentials_enter(&cr, c->uid, c->gid, c->groups, c->n_groups, c->has_umask, c->umask);
        if (r < 0)
                return r;
        /* O_EXCL first: an existing name is never opened by this call, so a FIFO or device node that
         * sits there (or a symlink) is never opened for I/O. */
        fd = fd_budget_openat(&p->budget, d.fd, name, hflags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                              guest_mode(p, mode & 07777, false));
        r = MIN(fd, 0);
        credentials_leave(&cr);
        if (r == -EEXIST && !(flags & O_EXCL)) {
                /* Plain O_CREAT on an existing file: open what is there, with the type checks of
                 * OPEN. */
                FsEntry e;
                r = lookup_child(p, dir, d.fd, name, &e);
                if (r < 0)
                        return r;
                r = pt_open(p, c, e.nodeid, flags & ~O_CREAT, kill_priv, ret_fh);
                if (r < 0) {
                        inode_map_forget(p->inodes, e.nodeid, 1);
                        return r;
                }
                r = pt_getattr(p, c, e.nodeid, FS_NO_FH, &e.st);
                if (r < 0) {
                        handle_map_remove(p->handles, *ret_fh, e.nodeid, 0);
                        inode_map_forget(p->inodes, e.nodeid, 1);
                        return r;
                }
                *ret = e;
                return 0;
        }
        if (r < 0)
                return r;
        r = register_open_file(p, fd, hflags, ret, ret_fh);
        if (r < 0)
                return r;
        r = label_new_entry(p, c, d.fd, name, ret);
        if (r < 0)
                (void) handle_map_remove(p->handles, *ret_fh, ret->nodeid, 0);
        return r;
}

static int pt_tmpfile(void *fs, const FsCtx *c, uint64_t parent, mode_t mode, int flags, FsEntry *ret,
                      uint64_t *ret_fh) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *dir = NULL;
        _cleanup_(inode_fd_done) InodeFd d = INODE_FD_NULL;
        Credentials cr;
        int fd, r, hflags;

        r = get_dir_fd(p, parent, &dir, &d);
        if (r < 0)
                return r;
        hflags = host_open_flags(p, flags) & ~(O_DIRECTORY | O_EXCL | O_TRUNC | O_APPEND);
        if ((hflags & O_ACCMODE) == O_RDONLY)
                return -EINVAL; /* O_TMPFILE needs write access, as the kernel says */
        r = credentials_enter(&cr, c->uid, c->gid, c->groups, c->n_groups, c->has_umask, c->umask);
        if (r < 0)
                return r;
        fd = fd_budget_openat(&p->budget, d.fd, ".", hflags | O_TMPFILE | O_CLOEXEC | (flags & O_EXCL),
                              guest_mode(p, mode & 07777, false));
        r = MIN(fd, 0);
        credentials_leave(&cr);
        if (r < 0)
                return r;
        r = register_open_file(p, fd, hflags, ret, ret_fh);
        if (r < 0)
                return r;
        /* Unnamed: when labelling fails, dropping the handle and the lookup removes the file. */
        r = label_new_entry(p, c, d.fd, NULL, ret);
        if (r < 0)
                (void) handle_map_remove(p->handles, *ret_fh, ret->nodeid, 0);
        return r;
}

/* The handle a read or write goes through, and its offset checked: the host takes an off_t, so an
 * offset past INT64_MAX is the guest's error (EINVAL), never a wrap to a negative one. */
static int io_handle(Passthrough *p, uint64_t nodeid, uint64_t fh, uint64_t off, Handle **ret) {
        if (off > INT64_MAX)
                return -EINVAL;
        return handle_map_get(p->handles, fh, nodeid, 0, ret);
}

static ssize_t pt_read(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off,
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

static ssize_t pt_write(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off,
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
        return n < 0 ? negative_errno() : n;
}

static int pt_flush(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner) {
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

static int pt_release(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner,
                      bool flock_unlock) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int r;

        r = handle_map_get(p->handles, fh, nodeid, 0, &h);
        if (r < 0)
                return r;
        if (flock_unlock)
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
static int fsync_handle(Passthrough *p, uint64_t nodeid, uint64_t fh, int is_dir, bool datasync) {
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int r;

        r = handle_map_get(p->handles, fh, nodeid, is_dir, &h);
        if (r < 0)
                return r;
        r = datasync ? fdatasync(h->fd) : fsync(h->fd);
        return r < 0 ? negative_errno() : 0;
}

static int pt_fsync(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync) {
        return fsync_handle(fs, nodeid, fh, 0, datasync);
}

/* ---- directories ---- */

static int pt_opendir(void *fs, const FsCtx *c, uint64_t nodeid, int flags, uint64_t *ret_fh) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = NULL;
        int fd, r;

        r = get_dir(p, nodeid, &i);
        if (r < 0)
                return r;
        fd = open_inode(p, i, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd;
        return handle_map_add(p->handles, i, fd, O_RDONLY | O_DIRECTORY, true, ret_fh);
}

static int pt_readdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const FsDirFiller *fill) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        bool plus = fill->plus;
        unsigned added = 0;
        int r;

        r = handle_map_get(p->handles, fh, nodeid, 1, &h);
        if (r < 0)
                return r;

        /* The position and the buffered entries belong to the handle: one reader at a time. */
        pthread_mutex_lock(&h->dir_lock);
        r = dir_stream_seek(&h->stream, h->fd, off);
        while (r >= 0) {
                const struct linux_dirent64 *d;
                FsEntry e = { 0 }, *ep = NULL;
                size_t namelen;

                r = dir_stream_peek(&h->stream, h->fd, &d);
                if (r <= 0)
                        break;
                namelen = strlen(d->d_name);
                if (!fs_dir_fits(fill, namelen))
                        break; /* stays buffered for the request that continues here */
                if (plus) {
                        ep = &e;
                        e.st.st_ino = d->d_ino;
                        e.st.st_mode = (mode_t) DTTOIF(d->d_type);
                        /* "." and ".." carry no node (the guest would not count them). */
                        if (!fs_name_is_dot_or_dotdot(d->d_name)) {
                                r = lookup_child(p, h->inode, h->fd, d->d_name, &e);
                                if (r == -ENOENT) {
                                        dir_stream_consume(&h->stream); /* removed since getdents */
                                        r = 0;
                                        continue;
                                }
                                if (r < 0)
                                        /* Still list the name, without attributes. */
                                        e = (FsEntry) { .st.st_ino = d->d_ino, .st.st_mode = (mode_t) DTTOIF(d->d_type) };
                        }
                }
                r = fs_dir_add(fill, d->d_name, namelen, d->d_ino, d->d_type, (uint64_t) d->d_off, ep);
                if (r < 0 && ep && ep->nodeid != 0)
                        inode_map_forget(p->inodes, ep->nodeid, 1);
                if (r == -ENOSPC) {
                        r = 0;
                        break;
                }
                /* Sent, or a name FUSE cannot carry (skipped rather than ending the listing here). */
                dir_stream_consume(&h->stream);
                added += r >= 0;
                r = 0;
        }
        dir_stream_end(&h->stream); /* the read-ahead may now go to another handle (dir-stream.h) */
        pthread_mutex_unlock(&h->dir_lock);
        /* An error after some entries were added still delivers those entries. */
        return added > 0 ? 0 : MIN(r, 0);
}

static int pt_releasedir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh) {
        Passthrough *p = fs;
        return handle_map_remove(p->handles, fh, nodeid, 1);
}

static int pt_fsyncdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync) {
        return fsync_handle(fs, nodeid, fh, 1, datasync);
}

/* ---- filesystem ---- */

static int pt_statfs(void *fs, const FsCtx *c, uint64_t nodeid, struct statvfs *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        int r;

        if (!i)
                return -EBADF;
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        return fstatvfs(f.fd, ret) < 0 ? negative_errno() : 0;
}

static int pt_access(void *fs, const FsCtx *c, uint64_t nodeid, int mask) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        Credentials cr;
        char name[16];
        int r;

        if (!i)
                return -EBADF;
        if (mask & ~(R_OK | W_OK | X_OK))
                return -EINVAL;
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        proc_name(name, f.fd);
        r = credentials_enter(&cr, c->uid, c->gid, c->groups, c->n_groups, false, 0);
        if (r < 0)
                return r;
        /* Checked as the caller; the /proc link names the inode without resolving a path. */
        r = faccessat(p->proc_self_fd, name, mask, AT_EACCESS) < 0 ? negative_errno() : 0;
        credentials_leave(&cr);
        return r;
}

static int pt_syncfs(void *fs, const FsCtx *c, uint64_t nodeid) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_close_ int fd = -1;

        if (!i)
                return -EBADF;
        if (i->type != S_IFDIR && i->type != S_IFREG) {
                inode_unref(i);
                i = get_inode(p, 1);
                if (!i)
                        return -EBADF;
        }
        /* syncfs() does not take O_PATH fds. */
        fd = open_inode(p, i, O_RDONLY | (i->type == S_IFDIR ? O_DIRECTORY : 0));
        if (fd < 0)
                return fd;
        int r = syncfs(fd) < 0 ? negative_errno() : 0;
        fd = fd_budget_close(&p->budget, fd);
        return r;
}

/* ---- more file operations ---- */

static int pt_fallocate(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int mode, uint64_t off,
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
        return fallocate(h->fd, mode, (off_t) off, (off_t) len) < 0 ? negative_errno() : 0;
}

static int64_t pt_lseek(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int64_t off, int whence) {
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

static ssize_t pt_copy_file_range(void *fs, const FsCtx *c, uint64_t nodeid_in, uint64_t fh_in, uint64_t off_in,
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
        return n < 0 ? negative_errno() : n;
}

const FsOps passthrough_ops = {
        .session_reset = pt_session_reset,
        .lookup = pt_lookup,
        .forget = pt_forget,
        .getattr = pt_getattr,
        .setattr = pt_setattr,
        .readlink = pt_readlink,
        .mknod = pt_mknod,
        .mkdir = pt_mkdir,
        .symlink = pt_symlink,
        .unlink = pt_unlink,
        .rmdir = pt_rmdir,
        .rename = pt_rename,
        .link = pt_link,
        .open = pt_open,
        .create = pt_create,
        .tmpfile = pt_tmpfile,
        .read = pt_read,
        .write = pt_write,
        .flush = pt_flush,
        .release = pt_release,
        .fsync = pt_fsync,
        .opendir = pt_opendir,
        .readdir = pt_readdir,
        .releasedir = pt_releasedir,
        .fsyncdir = pt_fsyncdir,
        .statfs = pt_statfs,
        .access = pt_access,
        .syncfs = pt_syncfs,
        .setxattr = pt_setxattr,
        .getxattr = pt_getxattr,
        .listxattr = pt_listxattr,
        .removexattr = pt_removexattr,
        .fallocate = pt_fallocate,
        .lseek = pt_lseek,
        .copy_file_range = pt_copy_file_range,
        .getlk = pt_getlk,
        .setlk = pt_setlk,
};
