/* test-session-state.c: the session state's byte format: a round trip keeps every field, and each
 * malformed stream (truncated, oversized, newer, damaged, dangling, duplicated, looping) is refused
 * with its own message; the size and time for 100,000 nodes. */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "session-state.h"
#include "test-main.h"

static void add_node(SessionState *s, uint64_t id, uint64_t parent, const char *name, uint32_t type) {
        StateNode n = {
                .id = id, .nlookup = id * 3, .parent = parent, .name = (char *) name, .dev = 0x801,
                .ino = 1000 + id, .mnt_id = 42, .generation = 7, .type = type, .fd_slot = -1,
        };
        ck_assert_int_eq(session_state_add_node(s, &n), 0);
}

static void add_handle(SessionState *s, uint64_t fh, uint64_t node, bool dir) {
        StateHandle h = { .fh = fh, .node = node, .open_flags = 02, .flags = dir ? STATE_HANDLE_DIR : 0,
                          .fd_slot = -1, .dir_offset = dir ? 5 : 0 };
        ck_assert_int_eq(session_state_add_handle(s, &h), 0);
}

/* root/ d(2)/ f(3), root/ g(4), a node without a path (5); handles on f, d and the root. Nodes
 * deliberately children first: the reader hands them back parents first. */
static SessionState *sample(void) {
        StateSession ss = { .proto_major = 7, .proto_minor = 38, .init_flags = 0x1234567890ull, .max_write = 1 << 20,
                            .max_readahead = 1 << 17, .max_pages = 256, .time_gran = 1, .fs_flags = STATE_FS_WRITEBACK };
        SessionState *s;

        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        add_node(s, 3 << 6 | 5, 2 << 6 | 1, "f", S_IFREG);
        add_node(s, 2 << 6 | 1, STATE_ROOT_ID, "d", S_IFDIR);
        add_node(s, 4 << 6 | 9, STATE_ROOT_ID, "g", S_IFREG);
        add_node(s, 5 << 6 | 9, 0, NULL, S_IFREG);
        add_handle(s, 0x101, 3 << 6 | 5, false);
        add_handle(s, 0x202, 2 << 6 | 1, true);
        add_handle(s, 0x303, STATE_ROOT_ID, true);
        return s;
}

static uint8_t *encode(SessionState *s, size_t *len) {
        char err[256] = "";
        uint8_t *buf;

        ck_assert_msg(session_state_encode(s, &buf, len, err, sizeof err) == 0, "encode: %s", err);
        return buf;
}

/* Decodes buf and expects refusal r with a message containing want. */
static void refused(const uint8_t *buf, size_t len, uint64_t cap, int r, const char *want) {
        char err[256] = "";
        SessionState *s = NULL;
        int got = session_state_decode(buf, len, cap, &s, err, sizeof err);

        ck_assert_msg(got == r, "decode gave %d (%s), expected %d", got, err, r);
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(err, want), "message \"%s\" lacks \"%s\"", err, want);
}

/* A stream edited by hand, its checksum made right, so that the check behind it refuses it. */
static void refused_sealed(uint8_t *buf, size_t len, const char *want) {
        session_state_seal(buf, len);
        refused(buf, len, STATE_MAX_BYTES, -EBADMSG, want);
}

/* Offset of record k's header in an encoded stream. */
static size_t record_at(const uint8_t *buf, unsigned k) {
        size_t off = STATE_HEADER_SIZE;
        for (unsigned i = 0; i < k; i++) {
                uint32_t plen;
                memcpy(&plen, buf + off + 4, 4);
                off += STATE_RECORD_HEADER_SIZE + le32toh(plen);
        }
        return off;
}

static void put64(uint8_t *p, uint64_t v) {
        v = htole64(v);
        memcpy(p, &v, 8);
}

/* s (freed) encoded and decoded again. */
static SessionState *round_trip(SessionState *s) {
        _cleanup_free_ uint8_t *buf = NULL;
        SessionState *d = NULL;
        char err[256] = "";
        size_t len;

        buf = encode(s, &len);
        session_state_free(s);
        ck_assert_msg(session_state_decode(buf, len, STATE_MAX_BYTES, &d, err, sizeof err) == 0, "decode: %s", err);
        return d;
}

/* A receiver's node budget: the sample's 4 nodes decode with a budget of 4 and are refused with 3,
 * at the fourth node record, before anything past it is read. */
START_TEST(test_node_budget) {
        _cleanup_(session_state_freep) SessionState *s = sample(), *d = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        char err[256] = "";
        size_t len;

        buf = encode(s, &len);
        ck_assert_int_eq(session_state_decode_limited(buf, len, STATE_MAX_BYTES, 3, &d, err, sizeof err), -EFBIG);
        ck_assert_ptr_null(d);
        ck_assert_msg(strstr(err, "more than 3 nodes"), "message \"%s\"", err);
        ck_assert_msg(session_state_decode_limited(buf, len, STATE_MAX_BYTES, 4, &d, err, sizeof err) == 0, "decode: %s",
                      err);
        ck_assert_uint_eq(session_state_node_count(d), 4);
}
END_TEST

