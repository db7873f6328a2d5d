/* test-beneath.c: one-name opens that never leave their directory, and ".." only beneath the root
 * (daemon/passthrough/beneath.c). Every case runs with openat2() (_i = 0) and with the fallback a
 * kernel without it takes (_i = 1). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "beneath.h"
#include "util.h"
#include "test-main.h"

static char tmp[64];
static int top = -1; /* tmp */
static int root = -1; /* tmp/root, the "share" */
static InodeKey root_key;
static FdBudget budget = { .max = 1000 };

static InodeKey key_of(int fd) {
        struct statx stx;

        ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_MNT_IDS, &stx), 0);
        return inode_key_from_statx(&stx);
}

static bool same(int a, int b) {
        InodeKey ka = key_of(a), kb = key_of(b);
        return ka.dev == kb.dev && ka.ino == kb.ino;
}

static int rm_rf(const char *path) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
        return system(cmd);
}

static void setup(void) {
        int fd;

        snprintf(tmp, sizeof tmp, "/tmp/vufsd-beneath.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmp));
        top = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(top, 0);
        ck_assert_int_eq(mkdirat(top, "root", 0755), 0);
        ck_assert_int_eq(mkdirat(top, "out", 0755), 0);
        root = openat(top, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(root, 0);
        root_key = key_of(root);
        ck_assert_int_eq(mkdirat(root, "a", 0755), 0);
        ck_assert_int_eq(mkdirat(root, "a/b", 0755), 0);
        fd = openat(root, "file", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        fd = openat(top, "out/secret", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(symlinkat("/", root, "to-root"), 0);
        ck_assert_int_eq(symlinkat("../out/secret", root, "to-secret"), 0);
        ck_assert_int_eq(symlinkat("/proc/self/fd/0", root, "to-magic"), 0);
        atomic_store(&budget.used, 0);
}

static void teardown(void) {
        beneath_use_openat2(true);
        safe_close(root);
        safe_close(top);
        ck_assert_int_eq(rm_rf(tmp), 0);
        ck_assert_uint_eq(atomic_load(&budget.used), 0);
}

static int open_(const char *name, int flags) {
        return beneath_openat(&budget, root, name, flags | O_CLOEXEC, 0);
}

static void done(int fd) {
        ck_assert_int_ge(fd, 0);
        fd_budget_close(&budget, fd);
}

START_TEST(test_one_name) {
        beneath_use_openat2(_i == 0);
        done(open_("file", O_RDONLY));
        done(open_("a", O_PATH | O_DIRECTORY));
        ck_assert_uint_eq(atomic_load(&budget.used), 0);
        /* More than one name, the parent, an absolute path: never opened, nothing charged. */
        ck_assert_int_eq(open_("a/b", O_PATH), -EXDEV);
        ck_assert_int_eq(open_("..", O_PATH), -EXDEV);
        ck_assert_int_eq(open_("/etc", O_PATH), -EXDEV);
        ck_assert_int_eq(open_("../out/secret", O_RDONLY), -EXDEV);
        ck_assert_int_eq(open_("missing", O_PATH), -ENOENT);
        ck_assert_uint_eq(atomic_load(&budget.used), 0);
}
END_TEST

START_TEST(test_symlinks_not_followed) {
        static const char *const links[] = { "to-root", "to-secret", "to-magic" };

        beneath_use_openat2(_i == 0);
        for (size_t k = 0; k < ELEMENTSOF(links); k++) {
                int fd = open_(links[k], O_PATH); /* O_NOFOLLOW is implied */
                struct stat st;

                /* The link itself, as a lookup wants it. */
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(fstatat(fd, "", &st, AT_EMPTY_PATH), 0);
                ck_assert_msg(S_ISLNK(st.st_mode), "%s opened its target", links[k]);
                done(fd);
                ck_assert_int_eq(open_(links[k], O_RDONLY), -ELOOP);
                ck_assert_int_eq(open_(links[k], O_RDONLY | O_DIRECTORY) == -ELOOP ||
                                         open_(links[k], O_RDONLY | O_DIRECTORY) == -ENOTDIR,
                                 1);
        }
}
END_TEST

START_TEST(test_tmpfile) {
        int fd;

        beneath_use_openat2(_i == 0);
        fd = beneath_openat(&budget, root, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd == -EOPNOTSUPP)
                return; /* the filesystem of /tmp has no O_TMPFILE: nothing here to show */
        done(fd);
}
END_TEST

START_TEST(test_parent) {
        int a, b, fd;

        beneath_use_openat2(_i == 0);
        a = openat(root, "a", O_PATH | O_DIRECTORY | O_CLOEXEC);
        b = openat(root, "a/b", O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(a, 0);
        ck_assert_int_ge(b, 0);
        fd = beneath_open_parent(&budget, b, &root_key);
        ck_assert_int_ge(fd, 0);
        ck_assert(same(fd, a));
        done(fd);
        fd = beneath_open_parent(&budget, a, &root_key);
        ck_assert_int_ge(fd, 0);
        ck_assert(same(fd, root));
        done(fd);
        /* The root's own parent lies above it. */
        ck_assert_int_eq(beneath_open_parent(&budget, root, &root_key), -ENOENT);

        /* Moved next to the root by someone else: its parent is outside, so is the one above. */
        ck_assert_int_eq(renameat(root, "a/b", top, "out/b"), 0);
        ck_assert_int_eq(beneath_open_parent(&budget, b, &root_key), -ENOENT);
        ck_assert_int_eq(renameat(root, "a", top, "out/a"), 0);
        ck_assert_int_eq(beneath_open_parent(&budget, a, &root_key), -ENOENT);
        /* Back beneath the root, deeper than before: found again. */
        ck_assert_int_eq(mkdirat(root, "n", 0755), 0);
        ck_assert_int_eq(renameat(top, "out/a", root, "n/a"), 0);
        fd = beneath_open_parent(&budget, a, &root_key);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstatat(fd, "a", &(struct stat){ 0 }, 0), 0);
        done(fd);
        ck_assert_uint_eq(atomic_load(&budget.used), 0);
        close(a);
        close(b);
}
END_TEST

/* A directory BENEATH_MAX_DEPTH levels down still finds its parent; one level more is refused
 * although it is beneath: the walk never runs unbounded. */
START_TEST(test_parent_depth_bound) {
        int at = dup(root), next, fd;

        ck_assert_int_ge(at, 0);
        for (unsigned level = 1; level <= BENEATH_MAX_DEPTH + 1; level++) {
                ck_assert_int_eq(mkdirat(at, "d", 0755), 0);
                next = openat(at, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_ge(next, 0);
                close(at);
                at = next;
                if (level == BENEATH_MAX_DEPTH) {
                        fd = beneath_open_parent(&budget, at, &root_key);
                        ck_assert_int_ge(fd, 0);
                        done(fd);
                }
        }
        ck_assert_int_eq(beneath_open_parent(&budget, at, &root_key), -ENOENT);
        close(at);
}
END_TEST

static Suite *beneath_suite(void) {
        Suite *s = suite_create("beneath");
        TCase *tc = tcase_create("beneath");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_loop_test(tc, test_one_name, 0, 2);
        tcase_add_loop_test(tc, test_symlinks_not_followed, 0, 2);
        tcase_add_loop_test(tc, test_tmpfile, 0, 2);
        tcase_add_loop_test(tc, test_parent, 0, 2);
        tcase_add_test(tc, test_parent_depth_bound);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(beneath_suite)
