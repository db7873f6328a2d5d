/* id-translate-fs.c: --translate-uid/--translate-gid applied at the filesystem interface. */
#include "id-translate-fs.h"

#include <stdlib.h>

struct IdTranslateFs {
        const FsOps *ops;
        void *fs;
        const IdTranslate *uid, *gid;
};

int id_translate_fs_new(IdTranslateFs **ret, const FsOps *ops, void *fs, const IdTranslate *uid,
                        const IdTranslate *gid) {
        IdTranslateFs *t;

        if (!ops)
                return -EINVAL;
        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        *t = (IdTranslateFs){ .ops = ops, .fs = fs, .uid = uid, .gid = gid };
        *ret = t;
        return 0;
}

IdTranslateFs *id_translate_fs_free(IdTranslateFs *t) {
        free(t);
        return NULL;
}

/* ---- guest to host ---- */

/* The caller of an operation that acts as the caller, in host ids; groups is where the
 * translated supplementary groups go. -EPERM for a forbidden id. */
static int caller_to_host(const IdTranslateFs *t, const FsCtx *c, FsCtx *ret, gid_t groups[static FS_CTX_MAX_GROUPS]) {
        uint32_t uid, gid;
        int r;

        r = id_translate_to_host(t->uid, c->uid, &uid);
        if (r < 0)
                return r;
        r = id_translate_to_host(t->gid, c->gid, &gid);
        if (r < 0)
                return r;
        *ret = *c;
        ret->uid = uid;
        ret->gid = gid;
        if (c->n_groups > FS_CTX_MAX_GROUPS)
                return -EINVAL; /* the server never hands more */
        for (unsigned k = 0; k < c->n_groups; k++) {
                uint32_t g;
                r = id_translate_to_host(t->gid, c->groups[k], &g);
                if (r < 0)
                        return r;
                groups[k] = g;
        }
        ret->groups = c->n_groups > 0 ? groups : NULL;
        return 0;
}

/* The caller in host ids for an operation that acts as the daemon but checks the caller's rights
 * on the host's attributes (host-permission.h), with room for its groups. Guest root stays root
 * (it acts as the daemon there, squashed or not, as before the check) unless a forbid-guest entry
 * covers uid 0. A forbidden id is nobody on the host: it gets the rights of "other", with an id
 * that owns no inode and is not root (guest root included: before, it passed as root unchecked). */
typedef struct HostCaller {
        FsCtx ctx;
        gid_t groups[FS_CTX_MAX_GROUPS];
} HostCaller;

static const FsCtx *caller_for_check(const IdTranslateFs *t, const FsCtx *c, HostCaller *h) {
        uint32_t root;

        if (c->uid == 0 && id_translate_to_host(t->uid, 0, &root) >= 0)
                return c;
        if (caller_to_host(t, c, &h->ctx, h->groups) < 0) {
                h->ctx = *c;
                h->ctx.uid = h->ctx.gid = UINT32_MAX;
                h->ctx.groups = NULL;
                h->ctx.n_groups = 0;
        }
        return &h->ctx;
}

/* ---- host to guest ---- */

static void stat_to_guest(const IdTranslateFs *t, struct stat *st) {
        st->st_uid = id_translate_to_guest(t->uid, st->st_uid);
        st->st_gid = id_translate_to_guest(t->gid, st->st_gid);
}

/* The attributes of a reply (getattr, setattr) as the guest sees them; r, the inner operation's
 * answer, passes through, and a failure's attributes are left as they are. */
static int attr_to_guest(const IdTranslateFs *t, int r, struct stat *st) {
        if (r >= 0)
                stat_to_guest(t, st);
        return r;
}

/* An entry handed back: its attributes as the guest sees them (no node, no attributes). */
static int entry_to_guest(const IdTranslateFs *t, int r, FsEntry *e) {
        if (r >= 0 && e->nodeid != 0)
                stat_to_guest(t, &e->st);
        return r;
}

/* ---- the operations that make an inode as their caller ---- */

