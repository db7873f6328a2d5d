/* state-codec.c: a SessionState to bytes and back (the format is in session-state.h). */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "state-internal.h"

#define SESSION_PAYLOAD 40u
#define NODE_FIXED 80u
#define HANDLE_PAYLOAD 40u
#define LOCK_PAYLOAD 56u
#define DIGEST_OFFSET 32u
#define DIGEST_SIZE 32u

/* ---- writing ---- */

typedef struct Writer {
        uint8_t *buf;
        size_t pos;
} Writer;

static void put_bytes(Writer *w, const void *p, size_t n) {
        if (n)
                memcpy(w->buf + w->pos, p, n);
        w->pos += n;
}
static void put_u16(Writer *w, uint16_t v) {
        v = htole16(v);
        put_bytes(w, &v, sizeof v);
}
static void put_u32(Writer *w, uint32_t v) {
        v = htole32(v);
        put_bytes(w, &v, sizeof v);
}
static void put_u64(Writer *w, uint64_t v) {
        v = htole64(v);
        put_bytes(w, &v, sizeof v);
}
static void put_record(Writer *w, uint16_t type, uint32_t len) {
        put_u16(w, type);
        put_u16(w, 0);
        put_u32(w, len);
}

static void digest(const uint8_t *buf, size_t len, uint8_t out[DIGEST_SIZE]) {
        static const uint8_t zero[DIGEST_SIZE];
        g_autoptr(GChecksum) c = g_checksum_new(G_CHECKSUM_SHA256);
        gsize n = DIGEST_SIZE;

        g_checksum_update(c, buf, DIGEST_OFFSET);
        g_checksum_update(c, zero, DIGEST_SIZE);
        g_checksum_update(c, buf + DIGEST_OFFSET + DIGEST_SIZE, len - DIGEST_OFFSET - DIGEST_SIZE);
        g_checksum_get_digest(c, out, &n);
}

void session_state_seal(uint8_t *buf, size_t len) {
        uint8_t d[DIGEST_SIZE];

        if (len < STATE_HEADER_SIZE)
                return;
        digest(buf, len, d);
        memcpy(buf + DIGEST_OFFSET, d, DIGEST_SIZE);
}

static size_t node_payload(const StateNode *n) {
        return NODE_FIXED + (n->name ? strlen(n->name) : 0) + n->handle_len;
}

static void write_node(Writer *w, const StateNode *n) {
        size_t name_len = n->name ? strlen(n->name) : 0;

        put_record(w, STATE_REC_NODE, (uint32_t) node_payload(n));
        put_u64(w, n->id);
        put_u64(w, n->nlookup);
        put_u64(w, n->parent);
        put_u64(w, n->dev);
        put_u64(w, n->ino);
        put_u64(w, n->mnt_id);
        put_u64(w, n->generation);
        put_u32(w, n->type);
        put_u32(w, (uint32_t) n->fd_slot);
        put_u32(w, n->flags);
        put_u16(w, (uint16_t) name_len);
        put_u16(w, n->handle_len);
        put_u32(w, n->handle_type);
        put_u32(w, 0);
        put_bytes(w, n->name, name_len);
        put_bytes(w, n->handle, n->handle_len);
}

static void write_handle(Writer *w, const StateHandle *h) {
        put_record(w, STATE_REC_HANDLE, HANDLE_PAYLOAD);
        put_u64(w, h->fh);
        put_u64(w, h->node);
        put_u32(w, (uint32_t) h->open_flags);
        put_u32(w, h->flags);
        put_u32(w, (uint32_t) h->fd_slot);
        put_u32(w, 0);
        put_u64(w, h->dir_offset);
}

static void write_lock(Writer *w, const StateLock *l) {
        put_record(w, STATE_REC_LOCK, LOCK_PAYLOAD);
        put_u64(w, l->owner);
        put_u64(w, l->node);
        put_u64(w, l->fh);
        put_u64(w, l->start);
        put_u64(w, l->end);
        put_u32(w, l->kind);
        put_u32(w, l->type);
        put_u32(w, (uint32_t) l->fd_slot);
        put_u32(w, 0);
}

