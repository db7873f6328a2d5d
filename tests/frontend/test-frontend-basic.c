/* test-frontend-basic.c: vufsd driven by the test frontend: negotiation, FUSE round trips, queues, reboot. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/virtio_config.h>

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

static void spawn(const char *const *extra) {
        int r = fe_harness_spawn_vufsd(h, extra);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
}

static Frontend *start(const FeOptions *o) {
        Frontend *fe = NULL;
        int r = fe_connect(&fe, h->socket_path, o);
        ck_assert_msg(r == 0, "connect: %s", strerror(-r));
        r = fe_negotiate(fe);
        ck_assert_msg(r == 0, "negotiate: %s", fe->error);
        r = fe_start(fe, true);
        ck_assert_msg(r == 0, "start: %s", fe->error);
        return fe;
}

static FeFuse *client(Frontend *fe) {
        FeFuse *c = NULL;
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        int r = fe_fuse_init(c);
        ck_assert_msg(r == 0, "INIT: %d %s", r, c->last_problem);
        return c;
}

static void assert_exits_zero(int timeout_ms) {
        char buf[128];
        int st = 0;
        int r = fe_backend_wait(h->backend, timeout_ms, &st);
        ck_assert_msg(r == 0, "vufsd still running %d ms after disconnect", timeout_ms);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "vufsd %s", fe_backend_describe(st, buf, sizeof(buf)));
}

static void roundtrip(FeFuse *c, const char *name, size_t size, uint32_t seed) {
        int r = fe_fuse_roundtrip(c, name, size, seed);
        ck_assert_msg(r == 0, "roundtrip %s (%zu bytes, queue %u, split %d, indirect %d): %s", name, size, c->queue,
                      c->split, c->indirect, c->last_problem);
        ck_assert_msg(c->proto_errors == 0, "protocol errors: %s", c->last_problem);
}

START_TEST(test_negotiation) {
        FeOptions o;
        Frontend *fe;

        spawn(NULL);
        fe_options_init(&o);
        fe = start(&o);
        ck_assert(fe->backend_features & (1ull << VIRTIO_F_VERSION_1));
        ck_assert(fe->backend_features & (1ull << FE_VU_F_PROTOCOL_FEATURES));
        ck_assert(fe->backend_features & (1ull << VIRTIO_RING_F_INDIRECT_DESC));
        ck_assert(fe->backend_features & (1ull << VIRTIO_RING_F_EVENT_IDX));
        ck_assert(fe->backend_protocol & (1ull << FE_VU_PROTOCOL_F_MQ));
        ck_assert(fe->backend_protocol & (1ull << FE_VU_PROTOCOL_F_REPLY_ACK));
        ck_assert(fe->backend_protocol & (1ull << FE_VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
        /* QEMU strips CONFIG for fs; a backend must not offer it. */
        ck_assert(!(fe->backend_protocol & (1ull << FE_VU_PROTOCOL_F_CONFIG)));
        ck_assert_uint_eq(fe->queue_num, 2);
        ck_assert_uint_ge(fe->max_mem_slots, 2);
        fe_free(fe);
        assert_exits_zero(5000);
}
END_TEST