/* mknod, mkdir, symlink, create and tmpfile: the host makes the inode with the caller's ids, so
 * the caller goes to host ids first (a forbidden id: -EPERM, nothing made) and the new entry
 * comes back in guest ids. Each wrapper packs its arguments into a MakeArgs and make_as_caller()
 * does both steps around the inner call, so the rule stands in one place. */
typedef enum MakeOp {
        MAKE_MKNOD,
        MAKE_MKDIR,
        MAKE_SYMLINK,
        MAKE_CREATE,
        MAKE_OPEN_CREATED, /* makes nothing, but opens as the caller what a CREATE made */
        MAKE_TMPFILE,
} MakeOp;

typedef struct MakeArgs {
        MakeOp op;
        uint64_t parent;
        const char *name;   /* all but tmpfile */
        mode_t mode;        /* all but symlink and open_created */
        dev_t rdev;         /* mknod */
        const char *target; /* symlink */
        int flags;          /* create, open_created, tmpfile */
        bool kill_priv;     /* create */
        uint64_t *ret_fh;   /* create, open_created, tmpfile */
} MakeArgs;

/* The inner operation a MakeArgs names, for the caller h (already in host ids). */
static int make_call(const IdTranslateFs *t, const FsCtx *h, const MakeArgs *a, FsEntry *ret) {
        switch (a->op) {
        case MAKE_MKNOD:
                return t->ops->mknod(t->fs, h, a->parent, a->name, a->mode, a->rdev, ret);
        case MAKE_MKDIR:
                return t->ops->mkdir(t->fs, h, a->parent, a->name, a->mode, ret);
        case MAKE_SYMLINK:
                return t->ops->symlink(t->fs, h, a->parent, a->name, a->target, ret);
        case MAKE_CREATE:
                return t->ops->create(t->fs, h, a->parent, a->name, a->mode, a->flags, a->kill_priv, ret, a->ret_fh);
        case MAKE_OPEN_CREATED:
                return t->ops->open_created(t->fs, h, a->parent, a->name, a->flags, ret, a->ret_fh);
        case MAKE_TMPFILE:
                return t->ops->tmpfile(t->fs, h, a->parent, a->mode, a->flags, ret, a->ret_fh);
        }
        return -EINVAL; /* not reached: -Wswitch names a MakeOp without its case here */
}

static int make_as_caller(const IdTranslateFs *t, const FsCtx *c, const MakeArgs *a, FsEntry *ret) {
        gid_t groups[FS_CTX_MAX_GROUPS];
        FsCtx h;
        int r;

        r = caller_to_host(t, c, &h, groups);
        if (r < 0)
                return r;
        return entry_to_guest(t, make_call(t, &h, a, ret), ret);
}

/* ---- the operations ---- */

static void tr_session_reset(void *fs, bool writeback) {
        IdTranslateFs *t = fs;
        t->ops->session_reset(t->fs, writeback);
}

static int tr_lookup(void *fs, const FsCtx *c, uint64_t parent, const char *name, FsEntry *ret) {
        IdTranslateFs *t = fs;
        return entry_to_guest(t, t->ops->lookup(t->fs, c, parent, name, ret), ret);
}

static void tr_forget(void *fs, uint64_t nodeid, uint64_t nlookup) {
        IdTranslateFs *t = fs;
        t->ops->forget(t->fs, nodeid, nlookup);
}

static int tr_getattr(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, struct stat *ret) {
        IdTranslateFs *t = fs;
        return attr_to_guest(t, t->ops->getattr(t->fs, c, nodeid, fh, ret), ret);
}

static int tr_setattr(void *fs, const FsCtx *c, uint64_t nodeid, const FsSetattr *a, struct stat *ret) {
        IdTranslateFs *t = fs;
        HostCaller hc;
        FsSetattr h = *a;
        uint32_t id;
        int r;

        /* chown to an id forbid-guest names is refused like a request from it. */
        if (a->valid & FS_SET_UID) {
                r = id_translate_to_host(t->uid, a->uid, &id);
                if (r < 0)
                        return r;
                h.uid = id;
        }
        if (a->valid & FS_SET_GID) {
                r = id_translate_to_host(t->gid, a->gid, &id);
                if (r < 0)
                        return r;
                h.gid = id;
        }
        return attr_to_guest(t, t->ops->setattr(t->fs, caller_for_check(t, c, &hc), nodeid, &h, ret), ret);
}

