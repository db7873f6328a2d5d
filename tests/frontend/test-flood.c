/* test-flood.c: a guest that floods vufsd (lookups never forgotten, opens never released, request
 * storms, errors by the thousand) must meet its bounds: ENFILE once the fd budget is spent, fds
 * and memory within the configured limits, a quiet log, and service for everything else. Runs the
 * real daemon sandboxed with the default seccomp filter (root; without root: --sandbox=none). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

#define RLIMIT_NOFILE_SET 600 /* hard RLIMIT_NOFILE: the budget is this minus the daemon's reserve */
#define N_FILES 1000          /* more than the budget */
#define ANON_LIMIT_KB (16 * 1024) /* heap: inode and handle tables, queue elements */
#define LOG_LINES_MAX 60

static FeHarness *h;

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

static void teardown(void) {
        h = fe_harness_free(h);
}

static unsigned count_fds(pid_t pid) {
        int n = fe_harness_count_fds(pid);

        ck_assert_msg(n >= 0, "/proc/%d/fd: %s", (int)pid, strerror(-n));
        return (unsigned)n;
}

static long status_kb(pid_t pid, const char *field) {
        long v = fe_harness_status_kb(pid, field);

        ck_assert_int_ge(v, 0);
        return v;
}

static unsigned count_lines(const char *path) {
        FILE *f = fopen(path, "re");
        unsigned n = 0;
        int c;

        if (!f)
                return 0;
        while ((c = fgetc(f)) != EOF)
                n += c == '\n';
        fclose(f);
        return n;
}

/* Starts the daemon with extra arguments and its log in a file (whose path it returns, malloc'd),
 * connects and sends INIT. */
static char *start_logged(const char *const *extra, Frontend **fe, FeFuse **c) {
        char *logpath = fe_harness_path(h, "../vufsd.log");
        int saved_err, logfd, r;

        logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(logfd, 0);
        saved_err = dup(STDERR_FILENO);
        dup2(logfd, STDERR_FILENO);
        r = fe_harness_spawn_vufsd(h, extra);
        dup2(saved_err, STDERR_FILENO);
        close(saved_err);
        close(logfd);
        ck_assert_msg(r == 0, "starting vufsd: %s", strerror(-r));
        r = fe_connect_and_start(fe, h->socket_path, NULL);
        ck_assert_msg(r == 0, "connect: %s", *fe ? (*fe)->error : strerror(-r));
        ck_assert_int_eq(fe_fuse_new(c, *fe), 0);
        ck_assert_int_eq(fe_fuse_init(*c), 0);
        return logpath;
}

