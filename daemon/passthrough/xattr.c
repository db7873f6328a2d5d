/* xattr.c: extended attributes of the passthrough filesystem, and the security labels of new inodes. */
#include "xattr.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "passthrough-internal.h"
#include "util.h"

/* Path-based xattr calls on the /proc/self/fd link: O_PATH fds refuse f*xattr(), and the link
 * names the inode itself (for a symlink: the symlink, which is what the guest means). The link is
 * named relative to proc_self_fd, never through "/proc": in the sandbox the root is the shared
 * directory, which has no /proc. So the calling thread changes its working directory; it gets an
 * fs_struct of its own first (a no-op when it has one already), so no other thread sees that. */
/* The calling thread's working directory before xattr_enter(), restored by xattr_leave(): the
 * passthrough is a library too (tests, fuzzers) and must not leave a thread somewhere else. */
static _Thread_local int xattr_saved_cwd = -1;
/* The inode's fd the path names, held until xattr_leave() (opened by handle in handle mode). */
static _Thread_local InodeFd xattr_fd = { .fd = -1 };

static int xattr_enter(Passthrough *p, Inode *i, char buf[static 16]) {
        int r;

        r = inode_fd(p, i, &xattr_fd, NULL);
        if (r < 0)
                return r;
        if (unshare(CLONE_FS) < 0) {
                r = negative_errno();
                inode_fd_done(&xattr_fd);
                return r;
        }
        xattr_saved_cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fchdir(p->proc_self_fd) < 0) {
                r = negative_errno();
                xattr_saved_cwd = safe_close(xattr_saved_cwd);
                inode_fd_done(&xattr_fd);
                return r;
        }
        proc_name(buf, xattr_fd.fd);
        return 0;
}

/* Back where the thread was; keeps errno (the result of the xattr call) for the caller. */
static void xattr_leave(void) {
        int saved = errno;

        /* Best effort: the daemon itself resolves nothing relative to a thread's working directory. */
        if (xattr_saved_cwd < 0 || fchdir(xattr_saved_cwd) < 0)
                (void) !chdir("/");
        xattr_saved_cwd = safe_close(xattr_saved_cwd);
        inode_fd_done(&xattr_fd);
        errno = saved;
}

/* Sets the request's security labels on a new inode, with the daemon's privileges (security.*
 * names need CAP_SYS_ADMIN on the host; the guest's LSM chose the label). */
int xattr_set_labels(Passthrough *p, Inode *i, const FsCtx *c) {
        char path[16];
        int r;

        r = xattr_enter(p, i, path);
        if (r < 0)
                return r;
        for (unsigned k = 0; k < c->n_labels && r >= 0; k++)
                if (setxattr(path, c->labels[k].name, c->labels[k].value, c->labels[k].size, 0) < 0)
                        r = negative_errno();
        xattr_leave();
        return r;
}

/* What the host kernel does for security.capability on a write, truncate or chown (killpriv),
 * done for the name --xattrmap stores it under, which the kernel sees as an ordinary attribute.
 * io_fd is an fd open for I/O, or -1 to go through the inode's O_PATH fd. An attribute that is
 * not there, or a filesystem without xattrs, is nothing to drop. */
int xattr_drop_capability(Passthrough *p, Inode *i, int io_fd) {
        const char *name = p->opts.capability_xattr;
        char path[16];
        int r;

        if (!name)
                return 0; /* not renamed: the host kernel drops it itself */
        if (io_fd >= 0)
                r = fremovexattr(io_fd, name) < 0 ? negative_errno() : 0;
        else {
                r = xattr_enter(p, i, path);
                if (r < 0)
                        return r;
                r = removexattr(path, name) < 0 ? negative_errno() : 0;
                xattr_leave();
        }
        if (r == -ENODATA || r == -EOPNOTSUPP)
                return 0;
        return r;
}

static bool xattr_name_allowed(Passthrough *p, const char *name) {
        if (!p->opts.posix_acl && (strcmp(name, "system.posix_acl_access") == 0 ||
                                   strcmp(name, "system.posix_acl_default") == 0))
                return false;
        return true;
}