static int tr_readlink(void *fs, const FsCtx *c, uint64_t nodeid, char *buf, size_t size) {
        IdTranslateFs *t = fs;
        return t->ops->readlink(t->fs, c, nodeid, buf, size);
}

static int tr_mknod(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
                    FsEntry *ret) {
        MakeArgs a = { .op = MAKE_MKNOD, .parent = parent, .name = name, .mode = mode, .rdev = rdev };
        return make_as_caller(fs, c, &a, ret);
}

static int tr_mkdir(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, FsEntry *ret) {
        MakeArgs a = { .op = MAKE_MKDIR, .parent = parent, .name = name, .mode = mode };
        return make_as_caller(fs, c, &a, ret);
}

static int tr_symlink(void *fs, const FsCtx *c, uint64_t parent, const char *name, const char *target, FsEntry *ret) {
        MakeArgs a = { .op = MAKE_SYMLINK, .parent = parent, .name = name, .target = target };
        return make_as_caller(fs, c, &a, ret);
}

static int tr_unlink(void *fs, const FsCtx *c, uint64_t parent, const char *name) {
        IdTranslateFs *t = fs;
        HostCaller hc;

        return t->ops->unlink(t->fs, caller_for_check(t, c, &hc), parent, name);
}

static int tr_rmdir(void *fs, const FsCtx *c, uint64_t parent, const char *name) {
        IdTranslateFs *t = fs;
        HostCaller hc;

        return t->ops->rmdir(t->fs, caller_for_check(t, c, &hc), parent, name);
}

static int tr_rename(void *fs, const FsCtx *c, uint64_t parent, const char *name, uint64_t newparent,
                     const char *newname, unsigned flags) {
        IdTranslateFs *t = fs;
        HostCaller hc;

        return t->ops->rename(t->fs, caller_for_check(t, c, &hc), parent, name, newparent, newname, flags);
}

static int tr_link(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t newparent, const char *newname, FsEntry *ret) {
        IdTranslateFs *t = fs;
        HostCaller hc;
        int r = t->ops->link(t->fs, caller_for_check(t, c, &hc), nodeid, newparent, newname, ret);

        return entry_to_guest(t, r, ret);
}

static int tr_open(void *fs, const FsCtx *c, uint64_t nodeid, int flags, bool kill_priv, uint64_t *ret_fh) {
        IdTranslateFs *t = fs;
        HostCaller hc;

        return t->ops->open(t->fs, caller_for_check(t, c, &hc), nodeid, flags, kill_priv, ret_fh);
}

static int tr_create(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, int flags,
                     bool kill_priv, FsEntry *ret, uint64_t *ret_fh) {
        MakeArgs a = { .op = MAKE_CREATE, .parent = parent, .name = name, .mode = mode, .flags = flags,
                       .kill_priv = kill_priv, .ret_fh = ret_fh };
        return make_as_caller(fs, c, &a, ret);
}

static int tr_open_created(void *fs, const FsCtx *c, uint64_t parent, const char *name, int flags, FsEntry *ret,
                           uint64_t *ret_fh) {
        MakeArgs a = { .op = MAKE_OPEN_CREATED, .parent = parent, .name = name, .flags = flags, .ret_fh = ret_fh };
        return make_as_caller(fs, c, &a, ret);
}

static int tr_tmpfile(void *fs, const FsCtx *c, uint64_t parent, mode_t mode, int flags, FsEntry *ret,
                      uint64_t *ret_fh) {
        MakeArgs a = { .op = MAKE_TMPFILE, .parent = parent, .mode = mode, .flags = flags, .ret_fh = ret_fh };
        return make_as_caller(fs, c, &a, ret);
}

