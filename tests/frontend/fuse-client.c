/* fuse-client.c: builds FUSE requests in guest memory, cuts them into descriptor chains, checks replies. */
#include "fuse-client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define POISON_READ 0xa5
#define POISON_WRITE 0x5a
#define POISON_GAP 0xc3
#define GAP 16u

_printf_(3, 4) static int req_problem(FeFuse *c, FeFuseReq *req, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(req->problem, sizeof(req->problem), fmt, ap);
        va_end(ap);
        snprintf(c->last_problem, sizeof(c->last_problem), "opcode %u unique %" PRIu64 ": %s", req->opcode,
                 req->unique, req->problem);
        req->status = -EPROTO;
        c->proto_errors++;
        return -EPROTO;
}

int fe_fuse_new(FeFuse **ret, Frontend *fe) {
        FeFuse *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (FeFuse) {
                .fe = fe,
                .queue = 1,
                .hiprio_queue = 0,
                .split = FE_SPLIT_NATURAL,
                .seed = 1,
                .indirect = true,
                .next_unique = 2,
        };
        *ret = c;
        return 0;
}

FeFuse *fe_fuse_free(FeFuse *c) {
        free(c);
        return NULL;
}

/* ---- building ---- */

static int in_reserve(FeFuseReq *req, size_t more) {
        if (req->in_len + more > req->in_cap) {
                size_t cap = MAX(req->in_cap * 2, req->in_len + more);
                uint8_t *p = realloc(req->in, cap);
                if (!p)
                        return -ENOMEM;
                req->in = p;
                req->in_cap = cap;
        }
        return 0;
}

static void add_cut(FeFuseReq *req, size_t at) {
        if (req->n_in_cuts < FE_FUSE_MAX_CUTS && at > 0 &&
            (req->n_in_cuts == 0 || req->in_cuts[req->n_in_cuts - 1] < at))
                req->in_cuts[req->n_in_cuts++] = at;
}

int fe_fuse_req_new(FeFuseReq **ret, FeFuse *c, uint32_t opcode, uint64_t nodeid, size_t out_payload) {
        FeFuseReq *req = calloc(1, sizeof(*req));
        struct fuse_in_header h = {
                .opcode = opcode,
                .unique = __atomic_fetch_add(&c->next_unique, 2, __ATOMIC_RELAXED),
                .nodeid = nodeid,
                .uid = c->uid,
                .gid = c->gid,
                .pid = c->pid,
        };

        if (!req)
                return -ENOMEM;
        req->opcode = opcode;
        req->unique = h.unique;
        req->out_cap = sizeof(struct fuse_out_header) + out_payload;
        if (fe_fuse_req_add(req, &h, sizeof(h)) < 0) {
                free(req);
                return -ENOMEM;
        }
        *ret = req;
        return 0;
}

int fe_fuse_req_add(FeFuseReq *req, const void *data, size_t len) {
        if (in_reserve(req, len) < 0)
                return -ENOMEM;
        memcpy(req->in + req->in_len, data, len);
        req->in_len += len;
        add_cut(req, req->in_len);
        return 0;
}

int fe_fuse_req_add_str(FeFuseReq *req, const char *s) {
        return fe_fuse_req_add(req, s, strlen(s) + 1);
}

int fe_fuse_req_add_data(FeFuseReq *req, const void *data, size_t len) {
        size_t start = req->in_len;
        if (in_reserve(req, len) < 0)
                return -ENOMEM;
        memcpy(req->in + req->in_len, data, len);
        req->in_len += len;
        for (size_t off = 4096; off < len; off += 4096)
                add_cut(req, start + off);
        add_cut(req, req->in_len);
        return 0;
}

static void release_pieces(FeFuse *c, FeFuseReq *req) {
        for (unsigned i = 0; i < req->n_pieces; i++)
                fe_mem_release(c->fe->mem, req->pieces[i].gpa, req->pieces[i].alloc);
        req->n_pieces = 0;
}

FeFuseReq *fe_fuse_req_free(FeFuse *c, FeFuseReq *req) {
        if (!req)
                return NULL;
        release_pieces(c, req);
        free(req->in);
        free(req->out);
        free(req);
        return NULL;
}

void fe_fuse_req_abandon(FeFuse *c, FeFuseReq *req) {
        release_pieces(c, req);
}

/* ---- cutting ---- */

static int cmp_size(const void *a, const void *b) {
        size_t x = *(const size_t *) a, y = *(const size_t *) b;
        return x < y ? -1 : x > y;
}

