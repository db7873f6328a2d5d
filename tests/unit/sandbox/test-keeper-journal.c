/* test-keeper-journal.c: the keeper's session journal (keeper.h, keeper-journal.c) through a real
 * SEQPACKET channel, a thread playing the supervisor's loop: entries replaced, removed, cleared and
 * fetched in batches with their fds; the bounds and a hostile message make it broken, which a fetch
 * reports and a clear ends. And the serving side's fetches (journal and record slots) interrupted
 * by a signal: they wait on for their own answer. */
#define _GNU_SOURCE 1
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "keeper.h"
#include "sandbox.h"
#include "util.h"
#include "test-main.h"

static int chan[2] = { -1, -1 };
static pthread_t sup;

/* test_fetch_interrupted(): the next fetch the supervisor reads is answered only after a signal
 * interrupted the fetching thread's wait for the answer. */
static atomic_bool interrupt_next, signalled;
static pthread_t fetcher;
static pid_t fetcher_tid;

static void on_signal(int sig) {
        atomic_store(&signalled, true);
}

/* Whether thread tid is blocked in recvmsg() (its /proc syscall file starts with the number). */
static bool in_recvmsg(pid_t tid) {
        char path[64], line[64] = "", want[16];
        FILE *f;

        snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int) tid);
        f = fopen(path, "re");
        if (!f)
                return false;
        if (!fgets(line, sizeof line, f))
                line[0] = 0;
        fclose(f);
        snprintf(want, sizeof want, "%d ", (int) SYS_recvmsg);
        return strncmp(line, want, strlen(want)) == 0;
}

static void interrupt_fetcher(void) {
        while (!in_recvmsg(fetcher_tid))
                usleep(1000);
        atomic_store(&signalled, false);
        ck_assert_int_eq(pthread_kill(fetcher, SIGUSR1), 0);
        /* The handler has run: the wait was interrupted before any answer was there. */
        while (!atomic_load(&signalled))
                usleep(1000);
}

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
                if ((buf[0] == KEEPER_TAG_FETCH || buf[0] == KEEPER_TAG_JFETCH) && atomic_exchange(&interrupt_next, false))
                        interrupt_fetcher();
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

/* A signal whose handler does not restart system calls (libFuzzer's alarm in fuzz-survive) while
 * the serving process waits for the keeper's answer: the fetch waits on and gets it. Given up
 * instead (-EINTR), the answer stayed in the channel and the next fetch took it for its own: a
 * takeover refused records nobody had changed (docs/fuzzing.md). */
START_TEST(test_fetch_interrupted) {
        struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART */
        uint8_t buf[64];
        int fds[KEEPER_MAX_FDS];
        size_t n_fds;

        ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
        fetcher = pthread_self();
        fetcher_tid = gettid();
        ck_assert_int_eq(keeper_store(KEEPER_SLOT_DEVICE, "device", 6, NULL, 0), 0);
        ck_assert_int_eq(keeper_store(KEEPER_SLOT_SESSION, "session", 7, NULL, 0), 0);
        ck_assert_int_eq(keeper_journal_put(1, 0, "one", 3, -1), 0);

        atomic_store(&interrupt_next, true);
        ck_assert_int_eq(fetch(), 0);
        ck_assert(atomic_load(&signalled));
        ck_assert_uint_eq(got.n, 1);
        ck_assert_str_eq(got.data[0], "one");

        atomic_store(&interrupt_next, true);
        ck_assert_int_eq(keeper_fetch(KEEPER_SLOT_SESSION, buf, sizeof buf, fds, KEEPER_MAX_FDS, &n_fds), 7);
        ck_assert(atomic_load(&signalled));
        ck_assert_mem_eq(buf, "session", 7);
        /* The next fetch gets its own answer. */
        ck_assert_int_eq(keeper_fetch(KEEPER_SLOT_DEVICE, buf, sizeof buf, fds, KEEPER_MAX_FDS, &n_fds), 6);
        ck_assert_mem_eq(buf, "device", 6);
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
        tcase_add_test(tc, test_fetch_interrupted);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(journal_suite)
