/* passthrough.c: start and sessions, the counters, STATFS and SYNCFS, and the FsOps table. */
#include "passthrough.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attributes.h"
#include "credentials.h"
#include "directories.h"
#include "entries.h"
#include "fd-budget.h"
#include "file-handle.h"
#include "file-io.h"
#include "locks.h"
#include "handle-map.h"
#include "inode-fd.h"
#include "inode-map.h"
#include "locks.h"
#include "log.h"
#include "lookup.h"
#include "mapped-mode.h"
#include "lock-set.h"
#include "passthrough-internal.h"
#include "session-journal.h"
#include "util.h"
#include "xattr.h"

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
        MountCheck check = MOUNT_CHECK_STATMOUNT;
        uint64_t key;
        bool unique;

        if (p->opts.inode_file_handles == INODE_FILE_HANDLES_NEVER)
                return 0;
        p->handles_mandatory = p->opts.inode_file_handles == INODE_FILE_HANDLES_MANDATORY;
        /* Issue 31 finding 4: a mount is judged when it is first seen, by an id never reused
         * (statmount of the STATX_MNT_ID_UNIQUE id); without one, or where statmount may not be
         * called (a filter inherited from the service manager may kill it), the mountinfo list
         * read now decides the share's own mount only, which root pins (file-handle.h). */
        unique = mount_id_of_fd(root, true, &key) >= 0;
        if (!unique || seccomp_filter_inherited()) {
                check = MOUNT_CHECK_START_LIST;
                r = mountinfo_whole_fs_mounts(&whole, &n_whole);
                if (r < 0 && !p->opts.handles_beyond_share)
                        log_debug("Cannot read /proc/self/mountinfo: %s", strerror(-r));
        }
        mount_fds_done(&p->mounts); /* the placeholder from passthrough_new() */
        mount_fds_init(&p->mounts, &p->budget, check, unique, whole, n_whole, p->opts.handles_beyond_share);

        err = file_handle_of_fd(root, &h, &mnt_id);
        if (err < 0)
                why = err == -EOPNOTSUPP ? "the shared directory's filesystem cannot make file handles"
                                         : "name_to_handle_at() of the shared directory failed";
        if (!why) {
                r = mount_fds_get(&p->mounts, mount_key(stx, mnt_id), root);
                mount_fds_seal(&p->mounts);
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
        log_notice("--inode-file-handles=prefer: %s%s%s%s; inodes are reached through O_PATH fds (at most "
                   "--max-inode-fds kept open), as with never",
                   why, err ? " (" : "", err ? strerror(-err) : "", err ? ")" : "");
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
        p->unknown_node_error = -EBADF;
        r = locks_pending_init(p);
        if (r < 0)
                return r;
        mount_fds_init(&p->mounts, &p->budget, MOUNT_CHECK_START_LIST, false, NULL, 0, false);
        p->opts = *opts;
        p->shared_dir = strdup(opts->shared_dir);
        if (!p->shared_dir)
                return -ENOMEM;
        p->opts.shared_dir = p->shared_dir;
        p->budget.max = opts->max_fds > 0 ? opts->max_fds : fd_budget_default_max();
        p->lock_ranges_max = LOCK_RANGES_MAX;

        r = inode_map_new(&p->inodes, &p->budget);
        if (r < 0)
                return r;
        inode_map_set_max_nodes(p->inodes, opts->max_nodes);
        if (opts->max_inode_fds > 0) {
                r = inode_map_set_max_inode_fds(p->inodes, opts->max_inode_fds);
                if (r < 0)
                        return r;
        }
        r = handle_map_new(&p->handles, &p->budget);
        if (r < 0)
                return r;
        handle_map_set_dir_buffer_max(p->handles, opts->dir_buffer_max);
        p->proc_self_fd = open_proc_fd_dir();
        if (p->proc_self_fd < 0)
                return p->proc_self_fd;
        /* The share as resolved once at start (issue 31 finding 8): the same directory on the same
         * mount, whatever its path names now. Tests that make a filesystem alone give the path; the
         * administrator's may contain symlinks, everything below it is never followed. */
        root = opts->has_shared_dir_fd ? openat(opts->shared_dir_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC)
                                       : open(opts->shared_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return negative_errno();
        r = statx_fd(root, &stx);
        if (r < 0)
                return r;
        r = inode_map_set_root(p->inodes, root, &stx);
        if (r < 0)
                return r;
        mapped_mode_init(p, root);
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
        locks_pending_done(p); /* its entries hold references on handles */
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

PrivilegedFiles passthrough_privileged_files(Passthrough *p) {
        return p->privileged;
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

uint64_t passthrough_fd_budget_max(Passthrough *p) {
        return p->budget.max;
}

uint64_t passthrough_max_nodes(Passthrough *p) {
        return inode_map_max_nodes(p->inodes);
}

uint64_t passthrough_max_inode_fds(Passthrough *p) {
        return inode_map_max_inode_fds(p->inodes);
}

uint64_t passthrough_inode_fds(Passthrough *p) {
        return inode_map_inode_fds(p->inodes);
}

static void pt_session_reset(void *fs, bool writeback) {
        Passthrough *p = fs;
        handle_map_clear(p->handles);
        inode_map_clear(p->inodes);
        journal_reset(); /* after the clears' own removals: the journal starts empty */
        atomic_store(&p->writeback, writeback);
}

static int pt_statfs(void *fs, const FsCtx *c, uint64_t nodeid, struct statvfs *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        int r;

        if (!i)
                return unknown_node(p);
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        return fstatvfs(f.fd, ret) < 0 ? negative_errno() : 0;
}

static int pt_syncfs(void *fs, const FsCtx *c, uint64_t nodeid) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_close_ int fd = -1;

        if (!i)
                return unknown_node(p);
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
        .open_created = pt_open_created,
        .handle_kept = pt_handle_kept,
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

void passthrough_took_over(Passthrough *p, unsigned generation) {
        /* 2^40 sequence numbers per process; ids stay below STATE_ID_MAX (2^62) for 2^16
         * generations, after which the last epoch is shared (its own ids are still in order). */
        uint64_t seq = (uint64_t) MIN(generation, 0xffffu) << 40;

        p->unknown_node_error = -ESTALE;
        inode_map_skip_ids(p->inodes, seq);
        handle_map_skip_ids(p->handles, seq);
}

void passthrough_set_lock_ranges_max(Passthrough *p, int64_t max) {
        p->lock_ranges_max = max;
}
