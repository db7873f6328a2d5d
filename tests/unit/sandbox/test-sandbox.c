/* test-sandbox.c: the sandbox, capabilities and seccomp of a running vufsd (read from /proc), the
 * --modcaps parser, the notification relay, and failing closed. Needs root (skips otherwise). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <dirent.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include "capabilities.h"
#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

#define BIT(c) (UINT64_C(1) << (c))
/* Without --allow-privileged-files neither MKNOD nor SETFCAP: a taken-over daemon could otherwise
 * make a block device node of a host disk in the share and open it (chroot mode has no nodev
 * mount), or give a program in it file capabilities. */
#define DEFAULT_CAPS                                                                                                  \
        (BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FOWNER) | BIT(CAP_FSETID) | BIT(CAP_SETGID) |               \
         BIT(CAP_SETUID))
#define PRIVILEGED_FILES_CAPS (DEFAULT_CAPS | BIT(CAP_MKNOD) | BIT(CAP_SETFCAP))

static FeHarness *h;

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

static void teardown(void) {
        (void) umount2(h->share, MNT_DETACH); /* test_file_handle_caps' tmpfs, if any */
        h = fe_harness_free(h);
}

/* ---- --modcaps ---- */

START_TEST(test_modcaps) {
        uint64_t m = capabilities_default(false);

        ck_assert_uint_eq(m, DEFAULT_CAPS);
        m = capabilities_default(true);
        ck_assert_uint_eq(m, PRIVILEGED_FILES_CAPS);
        ck_assert_int_eq(capabilities_modify(&m, "-mknod:+sys_nice"), 0);
        ck_assert_uint_eq(m, (PRIVILEGED_FILES_CAPS & ~BIT(CAP_MKNOD)) | BIT(CAP_SYS_NICE));
        ck_assert_int_eq(capabilities_modify(&m, "+CAP_MKNOD,-Cap_Sys_Nice"), 0);
        ck_assert_uint_eq(m, PRIVILEGED_FILES_CAPS);
        ck_assert_int_eq(capabilities_modify(&m, "mknod"), -EINVAL);
        ck_assert_int_eq(capabilities_modify(&m, "+no_such_cap"), -EINVAL);
        ck_assert_uint_eq(m, PRIVILEGED_FILES_CAPS); /* unchanged on error */
        ck_assert_int_eq(capability_from_name("setfcap"), CAP_SETFCAP);
        ck_assert_str_eq(capability_to_name(CAP_DAC_OVERRIDE), "dac_override");
}
END_TEST

/* ---- the running daemon ---- */

/* The sandboxed daemon is the supervisor's only child. */
static pid_t first_child(pid_t supervisor) {
        char path[64], buf[256];
        FILE *f;
        pid_t child = 0;

        snprintf(path, sizeof path, "/proc/%i/task/%i/children", (int) supervisor, (int) supervisor);
        f = fopen(path, "re");
        if (!f)
                return 0;
        if (fgets(buf, sizeof buf, f))
                child = (pid_t) atoi(buf);
        fclose(f);
        return child;
}

static bool status_field(pid_t pid, const char *name, uint64_t *ret);

/* The sandboxed child of the supervisor, once it has locked itself down (its seccomp filter is
 * the last step before serving), or after 10 s whatever child there is (0: none), for the
 * caller's checks to fail on. The socket exists before the fork (launchers wait for it), so a
 * test that saw the socket may be ahead of the child. */
static pid_t worker_of(pid_t supervisor) {
        pid_t child = 0;

        for (unsigned i = 0; i < 1000; i++) {
                uint64_t mode = 0;

                child = first_child(supervisor);
                if (child > 0 && status_field(child, "Seccomp", &mode) && mode == 2)
                        return child;
                usleep(10 * 1000);
        }
        return child;
}

/* A "Name:\tvalue" line of /proc/PID/status, as a number (hex for the capability sets). */
static bool status_field(pid_t pid, const char *name, uint64_t *ret) {
        char path[64], line[256];
        size_t n = strlen(name);
        bool found = false;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%i/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        while (!found && fgets(line, sizeof line, f))
                if (strncmp(line, name, n) == 0 && line[n] == ':') {
                        *ret = strtoull(line + n + 1, NULL, strncmp(name, "Cap", 3) == 0 ? 16 : 10);
                        found = true;
                }
        fclose(f);
        return found;
}

static uint64_t field(pid_t pid, const char *name) {
        uint64_t v = 0;
        ck_assert_msg(status_field(pid, name, &v), "no %s in /proc/%i/status", name, (int) pid);
        return v;
}

static void assert_same_ns(pid_t a, pid_t b, const char *ns, bool same) {
        char pa[64], pb[64];
        struct stat sa, sb;

        snprintf(pa, sizeof pa, "/proc/%i/ns/%s", (int) a, ns);
        snprintf(pb, sizeof pb, "/proc/%i/ns/%s", (int) b, ns);
        ck_assert_int_eq(stat(pa, &sa), 0);
        ck_assert_int_eq(stat(pb, &sb), 0);
        ck_assert_msg((sa.st_ino == sb.st_ino) == same, "%s namespace of %i and %i: expected %s", ns, (int) a,
                      (int) b, same ? "same" : "different");
}

/* The socket listens before the lockdown completes (the lockdown is the last step before the main
 * loop): wait for the filter to appear. */
static void wait_locked(pid_t pid) {
        uint64_t v = 0;
        for (int i = 0; i < 500 && !(status_field(pid, "Seccomp", &v) && v == 2); i++)
                usleep(10000);
}

/* Every thread of pid has the filter, no-new-privs and exactly the expected capabilities. */
static void assert_locked_down(pid_t pid, uint64_t caps) {
        wait_locked(pid);
        ck_assert_uint_eq(field(pid, "Seccomp"), 2);
        ck_assert_uint_eq(field(pid, "NoNewPrivs"), 1);
        ck_assert_msg(field(pid, "CapEff") == caps, "CapEff %" PRIx64 " != %" PRIx64, field(pid, "CapEff"), caps);
        ck_assert_uint_eq(field(pid, "CapPrm"), caps);
        ck_assert_uint_eq(field(pid, "CapBnd"), caps);
        ck_assert_uint_eq(field(pid, "CapInh"), 0);
        ck_assert_uint_eq(field(pid, "CapAmb"), 0);
}