static ssize_t tr_read(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const struct iovec *iov,
                       unsigned niov) {
        IdTranslateFs *t = fs;
        return t->ops->read(t->fs, c, nodeid, fh, off, iov, niov);
}

static ssize_t tr_write(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const struct iovec *iov,
                        unsigned niov, bool kill_priv) {
        IdTranslateFs *t = fs;
        return t->ops->write(t->fs, c, nodeid, fh, off, iov, niov, kill_priv);
}

static int tr_flush(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner) {
        IdTranslateFs *t = fs;
        return t->ops->flush(t->fs, c, nodeid, fh, lock_owner);
}

static int tr_release(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner, bool flock_unlock) {
        IdTranslateFs *t = fs;
        return t->ops->release(t->fs, c, nodeid, fh, lock_owner, flock_unlock);
}

static int tr_fsync(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync) {
        IdTranslateFs *t = fs;
        return t->ops->fsync(t->fs, c, nodeid, fh, datasync);
}

static int tr_opendir(void *fs, const FsCtx *c, uint64_t nodeid, int flags, uint64_t *ret_fh) {
        IdTranslateFs *t = fs;
        HostCaller hc;

        return t->ops->opendir(t->fs, caller_for_check(t, c, &hc), nodeid, flags, ret_fh);
}

/* READDIRPLUS entries pass through here on their way to the server's filler. */
typedef struct PlusFiller {
        const IdTranslateFs *t;
        const FsDirFiller *inner;
} PlusFiller;

static bool plus_fits(void *data, size_t namelen) {
        PlusFiller *f = data;
        return fs_dir_fits(f->inner, namelen);
}

static int plus_add(void *data, const char *name, size_t namelen, uint64_t ino, unsigned type, uint64_t off,
                    const FsEntry *entry) {
        PlusFiller *f = data;
        FsEntry e;

        if (!entry || entry->nodeid == 0)
                return fs_dir_add(f->inner, name, namelen, ino, type, off, entry);
        e = *entry;
        stat_to_guest(f->t, &e.st);
        return fs_dir_add(f->inner, name, namelen, ino, type, off, &e);
}

static int tr_readdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const FsDirFiller *fill) {
        IdTranslateFs *t = fs;
        PlusFiller pf = { .t = t, .inner = fill };
        FsDirFiller wrapped = { .plus = true, .fits = plus_fits, .add = plus_add, .data = &pf };

        if (!fill->plus)
                return t->ops->readdir(t->fs, c, nodeid, fh, off, fill);
        return t->ops->readdir(t->fs, c, nodeid, fh, off, &wrapped);
}

static int tr_handle_kept(void *fs, uint64_t nodeid, uint64_t fh, bool dir) {
        IdTranslateFs *t = fs;
        return t->ops->handle_kept ? t->ops->handle_kept(t->fs, nodeid, fh, dir) : -EBADF;
}

static int tr_releasedir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh) {
        IdTranslateFs *t = fs;
        return t->ops->releasedir(t->fs, c, nodeid, fh);
}

static int tr_fsyncdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync) {
        IdTranslateFs *t = fs;
        return t->ops->fsyncdir(t->fs, c, nodeid, fh, datasync);
}

static int tr_statfs(void *fs, const FsCtx *c, uint64_t nodeid, struct statvfs *ret) {
        IdTranslateFs *t = fs;
        return t->ops->statfs(t->fs, c, nodeid, ret);
}

static int tr_access(void *fs, const FsCtx *c, uint64_t nodeid, int mask) {
        IdTranslateFs *t = fs;
        gid_t groups[FS_CTX_MAX_GROUPS];
        FsCtx h;
        int r = caller_to_host(t, c, &h, groups);
        if (r < 0)
                return r;
        return t->ops->access(t->fs, &h, nodeid, mask);
}

static int tr_syncfs(void *fs, const FsCtx *c, uint64_t nodeid) {
        IdTranslateFs *t = fs;
        return t->ops->syncfs(t->fs, c, nodeid);
}

