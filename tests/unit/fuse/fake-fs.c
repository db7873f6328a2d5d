/* fake-fs.c: an in-memory FsOps that records what the FUSE server asks of it. */
#include "fake-fs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

void fake_fs_init(FakeFs *f) {
        *f = (FakeFs) { .next_nodeid = FS_ROOT_ID + 1 };
        f->nodes[0] = (FakeNode) { .nodeid = FS_ROOT_ID, .parent = FS_ROOT_ID, .nlookup = 1, .mode = S_IFDIR | 0755 };
}

FakeNode *fake_fs_node(FakeFs *f, uint64_t nodeid) {
        if (nodeid == 0)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(f->nodes); i++)
                if (f->nodes[i].nodeid == nodeid)
                        return &f->nodes[i];
        return NULL;
}

static FakeNode *find_child(FakeFs *f, uint64_t parent, const char *name) {
        for (size_t i = 1; i < ELEMENTSOF(f->nodes); i++)
                if (f->nodes[i].nodeid != 0 && f->nodes[i].parent == parent && streq(f->nodes[i].name, name))
                        return &f->nodes[i];
        return NULL;
}

/* Records the call; returns the injected failure, if any. */
static int record(FakeFs *f, const char *op, uint64_t nodeid, const char *name) {
        int r = f->fail_next;

        f->calls++;
        snprintf(f->last_op, sizeof f->last_op, "%s", op);
        f->last_nodeid = nodeid;
        snprintf(f->last_name, sizeof f->last_name, "%s", name ? name : "");
        f->fail_next = 0;
        return r;
}

static void fill_entry(const FakeNode *n, FsEntry *e) {
        *e = (FsEntry) { .nodeid = n->nodeid, .generation = 1 };
        e->st.st_ino = n->nodeid;
        e->st.st_mode = n->mode;
        e->st.st_nlink = 1;
}

static void fake_session_reset(void *fs, bool writeback) {
        FakeFs *f = fs;
        f->resets++;
        f->writeback = writeback;
        for (size_t i = 1; i < ELEMENTSOF(f->nodes); i++)
                f->nodes[i].nlookup = 0;
}

static int fake_lookup(void *fs, const FsCtx *c, uint64_t parent, const char *name, FsEntry *ret) {
        FakeFs *f = fs;
        FakeNode *p = fake_fs_node(f, parent), *n;
        int r = record(f, "lookup", parent, name);

        if (r < 0)
                return r;
        if (!p)
                return -EBADF;
        if (streq(name, ".") || streq(name, ".."))
                n = streq(name, "..") ? fake_fs_node(f, p->parent) : p;
        else
                n = find_child(f, parent, name);
        if (!n)
                return -ENOENT;
        if (n->nodeid != FS_ROOT_ID && n->nlookup == 0)
                n->nodeid = f->next_nodeid++; /* forgotten: a new nodeid, never the old one */
        n->nlookup++;
        fill_entry(n, ret);
        return 0;
}

static void fake_forget(void *fs, uint64_t nodeid, uint64_t nlookup) {
        FakeFs *f = fs;
        FakeNode *n = fake_fs_node(f, nodeid);

        (void) record(f, "forget", nodeid, NULL);
        if (!n || nodeid == FS_ROOT_ID)
                return;
        n->nlookup = nlookup >= n->nlookup ? 0 : n->nlookup - nlookup;
}

/* A node the guest may name: known, and looked up in this session (the root always). */
static FakeNode *live(FakeFs *f, uint64_t nodeid) {
        FakeNode *n = fake_fs_node(f, nodeid);
        return n && (n->nodeid == FS_ROOT_ID || n->nlookup > 0) ? n : NULL;
}

static int fake_getattr(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, struct stat *ret) {
        FakeFs *f = fs;
        FakeNode *n = live(f, nodeid);
        FsEntry e;
        int r = record(f, "getattr", nodeid, NULL);

        if (r < 0)
                return r;
        if (!n)
                return -EBADF;
        fill_entry(n, &e);
        *ret = e.st;
        return 0;
}

static int fake_setattr(void *fs, const FsCtx *c, uint64_t nodeid, const FsSetattr *a, struct stat *ret) {
        FakeFs *f = fs;
        FakeNode *n = live(f, nodeid);
        FsEntry e;
        int r = record(f, "setattr", nodeid, NULL);

        if (r < 0)
                return r;
        if (!n)
                return -EBADF;
        f->last_setattr = *a;
        fill_entry(n, &e);
        *ret = e.st;
        return 0;
}

static int make_node(FakeFs *f, const char *op, uint64_t parent, const char *name, mode_t mode, FsEntry *ret) {
        int r = record(f, op, parent, name);

        if (r < 0)
                return r;
        if (!live(f, parent))
                return -EBADF;
        if (find_child(f, parent, name))
                return -EEXIST;
        for (size_t i = 1; i < ELEMENTSOF(f->nodes); i++)
                if (f->nodes[i].nodeid == 0) {
                        FakeNode *n = &f->nodes[i];
                        *n = (FakeNode) { .nodeid = f->next_nodeid++, .parent = parent, .nlookup = 1, .mode = mode };
                        snprintf(n->name, sizeof n->name, "%s", name);
                        fill_entry(n, ret);
                        return 0;
                }
        return -ENOSPC;
}

