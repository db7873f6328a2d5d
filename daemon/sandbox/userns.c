/* userns.c: writing the maps of the daemon's user namespace, and becoming its root. */
#include "userns.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

bool userns_wanted(const IdMapList *uid_map, const IdMapList *gid_map) {
        return geteuid() != 0 || uid_map->n > 0 || gid_map->n > 0;
}

bool id_map_contains(const IdMapList *l, uint32_t inside) {
        for (unsigned i = 0; i < l->n; i++)
                if (inside >= l->e[i].inside && (uint64_t)inside < (uint64_t)l->e[i].inside + l->e[i].count)
                        return true;
        return false;
}

int userns_format_map(const IdMapList *l, uint32_t own, char *buf, size_t size) {
        size_t len = 0;

        if (size == 0)
                return -ENOBUFS;
        buf[0] = '\0';
        if (l->n == 0) {
                int n = snprintf(buf, size, "0 %" PRIu32 " 1\n", own);
                return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
        }
        for (unsigned i = 0; i < l->n; i++) {
                int n = snprintf(buf + len, size - len, "%" PRIu32 " %" PRIu32 " %" PRIu32 "\n", l->e[i].inside,
                                 l->e[i].outside, l->e[i].count);
                if (n < 0 || (size_t)n >= size - len)
                        return -ENOBUFS;
                len += (size_t)n;
        }
        return 0;
}

/* The caller's own id alone needs no helper: the kernel lets a user map itself (the one line it
 * accepts from an unprivileged writer). Root may write any map. */
static bool map_writable_directly(const IdMapList *l, uint32_t own) {
        if (geteuid() == 0 || l->n == 0)
                return true;
        return l->n == 1 && l->e[0].outside == own && l->e[0].count == 1;
}

static int write_proc_file(pid_t pid, const char *name, const char *text) {
        char path[64];
        _cleanup_close_ int fd = -1;
        size_t len = strlen(text);
        ssize_t n;

        snprintf(path, sizeof path, "/proc/%i/%s", (int)pid, name);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* One write: the kernel takes a map only whole, once. */
        n = write(fd, text, len);
        if (n < 0)
                return -errno;
        return (size_t)n == len ? 0 : -EIO;
}

/* newuidmap PID INSIDE OUTSIDE COUNT...: the setuid helper checks the ranges against /etc/subuid
 * (newgidmap: /etc/subgid) for the calling user and writes the map. */
static int run_helper(const char *helper, pid_t pid, const IdMapList *l) {
        char args[3 * ID_MAP_MAX_ENTRIES][12], pidbuf[16];
        char *argv[2 + 3 * ID_MAP_MAX_ENTRIES + 1];
        unsigned n = 0;
        pid_t h;
        int status;

        snprintf(pidbuf, sizeof pidbuf, "%i", (int)pid);
        argv[n++] = (char *)helper;
        argv[n++] = pidbuf;
        for (unsigned i = 0; i < l->n; i++) {
                snprintf(args[3 * i], sizeof args[0], "%" PRIu32, l->e[i].inside);
                snprintf(args[3 * i + 1], sizeof args[0], "%" PRIu32, l->e[i].outside);
                snprintf(args[3 * i + 2], sizeof args[0], "%" PRIu32, l->e[i].count);
                argv[n++] = args[3 * i];
                argv[n++] = args[3 * i + 1];
                argv[n++] = args[3 * i + 2];
        }
        argv[n] = NULL;

        h = fork();
        if (h < 0)
                return -errno;
        if (h == 0) {
                /* The helper's own messages (which range /etc/subuid lacks) go to our stderr. */
                execvp(helper, argv);
                fprintf(stderr, "vufsd: cannot run %s: %s\n", helper, strerror(errno));
                _exit(127);
        }
        while (waitpid(h, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
                return -ENOENT;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EPERM;
        return 0;
}

static int write_one_map(pid_t pid, bool gid, const IdMapList *l) {
        const char *option = gid ? "--gid-map" : "--uid-map";
        const char *helper = gid ? "newgidmap" : "newuidmap";
        const char *sub = gid ? "/etc/subgid" : "/etc/subuid";
        uint32_t own = gid ? (uint32_t)getegid() : (uint32_t)geteuid();
        char text[ID_MAP_MAX_ENTRIES * 36 + 1];
        int r;

        if (map_writable_directly(l, own)) {
                /* An unprivileged writer of gid_map must first give up setgroups() in the
                 * namespace (otherwise a user could drop a group that denies it access). */
                if (gid && geteuid() != 0) {
                        r = write_proc_file(pid, "setgroups", "deny");
                        if (r < 0)
                                return log_error_errno(r, "%s: cannot write /proc/%i/setgroups: %m", option, (int)pid);
                }
                r = userns_format_map(l, own, text, sizeof text);
                if (r >= 0)
                        r = write_proc_file(pid, gid ? "gid_map" : "uid_map", text);
                if (r < 0)
                        return log_error_errno(r, "%s: cannot write the user namespace's %s: %m", option,
                                               gid ? "gid_map" : "uid_map");
                return 0;
        }
        r = run_helper(helper, pid, l);
        if (r == -ENOENT)
                return log_error_errno(r,
                                       "%s: mapping more than the caller's own id as an unprivileged user needs "
                                       "%s (Debian package uidmap)",
                                       option, helper);
        if (r < 0)
                return log_error_errno(r,
                                       "%s: %s refused the map (it allows only ranges %s grants this user; "
                                       "see its message above)",
                                       option, helper, sub);
        return 0;
}

int userns_write_maps(pid_t child, const IdMapList *uid_map, const IdMapList *gid_map) {
        int r;

        /* Each map can be written once, by the supervisor (the namespace's owner, so it has
         * CAP_SETUID/CAP_SETGID there); gid first, the order shadow's tools and the Rust virtiofsd
         * use. */
        r = write_one_map(child, true, gid_map);
        if (r < 0)
                return r;
        return write_one_map(child, false, uid_map);
}

int userns_become_root(void) {
        /* gid first: after setresuid() to a non-root id the gid could no longer change. With the
         * default maps this changes nothing (the caller's ids are 0 already); with libvirt's maps
         * the daemon was the overflow id until now. Going to uid 0 keeps the permitted set and
         * fills the effective one again (capabilities(7), "Effect of user ID changes"). */
        if (setresgid(0, 0, 0) < 0)
                return log_error_errno(errno, "Cannot become gid 0 in the user namespace: %m");
        if (setresuid(0, 0, 0) < 0)
                return log_error_errno(errno, "Cannot become uid 0 in the user namespace: %m");
        return 0;
}

bool userns_setgroups_denied(void) {
        char buf[16] = {};
        _cleanup_close_ int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);

        if (fd < 0 || read(fd, buf, sizeof buf - 1) <= 0)
                return false;
        return strncmp(buf, "deny", 4) == 0;
}
