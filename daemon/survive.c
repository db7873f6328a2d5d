/* survive.c: crash survival, the serving process's side (survive.h). */
#include "survive.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "device-snapshot.h"
#include "keeper.h"
#include "log.h"
#include "manager.h"
#include "session-journal.h"
#include "sandbox.h"
#include "survive-journal.h"
#include "upgrade.h"

static atomic_bool enabled;

void survive_enable(bool on) {
        atomic_store(&enabled, on);
        survive_journal_install(on);
}

bool survive_enabled(void) {
        return atomic_load_explicit(&enabled, memory_order_relaxed);
}

/* The device slot's record: the snapshot and where the connection is among the fds. */
typedef struct DeviceRecord {
        int32_t conn; /* index of the frontend connection in the fds, -1: none */
        uint32_t pad;
        DeviceSnapshot device;
} DeviceRecord;

typedef struct SessionRecord {
        struct fuse_in_header h;
        uint32_t n;
        uint8_t args[sizeof(struct fuse_init_in)];
} SessionRecord;

void survive_checkpoint(Manager *m) {
        static DeviceRecord rec; /* main thread only; 2 KiB */
        int fds[DEVICE_SNAPSHOT_MAX_FDS + 1], n, r;

        if (!survive_enabled())
                return;
        /* No frontend: no session either (the next frontend sends its own FUSE_INIT). */
        if (m->conn_fd < 0)
                (void) keeper_store(KEEPER_SLOT_SESSION, NULL, 0, NULL, 0);
        n = device_snapshot(m->device, &rec.device, fds);
        rec.conn = -1;
        if (m->conn_fd >= 0) {
                rec.conn = n;
                fds[n++] = m->conn_fd;
        }
        r = keeper_store(KEEPER_SLOT_DEVICE, &rec, sizeof rec, fds, (size_t) n);
        if (r < 0)
                log_warning_errno(r, "Cannot keep the device's state for a process that takes over: %m");
}

void survive_note_init(const struct fuse_in_header *h, const void *args, size_t n) {
        SessionRecord rec = { .h = *h, .n = (uint32_t) MIN(n, sizeof rec.args) };
        int r;

        if (!survive_enabled())
                return;
        memcpy(rec.args, args, rec.n);
        r = keeper_store(KEEPER_SLOT_SESSION, &rec, sizeof rec, NULL, 0);
        if (r < 0)
                log_warning_errno(r, "Cannot keep the FUSE session for a process that takes over: %m");
}

static void close_all(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
}

/* The guest's FUSE_INIT again, through the one choke point, its reply dropped. */
static int replay_session(Manager *m) {
        SessionRecord rec;
        int fds[KEEPER_MAX_FDS];
        size_t n_fds;
        uint8_t reply[512];
        struct iovec in_iov[2], out_iov = { reply, sizeof reply };
        ChainIter in, out;
        FuseReqInfo fi = {};
        int n;

        n = keeper_fetch(KEEPER_SLOT_SESSION, &rec, sizeof rec, fds, ELEMENTSOF(fds), &n_fds);
        close_all(fds, n_fds);
        if (n <= 0)
                return n;
        if ((size_t) n != sizeof rec || rec.n > sizeof rec.args || rec.h.opcode != FUSE_INIT)
                return log_error_errno(EBADMSG, "The FUSE session kept for this process is not a FUSE_INIT");
        in_iov[0] = (struct iovec) { &rec.h, sizeof rec.h };
        in_iov[1] = (struct iovec) { rec.args, rec.n };
        rec.h.len = (uint32_t) (sizeof rec.h + rec.n);
        chain_iter_init(&in, in_iov, 2);
        chain_iter_init(&out, &out_iov, 1);
        (void) fuse_server_process(m->fs, &in, &out, &fi);
        if (fi.error < 0)
                return log_error_errno(fi.error, "The kept FUSE_INIT fails again: %m");
        return 1;
}

static void kept_journal_donep(KeptJournal *k) {
        kept_journal_done(k);
}

int survive_resume(Manager *m) {
        static DeviceRecord rec;
        _cleanup_(kept_journal_donep) KeptJournal journal = {};
        int fds[KEEPER_MAX_FDS], conn = -1, n, r;
        size_t n_fds;

        /* The journal of the guest's session first. From here on this process writes a new one,
         * which replaces it only once whole (below): the FUSE_INIT replayed next resets the
         * session, which empties the journal being written as a guest's INIT would, and this
         * process may die before it has restored and written the whole session. */
        if (!sandbox_upgrading())
                (void) survive_journal_fetch(&journal);
        (void) keeper_journal_begin();
        r = replay_session(m);
        if (r < 0)
                return r;
        /* After an upgrade, the guest's nodes and handles under the same ids, before any request
         * runs. A binary executed for it that cannot use them refuses (the spawner then lets the
         * running code take over with them); that code itself serves on without them. */
        if (sandbox_upgrading()) {
                r = upgrade_resume(m);
                if (r < 0 && sandbox_upgrade_executed())
                        return r;
                if (r < 0) {
                        log_error("Live upgrade: serving without the guest's session; its node ids answer ESTALE");
                        (void) keeper_store(KEEPER_SLOT_UPGRADE, NULL, 0, NULL, 0);
                        (void) keeper_store_list(NULL, 0);
                }
                /* The keeper's journal from now on describes what this process restored. */
                passthrough_journal_all(m->passthrough);
        } else {
                /* After a death: the nodes, open files and locks the guest holds, under their ids. */
                r = survive_journal_restore(m, &journal);
                if (r < 0)
                        return r;
        }
        /* Both paths wrote the whole session as this process holds it: it is the journal now. */
        r = keeper_journal_commit();
        if (r < 0)
                log_warning_errno(r, "Cannot keep the guest's session for a process that takes over: %m");
        n = keeper_fetch(KEEPER_SLOT_DEVICE, &rec, sizeof rec, fds, ELEMENTSOF(fds), &n_fds);
        if (n <= 0) {
                close_all(fds, n_fds);
                return n;
        }
        if ((size_t) n != sizeof rec || rec.conn < -1 || (rec.conn >= 0 && (size_t) rec.conn >= n_fds)) {
                close_all(fds, n_fds);
                return log_error_errno(EBADMSG, "The device state kept for this process is malformed");
        }
        if (rec.conn < 0) { /* no frontend at the time: listen as usual */
                close_all(fds, n_fds);
                return 0;
        }
        conn = fds[rec.conn];
        fds[rec.conn] = -1;
        /* The connection first: a failure below still leaves it with the keeper's copy closed by
         * nobody, and this process drops it as after any protocol error. */
        r = manager_attach_connection(m, conn);
        if (r < 0) {
                close_all(fds, n_fds);
                return r;
        }
        /* Before a request runs: the guest's node ids from before the death answer ESTALE, which
         * Linux answers by looking the path up again. */
        passthrough_took_over(m->passthrough, sandbox_generation());
        r = device_restore(m->device, &rec.device, fds, (unsigned) n_fds);
        if (r < 0)
                return r;
        return 1;
}

__attribute__((weak)) void survive_test_hooks_install(Device *d) {
}
