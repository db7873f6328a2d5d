/* test-handle-map.c: fh issue, ownership checks and release. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handle-map.h"
#include "inode-map.h"

static FdBudget budget = { .max = 100 };
static InodeMap *im;
static HandleMap *hm;

static Inode *add_inode(const char *path) {
        struct statx stx;
        Inode *i;
        int fd;

        ck_assert(fd_budget_take(&budget));
        fd = open(path, O_PATH | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx), 0);
        ck_assert_int_eq(inode_map_add_lookup(im, fd, &stx, &i), 0);
        return i;
}

static int open_fd(const char *path, int flags) {
        ck_assert(fd_budget_take(&budget));
        int fd = open(path, flags | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        return fd;
}

START_TEST(test_handles) {
        Inode *root, *file;
        Handle *h;
        uint64_t f1, f2, d1;

        ck_assert_int_eq(inode_map_new(&im, &budget), 0);
        ck_assert_int_eq(handle_map_new(&hm, &budget), 0);
        root = add_inode("/");
        file = add_inode("/proc/self/exe");

        ck_assert_int_eq(handle_map_add(hm, file, open_fd("/proc/self/exe", O_RDONLY), O_RDONLY, false, &f1), 0);
        ck_assert_int_eq(handle_map_add(hm, file, open_fd("/proc/self/exe", O_RDONLY), O_RDONLY, false, &f2), 0);
        ck_assert_int_eq(handle_map_add(hm, root, open_fd("/", O_RDONLY | O_DIRECTORY), O_RDONLY, true, &d1), 0);
        ck_assert_uint_ne(f1, f2);
        ck_assert_uint_ne(f2, d1);
        ck_assert_uint_eq(handle_map_size(hm), 3);

        ck_assert_int_eq(handle_map_get(hm, f1, file->nodeid, 0, &h), 0);
        ck_assert_ptr_eq(h->inode, file);
        /* released while in use: stays valid for the user, gone for everyone else */
        ck_assert_int_eq(handle_map_remove(hm, f1, file->nodeid, 0), 0);
        ck_assert_int_eq(handle_map_remove(hm, f1, file->nodeid, 0), -EBADF);
        ck_assert_int_ge(fcntl(h->fd, F_GETFD), 0);
        handle_unref(h);

        /* of another inode, of the wrong kind, never issued */
        ck_assert_int_eq(handle_map_get(hm, f2, root->nodeid, -1, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, d1, root->nodeid, 0, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, f2, file->nodeid, 1, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, 0, file->nodeid, -1, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, 999, file->nodeid, -1, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, d1, root->nodeid, 1, &h), 0);
        handle_unref(h);

        /* The inode outlives its forget while a handle holds it. */
        inode_map_forget(im, file->nodeid, 1);
        ck_assert_int_eq(handle_map_get(hm, f2, file->nodeid, 0, &h), 0);
        handle_unref(h);
        ck_assert_uint_eq(budget.used, 4); /* root and file inodes, handles f2 and d1 */
        handle_map_clear(hm);
        ck_assert_uint_eq(handle_map_size(hm), 0);
        inode_unref(file);
        inode_unref(root);
        hm = handle_map_free(hm);
        im = inode_map_free(im);
        ck_assert_uint_eq(budget.used, 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("handle-map");
        TCase *tc = tcase_create("core");
        SRunner *sr;
        int failed;

        tcase_add_test(tc, test_handles);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