static void assert_root_is_share(pid_t pid) {
        char path[64];
        struct stat root, share;

        snprintf(path, sizeof path, "/proc/%i/root", (int) pid);
        ck_assert_int_eq(stat(path, &root), 0);
        ck_assert_int_eq(stat(h->share, &share), 0);
        ck_assert_msg(root.st_dev == share.st_dev && root.st_ino == share.st_ino,
                      "the daemon's root is not the shared directory");
}

/* ---- what a taken-over process could reach through the fds it holds ---- */

/* Run in a child: the fds of pid, opened through /proc/PID/fd (the same file, and for
 * directories the same mount, as the process holds), then resolved with pid's root as our root,
 * as pid itself would resolve them. Writes a description of the first problem to err_fd. */
static int check_fds_as(pid_t pid, bool sandboxed, int err_fd) {
        char path[64], msg[512];
        int fds[256], nums[256], n = 0, root;
        struct stat host_root;
        struct dirent *de;
        DIR *d;

        if (stat("/", &host_root) < 0)
                return 2;
        snprintf(path, sizeof path, "/proc/%i/fd", (int) pid);
        d = opendir(path);
        if (!d)
                return 3;
        while ((de = readdir(d)) && n < (int) ELEMENTSOF(fds)) {
                char p2[352];
                int fd;
                if (de->d_name[0] == '.')
                        continue;
                snprintf(p2, sizeof p2, "%s/%s", path, de->d_name);
                fd = open(p2, O_PATH | O_CLOEXEC);
                if (fd < 0)
                        continue; /* sockets, anonymous inodes: no path to walk */
                nums[n] = atoi(de->d_name);
                fds[n++] = fd;
        }
        closedir(d);
        if (n == 0) { /* a process that is gone holds nothing: that proves nothing */
                snprintf(msg, sizeof msg, "no fds of %i could be opened", (int) pid);
                (void) !write(err_fd, msg, strlen(msg));
                return 5;
        }
        snprintf(path, sizeof path, "/proc/%i/root", (int) pid);
        root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0 || fchdir(root) < 0 || chroot(".") < 0 || chdir("/") < 0) {
                snprintf(msg, sizeof msg, "cannot take the root of %i: %m", (int) pid);
                (void) !write(err_fd, msg, strlen(msg));
                return 4;
        }
        for (int i = 0; i < n; i++) {
                char up[256] = "", target[320];
                struct statfs sf;
                struct stat st, dotdot, top;

                if (fstatfs(fds[i], &sf) < 0 || fstat(fds[i], &st) < 0)
                        continue;
                /* procfs: only a directory that is its own parent (the fd directory as the root of
                 * a mount of its own); "..", "../..", ... from anything else reach /proc/sys. */
                if (sf.f_type == PROC_SUPER_MAGIC && (!S_ISDIR(st.st_mode) || fstatat(fds[i], "..", &dotdot, 0) < 0 ||
                                                      dotdot.st_ino != st.st_ino || dotdot.st_dev != st.st_dev)) {
                        snprintf(msg, sizeof msg, "fd %d of %i is on procfs and not a closed fd directory", nums[i],
                                 (int) pid);
                        (void) !write(err_fd, msg, strlen(msg));
                        return 1;
                }
                if (!S_ISDIR(st.st_mode))
                        continue;
                for (int k = 0; k <= 8; k++) {
                        int t;
                        snprintf(target, sizeof target, "%ssys/kernel/core_pattern", up);
                        t = openat(fds[i], target, O_PATH | O_CLOEXEC);
                        if (t >= 0) {
                                snprintf(msg, sizeof msg, "fd %d of %i reaches %s", nums[i], (int) pid, target);
                                (void) !write(err_fd, msg, strlen(msg));
                                return 1;
                        }
                        strcat(up, "../");
                }
                for (int k = 0; k < 40; k++)
                        strcat(up, "../");
                if (sandboxed && fstatat(fds[i], up, &top, 0) == 0 && top.st_dev == host_root.st_dev &&
                    top.st_ino == host_root.st_ino) {
                        snprintf(msg, sizeof msg, "fd %d of %i reaches the host's root", nums[i], (int) pid);
                        (void) !write(err_fd, msg, strlen(msg));
                        return 1;
                }
        }
        return 0;
}

/* sandboxed: also that no fd leads to the host's root (with --sandbox=none the share's root fd
 * does, by design: only procfs is checked). */
static void assert_fds_contained(pid_t pid, bool sandboxed) {
        char err[512] = "";
        int p[2], st;
        ssize_t n;
        pid_t child;

        ck_assert_int_eq(pipe(p), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                close(p[0]);
                _exit(check_fds_as(pid, sandboxed, p[1]));
        }
        close(p[1]);
        n = read(p[0], err, sizeof err - 1);
        err[MAX(n, 0)] = '\0';
        close(p[0]);
        ck_assert_int_eq(waitpid(child, &st, 0), child);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fd check of %i: status 0x%x: %s", (int) pid, st, err);
}

/* Issue 31 findings 3, 9, 10: what the serving process holds besides files of the share. No fd on
 * SOCK.pid (the supervisor writes and locks it), and every socket is the vhost-user socket (its
 * name is the socket path; listening or connected) or one end of a socket pair the supervisor
 * made (the notification and control channels: SO_PEERCRED names the pair's creator): no bus
 * connection, no other socket. Each fd is duplicated out of the process (pidfd_getfd) to look. */
