/* session-state.h: the state of a FUSE session (its negotiated options, the nodes the guest holds,
 * its open handles) as plain records, and their one byte format.
 *
 * Two halves that know nothing of each other: an exporter (the FUSE server and the passthrough of a
 * running daemon) fills a SessionState and encodes it; an importer decodes bytes into a
 * SessionState and re-creates what it describes. Live migration (vhost-user DEVICE_STATE, the
 * composition's migration.c) is one user; handing a running session to a new process (crash
 * survival, live upgrade) is another: there the fds travel beside the stream (SCM_RIGHTS) and a
 * record's fd_slot names the fd that stands for it, so the receiver takes that fd instead of
 * locating the file again. Nothing here does I/O.
 *
 * The byte format (docs/migration.md has it with the reasons), all integers little-endian:
 *
 *   header, STATE_HEADER_SIZE (64) bytes:
 *     0   magic        8 bytes "VUFSSTAT"
 *     8   version      u32, STATE_VERSION; a reader refuses a newer one
 *     12  header_size  u32, 64
 *     16  total_length u64, header and records, at most the reader's cap
 *     24  record_count u32
 *     28  reserved     u32, 0
 *     32  sha256       32 bytes: SHA-256 of the whole stream with this field zeroed
 *   records, record_count of them, each a u16 type, u16 reserved (0), u32 payload length, payload:
 *     STATE_REC_SESSION (exactly one): u32 proto_major, u32 proto_minor, u64 init_flags, u32 max_write,
 *                         u32 max_readahead, u32 max_pages, u32 time_gran, u64 fs_flags  (40 bytes)
 *     STATE_REC_NODE:    u64 id, u64 nlookup, u64 parent, u64 dev, u64 ino, u64 mnt_id,
 *                         u64 generation, u32 type, i32 fd_slot, u32 flags, u16 name_len,
 *                         u16 handle_len, u32 handle_type, u32 reserved (80 bytes),
 *                         then name_len bytes of name, then handle_len bytes of file handle
 *     STATE_REC_HANDLE:  u64 fh, u64 node, i32 open_flags, u32 flags, i32 fd_slot, u32 reserved,
 *                         u64 dir_offset  (40 bytes)
 *     STATE_REC_LOCK:    u64 owner, u64 node, u64 fh, u64 start, u64 end, u32 kind, u32 type,
 *                         i32 fd_slot, u32 reserved  (56 bytes): one range of a lock the guest holds
 *
 * What the reader refuses, each with its own message: a stream shorter than its header or than
 * total_length says, longer than it, over the cap; a wrong magic, header size or reserved field; a
 * newer version; a bad checksum; a record that runs past the end, a payload of the wrong size, an
 * unknown record type; no session record or two; node id 0 or 1 (the root is implicit), over
 * STATE_ID_MAX or twice;
 * a parent that is not 0, 1 or a directory node of the stream, or a chain of parents that loops; a
 * name that is empty or longer than STATE_PATH_MAX, holds NUL, an empty, "." or ".." component or
 * one over STATE_NAME_MAX, or comes without a parent (or a parent without a name); a file handle over STATE_HANDLE_MAX bytes; a handle fh 0, over STATE_ID_MAX or twice, or on a node the
 * stream does not hold; an fd slot below -1 or used twice; more than STATE_MAX_NODES nodes or
 * STATE_MAX_HANDLES handles; a lock of an unknown kind or type, with start > end or an end past
 * STATE_LOCK_END_MAX, through an fh the stream does not hold or that is open on another node, a
 * flock not over the whole file or with an fd slot, or twice on one fh, on a node the stream does
 * not hold, a lock owner's POSIX
 * ranges on one node through two fhs, with two fd slots, or overlapping; more than
 * STATE_MAX_LOCKS locks. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

#define STATE_MAGIC "VUFSSTAT"
#define STATE_VERSION 1u
#define STATE_HEADER_SIZE 64u
#define STATE_RECORD_HEADER_SIZE 8u

enum {
        STATE_REC_SESSION = 1,
        STATE_REC_NODE = 2,
        STATE_REC_HANDLE = 3,
        STATE_REC_LOCK = 4,
};

/* Bounds of a stream a reader accepts. The byte cap is the caller's (session_state_decode's
 * max_len, at most STATE_MAX_BYTES); a million nodes with 255-byte names take about 340 MB. */
#define STATE_MAX_BYTES (1ull << 30)
#define STATE_MAX_NODES (4u << 20)
#define STATE_MAX_HANDLES (4u << 20)
/* Lock ranges: a guest holding more fails the save (it stays on the source). */
#define STATE_MAX_LOCKS (1u << 20)
#define STATE_NAME_MAX 255u   /* one component */
#define STATE_PATH_MAX 4095u  /* a name of several components */
#define STATE_HANDLE_MAX 128u /* MAX_HANDLE_SZ */

