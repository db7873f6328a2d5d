/* test-host-permission.c: the caller's rights on an inode's host attributes (host-permission.c). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "host-permission.h"
#include "test-main.h"

static struct statx file(uid_t uid, gid_t gid, mode_t mode) {
        return (struct statx){ .stx_uid = uid, .stx_gid = gid, .stx_mode = S_IFREG | mode };
}

START_TEST(test_classes) {
        const gid_t groups[] = { 300 };
        const FsCtx user = { .uid = 1000, .gid = 100 }, root = { .uid = 0, .gid = 0 };
        const FsCtx with_group = { .uid = 1000, .gid = 100, .groups = groups, .n_groups = 1 };
        struct statx st;

        /* Guest root may do everything. */
        st = file(2000, 2000, 0);
        ck_assert_int_eq(host_permission(&root, &st, R_OK | W_OK | HOST_MAY_OWNER), 0);
        /* Owner: only the owner's bits count, even when others' grant more. */
        st = file(1000, 200, 0407);
        ck_assert_int_eq(host_permission(&user, &st, R_OK), 0);
        ck_assert_int_eq(host_permission(&user, &st, W_OK), -EACCES);
        ck_assert_int_eq(host_permission(&user, &st, HOST_MAY_OWNER), 0);
        /* Another's file: the owner's changes are refused, whatever the bits. */
        st = file(0, 0, 0666);
        ck_assert_int_eq(host_permission(&user, &st, HOST_MAY_OWNER), -EPERM);
        ck_assert_int_eq(host_permission(&user, &st, R_OK | W_OK), 0);
        st = file(0, 0, 0600);
        ck_assert_int_eq(host_permission(&user, &st, R_OK), -EACCES);
        ck_assert_int_eq(host_permission(&user, &st, 0), 0);
        /* The request's gid or group: the group's bits alone. */
        st = file(0, 100, 0604);
        ck_assert_int_eq(host_permission(&user, &st, R_OK), -EACCES);
        st = file(0, 300, 0640);
        ck_assert_int_eq(host_permission(&with_group, &st, R_OK), 0);
        ck_assert_int_eq(host_permission(&with_group, &st, W_OK), -EACCES);
        /* A group the request does not name: the guest judged the membership, group or other. */
        st = file(0, 300, 0640);
        ck_assert_int_eq(host_permission(&user, &st, R_OK), 0);
        ck_assert_int_eq(host_permission(&user, &st, W_OK), -EACCES);
        st = file(0, 300, 0604);
        ck_assert_int_eq(host_permission(&user, &st, R_OK), 0);
        st = file(0, 300, 0642);
        ck_assert_int_eq(host_permission(&user, &st, R_OK | W_OK), -EACCES); /* no single class grants both */
}
END_TEST

START_TEST(test_open_need) {
        ck_assert_int_eq(host_open_need(O_RDONLY), R_OK);
        ck_assert_int_eq(host_open_need(O_WRONLY), W_OK);
        ck_assert_int_eq(host_open_need(O_RDWR | O_APPEND), R_OK | W_OK);
        ck_assert_int_eq(host_open_need(O_RDONLY | O_TRUNC), R_OK | W_OK);
        ck_assert_int_eq(host_open_need(O_RDONLY | 040), X_OK); /* the kernel's open for execve() */
}
END_TEST

static Suite *host_permission_suite(void) {
        Suite *s = suite_create("host-permission");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_classes);
        tcase_add_test(tc, test_open_need);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(host_permission_suite)
