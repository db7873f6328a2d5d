/* fuse-ops-xattr.c: the opcodes of extended attributes (set, get, list, remove) and their --xattrmap names. */
#include <errno.h>
#include <linux/limits.h>
#include <stdlib.h>

#include "fs-names.h"
#include "fuse-internal.h"
#include "request-progress.h"
#include "xattr-map.h"

/* --xattrmap: the host name for the guest's (malloc'd in *ret, NULL without a map). */
int host_xattr_name(Req *r, const char *name, char **ret) {
        *ret = NULL;
        if (!r->s->opts.xattrmap)
                return 0;
        return xattr_map_to_host(r->s->opts.xattrmap, name, ret);
}

/* Takes the next xattr name out of the argument block, validated. */
static int take_xattr_name(const char **p, size_t *left, const char **ret) {
        size_t nlen;
        int k = fs_string_take(p, left, ret, &nlen);
        if (k < 0)
                return k;
        return fs_xattr_name_validate(*ret, nlen);
}

/* The xattr opcodes answer ENOSYS without the xattr option (OP_XATTR in the op table). */
int do_setxattr(Req *r) {
        size_t hdr = negotiated(r, FUSE_SETXATTR_EXT) ? sizeof(struct fuse_setxattr_in) : FUSE_COMPAT_SETXATTR_IN_SIZE;
        const struct fuse_setxattr_in *x = ARG(r, struct fuse_setxattr_in);
        const char *p, *name;
        size_t left;
        int k;

        if (r->arglen < hdr)
                return -EINVAL;
        p = r->arg + hdr;
        left = r->arglen - hdr;
        k = take_xattr_name(&p, &left, &name);
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
        /* Done by a process that died before its reply: that result (run again, an XATTR_CREATE
         * would answer EEXIST to its own attribute). */
        if (r->replay == REPLAY_DONE)
                return replayed_error(r);
        k = r->s->ops->setxattr(r->s->fs, &r->ctx, r->in.nodeid, mapped ?: name, p, x->size, (int) x->flags,
                                hdr == sizeof *x && (x->setxattr_flags & FUSE_SETXATTR_ACL_KILL_SGID));
        request_progress_host_done(k);
        return k;
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

int do_getxattr(Req *r) {
        const char *p = r->arg + sizeof(struct fuse_getxattr_in), *name;
        size_t left = r->arglen - sizeof(struct fuse_getxattr_in);
        int k;

        k = take_xattr_name(&p, &left, &name);
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

int do_listxattr(Req *r) {
        return xattr_reply(r, ARG(r, struct fuse_getxattr_in)->size, listxattr_cb);
}

int do_removexattr(Req *r) {
        const char *p = r->arg, *name;
        size_t left = r->arglen;
        int k;

        k = take_xattr_name(&p, &left, &name);
        if (k < 0)
                return k;
        _cleanup_free_ char *mapped = NULL;
        k = host_xattr_name(r, name, &mapped);
        if (k < 0)
                return k;
        /* As SETXATTR's: run again it would answer ENODATA for its own removal. */
        if (r->replay == REPLAY_DONE)
                return replayed_error(r);
        k = r->s->ops->removexattr(r->s->fs, &r->ctx, r->in.nodeid, mapped ?: name);
        request_progress_host_done(k);
        return k;
}