START_TEST(test_roundtrip_one_queue) {
        FeFuse *c;
        Frontend *fe;
        struct fuse_statfs_out sf;
        struct fuse_attr_out a;

        spawn(NULL);
        fe = start(NULL);
        c = client(fe);
        ck_assert_uint_eq(c->init.major, 7);
        ck_assert_uint_ge(c->init.minor, 31);
        ck_assert_uint_ge(c->init.max_write, 4096);
        ck_assert_int_eq(fe_fuse_getattr(c, FUSE_ROOT_ID, &a), 0);
        ck_assert_uint_eq(a.attr.mode & S_IFMT, S_IFDIR);
        ck_assert_int_eq(fe_fuse_statfs(c, &sf), 0);
        ck_assert_uint_gt(sf.st.blocks, 0);
        roundtrip(c, "file-1", 1 << 20, 1);
        roundtrip(c, "empty", 0, 2);
        roundtrip(c, "odd", 4097, 3);

        /* FUSE writes land in the shared directory and host writes are visible to FUSE. */
        {
                _cleanup_free_ char *p = fe_harness_path(h, "from-host");
                struct fuse_entry_out e;
                char buf[64] = {};
                uint64_t fh;
                int fd = open(p, O_CREAT | O_WRONLY, 0644);

                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(write(fd, "hello from the host", 19), 19);
                close(fd);
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "from-host", &e), 0);
                ck_assert_uint_eq(e.attr.size, 19);
                ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDONLY, &fh), 0);
                ck_assert_int_eq(fe_fuse_read(c, e.nodeid, fh, 6, buf, sizeof(buf)), 13);
                ck_assert_str_eq(buf, "from the host");
                ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
        }
        {
                struct fuse_entry_out d, e;
                uint64_t fh;
                _cleanup_free_ char *p = fe_harness_path(h, "dir/inner");
                struct stat st;

                ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "dir", 0755, &d), 0);
                ck_assert_uint_eq(d.attr.mode & S_IFMT, S_IFDIR);
                ck_assert_int_eq(fe_fuse_create(c, d.nodeid, "inner", O_CREAT | O_WRONLY, 0100640, &e, &fh), 0);
                ck_assert_int_eq(fe_fuse_write(c, e.nodeid, fh, 100, "xyz", 3), 3);
                ck_assert_int_eq(fe_fuse_flush(c, e.nodeid, fh), 0);
                ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
                ck_assert_int_eq(stat(p, &st), 0);
                ck_assert_int_eq(st.st_size, 103);
                ck_assert_int_eq(fe_fuse_rename(c, d.nodeid, "inner", FUSE_ROOT_ID, "moved"), 0);
                ck_assert_int_eq(fe_fuse_rmdir(c, FUSE_ROOT_ID, "dir"), 0);
                ck_assert_int_eq(fe_fuse_unlink(c, FUSE_ROOT_ID, "moved"), 0);
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "dir", &e), -ENOENT);
        }
        ck_assert_msg(c->proto_errors == 0, "%s", c->last_problem);
        fe_fuse_free(c);
        fe_free(fe);
        assert_exits_zero(5000);
}
END_TEST

START_TEST(test_four_queues) {
        const char *const args[] = { "--num-request-queues", "4", NULL };
        FeOptions o;
        Frontend *fe;
        FeFuse *c;
        FeFuseReq *reqs[4];

        spawn(args);
        fe_options_init(&o);
        o.num_queues = 5;
        fe = start(&o);
        ck_assert_uint_eq(fe->queue_num, 5);
        c = client(fe);
        for (unsigned q = 1; q <= 4; q++) {
                char name[16];
                snprintf(name, sizeof(name), "q%u", q);
                c->queue = q;
                roundtrip(c, name, 200000, q);
        }
        /* One request in flight on every queue at once. */
        for (unsigned q = 1; q <= 4; q++) {
                struct fuse_getattr_in in = {};
                ck_assert_int_eq(fe_fuse_req_new(&reqs[q - 1], c, FUSE_GETATTR, FUSE_ROOT_ID,
                                                 sizeof(struct fuse_attr_out)), 0);
                fe_fuse_req_add(reqs[q - 1], &in, sizeof(in));
                ck_assert_int_eq(fe_fuse_submit(c, reqs[q - 1], (int) q), 0);
        }
        for (unsigned q = 1; q <= 4; q++) {
                FeFuseReq *done;
                ck_assert_int_eq(fe_fuse_wait(c, q, 5000, &done), 0);
                ck_assert_ptr_eq(done, reqs[q - 1]);
                ck_assert_msg(done->status == 0, "%s", done->problem);
                ck_assert_int_eq(done->oh.error, 0);
                ck_assert_uint_eq(done->payload_len, sizeof(struct fuse_attr_out));
                fe_fuse_req_free(c, done);
        }
        fe_fuse_free(c);
        fe_free(fe);
        assert_exits_zero(5000);
}
END_TEST

