/* bare.c: the host system calls behind each vufs-bench workload, in a plain loop on one CPU.
 *
 * A passthrough backend cannot serve an operation faster than the system calls it must make for it;
 * this measures that ceiling on this machine so the report can say where a ratio target is capped. */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

const char *bare_describe(Workload w) {
        switch (w) {
        case WL_GETATTR:
                return "fstatat(O_PATH fd, \"\", AT_EMPTY_PATH)";
        case WL_LOOKUP:
                return "openat(O_PATH) + fstatat + close";
        case WL_OPEN:
                return "openat(O_RDONLY) + close";
        case WL_RANDREAD:
                return "pread 4 KiB, random offset";
        case WL_SEQREAD:
                return "pread 128 KiB, sequential";
        case WL_RANDWRITE:
                return "pwrite 4 KiB, random offset";
        case WL_SEQWRITE:
                return "pwrite 128 KiB, sequential";
        case WL_CREATE:
                return "openat(O_CREAT|O_EXCL) + fstat + close + unlinkat";
        case WL_READDIR:
                return "open + getdents64 + per entry openat(O_PATH) + fstat + close";
        case WL_MIX:
                return "70 % pread / 30 % pwrite 4 KiB, random";
        default:
                return "?";
        }
}

static uint64_t xs(uint64_t *s) {
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        return *s * 0x2545F4914F6CDD1Dull;
}

static int make_file(int dirfd, const char *name, uint64_t size) {
        _cleanup_free_ char *buf = malloc(BENCH_BIG_IO);
        int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

        if (fd < 0 || !buf)
                return fd < 0 ? negative_errno() : -ENOMEM;
        memset(buf, 0x5a, BENCH_BIG_IO);
        for (uint64_t off = 0; off < size; off += BENCH_BIG_IO)
                if (pwrite(fd, buf, BENCH_BIG_IO, (off_t) off) != BENCH_BIG_IO) {
                        int r = negative_errno();
                        close(fd);
                        return r;
                }
        return fd;
}