START_TEST(test_flood) {
        /* --max-inode-fds past the limit: every node keeps its fd, so that the fd budget is what
         * stops the flood (test-frontend-inode-fds shows the default keeping far fewer). */
        const char *const extra_root[] = { "--bus=none", "--sandbox=namespace", "--seccomp=kill",
                                           "--max-inode-fds=1000000", NULL };
        const char *const extra_user[] = { "--bus=none", "--sandbox=none", "--max-inode-fds=1000000", NULL };
        struct rlimit nofile = { RLIMIT_NOFILE_SET, RLIMIT_NOFILE_SET };
        char *logpath = NULL;
        uint64_t *nodes = calloc(N_FILES, sizeof *nodes);
        unsigned n_nodes = 0, n_open = 0, enfile = 0, fds, max_fds = 0;
        long anon_before, anon_after, rss;
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        struct fuse_entry_out e;
        struct fuse_attr_out a;
        pid_t pid;
        int r;

        ck_assert_ptr_nonnull(nodes);
        for (unsigned i = 0; i < N_FILES; i++) {
                char name[32], *p;
                snprintf(name, sizeof name, "f%04u", i);
                p = fe_harness_path(h, name);
                int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(write(fd, "x", 1), 1);
                close(fd);
                free(p);
        }

        /* The fd limit the daemon gets: it may raise RLIMIT_NOFILE (CVE-2020-10717's rule caps that
         * by the system's limits) but not above a hard limit it cannot lift without
         * CAP_SYS_RESOURCE. This process is Check's fork for this test only. */
        if (geteuid() == 0)
                ck_assert_int_eq(prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0), 0);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &nofile), 0);

        /* The daemon's log goes to a file, to count the lines the flood causes. */
        logpath = start_logged(geteuid() == 0 ? extra_root : extra_user, &fe, &c);
        pid = fe_harness_daemon_pid(h);
        anon_before = status_kb(pid, "RssAnon");

        /* 1. Lookups never forgotten: every one pins an O_PATH fd until the budget says ENFILE. */
        for (unsigned i = 0; i < N_FILES; i++) {
                char name[32];
                snprintf(name, sizeof name, "f%04u", i);
                r = fe_fuse_lookup(c, 1, name, &e);
                if (r == -ENFILE) {
                        enfile++;
                        continue;
                }
                ck_assert_msg(r == 0, "LOOKUP %s: %d %s", name, r, c->last_problem);
                nodes[n_nodes++] = e.nodeid;
        }
        ck_assert_msg(enfile > 0, "the fd budget never ran out (%u lookups held)", n_nodes);
        ck_assert_msg(n_nodes > 100 && n_nodes < RLIMIT_NOFILE_SET, "%u lookups held", n_nodes);
        fds = count_fds(pid);
        max_fds = MAX(max_fds, fds);

        /* 2. Opens never released, on nodes we hold, after forgetting some (their fds come back to
         * the budget): ENFILE again once it is spent, nothing else. */
        for (unsigned i = 0; i < 150; i++)
                ck_assert_int_eq(fe_fuse_forget(c, nodes[--n_nodes], 1), 0);
        for (unsigned i = 0; i < 200; i++) {
                uint64_t fh;
                r = fe_fuse_open(c, nodes[i % n_nodes], O_RDONLY, &fh);
                if (r == -ENFILE)
                        enfile++;
                else {
                        ck_assert_msg(r == 0, "OPEN: %d %s", r, c->last_problem);
                        n_open++;
                }
        }
        fds = count_fds(pid);
        max_fds = MAX(max_fds, fds);
        ck_assert_msg(max_fds <= RLIMIT_NOFILE_SET, "%u fds open, limit %d", max_fds, RLIMIT_NOFILE_SET);
        ck_assert_msg(n_open >= 100 && n_open < 200, "%u opens held", n_open);

        /* 3. A storm of requests and of errors (unknown nodeids, missing names). */
        for (unsigned i = 0; i < 20000; i++) {
                if (i % 3 == 0)
                        r = fe_fuse_getattr(c, nodes[i % n_nodes], &a);
                else if (i % 3 == 1)
                        r = fe_fuse_getattr(c, 0xdead0000 + i, &a) == -EBADF ? 0 : -EIO;
                else {
                        /* ENOENT, or ENFILE: a lookup needs an fd of the spent budget to look */
                        r = fe_fuse_lookup(c, 1, "no-such-name", &e);
                        r = r == -ENOENT || r == -ENFILE ? 0 : r;
                }
                ck_assert_msg(r == 0, "request %u: %d %s", i, r, c->last_problem);
        }
        ck_assert_uint_eq(c->proto_errors, 0);

        /* 4. Bounds: fds within the limit, anonymous memory within its bound, a quiet log. */
        fds = count_fds(pid);
        max_fds = MAX(max_fds, fds);
        anon_after = status_kb(pid, "RssAnon");
        rss = status_kb(pid, "VmRSS");
        fprintf(stderr, "flood: %u lookups held, %u opens held, %u ENFILE; fds %u (max %u, limit %d); "
                        "RssAnon %ld -> %ld kB (bound %d); VmRSS %ld kB; log %u lines\n",
                n_nodes, n_open, enfile, fds, max_fds, RLIMIT_NOFILE_SET, anon_before, anon_after, ANON_LIMIT_KB,
                rss, count_lines(logpath));
        ck_assert_msg(max_fds <= RLIMIT_NOFILE_SET, "%u fds", max_fds);
        ck_assert_msg(anon_after <= ANON_LIMIT_KB, "RssAnon %ld kB", anon_after);
        ck_assert_msg(count_lines(logpath) <= LOG_LINES_MAX, "%u log lines: guest errors are not rate limited",
                      count_lines(logpath));

        /* 5. Still serving: forgetting gives the budget back, new lookups and I/O work again. */
        for (unsigned i = 0; i < 100; i++)
                ck_assert_int_eq(fe_fuse_forget(c, nodes[n_nodes - 1 - i], 1), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, 1, "f0999", &e), 0);
        ck_assert_int_eq(fe_fuse_roundtrip(c, "after-flood", 100000, 3), 0);
        ck_assert_uint_eq(c->proto_errors, 0);
        ck_assert_msg(fe_backend_alive(h->backend), "vufsd died");

        fe_fuse_free(c);
        fe_free(fe);
        free(nodes);
        free(logpath);
}
END_TEST

