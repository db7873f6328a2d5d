/* fd-budget.c: opens that charge the fd budget, RLIMIT_NOFILE raising and the default budget. */
#include "fd-budget.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>

#include "util.h"

#define FD_RESERVE_DAEMON 256     /* fds the daemon itself may need besides guest-held ones */
#define FD_RESERVE_HOST 16384     /* file-max headroom left to the rest of the host */

int fd_budget_openat(FdBudget *b, int dirfd, const char *path, int flags, mode_t mode) {
        int fd;

        if (!fd_budget_take(b))
                return -ENFILE;
        fd = openat(dirfd, path, flags, mode);
        if (fd < 0) {
                fd = negative_errno();
                fd_budget_release(b);
        }
        return fd;
}

int fd_budget_close(FdBudget *b, int fd) {
        if (fd < 0)
                return -1;
        safe_close(fd);
        fd_budget_release(b);
        return -1;
}

static int read_u64_file(const char *path, uint64_t *ret) {
        FILE *f = fopen(path, "re");
        unsigned long long v;
        int r;

        if (!f)
                return negative_errno();
        r = fscanf(f, "%llu", &v);
        fclose(f);
        if (r != 1)
                return -EIO;
        *ret = v;
        return 0;
}

int64_t fd_budget_raise_rlimit(uint64_t want) {
        struct rlimit rl;
        uint64_t limit = want > 0 ? want : 1000000, v;

        if (read_u64_file("/proc/sys/fs/nr_open", &v) >= 0)
                limit = MIN(limit, v);
        if (read_u64_file("/proc/sys/fs/file-max", &v) >= 0 && v > FD_RESERVE_HOST)
                limit = MIN(limit, v - FD_RESERVE_HOST);
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return negative_errno();
        if (rl.rlim_cur >= limit)
                return (int64_t) rl.rlim_cur;
        if (rl.rlim_max < limit) {
                /* Raising the hard limit needs CAP_SYS_RESOURCE; without it use what we have. */
                struct rlimit n = { limit, limit };
                if (setrlimit(RLIMIT_NOFILE, &n) >= 0)
                        return (int64_t) limit;
                limit = rl.rlim_max;
        }
        rl.rlim_cur = limit;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                return negative_errno();
        return (int64_t) limit;
}

uint64_t fd_budget_default_max(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return 1000000;
        if (rl.rlim_cur <= 2 * FD_RESERVE_DAEMON)
                return rl.rlim_cur / 2;
        return rl.rlim_cur - FD_RESERVE_DAEMON;
}
