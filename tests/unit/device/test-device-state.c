/* test-device-state.c: SET_DEVICE_STATE_FD and CHECK_DEVICE_STATE in the device (device-state.c)
 * with a fake state handler: the bytes go through the pipe both ways on a thread of their own, the
 * outcome reaches CHECK_DEVICE_STATE, an over-long stream is refused, a second transfer waits for
 * the first, and a reset ends a transfer whose frontend never closes its pipe. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device.h"
#include "test-main.h"
#include "util.h"
#include "vhost-user.h"

typedef struct Fake {
        int save_result;
        pthread_t save_thread;
        uint8_t loaded[64];
        size_t loaded_len;
} Fake;

static Fake fake;

static int fake_save(void *data, uint8_t **ret, size_t *ret_len, char *err, size_t errlen) {
        Fake *f = data;

        f->save_thread = pthread_self();
        if (f->save_result < 0)
                return f->save_result;
        *ret = (uint8_t *) strdup("the device state");
        *ret_len = 16;
        return 0;
}

static int fake_load(void *data, const uint8_t *buf, size_t len, char *err, size_t errlen) {
        Fake *f = data;

        f->loaded_len = MIN(len, sizeof f->loaded);
        memcpy(f->loaded, buf, f->loaded_len);
        return len == 0 ? -EBADMSG : 0;
}

static uint32_t fake_process(void *data, const void *h, ChainIter *in, ChainIter *out, bool may_wait, RequestInfo *info) {
        return 0;
}

static Device *new_device(void) {
        RequestHandler rh = { .header_size = 8, .process = fake_process };
        DeviceStateHandler sh = { .save = fake_save, .load = fake_load, .max_len = 1000, .data = &fake };
        Device *d;

        fake = (Fake) {};
        ck_assert_int_eq(device_new(&d, &rh, 1), 0);
        device_set_state_handler(d, &sh);
        ck_assert(device_vhost_ops.offered_protocol_features(d) & (1ull << VHOST_USER_PROTOCOL_F_DEVICE_STATE));
        return d;
}

START_TEST(test_save) {
        _cleanup_(device_freep) Device *d = new_device();
        char buf[64] = "";
        int p[2];

        ck_assert_int_eq(device_check_state(d), -ENOENT); /* nothing transferred yet */
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(device_set_state_fd(d, VHOST_USER_TRANSFER_SAVE, p[1]), 0);
        ck_assert_int_eq(read(p[0], buf, sizeof buf), 16);
        ck_assert_int_eq(read(p[0], buf + 16, sizeof buf - 16), 0); /* the end: the device closed */
        ck_assert_str_eq(buf, "the device state");
        ck_assert_int_eq(device_check_state(d), 0);
        ck_assert(!pthread_equal(fake.save_thread, pthread_self()));
        close(p[0]);

        /* A save that fails: the end of the stream at once, and CHECK says why. */
        fake.save_result = -EIO;
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(device_set_state_fd(d, VHOST_USER_TRANSFER_SAVE, p[1]), 0);
        ck_assert_int_eq(read(p[0], buf, sizeof buf), 0);
        ck_assert_int_eq(device_check_state(d), -EIO);
        close(p[0]);
}
END_TEST

START_TEST(test_load) {
        _cleanup_(device_freep) Device *d = new_device();
        char big[1001];
        int p[2];

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(device_set_state_fd(d, VHOST_USER_TRANSFER_LOAD, p[0]), 0);
        ck_assert_int_eq(write(p[1], "incoming", 8), 8);
        close(p[1]);
        ck_assert_int_eq(device_check_state(d), 0);
        ck_assert_uint_eq(fake.loaded_len, 8);
        ck_assert_mem_eq(fake.loaded, "incoming", 8);

        /* One byte more than the handler takes: refused, the handler never called. */
        fake.loaded_len = 0;
        memset(big, 'x', sizeof big);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(device_set_state_fd(d, VHOST_USER_TRANSFER_LOAD, p[0]), 0);
        ck_assert_int_eq(write(p[1], big, sizeof big), (ssize_t) sizeof big);
        close(p[1]);
        ck_assert_int_eq(device_check_state(d), -EFBIG);
        ck_assert_uint_eq(fake.loaded_len, 0);
}
END_TEST

/* A frontend that starts a load and never finishes it: a second transfer is refused meanwhile,
 * and a reset (the frontend went) ends it at once. */
START_TEST(test_abandoned_load) {
        _cleanup_(device_freep) Device *d = new_device();
        struct timespec t0, t1;
        int p[2], q[2];

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(device_set_state_fd(d, VHOST_USER_TRANSFER_LOAD, p[0]), 0);
        ck_assert_int_eq(write(p[1], "half", 4), 4);
        ck_assert_int_eq(pipe2(q, O_CLOEXEC), 0);
        ck_assert_int_eq(device_set_state_fd(d, VHOST_USER_TRANSFER_SAVE, q[1]), -EBUSY);
        ck_assert_int_eq(fcntl(q[1], F_GETFD), -1); /* taken and closed anyway */
        close(q[0]);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        device_reset(d);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 2);
        ck_assert_uint_eq(fake.loaded_len, 0); /* cancelled before anything was applied */
        ck_assert_int_eq(device_check_state(d), -ENOENT);
        close(p[1]);
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("device-state");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_save);
        tcase_add_test(tc, test_load);
        tcase_add_test(tc, test_abandoned_load);
        suite_add_tcase(s, tc);
}

TEST_MAIN("device-state", add_tests)
