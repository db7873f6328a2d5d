/* fuse-server.h: decodes, validates and dispatches one FUSE request; encodes its reply.
 *
 * The one choke point for guest FUSE input. Safe to call from several threads at once (queue
 * threads and pool workers); the filesystem state behind it is locked internally. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <linux/fuse.h>

#include "chain.h"
#include "fs-ops.h"
#include "fs-options.h"

typedef struct FuseServer FuseServer;

/* What one request was, for statistics. */
typedef struct FuseReqInfo {
        uint32_t opcode; /* as sent; may be an unknown value */
        int error;       /* 0 or negative errno of the reply */
        uint64_t bytes;  /* payload bytes read or written for READ/WRITE, else 0 */
        bool replied;    /* false for FORGET, BATCH_FORGET, INTERRUPT, undecodable requests */
} FuseReqInfo;

/* Serves the filesystem fs through ops (fs-ops.h). The server does not own fs: whoever made it
 * frees it after fuse_server_free(). opts->shared_dir is not used (nor kept). */
int fuse_server_new(FuseServer **ret, const FsOptions *opts, const FsOps *ops, void *fs);
FuseServer *fuse_server_free(FuseServer *s);

/* Handles one request: in = the device-readable bytes of the chain, out = the device-writable ones.
 * Returns the number of bytes written into out (the used-ring length; 0 when there is no reply).
 * Never fails: every problem becomes an error reply, or no reply when none can be written. */
uint32_t fuse_server_process(FuseServer *s, ChainIter *in, ChainIter *out, FuseReqInfo *info);

/* The same for a request whose header the caller has already copied out of guest memory (h) and
 * used to decide where it runs; in holds the bytes after the header. The guest may have changed
 * its header since: only h counts. may_wait: the calling thread may wait for a lock for as long as
 * another owner holds it (a helper thread); when false a blocking SETLKW makes one attempt and is
 * answered ENOLCK if the lock is taken, so a queue thread or pool worker is never held up. */
uint32_t fuse_server_process_header(FuseServer *s, const struct fuse_in_header *h, ChainIter *in, ChainIter *out,
                                    bool may_wait, FuseReqInfo *info);

/* The session for saving it (live migration, docs/migration.md): false before INIT (or after
 * DESTROY), else true with the negotiated flags (flags | flags2 << 32). */
bool fuse_server_get_session(FuseServer *s, uint64_t *ret_flags);
/* Resumes a session negotiated by another server (a migration source) without an INIT: the
 * filesystem starts a new session (session_reset, writeback as the flags say) and requests are
 * served as after an INIT that negotiated flags. -EINVAL when flags hold one this server would not
 * have negotiated with its options (a stream from a differently configured source, or a hostile
 * one). The caller then restores the filesystem's nodes and handles. */
int fuse_server_resume_session(FuseServer *s, uint64_t flags);
/* A request whose host call a serving process that died made and recorded (request-progress.h)
 * before it could reply: validated and decoded as ever, then answered from result without calling
 * the host again: MKDIR, MKNOD and SYMLINK by looking up the name they made (0) or with the error,
 * UNLINK, RMDIR and RENAME with result, WRITE with the count written. Other requests never record
 * a result. started: the process died in the host call (result: whether the name existed before
 * it): what the name is now tells whether the call happened; when it did not, the request runs. */
uint32_t fuse_server_replay(FuseServer *s, const struct fuse_in_header *h, ChainIter *in, ChainIter *out,
                            bool started, int64_t result, FuseReqInfo *info);

/* Drops every inode and handle of the session (frontend disconnected or device reset). */
void fuse_server_reset(FuseServer *s);

/* Ends every blocking wait in progress (SETLKW) with EINTR, as if the guest had interrupted it:
 * the device calls it when a queue must stop while such a request is still waiting (a stopped VM
 * cannot release the lock it waits for). Other requests are not affected. */
void fuse_server_cancel_waits(FuseServer *s);

/* A blocking lock request (header h, a SETLKW) has been handed to a thread of its own and waits to
 * start: an INTERRUPT that arrives meanwhile finds no waiter, so it is kept for the request, which
 * then answers EINTR as soon as it starts (so does fuse_server_cancel_waits() meanwhile). Each call
 * must be followed by processing the request with the same header: that ends the announcement.
 * The composition calls it when it routes a request (fuse-handler.c). */
void fuse_server_lock_wait_queued(FuseServer *s, const struct fuse_in_header *h);

/* Blocking lock requests (SETLKW) registered and not yet answered: from the moment one can be
 * interrupted until its reply. */
unsigned fuse_server_lock_waiters(FuseServer *s);

/* The live cache policy: new lookups and opens follow it at once. */
int fuse_server_set_cache_policy(FuseServer *s, CachePolicy p);
CachePolicy fuse_server_get_cache_policy(FuseServer *s);

/* Whether the request in `in` (not consumed) may block for an unbounded time: a blocking lock
 * (SETLKW) waits for another guest process. The executor runs such requests off the queue thread
 * so the queue keeps moving; INTERRUPT from the guest (or a session reset) cancels the wait with
 * EINTR. Cheap: reads only the opcode. */
bool fuse_server_request_may_block(const ChainIter *in);
/* The same from a copied header. */
bool fuse_server_header_may_block(const struct fuse_in_header *h);
