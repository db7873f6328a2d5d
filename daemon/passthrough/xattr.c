/* xattr.c: extended attributes of the passthrough filesystem, and the security labels of new inodes. */
#include "xattr.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "host-permission.h"
#include "inode-fd.h"
#include "mapped-mode.h"
#include "passthrough-internal.h"
#include "util.h"

/* The inode's fd the path names, held until xattr_leave() (opened by handle in handle mode); the
 * path is its /proc/self/fd link (for a symlink: the symlink, which is what the guest means),
 * relative to the working directory proc_cwd_enter() gives the thread. */
static _Thread_local InodeFd xattr_fd = { .fd = -1 };

static int xattr_enter(Passthrough *p, Inode *i, char buf[static 16], struct statx *ret_stx) {
        int r;

        r = inode_fd(p, i, &xattr_fd, ret_stx);
        if (r < 0)
                return r;
        r = proc_cwd_enter(p);
        if (r < 0) {
                inode_fd_done(&xattr_fd);
                return r;
        }
        proc_name(buf, xattr_fd.fd);
        return 0;
}

/* Back where the thread was; keeps errno (the result of the xattr call) for the caller. */
static void xattr_leave(void) {
        int saved = errno;

        proc_cwd_leave();
        inode_fd_done(&xattr_fd);
        errno = saved;
}

static bool xattr_name_allowed(Passthrough *p, const char *name);

/* Sets the request's security labels on a new inode, with the daemon's privileges (security.*
 * names need CAP_SYS_ADMIN on the host; the guest's LSM chose the label). A label is a guest xattr
 * name like SETXATTR's, mapped by --xattrmap: a host name SETXATTR refuses (map mode's own
 * attribute, which ":map:security.:user.:" reaches) is refused here too, EPERM, and the new
 * inode goes again (finish_new_entry()). */
int xattr_set_labels(Passthrough *p, Inode *i, const FsCtx *c) {
        char path[16];
        int r;

        for (unsigned k = 0; k < c->n_labels; k++)
                if (!xattr_name_allowed(p, c->labels[k].name))
                        return -EPERM;
        r = xattr_enter(p, i, path, NULL);
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

        /* A mapped one (--privileged-files=map) is ours too; nothing to read for an inode never
         * seen with the marker. */
        r = mapped_kill_inode(p, i, MAPPED_KILL_CAP);
        if (r < 0)
                return r;
        if (!name)
                return 0; /* not renamed: the host kernel drops it itself */
        if (io_fd >= 0)
                r = fremovexattr(io_fd, name) < 0 ? negative_errno() : 0;
        else {
                r = xattr_enter(p, i, path, NULL);
                if (r < 0)
                        return r;
                r = removexattr(path, name) < 0 ? negative_errno() : 0;
                xattr_leave();
        }
        if (r == -ENODATA || r == -EOPNOTSUPP)
                return 0;
        return r;
}

/* The host name of the guest's security.capability (--xattrmap may rename it). */
static bool is_capability_name(const Passthrough *p, const char *name) {
        return strcmp(name, p->opts.capability_xattr ? p->opts.capability_xattr : "security.capability") == 0;
}

