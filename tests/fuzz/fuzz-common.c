/* fuzz-common.c: the fuzz targets' shared directory and logging setup. */
#include "fuzz-common.h"

#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <sys/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "log.h"

void fuzz_quiet_logging(void) {
        log_set_max_level(getenv("VUFSD_FUZZ_VERBOSE") ? LOG_DEBUG : LOG_ERR);
}

static void put_file(const char *dir, const char *name, const char *content) {
        char path[512];
        int fd;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                abort();
        if (write(fd, content, strlen(content)) < 0)
                abort();
        close(fd);
}

/* In the working directory (run-fuzz.sh removes old ones), or /tmp when that is not writable. */
static char top[256];
static char share[64];

static void populate(const char *dir) {
        char path[512];

        put_file(dir, "file", "hello, fuzzer\n");
        snprintf(path, sizeof path, "%s/dir", dir);
        (void) mkdir(path, 0755);
        put_file(path, "inner", "inner file\n");
        snprintf(path, sizeof path, "%s/link", dir);
        (void) symlink("file", path);
        snprintf(path, sizeof path, "%s/escape", dir);
        (void) symlink("/etc/passwd", path);
        snprintf(path, sizeof path, "%s/fifo", dir);
        (void) mkfifo(path, 0644);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        if (ftw->level > 0)
                (void) remove(path);
        return 0;
}

void fuzz_reset_shared_dir(void) {
        if (!share[0])
                return;
        (void) chmod(share, 0755);
        (void) nftw(share, remove_one, 16, FTW_DEPTH | FTW_PHYS);
        populate(share);
}

const char *fuzz_shared_dir(void) {
        if (share[0])
                return share;
        snprintf(top, sizeof top, "fuzz-share.XXXXXX");
        if (!mkdtemp(top)) {
                snprintf(top, sizeof top, "/tmp/vufsd-fuzz.XXXXXX");
                if (!mkdtemp(top))
                        abort();
        }
        snprintf(share, sizeof share, "%s/share", top);
        if (mkdir(share, 0755) < 0)
                abort();
        populate(share);
        return share;
}

void fuzz_confine(void) {
        if (!share[0] || geteuid() != 0 || getenv("VUFSD_FUZZ_NO_CHROOT"))
                return;
        /* top becomes "/": the share is /share inside. LeakSanitizer reads /proc at exit: a private
         * mount namespace gives the chroot a /proc next to (not inside) the share. */
        {
                char proc[300];
                snprintf(proc, sizeof proc, "%s/proc", top);
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                    mkdir(proc, 0555) < 0 || mount("/proc", proc, NULL, MS_BIND | MS_REC, NULL) < 0)
                        abort();
        }
        if (chroot(top) < 0)
                abort();
        snprintf(share, sizeof share, "/share");
}