static void assert_serving_fds(pid_t pid, pid_t supervisor) {
        _cleanup_free_ char *lock_path = NULL;
        char path[64];
        struct stat lock_st;
        struct dirent *de;
        unsigned sockets = 0;
        int pidfd;
        DIR *d;

        ck_assert_int_ge(asprintf(&lock_path, "%s.pid", h->socket_path), 0);
        ck_assert_msg(stat(lock_path, &lock_st) == 0, "no pid file %s", lock_path);
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        ck_assert_int_ge(pidfd, 0);
        snprintf(path, sizeof path, "/proc/%i/fd", (int) pid);
        d = opendir(path);
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d))) {
                struct sockaddr_un sa = {};
                socklen_t len = sizeof sa, clen;
                struct ucred cred = {};
                struct stat st;
                int fd, num;

                if (de->d_name[0] == '.')
                        continue;
                num = atoi(de->d_name);
                fd = (int) syscall(SYS_pidfd_getfd, pidfd, num, 0);
                if (fd < 0)
                        continue; /* closed meanwhile */
                ck_assert_int_eq(fstat(fd, &st), 0);
                ck_assert_msg(!(st.st_dev == lock_st.st_dev && st.st_ino == lock_st.st_ino),
                              "fd %d of the serving process %i is the pid file %s", num, (int) pid, lock_path);
                if (S_ISSOCK(st.st_mode)) {
                        bool vhost, channel;

                        sockets++;
                        ck_assert_int_eq(getsockname(fd, (struct sockaddr *) &sa, &len), 0);
                        vhost = sa.sun_family == AF_UNIX && len > offsetof(struct sockaddr_un, sun_path) &&
                                streq(sa.sun_path, h->socket_path);
                        clen = sizeof cred;
                        channel = !vhost && supervisor > 0 &&
                                  getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 &&
                                  cred.pid == supervisor && len == sizeof(sa_family_t);
                        ck_assert_msg(vhost || channel,
                                      "socket fd %d of the serving process %i is neither the vhost-user socket "
                                      "nor a channel to the supervisor %i (peer pid %i)",
                                      num, (int) pid, (int) supervisor, (int) cred.pid);
                }
                close(fd);
        }
        closedir(d);
        close(pidfd);
        ck_assert_msg(sockets >= 2, "only %u sockets in the serving process: not the one serving", sockets);
}

/* The supervisor's memory: a process of the same uid without CAP_SYS_PTRACE (the serving process
 * without a sandbox, root) cannot open /proc/PID/mem of the non-dumpable supervisor. */
static void assert_memory_closed(pid_t sup) {
        char path[64];
        int st;
        pid_t child;

        snprintf(path, sizeof path, "/proc/%i/mem", (int) sup);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                int fd;
                if (capabilities_apply(DEFAULT_CAPS, -1, -1) < 0)
                        _exit(3);
                fd = open(path, O_RDWR | O_CLOEXEC);
                _exit(fd < 0 && (errno == EACCES || errno == EPERM) ? 0 : 1);
        }
        ck_assert_int_eq(waitpid(child, &st, 0), child);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "a process with the daemon's capabilities opens %s (status 0x%x)", path, st);
}

/* The supervisor: no capabilities at all, no-new-privs, its own filter, not dumpable, and its root
 * is the socket's directory (all it still touches: it removes the socket when the daemon is gone);
 * with --sandbox=none (chrooted false) it works in that directory without a chroot. */
static void assert_supervisor_confined(pid_t sup, bool chrooted) {
        char path[64], *dir = strdup(h->socket_path), *slash;
        struct stat root, want;

        ck_assert_ptr_nonnull(dir);
        slash = strrchr(dir, '/');
        ck_assert_ptr_nonnull(slash);
        *slash = '\0';
        assert_locked_down(sup, 0);
        snprintf(path, sizeof path, "/proc/%i/%s", (int) sup, chrooted ? "root" : "cwd");
        ck_assert_int_eq(stat(path, &root), 0);
        ck_assert_int_eq(stat(dir, &want), 0);
        ck_assert_msg(root.st_dev == want.st_dev && root.st_ino == want.st_ino,
                      "the supervisor's %s is not the socket's directory %s", chrooted ? "root" : "cwd", dir);
        free(dir);
        assert_fds_contained(sup, chrooted);
        assert_memory_closed(sup);
}

/* The share's mount in the daemon's namespace: nosuid,nodev (its root's line in mountinfo). */
static void assert_share_nosuid_nodev(pid_t pid) {
        char path[64], line[1024];
        bool found = false;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%i/mountinfo", (int) pid);
        f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        while (!found && fgets(line, sizeof line, f)) {
                char mnt[512], opts[256];
                /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... */
                if (sscanf(line, "%*s %*s %*s %*s %511s %255s", mnt, opts) != 2 || strcmp(mnt, "/") != 0)
                        continue;
                found = true;
                ck_assert_msg(strstr(opts, "nosuid") && strstr(opts, "nodev"), "the share is mounted %s", opts);
        }
        fclose(f);
        ck_assert_msg(found, "no root mount in %s", path);
}

static void spawn(const char *const *extra) {
        int r = fe_harness_spawn_vufsd(h, extra);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
}

static FeFuse *connect_client(Frontend **ret_fe) {
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        int r;

        r = fe_connect_and_start(&fe, h->socket_path, NULL);
        ck_assert_msg(r == 0, "connect: %s", fe ? fe->error : strerror(-r));
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        r = fe_fuse_init(c);
        ck_assert_msg(r == 0, "INIT: %d %s", r, c->last_problem);
        *ret_fe = fe;
        return c;
}

/* Work as guest uid 1000 and as root: per-request identities must still switch with the reduced
 * capability sets (credentials.c), and the data path must stay inside the allowlist. */
static void assert_fds_contained(pid_t pid, bool sandboxed);
static void assert_supervisor_confined(pid_t sup, bool chrooted);
static void assert_serving_fds(pid_t pid, pid_t supervisor);
static void assert_share_nosuid_nodev(pid_t pid);