START_TEST(test_chain_shapes) {
        static const FeSplit splits[] = { FE_SPLIT_NATURAL, FE_SPLIT_SINGLE, FE_SPLIT_RANDOM, FE_SPLIT_TINY };
        Frontend *fe;
        FeFuse *c;
        unsigned n = 0;

        spawn(NULL);
        fe = start(NULL);
        c = client(fe);
        for (unsigned s = 0; s < ELEMENTSOF(splits); s++)
                for (int ind = 0; ind <= 1; ind++)
                        for (unsigned rep = 0; rep < 3; rep++) {
                                char name[32];
                                c->split = splits[s];
                                c->indirect = ind;
                                c->seed = 1000 + n;
                                snprintf(name, sizeof(name), "shape-%u", n);
                                /* Direct chains must fit the 128-entry table: keep bodies small. */
                                roundtrip(c, name, ind ? 300000 + rep * 777 : 100000 + rep * 333, n);
                                n++;
                        }
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

START_TEST(test_memory_layouts) {
        static const struct {
                FeMemLayout layout;
                bool add_mem_reg;
        } cases[] = {
                { FE_MEM_ONE_REGION, false },  { FE_MEM_QEMU_SPLIT, false }, { FE_MEM_QEMU_SPLIT, true },
                { FE_MEM_SEPARATE, false },    { FE_MEM_SEPARATE, true },
        };
        const char *const args[] = { "--keep-listening", NULL };

        spawn(args);
        for (unsigned i = 0; i < ELEMENTSOF(cases); i++) {
                FeOptions o;
                Frontend *fe;
                FeFuse *c;
                char name[32];

                fe_options_init(&o);
                o.mem_layout = cases[i].layout;
                o.add_mem_reg = cases[i].add_mem_reg;
                o.ring_region = (int) (i % 2); /* rings in low memory for some cases */
                fe = start(&o);
                c = client(fe);
                c->mix_regions = true;
                c->split = FE_SPLIT_RANDOM;
                c->seed = i + 1;
                snprintf(name, sizeof(name), "layout-%u", i);
                roundtrip(c, name, 150000, i);
                fe_fuse_free(c);
                fe_free(fe);
                ck_assert(fe_backend_alive(h->backend));
        }
}
END_TEST

START_TEST(test_without_event_idx_and_indirect) {
        FeOptions o;
        Frontend *fe;
        FeFuse *c;

        spawn(NULL);
        fe_options_init(&o);
        o.features_mask &= ~((1ull << VIRTIO_RING_F_EVENT_IDX) | (1ull << VIRTIO_RING_F_INDIRECT_DESC));
        fe = start(&o);
        ck_assert(!fe_has_feature(fe, VIRTIO_RING_F_EVENT_IDX));
        c = client(fe);
        roundtrip(c, "plain", 100000, 9);
        fe_fuse_free(c);
        fe_free(fe);
        assert_exits_zero(5000);
}
END_TEST

START_TEST(test_minimal_protocol_features) {
        FeOptions o;
        Frontend *fe;
        FeFuse *c;

        /* QEMU variant PF_MASK=0: no MQ, no REPLY_ACK, SET_MEM_TABLE without ack. */
        spawn(NULL);
        fe_options_init(&o);
        o.protocol_mask = 0;
        fe = start(&o);
        c = client(fe);
        roundtrip(c, "minimal", 50000, 10);
        fe_fuse_free(c);
        fe_free(fe);
        assert_exits_zero(5000);
}
END_TEST

START_TEST(test_stop_resume_reboot) {
        Frontend *fe;
        FeFuse *c;
        struct fuse_entry_out e;
        uint64_t fh;
        int r;

        spawn(NULL);
        fe = start(NULL);
        c = client(fe);
        roundtrip(c, "before", 20000, 1);
        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "persist", O_CREAT | O_WRONLY, 0100644, &e, &fh), 0);
        ck_assert_int_eq(fe_fuse_write(c, e.nodeid, fh, 0, "abc", 3), 3);
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);

        /* Stop: the bases are the numbers of chains consumed (INIT + roundtrip + 3 on queue 1, 1 FORGET on 0). */
        r = fe_stop(fe);
        ck_assert_msg(r == 0, "stop: %s", fe->error);
        ck_assert_uint_eq(fe->vring_base[0], 1);
        ck_assert_uint_eq(fe->vring_base[1], (uint16_t) (fe->vq[1]->avail_shadow));

        /* Resume on the same rings (vm stop/cont): the backend must pick up used->idx from memory. */
        r = fe_start(fe, false);
        ck_assert_msg(r == 0, "resume: %s", fe->error);
        roundtrip(c, "resumed", 20000, 2);

        /* Reboot: new rings, base 0, a second INIT starting a new session. */
        r = fe_stop(fe);
        ck_assert_msg(r == 0, "stop: %s", fe->error);
        r = fe_start(fe, true);
        ck_assert_msg(r == 0, "restart: %s", fe->error);
        c->next_unique = 2;
        c->initialized = false;
        r = fe_fuse_init(c);
        ck_assert_msg(r == 0, "second INIT: %d %s", r, c->last_problem);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "persist", &e), 0);
        ck_assert_uint_eq(e.attr.size, 3);
        roundtrip(c, "after", 20000, 3);
        fe_fuse_free(c);
        fe_free(fe);
        assert_exits_zero(5000);
}
END_TEST

