/* test-fd-budget.c: the fd budget: opens that charge it, closes that release it, the limits. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-budget.h"
#include "test-main.h"

/* The lowest free fd number: tells whether an fd was left open. */
static int next_fd(void) {
        int fd = dup(0);
        ck_assert_int_ge(fd, 0);
        close(fd);
        return fd;
}

START_TEST(test_open_charges_close_releases) {
        FdBudget b = { .max = 2 };
        int free_fd = next_fd(), a, c;

        a = fd_budget_openat(&b, AT_FDCWD, "/", O_PATH | O_CLOEXEC, 0);
        ck_assert_int_ge(a, 0);
        ck_assert_uint_eq(b.used, 1);
        c = fd_budget_openat(&b, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC, 0);
        ck_assert_int_ge(c, 0);
        ck_assert_uint_eq(b.used, 2);
        /* Spent: -ENFILE, nothing opened, nothing charged. */
        ck_assert_int_eq(fd_budget_openat(&b, AT_FDCWD, "/", O_PATH | O_CLOEXEC, 0), -ENFILE);
        ck_assert_uint_eq(b.used, 2);
        ck_assert_int_eq(fd_budget_close(&b, a), -1);
        ck_assert_uint_eq(b.used, 1);
        ck_assert_int_eq(fcntl(a, F_GETFD), -1); /* really closed */
        ck_assert_int_eq(fd_budget_close(&b, c), -1);
        ck_assert_uint_eq(b.used, 0);
        ck_assert_int_eq(next_fd(), free_fd);
}
END_TEST

START_TEST(test_failed_open_charges_nothing) {
        FdBudget b = { .max = 1 };
        int free_fd = next_fd();

        ck_assert_int_eq(fd_budget_openat(&b, AT_FDCWD, "/nonexistent/x", O_RDONLY | O_CLOEXEC, 0), -ENOENT);
        ck_assert_uint_eq(b.used, 0);
        ck_assert_int_eq(fd_budget_openat(&b, -1, "relative", O_RDONLY | O_CLOEXEC, 0), -EBADF);
        ck_assert_uint_eq(b.used, 0);
        /* The one fd is still there to take. */
        int fd = fd_budget_openat(&b, AT_FDCWD, "/", O_PATH | O_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        fd = fd_budget_close(&b, fd);
        ck_assert_int_eq(fd, -1);
        /* Closing "no fd" releases nothing. */
        ck_assert_int_eq(fd_budget_close(&b, -1), -1);
        ck_assert_uint_eq(b.used, 0);
        ck_assert_int_eq(next_fd(), free_fd);
}
END_TEST

START_TEST(test_take_release_at_the_edge) {
        FdBudget b = { .max = 0 };

        ck_assert(!fd_budget_take(&b));
        ck_assert_uint_eq(b.used, 0);
        b.max = 1;
        ck_assert(fd_budget_take(&b));
        ck_assert(!fd_budget_take(&b));
        ck_assert_uint_eq(b.used, 1);
        fd_budget_release(&b);
        ck_assert_uint_eq(b.used, 0);
}
END_TEST

/* Moved from test-credentials.c: the limits are the budget's. */
START_TEST(test_fd_limit) {
        pid_t pid = fork();
        int status;

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct rlimit rl = { 1024, 8192 };
                int64_t n;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        _exit(2);
                n = fd_budget_raise_rlimit(4096);
                if (n != 4096 || getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur != 4096)
                        _exit(3);
                /* Asking for more than nr_open is capped: at the hard limit without
                 * CAP_SYS_RESOURCE, at nr_open/file-max with it. */
                n = fd_budget_raise_rlimit(UINT64_MAX / 2);
                if (n < 8192 || n > 1073741816)
                        _exit(4);
                if (fd_budget_default_max() >= (uint64_t) n)
                        _exit(5);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

START_TEST(test_budget) {
        FdBudget b = { .max = 2 };
        ck_assert(fd_budget_take(&b));
        ck_assert(fd_budget_take(&b));
        ck_assert(!fd_budget_take(&b));
        ck_assert_uint_eq(b.used, 2);
        fd_budget_release(&b);
        ck_assert(fd_budget_take(&b));
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("fd-budget");
        tcase_add_test(tc, test_open_charges_close_releases);
        tcase_add_test(tc, test_failed_open_charges_nothing);
        tcase_add_test(tc, test_take_release_at_the_edge);
        tcase_add_test(tc, test_fd_limit);
        tcase_add_test(tc, test_budget);
        suite_add_tcase(s, tc);
}

TEST_MAIN("fd-budget", add_tests)