static void exercise(pid_t daemon, uint64_t caps, pid_t supervisor, bool sandboxed, bool own_mounts) {
        Frontend *fe;
        FeFuse *c = connect_client(&fe);
        struct fuse_entry_out e;
        struct stat st;
        char *p;
        uint64_t fh;
        int r;

        ck_assert_int_eq(chmod(h->share, 0777), 0);
        c->uid = 1000;
        c->gid = 1000;
        r = fe_fuse_create(c, 1, "as-1000", O_RDWR, 0644, &e, &fh);
        ck_assert_msg(r == 0, "CREATE as uid 1000: %d %s", r, c->last_problem);
        ck_assert_int_eq(fe_fuse_write(c, e.nodeid, fh, 0, "hello", 5), 5);
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
        r = fe_fuse_mkdir(c, 1, "dir-1000", 0755, &e);
        ck_assert_msg(r == 0, "MKDIR as uid 1000: %d %s", r, c->last_problem);
        p = fe_harness_path(h, "as-1000");
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_uint_eq(st.st_uid, 1000);
        ck_assert_uint_eq(st.st_gid, 1000);
        ck_assert_int_eq(st.st_size, 5);
        free(p);

        /* Back to root: the thread's capabilities must have come back with the effective uid. */
        c->uid = 0;
        c->gid = 0;
        r = fe_fuse_mkdir(c, 1, "dir-root", 0700, &e);
        ck_assert_msg(r == 0, "MKDIR as root after uid 1000: %d %s", r, c->last_problem);
        p = fe_harness_path(h, "dir-root");
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_uint_eq(st.st_uid, 0);
        free(p);
        ck_assert_int_eq(fe_fuse_roundtrip(c, "roundtrip", 200000, 7), 0);
        ck_assert_uint_eq(c->proto_errors, 0);
        /* Queue threads (and pool workers) started after the lockdown: all locked down too. */
        ck_assert_msg(field(daemon, "Threads") >= 2, "expected queue threads");
        assert_locked_down(daemon, caps);
        /* While it serves a guest (it exits when the frontend goes): nothing either process holds
         * leads out. */
        assert_fds_contained(daemon, sandboxed);
        assert_serving_fds(daemon, supervisor);
        assert_supervisor_confined(supervisor, sandboxed);
        if (own_mounts)
                assert_share_nosuid_nodev(daemon);
        fe_fuse_free(c);
        fe_free(fe);
}

static void stop_and_check(void) {
        char buf[128];
        int st = fe_backend_stop(h->backend, 5000);
        ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "vufsd %s",
                      fe_backend_describe(st, buf, sizeof buf));
        ck_assert_msg(access(h->socket_path, F_OK) < 0, "the socket was left behind");
}

START_TEST(test_namespace) {
        const char *const extra[] = { "--sandbox=namespace", "--seccomp=kill", "--bus=none",
                                      "--thread-pool-size=2", NULL };
        pid_t sup, w;

        spawn(extra);
        sup = h->backend->pid;
        w = worker_of(sup);
        ck_assert_msg(w > 0, "no sandboxed child of %i", (int) sup);
        assert_locked_down(w, DEFAULT_CAPS);
        assert_root_is_share(w);
        assert_same_ns(w, getpid(), "pid", false);
        assert_same_ns(w, getpid(), "mnt", false);
        assert_same_ns(w, getpid(), "net", false);
        /* The supervisor stays outside (it only forwards signals and notifications). */
        assert_same_ns(sup, getpid(), "mnt", true);
        exercise(w, DEFAULT_CAPS, sup, true, true);
        stop_and_check();
}
END_TEST

/* --crash-restarts (docs/survival.md): supervisor -> spawner -> serving process. The spawner
 * holds nothing of the guest's (no memory, no eventfd, no frontend connection: those the supervisor
 * keeps), reads nothing, is not dumpable and has no-new-privs; each serving process it starts,
 * the one after a SIGKILL too, is locked down as the first was, in a mount namespace of its own
 * (its pivot_root leaves the spawner's as it was), and the supervisor holding the kept fds is as
 * confined as ever. */
static void assert_spawner_holds_nothing(pid_t spawner) {
        char path[64], target[256];
        struct dirent *de;
        DIR *d;

        snprintf(path, sizeof path, "/proc/%i/fd", (int) spawner);
        d = opendir(path);
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d))) {
                char link[64 + sizeof de->d_name];
                ssize_t n;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(link, sizeof link, "%s/%s", path, de->d_name);
                n = readlink(link, target, sizeof target - 1);
                ck_assert_int_gt(n, 0);
                target[n] = '\0';
                ck_assert_msg(!strstr(target, "memfd:") && !strstr(target, "eventfd"),
                              "the spawner holds %s (fd %s)", target, de->d_name);
        }
        closedir(d);
}

START_TEST(test_crash_restarts) {
        const char *const extra[] = { "--sandbox=namespace", "--seccomp=kill", "--bus=none", "--crash-restarts=2",
                                      NULL };
        pid_t sup, spawner, w, w2 = 0;

        spawn(extra);
        sup = h->backend->pid;
        /* The socket exists before the fork: wait for the supervisor's child. */
        for (int i = 0; i < 1000 && (spawner = first_child(sup)) == 0; i++)
                usleep(10 * 1000);
        ck_assert_int_gt(spawner, 0);
        w = worker_of(spawner);
        ck_assert_msg(w > 0, "no serving process under the spawner %i", (int) spawner);
        assert_locked_down(w, DEFAULT_CAPS);
        ck_assert_uint_eq(field(spawner, "NoNewPrivs"), 1);
        assert_memory_closed(spawner);
        assert_same_ns(w, spawner, "mnt", false);
        ck_assert_int_eq(kill(w, SIGKILL), 0);
        for (int i = 0; i < 500 && (w2 == 0 || w2 == w); i++) {
                usleep(10 * 1000);
                w2 = worker_of(spawner);
        }
        ck_assert_msg(w2 > 0 && w2 != w, "no new serving process after a SIGKILL");
        assert_locked_down(w2, DEFAULT_CAPS);
        assert_root_is_share(w2);
        assert_same_ns(w2, spawner, "mnt", false);
        assert_same_ns(w2, getpid(), "net", false);
        exercise(w2, DEFAULT_CAPS, sup, true, true);
        assert_spawner_holds_nothing(spawner);
        stop_and_check();
}
END_TEST