START_TEST(test_keep_listening) {
        const char *const args[] = { "--keep-listening", NULL };
        char buf[128];
        int st;

        spawn(args);
        for (unsigned i = 0; i < 3; i++) {
                Frontend *fe = start(NULL);
                FeFuse *c = client(fe);
                char name[16];

                snprintf(name, sizeof(name), "conn-%u", i);
                roundtrip(c, name, 30000, i);
                fe_fuse_free(c);
                /* Disconnect without stopping the rings, as a killed QEMU would. */
                fe_free(fe);
                ck_assert(fe_backend_alive(h->backend));
        }
        st = fe_backend_stop(h->backend, 5000);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: vufsd %s", fe_backend_describe(st, buf, sizeof(buf)));
}
END_TEST

START_TEST(test_sigterm_while_connected) {
        Frontend *fe;
        FeFuse *c;
        char buf[128];
        int st;

        spawn(NULL);
        fe = start(NULL);
        c = client(fe);
        roundtrip(c, "x", 1000, 1);
        st = fe_backend_stop(h->backend, 5000);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: vufsd %s", fe_backend_describe(st, buf, sizeof(buf)));
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

START_TEST(test_queue_depth) {
        enum { DEPTH = 64, SIZE = 16384 };
        Frontend *fe;
        FeFuse *c;
        FeFuseReq *reqs[DEPTH];
        struct fuse_entry_out e;
        uint64_t fh;
        static uint8_t buf[SIZE], want[SIZE];

        spawn(NULL);
        fe = start(NULL);
        c = client(fe);
        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "deep", O_CREAT | O_RDWR, 0100644, &e, &fh), 0);
        for (unsigned i = 0; i < DEPTH; i++) {
                struct fuse_write_in in = { .fh = fh, .offset = (uint64_t) i * SIZE, .size = SIZE };
                fe_fuse_pattern(buf, SIZE, in.offset, 5);
                ck_assert_int_eq(fe_fuse_req_new(&reqs[i], c, FUSE_WRITE, e.nodeid, sizeof(struct fuse_write_out)), 0);
                fe_fuse_req_add(reqs[i], &in, sizeof(in));
                fe_fuse_req_add_data(reqs[i], buf, SIZE);
                ck_assert_int_eq(fe_fuse_submit(c, reqs[i], -1), 0);
        }
        for (unsigned done = 0; done < DEPTH; done++) {
                FeFuseReq *r;
                ck_assert_int_eq(fe_fuse_wait(c, 1, 5000, &r), 0);
                ck_assert_msg(r->status == 0, "%s", r->problem);
                ck_assert_int_eq(r->oh.error, 0);
                ck_assert_uint_eq(((struct fuse_write_out *) r->payload)->size, SIZE);
        }
        for (unsigned i = 0; i < DEPTH; i++)
                fe_fuse_req_free(c, reqs[i]);
        for (unsigned i = 0; i < DEPTH; i++) {
                ck_assert_int_eq(fe_fuse_read(c, e.nodeid, fh, (uint64_t) i * SIZE, buf, SIZE), SIZE);
                fe_fuse_pattern(want, SIZE, (uint64_t) i * SIZE, 5);
                ck_assert_msg(memcmp(buf, want, SIZE) == 0, "block %u differs", i);
        }
        ck_assert_uint_eq(c->proto_errors, 0);
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

static void count_entry(const char *name, uint32_t type, void *ud) {
        (void) name;
        (void) type;
        (*(unsigned *) ud)++;
}