START_TEST(test_round_trip) {
        _cleanup_(session_state_freep) SessionState *d = round_trip(sample());
        const StateNode *n;

        ck_assert_uint_eq(session_state_session(d)->proto_minor, 38);
        ck_assert_uint_eq(session_state_session(d)->init_flags, 0x1234567890ull);
        ck_assert_uint_eq(session_state_session(d)->fs_flags, STATE_FS_WRITEBACK);
        ck_assert_uint_eq(session_state_node_count(d), 4);
        ck_assert_uint_eq(session_state_handle_count(d), 3);
        /* parents first: d before f */
        for (size_t i = 0, seen_d = 0; i < session_state_node_count(d); i++) {
                n = session_state_node(d, i);
                if (n->id == (2 << 6 | 1))
                        seen_d = 1;
                if (n->id == (3 << 6 | 5))
                        ck_assert(seen_d);
        }
        n = session_state_find_node(d, 3 << 6 | 5);
        ck_assert_ptr_nonnull(n);
        ck_assert_str_eq(n->name, "f");
        ck_assert_uint_eq(n->parent, 2 << 6 | 1);
        ck_assert_uint_eq(n->nlookup, (3 << 6 | 5) * 3);
        ck_assert_uint_eq(n->ino, 1000 + (3 << 6 | 5));
        ck_assert_uint_eq(n->generation, 7);
        ck_assert_int_eq(n->fd_slot, -1);
        n = session_state_find_node(d, 5 << 6 | 9);
        ck_assert_ptr_null(n->name);
        ck_assert_uint_eq(n->parent, 0);
        ck_assert_uint_eq(session_state_handle(d, 1)->flags, STATE_HANDLE_DIR);
        ck_assert_uint_eq(session_state_handle(d, 1)->dir_offset, 5);
        ck_assert_int_eq(session_state_handle(d, 0)->open_flags, 02);
        ck_assert_ptr_null(session_state_find_node(d, 999));
}
END_TEST

START_TEST(test_fd_slots_and_handles) {
        _cleanup_(session_state_freep) SessionState *s = NULL, *d = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        StateSession ss = { .proto_major = 7 };
        StateNode n = { .id = 2, .nlookup = 1, .type = S_IFREG, .fd_slot = 0, .handle_len = 8, .handle_type = 1 };
        StateHandle h = { .fh = 9, .node = 2, .fd_slot = 1 };
        char err[256] = "";
        size_t len;

        memcpy(n.handle, "\1\2\3\4\5\6\7\10", 8);
        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(session_state_add_node(s, &n), 0);
        ck_assert_int_eq(session_state_add_handle(s, &h), 0);
        buf = encode(s, &len);
        ck_assert_int_eq(session_state_decode(buf, len, STATE_MAX_BYTES, &d, err, sizeof err), 0);
        ck_assert_int_eq(session_state_node(d, 0)->fd_slot, 0);
        ck_assert_uint_eq(session_state_node(d, 0)->handle_len, 8);
        ck_assert_mem_eq(session_state_node(d, 0)->handle, "\1\2\3\4\5\6\7\10", 8);
        ck_assert_int_eq(session_state_handle(d, 0)->fd_slot, 1);
}
END_TEST

START_TEST(test_builder_refuses) {
        _cleanup_(session_state_freep) SessionState *s = NULL;
        StateNode n = { .id = 1, .type = S_IFREG, .fd_slot = -1 };
        StateHandle h = { .fh = 0, .node = 2, .fd_slot = -1 };
        uint8_t *buf = NULL;
        char err[256] = "";
        size_t len;

        ck_assert_int_eq(session_state_new(&s), 0);
        ck_assert_int_eq(session_state_add_node(s, &n), -EINVAL); /* the root */
        n.id = 2;
        n.parent = 1;
        n.name = "a/b/c"; /* a relative path is a name */
        ck_assert_int_eq(session_state_add_node(s, &n), 0);
        n.id = 3;
        for (const char *const *bad = (const char *const[]) { "..", ".", "a/../b", "/a", "a/", "a//b", "a/./b", NULL };
             *bad; bad++) {
                n.name = (char *) *bad;
                ck_assert_msg(session_state_add_node(s, &n) == -EINVAL, "%s taken", *bad);
        }
        n.name = NULL; /* a parent without a name */
        ck_assert_int_eq(session_state_add_node(s, &n), -EINVAL);
        ck_assert_int_eq(session_state_add_handle(s, &h), -EINVAL);
        /* ids past STATE_ID_MAX: a shard's next sequence would wrap (test-passthrough-state) */
        n.id = STATE_ID_MAX + 1;
        n.name = "big";
        ck_assert_int_eq(session_state_add_node(s, &n), -EINVAL);
        h.fh = UINT64_MAX;
        ck_assert_int_eq(session_state_add_handle(s, &h), -EINVAL);
        /* no session record: the writer refuses what the reader would */
        ck_assert_int_eq(session_state_encode(s, &buf, &len, err, sizeof err), -EINVAL);
        ck_assert_ptr_null(buf);
        ck_assert_ptr_nonnull(strstr(err, "no session"));
}
END_TEST