/* One record of type (x a StateNode, StateHandle or StateLock) into buf[0..size): its length,
 * -EINVAL for what the reader would refuse alone, -ENOBUFS when it does not fit. */
static ssize_t write_record(uint16_t type, const void *x, uint8_t *buf, size_t size) {
        Writer w = { buf, 0 };
        size_t len;
        int r;

        switch (type) {
        case STATE_REC_NODE:
                r = state_check_node(x, NULL, 0);
                len = STATE_RECORD_HEADER_SIZE + node_payload(x);
                break;
        case STATE_REC_HANDLE:
                r = state_check_handle(x, NULL, 0);
                len = STATE_RECORD_HEADER_SIZE + HANDLE_PAYLOAD;
                break;
        default:
                r = state_check_lock(x, NULL, 0);
                len = STATE_RECORD_HEADER_SIZE + LOCK_PAYLOAD;
        }
        if (r < 0)
                return -EINVAL;
        if (len > size)
                return -ENOBUFS;
        if (type == STATE_REC_NODE)
                write_node(&w, x);
        else if (type == STATE_REC_HANDLE)
                write_handle(&w, x);
        else
                write_lock(&w, x);
        g_assert(w.pos == len);
        return (ssize_t) len;
}

ssize_t session_state_record_node(const StateNode *n, uint8_t *buf, size_t size) {
        return write_record(STATE_REC_NODE, n, buf, size);
}

ssize_t session_state_record_handle(const StateHandle *h, uint8_t *buf, size_t size) {
        return write_record(STATE_REC_HANDLE, h, buf, size);
}

ssize_t session_state_record_lock(const StateLock *l, uint8_t *buf, size_t size) {
        return write_record(STATE_REC_LOCK, l, buf, size);
}

int session_state_encode(SessionState *s, uint8_t **ret, size_t *ret_len, char *err, size_t errlen) {
        size_t total = STATE_HEADER_SIZE;
        Writer w = {};
        int r;

        r = state_check_relations(s, err, errlen);
        if (r < 0)
                return -EINVAL;
        total += STATE_RECORD_HEADER_SIZE + SESSION_PAYLOAD;
        for (guint i = 0; i < s->nodes->len; i++)
                total += STATE_RECORD_HEADER_SIZE + node_payload(&g_array_index(s->nodes, StateNode, i));
        total += (size_t) s->handles->len * (STATE_RECORD_HEADER_SIZE + HANDLE_PAYLOAD);
        total += (size_t) s->locks->len * (STATE_RECORD_HEADER_SIZE + LOCK_PAYLOAD);
        if (total > STATE_MAX_BYTES)
                return state_error(err, errlen, -EFBIG, "the state takes %zu bytes, over %llu", total, STATE_MAX_BYTES);
        w.buf = malloc(total);
        if (!w.buf)
                return -ENOMEM;

        put_bytes(&w, STATE_MAGIC, 8);
        put_u32(&w, STATE_VERSION);
        put_u32(&w, STATE_HEADER_SIZE);
        put_u64(&w, total);
        put_u32(&w, 1 + s->nodes->len + s->handles->len + s->locks->len);
        put_u32(&w, 0);
        memset(w.buf + w.pos, 0, DIGEST_SIZE);
        w.pos += DIGEST_SIZE;

        put_record(&w, STATE_REC_SESSION, SESSION_PAYLOAD);
        put_u32(&w, s->session.proto_major);
        put_u32(&w, s->session.proto_minor);
        put_u64(&w, s->session.init_flags);
        put_u32(&w, s->session.max_write);
        put_u32(&w, s->session.max_readahead);
        put_u32(&w, s->session.max_pages);
        put_u32(&w, s->session.time_gran);
        put_u64(&w, s->session.fs_flags);

        for (guint i = 0; i < s->nodes->len; i++)
                write_node(&w, &g_array_index(s->nodes, StateNode, i));
        for (guint i = 0; i < s->handles->len; i++)
                write_handle(&w, &g_array_index(s->handles, StateHandle, i));
        for (guint i = 0; i < s->locks->len; i++)
                write_lock(&w, &g_array_index(s->locks, StateLock, i));
        g_assert(w.pos == total);
        session_state_seal(w.buf, total);
        *ret = w.buf;
        *ret_len = total;
        return 0;
}

