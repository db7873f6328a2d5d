/* host-locks.h: the locks on a share's file as a process on the host sees them, through open file
 * descriptions of its own (what vufsd holds for a guest is the host's lock state too). */
#pragma once

#include <check.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/file.h>
#include <unistd.h>

/* The type of the lock that keeps a host process from write-locking [start, start + len) of path
 * (len 0: to the end), F_UNLCK when nothing does. */
static inline short test_host_lock_type(const char *path, off_t start, off_t len) {
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
        int fd = open(path, O_RDWR | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fcntl(fd, F_OFD_GETLK, &fl), 0);
        close(fd);
        return fl.l_type;
}

/* Whether a host process could flock(LOCK_EX) path now. */
static inline bool test_host_flock_free(const char *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC), r;

        ck_assert_int_ge(fd, 0);
        r = flock(fd, LOCK_EX | LOCK_NB);
        close(fd);
        return r == 0;
}
