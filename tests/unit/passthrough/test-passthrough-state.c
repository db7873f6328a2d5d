/* test-passthrough-state.c: the passthrough's nodes and handles saved into a SessionState and
 * restored in another passthrough over the same directory (state-save.c, state-load.c): same
 * nodeids and fhs, the fds passed beside a stream taken instead of locating (what a hand-over to a
 * new process uses), node ids from a hostile stream; and the size and times for 100,000 nodes
 * (docs/migration.md quotes them). */
#include <check.h>
#include <malloc.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "passthrough-state.h"
#include "passthrough.h"
#include "session-state.h"
#include "host-locks.h"
#include "test-main.h"

TEST_TEMP_DIR_FIXTURE(dir, "/tmp/test-pt-state-XXXXXX")
static const FsOps *ops = &passthrough_ops;
static const FsCtx root_ctx = { .uid = 0, .gid = 0 };

static Passthrough *open_share_with(bool handles) {
        FsOptions o = FS_OPTIONS_DEFAULT;
        Passthrough *p;

        o.shared_dir = dir;
        if (handles) {
                o.inode_file_handles = INODE_FILE_HANDLES_MANDATORY;
                o.handles_beyond_share = true;
        }
        o.max_nodes = 4000000;
        ck_assert_int_eq(passthrough_new(&p, &o), 0);
        return p;
}

static Passthrough *open_share(void) {
        return open_share_with(false);
}

static void put(const char *rel, const char *content) {
        char path[256];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", dir, rel);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(content, f);
        fclose(f);
}

static uint64_t usec_since(const struct timespec *t0) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t) ((t.tv_sec - t0->tv_sec) * 1000000 + (t.tv_nsec - t0->tv_nsec) / 1000);
}

/* Saved from one passthrough, restored in another: the same ids answer the same files. */
START_TEST(test_round_trip_by_path) {
        _cleanup_(passthrough_freep) Passthrough *a = NULL, *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = NULL;
        PtStateOptions o = { .confirm_paths = true };
        PtStateReport rep;
        FsEntry d, f, f2;
        uint64_t fh;
        char buf[16] = "";
        struct iovec iov = { buf, sizeof buf - 1 };
        StateSession ss = {};
        char path[256];

        snprintf(path, sizeof path, "%s/sub", dir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        put("sub/file", "hello state");
        a = open_share();
        ck_assert_int_eq(ops->lookup(a, &root_ctx, 1, "sub", &d), 0);
        ck_assert_int_eq(ops->lookup(a, &root_ctx, d.nodeid, "file", &f), 0);
        ck_assert_int_eq(ops->lookup(a, &root_ctx, d.nodeid, "file", &f2), 0); /* nlookup 2 */
        ck_assert_int_eq(ops->open(a, &root_ctx, f.nodeid, O_RDONLY, false, &fh), 0);
        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(passthrough_state_save(a, &o, s, &rep), 0);
        ck_assert_uint_eq(rep.nodes, 2);
        ck_assert_uint_eq(rep.handles, 1);
        ck_assert_uint_eq(rep.nodes_lost, 0);
        ck_assert_str_eq(session_state_find_node(s, f.nodeid)->name, "sub/file");
        ck_assert_uint_eq(session_state_find_node(s, f.nodeid)->nlookup, 2);

        b = open_share();
        ck_assert_int_eq(passthrough_state_load(b, &o, s, NULL, 0, &rep), 0);
        ck_assert_uint_eq(passthrough_inode_count(b), 3);
        ck_assert_int_eq(ops->read(b, &root_ctx, f.nodeid, fh, 0, &iov, 1), 11);
        ck_assert_str_eq(buf, "hello state");
        /* Two lookups came over: forgetting one keeps the node. */
        ops->forget(b, f.nodeid, 1);
        ck_assert_int_eq(ops->getattr(b, &root_ctx, f.nodeid, FS_NO_FH, &(struct stat) {}), 0);
        ops->forget(b, f.nodeid, 1);
        ck_assert_int_eq(ops->release(b, &root_ctx, f.nodeid, fh, 0, false), 0);
        ck_assert_int_eq(ops->getattr(b, &root_ctx, f.nodeid, FS_NO_FH, &(struct stat) {}), -EBADF);
        /* The next new node does not take a restored id. */
        ck_assert_int_eq(ops->lookup(b, &root_ctx, d.nodeid, "file", &f2), 0);
        ck_assert_uint_ne(f2.nodeid, d.nodeid);
}
END_TEST

/* A hand-over's stream: the fds come beside it (fd_slot) and are taken, not located again, even
 * where the name no longer leads to the file. */
START_TEST(test_fd_slots) {
        _cleanup_(passthrough_freep) Passthrough *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = NULL;
        StateSession ss = {};
        StateNode n = { .id = 5 << 6 | 3, .nlookup = 1, .type = S_IFREG, .fd_slot = 0 };
        StateHandle h = { .fh = 9 << 6 | 3, .node = 5 << 6 | 3, .open_flags = O_RDONLY, .fd_slot = 1 };
        PtStateOptions o = {};
        PtStateReport rep;
        char path[256], buf[8] = "";
        struct iovec iov = { buf, 4 };
        int fds[2];

        put("handed", "over");
        snprintf(path, sizeof path, "%s/handed", dir);
        fds[0] = open(path, O_PATH | O_CLOEXEC);
        fds[1] = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fds[0], 0);
        ck_assert_int_ge(fds[1], 0);
        ck_assert_int_eq(unlink(path), 0); /* no name: only the fds find it */
        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(session_state_add_node(s, &n), 0);
        ck_assert_int_eq(session_state_add_handle(s, &h), 0);
        b = open_share();
        ck_assert_int_eq(passthrough_state_load(b, &o, s, fds, 2, &rep), 0);
        ck_assert_int_eq(fds[0], -1); /* taken */
        ck_assert_int_eq(fds[1], -1);
        ck_assert_int_eq(ops->read(b, &root_ctx, n.id, h.fh, 0, &iov, 1), 4);
        ck_assert_mem_eq(buf, "over", 4);
}
END_TEST

