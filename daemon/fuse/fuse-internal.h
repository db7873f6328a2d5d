/* fuse-internal.h: what the FUSE server's files share: the server, a request, an opcode's entry, the helpers. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* util.h before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the reverse. */
#include "util.h"
#include <glib.h>
#include <linux/fuse.h>

#include "fs-ops.h"
#include "fuse-server.h"

#define FUSE_MAX_WRITE (1024 * 1024)
#define FUSE_MAX_IOV 1024

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

/* A blocking request the guest may cancel with INTERRUPT. */
typedef struct Waiter {
        uint64_t unique;
        _Atomic bool interrupted;
} Waiter;

/* Blocking requests announced by fuse_server_lock_wait_queued() and not yet started: unique, how
 * many with it (a guest may reuse one; each announcement is ended by its request), and whether an
 * INTERRUPT (or a cancel) came for them meanwhile. At most one per request in flight, which the
 * device bounds (docs/security.md, "Bounds"). */
typedef struct QueuedWait {
        uint64_t unique;
        unsigned count;
        bool interrupted;
} QueuedWait;

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

        /* Guards the waiter and queued tables: an insert, remove or lookup per blocking
         * request/INTERRUPT. One lock for both, so a request moves from queued to waiting with no
         * moment in which an INTERRUPT finds it in neither. */
        pthread_mutex_t waiters_lock;
        GHashTable *waiters; /* uint64_t* unique -> Waiter*, key and value in the same frame */
        GHashTable *queued;  /* uint64_t* unique -> QueuedWait* (owned, key inside it) */
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
        bool announced; /* a SETLKW whose fuse_server_lock_wait_queued() is not yet ended */
        /* Answered from the host call a serving process that died made (fuse_server_replay()):
         * REPLAY_DONE, the operations take replay_result instead of calling the host again;
         * REPLAY_STARTED, it died in the call (replay_result: whether the name existed before),
         * the name tells whether it happened. 0: a request as ever. */
        int replay;
        int64_t replay_result;
        unsigned n_label_names; /* label_names[] entries to free when the request ends */
        /* Last and not zeroed per request (744 bytes of labels, a fifth of a getattr's
         * instructions when they were, and 128 of groups): only the ctx.n_labels and ctx.n_groups
         * entries parse_secctx() and parse_supp_groups() wrote are ever read. */
        FsSecLabel labels[FUSE_MAX_NR_SECCTX];
        char *label_names[FUSE_MAX_NR_SECCTX]; /* --xattrmap's host names of the labels (malloc'd) */
        gid_t groups[FS_CTX_MAX_GROUPS]; /* FUSE_EXT_GROUPS, decoded */
} Req;

enum { REPLAY_DONE = 1, REPLAY_STARTED = 2 };

/* What a request a process that died had started (Req.replay) answers, or RUN_IT when its host
 * call did not happen. */
#define RUN_IT 1

/* The recorded result of a call that returns 0 or an errno. Clamped: never a positive count here. */
static inline int replayed_error(Req *r) {
        return r->replay_result < -4095 || r->replay_result > 0 ? -EIO : (int) r->replay_result;
}

/* OPEN and OPENDIR record the fh they issued (or their error). Answered again: the recorded error;
 * the recorded fh when this process holds it (taken over with the session); else RUN_IT, so that
 * the guest never gets a second open file while the first stays with nobody to release it. */
static inline int replayed_open(Req *r, bool dir, uint64_t *fh) {
        if (r->replay != REPLAY_DONE)
                return RUN_IT;
        if (r->replay_result <= 0)
                return r->replay_result == 0 ? RUN_IT : replayed_error(r);
        if (!r->s->ops->handle_kept || r->s->ops->handle_kept(r->s->fs, r->in.nodeid, (uint64_t) r->replay_result, dir) < 0)
                return RUN_IT;
        *fh = (uint64_t) r->replay_result;
        return 0;
}