/* ---- reading ---- */

typedef struct Reader {
        const uint8_t *p;
        size_t left;
} Reader;

/* get_u16(), get_u32(), get_u64(): the next little-endian integer; callers have checked that the
 * bytes are there. */
#define DEFINE_GET(bits)                                         \
        static uint##bits##_t get_u##bits(Reader *r) {           \
                uint##bits##_t v;                                \
                memcpy(&v, r->p, sizeof v);                      \
                r->p += sizeof v;                                \
                r->left -= sizeof v;                             \
                return le##bits##toh(v);                         \
        }
DEFINE_GET(16)
DEFINE_GET(32)
DEFINE_GET(64)

int session_state_peek_length(const uint8_t *hdr, size_t n, uint64_t max_len, uint64_t *ret_total, char *err,
                              size_t errlen) {
        Reader r = { hdr, n };
        uint32_t version, hsize, reserved;
        uint64_t total;

        if (max_len > STATE_MAX_BYTES)
                max_len = STATE_MAX_BYTES;
        if (n < STATE_HEADER_SIZE)
                return state_error(err, errlen, -EBADMSG, "truncated: %zu bytes, shorter than the %u-byte header", n,
                                   STATE_HEADER_SIZE);
        if (memcmp(hdr, STATE_MAGIC, 8) != 0)
                return state_error(err, errlen, -EBADMSG, "not a vufsd state stream (wrong magic)");
        r.p += 8;
        r.left -= 8;
        version = get_u32(&r);
        hsize = get_u32(&r);
        total = get_u64(&r);
        (void) get_u32(&r); /* record count, checked with the records */
        reserved = get_u32(&r);
        if (version == 0 || version > STATE_VERSION)
                return state_error(err, errlen, -EPROTONOSUPPORT, "format version %u, this vufsd reads up to %u", version,
                                   STATE_VERSION);
        if (hsize != STATE_HEADER_SIZE || reserved != 0)
                return state_error(err, errlen, -EBADMSG, "header size %u or reserved field 0x%x", hsize, reserved);
        if (total < STATE_HEADER_SIZE)
                return state_error(err, errlen, -EBADMSG, "total length %" PRIu64 " is shorter than the header", total);
        if (total > max_len)
                return state_error(err, errlen, -EFBIG, "total length %" PRIu64 " is over the cap of %" PRIu64 " bytes", total,
                                   max_len);
        *ret_total = total;
        return 0;
}

static int read_session(SessionState *s, Reader *r, uint32_t len, char *err, size_t errlen) {
        if (len != SESSION_PAYLOAD)
                return state_error(err, errlen, -EBADMSG, "a session record of %u bytes", len);
        if (s->has_session)
                return state_error(err, errlen, -EBADMSG, "two session records");
        s->session.proto_major = get_u32(r);
        s->session.proto_minor = get_u32(r);
        s->session.init_flags = get_u64(r);
        s->session.max_write = get_u32(r);
        s->session.max_readahead = get_u32(r);
        s->session.max_pages = get_u32(r);
        s->session.time_gran = get_u32(r);
        s->session.fs_flags = get_u64(r);
        s->has_session = true;
        return 0;
}