/* What a process handing its session over sends: the state of a, with its fds in *fds. */
static SessionState *save_hand_over(Passthrough *a, PtStateFds *fds, PtStateReport *rep) {
        PtStateOptions o = {};
        StateSession ss = {};
        SessionState *s;

        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(passthrough_state_save_fds(a, &o, s, fds, rep), 0);
        return s;
}

/* The sending half of a hand-over: the fds of every node and open file go beside the stream, and
 * the receiver finds through them a file whose name is gone. */
START_TEST(test_hand_over_fds) {
        _cleanup_(passthrough_freep) Passthrough *a = NULL, *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = NULL;
        PtStateOptions o = {};
        PtStateReport rep;
        PtStateFds fds = {};
        FsEntry f;
        uint64_t fh;
        char path[256], buf[8] = "";
        struct iovec iov = { buf, 6 };

        put("moving", "handed");
        a = open_share();
        ck_assert_int_eq(ops->lookup(a, &root_ctx, 1, "moving", &f), 0);
        ck_assert_int_eq(ops->open(a, &root_ctx, f.nodeid, O_RDONLY, false, &fh), 0);
        s = save_hand_over(a, &fds, &rep);
        ck_assert_uint_eq(fds.n, 2); /* the node's O_PATH fd and the open file */
        ck_assert_int_eq(session_state_find_node(s, f.nodeid)->fd_slot, 0);
        a = passthrough_free(a);
        snprintf(path, sizeof path, "%s/moving", dir);
        ck_assert_int_eq(unlink(path), 0);

        b = open_share();
        ck_assert_int_eq(passthrough_state_load(b, &o, s, fds.fds, fds.n, &rep), 0);
        ck_assert_int_eq(ops->read(b, &root_ctx, f.nodeid, fh, 0, &iov, 1), 6);
        ck_assert_mem_eq(buf, "handed", 6);
        ck_assert_int_eq(ops->getattr(b, &root_ctx, f.nodeid, FS_NO_FH, &(struct stat) {}), 0);
        passthrough_state_fds_done(&fds); /* what was not taken; here nothing */
}
END_TEST

/* The host's view of the share's file rel (host-locks.h). */
static short host_probe(const char *rel, off_t start, off_t len) {
        char path[256];

        snprintf(path, sizeof path, "%s/%s", dir, rel);
        return test_host_lock_type(path, start, len);
}

static bool host_flock_free(const char *rel) {
        char path[256];

        snprintf(path, sizeof path, "%s/%s", dir, rel);
        return test_host_flock_free(path);
}

/* A share whose file name (content: name) the guest opened read-write as *fh and locked: owner
 * 0x77 write-locks [0, 99], owner 0x88 flocks it (flock_type). */
