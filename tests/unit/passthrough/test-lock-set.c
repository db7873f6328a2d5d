/* test-lock-set.c: one lock owner's POSIX ranges under the kernel's rules (lock-set.h), checked
 * against the kernel itself: every step is also taken on a real OFD, and the set must be what
 * F_OFD_GETLK from a second open file finds, byte by byte. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lock-set.h"
#include "test-main.h"

static void step(LockSet *s, uint64_t start, uint64_t end, short type) {
        ck_assert_int_eq(lock_set_reserve(s), 0);
        lock_set_apply(s, start, end, type);
}

static void expect(const LockSet *s, const LockRange *want, size_t n) {
        ck_assert_uint_eq(s->n, n);
        for (size_t k = 0; k < n; k++) {
                ck_assert_uint_eq(s->r[k].start, want[k].start);
                ck_assert_uint_eq(s->r[k].end, want[k].end);
                ck_assert_int_eq(s->r[k].type, want[k].type);
        }
}

START_TEST(test_split_replace_merge) {
        LockSet s = {};

        step(&s, 0, 199, F_WRLCK);
        step(&s, 100, 149, F_UNLCK); /* split */
        expect(&s, (LockRange[]) { { 0, 99, F_WRLCK }, { 150, 199, F_WRLCK } }, 2);
        step(&s, 50, 160, F_RDLCK); /* replaces across both and the hole */
        expect(&s, (LockRange[]) { { 0, 49, F_WRLCK }, { 50, 160, F_RDLCK }, { 161, 199, F_WRLCK } }, 3);
        step(&s, 161, 199, F_RDLCK); /* adjacent of its type: merged */
        expect(&s, (LockRange[]) { { 0, 49, F_WRLCK }, { 50, 199, F_RDLCK } }, 2);
        step(&s, 300, LOCK_SET_EOF, F_WRLCK);
        step(&s, 200, 299, F_RDLCK); /* joins the read range, not the write one */
        expect(&s, (LockRange[]) { { 0, 49, F_WRLCK }, { 50, 299, F_RDLCK }, { 300, LOCK_SET_EOF, F_WRLCK } }, 3);
        step(&s, 0, 0, F_WRLCK); /* inside one of its type: nothing changes */
        expect(&s, (LockRange[]) { { 0, 49, F_WRLCK }, { 50, 299, F_RDLCK }, { 300, LOCK_SET_EOF, F_WRLCK } }, 3);
        step(&s, 10, 10, F_RDLCK); /* a hole of another type in the middle */
        expect(&s, (LockRange[]) { { 0, 9, F_WRLCK }, { 10, 10, F_RDLCK }, { 11, 49, F_WRLCK }, { 50, 299, F_RDLCK },
                                   { 300, LOCK_SET_EOF, F_WRLCK } },
               5);
        step(&s, 0, LOCK_SET_EOF, F_UNLCK);
        expect(&s, NULL, 0);
        step(&s, 5, 5, F_UNLCK); /* unlocking nothing */
        expect(&s, NULL, 0);
        lock_set_done(&s);
}
END_TEST

/* The type a second OFD finds for byte b (F_UNLCK: free), from the kernel and from the set. */
static short kernel_type(int probe, uint64_t b) {
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t) b, .l_len = 1 };
        ck_assert_int_eq(fcntl(probe, F_OFD_GETLK, &fl), 0);
        return fl.l_type;
}

static short set_type(const LockSet *s, uint64_t b) {
        for (size_t k = 0; k < s->n; k++)
                if (s->r[k].start <= b && b <= s->r[k].end)
                        return s->r[k].type;
        return F_UNLCK;
}

/* 2,000 random steps over 64 bytes, each taken by the kernel too: the same locks, and the set
 * stays sorted, disjoint and merged. */
START_TEST(test_matches_kernel) {
        static const short types[] = { F_RDLCK, F_WRLCK, F_UNLCK };
        /* Two open file descriptions of one unnamed file: the owner's and the probe's. */
        int fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), probe;
        char self[64];
        LockSet s = {};

        ck_assert_int_ge(fd, 0);
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        probe = open(self, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(probe, 0);
        srandom(7);
        for (int k = 0; k < 2000; k++) {
                uint64_t a = (uint64_t) (random() % 64), b = a + (uint64_t) (random() % 16);
                short t = types[random() % 3];
                struct flock fl = { .l_type = t, .l_whence = SEEK_SET, .l_start = (off_t) a, .l_len = (off_t) (b - a + 1) };
                ck_assert_int_eq(fcntl(fd, F_OFD_SETLK, &fl), 0);
                step(&s, a, b, t);
                for (uint64_t x = 0; x < 96; x++)
                        ck_assert_msg(kernel_type(probe, x) == set_type(&s, x), "step %d byte %" PRIu64, k, x);
                for (size_t j = 1; j < s.n; j++) {
                        ck_assert_uint_gt(s.r[j].start, s.r[j - 1].end);
                        ck_assert(s.r[j].start > s.r[j - 1].end + 1 || s.r[j].type != s.r[j - 1].type);
                }
        }
        lock_set_done(&s);
        close(probe);
        close(fd);
}
END_TEST

static void add_cases(Suite *s) {
        TCase *tc = tcase_create("ranges");

        tcase_add_test(tc, test_split_replace_merge);
        tcase_add_test(tc, test_matches_kernel);
        suite_add_tcase(s, tc);
}

TEST_MAIN("lock-set", add_cases)
