/* fuse-server.c: FUSE request decoding, validation, dispatch and reply encoding. */
#include "fuse-server.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fuse.h>
#include <linux/limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "fs-names.h"
#include "fs-ops.h"
#include "log.h"
#include "xattr-map.h"

#define FUSE_SERVER_MINOR 38      /* the protocol minor we implement (Debian 12's linux/fuse.h) */
#define FUSE_SERVER_MIN_MINOR 31  /* older guests are refused, as the C virtiofsd does */
#define FUSE_MAX_WRITE (1024 * 1024)
#define FUSE_MAX_PAGES_REPLY 256
/* Largest argument block of any opcode but WRITE: SETXATTR with its extended header, a name and a
 * value of XATTR_SIZE_MAX; RENAME/SYMLINK need two names of at most PATH_MAX. */
#define FUSE_ARGS_MAX (sizeof(struct fuse_setxattr_in) + XATTR_NAME_MAX + 1 + XATTR_SIZE_MAX)
#define FUSE_MAX_IOV 1024
/* Largest request extension block accepted: one security context with a name of XATTR_NAME_MAX and
 * a value of XATTR_SIZE_MAX, plus room for small extensions (supplementary groups). */
#define FUSE_EXT_MAX (XATTR_SIZE_MAX + XATTR_NAME_MAX + 1 + 4096)

/* The guest addresses the root as FUSE_ROOT_ID; the filesystem issues it as FS_ROOT_ID. */
_Static_assert(FS_ROOT_ID == FUSE_ROOT_ID, "the interface's root id is FUSE's");

/* A blocking request the guest may cancel with INTERRUPT. */
typedef struct Waiter {
        uint64_t unique;
        _Atomic bool interrupted;
} Waiter;

struct FuseServer {
        FsOptions opts;
        /* The filesystem, handed in by whoever composes the daemon; not owned. */
        const FsOps *ops;
        void *fs;

        _Atomic int cache;        /* CachePolicy, switchable at run time */
        _Atomic bool initialized; /* INIT answered and no DESTROY since */
        _Atomic uint64_t flags;   /* negotiated INIT flags (flags | flags2 << 32) */

        /* Serialises INIT/DESTROY/reset against each other; never taken by ordinary requests. */
        pthread_mutex_t session_lock;

        /* Guards the waiter table: an insert, remove or lookup per blocking request/INTERRUPT. */
        pthread_mutex_t waiters_lock;
        GHashTable *waiters; /* uint64_t* unique -> Waiter*, key and value in the same frame */
};

typedef struct Req {
        FuseServer *s;
        struct fuse_in_header in;
        const char *arg;   /* copy of the argument block (guest memory is never parsed in place) */
        size_t arglen;
        const char *ext;   /* the request extensions, copied right after the arguments */
        size_t extlen;
        ChainIter *data;   /* readable bytes after the copied arguments (WRITE data) */
        ChainIter *out;    /* writable bytes after the reply header */
        size_t out_len;    /* payload bytes written into out */
        FsCtx ctx;
        FuseReqInfo *info;
        bool may_wait; /* this thread may wait for a lock for as long as it takes (a helper) */
        /* Last and not zeroed per request (744 bytes of labels, a fifth of a getattr's
         * instructions when they were, and 128 of groups): only the ctx.n_labels and ctx.n_groups
         * entries parse_secctx() and parse_supp_groups() wrote are ever read. */
        FsSecLabel labels[FUSE_MAX_NR_SECCTX];
        gid_t groups[FS_CTX_MAX_GROUPS]; /* FUSE_EXT_GROUPS, decoded */
} Req;

enum {
        OP_NO_REPLY = 1 << 0,  /* FORGET, BATCH_FORGET, INTERRUPT */
        OP_MODIFIES = 1 << 1,  /* EROFS with the readonly option */
        OP_DATA = 1 << 2,      /* only in_size bytes are arguments; the rest is data (WRITE) */
        OP_BEFORE_INIT = 1 << 3,
        OP_SECCTX = 1 << 4,    /* creates an inode: takes the security context extension */
};

typedef struct OpDesc {
        const char *name;
        int (*fn)(Req *r);
        uint32_t in_size;  /* fixed argument bytes (minimum) */
        uint32_t out_size; /* fixed reply payload bytes, checked against the space before acting */
        unsigned flags;
} OpDesc;

/* ---- helpers ---- */

static bool negotiated(Req *r, uint64_t flag) {
        return (atomic_load(&r->s->flags) & flag) != 0;
}

static CachePolicy policy(FuseServer *s) {
        return (CachePolicy) atomic_load(&s->cache);
}

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

