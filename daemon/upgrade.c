/* upgrade.c: live upgrade, the serving process's side (upgrade.h). */
#include "upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bus.h"
#include "keeper.h"
#include "log.h"
#include "manager.h"
#include "passthrough-state.h"
#include "sandbox.h"
#include "session-state.h"
#include "survive.h"
#include "survive-journal.h"

/* The largest session an upgrade hands over (as live migration's cap, migration.c). */
#define UPGRADE_MAX_BYTES (512ull << 20)
#define UPGRADE_MAGIC 0x31677075u /* "upg1" */
#define UPGRADE_SEALS (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

/* KEEPER_SLOT_UPGRADE's record; its one fd is the memfd of the stream, the list slot holds the
 * stream's fd slots in order. Read back by another binary: plain fixed-size fields. */
typedef struct UpgradeRecord {
        uint32_t magic, size;
        uint64_t stream_len;
        uint64_t n_fds;
        uint64_t stopped_usec; /* CLOCK_MONOTONIC when the rings stopped: the guest's pause begins */
        char from_version[64];
} UpgradeRecord;

static uint64_t mono_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

static void fds_donep(PtStateFds *f) {
        passthrough_state_fds_done(f);
}

/* The stream in a memfd sealed against any change: the keeper holds it, the next binary reads
 * it. Written through a mapping (the serving process's filter has no write() to such an fd). */
