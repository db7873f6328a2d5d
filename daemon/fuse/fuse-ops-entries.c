/* fuse-ops-entries.c: the opcodes of names and attributes: lookup, forget, getattr, setattr, the creating and removing ones, rename, link, readlink, statfs, access. */
#include <errno.h>
#include <linux/limits.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include "fs-names.h"
#include "fuse-internal.h"
#include "log.h"
#include "request-progress.h"

int do_lookup(Req *r) {
        const char *name;
        FsEntry e;
        int k;

        k = single_name(r, 0, &name, true);
        if (k < 0)
                return k;
        k = r->s->ops->lookup(r->s->fs, &r->ctx, r->in.nodeid, name, &e);
        if (k == -ENOENT && policy(r->s) != CACHE_NEVER) {
                /* A negative entry the guest may cache for the entry timeout. */
                e = (FsEntry) { 0 };
                return reply_entry(r, &e);
        }
        if (k < 0)
                return k;
        return reply_entry(r, &e);
}

int do_forget(Req *r) {
        r->s->ops->forget(r->s->fs, r->in.nodeid, ARG(r, struct fuse_forget_in)->nlookup);
        return 0;
}

int do_batch_forget(Req *r) {
        struct fuse_batch_forget_in b;
        const struct fuse_forget_one *one;

        memcpy(&b, r->arg, sizeof b);
        /* The count must be backed by the message, or nothing is forgotten. */
        if ((uint64_t) b.count * sizeof(struct fuse_forget_one) > r->arglen - sizeof b) {
                log_guest("FUSE_BATCH_FORGET: count %u larger than the message", b.count);
                return -EINVAL;
        }
        one = (const struct fuse_forget_one *) (r->arg + sizeof b);
        for (uint32_t i = 0; i < b.count; i++)
                r->s->ops->forget(r->s->fs, one[i].nodeid, one[i].nlookup);
        return 0;
}

int do_getattr(Req *r) {
        const struct fuse_getattr_in *g = ARG(r, struct fuse_getattr_in);
        struct stat st;
        int k;

        k = r->s->ops->getattr(r->s->fs, &r->ctx, r->in.nodeid,
                               (g->getattr_flags & FUSE_GETATTR_FH) ? g->fh : FS_NO_FH, &st);
        if (k < 0)
                return k;
        return reply_attr(r, &st);
}

/* SETATTR's wire bits and what they mean to the filesystem interface. FATTR_LOCKOWNER (only
 * informs) and FATTR_CTIME (the host sets ctime itself) have no counterpart. */
static const struct {
        uint32_t fattr;
        uint32_t fs;
} setattr_bits[] = {
        { FATTR_MODE, FS_SET_MODE },
        { FATTR_UID, FS_SET_UID },
        { FATTR_GID, FS_SET_GID },
        { FATTR_SIZE, FS_SET_SIZE },
        { FATTR_ATIME, FS_SET_ATIME },
        { FATTR_MTIME, FS_SET_MTIME },
        { FATTR_ATIME_NOW, FS_SET_ATIME_NOW },
        { FATTR_MTIME_NOW, FS_SET_MTIME_NOW },
        { FATTR_FH, FS_SET_FH },
        { FATTR_KILL_SUIDGID, FS_SET_KILL_SUIDGID },
};

static uint32_t setattr_valid_to_fs(uint32_t valid) {
        uint32_t v = 0;
        for (size_t i = 0; i < ELEMENTSOF(setattr_bits); i++)
                if (valid & setattr_bits[i].fattr)
                        v |= setattr_bits[i].fs;
        return v;
}

int do_setattr(Req *r) {
        const struct fuse_setattr_in *a = ARG(r, struct fuse_setattr_in);
        FsSetattr sa = {
                .valid = setattr_valid_to_fs(a->valid),
                .fh = a->fh,
                .mode = a->mode,
                .uid = a->uid,
                .gid = a->gid,
                .size = a->size,
                .atime = { (time_t)a->atime, a->atimensec },
                .mtime = { (time_t)a->mtime, a->mtimensec },
        };
        struct stat st;
        int k;

        if (a->valid & ~(FATTR_MODE | FATTR_UID | FATTR_GID | FATTR_SIZE | FATTR_ATIME | FATTR_MTIME | FATTR_FH |
                         FATTR_ATIME_NOW | FATTR_MTIME_NOW | FATTR_LOCKOWNER | FATTR_CTIME | FATTR_KILL_SUIDGID))
                return -EINVAL;
        if (((a->valid & FATTR_ATIME) && a->atimensec >= 1000000000) ||
            ((a->valid & FATTR_MTIME) && a->mtimensec >= 1000000000))
                return -EINVAL;
        if (!negotiated(r, FUSE_HANDLE_KILLPRIV_V2))
                sa.valid &= ~(uint32_t)FS_SET_KILL_SUIDGID;
        k = r->s->ops->setattr(r->s->fs, &r->ctx, r->in.nodeid, &sa, &st);
        if (k < 0)
                return k;
        return reply_attr(r, &st);
}

