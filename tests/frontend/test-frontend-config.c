/* test-frontend-config.c: --tag through VHOST_USER_PROTOCOL_F_CONFIG: with a tag vufsd offers the
 * feature and GET_CONFIG returns the virtio-fs config space (tag[36], le32 num_request_queues), as
 * Cloud Hypervisor and crosvm read it; without one the feature is not offered (as the Rust
 * virtiofsd); out-of-range reads and SET_CONFIG are refused without dropping the connection. */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

static FeHarness *h;

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

static void teardown(void) {
        h = fe_harness_free(h);
}

typedef struct __attribute__((packed)) ConfigMsg {
        uint32_t offset, size, flags;
        uint8_t region[64];
} ConfigMsg;

#define CONFIG_HDR 12

/* GET_CONFIG of size bytes at offset; the reply's total size in *ret_size. */
static int get_config(Frontend *fe, uint32_t offset, uint32_t size, ConfigMsg *reply, uint32_t *ret_size) {
        ConfigMsg req = { .offset = offset, .size = size };
        FeVuHeader hdr;
        int r;

        r = fe_vu_send_raw(fe, FE_VU_GET_CONFIG, FE_VU_VERSION, CONFIG_HDR + size, &req, CONFIG_HDR + size, NULL, 0);
        if (r < 0)
                return r;
        memset(reply, 0xee, sizeof *reply);
        r = fe_vu_recv(fe, &hdr, reply, sizeof *reply, 5000);
        if (r < 0)
                return r;
        ck_assert_uint_eq(hdr.request, FE_VU_GET_CONFIG);
        *ret_size = hdr.size;
        return 0;
}

static Frontend *connect_with_config(unsigned num_queues) {
        Frontend *fe = NULL;
        FeOptions o;

        fe_options_init(&o);
        o.protocol_mask |= 1ull << FE_VU_PROTOCOL_F_CONFIG;
        o.num_queues = num_queues;
        ck_assert_int_eq(fe_connect(&fe, h->socket_path, &o), 0);
        ck_assert_msg(fe_negotiate(fe) == 0, "negotiate: %s", fe->error);
        return fe;
}

START_TEST(test_tag_in_config_space) {
        const char *const extra[] = { "--tag=myfs-tag", "--num-request-queues=2", NULL };
        Frontend *fe;
        ConfigMsg c;
        uint32_t size, nq;
        char want[36] = "myfs-tag";

        ck_assert_int_eq(fe_harness_spawn_vufsd(h, extra), 0);
        fe = connect_with_config(3);
        ck_assert_msg(fe_has_protocol(fe, FE_VU_PROTOCOL_F_CONFIG), "F_CONFIG not offered with --tag");

        ck_assert_int_eq(get_config(fe, 0, 40, &c, &size), 0);
        ck_assert_uint_eq(size, CONFIG_HDR + 40);
        ck_assert_uint_eq(c.offset, 0);
        ck_assert_uint_eq(c.size, 40);
        ck_assert(memcmp(c.region, want, sizeof want) == 0); /* NUL-padded, no terminator needed */
        memcpy(&nq, c.region + 36, 4);
        ck_assert_uint_eq(le32toh(nq), 2);

        /* a part of it, as a VMM reading one field */
        ck_assert_int_eq(get_config(fe, 36, 4, &c, &size), 0);
        ck_assert_uint_eq(size, CONFIG_HDR + 4);
        memcpy(&nq, c.region, 4);
        ck_assert_uint_eq(le32toh(nq), 2);

        /* past the end: an empty reply (QEMU's reading of a failed GET_CONFIG), not a disconnect */
        ck_assert_int_eq(get_config(fe, 30, 20, &c, &size), 0);
        ck_assert_uint_eq(size, CONFIG_HDR);
        ck_assert_int_eq(get_config(fe, 0xffffffff, 8, &c, &size), 0);
        ck_assert_uint_eq(size, CONFIG_HDR);

        /* the config space is read-only */
        {
                ConfigMsg set = { .offset = 0, .size = 4 };
                uint64_t ack = 0;
                FeVuHeader hdr;
                ck_assert_int_eq(fe_vu_send_raw(fe, FE_VU_SET_CONFIG, FE_VU_VERSION | FE_VU_FLAG_NEED_REPLY,
                                                CONFIG_HDR + 4, &set, CONFIG_HDR + 4, NULL, 0),
                                 0);
                ck_assert_int_ge(fe_vu_recv(fe, &hdr, &ack, sizeof ack, 5000), 0);
                ck_assert_uint_ne(ack, 0);
        }
        ck_assert_int_eq(fe_vu_ping(fe), 0);

        /* and it still serves */
        ck_assert_msg(fe_start(fe, true) == 0, "start: %s", fe->error);
        {
                FeFuse *f = NULL;
                ck_assert_int_eq(fe_fuse_new(&f, fe), 0);
                ck_assert_int_eq(fe_fuse_init(f), 0);
                ck_assert_msg(fe_fuse_roundtrip(f, "after-config", 5000, 3) == 0, "%s", f->last_problem);
                fe_fuse_free(f);
        }
        fe_free(fe);
}
END_TEST

START_TEST(test_no_tag_no_config) {
        Frontend *fe;

        ck_assert_int_eq(fe_harness_spawn_vufsd(h, NULL), 0);
        fe = connect_with_config(2);
        ck_assert(!fe_has_protocol(fe, FE_VU_PROTOCOL_F_CONFIG));
        fe_free(fe);
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("config");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_tag_in_config_space);
        tcase_add_test(tc, test_no_tag_no_config);
        suite_add_tcase(s, tc);
}

TEST_MAIN("frontend-config", add_tests)
