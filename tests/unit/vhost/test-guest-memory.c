/* test-guest-memory.c: region mapping checks and bounds-checked translation. */
#include <check.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest-memory.h"
#include "test-main.h"

static int make_memfd(size_t size) {
        int fd = memfd_create("test-guest", MFD_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t) size), 0);
        return fd;
}

START_TEST(test_region_checks) {
        _cleanup_close_ int fd = make_memfd(1 << 20);
        GuestRegion *g = NULL;

        ck_assert_int_eq(guest_region_new(&g, fd, 0, 0, 0, 0), -EINVAL);
        ck_assert_int_eq(guest_region_new(&g, fd, UINT64_MAX - 10, 4096, 0, 0), -EINVAL);
        ck_assert_int_eq(guest_region_new(&g, fd, 0, 4096, UINT64_MAX - 10, 0), -EINVAL);
        ck_assert_int_eq(guest_region_new(&g, fd, 0, 4096, 0, UINT64_MAX - 10), -EINVAL);
        /* larger than the file: would SIGBUS on access */
        ck_assert_int_eq(guest_region_new(&g, fd, 0, 2 << 20, 0, 0), -ERANGE);
        ck_assert_int_eq(guest_region_new(&g, fd, 0, 1 << 20, 0, 4096), -ERANGE);
        /* not a file */
        {
                int p[2];
                ck_assert_int_eq(pipe(p), 0);
                ck_assert_int_eq(guest_region_new(&g, p[0], 0, 4096, 0, 0), -EBADF);
                close(p[0]);
                close(p[1]);
        }
        ck_assert_int_eq(guest_region_new(&g, fd, 0x1000, 0x8000, 0x7f0000001000, 0x1000), 0);
        guest_region_unref(g);
}
END_TEST

START_TEST(test_translate_two_regions) {
        _cleanup_close_ int fd = make_memfd(0x40000);
        GuestRegion *lo, *hi;
        GuestMemory *m0, *m1, *m2, *m3;
        struct iovec iov[4];
        uint8_t *p;

        /* Like QEMU below 1 MiB: [0, 0xa0000) and a hole, here scaled down. */
        ck_assert_int_eq(guest_memory_new(&m0), 0);
        ck_assert_int_eq(guest_region_new(&lo, fd, 0, 0x10000, 0x100000, 0), 0);
        ck_assert_int_eq(guest_region_new(&hi, fd, 0x10000, 0x30000, 0x110000, 0x10000), 0);
        ck_assert_int_eq(guest_memory_add(m0, lo, &m1), 0);
        ck_assert_int_eq(guest_memory_add(m1, hi, &m2), 0);
        ck_assert_int_eq(guest_memory_add(m2, lo, &m3), -EEXIST);

        memcpy(hi->host, "HI", 2);
        memcpy(lo->host + 0xfffe, "LO", 2);
        /* Straddling the two regions gives two iovecs. */
        ck_assert_int_eq(guest_memory_gpa_to_iov(m2, 0xfffe, 4, iov, 4), 2);
        ck_assert_mem_eq(iov[0].iov_base, "LO", 2);
        ck_assert_mem_eq(iov[1].iov_base, "HI", 2);
        ck_assert_int_eq(guest_memory_gpa_to_iov(m2, 0xfffe, 4, iov, 1), -E2BIG);
        /* Past the end, wrapping, and a zero length. */
        ck_assert_int_eq(guest_memory_gpa_to_iov(m2, 0x3fff0, 0x20, iov, 4), -EFAULT);
        ck_assert_int_eq(guest_memory_gpa_to_iov(m2, UINT64_MAX - 1, 4, iov, 4), -EFAULT);
        ck_assert_int_eq(guest_memory_gpa_to_iov(m2, 0x5000, 0, iov, 4), 0);
        /* gpa_to_ptr needs one region. */
        ck_assert_ptr_null(guest_memory_gpa_to_ptr(m2, 0xfffe, 4));
        p = guest_memory_gpa_to_ptr(m2, 0x10000, 2);
        ck_assert_ptr_nonnull(p);
        ck_assert_mem_eq(p, "HI", 2);
        /* Frontend virtual addresses translate through uaddr. */
        p = guest_memory_qva_to_ptr(m2, 0x110000, 2);
        ck_assert_ptr_eq(p, hi->host);
        ck_assert_ptr_null(guest_memory_qva_to_ptr(m2, 0x10000, 2));
        ck_assert_ptr_null(guest_memory_qva_to_ptr(m2, 0x13fff0, 0x20));

        /* Removing needs an exact match; the old snapshot keeps working. */
        ck_assert_int_eq(guest_memory_remove(m2, 0x10000, 0x1000, 0x110000, &m3), -ENOENT);
        ck_assert_int_eq(guest_memory_remove(m2, 0x10000, 0x30000, 0x110000, &m3), 0);
        ck_assert_int_eq(guest_memory_gpa_to_iov(m3, 0x10000, 2, iov, 4), -EFAULT);
        guest_region_unref(lo);
        guest_region_unref(hi);
        guest_memory_unref(m2);
        guest_memory_unref(m1);
        p = guest_memory_gpa_to_ptr(m3, 0xfffe, 2);
        ck_assert_mem_eq(p, "LO", 2);
        guest_memory_unref(m3);
        guest_memory_unref(m0);
}
END_TEST