/* Piece end offsets for one side of len bytes; natural = the builder's cut points (sorted, last = len). */
static unsigned plan(FeFuse *c, size_t len, const size_t *natural, unsigned n_natural, size_t *ends,
                     unsigned max) {
        unsigned n = 0;

        if (len == 0)
                return 0;
        switch (c->split) {
        case FE_SPLIT_SINGLE:
                ends[n++] = len;
                break;
        case FE_SPLIT_RANDOM: {
                unsigned k = 1 + (unsigned) rand_r(&c->seed) % 6;
                for (unsigned i = 0; i < k && n + 1 < max; i++)
                        ends[n++] = 1 + (size_t) rand_r(&c->seed) % len;
                /* Keep huge bodies in pages so a chain stays within the table. */
                for (size_t off = 65536; off < len && n + 1 < max; off += 65536)
                        ends[n++] = off;
                ends[n++] = len;
                break;
        }
        case FE_SPLIT_TINY:
                for (size_t off = 1 + (size_t) rand_r(&c->seed) % 8; off < MIN(len, (size_t) 256) && n + 1 < max;
                     off += 1 + (size_t) rand_r(&c->seed) % 8)
                        ends[n++] = off;
                for (size_t off = 4096; off < len && n + 1 < max; off += 4096)
                        ends[n++] = off;
                ends[n++] = len;
                break;
        case FE_SPLIT_NATURAL:
        default:
                for (unsigned i = 0; i < n_natural && n + 1 < max; i++)
                        if (natural[i] < len)
                                ends[n++] = natural[i];
                ends[n++] = len;
                break;
        }
        qsort(ends, n, sizeof(size_t), cmp_size);
        /* Drop duplicates: zero-length descriptors are a hostile case, never a side effect. */
        unsigned m = 0;
        for (unsigned i = 0; i < n; i++)
                if (m == 0 || ends[i] != ends[m - 1])
                        ends[m++] = ends[i];
        return m;
}

static int add_piece(FeFuse *c, FeFuseReq *req, const uint8_t *src, size_t len, bool write) {
        FeMem *mem = c->fe->mem;
        FeFusePiece *p;
        int region = -1;

        if (req->n_pieces >= FE_FUSE_MAX_PIECES)
                return -E2BIG;
        p = &req->pieces[req->n_pieces];
        p->len = len;
        p->alloc = len + GAP;
        p->write = write;
        if (c->mix_regions && mem->n_regions > 1)
                region = (int) (req->n_pieces % mem->n_regions);
        p->host = fe_mem_alloc(mem, p->alloc, region, &p->gpa);
        if (!p->host && region >= 0)
                p->host = fe_mem_alloc(mem, p->alloc, -1, &p->gpa);
        if (!p->host)
                return -ENOMEM;
        if (write)
                memset(p->host, POISON_WRITE, len);
        else
                memcpy(p->host, src, len);
        memset((uint8_t *) p->host + len, POISON_GAP, GAP);
        req->n_pieces++;
        return 0;
}

int fe_fuse_submit(FeFuse *c, FeFuseReq *req, int queue_override) {
        size_t ends[FE_FUSE_MAX_PIECES], out_natural[3];
        FeSeg segs[FE_FUSE_MAX_PIECES];
        unsigned n, n_out_natural = 0;
        size_t prev;
        FeVring *vr;
        int r;

        req->queue = queue_override >= 0 ? (unsigned) queue_override : req->no_reply ? c->hiprio_queue : c->queue;
        if (req->queue >= FE_MAX_QUEUES || !(vr = c->fe->vq[req->queue]))
                return -EINVAL;
        if (!req->keep_len)
                fe_fuse_req_hdr(req)->len = (uint32_t) req->in_len;
        req->done = false;
        req->status = 0;
        release_pieces(c, req);

        n = plan(c, req->in_len, req->in_cuts, req->n_in_cuts, ends, FE_FUSE_MAX_PIECES / 2);
        prev = 0;
        for (unsigned i = 0; i < n; i++) {
                r = add_piece(c, req, req->in + prev, ends[i] - prev, false);
                if (r < 0)
                        goto fail;
                prev = ends[i];
        }
        if (req->out_cap > 0) {
                out_natural[n_out_natural++] = sizeof(struct fuse_out_header);
                n = plan(c, req->out_cap, out_natural, n_out_natural, ends, FE_FUSE_MAX_PIECES / 2);
                /* Natural replies: Linux cuts page-sized bodies into pages too. */
                if (c->split == FE_SPLIT_NATURAL && req->out_cap > 16 + 4096) {
                        n = 0;
                        ends[n++] = 16;
                        for (size_t off = 16 + 4096; off < req->out_cap && n + 1 < FE_FUSE_MAX_PIECES / 2;
                             off += 4096)
                                ends[n++] = off;
                        ends[n++] = req->out_cap;
                }
                prev = 0;
                for (unsigned i = 0; i < n; i++) {
                        r = add_piece(c, req, NULL, ends[i] - prev, true);
                        if (r < 0)
                                goto fail;
                        prev = ends[i];
                }
        }
        for (unsigned i = 0; i < req->n_pieces; i++)
                segs[i] = (FeSeg) { .gpa = req->pieces[i].gpa, .len = (uint32_t) req->pieces[i].len,
                                    .write = req->pieces[i].write };
        r = fe_vring_add(vr, segs, req->n_pieces,
                         c->indirect && req->n_pieces > 1 && fe_has_feature(c->fe, VIRTIO_RING_F_INDIRECT_DESC), req,
                         &req->head);
        if (r < 0)
                goto fail;
        fe_vring_publish(vr);
        if (fe_vring_kick_needed(vr) || c->kick_always)
                return fe_vring_kick(vr);
        return 0;
fail:
        release_pieces(c, req);
        return r;
}

