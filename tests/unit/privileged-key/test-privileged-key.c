/* test-privileged-key.c: the key of --privileged-files=map: made once (0600, its directory 0700),
 * the same on every later read, refused when another user could read or change it. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "privileged-key.h"
#include "test-main.h"

TEST_TEMP_DIR_FIXTURE(dir, "/tmp/test-privileged-key-XXXXXX")

START_TEST(test_made_once_and_kept) {
        uint8_t a[FS_PRIVILEGED_KEY_SIZE], b[FS_PRIVILEGED_KEY_SIZE], zero[FS_PRIVILEGED_KEY_SIZE] = {};
        char path[512], sub[256];
        struct stat st;

        snprintf(sub, sizeof sub, "%s/state/vufsd", dir);
        snprintf(path, sizeof path, "%s/privileged-files.key", sub);
        ck_assert_int_eq(privileged_key_load(path, a), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0600);
        ck_assert_int_eq(st.st_size, FS_PRIVILEGED_KEY_SIZE);
        ck_assert_int_eq(stat(sub, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert(memcmp(a, zero, sizeof a) != 0);
        ck_assert_int_eq(privileged_key_load(path, b), 0);
        ck_assert(memcmp(a, b, sizeof a) == 0); /* a restart reads the same key */
}
END_TEST

START_TEST(test_refused) {
        uint8_t k[FS_PRIVILEGED_KEY_SIZE];
        char path[256];
        int fd;

        snprintf(path, sizeof path, "%s/key", dir);
        ck_assert_int_eq(privileged_key_load(path, k), 0);
        ck_assert_int_eq(chmod(path, 0640), 0); /* another user could read it */
        ck_assert_int_eq(privileged_key_load(path, k), -EPERM);
        ck_assert_int_eq(chmod(path, 0600), 0);
        ck_assert_int_eq(truncate(path, 16), 0); /* cut short */
        ck_assert_int_eq(privileged_key_load(path, k), -EINVAL);
        snprintf(path, sizeof path, "%s/link", dir);
        ck_assert_int_eq(symlink("key", path), 0);
        ck_assert_int_eq(privileged_key_load(path, k), -ELOOP);
        snprintf(path, sizeof path, "%s/d", dir);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        fd = open(path, O_RDONLY | O_DIRECTORY);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(privileged_key_load(path, k), -EINVAL);
}
END_TEST

START_TEST(test_default_path) {
        char *p = NULL;

        setenv("STATE_DIRECTORY", "/var/lib/vufsd:/var/lib/other", 1);
        ck_assert_int_eq(privileged_key_default_path(&p), 0);
        ck_assert_str_eq(p, "/var/lib/vufsd/privileged-files.key");
        free(p);
        unsetenv("STATE_DIRECTORY");
        setenv("XDG_STATE_HOME", "/home/u/.state", 1);
        setenv("HOME", "/home/u", 1);
        ck_assert_int_eq(privileged_key_default_path(&p), 0);
        ck_assert_str_eq(p, geteuid() == 0 ? "/var/lib/vufsd/privileged-files.key"
                                           : "/home/u/.state/vufsd/privileged-files.key");
        free(p);
}
END_TEST

static Suite *privileged_key_suite(void) {
        Suite *s = suite_create("privileged-key");
        TCase *tc = tcase_create("key");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_made_once_and_kept);
        tcase_add_test(tc, test_refused);
        tcase_add_test(tc, test_default_path);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(privileged_key_suite)