START_TEST(test_truncated_and_trailing) {
        _cleanup_(session_state_freep) SessionState *s = sample();
        _cleanup_free_ uint8_t *buf = NULL, *big = NULL;
        size_t len;

        buf = encode(s, &len);
        refused(buf, 0, STATE_MAX_BYTES, -EBADMSG, "shorter than the 64-byte header");
        refused(buf, 63, STATE_MAX_BYTES, -EBADMSG, "shorter than the 64-byte header");
        for (size_t k = 64; k < len; k += 7)
                refused(buf, k, STATE_MAX_BYTES, -EBADMSG, "truncated");
        big = calloc(1, len + 1);
        memcpy(big, buf, len);
        refused(big, len + 1, STATE_MAX_BYTES, -EBADMSG, "bytes after the");
}
END_TEST

START_TEST(test_oversized) {
        _cleanup_(session_state_freep) SessionState *s = sample();
        _cleanup_free_ uint8_t *buf = NULL;
        uint64_t total;
        char err[256];
        size_t len;

        buf = encode(s, &len);
        refused(buf, len, len - 1, -EFBIG, "over the cap");
        /* a header claiming more than any cap: refused before anything is read */
        put64(buf + 16, STATE_MAX_BYTES + 1);
        ck_assert_int_eq(session_state_peek_length(buf, 64, UINT64_MAX, &total, err, sizeof err), -EFBIG);
        ck_assert_ptr_nonnull(strstr(err, "over the cap"));
}
END_TEST

START_TEST(test_newer_version_and_magic) {
        _cleanup_(session_state_freep) SessionState *s = sample();
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;

        buf = encode(s, &len);
        buf[8] = STATE_VERSION + 1;
        session_state_seal(buf, len);
        refused(buf, len, STATE_MAX_BYTES, -EPROTONOSUPPORT, "format version 2");
        buf[8] = STATE_VERSION;
        buf[0] = 'X';
        refused(buf, len, STATE_MAX_BYTES, -EBADMSG, "wrong magic");
}
END_TEST

START_TEST(test_bad_checksum) {
        _cleanup_(session_state_freep) SessionState *s = sample();
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;

        buf = encode(s, &len);
        buf[len - 3] ^= 0x40;
        refused(buf, len, STATE_MAX_BYTES, -EBADMSG, "checksum mismatch");
}
END_TEST

/* Record 1 is the first node (the session is record 0). Field offsets are the header's table. */
#define NODE_ID 8
#define NODE_PARENT 24
#define HANDLE_NODE 16

static void patch_and_refuse(unsigned record, size_t field, uint64_t v, const char *want) {
        _cleanup_(session_state_freep) SessionState *s = sample();
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;

        buf = encode(s, &len);
        put64(buf + record_at(buf, record) + field, v);
        refused_sealed(buf, len, want);
}

START_TEST(test_dangling_and_duplicates) {
        /* encoded order: d(2<<6|1), f, g, the pathless one; then the handles (records 5..7) */
        patch_and_refuse(2, NODE_PARENT, 77 << 6, "is not in the state");     /* f's parent */
        patch_and_refuse(3, NODE_PARENT, 3 << 6 | 5, "is no directory");      /* g under the file f */
        patch_and_refuse(5, HANDLE_NODE, 88 << 6, "is not in the state");     /* a handle's node */
        patch_and_refuse(3, NODE_ID, 2 << 6 | 1, "twice");                    /* g takes d's id */
        patch_and_refuse(6, 8, 0x101, "handle 257 twice");                    /* two handles 0x101 */
        patch_and_refuse(1, NODE_PARENT, 2 << 6 | 1, "its own parent");       /* d in d */
        patch_and_refuse(1, NODE_ID, 1, "the root");
        patch_and_refuse(0, 0, 0, "unknown type 0"); /* the session record is no longer one */
}
END_TEST