/* ---- completion ---- */

static void complete(FeFuse *c, FeFuseReq *req, uint32_t used_len) {
        size_t off = 0;

        req->done = true;
        req->used_len = used_len;
        free(req->out);
        req->out = calloc(1, MAX(req->out_cap, (size_t) 1));
        req->payload = NULL;
        req->payload_len = 0;
        memset(&req->oh, 0, sizeof(req->oh));

        for (unsigned i = 0; i < req->n_pieces; i++) {
                FeFusePiece *p = &req->pieces[i];
                const uint8_t *gap = (const uint8_t *) p->host + p->len;

                for (unsigned k = 0; k < GAP; k++)
                        if (gap[k] != POISON_GAP) {
                                req_problem(c, req, "backend wrote past descriptor %u (gpa 0x%" PRIx64 " len %zu)", i,
                                            p->gpa, p->len);
                                break;
                        }
                if (p->write) {
                        if (req->out)
                                memcpy(req->out + off, p->host, p->len);
                        off += p->len;
                }
        }
        /* Readable descriptors must come back untouched. */
        {
                size_t in_off = 0;
                for (unsigned i = 0; i < req->n_pieces; i++) {
                        FeFusePiece *p = &req->pieces[i];
                        if (p->write)
                                continue;
                        if (memcmp(p->host, req->in + in_off, p->len) != 0)
                                req_problem(c, req, "backend modified readable descriptor %u", i);
                        in_off += p->len;
                }
        }
        release_pieces(c, req);
        if (req->status < 0)
                return;

        if (req->allow_empty && used_len == 0)
                return;
        if (req->no_reply) {
                if (used_len != 0)
                        req_problem(c, req, "used.len %u for a request without reply", used_len);
                return;
        }
        if (!req->out) {
                req_problem(c, req, "out of memory");
                return;
        }
        if (used_len > req->out_cap) {
                req_problem(c, req, "used.len %u > writable capacity %zu", used_len, req->out_cap);
                return;
        }
        if (used_len < sizeof(struct fuse_out_header)) {
                req_problem(c, req, "used.len %u < out header", used_len);
                return;
        }
        memcpy(&req->oh, req->out, sizeof(req->oh));
        if (req->oh.len != used_len)
                req_problem(c, req, "out.len %u != used.len %u", req->oh.len, used_len);
        else if (req->oh.unique != req->unique)
                req_problem(c, req, "out.unique %" PRIu64 " != %" PRIu64, (uint64_t) req->oh.unique, req->unique);
        else if (req->oh.error > 0 || req->oh.error <= -4096)
                req_problem(c, req, "out.error %d is not a negative errno", req->oh.error);
        else if (req->oh.error != 0 && req->oh.len != sizeof(struct fuse_out_header))
                req_problem(c, req, "error %d with payload (len %u)", req->oh.error, req->oh.len);
        if (req->status < 0)
                return;
        req->payload = req->out + sizeof(struct fuse_out_header);
        req->payload_len = req->oh.len - sizeof(struct fuse_out_header);
}