enum {
        OP_NO_REPLY = 1 << 0,  /* FORGET, BATCH_FORGET, INTERRUPT */
        OP_MODIFIES = 1 << 1,  /* EROFS with the readonly option */
        OP_DATA = 1 << 2,      /* only in_size bytes are arguments; the rest is data (WRITE) */
        OP_BEFORE_INIT = 1 << 3,
        OP_SECCTX = 1 << 4,    /* creates an inode: takes the security context extension */
        OP_XATTR = 1 << 5,     /* an xattr opcode: ENOSYS without the xattr option */
};

typedef struct OpDesc {
        const char *name;
        int (*fn)(Req *r);
        uint32_t in_size;  /* fixed argument bytes (minimum) */
        uint32_t out_size; /* fixed reply payload bytes, checked against the space before acting */
        unsigned flags;
} OpDesc;

/* The argument block is a private, 8-aligned copy (copy_args), at least in_size bytes long: its
 * fixed struct can be used in place. */
#define ARG(r, type) ((const type *) (r)->arg)

static inline bool negotiated(Req *r, uint64_t flag) {
        return (atomic_load(&r->s->flags) & flag) != 0;
}

static inline CachePolicy policy(FuseServer *s) {
        return (CachePolicy) atomic_load(&s->cache);
}

/* ---- fuse-server.c: names out of the argument block ---- */

int take_name(const char **p, size_t *left, const char **ret, bool allow_dots);
int single_name(Req *r, size_t skip, const char **ret, bool allow_dots);

/* ---- fuse-extensions.c: the request extensions (security context, supplementary groups) ---- */

int parse_extensions(Req *r, const OpDesc *d);

/* ---- fuse-reply.c: attribute and entry encoding, the reply payload ---- */

void entry_out_fill(FuseServer *s, struct fuse_entry_out *o, const FsEntry *e);
int reply_data(Req *r, const void *p, size_t n);
int reply_entry(Req *r, const FsEntry *e);
int reply_attr(Req *r, const struct stat *st);

/* ---- the opcode handlers, by family (the op table in fuse-server.c points at them) ---- */

/* fuse-ops-entries.c: names and attributes */
int do_lookup(Req *r);
int do_forget(Req *r);
int do_batch_forget(Req *r);
int do_getattr(Req *r);
int do_setattr(Req *r);
int do_readlink(Req *r);
int do_symlink(Req *r);
int do_mknod(Req *r);
int do_mkdir(Req *r);
int do_unlink(Req *r);
int do_rmdir(Req *r);
int do_rename(Req *r);
int do_rename2(Req *r);
int do_link(Req *r);
int do_statfs(Req *r);
int do_access(Req *r);

/* fuse-ops-io.c: open files */
int do_open(Req *r);
int do_create(Req *r);
int do_tmpfile(Req *r);
int do_read(Req *r);
int do_write(Req *r);
int do_release(Req *r);
int do_fsync(Req *r);
int do_flush(Req *r);
int do_fallocate(Req *r);
int do_lseek(Req *r);
int do_copy_file_range(Req *r);
int do_syncfs(Req *r);

/* fuse-ops-dir.c: directories */
int do_opendir(Req *r);
int do_readdir(Req *r);
int do_readdirplus(Req *r);
int do_releasedir(Req *r);
int do_fsyncdir(Req *r);

/* fuse-ops-xattr.c: extended attributes */
int host_xattr_name(Req *r, const char *name, char **ret);
int do_setxattr(Req *r);
int do_getxattr(Req *r);
int do_listxattr(Req *r);
int do_removexattr(Req *r);

/* fuse-ops-locks.c: locks, their waiters and INTERRUPT */
void interrupt_all_waits(FuseServer *s);
bool queued_wait_end_locked(FuseServer *s, uint64_t unique);
int do_getlk(Req *r);
int do_setlk(Req *r);
int do_setlkw(Req *r);
int do_interrupt(Req *r);