/* A loop of two directories that are each other's parent, and one hanging under the loop. */
START_TEST(test_parent_loop) {
        _cleanup_(session_state_freep) SessionState *s = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        StateSession ss = {};
        size_t len;

        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        add_node(s, 10, STATE_ROOT_ID, "a", S_IFDIR);
        add_node(s, 11, 10, "b", S_IFDIR);
        add_node(s, 12, 11, "c", S_IFREG);
        buf = encode(s, &len);
        /* a's parent becomes b: a -> b -> a */
        put64(buf + record_at(buf, 1) + NODE_PARENT, 11);
        refused_sealed(buf, len, "parents loop");
}
END_TEST

START_TEST(test_record_framing) {
        _cleanup_(session_state_freep) SessionState *s = sample();
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len, off;
        uint32_t v;

        buf = encode(s, &len);
        off = record_at(buf, 1);
        buf[off] = 99; /* type */
        refused_sealed(buf, len, "unknown type 99");
        buf[off] = STATE_REC_NODE;
        v = htole32(1u << 30); /* payload length past the end */
        memcpy(buf + off + 4, &v, 4);
        refused_sealed(buf, len, "only");
        v = htole32(16); /* shorter than a node */
        memcpy(buf + off + 4, &v, 4);
        refused_sealed(buf, len, "a node record of 16 bytes");
}
END_TEST

START_TEST(test_bad_name_in_stream) {
        _cleanup_(session_state_freep) SessionState *s = sample();
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len, off;

        buf = encode(s, &len);
        off = record_at(buf, 1) + STATE_RECORD_HEADER_SIZE + 80; /* d's name */
        ck_assert_int_eq(buf[off], 'd');
        buf[off] = '/';
        refused_sealed(buf, len, "bad name");
        buf[off] = '\0';
        refused_sealed(buf, len, "bad name");
}
END_TEST

START_TEST(test_fd_slot_twice) {
        _cleanup_(session_state_freep) SessionState *s = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        StateSession ss = {};
        StateNode n = { .id = 2, .type = S_IFREG, .fd_slot = 3 };
        StateHandle h = { .fh = 1, .node = 2, .fd_slot = 4 };
        size_t len;
        int32_t three = htole32(3);

        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(session_state_add_node(s, &n), 0);
        ck_assert_int_eq(session_state_add_handle(s, &h), 0);
        buf = encode(s, &len);
        memcpy(buf + record_at(buf, 2) + STATE_RECORD_HEADER_SIZE + 24, &three, 4);
        refused_sealed(buf, len, "fd slot 3 used twice");
}
END_TEST

/* The largest fd slot is a slot like any other (its index + 1 once overflowed: fuzz-state). */
START_TEST(test_fd_slot_int_max) {
        _cleanup_(session_state_freep) SessionState *s = NULL, *d = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        StateSession ss = {};
        StateNode n = { .id = 2, .type = S_IFREG, .fd_slot = INT32_MAX };
        char err[256] = "";
        size_t len;

        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(session_state_add_node(s, &n), 0);
        buf = encode(s, &len);
        ck_assert_int_eq(session_state_decode(buf, len, STATE_MAX_BYTES, &d, err, sizeof err), 0);
        ck_assert_int_eq(session_state_node(d, 0)->fd_slot, INT32_MAX);
}
END_TEST

/* ---- locks (STATE_REC_LOCK) ---- */

static void add_lock(SessionState *s, uint64_t owner, uint64_t node, uint64_t fh, uint32_t kind, uint32_t type,
                     uint64_t start, uint64_t end, int32_t slot) {
        StateLock l = { .owner = owner, .node = node, .fh = fh, .kind = kind, .type = type, .start = start, .end = end,
                        .fd_slot = slot };
        ck_assert_int_eq(session_state_add_lock(s, &l), 0);
}

/* sample() and locks on f through 0x101: owner 0x77 write [0, 9] (with the owner's fd in slot 0)
 * and read [20, 29], a flock; records 8, 9 and 10. */
static SessionState *sample_locks(void) {
        SessionState *s = sample();

        add_lock(s, 0x77, 3 << 6 | 5, 0x101, STATE_LOCK_POSIX, STATE_LOCK_WRITE, 0, 9, 0);
        add_lock(s, 0x77, 3 << 6 | 5, 0x101, STATE_LOCK_POSIX, STATE_LOCK_READ, 20, 29, -1);
        add_lock(s, 0x88, 3 << 6 | 5, 0x101, STATE_LOCK_FLOCK, STATE_LOCK_WRITE, 0, STATE_LOCK_END_MAX, -1);
        return s;
}

#define LOCK_OWNER (STATE_RECORD_HEADER_SIZE + 0)
#define LOCK_NODE (STATE_RECORD_HEADER_SIZE + 8)
#define LOCK_FH (STATE_RECORD_HEADER_SIZE + 16)
#define LOCK_START (STATE_RECORD_HEADER_SIZE + 24)
#define LOCK_END (STATE_RECORD_HEADER_SIZE + 32)
#define LOCK_KIND (STATE_RECORD_HEADER_SIZE + 40)
#define LOCK_TYPE (STATE_RECORD_HEADER_SIZE + 44)
#define LOCK_SLOT (STATE_RECORD_HEADER_SIZE + 48)
#define LOCK_RESERVED (STATE_RECORD_HEADER_SIZE + 52)