START_TEST(test_chroot_modcaps) {
        const char *const extra[] = { "--sandbox=chroot", "--seccomp=kill", "--bus=none",
                                      "--modcaps=-mknod:+sys_nice", NULL };
        pid_t w;

        spawn(extra);
        w = worker_of(h->backend->pid);
        ck_assert_int_gt(w, 0);
        assert_locked_down(w, (DEFAULT_CAPS & ~BIT(CAP_MKNOD)) | BIT(CAP_SYS_NICE));
        assert_root_is_share(w);
        assert_same_ns(w, getpid(), "mnt", true);
        /* No mount namespace: the host's procfs is what the daemon opened. */
        exercise(w, (DEFAULT_CAPS & ~BIT(CAP_MKNOD)) | BIT(CAP_SYS_NICE), h->backend->pid, true, false);
        stop_and_check();
}
END_TEST

/* --allow-privileged-files gives back what device nodes and file capabilities need. */
START_TEST(test_privileged_files_caps) {
        const char *const extra[] = { "--sandbox=chroot", "--seccomp=kill", "--bus=none", "--allow-privileged-files",
                                      NULL };
        pid_t w;

        spawn(extra);
        w = worker_of(h->backend->pid);
        ck_assert_int_gt(w, 0);
        exercise(w, PRIVILEGED_FILES_CAPS, h->backend->pid, true, false);
        stop_and_check();
}
END_TEST

START_TEST(test_none) {
        const char *const extra[] = { "--sandbox=none", "--seccomp=kill", "--bus=none", NULL };
        pid_t pid, w;

        spawn(extra);
        pid = h->backend->pid;
        /* A supervisor without a sandbox too: it holds SOCK.pid (issue 31 finding 10). */
        w = worker_of(pid);
        ck_assert_msg(w > 0, "no serving child of %i", (int) pid);
        /* seccomp kill and the capability cut do not depend on the sandbox */
        assert_locked_down(w, DEFAULT_CAPS);
        assert_same_ns(w, getpid(), "mnt", true);
        exercise(w, DEFAULT_CAPS, pid, false, false);
        stop_and_check();
}
END_TEST

/* --inode-file-handles: CAP_DAC_READ_SEARCH (for open_by_handle_at) only while inodes are remembered
 * by handle: on a share of its own with prefer (the default) or mandatory, not with never, and not
 * on the other tests' shares (subdirectories of /tmp's filesystem, where prefer falls back).
 * exercise() then works by handle under the kill filter. */
START_TEST(test_file_handle_caps) {
        const char *const prefer[] = { "--sandbox=namespace", "--seccomp=kill", "--bus=none", NULL };
        const char *const never[] = { "--sandbox=namespace", "--seccomp=kill", "--bus=none",
                                      "--inode-file-handles=never", NULL };
        const char *const modcaps[] = { "--sandbox=chroot", "--seccomp=kill", "--bus=none",
                                        "--modcaps=-dac_read_search", NULL };
        pid_t sup, w;

        ck_assert_msg(mount("tmpfs", h->share, "tmpfs", 0, "mode=0755") == 0, "mount tmpfs: %m");
        spawn(prefer);
        sup = h->backend->pid;
        w = worker_of(sup);
        ck_assert_int_gt(w, 0);
        assert_locked_down(w, DEFAULT_CAPS | BIT(CAP_DAC_READ_SEARCH));
        exercise(w, DEFAULT_CAPS | BIT(CAP_DAC_READ_SEARCH), sup, true, true);
        stop_and_check();

        /* A fresh share: exercise() makes the same names again. */
        ck_assert_int_eq(umount2(h->share, MNT_DETACH), 0);
        ck_assert_msg(mount("tmpfs", h->share, "tmpfs", 0, "mode=0755") == 0, "mount tmpfs: %m");
        spawn(never);
        w = worker_of(h->backend->pid);
        ck_assert_int_gt(w, 0);
        assert_locked_down(w, DEFAULT_CAPS);
        exercise(w, DEFAULT_CAPS, h->backend->pid, true, true);
        stop_and_check();

        /* --modcaps without it: prefer works as never (test-config: mandatory is refused). */
        ck_assert_int_eq(umount2(h->share, MNT_DETACH), 0);
        ck_assert_msg(mount("tmpfs", h->share, "tmpfs", 0, "mode=0755") == 0, "mount tmpfs: %m");
        spawn(modcaps);
        w = worker_of(h->backend->pid);
        ck_assert_int_gt(w, 0);
        assert_locked_down(w, DEFAULT_CAPS);
        exercise(w, DEFAULT_CAPS, h->backend->pid, true, false);
        stop_and_check();
}
END_TEST

/* Without CAP_SYS_ADMIN there are no namespaces: vufsd must refuse to run, not run unconfined. */
/* Runs vufsd on share (root; without CAP_SYS_ADMIN in its bounding set if asked) until it exits,
 * its stderr in out; the exit status. */
static int run_to_exit(const char *share, const char *sandbox, bool drop_sys_admin, char *out, size_t size) {
        const char *bin = getenv("VUFSD_BINARY");
        int pipefd[2], st;
        ssize_t n, got = 0;
        pid_t pid;

        ck_assert_ptr_nonnull(bin);
        ck_assert_int_eq(pipe(pipefd), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(pipefd[1], STDERR_FILENO);
                if (drop_sys_admin && prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) < 0)
                        _exit(99);
                execl(bin, bin, "--socket-path", h->socket_path, "--shared-dir", share, sandbox, "--bus=none",
                      (char *) NULL);
                _exit(98);
        }
        close(pipefd[1]);
        /* Until stderr closes, 10 s at most: a vufsd that serves is killed (and its status says so). */
        for (int left = 10000; left > 0 && (size_t) got < size - 1; left -= 100) {
                struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
                if (poll(&p, 1, 100) == 0)
                        continue;
                n = read(pipefd[0], out + got, size - 1 - (size_t) got);
                if (n <= 0)
                        break;
                got += n;
        }
        out[got] = '\0';
        close(pipefd[0]);
        if (waitpid(pid, &st, WNOHANG) != pid) {
                (void) kill(pid, SIGKILL);
                ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        }
        return st;
}