static int stream_memfd(const uint8_t *buf, size_t len) {
        _cleanup_close_ int fd = memfd_create("vufsd-upgrade", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        void *p;

        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t) len) < 0)
                return -errno;
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        memcpy(p, buf, len);
        (void) munmap(p, len);
        if (fcntl(fd, F_ADD_SEALS, UPGRADE_SEALS) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int upgrade_start(Manager *m, char *err, size_t errlen) {
        _cleanup_(session_state_freep) SessionState *s = NULL;
        _cleanup_(fds_donep) PtStateFds fds = {};
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_close_ int memfd = -1;
        StateSession session = { .proto_major = 7 };
        PtStateOptions o = { .by_handle = passthrough_uses_handles(m->passthrough) };
        PtStateReport rep = {};
        UpgradeRecord rec = { .magic = UPGRADE_MAGIC, .size = sizeof rec };
        uint64_t stopped;
        size_t len = 0;
        int r;

        if (!survive_enabled()) {
                snprintf(err, errlen, "Live upgrade needs --crash-restarts=N ([Service] CrashRestarts=N in the "
                                      "configuration file): the spawner it starts is what executes the new binary "
                                      "(docs/survival.md)");
                return -EOPNOTSUPP;
        }
        if (m->upgrade_started) {
                snprintf(err, errlen, "An upgrade is under way");
                return -EBUSY;
        }
        rec.stopped_usec = mono_usec();
        /* The device's record as the crash path keeps it, fresh, while the rings still run (it
         * says which ones the next process resumes). */
        survive_checkpoint(m);
        /* The quiescent point: nothing more is popped, what was popped is answered. */
        stopped = device_quiesce(m->device);
        r = session_state_new(&s);
        if (r >= 0) {
                /* No FUSE_INIT yet: no nodes either (the next process then waits for the guest's). */
                if (!fuse_server_get_session(m->fs, &session.init_flags))
                        session.proto_major = 0;
                session_state_set_session(s, &session);
                if (session.proto_major != 0)
                        r = passthrough_state_save_fds(m->passthrough, &o, s, &fds, &rep);
                if (r < 0)
                        snprintf(err, errlen, "Cannot save the guest's session: %s",
                                 rep.first_problem[0] ? rep.first_problem : strerror(-r));
        }
        if (r >= 0) {
                r = session_state_encode(s, &buf, &len, err, errlen);
                if (r >= 0 && len > UPGRADE_MAX_BYTES) {
                        snprintf(err, errlen, "The session takes %zu bytes, more than %llu", len, UPGRADE_MAX_BYTES);
                        r = -EFBIG;
                }
        }
        if (r >= 0 && (r = memfd = stream_memfd(buf, len)) < 0)
                snprintf(err, errlen, "Cannot keep the session in a memfd: %s", strerror(-r));
        if (r >= 0) {
                rec.stream_len = len;
                rec.n_fds = fds.n;
                snprintf(rec.from_version, sizeof rec.from_version, "%s", vufsd_version());
                /* The fds first, then the record that names them: a record is there only when all
                 * of it is. */
                r = keeper_store_list(fds.fds, fds.n);
                if (r >= 0)
                        r = keeper_store(KEEPER_SLOT_UPGRADE, &rec, sizeof rec, &memfd, 1);
                if (r < 0)
                        snprintf(err, errlen, "Cannot hand the session to the supervisor: %s", strerror(-r));
        }
        if (r < 0) {
                (void) keeper_store_list(NULL, 0);
                /* The duplicates and the memfd closed before the rings restart: each queue needs an
                 * fd of its own to wait on (its epoll), and a save that failed for want of fds
                 * would otherwise leave the rings stopped and the guest unanswered. */
                passthrough_state_fds_done(&fds);
                memfd = safe_close(memfd);
                device_unquiesce(m->device, stopped);
                log_error("Live upgrade refused: %s", err);
                return r;
        }
        if (rep.nodes_lost > 0 || rep.handles_lost > 0)
                log_warning("Live upgrade: %zu nodes and %zu handles cannot be located by the next process, the first: "
                            "%s",
                            rep.nodes_lost, rep.handles_lost, rep.first_problem);
        log_info("Live upgrade: rings stopped, %zu nodes and %zu handles (%zu fds, %zu bytes) kept for the binary at "
                 "vufsd's path",
                 rep.nodes, rep.handles, fds.n, len);
        m->upgrade_started = true;
        /* The next process restores the session from the stream and journals it anew: this one's
         * teardown must not remove the entries one by one meanwhile. */
        survive_journal_install(false);
        (void) sd_event_exit(m->event, SANDBOX_EXIT_UPGRADE);
        return 0;
}

static void close_all(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
}

/* The stream from the record's memfd, checked: sealed (nobody changed it since), its length. */
static int read_stream(int fd, uint64_t len, uint8_t **ret) {
        struct stat st;
        int seals = fcntl(fd, F_GET_SEALS);
        uint8_t *buf;
        void *p;

        if (seals < 0 || (seals & UPGRADE_SEALS) != UPGRADE_SEALS || fstat(fd, &st) < 0 || len == 0 ||
            (uint64_t) st.st_size != len || len > UPGRADE_MAX_BYTES)
                return -EBADMSG;
        p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        buf = malloc(len);
        if (buf)
                memcpy(buf, p, len);
        (void) munmap(p, len);
        if (!buf)
                return -ENOMEM;
        *ret = buf;
        return 0;
}

int upgrade_resume(Manager *m) {
        _cleanup_(session_state_freep) SessionState *s = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_free_ int *list = NULL;
        UpgradeRecord rec;
        int fds[KEEPER_MAX_FDS];
        /* The lock OFDs come in fd slots: their locks are held all along, nothing is pending
         * (test-frontend-upgrade); were one, it would be retried as after a migration. The same
         * host: each node is checked to be the inode the stream names and found again by its
         * name where it can be (state-load.c), as after a death. */
        PtStateOptions o = { .by_handle = passthrough_uses_handles(m->passthrough), .guest_error = true,
                             .same_host = true, .lock_timeout_usec = m->migration.opts.lock_timeout_usec };
        PtStateReport rep = {};
        char why[256] = "";
        size_t n_fds = 0;
        int n, r;

        n = keeper_fetch(KEEPER_SLOT_UPGRADE, &rec, sizeof rec, fds, ELEMENTSOF(fds), &n_fds);
        if (n <= 0) {
                close_all(fds, n_fds);
                return n;
        }
        if ((size_t) n != sizeof rec || rec.magic != UPGRADE_MAGIC || rec.size != sizeof rec || n_fds != 1) {
                close_all(fds, n_fds);
                return log_error_errno(EBADMSG, "Live upgrade: the session left by the previous process is not one this "
                                                "vufsd reads");
        }
        rec.from_version[sizeof rec.from_version - 1] = '\0';
        r = read_stream(fds[0], rec.stream_len, &buf);
        safe_close(fds[0]);
        if (r < 0)
                return log_error_errno(r, "Live upgrade: the kept session stream is unusable: %m");
        r = keeper_fetch_list(rec.n_fds, &list);
        if (r < 0)
                return log_error_errno(r, "Live upgrade: cannot fetch the session's %" PRIu64 " fds: %m", rec.n_fds);
        r = session_state_decode(buf, rec.stream_len, UPGRADE_MAX_BYTES, &s, why, sizeof why);
        if (r >= 0 && session_state_session(s)->proto_major != 0)
                r = passthrough_state_load(m->passthrough, &o, s, list, rec.n_fds, &rep);
        close_all(list, rec.n_fds); /* those the load took are -1 */
        if (r < 0) {
                log_error_errno(r, "Live upgrade: cannot restore the session of vufsd %s: %s", rec.from_version,
                                why[0] ? why : rep.first_problem[0] ? rep.first_problem : strerror(-r));
                return r;
        }
        if (rep.locks_pending > 0)
                log_warning("Live upgrade: %zu of the guest's locks are held elsewhere on this host: pending, the first: %s",
                            rep.locks_pending, rep.first_pending);
        if (rep.nodes_lost > 0 || rep.handles_lost > 0)
                log_warning("Live upgrade: %zu nodes and %zu handles were not found and answer errors to the guest, "
                            "the first: %s",
                            rep.nodes_lost, rep.handles_lost, rep.first_problem);
        /* Used: a later crash must not restore it again over what the guest did since. */
        (void) keeper_store(KEEPER_SLOT_UPGRADE, NULL, 0, NULL, 0);
        (void) keeper_store_list(NULL, 0);
        m->upgrade_stopped_usec = rec.stopped_usec;
        m->upgrade_nodes = m->restored_nodes = rep.nodes;
        m->upgrade_handles = m->restored_handles = rep.handles;
        snprintf(m->upgrade_from, sizeof m->upgrade_from, "%s", rec.from_version);
        return 1;
}
