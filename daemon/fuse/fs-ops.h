/* fs-ops.h: the filesystem interface between the FUSE server and a filesystem implementation.
 *
 * The FUSE server decodes and validates requests (lengths, names at fs-names.h's choke point,
 * sizes against max_write and the reply space) and calls one of these operations; the filesystem
 * works on host objects and returns 0 / a count, or a negative errno that the server puts into the
 * reply. Operations are called from several threads at once and must be thread-safe.
 *
 * Contract:
 * - Nodeids are integers issued by the filesystem, never pointers; FS_ROOT_ID is the root, 0 is
 *   never a valid node. A nodeid is never reused within the life of the filesystem object.
 * - Every operation that fills an FsEntry with nodeid != 0 (lookup, mknod, mkdir, symlink, link,
 *   create, and each READDIRPLUS entry added through an FsDirFiller) counts one guest lookup of that node.
 *   forget() subtracts (saturating at 0); at 0 the nodeid becomes invalid (operations answer -EBADF
 *   for a nodeid they do not know) and the host handle is dropped. The root is never dropped.
 *   If the server cannot deliver an entry it obtained, it must forget it again (nlookup 1).
 * - Handles (fh) are integers issued by open/opendir/create, valid until release/releasedir. Every
 *   operation taking an fh checks it belongs to the nodeid it came with (and is a file or directory
 *   handle as the operation requires): -EBADF otherwise.
 * - Names given to the ops have been validated (fs_name_validate; "." and ".." only reach lookup).
 * - Only regular files and directories are ever opened for I/O; everything else exists only as an
 *   O_PATH handle. Symlinks are never followed on the host.
 * - Creating operations (mknod, mkdir, symlink, create, tmpfile) and access run as the caller (ctx
 *   uid/gid and groups, and umask where the opcode carries one), so
 *   ownership, setgid directories and permission checks are the host kernel's; so is the umask
 *   rule of POSIX ACLs: the host applies the umask only where the parent has no default ACL (the
 *   guest leaves the mode unmasked when FUSE_POSIX_ACL and FUSE_DONT_MASK are on). Other operations
 *   run with the daemon's identity; the guest kernel enforces permissions (default_permissions).
 * - When the fd budget is spent, operations that would hold another fd answer -ENFILE.
 *
 * The interface speaks its own types: attribute masks (FS_SET_*), the root id, directory fillers.
 * The FUSE server translates the wire protocol into them, so an implementation never includes
 * linux/fuse.h and the server can be tested against any implementation (tests use a fake one).
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>

/* A security label for a new inode (FUSE_SECURITY_CTX): an xattr name ("security." prefix) and
 * its value, both pointing into the request's private copy. */
typedef struct FsSecLabel {
        const char *name;
        const void *value;
        size_t size;
} FsSecLabel;

/* At most this many supplementary groups come with one request (Linux sends one). */
#define FS_CTX_MAX_GROUPS 32

/* The caller of one request. */
typedef struct FsCtx {
        uint32_t uid, gid, pid;
        uint64_t unique;
        uint32_t umask;      /* valid when has_umask */
        bool has_umask;
        /* Supplementary groups the caller acts with (FUSE_CREATE_SUPP_GROUP: the group of the
         * parent directory when the caller is in it only as a supplementary member), creating
         * operations only; pointing into the request's private copy. */
        const gid_t *groups;
        unsigned n_groups;
        /* Labels for the inode a creating operation makes (mknod, mkdir, symlink, create, tmpfile):
         * set as xattrs, with the daemon's privileges, on the new inode before the operation
         * returns; when one cannot be set the new inode is removed again and the error returned. */
        const FsSecLabel *labels;
        unsigned n_labels;
        /* Set by the server when the guest interrupts this request; long waits poll it. */
        const _Atomic bool *interrupted;
} FsCtx;

/* One node handed to the guest (nodeid 0: no node, e.g. "." in READDIRPLUS). */
typedef struct FsEntry {
        uint64_t nodeid;
        uint64_t generation;
        struct stat st;
        /* A directory on another host mount than the directory it was looked up in: the server
         * announces it as a submount (FUSE_ATTR_SUBMOUNT) when that was negotiated. */
        bool submount;
} FsEntry;

#define FS_NO_FH UINT64_MAX
/* The root directory's nodeid: it exists from the start and is never forgotten. */
#define FS_ROOT_ID UINT64_C(1)