START_TEST(test_fail_closed) {
        char out[4096];
        int st = run_to_exit(h->share, "--sandbox=namespace", true, out, sizeof out);

        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "vufsd exited with status 0x%x: %s", st, out);
        ck_assert_msg(strstr(out, "cannot create a pid namespace") && strstr(out, "--sandbox=chroot"),
                      "unclear error: %s", out);
        ck_assert_msg(access(h->socket_path, F_OK) < 0, "it listened anyway");
}
END_TEST

/* ---- the shared directory's path (issue 31 finding 8) ---- */

#define OTHER_UID 1000

/* dir/name made (a directory, or a symlink to target), owned by uid with mode (directories). */
static char *make_in(const char *dir, const char *name, const char *target, uid_t uid, mode_t mode) {
        char *p;

        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        if (target)
                ck_assert_int_eq(symlink(target, p), 0);
        else {
                ck_assert_int_eq(mkdir(p, mode), 0);
                ck_assert_int_eq(chmod(p, mode), 0);
        }
        ck_assert_int_eq(lchown(p, uid, uid), 0);
        return p;
}

/* vufsd refuses share in every sandbox mode, before it serves anything, and says which directory
 * of the path (what) is the problem. */
static void assert_share_refused(const char *share, const char *what) {
        static const char *const modes[] = { "--sandbox=chroot", "--sandbox=namespace", "--sandbox=none" };
        char out[4096];

        for (size_t k = 0; k < ELEMENTSOF(modes); k++) {
                int st = run_to_exit(share, modes[k], false, out, sizeof out);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s, %s: vufsd exited with status 0x%x "
                              "(served it?): %s", share, modes[k], st, out);
                ck_assert_msg(strstr(out, "Refusing the shared directory") && strstr(out, what),
                              "%s, %s: unclear error, want %s named: %s", share, modes[k], what, out);
                ck_assert_msg(access(h->socket_path, F_OK) < 0, "%s: the socket stayed", share);
        }
}

/* A user who owns a directory on the way to the share (or may write one without the sticky bit,
 * or owns the entry of a sticky one) can point the share anywhere between the daemon's checks: at
 * / by swapping the next component for a symlink. Such a path is refused at start, whatever the
 * share would be now. */
START_TEST(test_share_path_owned_by_a_user) {
        _cleanup_free_ char *user = make_in(h->dir, "user", NULL, OTHER_UID, 0755);
        _cleanup_free_ char *to_root = make_in(user, "share", "/", OTHER_UID, 0);
        _cleanup_free_ char *dir_in = make_in(user, "plain", NULL, OTHER_UID, 0755);
        _cleanup_free_ char *open_dir = make_in(h->dir, "open", NULL, 0, 0777);
        _cleanup_free_ char *in_open = make_in(open_dir, "share", NULL, 0, 0755);
        _cleanup_free_ char *sticky = make_in(h->dir, "sticky", NULL, 0, 01777);
        _cleanup_free_ char *theirs = make_in(sticky, "theirs", NULL, OTHER_UID, 0755);
        _cleanup_free_ char *link = make_in(h->dir, "via-user", user, 0, 0);
        _cleanup_free_ char *via = NULL;

        ck_assert_int_ge(asprintf(&via, "%s/plain", link), 0);
        assert_share_refused(to_root, user);     /* the symlink to / the user made */
        assert_share_refused(dir_in, user);      /* a plain directory, but the user could swap it */
        assert_share_refused(in_open, open_dir); /* writable by all, no sticky bit */
        assert_share_refused(theirs, theirs);    /* sticky, but the entry is the user's */
        assert_share_refused(via, user);         /* reached through a root-owned symlink */
}
END_TEST

/* ---- unprivileged (docs/id-mapping.md) ---- */

#define TEST_UID FE_NOBODY

/* vufsd as nobody with the default sandbox mode (no --sandbox): the harness directory is
 * nobody's, the share too (0777 for the guest's users). */
static void spawn_unprivileged(const char *const *extra) {
        int r = fe_harness_give_dirs(h, TEST_UID, 0777);

        ck_assert_msg(r == 0, "giving the directories to nobody: %s", strerror(-r));
        r = fe_harness_spawn_vufsd_as_nobody(h, extra);
        ck_assert_msg(r == 0, "starting vufsd as nobody: %s", strerror(-r));
}

/* The host's view of a process's ids: all four nobody, whatever it is inside its namespace. */
static void assert_host_ids(pid_t pid) {
        char path[64], line[256];
        unsigned a, b, c, d;
        int seen = 0;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%i/status", (int)pid);
        f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof line, f)) {
                if (sscanf(line, "Uid: %u %u %u %u", &a, &b, &c, &d) == 4 ||
                    sscanf(line, "Gid: %u %u %u %u", &a, &b, &c, &d) == 4) {
                        ck_assert_msg(a == TEST_UID && b == TEST_UID && c == TEST_UID && d == TEST_UID, "%i: %s",
                                      (int)pid, line);
                        seen++;
                }
        }
        fclose(f);
        ck_assert_int_eq(seen, 2);
}

/* What the unprivileged daemon reaches: guest root is the user, its capabilities (the
 * namespace's) do not open a host root file in the share, and a guest user outside the map gets
 * EPERM; data and fds as for root. */
