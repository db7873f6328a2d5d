/* fuse-ops-dir.c: the opcodes of directories: opendir, readdir and readdirplus (with their entry encoding), releasedir, fsyncdir. */
#include <errno.h>
#include <linux/limits.h>
#include <string.h>

#include "fuse-internal.h"
#include "request-progress.h"

/* ---- directory buffers: the FsDirFiller behind readdir (fs-ops.h) ---- */

typedef struct DirBuf {
        FuseServer *s;
        ChainIter *out;
        size_t left;
        size_t used;
        bool plus;
} DirBuf;

static size_t dirent_size(const DirBuf *b, size_t namelen) {
        return b->plus ? FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + namelen)
                       : FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + namelen);
}

static bool dirbuf_fits(void *data, size_t namelen) {
        const DirBuf *b = data;
        return dirent_size(b, namelen) <= b->left;
}

static int dirbuf_add(void *data, const char *name, size_t namelen, uint64_t ino, unsigned type, uint64_t off,
                      const FsEntry *entry) {
        DirBuf *b = data;
        char rec[FUSE_NAME_OFFSET_DIRENTPLUS + NAME_MAX + 8] = { 0 };
        size_t size = dirent_size(b, namelen);
        struct fuse_dirent *d;

        if (namelen == 0 || namelen > NAME_MAX)
                return -EINVAL;
        if (size > b->left)
                return -ENOSPC;
        if (b->plus) {
                struct fuse_direntplus *dp = (struct fuse_direntplus *) rec;
                FsEntry none = { 0 };
                entry_out_fill(b->s, &dp->entry_out, entry ? entry : &none);
                if (!entry || entry->nodeid == 0) {
                        /* No node: the guest only lists the name. */
                        dp->entry_out.entry_valid = dp->entry_out.attr_valid = 0;
                        dp->entry_out.entry_valid_nsec = dp->entry_out.attr_valid_nsec = 0;
                }
                d = &dp->dirent;
        } else
                d = (struct fuse_dirent *) rec;
        d->ino = ino;
        d->off = off;
        d->namelen = (uint32_t) namelen;
        d->type = type;
        memcpy(d->name, name, namelen);
        if (chain_write(b->out, rec, size) < 0)
                return -ENOSPC;
        b->left -= size;
        b->used += size;
        return 0;
}

/* ---- the opcodes ---- */

int do_opendir(Req *r) {
        struct fuse_open_out out = { 0 };
        int k;

        k = replayed_open(r, true, &out.fh);
        if (k == RUN_IT) {
                k = r->s->ops->opendir(r->s->fs, &r->ctx, r->in.nodeid, (int) ARG(r, struct fuse_open_in)->flags,
                                       &out.fh);
                request_progress_host_done(k < 0 ? k : (int64_t) out.fh);
        }
        if (k < 0)
                return k;
        if (policy(r->s) == CACHE_ALWAYS)
                out.open_flags = FOPEN_CACHE_DIR;
        return reply_data(r, &out, sizeof out);
}

static int readdir_common(Req *r, bool plus) {
        const struct fuse_read_in *ri = ARG(r, struct fuse_read_in);
        DirBuf b = { .s = r->s, .out = r->out, .plus = plus };
        const FsDirFiller fill = { .plus = plus, .fits = dirbuf_fits, .add = dirbuf_add, .data = &b };
        int k;

        /* Never more than the guest asked for, nor than the reply can hold. */
        b.left = MIN((size_t) ri->size, chain_left(r->out));
        b.left = MIN(b.left, (size_t) FUSE_MAX_WRITE);
        k = r->s->ops->readdir(r->s->fs, &r->ctx, r->in.nodeid, ri->fh, ri->offset, &fill);
        if (k < 0)
                return k;
        r->out_len += b.used;
        return 0;
}

int do_readdir(Req *r) {
        return readdir_common(r, false);
}

int do_readdirplus(Req *r) {
        return readdir_common(r, true);
}

int do_releasedir(Req *r) {
        int k;

        if (r->replay == REPLAY_DONE) /* as do_release() */
                return (int) r->replay_result;
        k = r->s->ops->releasedir(r->s->fs, &r->ctx, r->in.nodeid, ARG(r, struct fuse_release_in)->fh);
        request_progress_host_done(k);
        return k;
}

int do_fsyncdir(Req *r) {
        const struct fuse_fsync_in *f = ARG(r, struct fuse_fsync_in);
        return r->s->ops->fsyncdir(r->s->fs, &r->ctx, r->in.nodeid, f->fh,
                                   (f->fsync_flags & FUSE_FSYNC_FDATASYNC) != 0);
}
