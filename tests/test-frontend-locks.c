/* test-frontend-locks.c: vufsd driven by the test frontend: lock lifetime (issue 18) and hostile
 * lock sequences (issue 13), through the real daemon in its default sandbox. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"

static FeHarness *h;

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

static void teardown(void) {
        h = fe_harness_free(h);
}

static Frontend *start(void) {
        Frontend *fe = NULL;
        FeOptions o;
        int r;

        r = fe_harness_spawn_vufsd(h, NULL);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        fe_options_init(&o);
        r = fe_connect(&fe, h->socket_path, &o);
        ck_assert_msg(r == 0, "connect: %s", strerror(-r));
        r = fe_negotiate(fe);
        ck_assert_msg(r == 0, "negotiate: %s", fe->error);
        r = fe_start(fe, true);
        ck_assert_msg(r == 0, "start: %s", fe->error);
        return fe;
}

static FeFuse *client(Frontend *fe) {
        FeFuse *c = NULL;
        int r;

        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        r = fe_fuse_init(c);
        ck_assert_msg(r == 0, "INIT: %d %s", r, c->last_problem);
        ck_assert(c->init.flags & FUSE_POSIX_LOCKS);
        return c;
}

static FeFuseReq *lk_new(FeFuse *c, uint32_t opcode, uint64_t nodeid, uint64_t fh, uint64_t owner, uint32_t type,
                         uint64_t start, uint64_t end) {
        struct fuse_lk_in in = { .fh = fh, .owner = owner, .lk = { .start = start, .end = end, .type = type } };
        FeFuseReq *req;

        ck_assert_int_eq(
                fe_fuse_req_new(&req, c, opcode, nodeid, opcode == FUSE_GETLK ? sizeof(struct fuse_lk_out) : 0), 0);
        ck_assert_int_eq(fe_fuse_req_add(req, &in, sizeof in), 0);
        return req;
}

static int setlk(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t owner, uint32_t type, uint64_t start,
                 uint64_t end) {
        FeFuseReq *req = lk_new(c, FUSE_SETLK, nodeid, fh, owner, type, start, end);
        int r = fe_fuse_call(c, req);

        fe_fuse_req_free(c, req);
        return r;
}

/* The lock type owner sees on [start, end] through fh: F_UNLCK when it could take a write lock. */
static uint32_t getlk(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t owner, uint64_t start, uint64_t end) {
        FeFuseReq *req = lk_new(c, FUSE_GETLK, nodeid, fh, owner, F_WRLCK, start, end);
        struct fuse_lk_out o;

        ck_assert_int_eq(fe_fuse_call(c, req), 0);
        ck_assert_uint_eq(req->payload_len, sizeof o);
        memcpy(&o, req->payload, sizeof o);
        fe_fuse_req_free(c, req);
        return o.lk.type;
}

static int flush_owner(FeFuse *c, uint64_t nodeid, uint64_t fh, uint64_t owner) {
        struct fuse_flush_in in = { .fh = fh, .lock_owner = owner };
        FeFuseReq *req;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&req, c, FUSE_FLUSH, nodeid, 0), 0);
        ck_assert_int_eq(fe_fuse_req_add(req, &in, sizeof in), 0);
        r = fe_fuse_call(c, req);
        fe_fuse_req_free(c, req);
        return r;
}

/* Whether a process on the host could take a write lock on [start, start + len) of the share's
 * file: the lock state as the host sees it. */
static bool host_sees_unlocked(const char *name, off_t start, off_t len) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
        int fd = open(p, O_RDWR | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fcntl(fd, F_OFD_GETLK, &fl), 0);
        close(fd);
        return fl.l_type == F_UNLCK;
}

/* Issue 18, as Linux sends it: an OFD lock (owner = the guest's open file), close of the last
 * descriptor = FLUSH with the closing process's owner, then RELEASE. */
START_TEST(test_ofd_lock_ends_with_release) {
        Frontend *fe = start();
        FeFuse *c = client(fe);
        struct fuse_entry_out e;
        uint64_t fa, fb;

        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "ofd", O_RDWR, 0644, &e, &fa), 0);
        ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDWR, &fb), 0);

        ck_assert_int_eq(setlk(c, e.nodeid, fa, 0xf11e0a, F_WRLCK, 0, 9), 0);
        ck_assert_uint_eq(getlk(c, e.nodeid, fb, 0xb0b, 0, 9), F_WRLCK);
        ck_assert(!host_sees_unlocked("ofd", 0, 10));
        ck_assert_int_eq(flush_owner(c, e.nodeid, fa, 0x9e0c355), 0);
        ck_assert_uint_eq(getlk(c, e.nodeid, fb, 0xb0b, 0, 9), F_WRLCK); /* like closing a dup */
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fa, false), 0);
        ck_assert_uint_eq(getlk(c, e.nodeid, fb, 0xb0b, 0, 9), F_UNLCK);
        ck_assert(host_sees_unlocked("ofd", 0, 10));

        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fb, false), 0);
        ck_assert_uint_eq(c->proto_errors, 0);
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

/* A SETLKW blocked on a handle the guest releases is answered, and the queue keeps serving. */
START_TEST(test_waiter_on_released_handle) {
        Frontend *fe = start();
        FeFuse *c = client(fe);
        struct fuse_entry_out e;
        struct fuse_attr_out attr;
        FeFuseReq *w;
        uint64_t fa, fb;

        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "wait", O_RDWR, 0644, &e, &fa), 0);
        ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDWR, &fb), 0);
        ck_assert_int_eq(setlk(c, e.nodeid, fa, 0xa, F_WRLCK, 0, INT64_MAX), 0);

        w = lk_new(c, FUSE_SETLKW, e.nodeid, fb, 0xb, F_WRLCK, 0, INT64_MAX);
        ck_assert_int_eq(fe_fuse_submit(c, w, -1), 0);
        for (unsigned i = 0; i < 20; i++)
                ck_assert_int_eq(fe_fuse_getattr(c, e.nodeid, &attr), 0);
        ck_assert(!w->done);

        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fb, false), 0);
        while (!w->done) {
                FeFuseReq *done = NULL;
                int r = fe_fuse_wait(c, c->queue, 3000, &done);
                ck_assert_msg(r == 0, "SETLKW on a released handle not answered within 3 s (%d)", r);
        }
        ck_assert_int_eq(w->status, 0);
        ck_assert_int_eq(w->oh.error, -EBADF);
        fe_fuse_req_free(c, w);
        /* The holder's lock is untouched. */
        ck_assert(!host_sees_unlocked("wait", 0, 0));
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fa, false), 0);
        ck_assert(host_sees_unlocked("wait", 0, 0));
        ck_assert_uint_eq(c->proto_errors, 0);
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("frontend-locks");
        TCase *tc = tcase_create("locks");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_ofd_lock_ends_with_release);
        tcase_add_test(tc, test_waiter_on_released_handle);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(suite());
        int failed;

        signal(SIGPIPE, SIG_IGN);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