START_TEST(test_locks_round_trip) {
        _cleanup_(session_state_freep) SessionState *d = round_trip(sample_locks());
        const StateLock *l;

        ck_assert_uint_eq(session_state_lock_count(d), 3);
        l = session_state_lock(d, 0);
        ck_assert_uint_eq(l->owner, 0x77);
        ck_assert_uint_eq(l->node, 3 << 6 | 5);
        ck_assert_uint_eq(l->fh, 0x101);
        ck_assert_uint_eq(l->kind, STATE_LOCK_POSIX);
        ck_assert_uint_eq(l->type, STATE_LOCK_WRITE);
        ck_assert_uint_eq(l->start, 0);
        ck_assert_uint_eq(l->end, 9);
        ck_assert_int_eq(l->fd_slot, 0);
        l = session_state_lock(d, 2);
        ck_assert_uint_eq(l->kind, STATE_LOCK_FLOCK);
        ck_assert_uint_eq(l->end, STATE_LOCK_END_MAX);
        ck_assert_int_eq(session_state_lock(d, 1)->fd_slot, -1);
        ck_assert_ptr_null(session_state_lock(d, 3));
}
END_TEST

/* Record rec of sample_locks() (the locks are 8, 9 and 10) with the field at byte field of the record
 * (its header included) changed: refused with want. */
static void lock_patch_refused(unsigned rec, size_t field, uint64_t v, bool wide, const char *want) {
        _cleanup_(session_state_freep) SessionState *s = sample_locks();
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len, off;
        uint32_t v32 = htole32((uint32_t) v);

        buf = encode(s, &len);
        off = record_at(buf, rec) + field;
        if (wide)
                put64(buf + off, v);
        else
                memcpy(buf + off, &v32, 4);
        refused_sealed(buf, len, want);
}

/* One refusal a case: which record, which field, the value, whether it is a u64. */
static const struct {
        unsigned rec;
        size_t field;
        uint64_t v;
        bool wide;
        const char *want;
} lock_refusals[] = {
        { 8, LOCK_NODE, 99 << 6, true, "a lock on node 6336, which is not in the state" },
        { 8, LOCK_FH, 0x999, true, "handle 2457, which is not in the state" },
        { 9, LOCK_FH, 0x202, true, "through handle 514 of node 129" },
        { 8, LOCK_TYPE, 3, false, "bad type 3" },
        { 8, LOCK_TYPE, 0, false, "bad type 0" },
        { 8, LOCK_KIND, 7, false, "unknown kind 7" },
        { 9, LOCK_START, 30, true, "start 30 > end 29" },
        { 9, LOCK_END, STATE_LOCK_END_MAX + 1, true, "past the largest offset" },
        { 10, LOCK_START, 5, true, "not the whole file" },
        { 10, LOCK_SLOT, 3, false, "not the whole file" },
        { 9, LOCK_SLOT, 5, false, "with two fd slots" },
        { 9, LOCK_START, 9, true, "ranges overlap at 9" },
        { 8, LOCK_RESERVED, 1, false, "reserved field set" },
        { 5, STATE_RECORD_HEADER_SIZE + 24, 0, false, "fd slot 0 used twice" }, /* a handle takes the owner's slot */
        { 8, 4, 48, false, "a lock record of 48 bytes" }, /* its payload length */
};

START_TEST(test_lock_refused) {
        lock_patch_refused(lock_refusals[_i].rec, lock_refusals[_i].field, lock_refusals[_i].v, lock_refusals[_i].wide,
                           lock_refusals[_i].want);
}
END_TEST

START_TEST(test_lock_flock_twice) {
        /* the second POSIX range becomes a second flock through the same handle */
        _cleanup_(session_state_freep) SessionState *s = sample_locks();
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len, off;
        uint32_t flock_kind = htole32(STATE_LOCK_FLOCK);

        buf = encode(s, &len);
        off = record_at(buf, 9);
        memcpy(buf + off + LOCK_KIND, &flock_kind, 4);
        put64(buf + off + LOCK_START, 0);
        put64(buf + off + LOCK_END, STATE_LOCK_END_MAX);
        refused_sealed(buf, len, "two flocks through handle 257");
}
END_TEST

