/* migration.c: the FUSE session saved into and restored from a session state stream. */
#include "migration.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "session-state.h"

/* A load stream longer than this is refused before it is read: a million nodes with long paths
 * fit (docs/migration.md has the sizes). */
#define MIGRATION_MAX_BYTES (512ull << 20)

PtStateOptions migration_options(const Config *c) {
        return (PtStateOptions) {
                .by_handle = c->migration_mode == MIGRATION_FILE_HANDLES,
                .confirm_paths = c->migration_confirm_paths,
                .verify_handles = c->migration_verify_handles,
                .guest_error = c->migration_on_error == MIGRATION_ON_ERROR_GUEST_ERROR,
                .lock_timeout_usec = (uint64_t) c->migration_lock_timeout_sec * 1000000,
        };
}

static uint64_t now_usec(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t) t.tv_sec * 1000000 + (uint64_t) t.tv_nsec / 1000;
}

int migration_save(void *data, uint8_t **ret, size_t *ret_len, char *err, size_t errlen) {
        Migration *m = data;
        _cleanup_(session_state_freep) SessionState *s = NULL;
        StateSession session = { .proto_major = 7 };
        PtStateReport rep;
        uint64_t t0 = now_usec();
        int r;

        r = session_state_new(&s);
        if (r < 0)
                return r;
        /* A guest that has not mounted the share (no FUSE_INIT yet, or after DESTROY) migrates too:
         * protocol major 0 says there is no session, and there are no nodes. */
        if (!fuse_server_get_session(m->fs, &session.init_flags))
                session.proto_major = 0;
        session_state_set_session(s, &session);
        rep = (PtStateReport) {};
        if (session.proto_major != 0)
                r = passthrough_state_save(m->passthrough, &m->opts, s, &rep);
        if (r < 0) {
                snprintf(err, errlen, "collecting the nodes: %s", rep.first_problem);
                return r;
        }
        /* Saved with no way to find them: the destination decides (--migration-on-error there). */
        if (rep.nodes_lost > 0 || rep.handles_lost > 0)
                log_warning("Migration: %zu of %zu nodes and %zu handles cannot be located on the destination, the "
                            "first: %s",
                            rep.nodes_lost, rep.nodes, rep.handles_lost, rep.first_problem);
        r = session_state_encode(s, ret, ret_len, err, errlen);
        if (r < 0)
                return r;
        m->last_bytes = *ret_len;
        m->last_usec = now_usec() - t0;
        log_info("Migration: saved %zu nodes, %zu handles and %zu lock ranges in %zu bytes (%" PRIu64 " us)", rep.nodes,
                 rep.handles, rep.locks, *ret_len, m->last_usec);
        return 0;
}

int migration_load(void *data, const uint8_t *buf, size_t len, char *err, size_t errlen) {
        Migration *m = data;
        _cleanup_(session_state_freep) SessionState *s = NULL;
        const StateSession *session;
        PtStateReport rep;
        uint64_t t0 = now_usec();
        int r;

        /* At most the nodes this vufsd may hold (the root is one of them): more could never load. */
        r = session_state_decode_limited(buf, len, MIGRATION_MAX_BYTES, passthrough_max_nodes(m->passthrough), &s, err,
                                         errlen);
        if (r < 0)
                return r;
        session = session_state_session(s);
        if (session->proto_major == 0) { /* the guest had not mounted the share */
                if (session_state_node_count(s) > 0 || session_state_handle_count(s) > 0) {
                        snprintf(err, errlen, "nodes or handles without a FUSE session");
                        return -EBADMSG;
                }
                fuse_server_reset(m->fs);
                log_info("Migration: the guest had not mounted the share; nothing to restore");
                return 0;
        }
        if (session->proto_major != 7) {
                snprintf(err, errlen, "FUSE protocol %u", session->proto_major);
                return -EPROTO;
        }
        r = fuse_server_resume_session(m->fs, session->init_flags);
        if (r < 0) {
                snprintf(err, errlen, "the source negotiated FUSE flags 0x%" PRIx64 " this vufsd's options do not allow",
                         session->init_flags);
                return r;
        }
        r = passthrough_state_load(m->passthrough, &m->opts, s, NULL, 0, &rep);
        if (r < 0) {
                snprintf(err, errlen, "%s", rep.first_problem[0] ? rep.first_problem : strerror(-r));
                fuse_server_reset(m->fs); /* nothing half-restored is served */
                return r;
        }
        if (rep.nodes_lost > 0 || rep.handles_lost > 0 || rep.locks_lost > 0)
                log_warning("Migration: %zu nodes and %zu handles were not found and %zu lock ranges could not be taken "
                            "again; they answer errors to the guest (--migration-on-error=guest-error), the first: %s",
                            rep.nodes_lost, rep.handles_lost, rep.locks_lost, rep.first_problem);
        if (rep.locks_pending > 0)
                log_warning("Migration: %zu of the guest's locks are held on this host now (by the source vufsd until "
                            "its session ends, or by another process): pending, taken as soon as they are free, lost "
                            "after %.1f s; the first: %s",
                            rep.locks_pending, (double) m->opts.lock_timeout_usec / 1e6, rep.first_pending);
        m->last_bytes = len;
        m->last_usec = now_usec() - t0;
        log_info("Migration: restored %zu nodes (%zu of them outside the inode fd clock), %zu handles and %zu lock ranges "
                 "from %zu bytes (%" PRIu64 " us)",
                 rep.nodes, rep.nodes_unnamed, rep.handles, rep.locks, len, m->last_usec);
        return 0;
}

DeviceStateHandler migration_state_handler(Migration *m) {
        return (DeviceStateHandler) {
                .save = migration_save,
                .load = migration_load,
                .max_len = MIGRATION_MAX_BYTES,
                .data = m,
        };
}
