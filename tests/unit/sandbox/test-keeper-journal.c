/* test-keeper-journal.c: the keeper's session journal (keeper.h, keeper-journal.c) through a real
 * SEQPACKET channel, a thread playing the supervisor's loop: entries replaced, removed, cleared and
 * fetched in batches with their fds; the bounds and a hostile message make it broken, which a fetch
 * reports and a clear ends. */
#define _GNU_SOURCE 1
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "keeper.h"
#include "sandbox.h"
#include "util.h"
#include "test-main.h"

static int chan[2] = { -1, -1 };
static pthread_t sup;

/* The supervisor's side: every message through keeper_handle(), as sandbox.c's relay does. */
static void *supervisor(void *arg) {
        static uint8_t buf[KEEPER_MAX_RECORD + 16];

        for (;;) {
                union {
                        struct cmsghdr align;
                        char buf[CMSG_SPACE(sizeof(int) * KEEPER_MAX_FDS)];
                } control;
                struct iovec iov = { buf, sizeof buf };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                                     .msg_controllen = sizeof control };
                int fds[KEEPER_MAX_FDS];
                size_t n_fds = 0;
                ssize_t n = recvmsg(chan[1], &mh, MSG_CMSG_CLOEXEC);

                if (n <= 0)
                        break;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                                fds[n_fds++] = ((int *) CMSG_DATA(c))[i];
                ck_assert(keeper_handle(chan[1], buf, (size_t) n, fds, n_fds));
        }
        keeper_clear();
        return arg;
}

static void setup(void) {
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan), 0);
        sandbox_set_channel_fd(chan[0]);
        ck_assert_int_eq(pthread_create(&sup, NULL, supervisor, NULL), 0);
}

static void teardown(void) {
        shutdown(chan[0], SHUT_WR);
        pthread_join(sup, NULL);
        close(chan[0]);
        close(chan[1]);
}

typedef struct Got {
        uint64_t a[20000], b[20000];
        char data[20000][32];
        int fd[20000];
        size_t n;
} Got;
static Got got;

static int collect(uint64_t a, uint64_t b, const uint8_t *data, size_t len, int fd, void *ud) {
        ck_assert_uint_lt(got.n, 20000);
        got.a[got.n] = a;
        got.b[got.n] = b;
        snprintf(got.data[got.n], sizeof got.data[0], "%.*s", (int) len, (const char *) data);
        got.fd[got.n++] = fd;
        return 0;
}

static int fetch(void) {
        for (size_t i = 0; i < got.n; i++)
                safe_close(got.fd[i]);
        got.n = 0;
        return keeper_journal_fetch(collect, NULL);
}

static ssize_t find(uint64_t a, uint64_t b) {
        for (size_t i = 0; i < got.n; i++)
                if (got.a[i] == a && got.b[i] == b)
                        return (ssize_t) i;
        return -1;
}

/* Put, replace, remove, fetch: the newest entry per key with its fd (the same open file). */
START_TEST(test_put_del_fetch) {
        int p[2];
        char c;
        ssize_t i;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(keeper_journal_put(1, 0, "one", 3, -1), 0);
        ck_assert_int_eq(keeper_journal_put(2, 7, "two", 3, p[0]), 0);
        ck_assert_int_eq(keeper_journal_put(3, 0, "three", 5, -1), 0);
        ck_assert_int_eq(keeper_journal_put(1, 0, "uno", 3, -1), 0);
        ck_assert_int_eq(keeper_journal_del(3, 0), 0);
        ck_assert_int_eq(keeper_journal_del(99, 0), 0); /* unknown: nothing */
        close(p[0]);
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 2);
        i = find(1, 0);
        ck_assert_int_ge(i, 0);
        ck_assert_str_eq(got.data[i], "uno");
        ck_assert_int_eq(got.fd[i], -1);
        i = find(2, 7);
        ck_assert_int_ge(i, 0);
        ck_assert_str_eq(got.data[i], "two");
        ck_assert_int_ge(got.fd[i], 0);
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        ck_assert_int_eq(read(got.fd[i], &c, 1), 1); /* the keeper's copy is the pipe's read end */
        ck_assert_int_eq(c, 'x');
        /* A fetch leaves the journal as it was. */
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 2);
        ck_assert_int_eq(keeper_journal_reset(), 0);
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 0);
        close(p[1]);
}
END_TEST

