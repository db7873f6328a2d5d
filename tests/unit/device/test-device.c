/* test-device.c: the device's queues and threads with a fake request handler, driven in process by
 * the test frontend: requests reach the handler from every queue, replies and used lengths reach
 * the guest, statistics see what the handler reported, a stopping queue cancels blocked requests. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "chain.h"
#include "device.h"
#include "executor.h"
#include "fuse-client.h"
#include "stats.h"
#include "test-main.h"
#include "util.h"
#include "vhost-user.h"

#define BLOCKING_OPCODE FUSE_SETLKW /* the fake blocks on it until cancel_waits */
#define DROPPED_OPCODE FUSE_FORGET  /* answered with no reply */

/* ---- the fake handler ---- */

typedef struct FakeHandler {
        _Atomic unsigned calls;
        _Atomic unsigned calls_per_queue_thread; /* distinct from calls only to prove threads ran */
        _Atomic unsigned cancels;
        bool blocking_may_wait; /* what the blocking request was told */
        pthread_mutex_t lock; /* guards blocked/released: the blocking request waits on cond */
        pthread_cond_t cond;
        unsigned blocked;
        bool released;
} FakeHandler;

static FakeHandler fh = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

/* Replies with an 8-byte payload: the request's nodeid times 3, so the test sees its data moved. */
/* The fake's wire format is FUSE's header (the test frontend speaks it); its one waiting request is
 * BLOCKING_OPCODE, which it classifies as a lock wait so the device hands it to a helper thread. */
static ExecClass fake_classify(void *data, const void *hdr, const ChainIter *rest) {
        struct fuse_in_header ih;

        memcpy(&ih, hdr, sizeof ih);
        return ih.opcode == BLOCKING_OPCODE ? EXEC_CLASS_LOCK_WAIT : EXEC_CLASS_META;
}

static uint32_t fake_process(void *data, const void *hdr, ChainIter *in, ChainIter *out, bool may_wait,
                             RequestInfo *info) {
        FakeHandler *h = data;
        struct fuse_in_header ih;
        struct fuse_out_header oh;
        uint64_t payload;

        atomic_fetch_add(&h->calls, 1);
        /* The device hands over the header it copied; a chain shorter than one comes without. */
        if (!hdr)
                return 0;
        memcpy(&ih, hdr, sizeof ih);
        if (ih.opcode == BLOCKING_OPCODE)
                h->blocking_may_wait = may_wait;
        info->opcode = ih.opcode;
        if (ih.opcode == DROPPED_OPCODE)
                return 0;
        oh = (struct fuse_out_header) { .len = sizeof oh + sizeof payload, .unique = ih.unique };
        if (ih.opcode == BLOCKING_OPCODE) {
                pthread_mutex_lock(&h->lock);
                h->blocked++;
                pthread_cond_broadcast(&h->cond);
                while (!h->released)
                        pthread_cond_wait(&h->cond, &h->lock);
                pthread_mutex_unlock(&h->lock);
                oh = (struct fuse_out_header) { .len = sizeof oh, .error = -EINTR, .unique = ih.unique };
        }
        payload = ih.nodeid * 3;
        if (chain_write(out, &oh, sizeof oh) < 0)
                return 0;
        if (oh.error == 0 && chain_write(out, &payload, sizeof payload) < 0)
                return 0;
        info->error = oh.error;
        info->bytes = oh.error == 0 ? sizeof payload : 0;
        info->replied = true;
        return oh.len;
}

static void fake_cancel_waits(void *data) {
        FakeHandler *h = data;

        atomic_fetch_add(&h->cancels, 1);
        pthread_mutex_lock(&h->lock);
        h->released = true;
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->lock);
}

/* ---- the device, in process ---- */

static struct {
        char dir[64], socket_path[96];
        Device *dev;
        Executor *ex;
        Stats *stats;
        int listen_fd;
        pthread_t thread;
        /* Orders the test thread's device_get_info() before the reset the backend thread does
         * after the frontend leaves: the device is a main-thread object, and a socket's EOF is no
         * happens-before edge for TSan. */
        pthread_mutex_t info_lock;
} b = { .info_lock = PTHREAD_MUTEX_INITIALIZER };

static void *backend_main(void *userdata) {
        int conn = accept4(b.listen_fd, NULL, NULL, SOCK_CLOEXEC);

        if (conn < 0)
                return NULL;
        for (;;) {
                VhostUserMsg msg;
                if (vhost_user_recv(conn, &msg) < 0 || vhost_user_handle(&device_vhost_ops, b.dev, conn, &msg) < 0)
                        break;
        }
        pthread_mutex_lock(&b.info_lock);
        device_reset(b.dev);
        pthread_mutex_unlock(&b.info_lock);
        close(conn);
        return NULL;
}