int do_readlink(Req *r) {
        char buf[PATH_MAX];
        int n;

        n = r->s->ops->readlink(r->s->fs, &r->ctx, r->in.nodeid, buf, sizeof buf);
        if (n < 0)
                return n;
        return reply_data(r, buf, (size_t) n);
}

/* Whether name is in parent now: looked up and forgotten again (no lookup count stays). */
static int name_exists(Req *r, uint64_t parent, const char *name) {
        FsEntry e;
        int k = r->s->ops->lookup(r->s->fs, &r->ctx, parent, name, &e);

        if (k == -ENOENT)
                return 0;
        if (k < 0)
                return k;
        if (e.nodeid != 0 && r->s->ops->forget)
                r->s->ops->forget(r->s->fs, e.nodeid, 1);
        return e.nodeid != 0;
}

/* MKDIR, MKNOD, SYMLINK, LINK: the entry made is looked up (which counts the lookup its reply gives the
 * guest, as the first run's reply would have). Died in the call: a name there before means EEXIST
 * (the call could not have made it); a name there now was made by it; none, it never ran. */
static int replayed_entry(Req *r, const char *name, FsEntry *e) {
        int k;

        if (r->replay == REPLAY_DONE && r->replay_result < 0)
                return replayed_error(r);
        if (r->replay == REPLAY_STARTED && r->replay_result)
                return -EEXIST;
        k = r->s->ops->lookup(r->s->fs, &r->ctx, r->in.nodeid, name, e);
        if (k == -ENOENT && r->replay == REPLAY_STARTED)
                return RUN_IT;
        return k;
}

/* UNLINK, RMDIR, RENAME (name: the one removed or moved away): died in the call, a name absent
 * before means the call failed with ENOENT; gone now, the call did it; still there, it never ran. */
static int replayed_removal(Req *r, const char *name) {
        int k;

        if (r->replay == REPLAY_DONE)
                return replayed_error(r);
        if (!r->replay_result)
                return RUN_IT; /* absent before: it fails again as it did */
        k = name_exists(r, r->in.nodeid, name);
        if (k < 0)
                return k;
        return k ? RUN_IT : 0;
}

int do_symlink(Req *r) {
        const char *p = r->arg, *name, *target;
        size_t left = r->arglen, tlen;
        FsEntry e;
        int k;

        k = take_name(&p, &left, &name, false);
        if (k < 0)
                return k;
        k = fs_string_take(&p, &left, &target, &tlen);
        if (k < 0)
                return k;
        k = fs_symlink_target_validate(target, tlen);
        if (k < 0)
                return k;
        k = r->replay ? replayed_entry(r, name, &e) : RUN_IT;
        if (k == RUN_IT) {
                k = r->s->ops->symlink(r->s->fs, &r->ctx, r->in.nodeid, name, target, &e);
                request_progress_host_done(k);
        }
        if (k < 0)
                return k;
        return reply_entry(r, &e);
}

static dev_t decode_dev(uint32_t d) {
        return makedev((d & 0xfff00) >> 8, (d & 0xff) | ((d >> 12) & 0xfff00));
}

/* MKNOD and MKDIR: fixed arguments with the mode and the umask, then the one new name; the entry
 * made is the reply. rdev is MKNOD's (encoded) device, NULL for MKDIR. */