START_TEST(test_slots_limit) {
        _cleanup_close_ int fd = make_memfd(GUEST_MEMORY_MAX_REGIONS * 4096 + 4096);
        GuestMemory *m;

        ck_assert_int_eq(guest_memory_new(&m), 0);
        for (unsigned i = 0; i <= GUEST_MEMORY_MAX_REGIONS; i++) {
                GuestRegion *g;
                GuestMemory *n;
                ck_assert_int_eq(guest_region_new(&g, fd, i * 4096ULL, 4096, 0x100000 + i * 4096ULL, i * 4096ULL), 0);
                if (i < GUEST_MEMORY_MAX_REGIONS) {
                        ck_assert_int_eq(guest_memory_add(m, g, &n), 0);
                        guest_memory_unref(m);
                        m = n;
                } else
                        ck_assert_int_eq(guest_memory_add(m, g, &n), -E2BIG);
                guest_region_unref(g);
        }
        guest_memory_unref(m);
}
END_TEST

/* The frontend shrinks the file behind a region (a memfd without seals, a tmpfs or hugetlbfs file):
 * our next access there must not kill us with SIGBUS. The page reads as zeros, stores go nowhere
 * the guest sees, and the fault is counted for the device. Before the fix: the test process died
 * of SIGBUS. */
START_TEST(test_truncated_file_survived) {
        _cleanup_close_ int fd = make_memfd(4 * 4096);
        GuestRegion *g = NULL;
        volatile uint8_t *p;
        uint64_t before;

        ck_assert_int_eq(guest_region_new(&g, fd, 0, 4 * 4096, 0x7f0000000000, 0), 0);
        p = g->host;
        p[0] = 1;
        p[3 * 4096] = 2;
        ck_assert_int_eq(ftruncate(fd, 4096), 0);
        before = guest_memory_faults();
        ck_assert_uint_eq(p[0], 1);         /* still in the file */
        ck_assert_uint_eq(p[3 * 4096], 0);  /* gone: a zero page now */
        p[3 * 4096 + 8] = 7;                /* and writable */
        ck_assert_uint_eq(p[3 * 4096 + 8], 7);
        ck_assert_uint_eq(guest_memory_faults(), before + 1);
        guest_region_unref(g);
}
END_TEST

/* A SIGBUS outside guest memory is not ours to hide: the process dies of it as it would have (by
 * SIGBUS, or by SIGABRT from a sanitizer's handler that was there first and reports it). */
START_TEST(test_other_sigbus_still_fatal) {
        int st;
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd = memfd_create("guest", MFD_CLOEXEC), other = memfd_create("other", MFD_CLOEXEC);
                GuestRegion *g = NULL;
                volatile uint8_t *q;

                if (fd < 0 || other < 0 || ftruncate(fd, 4096) < 0 || ftruncate(other, 2 * 4096) < 0)
                        _exit(10);
                if (guest_region_new(&g, fd, 0, 4096, 0x7f0000000000, 0) < 0) /* handler installed */
                        _exit(11);
                q = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, other, 0);
                if ((void *) q == MAP_FAILED || ftruncate(other, 0) < 0)
                        _exit(12);
                (void) q[4096]; /* SIGBUS, not guest memory */
                _exit(0);       /* swallowed */
        }
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFSIGNALED(st) && (WTERMSIG(st) == SIGBUS || WTERMSIG(st) == SIGABRT),
                      "a SIGBUS outside guest memory did not kill the process (status 0x%x)", st);
}
END_TEST

int main(void) {
        Suite *s = suite_create("guest-memory");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_region_checks);
        tcase_add_test(tc, test_translate_two_regions);
        tcase_add_test(tc, test_slots_limit);
        tcase_add_test(tc, test_truncated_file_survived);
        tcase_add_test(tc, test_other_sigbus_still_fatal);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