/* Clears setgid after an access ACL was set for a caller that may not keep it: the host kernel
 * would not, the daemon has CAP_FSETID. The permission bits stay, so the ACL does too. */
static int acl_kill_sgid(Passthrough *p, Inode *i) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        struct statx stx;
        char name[16];
        int r;

        r = inode_fd(p, i, &f, &stx);
        if (r < 0)
                return r;
        if (!(stx.stx_mode & S_ISGID) || S_ISLNK(stx.stx_mode))
                return 0;
        proc_name(name, f.fd);
        if (fchmodat(p->proc_self_fd, name, stx.stx_mode & 07777 & ~S_ISGID, 0) < 0)
                return negative_errno();
        return 0;
}

/* What every xattr operation starts with: the inode (-EBADF for a nodeid we do not know), the name
 * checked (refused: the answer for an ACL name while ACLs are off; name NULL: no name), and the
 * thread moved to where path names the inode. The caller calls xattr_leave() after its call. */
static int xattr_begin(Passthrough *p, uint64_t nodeid, const char *name, int refused, Inode **ret,
                       char path[static 16]) {
        _cleanup_(inode_unrefp) Inode *i = inode_map_get(p->inodes, nodeid);
        int r;

        if (!i)
                return -EBADF;
        if (name && !xattr_name_allowed(p, name))
                return refused;
        r = xattr_enter(p, i, path);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(i);
        return 0;
}

int pt_setxattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, const void *value,
                       size_t size, int flags, bool kill_sgid) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = NULL;
        char path[16];
        int r;

        r = xattr_begin(p, nodeid, name, -EOPNOTSUPP, &i, path);
        if (r < 0)
                return r;
        if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
                xattr_leave();
                return -EINVAL;
        }
        /* A file capability is a set-id bit by another name (issue 13 item 10): cap_setuid+ep on a
         * program in the share is host root for whoever runs it on the host. Refused as MKNOD of a
         * device is, unless --allow-privileged-files; the daemon then has no CAP_SETFCAP either. */
        if (!p->opts.privileged_files && strcmp(name, "security.capability") == 0) {
                xattr_leave();
                return -EPERM;
        }
        /* An access ACL also sets the mode (the host kernel's setxattr does that itself). */
        r = setxattr(path, name, value, size, flags) < 0 ? negative_errno() : 0;
        xattr_leave();
        if (r == 0 && kill_sgid && strcmp(name, "system.posix_acl_access") == 0)
                r = acl_kill_sgid(p, i);
        return r;
}

ssize_t pt_getxattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, void *buf, size_t size) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = NULL;
        char path[16];
        ssize_t n;

        n = xattr_begin(p, nodeid, name, -ENODATA, &i, path);
        if (n < 0)
                return n;
        n = getxattr(path, name, size > 0 ? buf : NULL, size);
        xattr_leave();
        return n < 0 ? negative_errno() : n;
}

ssize_t pt_listxattr(void *fs, const FsCtx *c, uint64_t nodeid, void *buf, size_t size) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = NULL;
        char path[16];
        ssize_t n;

        n = xattr_begin(p, nodeid, NULL, 0, &i, path);
        if (n < 0)
                return n;
        n = listxattr(path, size > 0 ? buf : NULL, size);
        xattr_leave();
        if (n < 0)
                return negative_errno();
        if (size > 0 && !p->opts.posix_acl) {
                /* Hide ACL names when ACLs are off, so the list matches what getxattr answers. */
                char *s = buf, *end = s + n, *w = s;
                while (s < end) {
                        size_t l = strnlen(s, (size_t) (end - s)) + 1;
                        if (xattr_name_allowed(p, s)) {
                                memmove(w, s, l);
                                w += l;
                        }
                        s += l;
                }
                n = w - (char *) buf;
        }
        return n;
}

int pt_removexattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = NULL;
        char path[16];
        int r;

        r = xattr_begin(p, nodeid, name, -EOPNOTSUPP, &i, path);
        if (r < 0)
                return r;
        r = removexattr(path, name) < 0 ? negative_errno() : 0;
        xattr_leave();
        return r;
}
