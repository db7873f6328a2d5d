/* test-fs-names.c: the name choke point. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs-names.h"
#include "test-main.h"

static int v(const char *s, bool dots) {
        return fs_name_validate(s, strlen(s), dots);
}

START_TEST(test_names) {
        char longname[300];

        ck_assert_int_eq(v("a", false), 0);
        ck_assert_int_eq(v("...", false), 0);
        ck_assert_int_eq(v(".hidden", false), 0);
        ck_assert_int_eq(v("", false), -ENOENT);
        ck_assert_int_eq(v(".", false), -EINVAL);
        ck_assert_int_eq(v("..", false), -EINVAL);
        ck_assert_int_eq(v(".", true), 0);
        ck_assert_int_eq(v("..", true), 0);
        ck_assert_int_eq(v("a/b", true), -EINVAL);
        ck_assert_int_eq(v("/", true), -EINVAL);
        ck_assert_int_eq(v("/etc/passwd", false), -EINVAL);
        ck_assert_int_eq(v("../x", true), -EINVAL);
        memset(longname, 'n', sizeof longname);
        longname[255] = 0;
        ck_assert_int_eq(v(longname, false), 0);
        longname[255] = 'n';
        longname[256] = 0;
        ck_assert_int_eq(v(longname, false), -ENAMETOOLONG);
        /* A NUL inside the declared length ends the name; it is the length that counts. */
        ck_assert_int_eq(fs_name_validate("ab", 1, false), 0);
}
END_TEST

START_TEST(test_strings) {
        const char buf[] = { 'a', 'b', 0, 'c', 0, 'd' };
        const char *p = buf, *s;
        size_t left = sizeof buf, len;

        ck_assert_int_eq(fs_string_take(&p, &left, &s, &len), 0);
        ck_assert_str_eq(s, "ab");
        ck_assert_uint_eq(len, 2);
        ck_assert_uint_eq(left, 3);
        ck_assert_int_eq(fs_string_take(&p, &left, &s, &len), 0);
        ck_assert_str_eq(s, "c");
        ck_assert_uint_eq(left, 1);
        /* "d" has no NUL inside the buffer */
        ck_assert_int_eq(fs_string_take(&p, &left, &s, &len), -EINVAL);
        ck_assert_uint_eq(left, 1);
        left = 0;
        ck_assert_int_eq(fs_string_take(&p, &left, &s, &len), -EINVAL);
}
END_TEST

START_TEST(test_targets_and_xattrs) {
        char *big = malloc(5000);

        ck_assert_int_eq(fs_symlink_target_validate("/abs/olute", 10), 0);
        ck_assert_int_eq(fs_symlink_target_validate("", 0), -ENOENT);
        memset(big, 'x', 5000);
        ck_assert_int_eq(fs_symlink_target_validate(big, 4095), 0);
        ck_assert_int_eq(fs_symlink_target_validate(big, 4096), -ENAMETOOLONG);
        ck_assert_int_eq(fs_xattr_name_validate("user.a", 6), 0);
        ck_assert_int_eq(fs_xattr_name_validate("", 0), -ERANGE);
        ck_assert_int_eq(fs_xattr_name_validate(big, 255), 0);
        ck_assert_int_eq(fs_xattr_name_validate(big, 256), -ERANGE);
        ck_assert(fs_name_is_dot_or_dotdot("."));
        ck_assert(fs_name_is_dot_or_dotdot(".."));
        ck_assert(!fs_name_is_dot_or_dotdot("..."));
        ck_assert(!fs_name_is_dot_or_dotdot(".a"));
        free(big);
}
END_TEST

int main(void) {
        Suite *s = suite_create("fs-names");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_names);
        tcase_add_test(tc, test_strings);
        tcase_add_test(tc, test_targets_and_xattrs);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
