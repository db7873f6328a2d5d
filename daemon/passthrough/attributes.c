/* attributes.c: an inode's attributes (GETATTR, SETATTR, READLINK, ACCESS) and the set-id rules for guest modes. */
#include "attributes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "credentials.h"
#include "handle-map.h"
#include "host-permission.h"
#include "inode-fd.h"
#include "mapped-mode.h"
#include "passthrough-internal.h"
#include "util.h"
#include "xattr.h"

/* Set-id bits the guest asks for (issue 13 item 10). The share is a host directory: a set-user-id
 * file a guest made runs with its owner's host identity for any host user who executes it (guest
 * root makes host-root programs). refuse drops them; a directory keeps set-group-id, which only
 * makes new entries inherit its group. map keeps a regular file's set-id and sticky bits as
 * mapped metadata (the caller stores them, mapped-mode.h) and gives every other type its mode as
 * asked: on a directory set-group-id is the group inheritance the guest expects from the host
 * kernel (which makes the entries), set-user-id and sticky grant nothing beyond the host's own
 * rules; nothing but a regular file is ever executed, so a FIFO's or socket's bits are inert. */
mode_t guest_mode(const Passthrough *p, mode_t mode, mode_t type) {
        switch (p->privileged) {
        case PRIVILEGED_FILES_ALLOW:
                return mode;
        case PRIVILEGED_FILES_MAP:
                return type == S_IFREG ? mode & ~(mode_t) 07000 : mode;
        default:
                return mode & ~(mode_t) (S_ISUID | (type == S_IFDIR ? 0 : S_ISGID));
        }
}

/* Clears setuid, and setgid when group-executable, as an unprivileged write or truncate would. */
int kill_suidgid(Passthrough *p, Inode *i, int io_fd) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        struct statx stx;
        mode_t mode;
        char name[16];
        int r;

        r = mapped_kill_inode(p, i, MAPPED_KILL_SUIDGID);
        if (r < 0)
                return r;
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

int pt_getattr(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, struct stat *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(handle_unrefp) Handle *h = NULL;
        int r;

        if (!i)
                return unknown_node(p);
        if (fh != FS_NO_FH) {
                struct statx stx;
                r = handle_map_get(p->handles, fh, nodeid, -1, &h);
                if (r < 0)
                        return r;
                /* Through the open file's own fd (fstat): a file the guest holds open answers even
                 * when its name is gone and its node's O_PATH fd was given back (inode-fd-cache.h). */
                r = statx_fd(h->fd, &stx);
                if (r < 0)
                        return r;
                stat_from_statx(ret, &stx);
                return 0;
        }
        return guest_stat_inode(p, i, ret);
}

/* Whether asked differs from now (modes) only by set-user-id or set-group-id bits it clears. */
static bool mode_only_kills_setid(mode_t now, mode_t asked) {
        now &= 07777;
        asked &= 07777;
        return asked != now && (asked & ~now) == 0 && ((now ^ asked) & ~(mode_t) (S_ISUID | S_ISGID)) == 0;
}

/* What the host asks of a SETATTR's caller: the owner's for mode, owner and explicit times, write
 * permission (or ownership) for times set to now, write permission for a truncate by name (one
 * through a handle was checked when the handle was opened for writing). */
static int setattr_permission(const FsCtx *c, const FsSetattr *a, const struct statx *stx, mode_t guest_now) {
        bool explicit_time = ((a->valid & FS_SET_ATIME) && !(a->valid & FS_SET_ATIME_NOW)) ||
                             ((a->valid & FS_SET_MTIME) && !(a->valid & FS_SET_MTIME_NOW));
        int r;

        if (!host_permission_applies(c))
                return 0; /* no statx was made */

        /* A mode that only clears set-user-id or set-group-id of what the guest sees (guest_now) is
         * the kernel's killpriv for a writer: without FUSE_HANDLE_KILLPRIV_V2 the guest sends it
         * as the user whose write or truncate it is, who need not own the file. Write permission
         * is what the host asks for that, as the kernel's own write would. */
        if ((a->valid & FS_SET_MODE) && !(a->valid & (FS_SET_UID | FS_SET_GID)) && !explicit_time &&
            mode_only_kills_setid(guest_now, a->mode)) {
                r = host_permission(c, stx, W_OK);
                if (r < 0)
                        return r;
        } else if ((a->valid & (FS_SET_MODE | FS_SET_UID | FS_SET_GID)) || explicit_time) {
                r = host_permission(c, stx, HOST_MAY_OWNER);
                if (r < 0)
                        return r;
        }
        if ((a->valid & (FS_SET_ATIME_NOW | FS_SET_MTIME_NOW)) && host_permission(c, stx, HOST_MAY_OWNER) < 0) {
                r = host_permission(c, stx, W_OK);
                if (r < 0)
                        return r;
        }
        if ((a->valid & FS_SET_SIZE) && !(a->valid & FS_SET_FH))
                return host_permission(c, stx, W_OK);
        return 0;
}