int fe_fuse_wait(FeFuse *c, unsigned queue, int timeout_ms, FeFuseReq **ret) {
        FeVring *vr = queue < FE_MAX_QUEUES ? c->fe->vq[queue] : NULL;

        if (!vr)
                return -EINVAL;
        for (;;) {
                uint32_t id, len;
                void *user;
                int r = fe_vring_pop_used(vr, &id, &len, &user);

                if (r == -EPROTO) {
                        c->proto_errors++;
                        snprintf(c->last_problem, sizeof(c->last_problem),
                                 "queue %u: used element with id %u that is not in flight", queue, id);
                        return -EPROTO;
                }
                if (r > 0) {
                        FeFuseReq *req = user;
                        if (!req) /* a hand-written raw chain */
                                continue;
                        complete(c, req, len);
                        if (ret)
                                *ret = req;
                        return 0;
                }
                r = fe_vring_wait(vr, timeout_ms);
                if (r < 0)
                        return r;
        }
}

int fe_fuse_call(FeFuse *c, FeFuseReq *req) {
        int r = fe_fuse_submit(c, req, -1);
        if (r < 0)
                return r;
        while (!req->done) {
                FeFuseReq *done;
                r = fe_fuse_wait(c, req->queue, c->fe->opts.timeout_ms, &done);
                if (r == -ETIMEDOUT) {
                        c->proto_errors++;
                        snprintf(c->last_problem, sizeof(c->last_problem),
                                 "opcode %u unique %" PRIu64 ": no completion within %d ms", req->opcode, req->unique,
                                 c->fe->opts.timeout_ms);
                        return r;
                }
                if (r < 0)
                        return r;
        }
        if (req->status < 0)
                return req->status;
        return req->no_reply ? 0 : req->oh.error;
}

/* Runs req, checks a fixed-size successful reply and copies it out. Frees req. */
static int call_fixed(FeFuse *c, FeFuseReq *req, void *ret, size_t size) {
        int r = fe_fuse_call(c, req);
        if (r == 0 && req->payload_len != size)
                r = req_problem(c, req, "reply payload %zu bytes, expected %zu", req->payload_len, size);
        if (r == 0 && ret)
                memcpy(ret, req->payload, size);
        fe_fuse_req_free(c, req);
        return r;
}

static int call_empty(FeFuse *c, FeFuseReq *req) {
        return call_fixed(c, req, NULL, 0);
}

#define NEW_REQ(req, op, node, out)                                      \
        do {                                                             \
                int _r = fe_fuse_req_new(&(req), c, (op), (node), (out)); \
                if (_r < 0)                                              \
                        return _r;                                       \
        } while (0)

/* ---- convenience calls ---- */

int fe_fuse_request(FeFuse *c, uint32_t opcode, uint64_t nodeid, const FeFuseArg *args, unsigned n_args, void *out,
                    size_t out_size) {
        FeFuseReq *req;
        int r;

        NEW_REQ(req, opcode, nodeid, out_size);
        for (unsigned k = 0; k < n_args; k++)
                if (args[k].len > 0)
                        fe_fuse_req_add(req, args[k].data, args[k].len);
        r = fe_fuse_call(c, req);
        if (r == 0) {
                if (out)
                        memcpy(out, req->payload, MIN(out_size, req->payload_len));
                r = (int) req->payload_len;
        }
        fe_fuse_req_free(c, req);
        return r;
}

int fe_fuse_init(FeFuse *c) {
        struct fuse_init_in in = {
                .major = FUSE_KERNEL_VERSION,
                .minor = FUSE_KERNEL_MINOR_VERSION,
                .max_readahead = 131072,
                .flags = 0x7bfffffb, /* what the Linux 6.1 guest offers */
                .flags2 = 0xb,
        };
        FeFuseReq *req;
        int r;

        NEW_REQ(req, FUSE_INIT, 0, sizeof(struct fuse_init_out));
        fe_fuse_req_add(req, &in, sizeof(in));
        r = fe_fuse_call(c, req);
        if (r == 0 && req->payload_len < FUSE_COMPAT_22_INIT_OUT_SIZE)
                r = req_problem(c, req, "INIT reply payload %zu bytes", req->payload_len);
        if (r == 0) {
                memset(&c->init, 0, sizeof(c->init));
                memcpy(&c->init, req->payload, MIN(req->payload_len, sizeof(c->init)));
                if (c->init.major != FUSE_KERNEL_VERSION)
                        r = req_problem(c, req, "INIT major %u", c->init.major);
                else
                        c->initialized = true;
        }
        fe_fuse_req_free(c, req);
        return r;
}

