/* test-share-dir.c: the shared directory's one resolution (share-dir.h, issue 31 finding 8): the
 * walk ends where the kernel's would (relative and absolute symlinks, "." and ".."), and refuses a
 * path through a directory someone else owns or may write. Ownership cases need root (chown). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "share-dir.h"
#include "test-main.h"
#include "util.h"

TEST_TEMP_DIR_FIXTURE(dir, "/tmp/test-share-dir-XXXXXX")

static char *at(const char *name) {
        char *p;
        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        return p;
}

/* share_dir_open(path) succeeds and is the directory want names (the kernel's resolution). */
static void assert_opens(const char *path, const char *want, uid_t trusted) {
        _cleanup_free_ char *why = NULL;
        struct stat a, b;
        int fd = share_dir_open(path, trusted, &why);

        ck_assert_msg(fd >= 0, "%s: %s (%s)", path, strerror(-fd), why ?: "");
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert_int_eq(stat(want, &b), 0);
        ck_assert_msg(a.st_dev == b.st_dev && a.st_ino == b.st_ino, "%s is not %s", path, want);
        ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        close(fd);
}

START_TEST(test_resolves_like_the_kernel) {
        _cleanup_free_ char *a = at("a"), *b = at("a/b"), *rel = at("rel"), *abs = at("abs"), *dots = NULL;
        _cleanup_free_ char *loop = at("loop"), *file = at("file"), *via_file = at("file/x"), *why = NULL;
        int fd;

        ck_assert_int_eq(mkdir(a, 0755), 0);
        ck_assert_int_eq(mkdir(b, 0755), 0);
        ck_assert_int_eq(symlink("a/./../a/b", rel), 0);
        ck_assert_int_eq(symlink(b, abs), 0);
        ck_assert_int_eq(symlink("loop", loop), 0);
        fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_ge(asprintf(&dots, "%s/a/b/../../abs/..//b/", dir), 0);

        assert_opens(b, b, 0);
        assert_opens(rel, b, 0);
        assert_opens(abs, b, 0);
        assert_opens(dots, b, 0); /* ".." after a symlink: the target's parent, as the kernel */
        assert_opens("/", "/", 0);
        assert_opens("/..", "/", 0);
        ck_assert_int_eq(share_dir_open(loop, 0, &why), -ELOOP);
        ck_assert_int_eq(share_dir_open(file, 0, &why), -ENOTDIR);
        ck_assert_int_eq(share_dir_open(via_file, 0, &why), -ENOTDIR);
        ck_assert_int_eq(share_dir_open("tmp", 0, &why), -EINVAL);
        ck_assert_ptr_null(why);
}
END_TEST

/* -EPERM, and the sentence names culprit. */
static void assert_refused(const char *path, uid_t trusted, const char *culprit) {
        _cleanup_free_ char *why = NULL;
        int fd = share_dir_open(path, trusted, &why);

        ck_assert_msg(fd == -EPERM, "%s: %d, want EPERM", path, fd);
        ck_assert_ptr_nonnull(why);
        ck_assert_msg(strstr(why, culprit), "%s: \"%s\" does not name %s", path, why, culprit);
}

START_TEST(test_refuses_what_others_control) {
        _cleanup_free_ char *user = at("user"), *in_user = at("user/share"), *open_dir = at("open");
        _cleanup_free_ char *in_open = at("open/share"), *sticky = at("sticky"), *theirs = at("sticky/theirs");
        _cleanup_free_ char *mine = at("sticky/mine"), *link = at("sticky/link"), *share_owned = at("owned");

        ck_assert_int_eq(mkdir(user, 0755), 0);
        ck_assert_int_eq(mkdir(in_user, 0755), 0);
        ck_assert_int_eq(chown(user, 1000, 1000), 0);
        ck_assert_int_eq(mkdir(open_dir, 0755), 0);
        ck_assert_int_eq(chmod(open_dir, 0775), 0); /* group-writable is enough */
        ck_assert_int_eq(mkdir(in_open, 0755), 0);
        ck_assert_int_eq(mkdir(sticky, 0755), 0);
        ck_assert_int_eq(chmod(sticky, 01777), 0);
        ck_assert_int_eq(mkdir(theirs, 0755), 0);
        ck_assert_int_eq(chown(theirs, 1000, 1000), 0);
        ck_assert_int_eq(mkdir(mine, 0755), 0);
        ck_assert_int_eq(symlink(mine, link), 0);
        ck_assert_int_eq(lchown(link, 1000, 1000), 0);
        ck_assert_int_eq(mkdir(share_owned, 0700), 0);
        ck_assert_int_eq(chown(share_owned, 1000, 1000), 0);

        assert_refused(in_user, 0, user);
        assert_opens(in_user, in_user, 1000); /* the daemon's own user owns it */
        assert_refused(in_open, 0, open_dir);
        assert_refused(theirs, 0, theirs);
        assert_opens(theirs, theirs, 1000);
        assert_opens(mine, mine, 0);          /* root's entry in a sticky directory */
        assert_refused(link, 0, "link");      /* someone else's symlink there */
        assert_opens(share_owned, share_owned, 0); /* the share itself may be anyone's */
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("share-dir");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_resolves_like_the_kernel);
        tcase_add_root_test(tc, test_refuses_what_others_control);
        suite_add_tcase(s, tc);
}

TEST_MAIN("share-dir", add_tests)
