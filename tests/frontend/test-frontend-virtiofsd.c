/* test-frontend-virtiofsd.c: proves the test frontend against QEMU's C virtiofsd (the reference backend). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
        int r = fe_harness_spawn_virtiofsd(h);
        ck_assert_msg(r == 0, "starting virtiofsd: %s", strerror(-r));
}

static void teardown(void) {
        h = fe_harness_free(h);
}

/* Full session with the given options; checks data on the host side too. */
static void session(const FeOptions *o, FeSplit split, bool indirect, bool mix) {
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        int r, st;

        r = fe_connect_and_start(&fe, h->socket_path, o);
        ck_assert_msg(r == 0, "connect/start: %s", strerror(-r));
        ck_assert_uint_eq(fe->queue_num, 2);
        ck_assert(fe_has_protocol(fe, FE_VU_PROTOCOL_F_REPLY_ACK));
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        c->split = split;
        c->indirect = indirect;
        c->mix_regions = mix;

        r = fe_fuse_init(c);
        ck_assert_msg(r == 0, "INIT: %d %s", r, c->last_problem);
        ck_assert_uint_eq(c->init.major, 7);
        ck_assert_uint_ge(c->init.max_write, 4096);

        r = fe_fuse_roundtrip(c, "rt-a", 300000, 7);
        ck_assert_msg(r == 0, "roundtrip: %s", c->last_problem);
        r = fe_fuse_roundtrip(c, "rt-b", 0, 8);
        ck_assert_msg(r == 0, "roundtrip empty: %s", c->last_problem);

        /* Host-visible data: write through FUSE, read with read(2). */
        {
                struct fuse_entry_out e;
                uint64_t fh;
                char buf[5000], want[5000];
                _cleanup_free_ char *p = fe_harness_path(h, "host-check");
                int fd;

                fe_fuse_pattern(want, sizeof(want), 0, 99);
                ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "host-check", O_CREAT | O_WRONLY, 0100600, &e, &fh), 0);
                ck_assert_int_eq(fe_fuse_write(c, e.nodeid, fh, 0, want, sizeof(want)), (int) sizeof(want));
                ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
                fd = open(p, O_RDONLY);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(read(fd, buf, sizeof(buf)), (int) sizeof(buf));
                close(fd);
                ck_assert(memcmp(buf, want, sizeof(buf)) == 0);
        }
        ck_assert_msg(c->proto_errors == 0, "protocol errors: %s", c->last_problem);

        c = fe_fuse_free(c);
        fe = fe_free(fe);
        r = fe_backend_wait(h->backend, 5000, &st);
        ck_assert_msg(r == 0, "virtiofsd did not exit after disconnect");
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "virtiofsd status 0x%x", st);
}

START_TEST(test_set_mem_table_natural) {
        FeOptions o;
        fe_options_init(&o);
        session(&o, FE_SPLIT_NATURAL, true, false);
}
END_TEST

START_TEST(test_add_mem_reg_separate_random) {
        FeOptions o;
        fe_options_init(&o);
        o.add_mem_reg = true;
        o.mem_layout = FE_MEM_SEPARATE;
        session(&o, FE_SPLIT_RANDOM, true, true);
}
END_TEST

START_TEST(test_direct_tiny_one_region) {
        FeOptions o;
        fe_options_init(&o);
        o.mem_layout = FE_MEM_ONE_REGION;
        session(&o, FE_SPLIT_TINY, false, false);
}
END_TEST

START_TEST(test_no_event_idx) {
        FeOptions o;
        fe_options_init(&o);
        o.features_mask &= ~((1ull << VIRTIO_RING_F_EVENT_IDX) | (1ull << VIRTIO_RING_F_INDIRECT_DESC));
        session(&o, FE_SPLIT_RANDOM, true, true);
}
END_TEST

