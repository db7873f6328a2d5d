/* fuse-ops-io.c: the opcodes of open files: open, create, tmpfile, read, write, flush, fsync, release, fallocate, lseek, copy_file_range, syncfs. */
#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>

#include "fs-names.h"
#include "fuse-internal.h"
#include "request-progress.h"

static uint32_t file_open_flags(FuseServer *s) {
        switch (policy(s)) {
        case CACHE_NEVER:
        case CACHE_METADATA:
                return FOPEN_DIRECT_IO;
        case CACHE_ALWAYS:
                return FOPEN_KEEP_CACHE;
        default:
                return 0;
        }
}

static bool open_writes(int flags) {
        return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

int do_open(Req *r) {
        const struct fuse_open_in *o = ARG(r, struct fuse_open_in);
        struct fuse_open_out out = { 0 };
        int flags = (int) o->flags, k;

        if (r->s->opts.readonly && open_writes(flags))
                return -EROFS;
        k = replayed_open(r, false, &out.fh);
        if (k == RUN_IT) {
                k = r->s->ops->open(r->s->fs, &r->ctx, r->in.nodeid, flags,
                                    negotiated(r, FUSE_HANDLE_KILLPRIV_V2) && (o->open_flags & FUSE_OPEN_KILL_SUIDGID),
                                    &out.fh);
                request_progress_host_done(k < 0 ? k : (int64_t) out.fh);
        }
        if (k < 0)
                return k;
        out.open_flags = file_open_flags(r->s);
        return reply_data(r, &out, sizeof out);
}

/* CREATE of a process that died after (or in) its host call: the file it made is opened
 * (FsOps.open_created: as the caller, without O_CREAT, O_EXCL and O_TRUNC, all done already), as
 * the first run's reply would have given it. Died in the call: a name there before means EEXIST
 * for O_EXCL, else the call (an open of what is there) runs again; a name there now was made by
 * it; none, it never ran. A file gone since (removed by another process) is made again. */
static int replayed_create(Req *r, const char *name, int flags, FsEntry *e, uint64_t *fh) {
        int k;

        if (r->replay == REPLAY_DONE && r->replay_result < 0)
                return replayed_error(r);
        if (r->replay == REPLAY_STARTED && r->replay_result)
                return (flags & O_EXCL) ? -EEXIST : RUN_IT;
        if (!r->s->ops->open_created)
                return RUN_IT;
        k = r->s->ops->open_created(r->s->fs, &r->ctx, r->in.nodeid, name, flags & ~(O_CREAT | O_EXCL | O_TRUNC), e,
                                    fh);
        return k == -ENOENT ? RUN_IT : k;
}

static int create_common(Req *r, bool tmpfile) {
        const struct fuse_create_in *c = ARG(r, struct fuse_create_in);
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o;
        } out = { 0 };
        const char *p = r->arg + sizeof *c, *name;
        size_t left = r->arglen - sizeof *c;
        bool kill = negotiated(r, FUSE_HANDLE_KILLPRIV_V2) && (c->open_flags & FUSE_OPEN_KILL_SUIDGID);
        FsEntry e;
        int k;

        r->ctx.umask = c->umask;
        r->ctx.has_umask = true;
        if (tmpfile) {
                /* TMPFILE carries the placeholder name of the unnamed dentry ("/"): parsed, unused. */
                k = fs_string_take(&p, &left, &name, NULL);
                if (k < 0)
                        return k;
                k = r->s->ops->tmpfile(r->s->fs, &r->ctx, r->in.nodeid, c->mode, (int) c->flags, &e, &out.o.fh);
        } else {
                k = take_name(&p, &left, &name, false);
                if (k < 0)
                        return k;
                /* A TMPFILE runs again: the unnamed file the dead process made went with its fd. */
                k = r->replay ? replayed_create(r, name, (int) c->flags, &e, &out.o.fh) : RUN_IT;
                if (k == RUN_IT) {
                        k = r->s->ops->create(r->s->fs, &r->ctx, r->in.nodeid, name, c->mode, (int) c->flags, kill,
                                              &e, &out.o.fh);
                        request_progress_host_done(k);
                }
        }
        if (k < 0)
                return k;
        entry_out_fill(r->s, &out.e, &e);
        out.o.open_flags = file_open_flags(r->s);
        return reply_data(r, &out, sizeof out);
}

int do_create(Req *r) {
        return create_common(r, false);
}

int do_tmpfile(Req *r) {
        return create_common(r, true);
}

int do_read(Req *r) {
        const struct fuse_read_in *ri = ARG(r, struct fuse_read_in);
        struct iovec iov[FUSE_MAX_IOV];
        ssize_t n;
        int niov;

        if (ri->size > FUSE_MAX_WRITE)
                return -EINVAL;
        if (ri->size > chain_left(r->out))
                return -E2BIG;
        if (ri->size == 0)
                return 0;
        niov = chain_peek_iov(r->out, ri->size, iov, ELEMENTSOF(iov));
        if (niov < 0)
                return niov == -E2BIG ? -E2BIG : -EINVAL;
        /* Straight into guest memory. */
        n = r->s->ops->read(r->s->fs, &r->ctx, r->in.nodeid, ri->fh, ri->offset, iov, (unsigned) niov);
        if (n < 0)
                return (int) n;
        (void) chain_skip(r->out, (size_t) n);
        r->out_len += (size_t) n;
        r->info->bytes = (uint64_t) n;
        return 0;
}