/* The largest node id and fh a stream may restore. Both are a sequence number shifted left past
 * the shard bits (inode-map.h, handle-map.h), and a restored id moves its shard's sequence past
 * it: from UINT64_MAX the next sequence (2^58) shifted out to 0, and ids were issued again from
 * the start, over restored ones. A source counts up from 1 and never comes near. */
#define STATE_ID_MAX ((UINT64_C(1) << 62) - 1)

/* The root's node id (FS_ROOT_ID): always there, never a record. */
#define STATE_ROOT_ID 1u

typedef struct StateSession {
        uint32_t proto_major, proto_minor;
        uint64_t init_flags; /* negotiated FUSE_INIT flags, flags | flags2 << 32 */
        uint32_t max_write, max_readahead, max_pages, time_gran;
        uint64_t fs_flags; /* STATE_FS_*: what the filesystem itself took from INIT */
} StateSession;

#define STATE_FS_WRITEBACK (1ull << 0)

/* StateNode.flags */
#define STATE_NODE_UNLINKED (1u << 0) /* the source saw no name for it (deleted while held) */

typedef struct StateNode {
        uint64_t id;      /* the guest's node id, > 1 */
        uint64_t nlookup; /* the guest's lookup count */
        /* Where to find it: name in the directory node parent (STATE_ROOT_ID for the share's root).
         * name is one component, or a relative path of several ("a/b/c") when the directories in
         * between are no nodes of the state (live migration sends every path from the root). A
         * receiver resolves it one component at a time, following no symlink. parent 0 and no
         * name when the source knows no path (a receiver then needs fd_slot or the file handle). */
        uint64_t parent;
        char *name; /* owned; NULL with parent 0 */
        /* Identity on the source: device, inode number, mount id (0 unknown), generation (0
         * unknown) and S_IFMT type. A receiver compares what it opens against type always and
         * against the rest when it is the same host. */
        uint64_t dev, ino, mnt_id, generation;
        uint32_t type;
        uint32_t flags;
        int32_t fd_slot; /* index of an fd passed beside the stream, or -1 */
        uint32_t handle_type;
        uint16_t handle_len; /* 0: no file handle */
        uint8_t handle[STATE_HANDLE_MAX];
} StateNode;

/* StateHandle.flags */
#define STATE_HANDLE_DIR (1u << 0)

typedef struct StateHandle {
        uint64_t fh;   /* the guest's handle id, > 0 */
        uint64_t node; /* the node it was opened on */
        int32_t open_flags; /* as used on the host */
        uint32_t flags;
        int32_t fd_slot;
        uint64_t dir_offset; /* directories: the offset the guest continues from (informative) */
} StateHandle;

/* StateLock.kind */
#define STATE_LOCK_POSIX 1u /* a POSIX (fcntl, OFD) lock of one guest lock owner */
#define STATE_LOCK_FLOCK 2u /* a flock() lock: it belongs to the open file, the handle fh */
/* StateLock.type */
#define STATE_LOCK_READ 1u
#define STATE_LOCK_WRITE 2u
/* The end of a range that goes to the end of the file (FUSE's OFFSET_MAX). */
#define STATE_LOCK_END_MAX ((uint64_t) INT64_MAX)

/* One range of a lock the guest holds, as vufsd granted it: a POSIX lock owner's locks on a node
 * are the set of its ranges after the kernel's replace, split and merge rules (so ranges of one
 * owner never overlap, and adjacent ones differ in type); a flock covers the whole file. */
typedef struct StateLock {
        uint64_t owner; /* the guest's lock owner (POSIX); as the guest sent it (flock) */
        uint64_t node;  /* the node it is on */
        uint64_t fh;    /* the handle it was taken through (POSIX: the owner's first one) */
        uint64_t start, end; /* inclusive; flock: 0 and STATE_LOCK_END_MAX */
        uint32_t kind, type;
        /* POSIX, a hand-over: the lock owner's open file description, which holds its locks,
         * passed beside the stream (on one of the owner's records), or -1. Flock locks travel
         * with their handle's fd. */
        int32_t fd_slot;
} StateLock;

typedef struct SessionState SessionState;