static int fake_mknod(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
                      FsEntry *ret) {
        return make_node(fs, "mknod", parent, name, mode, ret);
}

static int fake_mkdir(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, FsEntry *ret) {
        return make_node(fs, "mkdir", parent, name, S_IFDIR | (mode & 07777), ret);
}

static int fake_symlink(void *fs, const FsCtx *c, uint64_t parent, const char *name, const char *target,
                        FsEntry *ret) {
        return make_node(fs, "symlink", parent, name, S_IFLNK | 0777, ret);
}

static int fake_create(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, int flags,
                       bool kill_priv, FsEntry *ret, uint64_t *ret_fh) {
        int r = make_node(fs, "create", parent, name, S_IFREG | (mode & 07777), ret);
        if (r == 0)
                *ret_fh = ret->nodeid + 1000;
        return r;
}

static int remove_node(FakeFs *f, const char *op, uint64_t parent, const char *name) {
        FakeNode *n;
        int r = record(f, op, parent, name);

        if (r < 0)
                return r;
        n = find_child(f, parent, name);
        if (!n)
                return -ENOENT;
        n->parent = 0; /* unlinked; the nodeid lives on while the guest holds it */
        n->name[0] = 0;
        return 0;
}

static int fake_unlink(void *fs, const FsCtx *c, uint64_t parent, const char *name) {
        return remove_node(fs, "unlink", parent, name);
}

static int fake_rmdir(void *fs, const FsCtx *c, uint64_t parent, const char *name) {
        return remove_node(fs, "rmdir", parent, name);
}

static int fake_rename(void *fs, const FsCtx *c, uint64_t parent, const char *name, uint64_t newparent,
                       const char *newname, unsigned flags) {
        FakeFs *f = fs;
        FakeNode *n;
        int r = record(f, "rename", parent, name);

        if (r < 0)
                return r;
        n = find_child(f, parent, name);
        if (!n)
                return -ENOENT;
        n->parent = newparent;
        snprintf(n->name, sizeof n->name, "%s", newname);
        return 0;
}

/* Handles: nodeid + 1000, checked against the nodeid they come with. */
static int check_fh(FakeFs *f, uint64_t nodeid, uint64_t fh) {
        return live(f, nodeid) && fh == nodeid + 1000 ? 0 : -EBADF;
}

static int fake_open(void *fs, const FsCtx *c, uint64_t nodeid, int flags, bool kill_priv, uint64_t *ret_fh) {
        FakeFs *f = fs;
        int r = record(f, "open", nodeid, NULL);

        if (r < 0)
                return r;
        if (!live(f, nodeid))
                return -EBADF;
        *ret_fh = nodeid + 1000;
        return 0;
}

static int fake_opendir(void *fs, const FsCtx *c, uint64_t nodeid, int flags, uint64_t *ret_fh) {
        FakeFs *f = fs;
        int r = record(f, "opendir", nodeid, NULL);

        if (r < 0)
                return r;
        if (!live(f, nodeid))
                return -EBADF;
        *ret_fh = nodeid + 1000;
        return 0;
}