/* xattrs carry no ids vufsd knows of: POSIX ACLs (which do) are refused with translation
 * (config_verify(), docs/id-mapping.md). The caller is checked in host ids. */
static int tr_setxattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, const void *value, size_t size,
                       int flags, bool acl_kill_sgid) {
        IdTranslateFs *t = fs;
        HostCaller hc;

        return t->ops->setxattr(t->fs, caller_for_check(t, c, &hc), nodeid, name, value, size, flags, acl_kill_sgid);
}

static ssize_t tr_getxattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, void *buf, size_t size) {
        IdTranslateFs *t = fs;
        HostCaller hc;

        return t->ops->getxattr(t->fs, caller_for_check(t, c, &hc), nodeid, name, buf, size);
}

static ssize_t tr_listxattr(void *fs, const FsCtx *c, uint64_t nodeid, void *buf, size_t size) {
        IdTranslateFs *t = fs;
        return t->ops->listxattr(t->fs, c, nodeid, buf, size);
}

static int tr_removexattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name) {
        IdTranslateFs *t = fs;
        HostCaller hc;

        return t->ops->removexattr(t->fs, caller_for_check(t, c, &hc), nodeid, name);
}

static int tr_fallocate(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int mode, uint64_t off, uint64_t len) {
        IdTranslateFs *t = fs;
        return t->ops->fallocate(t->fs, c, nodeid, fh, mode, off, len);
}

static int64_t tr_lseek(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int64_t off, int whence) {
        IdTranslateFs *t = fs;
        return t->ops->lseek(t->fs, c, nodeid, fh, off, whence);
}

static ssize_t tr_copy_file_range(void *fs, const FsCtx *c, uint64_t nodeid_in, uint64_t fh_in, uint64_t off_in,
                                  uint64_t nodeid_out, uint64_t fh_out, uint64_t off_out, uint64_t len,
                                  unsigned flags) {
        IdTranslateFs *t = fs;
        return t->ops->copy_file_range(t->fs, c, nodeid_in, fh_in, off_in, nodeid_out, fh_out, off_out, len, flags);
}

static int tr_getlk(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, FsLock *lk) {
        IdTranslateFs *t = fs;
        return t->ops->getlk(t->fs, c, nodeid, fh, owner, lk);
}

static int tr_setlk(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, const FsLock *lk,
                    bool flock, bool wait) {
        IdTranslateFs *t = fs;
        return t->ops->setlk(t->fs, c, nodeid, fh, owner, lk, flock, wait);
}

const FsOps id_translate_fs_ops = {
        .session_reset = tr_session_reset,
        .lookup = tr_lookup,
        .forget = tr_forget,
        .getattr = tr_getattr,
        .setattr = tr_setattr,
        .readlink = tr_readlink,
        .mknod = tr_mknod,
        .mkdir = tr_mkdir,
        .symlink = tr_symlink,
        .unlink = tr_unlink,
        .rmdir = tr_rmdir,
        .rename = tr_rename,
        .link = tr_link,
        .open = tr_open,
        .create = tr_create,
        .open_created = tr_open_created,
        .tmpfile = tr_tmpfile,
        .read = tr_read,
        .write = tr_write,
        .flush = tr_flush,
        .release = tr_release,
        .fsync = tr_fsync,
        .opendir = tr_opendir,
        .readdir = tr_readdir,
        .releasedir = tr_releasedir,
        .handle_kept = tr_handle_kept,
        .fsyncdir = tr_fsyncdir,
        .statfs = tr_statfs,
        .access = tr_access,
        .syncfs = tr_syncfs,
        .setxattr = tr_setxattr,
        .getxattr = tr_getxattr,
        .listxattr = tr_listxattr,
        .removexattr = tr_removexattr,
        .fallocate = tr_fallocate,
        .lseek = tr_lseek,
        .copy_file_range = tr_copy_file_range,
        .getlk = tr_getlk,
        .setlk = tr_setlk,
};