static dev_t decode_dev(uint32_t d) {
        return makedev((d & 0xfff00) >> 8, (d & 0xff) | ((d >> 12) & 0xfff00));
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

static void entry_out_fill(FuseServer *s, struct fuse_entry_out *o, const FsEntry *e) {
        *o = (struct fuse_entry_out) { .nodeid = e->nodeid, .generation = e->generation };
        timeout_of(s, &o->entry_valid, &o->entry_valid_nsec);
        o->attr_valid = o->entry_valid;
        o->attr_valid_nsec = o->entry_valid_nsec;
        attr_from_stat(&o->attr, &e->st);
        /* Another host mount below the share: the guest gives it its own st_dev. */
        if (e->submount && S_ISDIR(e->st.st_mode) && (atomic_load(&s->flags) & FUSE_SUBMOUNTS))
                o->attr.flags |= FUSE_ATTR_SUBMOUNT;
}

static int reply_data(Req *r, const void *p, size_t n) {
        int k = chain_write(r->out, p, n);
        if (k < 0)
                return -E2BIG;
        r->out_len += n;
        return 0;
}

static int reply_entry(Req *r, const FsEntry *e) {
        struct fuse_entry_out o;
        entry_out_fill(r->s, &o, e);
        return reply_data(r, &o, sizeof o);
}

static int reply_attr(Req *r, const struct stat *st) {
        struct fuse_attr_out o = { 0 };
        timeout_of(r->s, &o.attr_valid, &o.attr_valid_nsec);
        attr_from_stat(&o.attr, st);
        return reply_data(r, &o, sizeof o);
}

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

/* Takes the next name out of the argument block, validated at the one choke point. */
static int take_name(const char **p, size_t *left, const char **ret, bool allow_dots) {
        size_t len;
        int k = fs_string_take(p, left, ret, &len);
        if (k < 0)
                return k;
        return fs_name_validate(*ret, len, allow_dots);
}

/* The whole remaining argument block is exactly one name. */
static int single_name(Req *r, size_t skip, const char **ret, bool allow_dots) {
        const char *p = r->arg + skip;
        size_t left = r->arglen - skip;
        return take_name(&p, &left, ret, allow_dots);
}

/* The argument block is a private, 8-aligned copy (copy_args), at least in_size bytes long: its
 * fixed struct can be used in place. */
#define ARG(r, type) ((const type *) (r)->arg)

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

/* ---- opcode handlers ---- */

static void session_reset(FuseServer *s, bool writeback) {
        GHashTableIter it;
        gpointer k, v;

        /* Cancel blocking waits of the old session. */
        pthread_mutex_lock(&s->waiters_lock);
        g_hash_table_iter_init(&it, s->waiters);
        while (g_hash_table_iter_next(&it, &k, &v))
                atomic_store(&((Waiter *) v)->interrupted, true);
        pthread_mutex_unlock(&s->waiters_lock);
        s->ops->session_reset(s->fs, writeback);
}

/* FUSE 7.38 as Linux 6.3 has it: Debian 12's header (Linux 6.1) stops before the supplementary
 * group extension. The creating process's group that owns the parent directory, sent with
 * CREATE/MKDIR/MKNOD/SYMLINK/TMPFILE when the caller is in it only as a supplementary member. */
#ifndef FUSE_CREATE_SUPP_GROUP
#define FUSE_CREATE_SUPP_GROUP (1ULL << 34)
#define FUSE_EXT_GROUPS 32
struct fuse_supp_groups {
        uint32_t nr_groups;
        uint32_t groups[];
};
#endif

/* Kernel 6.6 (FUSE 7.39); older headers do not have it yet. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

static int do_init(Req *r) {
        FuseServer *s = r->s;
        struct fuse_init_in ii = { 0 };
        struct fuse_init_out o = { 0 };
        uint64_t offered, want, got;

        memcpy(&ii, r->arg, MIN(r->arglen, sizeof ii));
        if (ii.major < 7) {
                log_guest("FUSE_INIT: unsupported protocol %u.%u", ii.major, ii.minor);
                return -EPROTO;
        }
        if (ii.major > 7) {
                /* Tell a newer guest our major so it can retry with it (libfuse's convention). */
                o.major = FUSE_KERNEL_VERSION;
                o.minor = FUSE_SERVER_MINOR;
                return reply_data(r, &o, FUSE_COMPAT_INIT_OUT_SIZE);
        }
        if (ii.minor < FUSE_SERVER_MIN_MINOR) {
                log_guest("FUSE_INIT: guest protocol 7.%u is older than 7.%u", ii.minor, FUSE_SERVER_MIN_MINOR);
                return -EPROTO;
        }
        offered = ii.flags;
        if ((ii.flags & FUSE_INIT_EXT) && r->arglen >= sizeof ii)
                offered |= (uint64_t) ii.flags2 << 32;

        /* FUSE_CREATE_SUPP_GROUP: creating operations run with the caller's group of the parent
         * directory too (setgid directories, group-writable directories of a secondary group). */
        want = FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC | FUSE_EXPORT_SUPPORT | FUSE_BIG_WRITES |
               FUSE_AUTO_INVAL_DATA | FUSE_ASYNC_DIO | FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES | FUSE_INIT_EXT |
               FUSE_CREATE_SUPP_GROUP;
        if (s->opts.readdirplus)
                want |= FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO;
        if (s->opts.posix_lock)
                want |= FUSE_POSIX_LOCKS;
        if (s->opts.flock)
                want |= FUSE_FLOCK_LOCKS;
        if (s->opts.writeback)
                want |= FUSE_WRITEBACK_CACHE;
        if (s->opts.killpriv_v2)
                want |= FUSE_HANDLE_KILLPRIV_V2;
        if (s->opts.announce_submounts)
                want |= FUSE_SUBMOUNTS;
        /* --allow-mmap: files opened for direct I/O (cache never/metadata) may still be mapped
         * shared by the guest. */
        if (s->opts.allow_mmap)
                want |= FUSE_DIRECT_IO_ALLOW_MMAP;
        if (s->opts.security_label)
                want |= FUSE_SECURITY_CTX;
        if (s->opts.xattr) {
                want |= FUSE_SETXATTR_EXT;
                /* With ACLs the guest must leave the mode unmasked (DONT_MASK) and send the umask:
                 * the host applies it only where the parent has no default ACL. */
                if (s->opts.posix_acl)
                        want |= FUSE_POSIX_ACL | FUSE_DONT_MASK;
        }
        got = offered & want; /* never a flag the guest did not offer */
        if (!(got & FUSE_POSIX_ACL))
                got &= ~(uint64_t) FUSE_DONT_MASK;

        /* A new INIT is a new session: whatever the previous one held goes. */
        pthread_mutex_lock(&s->session_lock);
        session_reset(s, (got & FUSE_WRITEBACK_CACHE) != 0);
        atomic_store(&s->flags, got);
        atomic_store(&s->initialized, true);
        pthread_mutex_unlock(&s->session_lock);

        o.major = FUSE_KERNEL_VERSION;
        o.minor = MIN(ii.minor, (uint32_t) FUSE_SERVER_MINOR);
        o.max_readahead = ii.max_readahead;
        o.flags = (uint32_t) got;
        o.flags2 = (got & FUSE_INIT_EXT) ? (uint32_t) (got >> 32) : 0;
        o.max_write = FUSE_MAX_WRITE;
        o.time_gran = 1;
        o.max_pages = FUSE_MAX_PAGES_REPLY;
        log_debug("FUSE_INIT: guest 7.%u flags 0x%" PRIx64 ", negotiated 0x%" PRIx64, ii.minor, offered, got);
        return reply_data(r, &o, sizeof o);
}

static int do_destroy(Req *r) {
        FuseServer *s = r->s;

        pthread_mutex_lock(&s->session_lock);
        atomic_store(&s->initialized, false);
        session_reset(s, false);
        pthread_mutex_unlock(&s->session_lock);
        return 0;
}