static int fake_readdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off,
                        const FsDirFiller *fill) {
        FakeFs *f = fs;
        int r = record(f, "readdir", nodeid, NULL);

        if (r < 0)
                return r;
        r = check_fh(f, nodeid, fh);
        if (r < 0)
                return r;
        for (uint64_t i = off; i < f->n_dirents; i++) {
                char name[32];
                int n = snprintf(name, sizeof name, "entry-%" PRIu64, i);
                FsEntry e = { 0 };

                if (!fs_dir_fits(fill, (size_t) n))
                        break;
                /* With plus, every entry carries a node of its own that the guest now holds. */
                if (fill->plus)
                        e = (FsEntry) { .nodeid = f->next_nodeid++, .st.st_ino = 5000 + i, .st.st_mode = S_IFREG | 0644 };
                r = fs_dir_add(fill, name, (size_t) n, 5000 + i, 8 /* DT_REG */, i + 1, fill->plus ? &e : NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int fake_releasedir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh) {
        FakeFs *f = fs;
        int r = record(f, "releasedir", nodeid, NULL);
        return r < 0 ? r : check_fh(f, nodeid, fh);
}

static int fake_release(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner,
                        bool flock_unlock) {
        FakeFs *f = fs;
        int r = record(f, "release", nodeid, NULL);
        return r < 0 ? r : check_fh(f, nodeid, fh);
}

static ssize_t fake_read(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off,
                         const struct iovec *iov, unsigned niov) {
        FakeFs *f = fs;
        size_t n = 0;
        int r = record(f, "read", nodeid, NULL);

        if (r < 0)
                return r;
        r = check_fh(f, nodeid, fh);
        if (r < 0)
                return r;
        /* The file holds the byte (offset & 0xff) at every offset. */
        for (unsigned k = 0; k < niov; k++)
                for (size_t j = 0; j < iov[k].iov_len; j++, n++)
                        ((uint8_t *) iov[k].iov_base)[j] = (uint8_t) (off + n);
        return (ssize_t) n;
}

static ssize_t fake_write(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off,
                          const struct iovec *iov, unsigned niov, bool kill_priv) {
        FakeFs *f = fs;
        size_t n = 0;
        int r = record(f, "write", nodeid, NULL);

        if (r < 0)
                return r;
        r = check_fh(f, nodeid, fh);
        if (r < 0)
                return r;
        for (unsigned k = 0; k < niov; k++)
                n += iov[k].iov_len;
        return (ssize_t) n;
}

/* Everything else the server may call: recorded, answered with the injected error or ENOSYS. */
#define FAKE_UNSUPPORTED(op) return record(fs, #op, nodeid, NULL) ?: -ENOSYS

static int fake_readlink(void *fs, const FsCtx *c, uint64_t nodeid, char *buf, size_t size) {
        FAKE_UNSUPPORTED(readlink);
}
static int fake_link(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t newparent, const char *newname,
                     FsEntry *ret) {
        FAKE_UNSUPPORTED(link);
}
static int fake_tmpfile(void *fs, const FsCtx *c, uint64_t nodeid, mode_t mode, int flags, FsEntry *ret,
                        uint64_t *ret_fh) {
        FAKE_UNSUPPORTED(tmpfile);
}
static int fake_flush(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner) {
        FAKE_UNSUPPORTED(flush);
}
static int fake_fsync(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync) {
        FAKE_UNSUPPORTED(fsync);
}
static int fake_fsyncdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync) {
        FAKE_UNSUPPORTED(fsyncdir);
}
static int fake_statfs(void *fs, const FsCtx *c, uint64_t nodeid, struct statvfs *ret) {
        FAKE_UNSUPPORTED(statfs);
}
static int fake_access(void *fs, const FsCtx *c, uint64_t nodeid, int mask) {
        FAKE_UNSUPPORTED(access);
}
static int fake_syncfs(void *fs, const FsCtx *c, uint64_t nodeid) {
        FAKE_UNSUPPORTED(syncfs);
}
static int fake_setxattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, const void *value, size_t size,
                         int flags, bool acl_kill_sgid) {
        FAKE_UNSUPPORTED(setxattr);
}
static ssize_t fake_getxattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, void *buf, size_t size) {
        FAKE_UNSUPPORTED(getxattr);
}
static ssize_t fake_listxattr(void *fs, const FsCtx *c, uint64_t nodeid, void *buf, size_t size) {
        FAKE_UNSUPPORTED(listxattr);
}
static int fake_removexattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name) {
        FAKE_UNSUPPORTED(removexattr);
}
static int fake_fallocate(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int mode, uint64_t off,
                          uint64_t len) {
        FAKE_UNSUPPORTED(fallocate);
}
static int64_t fake_lseek(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int64_t off, int whence) {
        FAKE_UNSUPPORTED(lseek);
}
static ssize_t fake_copy_file_range(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh_in, uint64_t off_in,
                                    uint64_t nodeid_out, uint64_t fh_out, uint64_t off_out, uint64_t len,
                                    unsigned flags) {
        FAKE_UNSUPPORTED(copy_file_range);
}
static int fake_getlk(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, FsLock *lk) {
        FAKE_UNSUPPORTED(getlk);
}
static int fake_setlk(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, const FsLock *lk,
                      bool flock, bool wait) {
        FAKE_UNSUPPORTED(setlk);
}

const FsOps fake_fs_ops = {
        .session_reset = fake_session_reset,
        .lookup = fake_lookup,
        .forget = fake_forget,
        .getattr = fake_getattr,
        .setattr = fake_setattr,
        .readlink = fake_readlink,
        .mknod = fake_mknod,
        .mkdir = fake_mkdir,
        .symlink = fake_symlink,
        .unlink = fake_unlink,
        .rmdir = fake_rmdir,
        .rename = fake_rename,
        .link = fake_link,
        .open = fake_open,
        .create = fake_create,
        .tmpfile = fake_tmpfile,
        .read = fake_read,
        .write = fake_write,
        .flush = fake_flush,
        .release = fake_release,
        .fsync = fake_fsync,
        .opendir = fake_opendir,
        .readdir = fake_readdir,
        .releasedir = fake_releasedir,
        .fsyncdir = fake_fsyncdir,
        .statfs = fake_statfs,
        .access = fake_access,
        .syncfs = fake_syncfs,
        .setxattr = fake_setxattr,
        .getxattr = fake_getxattr,
        .listxattr = fake_listxattr,
        .removexattr = fake_removexattr,
        .fallocate = fake_fallocate,
        .lseek = fake_lseek,
        .copy_file_range = fake_copy_file_range,
        .getlk = fake_getlk,
        .setlk = fake_setlk,
};