/* One operation of w; returns < 0 on failure. */
static int bare_op(Workload w, int dirfd, int pathfd, int fd, int subdir, char *buf, uint64_t size, uint64_t *rng,
                   uint64_t *seq, uint64_t n) {
        struct stat st;
        char name[32];
        int k;

        switch (w) {
        case WL_GETATTR:
                return fstatat(pathfd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
        case WL_LOOKUP:
                k = openat(dirfd, "small", O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (k < 0)
                        return -1;
                (void) fstatat(k, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
                close(k);
                return 0;
        case WL_OPEN:
                k = openat(dirfd, "small", O_RDONLY | O_CLOEXEC);
                if (k < 0)
                        return -1;
                close(k);
                return 0;
        case WL_RANDREAD:
                return pread(fd, buf, BENCH_SMALL_IO, (off_t) ((xs(rng) % (size / BENCH_SMALL_IO)) * BENCH_SMALL_IO)) ==
                                       BENCH_SMALL_IO
                               ? 0
                               : -1;
        case WL_RANDWRITE:
                return pwrite(fd, buf, BENCH_SMALL_IO, (off_t) ((xs(rng) % (size / BENCH_SMALL_IO)) * BENCH_SMALL_IO)) ==
                                       BENCH_SMALL_IO
                               ? 0
                               : -1;
        case WL_MIX: {
                off_t off = (off_t) ((xs(rng) % (size / BENCH_SMALL_IO)) * BENCH_SMALL_IO);
                ssize_t m = xs(rng) % 100 < 70 ? pread(fd, buf, BENCH_SMALL_IO, off) : pwrite(fd, buf, BENCH_SMALL_IO, off);
                return m == BENCH_SMALL_IO ? 0 : -1;
        }
        case WL_SEQREAD:
        case WL_SEQWRITE: {
                ssize_t m;
                if (*seq + BENCH_BIG_IO > size)
                        *seq = 0;
                m = w == WL_SEQREAD ? pread(fd, buf, BENCH_BIG_IO, (off_t) *seq) : pwrite(fd, buf, BENCH_BIG_IO, (off_t) *seq);
                *seq += BENCH_BIG_IO;
                return m == BENCH_BIG_IO ? 0 : -1;
        }
        case WL_CREATE:
                snprintf(name, sizeof name, "bare-%" PRIu64, n);
                k = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (k < 0)
                        return -1;
                (void) fstat(k, &st);
                close(k);
                return unlinkat(dirfd, name, 0);
        case WL_READDIR: {
                char dbuf[32768];
                long m;
                int d = openat(subdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (d < 0)
                        return -1;
                while ((m = syscall(SYS_getdents64, d, dbuf, sizeof dbuf)) > 0)
                        for (long pos = 0; pos < m;) {
                                struct {
                                        uint64_t ino;
                                        int64_t off;
                                        unsigned short reclen;
                                        unsigned char type;
                                        char name[];
                                } *de = (void *) (dbuf + pos);
                                if (!streq(de->name, ".") && !streq(de->name, "..")) {
                                        k = openat(d, de->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                                        if (k >= 0) {
                                                (void) fstatat(k, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
                                                close(k);
                                        }
                                }
                                pos += de->reclen;
                        }
                close(d);
                return m < 0 ? -1 : 0;
        }
        default:
                return -1;
        }
}

int bare_run(Workload w, const char *dir, double seconds, uint64_t file_size, BareResult *ret) {
        _cleanup_free_ char *scratch = NULL, *buf = NULL;
        _cleanup_close_ int dirfd = -1, pathfd = -1, fd = -1, subdir = -1;
        uint64_t rng = 0x1234567, seq = 0, n = 0, t0, t1, deadline;
        int r;

        if (asprintf(&scratch, "%s/bare", dir) < 0)
                return -ENOMEM;
        if (mkdir(scratch, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        dirfd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        buf = aligned_alloc(4096, BENCH_BIG_IO);
        if (dirfd < 0 || !buf)
                return dirfd < 0 ? negative_errno() : -ENOMEM;
        memset(buf, 0x3c, BENCH_BIG_IO);
        r = make_file(dirfd, "small", 4096);
        if (r < 0)
                return r;
        close(r);
        fd = make_file(dirfd, "data", file_size);
        if (fd < 0)
                return fd;
        pathfd = openat(dirfd, "small", O_PATH | O_CLOEXEC);
        if (pathfd < 0)
                return negative_errno();
        if (w == WL_READDIR) {
                if (mkdirat(dirfd, "dir1000", 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                subdir = openat(dirfd, "dir1000", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (subdir < 0)
                        return negative_errno();
                for (unsigned i = 0; i < BENCH_DIR_ENTRIES; i++) {
                        char name[16];
                        snprintf(name, sizeof name, "e%04u", i);
                        r = openat(subdir, name, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
                        if (r < 0)
                                return negative_errno();
                        close(r);
                }
        }
        /* Warm the page cache (and the dentries) before timing. */
        for (uint64_t off = 0; off < file_size; off += BENCH_BIG_IO)
                (void) !pread(fd, buf, BENCH_BIG_IO, (off_t) off);

        t0 = bench_now_ns();
        deadline = t0 + (uint64_t) (seconds * 1e9);
        do {
                for (unsigned i = 0; i < 16; i++, n++)
                        if (bare_op(w, dirfd, pathfd, fd, subdir, buf, file_size, &rng, &seq, n) < 0)
                                return negative_errno();
                t1 = bench_now_ns();
        } while (t1 < deadline);
        *ret = (BareResult) {
                .ops_s = (double) n / ((double) (t1 - t0) / 1e9),
                .ns_per_op = (double) (t1 - t0) / (double) n,
        };
        return 0;
}