int fe_fuse_lookup(FeFuse *c, uint64_t parent, const char *name, struct fuse_entry_out *ret) {
        struct fuse_entry_out e;
        FeFuseReq *req;
        int r;

        NEW_REQ(req, FUSE_LOOKUP, parent, sizeof(struct fuse_entry_out));
        fe_fuse_req_add_str(req, name);
        r = call_fixed(c, req, &e, sizeof(e));
        if (r < 0)
                return r;
        if (ret)
                *ret = e;
        /* Success with nodeid 0 is a negative entry the guest may cache: the name does not exist. */
        return e.nodeid == 0 ? -ENOENT : 0;
}

int fe_fuse_getattr(FeFuse *c, uint64_t nodeid, struct fuse_attr_out *ret) {
        struct fuse_getattr_in in = {};
        FeFuseReq *req;
        NEW_REQ(req, FUSE_GETATTR, nodeid, sizeof(struct fuse_attr_out));
        fe_fuse_req_add(req, &in, sizeof(in));
        return call_fixed(c, req, ret, sizeof(*ret));
}

int fe_fuse_setattr_size(FeFuse *c, uint64_t nodeid, uint64_t size, struct fuse_attr_out *ret) {
        struct fuse_setattr_in in = { .valid = FATTR_SIZE, .size = size };
        FeFuseReq *req;
        NEW_REQ(req, FUSE_SETATTR, nodeid, sizeof(struct fuse_attr_out));
        fe_fuse_req_add(req, &in, sizeof(in));
        return call_fixed(c, req, ret, sizeof(*ret));
}

static int open_common(FeFuse *c, uint32_t op, uint64_t nodeid, uint32_t flags, uint64_t *ret_fh) {
        struct fuse_open_in in = { .flags = flags };
        struct fuse_open_out out;
        FeFuseReq *req;
        int r;

        NEW_REQ(req, op, nodeid, sizeof(out));
        fe_fuse_req_add(req, &in, sizeof(in));
        r = call_fixed(c, req, &out, sizeof(out));
        if (r == 0 && ret_fh)
                *ret_fh = out.fh;
        return r;
}

int fe_fuse_open(FeFuse *c, uint64_t nodeid, uint32_t flags, uint64_t *ret_fh) {
        return open_common(c, FUSE_OPEN, nodeid, flags, ret_fh);
}

int fe_fuse_opendir(FeFuse *c, uint64_t nodeid, uint64_t *ret_fh) {
        return open_common(c, FUSE_OPENDIR, nodeid, 0, ret_fh);
}

int fe_fuse_create(FeFuse *c, uint64_t parent, const char *name, uint32_t flags, uint32_t mode,
                   struct fuse_entry_out *ret_entry, uint64_t *ret_fh) {
        struct fuse_create_in in = { .flags = flags, .mode = mode, .umask = 022 };
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o;
        } out;
        FeFuseReq *req;
        int r;

        NEW_REQ(req, FUSE_CREATE, parent, sizeof(out));
        fe_fuse_req_add(req, &in, sizeof(in));
        fe_fuse_req_add_str(req, name);
        r = call_fixed(c, req, &out, sizeof(out));
        if (r == 0) {
                if (ret_entry)
                        *ret_entry = out.e;
                if (ret_fh)
                        *ret_fh = out.o.fh;
        }
        return r;
}

int fe_fuse_mkdir(FeFuse *c, uint64_t parent, const char *name, uint32_t mode, struct fuse_entry_out *ret) {
        struct fuse_mkdir_in in = { .mode = mode, .umask = 022 };
        FeFuseReq *req;
        NEW_REQ(req, FUSE_MKDIR, parent, sizeof(struct fuse_entry_out));
        fe_fuse_req_add(req, &in, sizeof(in));
        fe_fuse_req_add_str(req, name);
        return call_fixed(c, req, ret, sizeof(*ret));
}

static int read_common(FeFuse *c, uint32_t op, uint64_t nodeid, uint64_t fh, uint64_t offset, void *buf,
                       uint32_t size) {
        struct fuse_read_in in = { .fh = fh, .offset = offset, .size = size };
        FeFuseReq *req;
        int r;

        NEW_REQ(req, op, nodeid, size);
        fe_fuse_req_add(req, &in, sizeof(in));
        r = fe_fuse_call(c, req);
        if (r == 0) {
                if (req->payload_len > size)
                        r = req_problem(c, req, "read reply %zu > size %u", req->payload_len, size);
                else {
                        memcpy(buf, req->payload, req->payload_len);
                        r = (int) req->payload_len;
                }
        }
        fe_fuse_req_free(c, req);
        return r;
}

int fe_fuse_read(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t offset, void *buf, uint32_t size) {
        return read_common(c, FUSE_READ, nodeid, fh, offset, buf, size);
}