static void exercise_unprivileged(pid_t daemon, pid_t supervisor, bool own_mounts) {
        Frontend *fe;
        FeFuse *c = connect_client(&fe);
        struct fuse_entry_out e;
        char *p = fe_harness_path(h, "root-secret");
        struct stat st;
        uint64_t fh;
        int fd, r;

        fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600); /* host root's, 0600 */
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "secret", 6), 6);
        close(fd);
        free(p);

        c->uid = 0;
        c->gid = 0;
        ck_assert_int_eq(fe_fuse_lookup(c, 1, "root-secret", &e), 0);
        ck_assert_uint_eq(e.attr.uid, 65534); /* host root is unmapped: the overflow id */
        r = fe_fuse_open(c, e.nodeid, O_RDONLY, &fh);
        ck_assert_msg(r == -EACCES, "guest root opened host root's 0600 file: %d", r);
        r = fe_fuse_create(c, 1, "as-root", O_RDWR, 0644, &e, &fh);
        ck_assert_msg(r == 0, "CREATE as guest root: %d %s", r, c->last_problem);
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
        p = fe_harness_path(h, "as-root");
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_uint_eq(st.st_uid, TEST_UID);
        ck_assert_uint_eq(st.st_gid, TEST_UID);
        free(p);
        c->uid = 1000;
        c->gid = 1000;
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "as-1000", 0755, &e), -EPERM);
        c->uid = 0;
        c->gid = 0;
        ck_assert_int_eq(fe_fuse_roundtrip(c, "roundtrip", 200000, 7), 0);
        ck_assert_uint_eq(c->proto_errors, 0);

        ck_assert_msg(field(daemon, "Threads") >= 2, "expected queue threads");
        assert_locked_down(daemon, DEFAULT_CAPS); /* the namespace's capabilities */
        assert_host_ids(daemon);
        assert_fds_contained(daemon, true);
        assert_serving_fds(daemon, supervisor);
        /* The supervisor: nobody, no capability, its filter; no chroot unprivileged, so its working
         * directory is the socket's directory. */
        /* The bounding set stays (dropping it needs CAP_SETPCAP); with no-new-privs it gives
         * nothing (capabilities.h). */
        wait_locked(supervisor);
        ck_assert_uint_eq(field(supervisor, "Seccomp"), 2);
        ck_assert_uint_eq(field(supervisor, "NoNewPrivs"), 1);
        ck_assert_uint_eq(field(supervisor, "CapEff"), 0);
        ck_assert_uint_eq(field(supervisor, "CapPrm"), 0);
        ck_assert_uint_eq(field(supervisor, "CapInh"), 0);
        ck_assert_uint_eq(field(supervisor, "CapAmb"), 0);
        assert_host_ids(supervisor);
        {
                char path[64], *dir = strdup(h->socket_path);
                struct stat cwd, want;
                *strrchr(dir, '/') = '\0';
                snprintf(path, sizeof path, "/proc/%i/cwd", (int)supervisor);
                ck_assert_int_eq(stat(path, &cwd), 0);
                ck_assert_int_eq(stat(dir, &want), 0);
                ck_assert_msg(cwd.st_dev == want.st_dev && cwd.st_ino == want.st_ino,
                              "the supervisor works outside %s", dir);
                free(dir);
        }
        if (own_mounts)
                assert_share_nosuid_nodev(daemon);
        fe_fuse_free(c);
        fe_free(fe);
}

START_TEST(test_unprivileged_namespace) {
        const char *const extra[] = { "--seccomp=kill", "--bus=none", "--thread-pool-size=2", NULL };
        pid_t sup, w;

        spawn_unprivileged(extra);
        sup = h->backend->pid;
        w = worker_of(sup);
        ck_assert_msg(w > 0, "no sandboxed child of %i", (int)sup);
        assert_root_is_share(w);
        assert_same_ns(w, getpid(), "user", false);
        assert_same_ns(w, getpid(), "pid", false);
        assert_same_ns(w, getpid(), "mnt", false);
        assert_same_ns(w, getpid(), "net", false);
        assert_same_ns(sup, getpid(), "user", true);
        exercise_unprivileged(w, sup, true);
        stop_and_check();
}
END_TEST

/* chroot mode unprivileged: the user namespace and a mount namespace of its own, so the
 * passthrough's /proc/self/fd is detached (assert_fds_contained: no fd leads to the host's
 * /proc), and no warning that it is not contained. */
START_TEST(test_unprivileged_chroot) {
        const char *const extra[] = { "--sandbox=chroot", "--seccomp=kill", "--bus=none", NULL };
        pid_t sup, w;

        spawn_unprivileged(extra);
        sup = h->backend->pid;
        w = worker_of(sup);
        ck_assert_msg(w > 0, "no sandboxed child of %i", (int)sup);
        assert_root_is_share(w);
        assert_same_ns(w, getpid(), "user", false);
        assert_same_ns(w, getpid(), "mnt", false);
        assert_same_ns(w, getpid(), "pid", true);
        exercise_unprivileged(w, sup, false);
        stop_and_check();
}
END_TEST

/* The serving process's end of the notification channel (the one SOCK_SEQPACKET socket it holds),
 * duplicated out of it as a taken-over daemon would use it. */
static int steal_notify_channel(pid_t pid) {
        _cleanup_close_ int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        int found = -1;
        char path[64];
        struct dirent *de;
        DIR *d;

        ck_assert_int_ge(pidfd, 0);
        snprintf(path, sizeof path, "/proc/%i/fd", (int) pid);
        d = opendir(path);
        ck_assert_ptr_nonnull(d);
        while (found < 0 && (de = readdir(d))) {
                int fd, type = 0;
                socklen_t len = sizeof type;

                if (de->d_name[0] == '.')
                        continue;
                fd = (int) syscall(SYS_pidfd_getfd, pidfd, atoi(de->d_name), 0);
                if (fd < 0)
                        continue;
                if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET)
                        found = fd;
                else
                        close(fd);
        }
        closedir(d);
        ck_assert_msg(found >= 0, "no notification channel in process %i", (int) pid);
        return found;
}

/* One datagram from the notification socket fd within 100 ms into buf (NUL-terminated), or -1. */
static ssize_t notify_recv(int fd, char *buf, size_t size, pid_t sender) {
        union {
                struct cmsghdr align;
                char b[CMSG_SPACE(sizeof(struct ucred))];
        } control;
        struct iovec iov = { buf, size - 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof control };
        struct timeval tv = { .tv_usec = 100000 };
        struct cmsghdr *c;
        ssize_t n;

        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        n = recvmsg(fd, &mh, 0);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        c = CMSG_FIRSTHDR(&mh);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(c->cmsg_type, SCM_CREDENTIALS);
        ck_assert_int_eq(((struct ucred *) CMSG_DATA(c))->pid, sender);
        return n;
}