START_TEST(test_reboot_and_resume) {
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        int r;

        r = fe_connect_and_start(&fe, h->socket_path, NULL);
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        ck_assert_int_eq(fe_fuse_init(c), 0);
        ck_assert_msg(fe_fuse_roundtrip(c, "before", 10000, 1) == 0, "%s", c->last_problem);

        /* vm stop / cont: same rings continue from the returned bases. */
        r = fe_stop(fe);
        ck_assert_msg(r == 0, "stop: %s", fe->error);
        ck_assert_uint_gt(fe->vring_base[1], 5);
        ck_assert_uint_eq(fe->vring_base[0], 1); /* one FORGET on hiprio */
        r = fe_start(fe, false);
        ck_assert_msg(r == 0, "resume: %s", fe->error);
        ck_assert_msg(fe_fuse_roundtrip(c, "resumed", 10000, 2) == 0, "%s", c->last_problem);

        /* Reboot: fresh rings, base 0, a second INIT. */
        r = fe_stop(fe);
        ck_assert_msg(r == 0, "stop: %s", fe->error);
        r = fe_start(fe, true);
        ck_assert_msg(r == 0, "restart: %s", fe->error);
        c->next_unique = 2;
        ck_assert_int_eq(fe_fuse_init(c), 0);
        ck_assert_msg(fe_fuse_roundtrip(c, "after", 10000, 3) == 0, "%s", c->last_problem);
        ck_assert_uint_eq(c->proto_errors, 0);
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

START_TEST(test_queue_depth) {
        enum { DEPTH = 32, SIZE = 8192 };
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        FeFuseReq *reqs[DEPTH];
        struct fuse_entry_out e;
        uint64_t fh;
        uint8_t buf[SIZE];
        unsigned done = 0;

        ck_assert_int_eq(fe_connect_and_start(&fe, h->socket_path, NULL), 0);
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        ck_assert_int_eq(fe_fuse_init(c), 0);
        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "deep", O_CREAT | O_RDWR, 0100644, &e, &fh), 0);

        for (unsigned i = 0; i < DEPTH; i++) {
                struct fuse_write_in in = { .fh = fh, .offset = (uint64_t) i * SIZE, .size = SIZE };
                fe_fuse_pattern(buf, SIZE, in.offset, 5);
                ck_assert_int_eq(fe_fuse_req_new(&reqs[i], c, FUSE_WRITE, e.nodeid, sizeof(struct fuse_write_out)), 0);
                fe_fuse_req_add(reqs[i], &in, sizeof(in));
                fe_fuse_req_add_data(reqs[i], buf, SIZE);
                ck_assert_int_eq(fe_fuse_submit(c, reqs[i], -1), 0);
        }
        ck_assert_uint_eq(fe_vring_in_flight(fe->vq[1]), DEPTH);
        while (done < DEPTH) {
                FeFuseReq *r;
                ck_assert_int_eq(fe_fuse_wait(c, 1, 5000, &r), 0);
                ck_assert_msg(r->status == 0, "%s", r->problem);
                ck_assert_int_eq(r->oh.error, 0);
                done++;
        }
        for (unsigned i = 0; i < DEPTH; i++)
                fe_fuse_req_free(c, reqs[i]);
        ck_assert_uint_eq(fe_vring_in_flight(fe->vq[1]), 0);
        for (unsigned i = 0; i < DEPTH; i++) {
                uint8_t want[SIZE];
                ck_assert_int_eq(fe_fuse_read(c, e.nodeid, fh, (uint64_t) i * SIZE, buf, SIZE), SIZE);
                fe_fuse_pattern(want, SIZE, (uint64_t) i * SIZE, 5);
                ck_assert(memcmp(buf, want, SIZE) == 0);
        }
        ck_assert_uint_eq(c->proto_errors, 0);
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

int main(void) {
        Suite *s = suite_create("frontend-virtiofsd");
        TCase *tc = tcase_create("virtiofsd");

        if (access(FE_VIRTIOFSD_PATH, X_OK) < 0 || geteuid() != 0) {
                fprintf(stderr, "%s not installed or not root: skipping\n", FE_VIRTIOFSD_PATH);
                return 77;
        }
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_set_mem_table_natural);
        tcase_add_test(tc, test_add_mem_reg_separate_random);
        tcase_add_test(tc, test_direct_tiny_one_region);
        tcase_add_test(tc, test_no_event_idx);
        tcase_add_test(tc, test_reboot_and_resume);
        tcase_add_test(tc, test_queue_depth);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