START_TEST(test_lock_owner_two_handles) {
        _cleanup_(session_state_freep) SessionState *s = sample_locks();
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;

        add_handle(s, 0x404, 3 << 6 | 5, false); /* a second open file of f */
        add_lock(s, 0x99, 3 << 6 | 5, 0x404, STATE_LOCK_POSIX, STATE_LOCK_READ, 40, 49, -1);
        buf = encode(s, &len);
        /* records: the session, 4 nodes, 4 handles, then the locks (9..12): the new one's owner
         * becomes 0x77, whose other ranges go through 0x101 */
        put64(buf + record_at(buf, 12) + LOCK_OWNER, 0x77);
        refused_sealed(buf, len, "lock owner 77 on node 197 through two handles");
}
END_TEST

/* STATE_MAX_LOCKS + 1 lock records (each fine alone): refused at the one too many. */
START_TEST(test_lock_too_many) {
        _cleanup_(session_state_freep) SessionState *s = NULL;
        _cleanup_free_ uint8_t *buf = NULL, *big = NULL;
        StateSession ss = {};
        size_t len, big_len, rec = STATE_RECORD_HEADER_SIZE + 56;
        uint64_t total;
        uint32_t count;

        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        add_node(s, 2, STATE_ROOT_ID, "f", S_IFREG);
        add_handle(s, 3, 2, false);
        add_lock(s, 9, 2, 3, STATE_LOCK_POSIX, STATE_LOCK_READ, 0, 0, -1);
        buf = encode(s, &len);
        big_len = len + (size_t) STATE_MAX_LOCKS * rec;
        big = malloc(big_len);
        ck_assert_ptr_nonnull(big);
        memcpy(big, buf, len);
        for (size_t k = 0; k < STATE_MAX_LOCKS; k++)
                memcpy(big + len + k * rec, buf + len - rec, rec);
        total = htole64(big_len);
        memcpy(big + 16, &total, 8);
        count = htole32(3 + STATE_MAX_LOCKS + 1);
        memcpy(big + 24, &count, 4);
        session_state_seal(big, big_len);
        refused(big, big_len, STATE_MAX_BYTES, -EFBIG, "more than 1048576 locks");
}
END_TEST

/* 100,000 nodes in directories of 100 (names like a file tree's), half of them open: the state's
 * size and the time to encode and decode it (docs/migration.md quotes the numbers). */