START_TEST(test_readdir_many_and_forget) {
        enum { N = 300 };
        Frontend *fe;
        FeFuse *c;
        struct fuse_entry_out e;
        struct fuse_forget_one forgets[N];
        unsigned seen = 0;
        int r;

        spawn(NULL);
        fe = start(NULL);
        c = client(fe);
        for (unsigned i = 0; i < N; i++) {
                char name[64];
                uint64_t fh;
                snprintf(name, sizeof(name), "entry-with-a-longish-name-%04u", i);
                ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, name, O_CREAT | O_WRONLY, 0100644, &e, &fh), 0);
                ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
                forgets[i] = (struct fuse_forget_one) { .nodeid = e.nodeid, .nlookup = 1 };
        }
        r = fe_fuse_list_dir(c, FUSE_ROOT_ID, count_entry, &seen);
        ck_assert_msg(r >= 0, "readdir: %d %s", r, c->last_problem);
        ck_assert_uint_eq(seen, N + 2); /* "." and ".." */

        /* READDIRPLUS first chunk parses and carries entries. */
        {
                static uint8_t buf[4096];
                uint64_t fh;
                ck_assert_int_eq(fe_fuse_opendir(c, FUSE_ROOT_ID, &fh), 0);
                r = fe_fuse_readdir(c, true, FUSE_ROOT_ID, fh, 0, buf, sizeof(buf));
                ck_assert_int_gt(r, (int) FUSE_NAME_OFFSET_DIRENTPLUS);
                ck_assert_int_le(r, (int) sizeof(buf));
                ck_assert_int_eq(fe_fuse_release(c, FUSE_ROOT_ID, fh, true), 0);
        }
        /* Lookups from READDIRPLUS entries are not tracked here; BATCH_FORGET of the creates on hiprio. */
        ck_assert_int_eq(fe_fuse_batch_forget(c, forgets, 100), 0);
        for (unsigned i = 100; i < N; i++)
                ck_assert_int_eq(fe_fuse_forget(c, forgets[i].nodeid, 1), 0);
        ck_assert_msg(c->proto_errors == 0, "%s", c->last_problem);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "entry-with-a-longish-name-0007", &e), 0);
        fe_fuse_free(c);
        fe_free(fe);
        assert_exits_zero(5000);
}
END_TEST

START_TEST(test_rem_mem_reg_and_readd) {
        FeOptions o;
        Frontend *fe;
        FeFuse *c;
        int r;

        spawn(NULL);
        fe_options_init(&o);
        o.add_mem_reg = true;
        o.mem_layout = FE_MEM_SEPARATE;
        o.ring_region = 1;
        fe = start(&o);
        c = client(fe);
        roundtrip(c, "a", 10000, 1);
        /* Remove the low region (only data buffers could live there) and use only high memory. */
        r = fe_vu_rem_mem_reg(fe, 0);
        ck_assert_msg(r == 0, "REM_MEM_REG: %s", fe->error);
        roundtrip(c, "b", 10000, 2);
        r = fe_vu_add_mem_reg(fe, 0);
        ck_assert_msg(r == 0, "ADD_MEM_REG: %s", fe->error);
        c->mix_regions = true;
        roundtrip(c, "c", 10000, 3);
        fe_fuse_free(c);
        fe_free(fe);
        assert_exits_zero(5000);
}
END_TEST

int main(void) {
        Suite *s = suite_create("frontend-basic");
        TCase *tc = tcase_create("basic");

        if (!getenv("VUFSD_BINARY")) {
                fprintf(stderr, "VUFSD_BINARY is not set (meson test sets it)\n");
                return EXIT_FAILURE;
        }
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_negotiation);
        tcase_add_test(tc, test_roundtrip_one_queue);
        tcase_add_test(tc, test_four_queues);
        tcase_add_test(tc, test_chain_shapes);
        tcase_add_test(tc, test_memory_layouts);
        tcase_add_test(tc, test_without_event_idx_and_indirect);
        tcase_add_test(tc, test_minimal_protocol_features);
        tcase_add_test(tc, test_stop_resume_reboot);
        tcase_add_test(tc, test_keep_listening);
        tcase_add_test(tc, test_sigterm_while_connected);
        tcase_add_test(tc, test_queue_depth);
        tcase_add_test(tc, test_readdir_many_and_forget);
        tcase_add_test(tc, test_rem_mem_reg_and_readd);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