static Passthrough *share_with_locks(const char *name, short flock_type, FsEntry *f, uint64_t *fh) {
        FsLock w = { .start = 0, .end = 99, .type = F_WRLCK }, fl = { .start = 0, .end = INT64_MAX, .type = flock_type };
        Passthrough *a;

        put(name, name);
        a = open_share();
        ck_assert_int_eq(ops->lookup(a, &root_ctx, 1, name, f), 0);
        ck_assert_int_eq(ops->open(a, &root_ctx, f->nodeid, O_RDWR, false, fh), 0);
        ck_assert_int_eq(ops->setlk(a, &root_ctx, f->nodeid, *fh, 0x77, &w, false, false), 0);
        ck_assert_int_eq(ops->setlk(a, &root_ctx, f->nodeid, *fh, 0x88, &fl, true, false), 0);
        return a;
}

/* A hand-over carries the guest's locks in the open file descriptions themselves: the POSIX lock
 * owner's OFD and the handle's file go beside the stream, so the locks stay held while the source
 * ends and the receiver has nothing to take again (taking them on a new OFD would conflict with
 * the OFD in the fd slots, which still holds them: the load would fail). */
START_TEST(test_hand_over_locks) {
        _cleanup_(passthrough_freep) Passthrough *a = NULL, *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = NULL;
        PtStateOptions o = {};
        PtStateFds fds = {};
        PtStateReport rep;
        FsLock w = { .start = 0, .end = 99, .type = F_WRLCK };
        FsLock probe = { .start = 0, .end = 99, .type = F_WRLCK };
        FsLock un = { .start = 0, .end = INT64_MAX, .type = F_UNLCK };
        FsEntry f;
        uint64_t fh;
        const StateLock *l;

        a = share_with_locks("locked", F_RDLCK, &f, &fh);
        s = save_hand_over(a, &fds, &rep);
        ck_assert_uint_eq(rep.locks, 2);
        ck_assert_uint_eq(fds.n, 3); /* the node's O_PATH fd, the open file, the lock owner's OFD */
        ck_assert_uint_eq(session_state_lock_count(s), 2);
        for (size_t k = 0; k < 2; k++) {
                l = session_state_lock(s, k);
                if (l->kind == STATE_LOCK_POSIX) {
                        ck_assert_uint_eq(l->owner, 0x77);
                        ck_assert_uint_eq(l->end, 99);
                        ck_assert_uint_eq(l->type, STATE_LOCK_WRITE);
                        ck_assert_int_eq(l->fd_slot, 2);
                } else
                        ck_assert_uint_eq(l->type, STATE_LOCK_READ);
        }
        a = passthrough_free(a);
        /* Between the two processes only the fds beside the stream hold the locks. */
        ck_assert_int_eq(host_probe("locked", 0, 100), F_WRLCK);
        ck_assert(!host_flock_free("locked"));

        b = open_share();
        ck_assert_int_eq(passthrough_state_load(b, &o, s, fds.fds, fds.n, &rep), 0);
        ck_assert_uint_eq(rep.locks, 2);
        ck_assert_uint_eq(rep.locks_pending, 0); /* held all along: nothing to wait for */
        ck_assert_uint_eq(passthrough_locks_retry(b), 0);
        ck_assert_int_eq(host_probe("locked", 0, 100), F_WRLCK);
        ck_assert_int_eq(ops->getlk(b, &root_ctx, f.nodeid, fh, 0x99, &probe), 0);
        ck_assert_uint_eq(probe.type, F_WRLCK);
        /* The owner is the same: it extends its lock, another owner still conflicts. */
        w.end = 199;
        ck_assert_int_eq(ops->setlk(b, &root_ctx, f.nodeid, fh, 0x77, &w, false, false), 0);
        ck_assert_int_eq(host_probe("locked", 150, 10), F_WRLCK);
        ck_assert_int_eq(ops->setlk(b, &root_ctx, f.nodeid, fh, 0x99, &w, false, false), -EAGAIN);
        ck_assert_int_eq(ops->setlk(b, &root_ctx, f.nodeid, fh, 0x77, &un, false, false), 0);
        ck_assert_int_eq(ops->setlk(b, &root_ctx, f.nodeid, fh, 0x88, &un, true, false), 0);
        ck_assert_int_eq(host_probe("locked", 0, 0), F_UNLCK);
        ck_assert(host_flock_free("locked"));
        passthrough_state_fds_done(&fds);
}
END_TEST