static void backend_start(ThreadMode mode) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        RequestHandler h = { .header_size = sizeof(struct fuse_in_header),
                             .classify = fake_classify,
                             .process = fake_process,
                             .cancel_waits = fake_cancel_waits,
                             .data = &fh };

        atomic_store(&fh.calls, 0);
        atomic_store(&fh.cancels, 0);
        fh.blocked = 0;
        fh.released = false;
        snprintf(b.dir, sizeof b.dir, "/tmp/test-device.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(b.dir));
        snprintf(b.socket_path, sizeof b.socket_path, "%s/vhost.sock", b.dir);
        ck_assert_int_eq(device_new(&b.dev, &h, 2), 0);
        ck_assert_int_eq(executor_new(&b.ex, mode, 2), 0);
        ck_assert_int_eq(stats_new(&b.stats), 0);
        device_attach(b.dev, b.ex, b.stats);
        b.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(b.listen_fd, 0);
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", b.socket_path);
        ck_assert_int_eq(bind(b.listen_fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(listen(b.listen_fd, 1), 0);
        ck_assert_int_eq(pthread_create(&b.thread, NULL, backend_main, NULL), 0);
}

static void backend_stop(void) {
        pthread_join(b.thread, NULL);
        close(b.listen_fd);
        b.dev = device_free(b.dev);
        b.ex = executor_free(b.ex);
        b.stats = stats_free(b.stats);
        unlink(b.socket_path);
        rmdir(b.dir);
}

static FeFuse *frontend_start(Frontend **ret_fe) {
        FeOptions o;
        FeFuse *c;

        fe_options_init(&o);
        o.num_queues = 3;
        o.queue_size = 64;
        o.mem_size = 16 << 20;
        ck_assert_int_eq(fe_connect_and_start(ret_fe, b.socket_path, &o), 0);
        ck_assert_int_eq(fe_fuse_new(&c, *ret_fe), 0);
        return c;
}

static void frontend_stop(Frontend *fe, FeFuse *c) {
        ck_assert_uint_eq(c->proto_errors, 0);
        fe_fuse_free(c);
        fe_free(fe);
}

/* ---- tests ---- */

static void run_requests(ThreadMode mode) {
        Frontend *fe;
        FeFuse *c;
        StatsSnapshot snap;

        backend_start(mode);
        c = frontend_start(&fe);
        for (unsigned q = 1; q <= 2; q++) {
                c->queue = q;
                for (uint64_t n = 1; n <= 20; n++) {
                        FeFuseReq *req;
                        uint64_t v;
                        ck_assert_int_eq(fe_fuse_req_new(&req, c, FUSE_GETATTR, n, sizeof v), 0);
                        ck_assert_int_eq(fe_fuse_call(c, req), 0);
                        ck_assert_uint_eq(req->used_len, sizeof(struct fuse_out_header) + sizeof v);
                        ck_assert_uint_eq(req->payload_len, sizeof v);
                        memcpy(&v, req->payload, sizeof v);
                        ck_assert_uint_eq(v, n * 3);
                        fe_fuse_req_free(c, req);
                }
        }
        /* A request the handler does not answer: used length 0 on the hiprio queue. */
        {
                FeFuseReq *req;
                struct fuse_forget_in f = { .nlookup = 1 };
                ck_assert_int_eq(fe_fuse_req_new(&req, c, DROPPED_OPCODE, 5, 0), 0);
                ck_assert_int_eq(fe_fuse_req_add(req, &f, sizeof f), 0);
                req->no_reply = true;
                ck_assert_int_eq(fe_fuse_submit(c, req, 0), 0);
                ck_assert_int_eq(fe_vu_ping(fe), 0);
                while (!req->done) {
                        FeFuseReq *done;
                        ck_assert_int_eq(fe_fuse_wait(c, 0, 5000, &done), 0);
                }
                ck_assert_uint_eq(req->used_len, 0);
                fe_fuse_req_free(c, req);
        }
        ck_assert_uint_eq(atomic_load(&fh.calls), 41);
        stats_snapshot(b.stats, &snap);
        ck_assert_uint_eq(snap.op[FUSE_GETATTR].requests, 40);
        ck_assert_uint_eq(snap.op[FUSE_GETATTR].bytes, 40 * 8);
        ck_assert_uint_eq(snap.op[FUSE_GETATTR].errors, 0);
        ck_assert_uint_eq(snap.op[DROPPED_OPCODE].requests, 1);
        ck_assert_uint_eq(snap.queue[1].requests, 20);
        ck_assert_uint_eq(snap.queue[2].requests, 20);
        ck_assert_uint_eq(snap.queue[0].requests, 1);
        ck_assert_uint_eq(atomic_load(&fh.cancels), 0);
        frontend_stop(fe, c);
        backend_stop();
}

START_TEST(test_requests_inline) {
        run_requests(THREAD_MODE_INLINE);
}
END_TEST

START_TEST(test_requests_pool) {
        run_requests(THREAD_MODE_POOL);
}
END_TEST

/* GET_VRING_BASE while the handler blocks: after the grace period the device cancels the wait
 * through the handler, the request completes with its error, the queue stops. */
START_TEST(test_stop_cancels_blocked) {
        Frontend *fe;
        FeFuse *c;
        FeFuseReq *req;
        unsigned base;

        backend_start(THREAD_MODE_AUTO);
        c = frontend_start(&fe);
        ck_assert_int_eq(fe_fuse_req_new(&req, c, BLOCKING_OPCODE, 7, 0), 0);
        ck_assert_int_eq(fe_fuse_submit(c, req, 1), 0);
        pthread_mutex_lock(&fh.lock);
        while (fh.blocked == 0)
                pthread_cond_wait(&fh.cond, &fh.lock);
        pthread_mutex_unlock(&fh.lock);
        ck_assert_uint_eq(atomic_load(&fh.cancels), 0);
        ck_assert(fh.blocking_may_wait); /* auto mode runs a lock wait on a helper thread */
        ck_assert_int_eq(fe_vu_get_vring_base(fe, 1, &base), 0);
        ck_assert_uint_ge(atomic_load(&fh.cancels), 1);
        ck_assert_uint_eq(base, 1); /* the one request was consumed */
        while (!req->done) {
                FeFuseReq *done;
                ck_assert_int_eq(fe_fuse_wait(c, 1, 5000, &done), 0);
        }
        ck_assert_int_eq(req->oh.error, -EINTR);
        fe_fuse_req_free(c, req);
        frontend_stop(fe, c);
        backend_stop();
}
END_TEST

START_TEST(test_new_checks) {
        Device *d = NULL;
        RequestHandler none = { 0 }, h = { .header_size = sizeof(struct fuse_in_header), .process = fake_process, .data = &fh };

        ck_assert_int_eq(device_new(&d, NULL, 1), -EINVAL);
        ck_assert_int_eq(device_new(&d, &none, 1), -EINVAL);
        none = h;
        none.header_size = 0; /* a header is what the device copies and routes by */
        ck_assert_int_eq(device_new(&d, &none, 1), -EINVAL);
        none.header_size = REQUEST_HEADER_MAX + 1;
        ck_assert_int_eq(device_new(&d, &none, 1), -EINVAL);
        ck_assert_int_eq(device_new(&d, &h, 0), -ERANGE);
        ck_assert_int_eq(device_new(&d, &h, DEVICE_MAX_REQUEST_QUEUES + 1), -ERANGE);
        ck_assert_ptr_null(d);
        ck_assert_int_eq(device_new(&d, &h, DEVICE_MAX_REQUEST_QUEUES), 0);
        d = device_free(d);
}
END_TEST

/* What the composition may read of the device (its struct is private to daemon/device/): the
 * queue count it was made with and what the frontend negotiated, through device_get_info(). */
START_TEST(test_info) {
        Frontend *fe;
        FeFuse *c;
        DeviceInfo info;

        backend_start(THREAD_MODE_INLINE);
        device_get_info(b.dev, &info);
        ck_assert_uint_eq(info.n_queues, 3);
        ck_assert_uint_eq(info.running_queues, 0);
        ck_assert_uint_eq(info.features, 0);
        ck_assert_uint_eq(info.protocol_features, 0);
        c = frontend_start(&fe);
        /* Everything below is written on the vhost-user thread, read here after a round trip. */
        ck_assert_int_eq(fe_vu_ping(fe), 0);
        pthread_mutex_lock(&b.info_lock);
        device_get_info(b.dev, &info);
        pthread_mutex_unlock(&b.info_lock);
        ck_assert_uint_eq(info.n_queues, 3);
        ck_assert_uint_eq(info.running_queues, 3);
        ck_assert_uint_ne(info.features, 0);
        ck_assert_uint_eq(info.features, fe->features);
        ck_assert_uint_eq(info.protocol_features, fe->protocol);
        frontend_stop(fe, c);
        backend_stop();
        ck_assert_ptr_null(b.dev);
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("device");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_new_checks);
        tcase_add_test(tc, test_info);
        tcase_add_test(tc, test_requests_inline);
        tcase_add_test(tc, test_requests_pool);
        tcase_add_test(tc, test_stop_cancels_blocked);
        suite_add_tcase(s, tc);
}

TEST_MAIN("device", add_tests)