int fe_fuse_readdir(FeFuse *c, bool plus, uint64_t nodeid, uint64_t fh, uint64_t offset, void *buf, uint32_t size) {
        return read_common(c, plus ? FUSE_READDIRPLUS : FUSE_READDIR, nodeid, fh, offset, buf, size);
}

int fe_fuse_write(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t offset, const void *buf, uint32_t size) {
        struct fuse_write_in in = { .fh = fh, .offset = offset, .size = size };
        struct fuse_write_out out;
        FeFuseReq *req;
        int r;

        NEW_REQ(req, FUSE_WRITE, nodeid, sizeof(out));
        fe_fuse_req_add(req, &in, sizeof(in));
        fe_fuse_req_add_data(req, buf, size);
        r = call_fixed(c, req, &out, sizeof(out));
        return r < 0 ? r : (int) out.size;
}

int fe_fuse_list_dir(FeFuse *c, uint64_t nodeid, void (*fn)(const char *name, uint32_t type, void *ud), void *ud) {
        _cleanup_free_ uint8_t *buf = malloc(4096);
        uint64_t fh, offset = 0;
        int r, count = 0;

        if (!buf)
                return -ENOMEM;
        r = fe_fuse_opendir(c, nodeid, &fh);
        if (r < 0)
                return r;
        for (;;) {
                int n = fe_fuse_readdir(c, false, nodeid, fh, offset, buf, 4096);
                size_t pos = 0;

                if (n < 0) {
                        r = n;
                        break;
                }
                if (n == 0)
                        break;
                while (pos + FUSE_NAME_OFFSET <= (size_t) n) {
                        const struct fuse_dirent *d = (const struct fuse_dirent *) (buf + pos);
                        char name[1025];

                        if (d->namelen == 0 || d->namelen > 1024 || pos + FUSE_DIRENT_SIZE(d) > (size_t) n) {
                                c->proto_errors++;
                                snprintf(c->last_problem, sizeof(c->last_problem), "bad dirent at %zu", pos);
                                r = -EPROTO;
                                goto out;
                        }
                        memcpy(name, d->name, d->namelen);
                        name[d->namelen] = 0;
                        if (fn)
                                fn(name, d->type, ud);
                        count++;
                        offset = d->off;
                        pos += FUSE_DIRENT_SIZE(d);
                }
                if (pos != (size_t) n) {
                        c->proto_errors++;
                        snprintf(c->last_problem, sizeof(c->last_problem), "trailing %zu bytes in READDIR",
                                 (size_t) n - pos);
                        r = -EPROTO;
                        break;
                }
        }
out:;
        int r2 = fe_fuse_release(c, nodeid, fh, true);
        if (r < 0)
                return r;
        return r2 < 0 ? r2 : count;
}

int fe_fuse_release(FeFuse *c, uint64_t nodeid, uint64_t fh, bool dir) {
        struct fuse_release_in in = { .fh = fh };
        FeFuseReq *req;
        NEW_REQ(req, dir ? FUSE_RELEASEDIR : FUSE_RELEASE, nodeid, 0);
        fe_fuse_req_add(req, &in, sizeof(in));
        return call_empty(c, req);
}

int fe_fuse_flush(FeFuse *c, uint64_t nodeid, uint64_t fh) {
        struct fuse_flush_in in = { .fh = fh };
        FeFuseReq *req;
        NEW_REQ(req, FUSE_FLUSH, nodeid, 0);
        fe_fuse_req_add(req, &in, sizeof(in));
        return call_empty(c, req);
}

int fe_fuse_setlk(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t owner, bool flock, uint32_t type, uint64_t start,
                  uint64_t end) {
        struct fuse_lk_in in = { .fh = fh, .owner = owner, .lk = { .start = start, .end = end, .type = type },
                                 .lk_flags = flock ? FUSE_LK_FLOCK : 0 };
        int r = fe_fuse_request(c, FUSE_SETLK, nodeid, &(FeFuseArg) { &in, sizeof in }, 1, NULL, 0);
        return r < 0 ? r : 0;
}

int fe_fuse_getlk(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t owner, uint32_t type, uint64_t start, uint64_t end,
                  struct fuse_file_lock *ret) {
        struct fuse_lk_in in = { .fh = fh, .owner = owner, .lk = { .start = start, .end = end, .type = type } };
        struct fuse_lk_out out = {};
        int r = fe_fuse_request(c, FUSE_GETLK, nodeid, &(FeFuseArg) { &in, sizeof in }, 1, &out, sizeof out);

        if (r < 0)
                return r;
        if (r != (int) sizeof out)
                return -EPROTO;
        *ret = out.lk;
        return 0;
}

