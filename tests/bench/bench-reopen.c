/* bench-reopen.c: what a request costs on an inode whose O_PATH fd is cached, and on one whose fd
 * the clock took back (--max-inode-fds), which re-opens it by name from its nearest ancestor that
 * holds an fd (issue 34).
 *
 * bench-reopen [N] [DEPTH]: a directory of the current filesystem (mkdtemp under /tmp: a directory
 * share, where file handles do not engage) holds two chains DEPTH directories deep with a file at
 * the bottom of each. GETATTR of the two files in turn, N times each, with the budget large
 * (every fd cached) and then with a budget of one fd, where each GETATTR re-opens its file and the
 * directories above it that the other chain's walk pushed out: DEPTH + 1 opens and statx calls. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "passthrough-bench.h"
#include "passthrough.h"

/* ns per GETATTR of the two leaves, alternating, with max_inode_fds. */
static double run(const char *dir, uint64_t max_inode_fds, long n, int depth) {
        static const FsCtx ctx = { .uid = 0, .gid = 0 };
        FsOptions o = FS_OPTIONS_DEFAULT;
        Passthrough *pt = NULL;
        uint64_t leaf[2];
        struct stat st;
        double t0, t1;

        o.shared_dir = dir;
        o.inode_file_handles = INODE_FILE_HANDLES_NEVER;
        o.max_inode_fds = max_inode_fds;
        must(passthrough_new(&pt, &o), "passthrough_new");
        for (int c = 0; c < 2; c++) {
                FsEntry e = { .nodeid = 1 };
                char name[16];
                for (int k = 0; k < depth; k++) {
                        snprintf(name, sizeof name, "%c%d", 'a' + c, k);
                        must(passthrough_ops.lookup(pt, &ctx, e.nodeid, name, &e), "lookup");
                }
                must(passthrough_ops.lookup(pt, &ctx, e.nodeid, "f", &e), "lookup f");
                leaf[c] = e.nodeid;
        }
        t0 = now_ns();
        for (long k = 0; k < 2 * n; k++)
                must(passthrough_ops.getattr(pt, &ctx, leaf[k & 1], FS_NO_FH, &st), "getattr");
        t1 = now_ns();
        pt = passthrough_free(pt);
        return (t1 - t0) / (double) (2 * n);
}

int main(int argc, char **argv) {
        char dir[] = "/tmp/bench-reopen-XXXXXX", path[512];
        long n = argc > 1 ? atol(argv[1]) : 200000;
        int depth = argc > 2 ? atoi(argv[2]) : 3;
        size_t len;
        double cached, reopened;

        if (!mkdtemp(dir))
                must(-1, "mkdtemp");
        for (int c = 0; c < 2; c++) {
                len = (size_t) snprintf(path, sizeof path, "%s", dir);
                for (int k = 0; k < depth; k++) {
                        len += (size_t) snprintf(path + len, sizeof path - len, "/%c%d", 'a' + c, k);
                        must(mkdir(path, 0755), "mkdir");
                }
                snprintf(path + len, sizeof path - len, "/f");
                must(close(must(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644), "create f")), "close");
        }
        cached = run(dir, 1000, n, depth);
        reopened = run(dir, 1, n, depth);
        printf("depth %d: GETATTR with the fd cached %.0f ns/op; re-opened (%d opens + statx) %.0f ns/op\n", depth,
               cached, depth + 1, reopened);
        snprintf(path, sizeof path, "rm -rf '%s'", dir);
        return system(path) == 0 ? 0 : 1;
}
