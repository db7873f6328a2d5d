/* test-frontend-locks.c: vufsd driven by the test frontend: lock lifetime (issue 18) and hostile
 * lock sequences (issue 13), through the real daemon in its default sandbox. */
#define _GNU_SOURCE 1
#include <check.h>
#include <sched.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "host-locks.h"
#include "util.h"
#include "test-main.h"

static FeHarness *h;

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

static void teardown(void) {
        h = fe_harness_free(h);
}

static Frontend *start_with(const FeOptions *o) {
        Frontend *fe = NULL;
        int r;

        r = fe_harness_spawn_vufsd(h, NULL);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        r = fe_connect(&fe, h->socket_path, o);
        ck_assert_msg(r == 0, "connect: %s", strerror(-r));
        r = fe_negotiate(fe);
        ck_assert_msg(r == 0, "negotiate: %s", fe->error);
        r = fe_start(fe, true);
        ck_assert_msg(r == 0, "start: %s", fe->error);
        return fe;
}

static Frontend *start(void) {
        FeOptions o;

        fe_options_init(&o);
        return start_with(&o);
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

        return test_host_lock_type(p, start, len) == F_UNLCK;
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

/* Issue 13 item 2: the guest rewrites a request's header while vufsd handles it, between GETATTR
 * and SETLKW. vufsd must decide where the request runs and what it is from one copy of the header:
 * if the thread choice saw GETATTR (inline, on the queue thread) and the FUSE server then SETLKW, the
 * queue thread would sit in a lock wait and the queue stop. Probes: a GETATTR after every toggled
 * request must be answered; stopping the device with waits pending must finish (queue_stop cancels
 * lock waits while it waits for the queue thread). */
START_TEST(test_opcode_toggled_in_guest_memory) {
        enum { ROUNDS = 300, FILLERS = 16, FLIP_NS = 1000000 };
        FeOptions o;
        Frontend *fe;
        FeFuse *c;
        struct fuse_entry_out e;
        struct fuse_attr_out attr;
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
        FeFuseReq *reqs[ROUNDS] = { 0 };
        unsigned n = 0, as_lock = 0, as_getattr = 0, answered = 0;
        bool stalled = false;
        _cleanup_free_ char *path = NULL;
        uint64_t fh;
        int host_fd, r;

        /* vufsd on one CPU, the flipping on another, so that the flips really happen between
         * vufsd's reads (on one shared CPU a read pair is rarely split by a context switch). vufsd
         * inherits the CPU at spawn; the test moves away afterwards. */
        {
                cpu_set_t all, one;
                int first = -1, second = -1;

                ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
                for (int i = 0; i < CPU_SETSIZE && second < 0; i++)
                        if (CPU_ISSET(i, &all)) {
                                if (first < 0)
                                        first = i;
                                else
                                        second = i;
                        }
                if (second >= 0) {
                        CPU_ZERO(&one);
                        CPU_SET(second, &one);
                        ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
                }
                fe_options_init(&o);
                o.timeout_ms = 5000;
                o.queue_size = 1024;
                fe = start_with(&o);
                if (second >= 0) {
                        CPU_ZERO(&one);
                        CPU_SET(first, &one);
                        ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
                }
        }
        c = client(fe);
        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "toggle", O_RDWR, 0644, &e, &fh), 0);
        /* The host holds the lock: every request the server takes for SETLKW waits. */
        path = fe_harness_path(h, "toggle");
        host_fd = open(path, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(host_fd, 0);
        ck_assert_int_eq(fcntl(host_fd, F_OFD_SETLK, &fl), 0);

        for (; n < ROUNDS && !stalled; n++) {
                struct fuse_lk_in in = { .fh = fh,
                                         .owner = fh,
                                         .lk = { .start = 0, .end = INT64_MAX, .type = F_WRLCK } };
                _Atomic uint32_t *opcode;
                struct timespec t0, t;

                FeFuseReq *filler[FILLERS];

                /* Requests ahead of it keep the queue thread busy while the flipping starts. */
                for (unsigned k = 0; k < FILLERS; k++) {
                        struct fuse_getattr_in gi = { 0 };
                        ck_assert_int_eq(fe_fuse_req_new(&filler[k], c, FUSE_GETATTR, e.nodeid, sizeof attr), 0);
                        ck_assert_int_eq(fe_fuse_req_add(filler[k], &gi, sizeof gi), 0);
                        ck_assert_int_eq(fe_fuse_submit(c, filler[k], -1), 0);
                }
                ck_assert_int_eq(fe_fuse_req_new(&reqs[n], c, FUSE_SETLKW, e.nodeid, sizeof(struct fuse_attr_out)), 0);
                ck_assert_int_eq(fe_fuse_req_add(reqs[n], &in, sizeof in), 0);
                ck_assert_int_eq(fe_fuse_submit(c, reqs[n], -1), 0);
                /* The header's first descriptor is in guest memory: flip the opcode while vufsd reads
                 * it, then put back what was sent (the test frontend checks readable descriptors come
                 * back unchanged). */
                ck_assert_uint_ge(reqs[n]->pieces[0].len, sizeof(struct fuse_in_header));
                opcode = (_Atomic uint32_t *)((uint8_t *)reqs[n]->pieces[0].host +
                                              offsetof(struct fuse_in_header, opcode));
                clock_gettime(CLOCK_MONOTONIC, &t0);
                /* Each value held for a while (0.1-3 µs, varying): the two reads vufsd did before
                 * were that far apart, and a flip between them is what this looks for. */
                do {
                        static const unsigned hold[] = { 0, 1, 3, 10, 30, 100, 300, 1000 };
                        for (unsigned k = 0; k < 2 * ELEMENTSOF(hold); k++) {
                                atomic_store_explicit(opcode, k & 1 ? FUSE_SETLKW : FUSE_GETATTR,
                                                      memory_order_relaxed);
                                for (volatile unsigned spin = 0; spin < hold[(k + n) % ELEMENTSOF(hold)]; spin++)
                                        ;
                        }
                        clock_gettime(CLOCK_MONOTONIC, &t);
                } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < FLIP_NS);
                atomic_store(opcode, FUSE_SETLKW);

                r = fe_fuse_getattr(c, e.nodeid, &attr);
                for (unsigned k = 0; k < FILLERS; k++) {
                        if (!stalled && r != -ETIMEDOUT)
                                ck_assert(filler[k]->done);
                        if (filler[k]->done)
                                fe_fuse_req_free(c, filler[k]);
                        else
                                fe_fuse_req_abandon(c, filler[k]); /* the queue is stuck: the test fails */
                }
                if (r == -ETIMEDOUT)
                        stalled = true;
                else
                        ck_assert_int_eq(r, 0);
        }

        /* Stop the device with the lock still held: waits are cancelled, the stop finishes. */
        r = fe_stop(fe);
        ck_assert_msg(r == 0, "stopping the device with lock waits pending (%s after %u toggled requests): %s",
                      stalled ? "the queue had stalled" : "the queue was serving", n, fe->error);
        for (;;) {
                FeFuseReq *done = NULL;
                if (fe_fuse_wait(c, c->queue, 0, &done) < 0)
                        break;
        }
        for (unsigned i = 0; i < n; i++) {
                if (!reqs[i]->done)
                        continue;
                answered++;
                /* EINTR: cancelled by the stop; ENOLCK: past the queue's share of lock waits
                 * (QUEUE_MAX_LOCK_WAITS, issue 31), answered at once after one attempt. */
                if (reqs[i]->oh.error == -EINTR || reqs[i]->oh.error == -ENOLCK)
                        as_lock++;
                else if (reqs[i]->oh.error == 0)
                        as_getattr++; /* GETATTR (with or without FUSE_GETATTR_FH: the owner is fh) */
                else
                        fprintf(stderr, "toggled request %u: error %d status %d %s\n", i, reqs[i]->oh.error,
                                reqs[i]->status, reqs[i]->problem);
                fe_fuse_req_free(c, reqs[i]);
        }
        fprintf(stderr, "toggled requests: %u sent, %u answered (%u as SETLKW, %u as GETATTR)\n", n, answered, as_lock,
                as_getattr);
        ck_assert_msg(!stalled, "the queue stopped serving after toggled request %u (a lock wait on its thread)", n);
        ck_assert_uint_eq(answered, n);
        ck_assert_uint_eq(as_lock + as_getattr, n);
        safe_close(host_fd);
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("frontend-locks");
        TCase *tc = tcase_create("locks");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_ofd_lock_ends_with_release);
        tcase_add_test(tc, test_waiter_on_released_handle);
        tcase_add_test(tc, test_opcode_toggled_in_guest_memory);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        signal(SIGPIPE, SIG_IGN);
        return test_main_run(suite());
}