static int make_node(Req *r, size_t skip, uint32_t mode, uint32_t umask, const uint32_t *rdev) {
        const char *name;
        FsEntry e;
        int k;

        k = single_name(r, skip, &name, false);
        if (k < 0)
                return k;
        r->ctx.umask = umask;
        r->ctx.has_umask = true;
        k = r->replay ? replayed_entry(r, name, &e) : RUN_IT;
        if (k == RUN_IT) {
                if (rdev)
                        k = r->s->ops->mknod(r->s->fs, &r->ctx, r->in.nodeid, name, mode, decode_dev(*rdev), &e);
                else
                        k = r->s->ops->mkdir(r->s->fs, &r->ctx, r->in.nodeid, name, mode, &e);
                request_progress_host_done(k);
        }
        if (k < 0)
                return k;
        return reply_entry(r, &e);
}

int do_mknod(Req *r) {
        const struct fuse_mknod_in *m = ARG(r, struct fuse_mknod_in);
        return make_node(r, sizeof *m, m->mode, m->umask, &m->rdev);
}

int do_mkdir(Req *r) {
        const struct fuse_mkdir_in *m = ARG(r, struct fuse_mkdir_in);
        return make_node(r, sizeof *m, m->mode, m->umask, NULL);
}

/* UNLINK and RMDIR: the argument block is the one name to remove. */
static int remove_name(Req *r, int (*op)(void *fs, const FsCtx *c, uint64_t parent, const char *name)) {
        const char *name;
        int k = single_name(r, 0, &name, false);
        if (k < 0)
                return k;
        if (r->replay && (k = replayed_removal(r, name)) != RUN_IT)
                return k;
        k = op(r->s->fs, &r->ctx, r->in.nodeid, name);
        request_progress_host_done(k);
        return k;
}

int do_unlink(Req *r) {
        return remove_name(r, r->s->ops->unlink);
}

int do_rmdir(Req *r) {
        return remove_name(r, r->s->ops->rmdir);
}

static int rename_common(Req *r, size_t skip, uint64_t newdir, unsigned flags) {
        const char *p = r->arg + skip, *oldname, *newname;
        size_t left = r->arglen - skip;
        int k;

        k = take_name(&p, &left, &oldname, false);
        if (k < 0)
                return k;
        k = take_name(&p, &left, &newname, false);
        if (k < 0)
                return k;
        if (r->replay && (k = replayed_removal(r, oldname)) != RUN_IT)
                return k;
        k = r->s->ops->rename(r->s->fs, &r->ctx, r->in.nodeid, oldname, newdir, newname, flags);
        request_progress_host_done(k);
        return k;
}

int do_rename(Req *r) {
        return rename_common(r, sizeof(struct fuse_rename_in), ARG(r, struct fuse_rename_in)->newdir, 0);
}

int do_rename2(Req *r) {
        const struct fuse_rename2_in *a = ARG(r, struct fuse_rename2_in);
        return rename_common(r, sizeof *a, a->newdir, a->flags);
}

int do_link(Req *r) {
        const char *name;
        FsEntry e;
        int k;

        k = single_name(r, sizeof(struct fuse_link_in), &name, false);
        if (k < 0)
                return k;
        /* in.nodeid is the directory, oldnodeid the inode that gets the new name. Replayed: the new
         * name is looked up as a MKDIR's (replayed_entry()). */
        k = r->replay ? replayed_entry(r, name, &e) : RUN_IT;
        if (k == RUN_IT) {
                k = r->s->ops->link(r->s->fs, &r->ctx, ARG(r, struct fuse_link_in)->oldnodeid, r->in.nodeid, name,
                                    &e);
                request_progress_host_done(k);
        }
        if (k < 0)
                return k;
        return reply_entry(r, &e);
}

int do_statfs(Req *r) {
        struct fuse_statfs_out o = { 0 };
        struct statvfs sv;
        int k;

        k = r->s->ops->statfs(r->s->fs, &r->ctx, r->in.nodeid, &sv);
        if (k < 0)
                return k;
        o.st = (struct fuse_kstatfs) {
                .blocks = sv.f_blocks,
                .bfree = sv.f_bfree,
                .bavail = sv.f_bavail,
                .files = sv.f_files,
                .ffree = sv.f_ffree,
                .bsize = (uint32_t) sv.f_bsize,
                .namelen = (uint32_t) sv.f_namemax,
                .frsize = (uint32_t) sv.f_frsize,
        };
        return reply_data(r, &o, sizeof o);
}

int do_access(Req *r) {
        return r->s->ops->access(r->s->fs, &r->ctx, r->in.nodeid, (int) ARG(r, struct fuse_access_in)->mask);
}