/* WRITE and COPY_FILE_RANGE: the count written, or the error. */
static int reply_written(Req *r, ssize_t n) {
        struct fuse_write_out o = { 0 };

        if (n < 0)
                return (int) n;
        o.size = (uint32_t) n;
        r->info->bytes = (uint64_t) n;
        return reply_data(r, &o, sizeof o);
}

int do_write(Req *r) {
        const struct fuse_write_in *wi = ARG(r, struct fuse_write_in);
        struct iovec iov[FUSE_MAX_IOV];
        ssize_t n;
        int niov;

        if (wi->size > FUSE_MAX_WRITE)
                return -EINVAL;
        /* The data is exactly the rest of the message. */
        if (wi->size != chain_left(r->data))
                return -EINVAL;
        niov = chain_peek_iov(r->data, wi->size, iov, ELEMENTSOF(iov));
        if (niov < 0)
                return -EINVAL;
        /* WRITE_KILL_SUIDGID (7.31's WRITE_KILL_PRIV) is honoured whatever was negotiated: Linux sets
         * it on direct-I/O writes by callers without CAP_FSETID and, on that path, does not clear
         * the bits itself (cache=never would otherwise keep set-uid after an unprivileged write). */
        /* Written by a process that died before its reply: that count, not a second write (an
         * O_APPEND one would be doubled). */
        if (r->replay == REPLAY_DONE)
                return reply_written(r, (ssize_t) r->replay_result);
        n = r->s->ops->write(r->s->fs, &r->ctx, r->in.nodeid, wi->fh, wi->offset, iov, (unsigned) niov,
                             (wi->write_flags & FUSE_WRITE_KILL_SUIDGID) != 0);
        request_progress_host_done(n);
        return reply_written(r, n);
}

int do_release(Req *r) {
        const struct fuse_release_in *ri = ARG(r, struct fuse_release_in);
        int k;

        /* Released by a process that died before its reply: run again, the handle would be
         * unknown (EBADF) to the guest's one RELEASE. */
        if (r->replay == REPLAY_DONE)
                return (int) r->replay_result;
        k = r->s->ops->release(r->s->fs, &r->ctx, r->in.nodeid, ri->fh, ri->lock_owner,
                               (ri->release_flags & FUSE_RELEASE_FLOCK_UNLOCK) != 0);
        request_progress_host_done(k);
        return k;
}

int do_fsync(Req *r) {
        const struct fuse_fsync_in *f = ARG(r, struct fuse_fsync_in);
        return r->s->ops->fsync(r->s->fs, &r->ctx, r->in.nodeid, f->fh, (f->fsync_flags & FUSE_FSYNC_FDATASYNC) != 0);
}

int do_flush(Req *r) {
        const struct fuse_flush_in *f = ARG(r, struct fuse_flush_in);
        return r->s->ops->flush(r->s->fs, &r->ctx, r->in.nodeid, f->fh, f->lock_owner);
}

int do_fallocate(Req *r) {
        const struct fuse_fallocate_in *f = ARG(r, struct fuse_fallocate_in);

        /* Done by a process that died before its reply: that result (its handle is not the next
         * process's, and a COLLAPSE_RANGE or INSERT_RANGE must not run twice). */
        if (r->replay == REPLAY_DONE)
                return replayed_error(r);
        return r->s->ops->fallocate(r->s->fs, &r->ctx, r->in.nodeid, f->fh, (int) f->mode, f->offset, f->length);
}

int do_lseek(Req *r) {
        const struct fuse_lseek_in *l = ARG(r, struct fuse_lseek_in);
        struct fuse_lseek_out o = { 0 };
        int64_t off;

        /* The offset is signed for lseek(2); a negative one is the host's to answer (ENXIO for
         * SEEK_DATA/SEEK_HOLE, EINVAL for SEEK_SET), as it would be for a local file. */
        off = r->s->ops->lseek(r->s->fs, &r->ctx, r->in.nodeid, l->fh, (int64_t) l->offset, (int) l->whence);
        if (off < 0)
                return (int) off;
        o.offset = (uint64_t) off;
        return reply_data(r, &o, sizeof o);
}

int do_copy_file_range(Req *r) {
        const struct fuse_copy_file_range_in *c = ARG(r, struct fuse_copy_file_range_in);
        ssize_t n;

        /* Copied by a process that died before its reply: that count (its handles are not the next
         * process's), as a WRITE's. */
        if (r->replay == REPLAY_DONE)
                return reply_written(r, (ssize_t) r->replay_result);
        /* The reply's size is 32 bits: copy at most what it can report (the kernel's own cap). */
        n = r->s->ops->copy_file_range(r->s->fs, &r->ctx, r->in.nodeid, c->fh_in, c->off_in, c->nodeid_out,
                                       c->fh_out, c->off_out, MIN(c->len, (uint64_t) 0x7ffff000),
                                       (unsigned) c->flags);
        return reply_written(r, n);
}

int do_syncfs(Req *r) {
        return r->s->ops->syncfs(r->s->fs, &r->ctx, r->in.nodeid);
}
