/* fuse-reply.c: the reply payload: attributes and entries with their timeouts, and the bytes written. */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "fuse-internal.h"

static void timeout_of(FuseServer *s, uint64_t *sec, uint32_t *nsec) {
        double t;

        switch (policy(s)) {
        case CACHE_NEVER:
                t = 0; /* never cache means never: the override does not apply */
                break;
        case CACHE_ALWAYS:
                t = s->opts.timeout >= 0 ? s->opts.timeout : 86400;
                break;
        default:
                t = s->opts.timeout >= 0 ? s->opts.timeout : 1;
                break;
        }
        *sec = (uint64_t) t;
        *nsec = (uint32_t) ((t - (double) *sec) * 1e9);
}

static uint32_t encode_dev(dev_t d) {
        /* The kernel's new_encode_dev(): 12-bit major, 20-bit minor. */
        unsigned maj = major(d), min = minor(d);
        return (min & 0xff) | (maj << 8) | ((min & ~0xffu) << 12);
}

static void attr_from_stat(struct fuse_attr *a, const struct stat *st) {
        *a = (struct fuse_attr) {
                .ino = st->st_ino,
                .size = (uint64_t) st->st_size,
                .blocks = (uint64_t) st->st_blocks,
                .atime = (uint64_t) st->st_atim.tv_sec,
                .mtime = (uint64_t) st->st_mtim.tv_sec,
                .ctime = (uint64_t) st->st_ctim.tv_sec,
                .atimensec = (uint32_t) st->st_atim.tv_nsec,
                .mtimensec = (uint32_t) st->st_mtim.tv_nsec,
                .ctimensec = (uint32_t) st->st_ctim.tv_nsec,
                .mode = st->st_mode,
                .nlink = (uint32_t) st->st_nlink,
                .uid = st->st_uid,
                .gid = st->st_gid,
                .rdev = encode_dev(st->st_rdev),
                .blksize = (uint32_t) st->st_blksize,
        };
}

void entry_out_fill(FuseServer *s, struct fuse_entry_out *o, const FsEntry *e) {
        *o = (struct fuse_entry_out) { .nodeid = e->nodeid, .generation = e->generation };
        timeout_of(s, &o->entry_valid, &o->entry_valid_nsec);
        o->attr_valid = o->entry_valid;
        o->attr_valid_nsec = o->entry_valid_nsec;
        attr_from_stat(&o->attr, &e->st);
        /* Another host mount below the share: the guest gives it its own st_dev. */
        if (e->submount && S_ISDIR(e->st.st_mode) && (atomic_load(&s->flags) & FUSE_SUBMOUNTS))
                o->attr.flags |= FUSE_ATTR_SUBMOUNT;
}

int reply_data(Req *r, const void *p, size_t n) {
        int k = chain_write(r->out, p, n);
        if (k < 0)
                return -E2BIG;
        r->out_len += n;
        return 0;
}

int reply_entry(Req *r, const FsEntry *e) {
        struct fuse_entry_out o;
        entry_out_fill(r->s, &o, e);
        return reply_data(r, &o, sizeof o);
}

int reply_attr(Req *r, const struct stat *st) {
        struct fuse_attr_out o = { 0 };
        timeout_of(r->s, &o.attr_valid, &o.attr_valid_nsec);
        attr_from_stat(&o.attr, st);
        return reply_data(r, &o, sizeof o);
}