static int read_node(SessionState *s, Reader *r, uint32_t len, uint32_t max_nodes, char *err, size_t errlen) {
        StateNode n = {};
        uint16_t name_len;
        int ret;

        if (len < NODE_FIXED)
                return state_error(err, errlen, -EBADMSG, "a node record of %u bytes", len);
        if (s->nodes->len >= max_nodes)
                return state_error(err, errlen, -EFBIG, "more than %u nodes", max_nodes);
        n.id = get_u64(r);
        n.nlookup = get_u64(r);
        n.parent = get_u64(r);
        n.dev = get_u64(r);
        n.ino = get_u64(r);
        n.mnt_id = get_u64(r);
        n.generation = get_u64(r);
        n.type = get_u32(r);
        n.fd_slot = (int32_t) get_u32(r);
        n.flags = get_u32(r);
        name_len = get_u16(r);
        n.handle_len = get_u16(r);
        n.handle_type = get_u32(r);
        if (get_u32(r) != 0)
                return state_error(err, errlen, -EBADMSG, "node %" PRIu64 ": reserved field set", n.id);
        if (n.handle_len > STATE_HANDLE_MAX)
                return state_error(err, errlen, -EBADMSG, "node %" PRIu64 ": a file handle of %u bytes", n.id, n.handle_len);
        if ((size_t) len != NODE_FIXED + name_len + n.handle_len)
                return state_error(err, errlen, -EBADMSG, "node %" PRIu64 ": record of %u bytes for a %u-byte name and a %u-byte handle",
                                   n.id, len, name_len, n.handle_len);
        if (name_len > 0) {
                ret = state_check_name((const char *) r->p, name_len, err, errlen);
                if (ret < 0)
                        return state_error(err, errlen, ret, "node %" PRIu64 ": bad name", n.id);
                /* Not strndup(): the name is not NUL-terminated, and may end the buffer. */
                n.name = malloc((size_t) name_len + 1);
                if (!n.name)
                        return -ENOMEM;
                memcpy(n.name, r->p, name_len);
                n.name[name_len] = '\0';
                r->p += name_len;
                r->left -= name_len;
        }
        memcpy(n.handle, r->p, n.handle_len);
        r->p += n.handle_len;
        r->left -= n.handle_len;
        ret = state_check_node(&n, err, errlen);
        if (ret < 0) {
                free(n.name);
                return ret;
        }
        g_array_append_val(s->nodes, n); /* the name moves in */
        return 0;
}

/* A fixed-size record of what ("handle", "lock") of len bytes (want expected), the have + 1st of at
 * most cap. */
static int fixed_record(const char *what, uint32_t len, uint32_t want, guint have, guint cap, char *err, size_t errlen) {
        if (len != want)
                return state_error(err, errlen, -EBADMSG, "a %s record of %u bytes", what, len);
        if (have >= cap)
                return state_error(err, errlen, -EFBIG, "more than %u %ss", cap, what);
        return 0;
}

static int read_handle(SessionState *s, Reader *r, uint32_t len, char *err, size_t errlen) {
        StateHandle h = {};
        int ret = fixed_record("handle", len, HANDLE_PAYLOAD, s->handles->len, STATE_MAX_HANDLES, err, errlen);

        if (ret < 0)
                return ret;
        h.fh = get_u64(r);
        h.node = get_u64(r);
        h.open_flags = (int32_t) get_u32(r);
        h.flags = get_u32(r);
        h.fd_slot = (int32_t) get_u32(r);
        if (get_u32(r) != 0)
                return state_error(err, errlen, -EBADMSG, "handle %" PRIu64 ": reserved field set", h.fh);
        h.dir_offset = get_u64(r);
        if (h.flags & ~STATE_HANDLE_DIR)
                return state_error(err, errlen, -EBADMSG, "handle %" PRIu64 ": unknown flags 0x%x", h.fh, h.flags);
        if (state_check_handle(&h, err, errlen) < 0)
                return -EBADMSG;
        g_array_append_val(s->handles, h);
        return 0;
}

static int read_lock(SessionState *s, Reader *r, uint32_t len, char *err, size_t errlen) {
        StateLock l = {};
        int ret = fixed_record("lock", len, LOCK_PAYLOAD, s->locks->len, STATE_MAX_LOCKS, err, errlen);

        if (ret < 0)
                return ret;
        l.owner = get_u64(r);
        l.node = get_u64(r);
        l.fh = get_u64(r);
        l.start = get_u64(r);
        l.end = get_u64(r);
        l.kind = get_u32(r);
        l.type = get_u32(r);
        l.fd_slot = (int32_t) get_u32(r);
        if (get_u32(r) != 0)
                return state_error(err, errlen, -EBADMSG, "lock through handle %" PRIu64 ": reserved field set", l.fh);
        ret = state_check_lock(&l, err, errlen);
        if (ret < 0)
                return ret;
        g_array_append_val(s->locks, l);
        return 0;
}

