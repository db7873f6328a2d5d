/* test-fuse-handler: the FUSE server as the device's request handler: which executor class each
 * FUSE request gets (the routing that keeps lock waits off the queue threads) and the header copy. */
#include <check.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>

#include "fuse-handler.h"
#include "test-main.h"

static void put_u32(uint8_t *p, uint32_t v) {
        memcpy(p, &v, sizeof v);
}

START_TEST(test_classify) {
        uint8_t buf[200] = { 0 };
        struct fuse_in_header *h = (struct fuse_in_header *) buf;
        uint8_t *args = buf + sizeof *h;
        struct iovec v[3];
        ChainIter it;
        uint32_t op;

        /* split across three iovecs, READ of 4 KiB: small I/O, the iterator is not consumed */
        h->opcode = FUSE_READ;
        put_u32(args + offsetof(struct fuse_read_in, size), 4096);
        v[0] = (struct iovec) { buf, 7 };
        v[1] = (struct iovec) { buf + 7, 45 };
        v[2] = (struct iovec) { buf + 52, sizeof buf - 52 };
        chain_iter_init(&it, v, 3);
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_IO);
        ck_assert_uint_eq(op, FUSE_READ);
        ck_assert_uint_eq(chain_consumed(&it), 0);

        put_u32(args + offsetof(struct fuse_write_in, size), EXEC_LARGE_IO);
        h->opcode = FUSE_WRITE;
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_LARGE_IO);
        put_u32(args + offsetof(struct fuse_write_in, size), EXEC_LARGE_IO - 1);
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_IO);

        h->opcode = FUSE_SETLKW;
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_LOCK_WAIT);
        h->opcode = FUSE_SETLK;
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_META);
        h->opcode = FUSE_FSYNC;
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_SYNC);
        h->opcode = FUSE_FALLOCATE;
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_SYNC);
        h->opcode = FUSE_COPY_FILE_RANGE;
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_SYNC);
        h->opcode = FUSE_READDIRPLUS;
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_DIR);
        h->opcode = 99999;
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_META);
        ck_assert_uint_eq(op, 99999);

        /* READ with its arguments cut short: still classified, never read past the chain */
        h->opcode = FUSE_READ;
        v[0] = (struct iovec) { buf, sizeof *h + 10 };
        chain_iter_init(&it, v, 1);
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_IO);
        /* no complete header */
        v[0] = (struct iovec) { buf, sizeof *h - 1 };
        chain_iter_init(&it, v, 1);
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_META);
        ck_assert_uint_eq(op, 0);
        chain_iter_init(&it, v, 0);
        ck_assert_int_eq(fuse_request_classify(&it, &op), EXEC_CLASS_META);
}
END_TEST

/* The handler's classify() goes by the header copy it is given, not by guest memory: a guest that
 * rewrites its header after the device copied it cannot turn the route. */
START_TEST(test_handler_uses_copy) {
        static const FsOps no_ops; /* never called: nothing is processed here */
        FsOptions o = FS_OPTIONS_DEFAULT;
        FuseServer *srv;
        RequestHandler h;
        struct fuse_in_header copy = { .opcode = FUSE_SETLKW }, guest = { .opcode = FUSE_GETATTR };
        uint8_t hdr[REQUEST_HEADER_MAX];
        struct iovec v = { &guest, sizeof guest };
        ChainIter rest;

        /* A lock wait's classify() announces it to the server (fuse_server_lock_wait_queued()). */
        ck_assert_int_eq(fuse_server_new(&srv, &o, &no_ops, NULL), 0);
        h = fuse_request_handler(srv);
        ck_assert_uint_eq(h.header_size, sizeof(struct fuse_in_header));
        ck_assert_ptr_nonnull(h.classify);
        memcpy(hdr, &copy, sizeof copy);
        chain_iter_init(&rest, &v, 1);
        ck_assert_int_eq(h.classify(h.data, hdr, &rest), EXEC_CLASS_LOCK_WAIT);
        copy.opcode = FUSE_FSYNC;
        memcpy(hdr, &copy, sizeof copy);
        ck_assert_int_eq(h.classify(h.data, hdr, &rest), EXEC_CLASS_SYNC);
        fuse_server_free(srv);
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("classify");
        tcase_add_test(tc, test_classify);
        tcase_add_test(tc, test_handler_uses_copy);
        suite_add_tcase(s, tc);
}

TEST_MAIN("fuse-handler", add_tests)