static bool xattr_name_allowed(Passthrough *p, const char *name) {
        /* Map mode's own attribute: never the guest's, under any name --xattrmap gives it. */
        if (strcmp(name, FS_PRIVILEGED_XATTR) == 0)
                return false;
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

/* What the host asks of the caller for an attribute: read or write permission for user.*, the
 * owner's for an ACL (what the guest kernel checked on cached attributes); the rest is the host
 * kernel's to check (trusted.*, security.* need capabilities the guest kernel required). */
static int xattr_need(const char *name, bool change) {
        if (strncmp(name, "user.", 5) == 0)
                return change ? W_OK : R_OK;
        if (change && strncmp(name, "system.posix_acl_", 17) == 0)
                return HOST_MAY_OWNER;
        return 0;
}

/* What every xattr operation starts with: the inode (-EBADF for a nodeid we do not know), the name
 * checked (refused: the answer for an ACL name while ACLs are off; name NULL: no name), the
 * caller's permission on the host's attributes (host-permission.h; change: a set or remove), and
 * the thread moved to where path names the inode. The caller calls xattr_leave() after its call. */
static int xattr_begin(Passthrough *p, const FsCtx *c, uint64_t nodeid, const char *name, int refused, bool change,
                       Inode **ret, char path[static 16]) {
        _cleanup_(inode_unrefp) Inode *i = inode_map_get(p->inodes, nodeid);
        int need = name && host_permission_applies(c) ? xattr_need(name, change) : 0;
        struct statx stx;
        int r;

        if (!i)
                return -EBADF;
        if (name && !xattr_name_allowed(p, name))
                return refused;
        r = xattr_enter(p, i, path, need ? &stx : NULL);
        if (r < 0)
                return r;
        r = need ? host_permission(c, &stx, need) : 0;
        if (r < 0) {
                xattr_leave();
                return r;
        }
        *ret = TAKE_PTR(i);
        return 0;
}

int pt_setxattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, const void *value,
                       size_t size, int flags, bool kill_sgid) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = NULL;
        char path[16];
        int r;

        r = xattr_begin(p, c, nodeid, name, -EOPNOTSUPP, true, &i, path);
        if (r < 0)
                return r;
        if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
                xattr_leave();
                return -EINVAL;
        }
        /* A file capability is a set-id bit by another name (issue 13 item 10): cap_setuid+ep on a
         * program in the share is host root for whoever runs it on the host. map keeps a regular
         * file's in its mapped metadata (under the name --xattrmap gives it too); otherwise, unless
         * allow, the real one is refused as MKNOD of a device is (the daemon has no CAP_SETFCAP
         * either), a renamed one is an ordinary attribute. */
        if (p->privileged != PRIVILEGED_FILES_ALLOW && is_capability_name(p, name)) {
                if (mapped_on(p) && i->type == S_IFREG) {
                        xattr_leave();
                        return mapped_set_capability(p, i, value, size, flags);
                }
                if (strcmp(name, "security.capability") == 0) {
                        xattr_leave();
                        return -EPERM;
                }
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

        n = xattr_begin(p, c, nodeid, name, -ENODATA, false, &i, path);
        if (n < 0)
                return n;
        /* A mapped capability; without one the host's (a real one host root set) as it is. */
        if (is_capability_name(p, name)) {
                n = mapped_get_capability(p, i, buf, size);
                if (n != -ENODATA) {
                        xattr_leave();
                        return n;
                }
        }
        n = getxattr(path, name, size > 0 ? buf : NULL, size);
        xattr_leave();
        return n < 0 ? negative_errno() : n;
}

/* Drops the names the guest may not see from a listxattr result (n bytes in buf): map mode's own
 * attribute, ACL names while ACLs are off (so the list matches what getxattr answers), and the
 * capability's name when drop_cap (a mapped one is listed instead, as getxattr answers it). */
static size_t list_filter(Passthrough *p, char *buf, size_t n, bool drop_cap) {
        char *s = buf, *end = s + n, *w = s;

        while (s < end) {
                size_t l = strnlen(s, (size_t) (end - s)) + 1;
                if (xattr_name_allowed(p, s) && !(drop_cap && is_capability_name(p, s))) {
                        memmove(w, s, l);
                        w += l;
                }
                s += l;
        }
        return (size_t) (w - buf);
}

ssize_t pt_listxattr(void *fs, const FsCtx *c, uint64_t nodeid, void *buf, size_t size) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = NULL;
        const char *cap = p->opts.capability_xattr ? p->opts.capability_xattr : "security.capability";
        size_t capsize = 0, room = size;
        char path[16];
        ssize_t n;

        n = xattr_begin(p, c, nodeid, NULL, 0, false, &i, path);
        if (n < 0)
                return n;
        /* A mapped capability is listed under its name, at the end of the buffer. */
        if (mapped_get_capability(p, i, NULL, 0) > 0)
                capsize = strlen(cap) + 1;
        if (size > 0 && size < capsize) {
                xattr_leave();
                return -ERANGE;
        }
        room = size > 0 ? size - capsize : 0;
        if (size > 0 && room == 0)
                /* No room for the host's names: there must be none (listxattr() would measure). */
                n = listxattr(path, NULL, 0) > 0 ? (errno = ERANGE, -1) : 0;
        else
                n = listxattr(path, size > 0 ? buf : NULL, room);
        xattr_leave();
        if (n < 0)
                return negative_errno();
        if (size == 0) /* an upper bound: the hidden names are counted */
                return n + (ssize_t) capsize;
        n = (ssize_t) list_filter(p, buf, (size_t) n, capsize > 0);
        memcpy((char *) buf + n, cap, capsize);
        return n + (ssize_t) capsize;
}

int pt_removexattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = NULL;
        char path[16];
        int r;

        r = xattr_begin(p, c, nodeid, name, -EOPNOTSUPP, true, &i, path);
        if (r < 0)
                return r;
        r = is_capability_name(p, name) ? mapped_remove_capability(p, i) : -ENODATA;
        if (r == -ENODATA) /* none mapped: the host's */
                r = removexattr(path, name) < 0 ? negative_errno() : 0;
        xattr_leave();
        return r;
}