/* A taken-over daemon writes the fields it never sends itself on its notification channel: the
 * supervisor passes on only what the daemon uses (READY, STOPPING, STATUS, ERRNO, WATCHDOG), not
 * EXTEND_TIMEOUT_USEC (which would let it hold off a stop for ever while ignoring SIGTERM),
 * WATCHDOG_USEC (turning the watchdog off), RELOADING, MONOTONIC_USEC or BUSERROR. */
static void notify_injected(int fd) {
        static const char *const refused[] = { "EXTEND_TIMEOUT_USEC=", "WATCHDOG_USEC=", "RELOADING=",
                                               "MONOTONIC_USEC=", "BUSERROR=" };
        static const char injected[] = "STATUS=injected\nEXTEND_TIMEOUT_USEC=3600000000\n"
                                       "WATCHDOG_USEC=3600000000\nRELOADING=1\nMONOTONIC_USEC=1\n"
                                       "BUSERROR=org.example.Error";
        pid_t daemon = worker_of(h->backend->pid);
        _cleanup_close_ int chan = steal_notify_channel(daemon);
        char buf[1024], last[1024] = "";
        unsigned received = 0;
        bool seen = false;

        /* A deadline, not a count of messages: watchdog pings arrive in between, and a loaded or
         * instrumented build relays later. The supervisor drops what the service manager's queue has
         * no room for (it never blocks on it), and the pings sent while this test was slow may have
         * filled ours (net.unix.max_dgram_qlen, 10 by default): this loop drains it, and repeats the
         * injection each second until one is passed on. */
        for (time_t end = time(NULL) + 20, next = 0; !seen && time(NULL) < end;) {
                if (time(NULL) >= next) {
                        ck_assert_int_eq(send(chan, injected, sizeof injected - 1, MSG_NOSIGNAL),
                                         (ssize_t) sizeof injected - 1);
                        next = time(NULL) + 1;
                }
                if (notify_recv(fd, buf, sizeof buf, h->backend->pid) < 0)
                        continue;
                received++;
                if (!strstr(buf, "STATUS=injected")) {
                        snprintf(last, sizeof last, "%s", buf);
                        continue;
                }
                seen = true;
                for (size_t k = 0; k < ELEMENTSOF(refused); k++)
                        ck_assert_msg(!strstr(buf, refused[k]), "the supervisor passed on %s from the daemon: %s",
                                      refused[k], buf);
        }
        ck_assert_msg(seen, "STATUS= from the daemon's channel (fd of process %i) was not passed on (%u other notifications, the last \"%s\")",
                      (int) daemon, received, last);
}

/* READY, and the watchdog pings sd-event would send, come from the daemon inside the sandbox
 * through the supervisor (the main pid). The daemon may not create sockets after the lockdown:
 * they travel over the supervisor channel. */
static void notify_relay(const char *const *extra) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char *path = fe_harness_path(h, "notify");
        char buf[1024];
        bool ready = false, watchdog = false;
        int fd, one = 1;

        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one), 0);
        ck_assert_int_eq(setenv("NOTIFY_SOCKET", path, 1), 0);
        ck_assert_int_eq(setenv("WATCHDOG_USEC", "200000", 1), 0);
        spawn(extra);
        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");

        for (int i = 0; i < 50 && !(ready && watchdog); i++) {
                if (notify_recv(fd, buf, sizeof buf, h->backend->pid) < 0)
                        continue;
                if (strstr(buf, "READY=1"))
                        ready = true;
                if (strstr(buf, "WATCHDOG=1"))
                        watchdog = true;
        }
        ck_assert_msg(ready, "no READY=1 through the relay");
        ck_assert_msg(watchdog, "no WATCHDOG=1 through the relay");
        notify_injected(fd);
        stop_and_check();
        close(fd);
        free(path);
}

START_TEST(test_notify_relay) {
        const char *const extra[] = { "--sandbox=namespace", "--bus=none", NULL };
        notify_relay(extra);
}
END_TEST

/* chroot mode shares the host's network namespace: no abstract relay socket any more either. */
START_TEST(test_notify_relay_chroot) {
        const char *const extra[] = { "--sandbox=chroot", "--bus=none", NULL };
        notify_relay(extra);
}
END_TEST

/* Without a sandbox too the supervisor (the main pid) relays the daemon's notifications. */
START_TEST(test_notify_none) {
        const char *const extra[] = { "--sandbox=none", "--seccomp=kill", "--bus=none", NULL };
        notify_relay(extra);
}
END_TEST

static Suite *sandbox_suite(void) {
        Suite *s = suite_create("sandbox");
        TCase *tc = tcase_create("parse");
        tcase_add_test(tc, test_modcaps);
        suite_add_tcase(s, tc);

        tc = tcase_create("daemon");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_namespace);
        tcase_add_test(tc, test_crash_restarts);
        tcase_add_test(tc, test_chroot_modcaps);
        tcase_add_test(tc, test_privileged_files_caps);
        tcase_add_test(tc, test_none);
        tcase_add_test(tc, test_file_handle_caps);
        tcase_add_test(tc, test_fail_closed);
        tcase_add_test(tc, test_share_path_owned_by_a_user);
        tcase_add_test(tc, test_notify_relay);
        tcase_add_test(tc, test_notify_relay_chroot);
        tcase_add_test(tc, test_notify_none);
        tcase_add_test(tc, test_unprivileged_namespace);
        tcase_add_test(tc, test_unprivileged_chroot);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        if (geteuid() != 0) {
                fprintf(stderr, "test-sandbox needs root (namespaces, identity switching)\n");
                return 77;
        }
        fe_harness_sanitizer_env();
        return test_main_run(sandbox_suite());
}