/* A migration's load while the source still holds the guest's locks (one host): they are pending,
 * the load succeeds, and the first retry after the source is gone takes them; a session saved
 * meanwhile carries them as the guest's. With a deadline already past, a retry loses them. */
static void load_while_source_holds(bool past_deadline) {
        _cleanup_(passthrough_freep) Passthrough *a = NULL, *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = NULL, *again = NULL;
        PtStateOptions o = { .lock_timeout_usec = past_deadline ? 0 : 60 * 1000000ull };
        StateSession ss = {};
        PtStateReport rep;
        FsLock w = { .start = 0, .end = 99, .type = F_WRLCK };
        FsLock probe = { .start = 50, .end = 50, .type = F_RDLCK };
        uint64_t fh, pending, lost;
        FsEntry f;

        a = share_with_locks("held", F_WRLCK, &f, &fh);
        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(passthrough_state_save(a, &o, s, &rep), 0);

        b = open_share();
        ck_assert_int_eq(passthrough_state_load(b, &o, s, NULL, 0, &rep), 0);
        ck_assert_uint_eq(rep.locks, 0);
        ck_assert_uint_eq(rep.locks_pending, 2);
        passthrough_lock_counts(b, &pending, &lost);
        ck_assert_uint_eq(pending, 2);
        if (past_deadline) {
                /* Lost at the first retry: the open file they were taken through answers EBADF. */
                ck_assert_uint_eq(passthrough_locks_retry(b), 0);
                passthrough_lock_counts(b, &pending, &lost);
                ck_assert_uint_eq(lost, 2);
                ck_assert_int_eq(ops->setlk(b, &root_ctx, f.nodeid, fh, 0x77, &w, false, false), -EBADF);
                a = passthrough_free(a);
                ck_assert_int_eq(host_probe("held", 0, 100), F_UNLCK);
                ck_assert(host_flock_free("held"));
                return;
        }
        /* Another owner is answered from the pending set: the whole range is the guest's. */
        ck_assert_int_eq(ops->getlk(b, &root_ctx, f.nodeid, fh, 0x99, &probe), 0);
        ck_assert_uint_eq(probe.type, F_WRLCK);
        ck_assert_uint_eq(probe.start, 0);
        ck_assert_uint_eq(probe.end, 99);
        /* Saved meanwhile, the pending locks are the guest's. */
        ck_assert_int_eq(session_state_new(&again), 0);
        session_state_set_session(again, &ss);
        ck_assert_int_eq(passthrough_state_save(b, &o, again, &rep), 0);
        ck_assert_uint_eq(session_state_lock_count(again), 2);
        ck_assert_uint_eq(passthrough_locks_retry(b), 2);
        a = passthrough_free(a); /* the source's session ends */
        ck_assert_uint_eq(passthrough_locks_retry(b), 0);
        passthrough_lock_counts(b, &pending, &lost);
        ck_assert_uint_eq(pending, 0);
        ck_assert_uint_eq(lost, 0);
        ck_assert_int_eq(host_probe("held", 0, 100), F_WRLCK); /* b's now */
        ck_assert(!host_flock_free("held"));
}

START_TEST(test_load_while_source_holds) {
        load_while_source_holds(false);
}
END_TEST

START_TEST(test_pending_past_deadline) {
        load_while_source_holds(true);
}
END_TEST

/* Restored nodes are ordinary members of the clock of cached inode fds: with --max-inode-fds 4,
 * 50 looked-up nodes (5 directories of 9 files) come over and the destination holds at most 4 of
 * their fds; every one still answers GETATTR and READ after its fd was taken back (re-opened by
 * its name in its restored parent, and checked to be the same file). One file whose directory is
 * no node the guest holds keeps its fd outside the clock, and the load says so. */
