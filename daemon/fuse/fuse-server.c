/* fuse-server.c: the FUSE session and entry point: framing, argument copies, the op table, dispatch. */
#include "fuse-server.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/limits.h>
#include <stdlib.h>
#include <string.h>

#include "fs-names.h"
#include "fuse-internal.h"
#include "log.h"

#define FUSE_SERVER_MINOR 38      /* the protocol minor we implement (Debian 12's linux/fuse.h) */
#define FUSE_SERVER_MIN_MINOR 31  /* older guests are refused, as the C virtiofsd does */
#define FUSE_MAX_PAGES_REPLY 256
/* Largest argument block of any opcode but WRITE: SETXATTR with its extended header, a name and a
 * value of XATTR_SIZE_MAX; RENAME/SYMLINK need two names of at most PATH_MAX. */
#define FUSE_ARGS_MAX (sizeof(struct fuse_setxattr_in) + XATTR_NAME_MAX + 1 + XATTR_SIZE_MAX)
/* Largest request extension block accepted: one security context with a name of XATTR_NAME_MAX and
 * a value of XATTR_SIZE_MAX, plus room for small extensions (supplementary groups). */
#define FUSE_EXT_MAX (XATTR_SIZE_MAX + XATTR_NAME_MAX + 1 + 4096)

/* The guest addresses the root as FUSE_ROOT_ID; the filesystem issues it as FS_ROOT_ID. */
_Static_assert(FS_ROOT_ID == FUSE_ROOT_ID, "the interface's root id is FUSE's");

/* Kernel 6.6 (FUSE 7.39); older headers do not have it yet. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

/* ---- names out of the argument block ---- */

/* Takes the next name out of the argument block, validated at the one choke point. */
int take_name(const char **p, size_t *left, const char **ret, bool allow_dots) {
        size_t len;
        int k = fs_string_take(p, left, ret, &len);
        if (k < 0)
                return k;
        return fs_name_validate(*ret, len, allow_dots);
}

/* The whole remaining argument block is exactly one name. */
int single_name(Req *r, size_t skip, const char **ret, bool allow_dots) {
        const char *p = r->arg + skip;
        size_t left = r->arglen - skip;
        return take_name(&p, &left, ret, allow_dots);
}

/* ---- the session: INIT, DESTROY, reset ---- */

static void session_reset(FuseServer *s, bool writeback) {
        interrupt_all_waits(s); /* blocking waits of the old session */
        s->ops->session_reset(s->fs, writeback);
}

/* The INIT flags this server negotiates when the guest offers them, from its options. */
static uint64_t wanted_flags(FuseServer *s) {
        /* FUSE_CREATE_SUPP_GROUP: creating operations run with the caller's group of the parent
         * directory too (setgid directories, group-writable directories of a secondary group). */
        uint64_t want = FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC | FUSE_EXPORT_SUPPORT | FUSE_BIG_WRITES |
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
        return want;
}

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

        want = wanted_flags(s);
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

/* ---- the op table ---- */

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
        E(FUSE_SETXATTR, do_setxattr, FUSE_COMPAT_SETXATTR_IN_SIZE, 0, OP_MODIFIES | OP_XATTR),
        E(FUSE_GETXATTR, do_getxattr, sizeof(struct fuse_getxattr_in), 0, OP_XATTR),
        E(FUSE_LISTXATTR, do_listxattr, sizeof(struct fuse_getxattr_in), 0, OP_XATTR),
        E(FUSE_REMOVEXATTR, do_removexattr, 0, 0, OP_MODIFIES | OP_XATTR),
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

static uint32_t process_header(FuseServer *s, const struct fuse_in_header *h, ChainIter *in, ChainIter *out,
                               bool may_wait, int replay, int64_t result, FuseReqInfo *info);

uint32_t fuse_server_process_header(FuseServer *s, const struct fuse_in_header *h, ChainIter *in, ChainIter *out,
                                    bool may_wait, FuseReqInfo *info) {
        return process_header(s, h, in, out, may_wait, 0, 0, info);
}

uint32_t fuse_server_replay(FuseServer *s, const struct fuse_in_header *h, ChainIter *in, ChainIter *out,
                            bool started, int64_t result, FuseReqInfo *info) {
        return process_header(s, h, in, out, false, started ? REPLAY_STARTED : REPLAY_DONE, result, info);
}

/* replay: 0, or how fuse_server_replay() answers (Req.replay). */
static uint32_t process_header(FuseServer *s, const struct fuse_in_header *h, ChainIter *in, ChainIter *out,
                               bool may_wait, int replay, int64_t result, FuseReqInfo *info) {
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
        r.replay = replay;
        r.replay_result = result;

        if (!info)
                info = &dummy;
        *info = (FuseReqInfo) { 0 };
        r.info = info;

        /* The caller's copy of the header, never guest memory read again: what the request is was
         * decided (by the executor too) from these bytes, so a guest rewriting its header meanwhile
         * changes nothing. */
        r.in = *h;
        r.announced = r.in.opcode == FUSE_SETLKW; /* ended below if setlk_common() does not */
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
        if ((d->flags & OP_XATTR) && !s->opts.xattr) {
                err = -ENOSYS;
                goto reply;
        }
        err = d->fn(&r);

reply:
        for (unsigned k = 0; k < r.n_label_names; k++)
                free(r.label_names[k]);
        if (r.announced) { /* a SETLKW that never came to wait: its announcement ends here */
                pthread_mutex_lock(&s->waiters_lock);
                (void) queued_wait_end_locked(s, r.in.unique);
                pthread_mutex_unlock(&s->waiters_lock);
        }
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
        s->queued = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, free);
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
        if (s->queued)
                g_hash_table_destroy(s->queued);
        pthread_mutex_destroy(&s->waiters_lock);
        pthread_mutex_destroy(&s->session_lock);
        free(s);
        return NULL;
}

bool fuse_server_get_session(FuseServer *s, uint64_t *ret_flags) {
        bool init;

        pthread_mutex_lock(&s->session_lock);
        init = atomic_load(&s->initialized);
        *ret_flags = init ? atomic_load(&s->flags) : 0;
        pthread_mutex_unlock(&s->session_lock);
        return init;
}

int fuse_server_resume_session(FuseServer *s, uint64_t flags) {
        uint64_t want = wanted_flags(s);

        if (flags & ~want)
                return -EINVAL;
        pthread_mutex_lock(&s->session_lock);
        session_reset(s, (flags & FUSE_WRITEBACK_CACHE) != 0);
        atomic_store(&s->flags, flags);
        atomic_store(&s->initialized, true);
        pthread_mutex_unlock(&s->session_lock);
        return 0;
}

void fuse_server_reset(FuseServer *s) {
        pthread_mutex_lock(&s->session_lock);
        atomic_store(&s->initialized, false);
        atomic_store(&s->flags, 0);
        session_reset(s, false);
        pthread_mutex_unlock(&s->session_lock);
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
