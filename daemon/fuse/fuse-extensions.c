/* fuse-extensions.c: the request extensions: security context labels and supplementary groups. */
#include <errno.h>
#include <linux/limits.h>
#include <string.h>

#include "fuse-internal.h"
#include "log.h"

/* One security context header (struct fuse_secctx_header, its size covering the whole record)
 * followed by nr entries, each struct fuse_secctx {value size}, the xattr name with its NUL and the
 * value, padded to 8 bytes together. Everything must add up exactly; names must be security.*
 * (what an LSM labels with) but not security.capability, values at most XATTR_SIZE_MAX. When
 * applied, each name goes through --xattrmap as SETXATTR's does (the one place guest xattr names
 * are mapped, host_xattr_name()): stored under the map's host name, or the request refused with
 * the map's EPERM/ENOTSUP before anything is created (issue 31). */
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
                if (apply) {
                        char *host;
                        int k = host_xattr_name(r, name, &host);

                        if (k < 0)
                                return k;
                        if (host)
                                r->label_names[r->n_label_names++] = host;
                        r->labels[i] = (FsSecLabel) { .name = host ?: name, .value = p + off, .size = sc.size };
                }
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
int parse_extensions(Req *r, const OpDesc *d) {
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
                        if (k == -EINVAL)
                                log_guest("FUSE %s: malformed security context", d->name);
                        if (k < 0)
                                return k;
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
