/* fuse-client.h: FUSE requests over the test frontend's virtqueues, with strict reply checks. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/fuse.h>

#include "frontend.h"

#define FE_FUSE_MAX_CUTS 64
#define FE_FUSE_MAX_PIECES 512

/* How a request's readable and writable byte streams are cut into descriptors. */
typedef enum FeSplit {
        FE_SPLIT_NATURAL,  /* like Linux: header | args | data pages; out header | reply struct | pages */
        FE_SPLIT_SINGLE,   /* one readable and one writable descriptor */
        FE_SPLIT_RANDOM,   /* random cut points, headers split too (seeded) */
        FE_SPLIT_TINY,     /* pieces of at most 8 bytes for the first 256 bytes of each side */
} FeSplit;

typedef struct FeFusePiece {
        uint64_t gpa;
        void *host;
        size_t len;             /* descriptor length */
        size_t alloc;           /* bytes allocated; [len, alloc) holds poison to catch overruns */
        bool write;
} FeFusePiece;

typedef struct FeFuseReq {
        /* Readable stream: in_header, args, names, data; the header's len is filled in at submit unless
         * keep_len (hostile tests set any len they like). */
        uint8_t *in;
        size_t in_len, in_cap;
        size_t in_cuts[FE_FUSE_MAX_CUTS];
        unsigned n_in_cuts;
        bool keep_len;
        /* Writable stream capacity (0 for FORGET-like requests). */
        size_t out_cap;
        bool no_reply;          /* FORGET, BATCH_FORGET: used.len must be 0 */
        bool allow_empty;       /* hostile requests: used.len 0 (request dropped) is acceptable */
        uint32_t opcode;
        uint64_t unique;

        /* Set at submit. */
        unsigned queue;
        uint16_t head;
        FeFusePiece pieces[FE_FUSE_MAX_PIECES];
        unsigned n_pieces;

        /* Set at completion. */
        bool done;
        uint32_t used_len;
        struct fuse_out_header oh;
        uint8_t *out;           /* whole writable stream as the backend left it (out_cap bytes) */
        const uint8_t *payload; /* out + 16 */
        size_t payload_len;     /* oh.len - 16 when valid */
        int status;             /* 0 = reply well formed; -EPROTO = the backend broke the protocol */
        char problem[160];
} FeFuseReq;

typedef struct FeFuse {
        Frontend *fe;
        unsigned queue;         /* request queue for convenience calls (default 1) */
        unsigned hiprio_queue;  /* FORGET / BATCH_FORGET (default 0) */
        FeSplit split;
        unsigned seed;
        bool indirect;          /* use indirect tables for multi-descriptor chains if negotiated */
        bool mix_regions;       /* alternate pieces between memory regions */
        bool kick_always;       /* kick even when the backend suppressed notifications */
        uint64_t next_unique;
        bool initialized;
        struct fuse_init_out init;
        unsigned proto_errors;  /* replies that broke the protocol; tests assert this stays 0 */
        char last_problem[200];
        uint32_t uid, gid, pid;
} FeFuse;

int fe_fuse_new(FeFuse **ret, Frontend *fe);
FeFuse *fe_fuse_free(FeFuse *c);

/* Builds a request: in_header (unique, nodeid, creds) followed by nothing yet. out_payload is the writable
 * capacity after the 16-byte out header. */
int fe_fuse_req_new(FeFuseReq **ret, FeFuse *c, uint32_t opcode, uint64_t nodeid, size_t out_payload);
FeFuseReq *fe_fuse_req_free(FeFuse *c, FeFuseReq *req);
/* Appends bytes as one natural argument (a cut point after it). */
int fe_fuse_req_add(FeFuseReq *req, const void *data, size_t len);
int fe_fuse_req_add_str(FeFuseReq *req, const char *s);
/* Appends bulk data cut at page boundaries like Linux. */
int fe_fuse_req_add_data(FeFuseReq *req, const void *data, size_t len);
static inline struct fuse_in_header *fe_fuse_req_hdr(FeFuseReq *req) {
        return (struct fuse_in_header *) req->in;
}

/* Puts the request on a queue (c->queue unless queue_override >= 0), publishes and kicks. */
int fe_fuse_submit(FeFuse *c, FeFuseReq *req, int queue_override);
/* Waits for any completion on queue; returns the finished request (checked, see FeFuseReq.status). */
int fe_fuse_wait(FeFuse *c, unsigned queue, int timeout_ms, FeFuseReq **ret);
/* Submit + wait for this request. Returns the reply's error (0 or -errno), or -EPROTO/-ETIMEDOUT when the
 * backend misbehaved (counted in proto_errors, explained in last_problem). */
int fe_fuse_call(FeFuse *c, FeFuseReq *req);
/* Releases the guest memory of a request that will never complete (ring abandoned). */
void fe_fuse_req_abandon(FeFuse *c, FeFuseReq *req);