int session_state_new(SessionState **ret);
SessionState *session_state_free(SessionState *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(SessionState *, session_state_free);

/* ---- building (the exporting half) ---- */

void session_state_set_session(SessionState *s, const StateSession *session);
/* Copies n (and its name). -EINVAL for what the reader would refuse in one record (id 0 or 1,
 * a bad name, a handle too long); the relations between records are checked when encoding. */
int session_state_add_node(SessionState *s, const StateNode *n);
int session_state_add_handle(SessionState *s, const StateHandle *h);
int session_state_add_lock(SessionState *s, const StateLock *l);

/* The stream: *ret (malloc'd) of *ret_len bytes. Checks the records against each other first as
 * the reader would (so a writer never produces what a reader refuses): -EINVAL with the reason in
 * err. */
int session_state_encode(SessionState *s, uint8_t **ret, size_t *ret_len, char *err, size_t errlen);

/* Writes the checksum of the len-byte stream buf into its header (len >= STATE_HEADER_SIZE): encode
 * does it; tests and the fuzz target seal streams they made by hand so that the checks behind the
 * checksum are reached. */
void session_state_seal(uint8_t *buf, size_t len);

/* ---- reading (the importing half) ---- */

/* From the first STATE_HEADER_SIZE bytes of a stream: its total length, checked against max_len
 * (a reader knows how much to read before it reads it). 0, or -EBADMSG / -EPROTONOSUPPORT /
 * -EFBIG with the reason in err. */
int session_state_peek_length(const uint8_t *hdr, size_t n, uint64_t max_len, uint64_t *ret_total, char *err,
                              size_t errlen);

/* Decodes and checks a whole stream (max_len: the caller's cap, at most STATE_MAX_BYTES). On
 * failure a negative errno (-EBADMSG malformed, -EPROTONOSUPPORT newer version, -EFBIG over a
 * cap) and the reason in err. Nodes come out parents first. */
int session_state_decode(const uint8_t *buf, size_t len, uint64_t max_len, SessionState **ret, char *err,
                         size_t errlen);
/* The same, refusing (-EFBIG) a stream of more than max_nodes nodes (at most STATE_MAX_NODES) as
 * soon as its record comes: a receiver passes its own node budget (--max-nodes), so that a hostile
 * stream cannot make the decoder hold more nodes than the session could (a decoded node takes
 * about 560 bytes: 4 Mi minimal records made a 2.3 GB peak). */
int session_state_decode_limited(const uint8_t *buf, size_t len, uint64_t max_len, uint64_t max_nodes,
                                 SessionState **ret, char *err, size_t errlen);

/* ---- a journal: the state kept one entry at a time (crash survival, docs/survival.md) ----
 *
 * A running daemon that must be able to die at any instant keeps its session outside itself as a
 * set of entries, each replaced or removed as the part of the session it describes changes: one
 * per node, one per open handle (with its flock), one per POSIX lock owner on a node (its ranges).
 * An entry's bytes are whole records of the stream format above, written by the functions below;
 * a record's fd_slot is 0 when the entry's one fd (kept beside it) stands for it, -1 otherwise. */

/* One record into buf (size bytes): its length, -EINVAL for what the reader would refuse in one
 * record, -ENOBUFS when it does not fit. */
ssize_t session_state_record_node(const StateNode *n, uint8_t *buf, size_t size);
ssize_t session_state_record_handle(const StateHandle *h, uint8_t *buf, size_t size);
ssize_t session_state_record_lock(const StateLock *l, uint8_t *buf, size_t size);

typedef struct StateJournalEntry {
        const uint8_t *data; /* whole records */
        size_t len;
        int fd; /* the entry's fd, or -1 */
} StateJournalEntry;

/* The session of n entries (found in any order), with session as its session record: each entry's
 * records go through the reader's checks of a single record and an entry that fails them is
 * dropped whole; then what a death between two changes can leave inconsistent is dropped too (a
 * node whose parent is not there, a handle whose node is not, a lock whose handle is not), and
 * the rest is checked as a decoded stream is (two nodes with one id, a loop of parents...: the
 * whole fails, -EBADMSG with the reason in err). ret_fd_entry (room for n) gets, for each fd slot
 * of the state, the index of the entry whose fd it is. Returns the number of fd slots;
 * *ret_dropped the entries and records dropped. */
int session_state_from_journal(const StateSession *session, const StateJournalEntry *e, size_t n, uint64_t max_nodes,
                               SessionState **ret, size_t *ret_dropped, int32_t *ret_fd_entry, char *err,
                               size_t errlen);

/* ---- reading what a state holds (both halves) ---- */

/* NULL when none was set. */
const StateSession *session_state_session(const SessionState *s);
size_t session_state_node_count(const SessionState *s);
const StateNode *session_state_node(const SessionState *s, size_t i);
/* By id; NULL when the state has no such node. */
const StateNode *session_state_find_node(const SessionState *s, uint64_t id);
size_t session_state_handle_count(const SessionState *s);
const StateHandle *session_state_handle(const SessionState *s, size_t i);
size_t session_state_lock_count(const SessionState *s);
const StateLock *session_state_lock(const SessionState *s, size_t i);