/* "." or "..": names a directory listing carries but that name no node of their own. */
static inline bool fs_name_is_dot_or_dotdot(const char *name) {
        return name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0));
}

/* What a SETATTR changes (FsSetattr.valid). */
enum {
        FS_SET_MODE = 1u << 0,
        FS_SET_UID = 1u << 1,
        FS_SET_GID = 1u << 2,
        FS_SET_SIZE = 1u << 3,
        FS_SET_ATIME = 1u << 4, /* to atime */
        FS_SET_MTIME = 1u << 5, /* to mtime */
        FS_SET_ATIME_NOW = 1u << 6, /* to the current time (wins over FS_SET_ATIME) */
        FS_SET_MTIME_NOW = 1u << 7,
        FS_SET_FH = 1u << 8, /* through the open handle fh */
        FS_SET_KILL_SUIDGID = 1u << 9, /* clear setuid/setgid (an unprivileged caller's truncate) */
};

typedef struct FsSetattr {
        uint32_t valid; /* FS_SET_* */
        uint64_t fh; /* with FS_SET_FH */
        mode_t mode;
        uid_t uid;
        gid_t gid;
        uint64_t size;
        struct timespec atime, mtime;
} FsSetattr;

/* A byte-range lock as FUSE carries it (end inclusive; type F_RDLCK/F_WRLCK/F_UNLCK). */
typedef struct FsLock {
        uint64_t start, end;
        uint32_t type;
        uint32_t pid;
} FsLock;

/* How readdir hands entries back: the caller (the FUSE server) passes one in and owns what is
 * behind data; the filesystem only calls fits and add, never anything of the caller's by name. */
typedef struct FsDirFiller {
        /* The caller wants an FsEntry (attributes and a looked-up node) with every name. */
        bool plus;
        /* Whether an entry with a name of namelen bytes still fits. */
        bool (*fits)(void *data, size_t namelen);
        /* Adds one entry: ino/type (DT_*) always; with plus, entry (nodeid 0 allowed, counted as a
         * lookup otherwise). off = the cookie that continues after this entry. -ENOSPC when it
         * does not fit (nothing added: the filesystem must then forget a node it looked up for
         * it); -EINVAL for a name the caller cannot carry (skipped). */
        int (*add)(void *data, const char *name, size_t namelen, uint64_t ino, unsigned type, uint64_t off,
                   const FsEntry *entry);
        void *data;
} FsDirFiller;

static inline bool fs_dir_fits(const FsDirFiller *f, size_t namelen) {
        return f->fits(f->data, namelen);
}

static inline int fs_dir_add(const FsDirFiller *f, const char *name, size_t namelen, uint64_t ino, unsigned type,
                             uint64_t off, const FsEntry *entry) {
        return f->add(f->data, name, namelen, ino, type, off, entry);
}

