/* test-main.h: the one main() of the Check test programs, and per-case root requirements.
 *
 * A test file builds its Suite and ends with TEST_MAIN_SUITE(suite_fn) (or TEST_MAIN(name, add)
 * when it only adds TCases to a suite made here). A case that needs root is added with
 * tcase_add_root_test(): without root it is left out and named on stderr, so the rest of the
 * program still runs unprivileged. */
#pragma once

#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Timing bounds hold on a quiet machine only: a unit test reports one it misses, and the same
 * program built for the bench suite (-DTEST_TIMING) fails on it. */
#ifdef TEST_TIMING
#define ck_assert_timing_lt(x, bound) ck_assert_uint_lt((x), (bound))
#else
#define ck_assert_timing_lt(x, bound)                                                              \
        do {                                                                                       \
                uint64_t _v = (x), _b = (bound);                                                   \
                if (_v >= _b)                                                                      \
                        fprintf(stderr, "timing: %s = %" PRIu64 ", bound %" PRIu64                 \
                                        " (enforced in the bench suite)\n",                        \
                                #x, _v, _b);                                                       \
        } while (0)
#endif

static inline bool test_have_root(void) {
        return geteuid() == 0;
}

static inline void test_add_root_case(TCase *tc, const TTest *t) {
        if (test_have_root())
                tcase_add_test(tc, t);
        else
                fprintf(stderr, "SKIP %s: needs root\n", t->name);
}
#define tcase_add_root_test(tc, tf) test_add_root_case((tc), (tf))

/* Runs the suite (CK_FORK_GETENV, or CK_NOFORK for a program that forks its cases itself) and
 * turns the result into the exit status. */
static inline int test_main_run_mode(Suite *s, enum fork_status fork) {
        SRunner *sr = srunner_create(s);
        int failed;

        srunner_set_fork_status(sr, fork);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static inline int test_main_run(Suite *s) {
        /* Forking unless CK_FORK=no in the environment says otherwise (Check's own switch). */
        return test_main_run_mode(s, CK_FORK_GETENV);
}

#define TEST_MAIN_SUITE(suite_fn)                                                                  \
        int main(void) {                                                                           \
                return test_main_run(suite_fn());                                                  \
        }

#define TEST_MAIN(name, add_fn)                                                                    \
        int main(void) {                                                                           \
                Suite *_s = suite_create(name);                                                    \
                add_fn(_s);                                                                        \
                return test_main_run(_s);                                                          \
        }

/* A checked fixture's scratch directory: `name` (a char array) holds a fresh mkdtemp() of
 * template for each case, removed after it; setup() and teardown() go to
 * tcase_add_checked_fixture(). */
#define TEST_TEMP_DIR_FIXTURE(name, template)                                                      \
        static char name[] = template;                                                             \
        static void setup(void) {                                                                  \
                ck_assert_ptr_nonnull(mkdtemp(name));                                              \
        }                                                                                          \
        static void teardown(void) {                                                               \
                char _cmd[sizeof name + 16];                                                       \
                snprintf(_cmd, sizeof _cmd, "rm -rf %s", name);                                    \
                ck_assert_int_eq(system(_cmd), 0);                                                 \
                snprintf(name, sizeof name, "%s", template);                                       \
        }