START_TEST(test_hundred_thousand_nodes) {
        _cleanup_(session_state_freep) SessionState *s = NULL, *d = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        StateSession ss = { .proto_major = 7, .proto_minor = 38 };
        struct timespec t0, t1, t2;
        char err[256] = "", name[32];
        uint64_t enc_us, dec_us;
        size_t len;

        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        for (uint64_t i = 0; i < 100000; i++) {
                bool dir = i % 100 == 0;
                uint64_t parent = dir ? STATE_ROOT_ID : 2 + (i / 100) * 100;
                snprintf(name, sizeof name, dir ? "dir-%05" PRIu64 : "file-%05" PRIu64 ".dat", i);
                add_node(s, 2 + i, parent, name, dir ? S_IFDIR : S_IFREG);
                if (i % 2)
                        add_handle(s, 1 + i, 2 + i, false);
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        buf = encode(s, &len);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert_int_eq(session_state_decode(buf, len, STATE_MAX_BYTES, &d, err, sizeof err), 0);
        clock_gettime(CLOCK_MONOTONIC, &t2);
        ck_assert_uint_eq(session_state_node_count(d), 100000);
        enc_us = (uint64_t) ((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
        dec_us = (uint64_t) ((t2.tv_sec - t1.tv_sec) * 1000000 + (t2.tv_nsec - t1.tv_nsec) / 1000);
        fprintf(stderr, "state of 100000 nodes and 50000 handles: %zu bytes, encode %" PRIu64 " us, decode %" PRIu64 " us\n",
                len, enc_us, dec_us);
        ck_assert_timing_lt(enc_us + dec_us, 2000000);
}
END_TEST


/* ---- the journal (session_state_from_journal) ---- */

/* One journal entry of a node record (fd: whether the entry carries an fd standing for it). */
typedef struct JEntry {
        uint8_t data[2048];
        size_t len;
        int fd;
} JEntry;

static void j_node(JEntry *e, uint64_t id, uint64_t parent, const char *name, uint32_t type, int fd) {
        StateNode n = { .id = id, .nlookup = 1, .parent = parent, .name = (char *) name, .dev = 0x801,
                        .ino = 1000 + id, .type = type, .fd_slot = fd >= 0 ? 0 : -1 };
        ssize_t len = session_state_record_node(&n, e->data, sizeof e->data);

        ck_assert_int_gt(len, 0);
        e->len = (size_t) len;
        e->fd = fd;
}

static void j_handle(JEntry *e, uint64_t fh, uint64_t node, int fd, bool flock) {
        StateHandle h = { .fh = fh, .node = node, .open_flags = 02, .fd_slot = 0 };
        ssize_t len = session_state_record_handle(&h, e->data, sizeof e->data);

        ck_assert_int_gt(len, 0);
        e->len = (size_t) len;
        e->fd = fd;
        if (flock) {
                StateLock l = { .node = node, .fh = fh, .start = 0, .end = STATE_LOCK_END_MAX, .kind = STATE_LOCK_FLOCK,
                                .type = STATE_LOCK_READ, .fd_slot = -1 };
                len = session_state_record_lock(&l, e->data + e->len, sizeof e->data - e->len);
                ck_assert_int_gt(len, 0);
                e->len += (size_t) len;
        }
}

static void j_posix(JEntry *e, uint64_t owner, uint64_t node, uint64_t fh, int fd) {
        e->len = 0;
        for (int k = 0; k < 2; k++) {
                StateLock l = { .owner = owner, .node = node, .fh = fh, .start = (uint64_t) k * 100,
                                .end = (uint64_t) k * 100 + 9, .kind = STATE_LOCK_POSIX, .type = STATE_LOCK_WRITE,
                                .fd_slot = k == 0 ? 0 : -1 };
                ssize_t len = session_state_record_lock(&l, e->data + e->len, sizeof e->data - e->len);
                ck_assert_int_gt(len, 0);
                e->len += (size_t) len;
        }
        e->fd = fd;
}

static int from_journal(JEntry *je, size_t n, SessionState **s, size_t *dropped, int32_t *fd_entry, char *err,
                        size_t errlen) {
        StateSession ss = { .proto_major = 7, .proto_minor = 38 };
        StateJournalEntry e[16];

        ck_assert_uint_le(n, 16);
        for (size_t i = 0; i < n; i++)
                e[i] = (StateJournalEntry) { je[i].data, je[i].len, je[i].fd };
        return session_state_from_journal(&ss, e, n, STATE_MAX_NODES, s, dropped, fd_entry, err, errlen);
}

/* Entries in any order (a child before its parent) come back as a session, parents first; each
 * entry's fd becomes an fd slot of the records that name it; an unnamed node keeps its slot. */
START_TEST(test_journal_round_trip) {
        static JEntry je[6];
        _cleanup_(session_state_freep) SessionState *s = NULL;
        int32_t fd_entry[16];
        size_t dropped = 99;
        char err[256] = "";
        int n;

        j_node(&je[0], 3 << 6, 2 << 6, "f", S_IFREG, -1);
        j_handle(&je[1], 0x101, 3 << 6, 17, true);
        j_node(&je[2], 2 << 6, STATE_ROOT_ID, "d", S_IFDIR, -1);
        j_node(&je[3], 4 << 6, 0, NULL, S_IFREG, 23);
        j_posix(&je[4], 0xabc, 3 << 6, 0x101, 31);
        j_handle(&je[5], 0x202, 2 << 6, 37, false);
        n = from_journal(je, 6, &s, &dropped, fd_entry, err, sizeof err);
        ck_assert_msg(n == 4, "%d: %s", n, err);
        ck_assert_uint_eq(dropped, 0);
        ck_assert_uint_eq(session_state_node_count(s), 3);
        ck_assert_uint_eq(session_state_node(s, 0)->id == (2 << 6) || session_state_node(s, 0)->id == (4 << 6), true);
        ck_assert_uint_eq(session_state_handle_count(s), 2);
        ck_assert_uint_eq(session_state_lock_count(s), 3);
        /* Every slot names the entry whose fd it is. */
        for (size_t i = 0; i < session_state_handle_count(s); i++) {
                const StateHandle *h = session_state_handle(s, i);
                ck_assert_int_ge(h->fd_slot, 0);
                ck_assert_int_eq(je[fd_entry[h->fd_slot]].fd, h->fh == 0x101 ? 17 : 37);
        }
        ck_assert_int_eq(je[fd_entry[session_state_find_node(s, 4 << 6)->fd_slot]].fd, 23);
        ck_assert_int_eq(session_state_find_node(s, 3 << 6)->fd_slot, -1);
        for (size_t i = 0; i < session_state_lock_count(s); i++) {
                const StateLock *l = session_state_lock(s, i);
                if (l->kind == STATE_LOCK_POSIX && l->start == 0)
                        ck_assert_int_eq(je[fd_entry[l->fd_slot]].fd, 31);
                else
                        ck_assert_int_eq(l->fd_slot, -1);
        }
}
END_TEST

/* What a death between two changes can leave: a node whose parent is gone (and its child), a
 * handle whose node is, a lock whose handle is: each dropped, the rest kept. A malformed entry
 * and one with a session record are dropped alone. */
START_TEST(test_journal_drops_what_is_out_of_step) {
        static JEntry je[8];
        _cleanup_(session_state_freep) SessionState *s = NULL;
        int32_t fd_entry[16];
        size_t dropped = 0;
        char err[256] = "";
        int n;

        j_node(&je[0], 3 << 6, 2 << 6, "orphan", S_IFDIR, -1);    /* parent 2 not journaled */
        j_node(&je[1], 5 << 6, 3 << 6, "grandchild", S_IFREG, -1); /* its parent goes too */
        j_handle(&je[2], 0x101, 5 << 6, 11, false);                /* on a node that goes */
        j_posix(&je[3], 0xabc, 6 << 6, 0x999, 12);                 /* through a handle never journaled */
        j_node(&je[4], 6 << 6, STATE_ROOT_ID, "kept", S_IFREG, -1);
        memcpy(je[5].data, "\x02\x00\x00\x00\xff\xff\x00\x00garbage", 16); /* runs past its end */
        je[5].len = 16;
        je[5].fd = -1;
        {
                static const uint8_t session_rec[8 + 40] = { 1, 0, 0, 0, 40, 0, 0, 0, 7 };
                memcpy(je[6].data, session_rec, sizeof session_rec);
                je[6].len = sizeof session_rec;
                je[6].fd = -1;
        }
        j_handle(&je[7], 0x202, 6 << 6, 13, false);
        n = from_journal(je, 8, &s, &dropped, fd_entry, err, sizeof err);
        ck_assert_msg(n >= 0, "%d: %s", n, err);
        ck_assert_uint_eq(session_state_node_count(s), 1);
        ck_assert_uint_eq(session_state_node(s, 0)->id, 6 << 6);
        ck_assert_uint_eq(session_state_handle_count(s), 1);
        ck_assert_uint_eq(session_state_handle(s, 0)->fh, 0x202);
        ck_assert_uint_eq(session_state_lock_count(s), 0);
        ck_assert_uint_eq(dropped, 2 + 2 + 1 + 2); /* 2 bad entries, 2 nodes, 1 handle, 2 lock ranges */
}
END_TEST

/* What no death can leave is refused whole: two entries for one node id. */
START_TEST(test_journal_duplicate_refused) {
        static JEntry je[2];
        SessionState *s = NULL;
        int32_t fd_entry[16];
        size_t dropped = 0;
        char err[256] = "";

        j_node(&je[0], 3 << 6, STATE_ROOT_ID, "a", S_IFREG, -1);
        j_node(&je[1], 3 << 6, STATE_ROOT_ID, "b", S_IFREG, -1);
        ck_assert_int_eq(from_journal(je, 2, &s, &dropped, fd_entry, err, sizeof err), -EBADMSG);
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(err, "twice"), "%s", err);
}
END_TEST

/* A writer cannot make a record the reader would refuse. */
START_TEST(test_journal_record_refuses) {
        uint8_t buf[512];
        StateNode n = { .id = 1, .fd_slot = -1 };
        StateNode big = { .id = 5, .parent = STATE_ROOT_ID, .name = (char *) "x", .fd_slot = -1 };

        ck_assert_int_eq(session_state_record_node(&n, buf, sizeof buf), -EINVAL);
        ck_assert_int_eq(session_state_record_node(&big, buf, 40), -ENOBUFS);
}
END_TEST

static Suite *state_suite(void) {
        Suite *s = suite_create("session-state");
        TCase *tc = tcase_create("format");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_round_trip);
        tcase_add_test(tc, test_node_budget);
        tcase_add_test(tc, test_fd_slots_and_handles);
        tcase_add_test(tc, test_builder_refuses);
        tcase_add_test(tc, test_truncated_and_trailing);
        tcase_add_test(tc, test_oversized);
        tcase_add_test(tc, test_newer_version_and_magic);
        tcase_add_test(tc, test_bad_checksum);
        tcase_add_test(tc, test_dangling_and_duplicates);
        tcase_add_test(tc, test_parent_loop);
        tcase_add_test(tc, test_record_framing);
        tcase_add_test(tc, test_bad_name_in_stream);
        tcase_add_test(tc, test_fd_slot_twice);
        tcase_add_test(tc, test_fd_slot_int_max);
        tcase_add_test(tc, test_locks_round_trip);
        tcase_add_loop_test(tc, test_lock_refused, 0, (int) (sizeof lock_refusals / sizeof lock_refusals[0]));
        tcase_add_test(tc, test_lock_flock_twice);
        tcase_add_test(tc, test_lock_owner_two_handles);
        tcase_add_test(tc, test_lock_too_many);
        tcase_add_test(tc, test_hundred_thousand_nodes);
        tcase_add_test(tc, test_journal_round_trip);
        tcase_add_test(tc, test_journal_drops_what_is_out_of_step);
        tcase_add_test(tc, test_journal_duplicate_refused);
        tcase_add_test(tc, test_journal_record_refuses);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(state_suite)