/* More entries and fds than one answer carries: fetched in batches, none lost or twice. */
START_TEST(test_batches) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        size_t with_fd = 0;

        ck_assert_int_ge(fd, 0);
        for (uint64_t k = 0; k < 12000; k++) {
                char d[32];
                int n = snprintf(d, sizeof d, "entry %" PRIu64, k);
                ck_assert_int_eq(keeper_journal_put(k << 2, k, d, (size_t) n, k % 40 == 0 ? fd : -1), 0);
        }
        close(fd);
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 12000);
        for (uint64_t k = 0; k < 12000; k++) {
                char d[32];
                ssize_t i = find(k << 2, k);
                snprintf(d, sizeof d, "entry %" PRIu64, k);
                ck_assert_msg(i >= 0, "entry %" PRIu64 " missing", k);
                ck_assert_str_eq(got.data[i], d);
                ck_assert_int_eq(got.fd[i] >= 0, k % 40 == 0);
                with_fd += got.fd[i] >= 0;
        }
        ck_assert_uint_eq(with_fd, 300);
}
END_TEST

/* An entry over the bound, or a put with two fds (a hostile serving process): the journal goes and
 * a fetch says so (-ESTALE) until a clear. */
START_TEST(test_broken_until_clear) {
        static uint8_t big[KEEPER_JOURNAL_MAX_ENTRY + 1];
        uint8_t msg[17] = { KEEPER_TAG_JPUT };
        int two[2];
        struct iovec iov = { msg, sizeof msg };

        ck_assert_int_eq(keeper_journal_put(1, 0, "one", 3, -1), 0);
        ck_assert_int_eq(keeper_journal_put(2, 0, big, sizeof big, -1), -E2BIG); /* refused by the sender */
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 1);
        /* Past the sender's check: two fds in one put. */
        ck_assert_int_eq(pipe2(two, O_CLOEXEC), 0);
        ck_assert_int_eq(keeper_send_fds(chan[0], &iov, 1, two, 2), 0);
        close(two[0]);
        close(two[1]);
        ck_assert_int_eq(fetch(), -ESTALE);
        ck_assert_int_eq(keeper_journal_put(3, 0, "three", 5, -1), 0); /* ignored while broken */
        ck_assert_int_eq(fetch(), -ESTALE);
        ck_assert_int_eq(keeper_journal_reset(), 0);
        ck_assert_int_eq(keeper_journal_put(4, 0, "four", 4, -1), 0);
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 1);
        ck_assert_str_eq(got.data[0], "four");
}
END_TEST

/* A process that took over writes a new journal beside the old one: a fetch answers from the old
 * until the commit, a begin again (the writer died) throws the unfinished one away. */
START_TEST(test_staged_until_commit) {
        ck_assert_int_eq(keeper_journal_put(1, 0, "old", 3, -1), 0);
        ck_assert_int_eq(keeper_journal_begin(), 0);
        ck_assert_int_eq(keeper_journal_reset(), 0); /* the replayed FUSE_INIT: the new one only */
        ck_assert_int_eq(keeper_journal_put(2, 0, "half", 4, -1), 0);
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 1);
        ck_assert_str_eq(got.data[0], "old");
        /* It died: the next process begins again. */
        ck_assert_int_eq(keeper_journal_begin(), 0);
        ck_assert_int_eq(keeper_journal_put(3, 0, "new", 3, -1), 0);
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 1);
        ck_assert_str_eq(got.data[0], "old");
        ck_assert_int_eq(keeper_journal_commit(), 0);
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 1);
        ck_assert_str_eq(got.data[0], "new");
        /* And on as usual. */
        ck_assert_int_eq(keeper_journal_put(4, 0, "more", 4, -1), 0);
        ck_assert_int_eq(keeper_journal_commit(), 0); /* a commit without a begin changes nothing */
        ck_assert_int_eq(fetch(), 0);
        ck_assert_uint_eq(got.n, 2);
}
END_TEST

static Suite *journal_suite(void) {
        Suite *s = suite_create("keeper-journal");
        TCase *tc = tcase_create("journal");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_put_del_fetch);
        tcase_add_test(tc, test_batches);
        tcase_add_test(tc, test_broken_until_clear);
        tcase_add_test(tc, test_staged_until_commit);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(journal_suite)