int state_read_records(SessionState *s, const uint8_t *buf, size_t len, uint32_t count, uint64_t max_nodes, char *err,
                       size_t errlen) {
        Reader r = { buf, len };
        int ret_;

        for (uint32_t i = 0; i < count && (count != UINT32_MAX || r.left > 0); i++) {
                uint16_t type, reserved;
                uint32_t plen;
                if (r.left < STATE_RECORD_HEADER_SIZE)
                        return state_error(err, errlen, -EBADMSG, "record %u of %u runs past the end", i, count);
                type = get_u16(&r);
                reserved = get_u16(&r);
                plen = get_u32(&r);
                if (reserved != 0)
                        return state_error(err, errlen, -EBADMSG, "record %u: reserved field set", i);
                if (plen > r.left)
                        return state_error(err, errlen, -EBADMSG, "record %u: %u bytes, only %zu left", i, plen, r.left);
                switch (type) {
                case STATE_REC_SESSION:
                        ret_ = read_session(s, &r, plen, err, errlen);
                        break;
                case STATE_REC_NODE:
                        ret_ = read_node(s, &r, plen, (uint32_t) MIN(max_nodes, (uint64_t) STATE_MAX_NODES), err,
                                         errlen);
                        break;
                case STATE_REC_HANDLE:
                        ret_ = read_handle(s, &r, plen, err, errlen);
                        break;
                case STATE_REC_LOCK:
                        ret_ = read_lock(s, &r, plen, err, errlen);
                        break;
                default:
                        ret_ = state_error(err, errlen, -EBADMSG, "record %u: unknown type %u", i, type);
                }
                if (ret_ < 0)
                        return ret_;
        }
        if (r.left != 0)
                return state_error(err, errlen, -EBADMSG, "%zu bytes after the %u records", r.left, count);
        return 0;
}

int session_state_decode(const uint8_t *buf, size_t len, uint64_t max_len, SessionState **ret, char *err,
                         size_t errlen) {
        return session_state_decode_limited(buf, len, max_len, STATE_MAX_NODES, ret, err, errlen);
}

int session_state_decode_limited(const uint8_t *buf, size_t len, uint64_t max_len, uint64_t max_nodes,
                                 SessionState **ret, char *err, size_t errlen) {
        _cleanup_(session_state_freep) SessionState *s = NULL;
        uint8_t want[DIGEST_SIZE];
        uint64_t total;
        uint32_t count;
        int ret_;

        ret_ = session_state_peek_length(buf, len, max_len, &total, err, errlen);
        if (ret_ < 0)
                return ret_;
        if (len < total)
                return state_error(err, errlen, -EBADMSG, "truncated: %zu of %" PRIu64 " bytes", len, total);
        if (len > total)
                return state_error(err, errlen, -EBADMSG, "%zu bytes after the %" PRIu64 "-byte stream", len - (size_t) total,
                                   total);
        digest(buf, len, want);
        if (memcmp(want, buf + DIGEST_OFFSET, DIGEST_SIZE) != 0)
                return state_error(err, errlen, -EBADMSG, "checksum mismatch: the stream was damaged");
        memcpy(&count, buf + 24, sizeof count);
        count = le32toh(count);

        ret_ = session_state_new(&s);
        if (ret_ < 0)
                return ret_;
        ret_ = state_read_records(s, buf + STATE_HEADER_SIZE, len - STATE_HEADER_SIZE, count, max_nodes, err, errlen);
        if (ret_ < 0)
                return ret_;

        ret_ = state_check_relations(s, err, errlen);
        if (ret_ < 0)
                return ret_;
        *ret = TAKE_PTR(s);
        return 0;
}
