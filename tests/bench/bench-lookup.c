/* bench-lookup.c: the passthrough's LOOKUP of inodes it already holds, per call, without FUSE.
 *
 * bench-lookup [never|prefer|mandatory] [N] [child|dotdot]: a tmpfs mounted on a new directory (in a mount
 * namespace of its own, so it needs root) is the share, a mount root, where file handles engage.
 * One file, one directory with a subdirectory; then N lookups of the file by name and N of ".." of
 * the subdirectory, timed separately (or only the kind named). Under valgrind --tool=callgrind, run
 * one kind with N and 2N: the difference over N is the instructions of one lookup of that kind.
 * Exit 77 when not root. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "passthrough-bench.h"
#include "passthrough.h"

int main(int argc, char **argv) {
        static const FsCtx ctx = { .uid = 0, .gid = 0 };
        char dir[] = "/tmp/bench-lookup-XXXXXX", path[64];
        FsOptions o = FS_OPTIONS_DEFAULT;
        Passthrough *pt = NULL;
        FsEntry f, d, e, x;
        long n = argc > 2 ? atol(argv[2]) : 1000000;
        const char *only = argc > 3 ? argv[3] : "";
        long n_child = strcmp(only, "dotdot") == 0 ? 0 : n, n_dotdot = strcmp(only, "child") == 0 ? 0 : n;
        double t0, t1, t2;

        if (geteuid() != 0) {
                fprintf(stderr, "bench-lookup: needs root (a tmpfs mount)\n");
                return 77;
        }
        o.inode_file_handles = argc > 1 && strcmp(argv[1], "never") == 0    ? INODE_FILE_HANDLES_NEVER
                               : argc > 1 && strcmp(argv[1], "prefer") == 0 ? INODE_FILE_HANDLES_PREFER
                                                                            : INODE_FILE_HANDLES_MANDATORY;
        must(unshare(CLONE_NEWNS), "unshare");
        must(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "making / private");
        if (!mkdtemp(dir))
                must(-1, "mkdtemp");
        must(mount("tmpfs", dir, "tmpfs", 0, NULL), "mount tmpfs");
        snprintf(path, sizeof path, "%s/f", dir);
        must(close(must(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644), "create f")), "close");
        snprintf(path, sizeof path, "%s/d", dir);
        must(mkdir(path, 0755), "mkdir d");
        snprintf(path, sizeof path, "%s/d/e", dir);
        must(mkdir(path, 0755), "mkdir d/e");

        o.shared_dir = dir;
        must(passthrough_new(&pt, &o), "passthrough_new");
        must(passthrough_ops.lookup(pt, &ctx, 1, "f", &f), "lookup f");
        must(passthrough_ops.lookup(pt, &ctx, 1, "d", &d), "lookup d");
        must(passthrough_ops.lookup(pt, &ctx, d.nodeid, "e", &e), "lookup e");

        t0 = now_ns();
        for (long k = 0; k < n_child; k++)
                must(passthrough_ops.lookup(pt, &ctx, 1, "f", &x), "lookup f");
        t1 = now_ns();
        for (long k = 0; k < n_dotdot; k++)
                must(passthrough_ops.lookup(pt, &ctx, e.nodeid, "..", &x), "lookup ..");
        t2 = now_ns();
        printf("handles %s: %ld of a child, %.0f ns/op; %ld of \"..\", %.0f ns/op\n",
               passthrough_uses_handles(pt) ? "on" : "off", n_child, n_child ? (t1 - t0) / (double) n_child : 0.0,
               n_dotdot, n_dotdot ? (t2 - t1) / (double) n_dotdot : 0.0);
        pt = passthrough_free(pt);
        (void) umount2(dir, MNT_DETACH);
        (void) rmdir(dir);
        return 0;
}
