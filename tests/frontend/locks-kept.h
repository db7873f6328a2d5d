/* locks-kept.h: the check that the guest's locks were held across a takeover (a death or a live
 * upgrade): owner's POSIX write lock on [0, 99] through fh (a file opened for writing) and its shared
 * flock through fh_flock, both on nodeid, at path on the host. A host process and a second guest
 * owner see both held; the owner then changes its lock as its own and releases both. */
#pragma once

#include <check.h>
#include <fcntl.h>
#include <stdint.h>

#include "fuse-client.h"
#include "host-locks.h"

static inline void check_locks_kept(FeFuse *c, const char *path, uint64_t nodeid, uint64_t fh, uint64_t fh_flock,
                                    uint64_t owner, uint64_t other) {
        struct fuse_file_lock got;

        ck_assert_int_eq(test_host_lock_type(path, 0, 100), F_WRLCK);
        ck_assert_int_eq(test_host_lock_type(path, 100, 0), F_UNLCK);
        ck_assert(!test_host_flock_free(path));
        ck_assert_int_eq(fe_fuse_getlk(c, nodeid, fh, other, F_RDLCK, 50, 60, &got), 0);
        ck_assert_int_eq(got.type, F_WRLCK);
        /* The owner's lock is its own still: it changes it without conflicting with itself. */
        ck_assert_int_eq(fe_fuse_setlk(c, nodeid, fh, owner, false, F_RDLCK, 0, 99), 0);
        ck_assert_int_eq(test_host_lock_type(path, 0, 100), F_RDLCK);
        ck_assert_int_eq(fe_fuse_setlk(c, nodeid, fh, owner, false, F_UNLCK, 0, UINT64_MAX), 0);
        ck_assert_int_eq(fe_fuse_setlk(c, nodeid, fh_flock, owner, true, F_UNLCK, 0, UINT64_MAX), 0);
        ck_assert_int_eq(test_host_lock_type(path, 0, 0), F_UNLCK);
        ck_assert(test_host_flock_free(path));
}