START_TEST(test_restored_nodes_in_clock) {
        _cleanup_(passthrough_freep) Passthrough *a = NULL, *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = NULL;
        FsOptions fo = FS_OPTIONS_DEFAULT;
        PtStateOptions o = {};
        PtStateReport rep;
        StateSession ss = {};
        uint64_t ids[50], deep = 0;
        char name[64], path[256], buf[32];
        FsEntry e, x, y;
        unsigned n = 0;

        for (int d = 0; d < 5; d++) {
                snprintf(path, sizeof path, "%s/dir%d", dir, d);
                ck_assert_int_eq(mkdir(path, 0755), 0);
                for (int k = 0; k < 9; k++) {
                        snprintf(name, sizeof name, "dir%d/f%d", d, k);
                        snprintf(buf, sizeof buf, "content %d.%d", d, k);
                        put(name, buf);
                }
        }
        snprintf(path, sizeof path, "%s/x", dir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(path, sizeof path, "%s/x/y", dir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        put("x/y/deep", "deep");

        fo.shared_dir = dir;
        fo.max_inode_fds = 4;
        ck_assert_int_eq(passthrough_new(&a, &fo), 0);
        for (int d = 0; d < 5; d++) {
                FsEntry de;
                snprintf(name, sizeof name, "dir%d", d);
                ck_assert_int_eq(ops->lookup(a, &root_ctx, 1, name, &de), 0);
                ids[n++] = de.nodeid;
                for (int k = 0; k < 9; k++) {
                        snprintf(name, sizeof name, "f%d", k);
                        ck_assert_int_eq(ops->lookup(a, &root_ctx, de.nodeid, name, &e), 0);
                        ids[n++] = e.nodeid;
                }
        }
        /* x/y/deep held, x and y forgotten: deep's directory is no node of the state. */
        ck_assert_int_eq(ops->lookup(a, &root_ctx, 1, "x", &x), 0);
        ck_assert_int_eq(ops->lookup(a, &root_ctx, x.nodeid, "y", &y), 0);
        ck_assert_int_eq(ops->lookup(a, &root_ctx, y.nodeid, "deep", &e), 0);
        deep = e.nodeid;
        ops->forget(a, y.nodeid, 1);
        ops->forget(a, x.nodeid, 1);
        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(passthrough_state_save(a, &o, s, &rep), 0);
        ck_assert_uint_eq(rep.nodes, 51);
        a = passthrough_free(a);

        ck_assert_int_eq(passthrough_new(&b, &fo), 0);
        ck_assert_int_eq(passthrough_state_load(b, &o, s, NULL, 0, &rep), 0);
        ck_assert_uint_eq(rep.nodes, 51);
        ck_assert_uint_eq(rep.nodes_unnamed, 1);
        ck_assert_uint_le(passthrough_inode_fds(b), 4);
        /* the root's fd, the clock's and deep's */
        ck_assert_uint_le(passthrough_fds_used(b), 1 + 4 + 1);
        for (int round = 0; round < 2; round++)
                for (unsigned k = 0; k < n; k++) {
                        struct stat st;
                        uint64_t fh;
                        struct iovec iov = { buf, sizeof buf };
                        char want[32];
                        int d = (int) k / 10, f = (int) k % 10 - 1, got;
                        ck_assert_int_eq(ops->getattr(b, &root_ctx, ids[k], FS_NO_FH, &st), 0);
                        ck_assert_int_eq(st.st_mode & S_IFMT, f < 0 ? S_IFDIR : S_IFREG);
                        if (f >= 0) {
                                snprintf(want, sizeof want, "content %d.%d", d, f);
                                ck_assert_int_eq(ops->open(b, &root_ctx, ids[k], O_RDONLY, false, &fh), 0);
                                got = ops->read(b, &root_ctx, ids[k], fh, 0, &iov, 1);
                                ck_assert_int_eq(got, (int) strlen(want));
                                ck_assert_mem_eq(buf, want, strlen(want));
                                ck_assert_int_eq(ops->release(b, &root_ctx, ids[k], fh, 0, false), 0);
                        }
                        ck_assert_uint_le(passthrough_inode_fds(b), 4);
                }
        ck_assert_uint_le(passthrough_fds_used(b), 1 + 4 + 1);
        ck_assert_int_eq(ops->getattr(b, &root_ctx, deep, FS_NO_FH, &(struct stat) {}), 0);
}
END_TEST

/* Restored ids that collide with a node already there (a stream loaded twice) are refused. */
START_TEST(test_duplicate_load_refused) {
        _cleanup_(passthrough_freep) Passthrough *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = NULL;
        StateSession ss = {};
        StateNode n = { .id = 7 << 6 | 1, .nlookup = 1, .type = S_IFREG, .fd_slot = -1, .parent = 1, .name = "x" };
        PtStateOptions o = {};
        PtStateReport rep;

        put("x", "x");
        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(session_state_add_node(s, &n), 0);
        b = open_share();
        ck_assert_int_eq(passthrough_state_load(b, &o, s, NULL, 0, &rep), 0);
        ck_assert_int_eq(passthrough_state_load(b, &o, s, NULL, 0, &rep), -EEXIST);
}
END_TEST

/* 100,000 files in 1,000 directories, every one looked up, 1,000 open: the state's size, and the
 * time to save (collect every path and encode) and to load (decode and locate every file again).
 * The nodes are remembered by file handle (the machine's fd limit is below 100,000); the source
 * goes before the destination starts, as the source process ends in a migration. */
START_TEST(test_hundred_thousand_nodes) {
        _cleanup_(passthrough_freep) Passthrough *a = NULL, *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = NULL, *d = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        PtStateOptions o = {};
        PtStateReport rep;
        StateSession ss = {};
        struct timespec t0;
        char name[64], err[256] = "";
        uint64_t save_us, load_us;
        size_t len;

        for (int k = 0; k < 1000; k++) {
                snprintf(name, sizeof name, "%s/dir-%04d", dir, k);
                ck_assert_int_eq(mkdir(name, 0755), 0);
                for (int j = 0; j < 99; j++) {
                        char f[96];
                        int fd;
                        snprintf(f, sizeof f, "%s/file-%04d.dat", name, j);
                        fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                        ck_assert_int_ge(fd, 0);
                        close(fd);
                }
        }
        a = open_share_with(true);
        ck_assert(passthrough_uses_handles(a));
        for (int k = 0; k < 1000; k++) {
                FsEntry de, fe;
                snprintf(name, sizeof name, "dir-%04d", k);
                ck_assert_int_eq(ops->lookup(a, &root_ctx, 1, name, &de), 0);
                for (int j = 0; j < 99; j++) {
                        uint64_t fh;
                        snprintf(name, sizeof name, "file-%04d.dat", j);
                        ck_assert_int_eq(ops->lookup(a, &root_ctx, de.nodeid, name, &fe), 0);
                        if (j == 0)
                                ck_assert_int_eq(ops->open(a, &root_ctx, fe.nodeid, O_RDONLY, false, &fh), 0);
                }
        }
        ck_assert_uint_eq(passthrough_inode_count(a), 100001);

        clock_gettime(CLOCK_MONOTONIC, &t0);
        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        ck_assert_int_eq(passthrough_state_save(a, &o, s, &rep), 0);
        ck_assert_msg(session_state_encode(s, &buf, &len, err, sizeof err) == 0, "%s", err);
        save_us = usec_since(&t0);
        ck_assert_uint_eq(rep.nodes_lost, 0);
        a = passthrough_free(a);

        b = open_share_with(true);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ck_assert_msg(session_state_decode(buf, len, STATE_MAX_BYTES, &d, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq(passthrough_state_load(b, &o, d, NULL, 0, &rep), 0);
        load_us = usec_since(&t0);
        ck_assert_uint_eq(passthrough_inode_count(b), 100001);
        ck_assert_uint_eq(passthrough_handle_count(b), 1000);
        fprintf(stderr, "100000 nodes, 1000 handles (find-paths): %zu bytes, save %" PRIu64 " ms, load %" PRIu64 " ms\n",
                len, save_us / 1000, load_us / 1000);
        ck_assert_timing_lt(save_us + load_us, 30000000);
}
END_TEST

/* A state with its session record and nothing else, for a hostile stream built by hand. */
static SessionState *bare_state(void) {
        StateSession ss = {};
        SessionState *s;

        ck_assert_int_eq(session_state_new(&s), 0);
        session_state_set_session(s, &ss);
        return s;
}

/* A hostile stream with --migration-on-error=guest-error: handles on a node that is not found are
 * kept without an fd (EBADF to the guest), so the fd budget did not count them. Each is a Handle
 * in the map: four million of them (STATE_MAX_HANDLES, a 200 MB stream) held about a gigabyte. A
 * guest cannot hold more handles than the fd budget allows; neither may a stream. */
START_TEST(test_lost_handles_bounded) {
        _cleanup_(passthrough_freep) Passthrough *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = bare_state();
        StateNode n = { .id = 5 << 6 | 3, .nlookup = 1, .parent = STATE_ROOT_ID, .type = S_IFREG, .fd_slot = -1,
                        .name = (char *) "absent" };
        PtStateOptions o = { .guest_error = true };
        PtStateReport rep;
        FsOptions fo = FS_OPTIONS_DEFAULT;
        struct mallinfo2 m0, m1;
        int r;

        ck_assert_int_eq(session_state_add_node(s, &n), 0);
        for (uint64_t k = 0; k < 200000; k++) {
                StateHandle h = { .fh = (k + 1) << 6 | 3, .node = n.id, .open_flags = O_RDONLY, .fd_slot = -1 };
                ck_assert_int_eq(session_state_add_handle(s, &h), 0);
        }
        fo.shared_dir = dir;
        fo.max_fds = 1000;
        ck_assert_int_eq(passthrough_new(&b, &fo), 0);
        m0 = mallinfo2();
        r = passthrough_state_load(b, &o, s, NULL, 0, &rep);
        m1 = mallinfo2();
        fprintf(stderr, "200000 handles on a lost node, fd budget 1000: load %d, %u handles held, heap +%zu kB\n", r,
                passthrough_handle_count(b), (m1.uordblks - m0.uordblks) / 1024);
        ck_assert_msg(passthrough_handle_count(b) <= 1000, "%u handles restored past an fd budget of 1000",
                      passthrough_handle_count(b));
        ck_assert_int_eq(r, -ENFILE);
}
END_TEST

/* Node ids and fhs are never issued twice (inode-map.h, handle-map.h). A hostile stream restoring
 * node UINT64_MAX and fh UINT64_MAX set their shard's next sequence number to 2^58, whose shift
 * wraps: the next new node and the next handle of that shard were given ids from the start again,
 * and one that a restored node or handle had was replaced in the table (the restored one leaked
 * with its fd; the guest's old fh now read the newly opened file). Such ids are refused, or, if
 * loaded, new ones never meet them. */
START_TEST(test_ids_never_reused) {
        _cleanup_(passthrough_freep) Passthrough *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = bare_state();
        StateNode a = { .id = 1 << 6 | 63, .nlookup = 1, .type = S_IFREG, .fd_slot = -1, .parent = 1, .name = "a" };
        StateNode x = { .id = UINT64_MAX, .nlookup = 1, .type = S_IFREG, .fd_slot = -1, .parent = 1, .name = "x" };
        StateHandle ha = { .fh = 1 << 6 | 63, .node = a.id, .open_flags = O_RDONLY, .fd_slot = -1 };
        StateHandle hx = { .fh = UINT64_MAX, .node = a.id, .open_flags = O_RDONLY, .fd_slot = -1 };
        PtStateOptions o = {};
        PtStateReport rep;
        char buf[8] = "", name[16];
        struct iovec iov = { buf, 1 };
        unsigned in_shard = 0;
        int r;

        put("a", "A");
        put("x", "X");
        ck_assert_int_eq(session_state_add_node(s, &a), 0);
        ck_assert_int_eq(session_state_add_handle(s, &ha), 0);
        r = session_state_add_node(s, &x);
        if (r == 0)
                r = session_state_add_handle(s, &hx);
        if (r < 0) { /* refused, as the decoder refuses it */
                ck_assert_int_eq(r, -EINVAL);
                return;
        }
        b = open_share();
        ck_assert_int_eq(passthrough_state_load(b, &o, s, NULL, 0, &rep), 0);
        /* New nodes until three landed in shard 63 (the shard picks by inode key). */
        for (unsigned k = 0; k < 2000 && in_shard < 3; k++) {
                FsEntry e;
                uint64_t fh;

                snprintf(name, sizeof name, "n%u", k);
                put(name, "N");
                ck_assert_int_eq(ops->lookup(b, &root_ctx, 1, name, &e), 0);
                ck_assert_msg(e.nodeid != a.id && e.nodeid != x.id, "a new node got the restored id %" PRIu64, e.nodeid);
                if ((e.nodeid & 63) != 63)
                        continue;
                in_shard++;
                ck_assert_int_eq(ops->open(b, &root_ctx, e.nodeid, O_RDONLY, false, &fh), 0);
                ck_assert_msg(fh != ha.fh && fh != hx.fh, "a new handle got the restored fh %" PRIu64, fh);
        }
        ck_assert_uint_eq(in_shard, 3);
        /* The restored handle still reads its own file. */
        ck_assert_int_eq(ops->read(b, &root_ctx, a.id, ha.fh, 0, &iov, 1), 1);
        ck_assert_str_eq(buf, "A");
}
END_TEST

/* What a hostile stream names (docs/security.md "Live migration"): a path through a symlink to a
 * directory outside the share, a FIFO and a character device with handles. Nothing outside is
 * located, neither special file is opened (a FIFO opened for reading would block the load), with
 * abort the load fails, with guest-error the nodes and handles answer EIO and EBADF. */
START_TEST(test_hostile_names) {
        _cleanup_(passthrough_freep) Passthrough *b = NULL;
        _cleanup_(session_state_freep) SessionState *s = bare_state();
        char out[] = "/tmp/test-pt-state-out-XXXXXX", path[512], cmd[64], buf[8];
        struct iovec iov = { buf, sizeof buf };
        StateNode n[] = {
                { .id = 2 << 6 | 1, .nlookup = 1, .parent = STATE_ROOT_ID, .type = S_IFREG, .fd_slot = -1, .name = (char *) "sym/secret" },
                { .id = 3 << 6 | 1, .nlookup = 1, .parent = STATE_ROOT_ID, .type = S_IFIFO, .fd_slot = -1, .name = (char *) "fifo" },
                { .id = 4 << 6 | 1, .nlookup = 1, .parent = STATE_ROOT_ID, .type = S_IFCHR, .fd_slot = -1, .name = (char *) "null" },
        };
        StateHandle hs[] = {
                { .fh = 2 << 6 | 1, .node = n[0].id, .open_flags = O_RDONLY, .fd_slot = -1 },
                { .fh = 3 << 6 | 1, .node = n[1].id, .open_flags = O_RDONLY, .fd_slot = -1 },
                { .fh = 4 << 6 | 1, .node = n[2].id, .open_flags = O_RDWR, .fd_slot = -1 },
        };
        PtStateOptions abort_o = {}, guest_o = { .guest_error = true };
        PtStateReport rep;
        FILE *f;

        ck_assert_ptr_nonnull(mkdtemp(out));
        snprintf(path, sizeof path, "%s/secret", out);
        ck_assert_ptr_nonnull(f = fopen(path, "w"));
        fputs("SECRET", f);
        fclose(f);
        snprintf(path, sizeof path, "%s/sym", dir);
        ck_assert_int_eq(symlink(out, path), 0);
        snprintf(path, sizeof path, "%s/fifo", dir);
        ck_assert_int_eq(mkfifo(path, 0644), 0);
        snprintf(path, sizeof path, "%s/null", dir);
        ck_assert_int_eq(mknod(path, S_IFCHR | 0666, makedev(1, 3)), 0);

        for (size_t k = 0; k < ELEMENTSOF(n); k++)
                ck_assert_int_eq(session_state_add_node(s, &n[k]), 0);
        for (size_t k = 0; k < ELEMENTSOF(hs); k++)
                ck_assert_int_eq(session_state_add_handle(s, &hs[k]), 0);

        b = open_share();
        ck_assert_int_lt(passthrough_state_load(b, &abort_o, s, NULL, 0, &rep), 0);
        b = passthrough_free(b);

        b = open_share();
        ck_assert_int_eq(passthrough_state_load(b, &guest_o, s, NULL, 0, &rep), 0);
        ck_assert_uint_eq(rep.nodes_lost, 1); /* the path through the symlink */
        ck_assert_uint_eq(rep.handles_lost, 3);
        ck_assert_int_eq(ops->getattr(b, &root_ctx, n[0].id, FS_NO_FH, &(struct stat) {}), -EIO);
        for (size_t k = 0; k < ELEMENTSOF(hs); k++)
                ck_assert_int_eq(ops->read(b, &root_ctx, hs[k].node, hs[k].fh, 0, &iov, 1), -EBADF);
        snprintf(cmd, sizeof cmd, "rm -rf %s", out);
        ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *pt_state_suite(void) {
        Suite *s = suite_create("passthrough-state");
        TCase *tc = tcase_create("state");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, test_round_trip_by_path);
        tcase_add_test(tc, test_fd_slots);
        tcase_add_test(tc, test_hand_over_fds);
        tcase_add_test(tc, test_hand_over_locks);
        tcase_add_test(tc, test_load_while_source_holds);
        tcase_add_test(tc, test_pending_past_deadline);
        tcase_add_test(tc, test_restored_nodes_in_clock);
        tcase_add_test(tc, test_duplicate_load_refused);
        tcase_add_test(tc, test_lost_handles_bounded);
        tcase_add_test(tc, test_ids_never_reused);
        tcase_add_root_test(tc, test_hostile_names);
        tcase_add_root_test(tc, test_hundred_thousand_nodes);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(pt_state_suite)