/* Issue 31 finding 5: MKDIR + RMDIR without FORGET leaves a node per directory (by file handle it
 * holds no fd, so the fd budget never stopped it: 470 bytes a node, without end). With
 * --max-nodes=N the N-th node (the root is one) answers ENFILE, memory stops growing, one log line
 * names the option, and FORGETs make room again. */
#define NODE_BUDGET 5000
#define NODE_FLOOD 8000

START_TEST(test_node_flood) {
        const char *const extra_root[] = { "--bus=none", "--sandbox=namespace", "--seccomp=kill",
                                           "--max-nodes=5000" /* NODE_BUDGET */, NULL };
        const char *const extra_user[] = { "--bus=none", "--sandbox=none", "--max-nodes=5000" /* NODE_BUDGET */,
                                           NULL };
        uint64_t *nodes = calloc(NODE_FLOOD, sizeof *nodes);
        unsigned n_nodes = 0, enfile = 0;
        long anon_before, anon_half = 0, anon_after;
        char *logpath, *log = NULL;
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        struct fuse_entry_out e;
        int r;
        size_t loglen = 0;
        FILE *f;
        pid_t pid;

        ck_assert_ptr_nonnull(nodes);
        logpath = start_logged(geteuid() == 0 ? extra_root : extra_user, &fe, &c);
        pid = fe_harness_daemon_pid(h);
        anon_before = status_kb(pid, "RssAnon");

        for (unsigned i = 0; i < NODE_FLOOD; i++) {
                char name[32];
                snprintf(name, sizeof name, "d%05u", i);
                r = fe_fuse_mkdir(c, 1, name, 0755, &e);
                if (r == -ENFILE) {
                        enfile++;
                        continue;
                }
                ck_assert_msg(r == 0, "MKDIR %s: %d %s", name, r, c->last_problem);
                nodes[n_nodes++] = e.nodeid;
                ck_assert_int_eq(fe_fuse_rmdir(c, 1, name), 0);
                if (n_nodes == NODE_BUDGET / 2)
                        anon_half = status_kb(pid, "RssAnon");
        }
        anon_after = status_kb(pid, "RssAnon");
        f = fopen(logpath, "re");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_ge(getdelim(&log, &loglen, '\0', f), 0);
        fclose(f);
        fprintf(stderr, "node flood: %u nodes held, %u ENFILE; RssAnon %ld -> %ld (at %u nodes) -> %ld kB, "
                        "%ld bytes a node\n",
                n_nodes, enfile, anon_before, anon_half, NODE_BUDGET / 2, anon_after,
                (anon_half - anon_before) * 1024 / (NODE_BUDGET / 2));
        ck_assert_uint_eq(n_nodes, NODE_BUDGET - 1); /* the root is a node too */
        ck_assert_uint_eq(enfile, NODE_FLOOD - n_nodes);
        ck_assert_msg(strstr(log, "--max-nodes"), "no log line names --max-nodes:\n%s", log);
        /* What the flood past the budget added: nothing of the nodes' size (allow 512 kB of noise). */
        ck_assert_msg(anon_after - anon_half <= (anon_half - anon_before) + 512, "RssAnon grew past the budget");

        /* The guest's FORGETs bring the count back. (The refused MKDIRs made their directories on
         * the host: the node is refused after the operation, as when the fd budget is spent.) */
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "refused", 0755, &e), -ENFILE);
        for (unsigned i = 0; i < 10; i++)
                ck_assert_int_eq(fe_fuse_forget(c, nodes[--n_nodes], 1), 0);
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "again", 0755, &e), 0);
        ck_assert_int_eq(fe_fuse_roundtrip(c, "after-node-flood", 10000, 5), 0);
        ck_assert_uint_eq(c->proto_errors, 0);
        ck_assert_msg(fe_backend_alive(h->backend), "vufsd died");

        fe_fuse_free(c);
        fe_free(fe);
        free(nodes);
        free(log);
        free(logpath);
}
END_TEST

int main(void) {
        Suite *s = suite_create("flood");
        TCase *tc = tcase_create("flood");

        fe_harness_sanitizer_env();
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, test_flood);
        tcase_add_test(tc, test_node_flood);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