/* Any request: its arguments one after the other (a name with its NUL: len strlen + 1; len 0:
 * left out), the reply's payload copied into out (at most out_size bytes, also the writable
 * space). Returns the payload length or the reply's error (-EPROTO/-ETIMEDOUT as fe_fuse_call()). */
typedef struct FeFuseArg {
        const void *data;
        size_t len;
} FeFuseArg;
int fe_fuse_request(FeFuse *c, uint32_t opcode, uint64_t nodeid, const FeFuseArg *args, unsigned n_args, void *out,
                    size_t out_size);

/* Convenience calls; negative errno from the reply or -EPROTO/-ETIMEDOUT. LOOKUP answers a negative entry
 * (success with nodeid 0) with -ENOENT, as the guest treats it. */
int fe_fuse_init(FeFuse *c);
int fe_fuse_lookup(FeFuse *c, uint64_t parent, const char *name, struct fuse_entry_out *ret);
int fe_fuse_getattr(FeFuse *c, uint64_t nodeid, struct fuse_attr_out *ret);
int fe_fuse_setattr_size(FeFuse *c, uint64_t nodeid, uint64_t size, struct fuse_attr_out *ret);
int fe_fuse_open(FeFuse *c, uint64_t nodeid, uint32_t flags, uint64_t *ret_fh);
int fe_fuse_opendir(FeFuse *c, uint64_t nodeid, uint64_t *ret_fh);
int fe_fuse_create(FeFuse *c, uint64_t parent, const char *name, uint32_t flags, uint32_t mode,
                   struct fuse_entry_out *ret_entry, uint64_t *ret_fh);
int fe_fuse_mkdir(FeFuse *c, uint64_t parent, const char *name, uint32_t mode, struct fuse_entry_out *ret);
/* Returns bytes read into buf. */
int fe_fuse_read(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t offset, void *buf, uint32_t size);
/* Returns bytes written. */
int fe_fuse_write(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t offset, const void *buf, uint32_t size);
/* READDIR (plus = READDIRPLUS) into buf; returns the reply length. */
int fe_fuse_readdir(FeFuse *c, bool plus, uint64_t nodeid, uint64_t fh, uint64_t offset, void *buf, uint32_t size);
/* Reads a whole directory with READDIR and calls fn for each name; returns the entry count. */
/* The names of a READDIR reply (buf, len bytes; . and .. skipped) appended to names (space
 * separated, size bytes), the offset of the last entry in *off: their count, -ENOBUFS when names is
 * full. */
int fe_fuse_dirent_names(const uint8_t *buf, int len, char *names, size_t size, uint64_t *off);
/* Whether names (as fe_fuse_dirent_names() makes it) has entry-00 .. entry-<count - 1> once each;
 * the first that has not, and how, in bad. */
bool fe_fuse_entries_once(const char *names, int count, char *bad, size_t size);
int fe_fuse_list_dir(FeFuse *c, uint64_t nodeid, void (*fn)(const char *name, uint32_t type, void *ud), void *ud);
int fe_fuse_release(FeFuse *c, uint64_t nodeid, uint64_t fh, bool dir);
int fe_fuse_flush(FeFuse *c, uint64_t nodeid, uint64_t fh);
int fe_fuse_fsync(FeFuse *c, uint64_t nodeid, uint64_t fh);
/* SETLK as the guest sends it (flock: FUSE_LK_FLOCK, the lock belongs to fh); GETLK: the lock that
 * would conflict with owner's type on [start, end] in *ret (type F_UNLCK when none). */
int fe_fuse_setlk(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t owner, bool flock, uint32_t type, uint64_t start,
                  uint64_t end);
int fe_fuse_getlk(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t owner, uint32_t type, uint64_t start, uint64_t end,
                  struct fuse_file_lock *ret);

int fe_fuse_unlink(FeFuse *c, uint64_t parent, const char *name);
int fe_fuse_rmdir(FeFuse *c, uint64_t parent, const char *name);
int fe_fuse_rename(FeFuse *c, uint64_t parent, const char *name, uint64_t newparent, const char *newname);
int fe_fuse_statfs(FeFuse *c, struct fuse_statfs_out *ret);
/* FORGET on the hiprio queue; waits for the chain to come back with used.len 0. */
int fe_fuse_forget(FeFuse *c, uint64_t nodeid, uint64_t nlookup);
int fe_fuse_batch_forget(FeFuse *c, const struct fuse_forget_one *items, uint32_t count);
int fe_fuse_destroy(FeFuse *c);

/* Deterministic test data: byte i of a file is a function of its offset and seed. */
void fe_fuse_pattern(void *buf, size_t len, uint64_t offset, uint32_t seed);
/* CREATE name in the root, WRITE size bytes of pattern, LOOKUP (size), OPEN, READ back and compare, find it
 * with READDIR, UNLINK, LOOKUP = ENOENT, FORGET. 0 or -EPROTO with the reason in c->last_problem. */
int fe_fuse_roundtrip(FeFuse *c, const char *name, size_t size, uint32_t seed);