static int do_lookup(Req *r) {
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

static int do_forget(Req *r) {
        r->s->ops->forget(r->s->fs, r->in.nodeid, ARG(r, struct fuse_forget_in)->nlookup);
        return 0;
}

static int do_batch_forget(Req *r) {
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

static int do_getattr(Req *r) {
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

static int do_setattr(Req *r) {
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

static int do_readlink(Req *r) {
        char buf[PATH_MAX];
        int n;

        n = r->s->ops->readlink(r->s->fs, &r->ctx, r->in.nodeid, buf, sizeof buf);
        if (n < 0)
                return n;
        return reply_data(r, buf, (size_t) n);
}

static int do_symlink(Req *r) {
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
        k = r->s->ops->symlink(r->s->fs, &r->ctx, r->in.nodeid, name, target, &e);
        if (k < 0)
                return k;
        return reply_entry(r, &e);
}

static int do_mknod(Req *r) {
        const struct fuse_mknod_in *m = ARG(r, struct fuse_mknod_in);
        const char *name;
        FsEntry e;
        int k;

        k = single_name(r, sizeof *m, &name, false);
        if (k < 0)
                return k;
        r->ctx.umask = m->umask;
        r->ctx.has_umask = true;
        k = r->s->ops->mknod(r->s->fs, &r->ctx, r->in.nodeid, name, m->mode, decode_dev(m->rdev), &e);
        if (k < 0)
                return k;
        return reply_entry(r, &e);
}

static int do_mkdir(Req *r) {
        const struct fuse_mkdir_in *m = ARG(r, struct fuse_mkdir_in);
        const char *name;
        FsEntry e;
        int k;

        k = single_name(r, sizeof *m, &name, false);
        if (k < 0)
                return k;
        r->ctx.umask = m->umask;
        r->ctx.has_umask = true;
        k = r->s->ops->mkdir(r->s->fs, &r->ctx, r->in.nodeid, name, m->mode, &e);
        if (k < 0)
                return k;
        return reply_entry(r, &e);
}

static int do_unlink(Req *r) {
        const char *name;
        int k = single_name(r, 0, &name, false);
        if (k < 0)
                return k;
        return r->s->ops->unlink(r->s->fs, &r->ctx, r->in.nodeid, name);
}

static int do_rmdir(Req *r) {
        const char *name;
        int k = single_name(r, 0, &name, false);
        if (k < 0)
                return k;
        return r->s->ops->rmdir(r->s->fs, &r->ctx, r->in.nodeid, name);
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
        return r->s->ops->rename(r->s->fs, &r->ctx, r->in.nodeid, oldname, newdir, newname, flags);
}

static int do_rename(Req *r) {
        return rename_common(r, sizeof(struct fuse_rename_in), ARG(r, struct fuse_rename_in)->newdir, 0);
}

static int do_rename2(Req *r) {
        const struct fuse_rename2_in *a = ARG(r, struct fuse_rename2_in);
        return rename_common(r, sizeof *a, a->newdir, a->flags);
}

static int do_link(Req *r) {
        const char *name;
        FsEntry e;
        int k;

        k = single_name(r, sizeof(struct fuse_link_in), &name, false);
        if (k < 0)
                return k;
        /* in.nodeid is the directory, oldnodeid the inode that gets the new name. */
        k = r->s->ops->link(r->s->fs, &r->ctx, ARG(r, struct fuse_link_in)->oldnodeid, r->in.nodeid, name, &e);
        if (k < 0)
                return k;
        return reply_entry(r, &e);
}

static bool open_writes(int flags) {
        return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

static int do_open(Req *r) {
        const struct fuse_open_in *o = ARG(r, struct fuse_open_in);
        struct fuse_open_out out = { 0 };
        int flags = (int) o->flags, k;

        if (r->s->opts.readonly && open_writes(flags))
                return -EROFS;
        k = r->s->ops->open(r->s->fs, &r->ctx, r->in.nodeid, flags,
                            negotiated(r, FUSE_HANDLE_KILLPRIV_V2) && (o->open_flags & FUSE_OPEN_KILL_SUIDGID),
                            &out.fh);
        if (k < 0)
                return k;
        out.open_flags = file_open_flags(r->s);
        return reply_data(r, &out, sizeof out);
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
                k = r->s->ops->create(r->s->fs, &r->ctx, r->in.nodeid, name, c->mode, (int) c->flags, kill, &e,
                                      &out.o.fh);
        }
        if (k < 0)
                return k;
        entry_out_fill(r->s, &out.e, &e);
        out.o.open_flags = file_open_flags(r->s);
        return reply_data(r, &out, sizeof out);
}

static int do_create(Req *r) {
        return create_common(r, false);
}

static int do_tmpfile(Req *r) {
        return create_common(r, true);
}

static int do_read(Req *r) {
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

static int do_write(Req *r) {
        const struct fuse_write_in *wi = ARG(r, struct fuse_write_in);
        struct fuse_write_out wo = { 0 };
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
        n = r->s->ops->write(r->s->fs, &r->ctx, r->in.nodeid, wi->fh, wi->offset, iov, (unsigned) niov,
                             (wi->write_flags & FUSE_WRITE_KILL_SUIDGID) != 0);
        if (n < 0)
                return (int) n;
        wo.size = (uint32_t) n;
        r->info->bytes = (uint64_t) n;
        return reply_data(r, &wo, sizeof wo);
}

static int do_statfs(Req *r) {
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

static int do_release(Req *r) {
        const struct fuse_release_in *ri = ARG(r, struct fuse_release_in);
        return r->s->ops->release(r->s->fs, &r->ctx, r->in.nodeid, ri->fh, ri->lock_owner,
                                  (ri->release_flags & FUSE_RELEASE_FLOCK_UNLOCK) != 0);
}

static int do_fsync(Req *r) {
        const struct fuse_fsync_in *f = ARG(r, struct fuse_fsync_in);
        return r->s->ops->fsync(r->s->fs, &r->ctx, r->in.nodeid, f->fh, (f->fsync_flags & FUSE_FSYNC_FDATASYNC) != 0);
}

static int do_flush(Req *r) {
        const struct fuse_flush_in *f = ARG(r, struct fuse_flush_in);
        return r->s->ops->flush(r->s->fs, &r->ctx, r->in.nodeid, f->fh, f->lock_owner);
}

/* --xattrmap: the host name for the guest's (malloc'd in *ret, NULL without a map). */
static int host_xattr_name(Req *r, const char *name, char **ret) {
        *ret = NULL;
        if (!r->s->opts.xattrmap)
                return 0;
        return xattr_map_to_host(r->s->opts.xattrmap, name, ret);
}

static int do_setxattr(Req *r) {
        size_t hdr = negotiated(r, FUSE_SETXATTR_EXT) ? sizeof(struct fuse_setxattr_in) : FUSE_COMPAT_SETXATTR_IN_SIZE;
        const struct fuse_setxattr_in *x = ARG(r, struct fuse_setxattr_in);
        const char *p, *name;
        size_t left, nlen;
        int k;

        if (!r->s->opts.xattr)
                return -ENOSYS;
        if (r->arglen < hdr)
                return -EINVAL;
        p = r->arg + hdr;
        left = r->arglen - hdr;
        k = fs_string_take(&p, &left, &name, &nlen);
        if (k < 0)
                return k;
        k = fs_xattr_name_validate(name, nlen);
        if (k < 0)
                return k;
        if (x->size > XATTR_SIZE_MAX)
                return -E2BIG;
        if (x->size != left)
                return -EINVAL;
        _cleanup_free_ char *mapped = NULL;
        k = host_xattr_name(r, name, &mapped);
        if (k < 0)
                return k;
        return r->s->ops->setxattr(r->s->fs, &r->ctx, r->in.nodeid, mapped ?: name, p, x->size, (int) x->flags,
                                   hdr == sizeof *x && (x->setxattr_flags & FUSE_SETXATTR_ACL_KILL_SGID));
}

/* GETXATTR and LISTXATTR: size 0 asks how much is needed; otherwise the data, ERANGE if larger. */
static int xattr_reply(Req *r, uint32_t size, ssize_t (*get)(Req *r, void *buf, size_t size)) {
        _cleanup_free_ char *buf = NULL;
        ssize_t n;

        if (size == 0) {
                struct fuse_getxattr_out o = { 0 };
                n = get(r, NULL, 0);
                if (n < 0)
                        return (int) n;
                o.size = (uint32_t) n;
                return reply_data(r, &o, sizeof o);
        }
        /* Bounded by the protocol's maximum and by what the reply can carry. */
        size = (uint32_t) MIN((size_t) size, (size_t) XATTR_SIZE_MAX);
        if (size > chain_left(r->out))
                return -E2BIG;
        buf = malloc(size);
        if (!buf)
                return -ENOMEM;
        n = get(r, buf, size);
        if (n < 0)
                return (int) n;
        return reply_data(r, buf, (size_t) n);
}

static ssize_t getxattr_cb(Req *r, void *buf, size_t size) {
        const char *p = r->arg + sizeof(struct fuse_getxattr_in), *name;
        size_t left = r->arglen - sizeof(struct fuse_getxattr_in);
        _cleanup_free_ char *mapped = NULL;
        int k;

        (void) fs_string_take(&p, &left, &name, NULL); /* validated by do_getxattr */
        k = host_xattr_name(r, name, &mapped);
        if (k < 0)
                return k;
        return r->s->ops->getxattr(r->s->fs, &r->ctx, r->in.nodeid, mapped ?: name, buf, size);
}

static int do_getxattr(Req *r) {
        const char *p = r->arg + sizeof(struct fuse_getxattr_in), *name;
        size_t left = r->arglen - sizeof(struct fuse_getxattr_in), nlen;
        int k;

        if (!r->s->opts.xattr)
                return -ENOSYS;
        k = fs_string_take(&p, &left, &name, &nlen);
        if (k < 0)
                return k;
        k = fs_xattr_name_validate(name, nlen);
        if (k < 0)
                return k;
        return xattr_reply(r, ARG(r, struct fuse_getxattr_in)->size, getxattr_cb);
}

static ssize_t listxattr_cb(Req *r, void *buf, size_t size) {
        _cleanup_free_ char *host = NULL;
        ssize_t n;

        if (!r->s->opts.xattrmap)
                return r->s->ops->listxattr(r->s->fs, &r->ctx, r->in.nodeid, buf, size);
        /* --xattrmap: the host's whole list, renamed and filtered. The list may grow between the
         * size query and the read: try again a few times. */
        for (unsigned attempt = 0; attempt < 4; attempt++) {
                ssize_t want = r->s->ops->listxattr(r->s->fs, &r->ctx, r->in.nodeid, NULL, 0);
                if (want <= 0)
                        return want;
                free(host);
                host = malloc((size_t) want);
                if (!host)
                        return -ENOMEM;
                n = r->s->ops->listxattr(r->s->fs, &r->ctx, r->in.nodeid, host, (size_t) want);
                if (n == -ERANGE)
                        continue;
                if (n < 0)
                        return n;
                return xattr_map_list(r->s->opts.xattrmap, host, (size_t) n, buf, size);
        }
        return -ERANGE;
}

static int do_listxattr(Req *r) {
        if (!r->s->opts.xattr)
                return -ENOSYS;
        return xattr_reply(r, ARG(r, struct fuse_getxattr_in)->size, listxattr_cb);
}

static int do_removexattr(Req *r) {
        const char *p = r->arg, *name;
        size_t left = r->arglen, nlen;
        int k;

        if (!r->s->opts.xattr)
                return -ENOSYS;
        k = fs_string_take(&p, &left, &name, &nlen);
        if (k < 0)
                return k;
        k = fs_xattr_name_validate(name, nlen);
        if (k < 0)
                return k;
        _cleanup_free_ char *mapped = NULL;
        k = host_xattr_name(r, name, &mapped);
        if (k < 0)
                return k;
        return r->s->ops->removexattr(r->s->fs, &r->ctx, r->in.nodeid, mapped ?: name);
}

static int do_opendir(Req *r) {
        struct fuse_open_out out = { 0 };
        int k;

        k = r->s->ops->opendir(r->s->fs, &r->ctx, r->in.nodeid, (int) ARG(r, struct fuse_open_in)->flags, &out.fh);
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

static int do_readdir(Req *r) {
        return readdir_common(r, false);
}

static int do_readdirplus(Req *r) {
        return readdir_common(r, true);
}

static int do_releasedir(Req *r) {
        return r->s->ops->releasedir(r->s->fs, &r->ctx, r->in.nodeid, ARG(r, struct fuse_release_in)->fh);
}

static int do_fsyncdir(Req *r) {
        const struct fuse_fsync_in *f = ARG(r, struct fuse_fsync_in);
        return r->s->ops->fsyncdir(r->s->fs, &r->ctx, r->in.nodeid, f->fh,
                                   (f->fsync_flags & FUSE_FSYNC_FDATASYNC) != 0);
}

static bool locks_enabled(Req *r, const struct fuse_lk_in *l) {
        if (l->lk_flags & FUSE_LK_FLOCK)
                return r->s->opts.flock && negotiated(r, FUSE_FLOCK_LOCKS);
        return r->s->opts.posix_lock && negotiated(r, FUSE_POSIX_LOCKS);
}

static int do_getlk(Req *r) {
        const struct fuse_lk_in *l = ARG(r, struct fuse_lk_in);
        struct fuse_lk_out o = { 0 };
        FsLock lk = { l->lk.start, l->lk.end, l->lk.type, l->lk.pid };
        int k;

        if (!locks_enabled(r, l))
                return -ENOSYS;
        k = r->s->ops->getlk(r->s->fs, &r->ctx, r->in.nodeid, l->fh, l->owner, &lk);
        if (k < 0)
                return k;
        o.lk = (struct fuse_file_lock) { .start = lk.start, .end = lk.end, .type = lk.type, .pid = lk.pid };
        return reply_data(r, &o, sizeof o);
}

static int setlk_common(Req *r, bool wait) {
        const struct fuse_lk_in *l = ARG(r, struct fuse_lk_in);
        FsLock lk = { l->lk.start, l->lk.end, l->lk.type, l->lk.pid };
        FuseServer *s = r->s;
        Waiter w = { .unique = r->in.unique };
        int k;

        if (!locks_enabled(r, l))
                return -ENOSYS;
        if (!wait || lk.type == F_UNLCK)
                return s->ops->setlk(s->fs, &r->ctx, r->in.nodeid, l->fh, l->owner, &lk,
                                     (l->lk_flags & FUSE_LK_FLOCK) != 0, false);
        if (!r->may_wait) {
                /* No thread of its own could be had (the executor could not create a helper): one
                 * attempt, and "no lock available" rather than holding up a queue or the pool for as
                 * long as another owner keeps the lock. */
                k = s->ops->setlk(s->fs, &r->ctx, r->in.nodeid, l->fh, l->owner, &lk,
                                  (l->lk_flags & FUSE_LK_FLOCK) != 0, false);
                if (k == -EAGAIN) {
                        log_guest("FUSE SETLKW: no thread to wait on, answering ENOLCK");
                        k = -ENOLCK;
                }
                return k;
        }

        /* A blocking lock: registered so INTERRUPT (or a session reset) can cancel it. The table's
         * key and value both live in this frame, so they must be this request's alone: a second
         * blocking request with a unique already waiting (the guest's protocol forbids it) is
         * refused, never put in the first one's place. Replacing the value would leave the first
         * waiter out of reach of INTERRUPT and cancel, and the key pointing into whichever frame
         * returns first. */
        pthread_mutex_lock(&s->waiters_lock);
        if (g_hash_table_contains(s->waiters, &w.unique))
                k = -EINVAL;
        else {
                g_hash_table_insert(s->waiters, &w.unique, &w);
                k = 0;
        }
        pthread_mutex_unlock(&s->waiters_lock);
        if (k < 0) {
                log_guest("FUSE SETLKW: unique %" PRIu64 " is already waiting", w.unique);
                return k;
        }
        r->ctx.interrupted = &w.interrupted;
        k = s->ops->setlk(s->fs, &r->ctx, r->in.nodeid, l->fh, l->owner, &lk, (l->lk_flags & FUSE_LK_FLOCK) != 0,
                          true);
        pthread_mutex_lock(&s->waiters_lock);
        assert(g_hash_table_lookup(s->waiters, &w.unique) == &w);
        g_hash_table_remove(s->waiters, &w.unique);
        pthread_mutex_unlock(&s->waiters_lock);
        r->ctx.interrupted = NULL;
        return k;
}

static int do_setlk(Req *r) {
        return setlk_common(r, false);
}

static int do_setlkw(Req *r) {
        return setlk_common(r, true);
}

static int do_interrupt(Req *r) {
        uint64_t target = ARG(r, struct fuse_interrupt_in)->unique;
        FuseServer *s = r->s;
        Waiter *w;

        pthread_mutex_lock(&s->waiters_lock);
        w = g_hash_table_lookup(s->waiters, &target);
        if (w)
                atomic_store(&w->interrupted, true);
        pthread_mutex_unlock(&s->waiters_lock);
        return 0;
}

static int do_access(Req *r) {
        return r->s->ops->access(r->s->fs, &r->ctx, r->in.nodeid, (int) ARG(r, struct fuse_access_in)->mask);
}

static int do_fallocate(Req *r) {
        const struct fuse_fallocate_in *f = ARG(r, struct fuse_fallocate_in);
        return r->s->ops->fallocate(r->s->fs, &r->ctx, r->in.nodeid, f->fh, (int) f->mode, f->offset, f->length);
}

static int do_lseek(Req *r) {
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

static int do_copy_file_range(Req *r) {
        const struct fuse_copy_file_range_in *c = ARG(r, struct fuse_copy_file_range_in);
        struct fuse_write_out o = { 0 };
        ssize_t n;

        /* The reply's size is 32 bits: copy at most what it can report (the kernel's own cap). */
        n = r->s->ops->copy_file_range(r->s->fs, &r->ctx, r->in.nodeid, c->fh_in, c->off_in, c->nodeid_out,
                                       c->fh_out, c->off_out, MIN(c->len, (uint64_t) 0x7ffff000),
                                       (unsigned) c->flags);
        if (n < 0)
                return (int) n;
        o.size = (uint32_t) n;
        r->info->bytes = (uint64_t) n;
        return reply_data(r, &o, sizeof o);
}

static int do_syncfs(Req *r) {
        return r->s->ops->syncfs(r->s->fs, &r->ctx, r->in.nodeid);
}

static int do_enosys(Req *r) {
        return -ENOSYS;
}

#define E(op, fn_, in, out, fl) [op] = { #op, fn_, in, out, fl }

static const OpDesc op_table[] = {
        E(FUSE_LOOKUP, do_lookup, 0, sizeof(struct fuse_entry_out), 0),
        E(FUSE_FORGET, do_forget, sizeof(struct fuse_forget_in), 0, OP_NO_REPLY),
        E(FUSE_GETATTR, do_getattr, sizeof(struct fuse_getattr_in), sizeof(struct fuse_attr_out), 0),
        E(FUSE_SETATTR, do_setattr, sizeof(struct fuse_setattr_in), sizeof(struct fuse_attr_out), OP_MODIFIES),
        E(FUSE_READLINK, do_readlink, 0, 0, 0),
        E(FUSE_SYMLINK, do_symlink, 0, sizeof(struct fuse_entry_out), OP_MODIFIES | OP_SECCTX),
        E(FUSE_MKNOD, do_mknod, sizeof(struct fuse_mknod_in), sizeof(struct fuse_entry_out), OP_MODIFIES | OP_SECCTX),
        E(FUSE_MKDIR, do_mkdir, sizeof(struct fuse_mkdir_in), sizeof(struct fuse_entry_out), OP_MODIFIES | OP_SECCTX),
        E(FUSE_UNLINK, do_unlink, 0, 0, OP_MODIFIES),
        E(FUSE_RMDIR, do_rmdir, 0, 0, OP_MODIFIES),
        E(FUSE_RENAME, do_rename, sizeof(struct fuse_rename_in), 0, OP_MODIFIES),
        E(FUSE_LINK, do_link, sizeof(struct fuse_link_in), sizeof(struct fuse_entry_out), OP_MODIFIES),
        E(FUSE_OPEN, do_open, sizeof(struct fuse_open_in), sizeof(struct fuse_open_out), 0),
        E(FUSE_READ, do_read, sizeof(struct fuse_read_in), 0, 0),
        E(FUSE_WRITE, do_write, sizeof(struct fuse_write_in), sizeof(struct fuse_write_out), OP_MODIFIES | OP_DATA),
        E(FUSE_STATFS, do_statfs, 0, sizeof(struct fuse_statfs_out), 0),
        E(FUSE_RELEASE, do_release, sizeof(struct fuse_release_in), 0, 0),
        E(FUSE_FSYNC, do_fsync, sizeof(struct fuse_fsync_in), 0, 0),
        E(FUSE_SETXATTR, do_setxattr, FUSE_COMPAT_SETXATTR_IN_SIZE, 0, OP_MODIFIES),
        E(FUSE_GETXATTR, do_getxattr, sizeof(struct fuse_getxattr_in), 0, 0),
        E(FUSE_LISTXATTR, do_listxattr, sizeof(struct fuse_getxattr_in), 0, 0),
        E(FUSE_REMOVEXATTR, do_removexattr, 0, 0, OP_MODIFIES),
        E(FUSE_FLUSH, do_flush, sizeof(struct fuse_flush_in), 0, 0),
        E(FUSE_INIT, do_init, 2 * sizeof(uint32_t), 0, OP_BEFORE_INIT),
        E(FUSE_OPENDIR, do_opendir, sizeof(struct fuse_open_in), sizeof(struct fuse_open_out), 0),
        E(FUSE_READDIR, do_readdir, sizeof(struct fuse_read_in), 0, 0),
        E(FUSE_RELEASEDIR, do_releasedir, sizeof(struct fuse_release_in), 0, 0),
        E(FUSE_FSYNCDIR, do_fsyncdir, sizeof(struct fuse_fsync_in), 0, 0),
        E(FUSE_GETLK, do_getlk, sizeof(struct fuse_lk_in), sizeof(struct fuse_lk_out), 0),
        E(FUSE_SETLK, do_setlk, sizeof(struct fuse_lk_in), 0, 0),
        E(FUSE_SETLKW, do_setlkw, sizeof(struct fuse_lk_in), 0, 0),
        E(FUSE_ACCESS, do_access, sizeof(struct fuse_access_in), 0, 0),
        E(FUSE_CREATE, do_create, sizeof(struct fuse_create_in),
          sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), OP_MODIFIES | OP_SECCTX),
        E(FUSE_INTERRUPT, do_interrupt, sizeof(struct fuse_interrupt_in), 0, OP_NO_REPLY),
        E(FUSE_BMAP, do_enosys, 0, 0, 0),
        E(FUSE_DESTROY, do_destroy, 0, 0, 0),
        E(FUSE_IOCTL, do_enosys, 0, 0, 0),
        E(FUSE_POLL, do_enosys, 0, 0, 0),
        E(FUSE_BATCH_FORGET, do_batch_forget, sizeof(struct fuse_batch_forget_in), 0, OP_NO_REPLY),
        E(FUSE_FALLOCATE, do_fallocate, sizeof(struct fuse_fallocate_in), 0, OP_MODIFIES),
        E(FUSE_READDIRPLUS, do_readdirplus, sizeof(struct fuse_read_in), 0, 0),
        E(FUSE_RENAME2, do_rename2, sizeof(struct fuse_rename2_in), 0, OP_MODIFIES),
        E(FUSE_LSEEK, do_lseek, sizeof(struct fuse_lseek_in), sizeof(struct fuse_lseek_out), 0),
        E(FUSE_COPY_FILE_RANGE, do_copy_file_range, sizeof(struct fuse_copy_file_range_in),
          sizeof(struct fuse_write_out), OP_MODIFIES),
        E(FUSE_SETUPMAPPING, do_enosys, 0, 0, 0),
        E(FUSE_REMOVEMAPPING, do_enosys, 0, 0, 0),
        E(FUSE_SYNCFS, do_syncfs, sizeof(struct fuse_syncfs_in), 0, 0),
        E(FUSE_TMPFILE, do_tmpfile, sizeof(struct fuse_create_in),
          sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), OP_MODIFIES | OP_SECCTX),
};

/* ---- request extensions ---- */

/* One security context header (struct fuse_secctx_header, its size covering the whole record)
 * followed by nr entries, each struct fuse_secctx {value size}, the xattr name with its NUL and the
 * value, padded to 8 bytes together. Everything must add up exactly; names must be security.*
 * (what an LSM labels with) but not security.capability, values at most XATTR_SIZE_MAX. */
static int parse_secctx(Req *r, const char *p, size_t size, uint32_t nr, bool apply) {
        static const char prefix[] = "security.";
        size_t off = sizeof(struct fuse_secctx_header);

        for (uint32_t i = 0; i < nr; i++) {
                struct fuse_secctx sc;
                const char *name;
                size_t nlen, start = off;

                if (size - off < sizeof sc)
                        return -EINVAL;
                memcpy(&sc, p + off, sizeof sc);
                off += sizeof sc;
                name = p + off;
                nlen = strnlen(name, MIN(size - off, (size_t) XATTR_NAME_MAX + 1));
                if (nlen == size - off || nlen > XATTR_NAME_MAX)
                        return -EINVAL; /* no NUL inside the record, or too long */
                if (nlen <= strlen(prefix) || strncmp(name, prefix, strlen(prefix)) != 0 ||
                    streq(name, "security.capability"))
                        return -EINVAL;
                off += nlen + 1;
                if (sc.size > XATTR_SIZE_MAX || sc.size > size - off)
                        return -EINVAL;
                if (apply)
                        r->labels[i] = (FsSecLabel) { .name = name, .value = p + off, .size = sc.size };
                off += sc.size;
                off = start + ALIGN_TO(off - start, 8);
                if (off > size)
                        return -EINVAL;
        }
        if (off != size)
                return -EINVAL;
        if (apply) {
                r->ctx.labels = r->labels;
                r->ctx.n_labels = nr;
        }
        return 0;
}

/* FUSE_EXT_GROUPS: struct fuse_supp_groups {nr_groups, groups[nr]} after the header, padded to 8
 * bytes exactly. At most FS_CTX_MAX_GROUPS (Linux sends one); (gid_t)-1 is no group. */
static int parse_supp_groups(Req *r, const char *p, size_t size, bool apply) {
        size_t off = sizeof(struct fuse_ext_header);
        uint32_t nr;

        if (size - off < sizeof nr)
                return -EINVAL;
        memcpy(&nr, p + off, sizeof nr);
        off += sizeof nr;
        if (nr > FS_CTX_MAX_GROUPS || size != ALIGN_TO(off + (size_t) nr * sizeof(uint32_t), 8))
                return -EINVAL;
        for (uint32_t k = 0; k < nr; k++) {
                uint32_t g;
                memcpy(&g, p + off + (size_t) k * sizeof g, sizeof g);
                if (g == UINT32_MAX)
                        return -EINVAL;
                r->groups[k] = g;
        }
        if (apply) {
                r->ctx.groups = nr > 0 ? r->groups : NULL;
                r->ctx.n_groups = nr;
        }
        return 0;
}

/* The extension block (in_header.total_extlen): records that each start with struct
 * fuse_ext_header {size including the header, type}, sizes multiples of 8 that add up to the
 * block. Types up to FUSE_MAX_NR_SECCTX are the security context, whose type field is its count;
 * FUSE_EXT_GROUPS the supplementary groups; other types are skipped. At most one of each.
 * Malformed is EINVAL, whether or not the extension is used: labels and groups reach the
 * filesystem only for creating opcodes with their feature negotiated. */
static int parse_extensions(Req *r, const OpDesc *d) {
        const char *p = r->ext;
        size_t left = r->extlen;
        bool secctx = false, groups = false;
        int k;

        while (left > 0) {
                struct fuse_ext_header h;

                if (left < sizeof h)
                        return -EINVAL;
                memcpy(&h, p, sizeof h);
                if (h.size < sizeof h || h.size % 8 != 0 || h.size > left) {
                        log_guest("FUSE %s: malformed request extension (size %u of %zu)", d->name, h.size, left);
                        return -EINVAL;
                }
                if (h.type <= FUSE_MAX_NR_SECCTX) {
                        if (secctx)
                                return -EINVAL; /* one security context per request */
                        secctx = true;
                        k = parse_secctx(r, p, h.size, h.type,
                                         (d->flags & OP_SECCTX) && negotiated(r, FUSE_SECURITY_CTX));
                        if (k < 0) {
                                log_guest("FUSE %s: malformed security context", d->name);
                                return k;
                        }
                } else if (h.type == FUSE_EXT_GROUPS) {
                        if (groups)
                                return -EINVAL;
                        groups = true;
                        k = parse_supp_groups(r, p, h.size,
                                              (d->flags & OP_SECCTX) && negotiated(r, FUSE_CREATE_SUPP_GROUP));
                        if (k < 0) {
                                log_guest("FUSE %s: malformed supplementary groups", d->name);
                                return k;
                        }
                }
                p += h.size;
                left -= h.size;
        }
        return 0;
}

/* ---- the entry point ---- */

static const OpDesc *op_lookup(uint32_t opcode) {
        if (opcode >= ELEMENTSOF(op_table) || !op_table[opcode].fn)
                return NULL;
        return &op_table[opcode];
}

/* Reads the request's argument block into buf (8-aligned, so the fixed structs can be used in
 * place): guest memory can change under us, so nothing is parsed where the guest can see it. */
static int copy_args(ChainIter *in, size_t len, uint64_t *stackbuf, size_t stackbuf_size, char **heap,
                     const char **ret) {
        char *p = (char *) stackbuf;

        if (len > stackbuf_size) {
                *heap = malloc(len);
                if (!*heap)
                        return -ENOMEM;
                p = *heap;
        }
        if (chain_read(in, p, len) < 0)
                return -EINVAL;
        *ret = p;
        return 0;
}

uint32_t fuse_server_process(FuseServer *s, ChainIter *in, ChainIter *out, FuseReqInfo *info) {
        struct fuse_in_header h;
        size_t total = chain_left(in);

        if (chain_read(in, &h, sizeof h) < 0) {
                /* Not even a header: nothing to answer to. */
                log_guest("FUSE request of %zu bytes is shorter than its header", total);
                if (info)
                        *info = (FuseReqInfo){ .error = -EBADMSG };
                return 0;
        }
        return fuse_server_process_header(s, &h, in, out, true, info);
}

uint32_t fuse_server_process_header(FuseServer *s, const struct fuse_in_header *h, ChainIter *in, ChainIter *out,
                                    bool may_wait, FuseReqInfo *info) {
        uint64_t argbuf[(2 * PATH_MAX + 64) / sizeof(uint64_t)];
        _cleanup_free_ char *heap = NULL;
        FuseReqInfo dummy;
        const OpDesc *d = NULL;
        ChainIter hdr, data;
        bool can_reply;
        size_t total, extlen;
        Req r;
        int err = 0;

        memset(&r, 0, offsetof(Req, labels)); /* everything but the labels and groups (see Req) */
        r.s = s;
        r.may_wait = may_wait;

        if (!info)
                info = &dummy;
        *info = (FuseReqInfo) { 0 };
        r.info = info;

        /* The caller's copy of the header, never guest memory read again: what the request is was
         * decided (by the executor too) from these bytes, so a guest rewriting its header meanwhile
         * changes nothing. */
        r.in = *h;
        total = sizeof r.in + chain_left(in);
        info->opcode = r.in.opcode;
        d = op_lookup(r.in.opcode);
        can_reply = chain_split(out, sizeof(struct fuse_out_header), &hdr) >= 0;
        r.out = out;

        if (r.in.len != total || r.in.len < sizeof r.in) {
                log_guest("FUSE request opcode %u: declared length %u, %zu bytes sent", r.in.opcode, r.in.len, total);
                err = -EINVAL;
                goto reply;
        }
        extlen = (size_t) r.in.total_extlen * 8;
        if (extlen > total - sizeof r.in) {
                err = -EINVAL;
                goto reply;
        }
        r.arglen = total - sizeof r.in - extlen;
        if (!d) {
                err = -ENOSYS;
                goto reply;
        }
        if (!(d->flags & OP_BEFORE_INIT) && !atomic_load(&s->initialized)) {
                err = -EIO;
                goto reply;
        }
        if (r.arglen < d->in_size) {
                log_guest("FUSE %s: %zu argument bytes, need %u", d->name, r.arglen, d->in_size);
                err = -EINVAL;
                goto reply;
        }
        if (d->flags & OP_DATA) {
                size_t datalen = r.arglen - d->in_size;
                err = copy_args(in, d->in_size, argbuf, sizeof argbuf, &heap, &r.arg);
                r.arglen = d->in_size;
                /* What follows the fixed arguments (up to the extensions) is the data. */
                if (err >= 0 && chain_split(in, datalen, &data) < 0)
                        err = -EINVAL;
                r.data = &data;
        } else if (r.arglen > FUSE_ARGS_MAX || extlen > FUSE_EXT_MAX)
                err = -E2BIG;
        else {
                /* The extensions follow the arguments: one copy holds both. */
                err = copy_args(in, r.arglen + extlen, argbuf, sizeof argbuf, &heap, &r.arg);
                r.ext = r.arg + r.arglen;
                r.extlen = extlen;
        }
        if (err < 0)
                goto reply;
        if (!(d->flags & OP_NO_REPLY) && chain_left(out) < d->out_size) {
                /* Checked before acting, so a node or handle is never created for a lost reply. */
                err = -E2BIG;
                goto reply;
        }
        if (s->opts.readonly && (d->flags & OP_MODIFIES)) {
                err = -EROFS;
                goto reply;
        }
        r.ctx = (FsCtx) { .uid = r.in.uid, .gid = r.in.gid, .pid = r.in.pid, .unique = r.in.unique };
        err = parse_extensions(&r, d);
        if (err < 0)
                goto reply;
        err = d->fn(&r);

reply:
        if (err < -511 || err > 0)
                err = -EIO; /* the guest only understands errno values */
        info->error = err;
        if ((d && (d->flags & OP_NO_REPLY) && r.in.len == total) || !can_reply)
                return 0;
        {
                struct fuse_out_header oh = {
                        .len = (uint32_t) (sizeof oh + (err < 0 ? 0 : r.out_len)),
                        .error = err,
                        .unique = r.in.unique,
                };
                if (chain_write(&hdr, &oh, sizeof oh) < 0)
                        return 0;
                info->replied = true;
                return oh.len;
        }
}

/* ---- lifecycle ---- */

int fuse_server_new(FuseServer **ret, const FsOptions *opts, const FsOps *ops, void *fs) {
        FuseServer *s;

        if (opts->cache < 0 || opts->cache >= _CACHE_MAX || !ops)
                return -EINVAL;
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->session_lock, NULL);
        pthread_mutex_init(&s->waiters_lock, NULL);
        s->waiters = g_hash_table_new(g_int64_hash, g_int64_equal);
        s->opts = *opts;
        s->opts.shared_dir = NULL; /* the filesystem's business, and not ours to keep pointing at */
        atomic_store(&s->cache, opts->cache);
        s->ops = ops;
        s->fs = fs;
        *ret = s;
        return 0;
}

FuseServer *fuse_server_free(FuseServer *s) {
        if (!s)
                return NULL;
        if (s->waiters)
                g_hash_table_destroy(s->waiters);
        pthread_mutex_destroy(&s->waiters_lock);
        pthread_mutex_destroy(&s->session_lock);
        free(s);
        return NULL;
}

void fuse_server_reset(FuseServer *s) {
        pthread_mutex_lock(&s->session_lock);
        atomic_store(&s->initialized, false);
        atomic_store(&s->flags, 0);
        session_reset(s, false);
        pthread_mutex_unlock(&s->session_lock);
}

unsigned fuse_server_lock_waiters(FuseServer *s) {
        unsigned n;

        pthread_mutex_lock(&s->waiters_lock);
        n = g_hash_table_size(s->waiters);
        pthread_mutex_unlock(&s->waiters_lock);
        return n;
}

void fuse_server_cancel_waits(FuseServer *s) {
        GHashTableIter it;
        gpointer k, v;

        pthread_mutex_lock(&s->waiters_lock);
        g_hash_table_iter_init(&it, s->waiters);
        while (g_hash_table_iter_next(&it, &k, &v))
                atomic_store(&((Waiter *) v)->interrupted, true);
        pthread_mutex_unlock(&s->waiters_lock);
}

int fuse_server_set_cache_policy(FuseServer *s, CachePolicy p) {
        if (p < 0 || p >= _CACHE_MAX)
                return -EINVAL;
        atomic_store(&s->cache, p);
        return 0;
}

CachePolicy fuse_server_get_cache_policy(FuseServer *s) {
        return policy(s);
}

bool fuse_server_header_may_block(const struct fuse_in_header *h) {
        return h->opcode == FUSE_SETLKW;
}

bool fuse_server_request_may_block(const ChainIter *in) {
        ChainIter copy = *in;
        struct fuse_in_header h;

        if (chain_read(&copy, &h, sizeof h) < 0)
                return false;
        return fuse_server_header_may_block(&h);
}