typedef struct FsOps {
        /* A new session (INIT, DESTROY, reset): forget every node but the root, drop every handle;
         * writeback: the guest caches writes (FUSE_WRITEBACK_CACHE), so write-only opens must be
         * readable and O_APPEND is the guest's business. */
        void (*session_reset)(void *fs, bool writeback);

        int (*lookup)(void *fs, const FsCtx *c, uint64_t parent, const char *name, FsEntry *ret);
        void (*forget)(void *fs, uint64_t nodeid, uint64_t nlookup);
        int (*getattr)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, struct stat *ret);
        int (*setattr)(void *fs, const FsCtx *c, uint64_t nodeid, const FsSetattr *a, struct stat *ret);
        /* Returns the target length; -ENAMETOOLONG... never truncates silently: size is the space. */
        int (*readlink)(void *fs, const FsCtx *c, uint64_t nodeid, char *buf, size_t size);
        int (*mknod)(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
                     FsEntry *ret);
        int (*mkdir)(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, FsEntry *ret);
        int (*symlink)(void *fs, const FsCtx *c, uint64_t parent, const char *name, const char *target,
                       FsEntry *ret);
        int (*unlink)(void *fs, const FsCtx *c, uint64_t parent, const char *name);
        int (*rmdir)(void *fs, const FsCtx *c, uint64_t parent, const char *name);
        /* flags: RENAME_NOREPLACE / RENAME_EXCHANGE / RENAME_WHITEOUT. */
        int (*rename)(void *fs, const FsCtx *c, uint64_t parent, const char *name, uint64_t newparent,
                      const char *newname, unsigned flags);
        int (*link)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t newparent, const char *newname,
                    FsEntry *ret);

        /* flags: the guest's open flags (O_CREAT refused: creation is create()'s job); kill_priv:
         * clear setuid/setgid as a truncating open by an unprivileged caller would. */
        int (*open)(void *fs, const FsCtx *c, uint64_t nodeid, int flags, bool kill_priv, uint64_t *ret_fh);
        int (*create)(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, int flags,
                      bool kill_priv, FsEntry *ret, uint64_t *ret_fh);
        /* A CREATE answered again after the serving process that made its file died before the
         * reply (fuse_server_replay()): opens the regular file name holds, as the caller, with
         * flags (the guest's, without O_CREAT, O_EXCL and O_TRUNC); the entry counts a lookup as
         * create()'s does. Makes nothing. NULL: the CREATE runs again. */
        int (*open_created)(void *fs, const FsCtx *c, uint64_t parent, const char *name, int flags, FsEntry *ret,
                            uint64_t *ret_fh);
        /* An OPEN or OPENDIR answered again after the serving process that ran it died before the
         * reply (fuse_server_replay()): 0 when fh, the handle its run issued, is an open file (dir:
         * a directory stream) of nodeid this process holds (taken over with the session), so the
         * reply gives it; -EBADF when not, and the open runs again. NULL: it runs again. */
        int (*handle_kept)(void *fs, uint64_t nodeid, uint64_t fh, bool dir);
        /* O_TMPFILE in the directory parent: the entry is a new unnamed file. */
        int (*tmpfile)(void *fs, const FsCtx *c, uint64_t parent, mode_t mode, int flags, FsEntry *ret,
                       uint64_t *ret_fh);
        /* Reads into / writes from iov (guest memory); returns bytes. */
        ssize_t (*read)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off,
                        const struct iovec *iov, unsigned niov);
        /* kill_priv: clear setuid/setgid as a write by an unprivileged caller would. */
        ssize_t (*write)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off,
                         const struct iovec *iov, unsigned niov, bool kill_priv);
        int (*flush)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner);
        /* flock_unlock: release the flock() lock of the handle as well. */
        int (*release)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner,
                       bool flock_unlock);
        int (*fsync)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync);

        int (*opendir)(void *fs, const FsCtx *c, uint64_t nodeid, int flags, uint64_t *ret_fh);
        int (*readdir)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const FsDirFiller *fill);
        int (*releasedir)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh);
        int (*fsyncdir)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync);

        int (*statfs)(void *fs, const FsCtx *c, uint64_t nodeid, struct statvfs *ret);
        int (*access)(void *fs, const FsCtx *c, uint64_t nodeid, int mask);
        int (*syncfs)(void *fs, const FsCtx *c, uint64_t nodeid);

        /* xattrs: size 0 asks for the size needed; a buffer too small is -ERANGE. acl_kill_sgid
         * (FUSE_SETXATTR_ACL_KILL_SGID): the caller may not keep setgid, so setting
         * system.posix_acl_access clears it, as the kernel does for such a caller. */
        int (*setxattr)(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, const void *value,
                        size_t size, int flags, bool acl_kill_sgid);
        ssize_t (*getxattr)(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, void *buf,
                            size_t size);
        ssize_t (*listxattr)(void *fs, const FsCtx *c, uint64_t nodeid, void *buf, size_t size);
        int (*removexattr)(void *fs, const FsCtx *c, uint64_t nodeid, const char *name);

        int (*fallocate)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int mode, uint64_t off,
                         uint64_t len);
        /* Returns the new offset (SEEK_DATA/SEEK_HOLE/SEEK_SET/SEEK_CUR/SEEK_END). */
        int64_t (*lseek)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int64_t off, int whence);
        ssize_t (*copy_file_range)(void *fs, const FsCtx *c, uint64_t nodeid_in, uint64_t fh_in, uint64_t off_in,
                                   uint64_t nodeid_out, uint64_t fh_out, uint64_t off_out, uint64_t len,
                                   unsigned flags);

        /* POSIX byte-range locks per lock owner; flock=true for flock() semantics (whole file, per
         * handle). setlk with wait=true may block: the caller runs it where blocking is acceptable;
         * it returns -EINTR when the waiting thread is signalled (INTERRUPT). */
        int (*getlk)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, FsLock *lk);
        int (*setlk)(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, const FsLock *lk,
                     bool flock, bool wait);
} FsOps;