int fe_fuse_fsync(FeFuse *c, uint64_t nodeid, uint64_t fh) {
        struct fuse_fsync_in in = { .fh = fh };
        FeFuseReq *req;
        NEW_REQ(req, FUSE_FSYNC, nodeid, 0);
        fe_fuse_req_add(req, &in, sizeof(in));
        return call_empty(c, req);
}

static int name_op(FeFuse *c, uint32_t op, uint64_t parent, const char *name) {
        FeFuseReq *req;
        NEW_REQ(req, op, parent, 0);
        fe_fuse_req_add_str(req, name);
        return call_empty(c, req);
}

int fe_fuse_unlink(FeFuse *c, uint64_t parent, const char *name) {
        return name_op(c, FUSE_UNLINK, parent, name);
}

int fe_fuse_rmdir(FeFuse *c, uint64_t parent, const char *name) {
        return name_op(c, FUSE_RMDIR, parent, name);
}

int fe_fuse_rename(FeFuse *c, uint64_t parent, const char *name, uint64_t newparent, const char *newname) {
        struct fuse_rename_in in = { .newdir = newparent };
        FeFuseReq *req;
        NEW_REQ(req, FUSE_RENAME, parent, 0);
        fe_fuse_req_add(req, &in, sizeof(in));
        fe_fuse_req_add_str(req, name);
        fe_fuse_req_add_str(req, newname);
        return call_empty(c, req);
}

int fe_fuse_statfs(FeFuse *c, struct fuse_statfs_out *ret) {
        FeFuseReq *req;
        NEW_REQ(req, FUSE_STATFS, FUSE_ROOT_ID, sizeof(*ret));
        return call_fixed(c, req, ret, sizeof(*ret));
}

int fe_fuse_forget(FeFuse *c, uint64_t nodeid, uint64_t nlookup) {
        struct fuse_forget_in in = { .nlookup = nlookup };
        FeFuseReq *req;
        int r;

        NEW_REQ(req, FUSE_FORGET, nodeid, 0);
        req->out_cap = 0;
        req->no_reply = true;
        fe_fuse_req_add(req, &in, sizeof(in));
        r = fe_fuse_call(c, req);
        fe_fuse_req_free(c, req);
        return r;
}

int fe_fuse_batch_forget(FeFuse *c, const struct fuse_forget_one *items, uint32_t count) {
        struct fuse_batch_forget_in in = { .count = count };
        FeFuseReq *req;
        int r;

        NEW_REQ(req, FUSE_BATCH_FORGET, 0, 0);
        req->out_cap = 0;
        req->no_reply = true;
        fe_fuse_req_add(req, &in, sizeof(in));
        fe_fuse_req_add(req, items, sizeof(*items) * count);
        r = fe_fuse_call(c, req);
        fe_fuse_req_free(c, req);
        return r;
}

int fe_fuse_destroy(FeFuse *c) {
        FeFuseReq *req;
        NEW_REQ(req, FUSE_DESTROY, 0, 0);
        return call_empty(c, req);
}

/* ---- scenario ---- */

