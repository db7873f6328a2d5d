/* vufs-guest-locks.c: the lock part of the survival demonstration (tests/vm/test-guest-survive.sh):
 * guest processes that hold a POSIX and an OFD lock on files in the share for the whole run, and
 * one that probes them from outside every 100 ms. Static: the guest is a bare initramfs.
 *
 * Usage:
 *   vufs-guest-locks hold posix|ofd FILE STOPFILE
 *       Opens FILE (created if missing), takes a write lock on all of it (F_SETLK or F_OFD_SETLK),
 *       prints "held KIND FILE" and waits until STOPFILE exists (a file outside the share); then
 *       releases the lock and closes FILE, both of which must succeed: a lock whose open file was
 *       lost on the host side fails there. Exit 0, or 1 with the failed step on stderr.
 *   vufs-guest-locks probe POSIXFILE OFDFILE STOPFILE [INTERVAL_MS]
 *       Until STOPFILE exists, every INTERVAL_MS (default 100): opens each file anew (so that
 *       nothing the probe holds is older than the probe) and asks whether a write lock on all of it
 *       could be taken (F_GETLK on POSIXFILE, F_OFD_GETLK on OFDFILE); the answer must be "held
 *       by a write lock". Prints every miss or error (the first 20 of each kind), then
 *       "probe: N probes, M missed, E errors, longest gap between probes G ms"; exit 0 when M and E
 *       are 0 and N > 0, 1 otherwise. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../conformance/probe-util.h"

/* Misses or errors printed one by one; the rest only counted. */
#define REPORT_MAX 20

static bool stop_requested(const char *stopfile) {
        return access(stopfile, F_OK) == 0;
}

static struct flock whole_file(short type) {
        /* l_pid must be 0 for the OFD commands; whole file: start 0, length 0. */
        return (struct flock) { .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0, .l_pid = 0 };
}

static int hold(const char *kind, const char *path, const char *stopfile) {
        bool ofd = strcmp(kind, "ofd") == 0;
        int cmd = ofd ? F_OFD_SETLK : F_SETLK;
        struct flock fl = whole_file(F_WRLCK);
        int fd;

        if (!ofd && strcmp(kind, "posix") != 0) {
                fprintf(stderr, "vufs-guest-locks: hold: unknown kind %s (posix or ofd)\n", kind);
                return 2;
        }
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
                fprintf(stderr, "vufs-guest-locks: hold %s: open %s: %s\n", kind, path, ename(errno));
                return 1;
        }
        if (fcntl(fd, cmd, &fl) < 0) {
                fprintf(stderr, "vufs-guest-locks: hold %s: lock %s: %s\n", kind, path, ename(errno));
                return 1;
        }
        printf("held %s %s\n", kind, path);
        fflush(stdout);
        while (!stop_requested(stopfile))
                msleep(100);
        fl = whole_file(F_UNLCK);
        if (fcntl(fd, cmd, &fl) < 0) {
                fprintf(stderr, "vufs-guest-locks: hold %s: unlock %s at the end: %s\n", kind, path, ename(errno));
                return 1;
        }
        if (close(fd) < 0) {
                fprintf(stderr, "vufs-guest-locks: hold %s: close %s at the end: %s\n", kind, path, ename(errno));
                return 1;
        }
        printf("released %s %s\n", kind, path);
        return 0;
}

/* One look at path: 0 held, 1 not held (printed), -errno on an error (printed). */
static int probe_one(const char *path, bool ofd, long long t, unsigned *miss_reports, unsigned *error_reports) {
        struct flock fl = whole_file(F_WRLCK);
        const char *what = ofd ? "F_OFD_GETLK" : "F_GETLK";
        int fd, r = 0;

        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
                r = -errno;
        else if (fcntl(fd, ofd ? F_OFD_GETLK : F_GETLK, &fl) < 0)
                r = -errno;
        else if (fl.l_type != F_WRLCK)
                r = 1;
        if (fd >= 0 && close(fd) < 0 && r == 0)
                r = -errno;
        if (r > 0 && (*miss_reports)++ < REPORT_MAX)
                fprintf(stderr, "vufs-guest-locks: probe at %lld ms: %s %s: not held (l_type %d)\n", t, what, path,
                        fl.l_type);
        else if (r < 0 && (*error_reports)++ < REPORT_MAX)
                fprintf(stderr, "vufs-guest-locks: probe at %lld ms: %s %s: %s\n", t, what, path, ename(-r));
        return r;
}

static int probe(const char *posix_path, const char *ofd_path, const char *stopfile, int interval_ms) {
        unsigned long probes = 0, missed = 0, errors = 0;
        unsigned miss_reports = 0, error_reports = 0;
        long long start = now_ms(), last = start, gap = 0;

        if (interval_ms <= 0)
                interval_ms = 100;
        while (!stop_requested(stopfile)) {
                long long t = now_ms();

                for (int k = 0; k < 2; k++) {
                        bool ofd = k == 1;
                        int r = probe_one(ofd ? ofd_path : posix_path, ofd, t - start, &miss_reports, &error_reports);

                        probes++;
                        if (r > 0)
                                missed++;
                        else if (r < 0)
                                errors++;
                }
                if (t - last > gap)
                        gap = t - last;
                last = t;
                msleep(interval_ms);
        }
        printf("probe: %lu probes, %lu missed, %lu errors, longest gap between probes %lld ms\n", probes, missed,
               errors, gap);
        return probes > 0 && missed == 0 && errors == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
        if (argc == 5 && strcmp(argv[1], "hold") == 0)
                return hold(argv[2], argv[3], argv[4]);
        if ((argc == 5 || argc == 6) && strcmp(argv[1], "probe") == 0)
                return probe(argv[2], argv[3], argv[4], argc == 6 ? atoi(argv[5]) : 100);
        fprintf(stderr, "usage: vufs-guest-locks hold posix|ofd FILE STOPFILE\n"
                        "       vufs-guest-locks probe POSIXFILE OFDFILE STOPFILE [INTERVAL_MS]\n");
        return 2;
}