int pt_setattr(void *fs, const FsCtx *c, uint64_t nodeid, const FsSetattr *a, struct stat *ret) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(handle_unrefp) Handle *h = NULL;
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        mode_t guest_now = 0;
        struct statx stx;
        char name[16];
        int r;

        if (!i)
                return unknown_node(p);
        if (a->valid & FS_SET_FH) {
                r = handle_map_get(p->handles, a->fh, nodeid, 0, &h);
                if (r < 0)
                        return r;
        }
        stx = (struct statx){};
        r = inode_fd(p, i, &f, host_permission_applies(c) ? &stx : NULL);
        if (r < 0)
                return r;
        /* The mode the guest sees (mapped bits included), for a mode change by a non-owner. */
        if ((a->valid & FS_SET_MODE) && host_permission_applies(c)) {
                struct stat gst;
                r = guest_stat(p, i, f.fd, &stx, &gst);
                if (r < 0)
                        return r;
                guest_now = gst.st_mode;
        }
        /* As the daemon (chgrp to a supplementary group, a truncate the group may make need groups
         * the request does not carry), checked on the host's attributes. */
        r = setattr_permission(c, a, &stx, guest_now);
        if (r < 0)
                return r;
        proc_name(name, f.fd);

        if (a->valid & FS_SET_MODE) {
                mode_t mode = guest_mode(p, a->mode & 07777, i->type);
                /* map: a regular file's set-id and sticky bits stored, 1 when that set the mode. */
                r = mapped_chmod(p, i, a->mode & 07777);
                if (r == 0) {
                        if (h)
                                r = fchmod(h->fd, mode);
                        else if (i->type == S_IFLNK)
                                r = (errno = EOPNOTSUPP, -1); /* Linux has no mode on symlinks */
                        else
                                r = fchmodat(p->proc_self_fd, name, mode, 0);
                        if (r < 0)
                                return negative_errno();
                } else if (r < 0)
                        return r;
        }
        if (a->valid & (FS_SET_UID | FS_SET_GID)) {
                uid_t uid = (a->valid & FS_SET_UID) ? a->uid : (uid_t)-1;
                gid_t gid = (a->valid & FS_SET_GID) ? a->gid : (gid_t)-1;
                MappedMeta m;
                int mapped;

                /* Mapped metadata is signed for the owner and group: read before, signed again
                 * after, with the kernel's rule for chown applied (mapped_after_chown()). */
                mapped = atomic_load(&i->mapped) ? mapped_get(p, i, &m) : 0;
                if (mapped < 0)
                        return mapped;
                /* The host kernel clears setuid/setgid on chown of a non-directory, as the guest's
                 * would (killpriv on chown); a renamed capability is ours to drop. */
                r = xattr_drop_capability(p, i, h ? h->fd : -1);
                if (r < 0)
                        return r;
                if (fchownat(f.fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
                        /* EINVAL: an id the user namespace does not map (docs/id-mapping.md). */
                        return errno == EINVAL ? -EPERM : negative_errno();
                if (mapped > 0) {
                        r = mapped_after_chown(p, i, &m);
                        if (r < 0)
                                return r;
                }
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
        return guest_stat_inode(p, i, ret);
}

int pt_readlink(void *fs, const FsCtx *c, uint64_t nodeid, char *buf, size_t size) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        ssize_t n;

        if (!i)
                return unknown_node(p);
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

int pt_access(void *fs, const FsCtx *c, uint64_t nodeid, int mask) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = get_inode(p, nodeid);
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        Credentials cr;
        char name[16];
        int r;

        if (!i)
                return unknown_node(p);
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