_printf_(2, 3) static int rt_fail(FeFuse *c, const char *fmt, ...) {
        char buf[sizeof(c->last_problem)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        memcpy(c->last_problem, buf, sizeof(buf));
        return -EPROTO;
}

void fe_fuse_pattern(void *buf, size_t len, uint64_t offset, uint32_t seed) {
        uint8_t *p = buf;
        for (size_t i = 0; i < len; i++) {
                uint64_t x = (offset + i) * 0x9e3779b97f4a7c15ull ^ seed;
                p[i] = (uint8_t) (x >> 29);
        }
}

struct find_ctx {
        const char *name;
        bool found;
};

static void find_name(const char *name, uint32_t type, void *ud) {
        struct find_ctx *f = ud;
        if (strcmp(name, f->name) == 0 && type == 8 /* DT_REG */)
                f->found = true;
}

int fe_fuse_roundtrip(FeFuse *c, const char *name, size_t size, uint32_t seed) {
        const size_t chunk = 65536;
        _cleanup_free_ uint8_t *buf = malloc(chunk), *want = malloc(chunk);
        struct fuse_entry_out e, e2;
        struct find_ctx f = { .name = name };
        uint64_t fh;
        int r;

        if (!buf || !want)
                return -ENOMEM;
        r = fe_fuse_create(c, FUSE_ROOT_ID, name, O_CREAT | O_RDWR, 0100644, &e, &fh);
        if (r < 0)
                return rt_fail(c, "CREATE %s: %d (%s)", name, r, c->last_problem);
        if (e.nodeid <= FUSE_ROOT_ID || (e.attr.mode & 0170000) != 0100000)
                return rt_fail(c, "CREATE %s: nodeid %" PRIu64 " mode 0%o", name, (uint64_t) e.nodeid, e.attr.mode);
        for (size_t off = 0; off < size; off += chunk) {
                uint32_t n = (uint32_t) MIN(chunk, size - off);
                fe_fuse_pattern(buf, n, off, seed);
                r = fe_fuse_write(c, e.nodeid, fh, off, buf, n);
                if (r != (int) n)
                        return rt_fail(c, "WRITE %s @%zu: %d of %u (%s)", name, off, r, n, c->last_problem);
        }
        r = fe_fuse_release(c, e.nodeid, fh, false);
        if (r < 0)
                return rt_fail(c, "RELEASE: %d", r);

        r = fe_fuse_lookup(c, FUSE_ROOT_ID, name, &e2);
        if (r < 0)
                return rt_fail(c, "LOOKUP %s: %d (%s)", name, r, c->last_problem);
        if (e2.nodeid != e.nodeid || e2.attr.size != size)
                return rt_fail(c, "LOOKUP %s: nodeid %" PRIu64 "/%" PRIu64 " size %" PRIu64 " want %zu", name,
                               (uint64_t) e2.nodeid, (uint64_t) e.nodeid, (uint64_t) e2.attr.size, size);
        r = fe_fuse_open(c, e.nodeid, O_RDONLY, &fh);
        if (r < 0)
                return rt_fail(c, "OPEN: %d (%s)", r, c->last_problem);
        for (size_t off = 0; off <= size; off += chunk) {
                uint32_t n = (uint32_t) MIN(chunk, size - off);
                r = fe_fuse_read(c, e.nodeid, fh, off, buf, (uint32_t) chunk);
                if (r != (int) n)
                        return rt_fail(c, "READ %s @%zu: %d, want %u (%s)", name, off, r, n, c->last_problem);
                fe_fuse_pattern(want, n, off, seed);
                if (memcmp(buf, want, n) != 0)
                        return rt_fail(c, "READ %s @%zu: data differs", name, off);
        }
        r = fe_fuse_release(c, e.nodeid, fh, false);
        if (r < 0)
                return rt_fail(c, "RELEASE: %d", r);

        r = fe_fuse_list_dir(c, FUSE_ROOT_ID, find_name, &f);
        if (r < 0)
                return rt_fail(c, "READDIR: %d (%s)", r, c->last_problem);
        if (!f.found)
                return rt_fail(c, "READDIR: %s not listed among %d entries", name, r);
        r = fe_fuse_unlink(c, FUSE_ROOT_ID, name);
        if (r < 0)
                return rt_fail(c, "UNLINK: %d (%s)", r, c->last_problem);
        r = fe_fuse_lookup(c, FUSE_ROOT_ID, name, &e2);
        if (r != -ENOENT)
                return rt_fail(c, "LOOKUP after UNLINK: %d, want -ENOENT (%s)", r, c->last_problem);
        r = fe_fuse_forget(c, e.nodeid, 2);
        if (r < 0)
                return rt_fail(c, "FORGET: %d (%s)", r, c->last_problem);
        return 0;
}

int fe_fuse_dirent_names(const uint8_t *buf, int len, char *names, size_t size, uint64_t *off) {
        int n = 0;

        for (int pos = 0; pos + (int) FUSE_NAME_OFFSET <= len;) {
                const struct fuse_dirent *d = (const void *) (buf + pos);
                char name[256];

                snprintf(name, sizeof name, "%.*s", (int) d->namelen, d->name);
                if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
                        if (strlen(names) + strlen(name) + 2 >= size)
                                return -ENOBUFS;
                        strcat(names, name);
                        strcat(names, " ");
                        n++;
                }
                *off = d->off;
                pos += (int) FUSE_DIRENT_SIZE(d);
        }
        return n;
}

bool fe_fuse_entries_once(const char *names, int count, char *bad, size_t size) {
        for (int i = 0; i < count; i++) {
                char name[32];
                const char *at;

                snprintf(name, sizeof name, "entry-%02d ", i);
                at = strstr(names, name);
                if (!at || strstr(at + 1, name)) {
                        snprintf(bad, size, "%s listed %s", name, at ? "twice" : "never");
                        return false;
                }
        }
        return true;
}
