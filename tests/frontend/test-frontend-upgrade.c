/* test-frontend-upgrade.c: live upgrade (docs/survival.md "Live upgrade") through the real daemon
 * in its default sandbox, on a private dbus-daemon, driven by `fsctl upgrade`: the serving process
 * stops at a quiescent point, hands its session (nodes, open handles, directory streams) to the
 * keeper and the spawner executes the binary now at vufsd's path, which takes over the same
 * connection, rings and session. The two builds differ in their version: vufsd and
 * vufsd-test-hooks (test-hooks.c gives it its own version string), copied in turn to the path
 * vufsd was started from. */
#define _GNU_SOURCE 1
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "host-locks.h"
#include "locks-kept.h"
#include "util.h"
#include "test-main.h"

static FeHarness *h;
static Frontend *fe;
static FeFuse *c;
static pid_t bus_pid;
static char bus_address[512];
static char *exe; /* h->dir/bin/vufsd: the path vufsd runs from */

/* A dbus-daemon of our own (as tests/vm/common.sh's vm_private_bus). */
static void bus_start(void) {
        _cleanup_free_ char *conf = NULL;
        int pipe_fd[2];
        FILE *f;
        ssize_t n;

        ck_assert_int_ge(asprintf(&conf, "%s/bus.conf", h->dir), 0);
        f = fopen(conf, "we");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
                " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                "<busconfig><type>session</type><listen>unix:path=%s/bus.sock</listen><auth>EXTERNAL</auth>\n"
                "<policy context=\"default\"><allow send_destination=\"*\" eavesdrop=\"true\"/><allow eavesdrop=\"true\"/>\n"
                "<allow own=\"*\"/></policy>\n"
                "</busconfig>\n",
                h->dir);
        fclose(f);
        ck_assert_int_eq(pipe(pipe_fd), 0);
        bus_pid = fork();
        ck_assert_int_ge(bus_pid, 0);
        if (bus_pid == 0) {
                char arg_conf[600], arg_print[32];
                snprintf(arg_conf, sizeof arg_conf, "--config-file=%s", conf);
                snprintf(arg_print, sizeof arg_print, "--print-address=%d", pipe_fd[1]);
                close(pipe_fd[0]);
                execlp("dbus-daemon", "dbus-daemon", arg_conf, "--nofork", arg_print, (char *) NULL);
                _exit(127);
        }
        close(pipe_fd[1]);
        n = read(pipe_fd[0], bus_address, sizeof bus_address - 1);
        close(pipe_fd[0]);
        ck_assert_msg(n > 0, "dbus-daemon did not start");
        bus_address[n] = '\0';
        bus_address[strcspn(bus_address, "\n")] = '\0';
}

/* Copies the file src to exe through a temporary name and a rename, as a package manager
 * installs a binary (the running one keeps its old inode). */
static void install(const char *src) {
        _cleanup_free_ char *tmp = NULL, *cmd = NULL;

        ck_assert_int_ge(asprintf(&tmp, "%s.new", exe), 0);
        ck_assert_int_ge(asprintf(&cmd, "cp '%s' '%s' && chmod 0755 '%s'", src, tmp, tmp), 0);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_int_eq(rename(tmp, exe), 0);
}

static const char *binary(unsigned which) {
        const char *b = getenv(which == 0 ? "VUFSD_BINARY_BUILT" : "VUFSD_TEST_HOOKS_BINARY");
        ck_assert_msg(b, "VUFSD_BINARY / VUFSD_TEST_HOOKS_BINARY not set (meson sets them)");
        return b;
}

static void setup(void) {
        _cleanup_free_ char *bin = NULL;

        ck_assert_int_eq(fe_harness_new(&h), 0);
        /* VUFSD_BINARY is the build's; the test's vufsd runs from a path of its own. */
        if (!getenv("VUFSD_BINARY_BUILT"))
                ck_assert_int_eq(setenv("VUFSD_BINARY_BUILT", getenv("VUFSD_BINARY"), 1), 0);
        ck_assert_int_ge(asprintf(&bin, "%s/bin", h->dir), 0);
        ck_assert_int_eq(mkdir(bin, 0755), 0);
        ck_assert_int_ge(asprintf(&exe, "%s/vufsd", bin), 0);
        install(binary(0));
        ck_assert_int_eq(setenv("VUFSD_BINARY", exe, 1), 0);
        bus_start();
}

static void teardown(void) {
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        h = fe_harness_free(h);
        if (bus_pid > 0) {
                kill(bus_pid, SIGTERM);
                waitpid(bus_pid, NULL, 0);
                bus_pid = 0;
        }
        free(exe);
        exe = NULL;
}

static void start(const char *restarts) {
        char bus_arg[600];
        const char *extra[] = { bus_arg, "--instance=up1", restarts, NULL };
        int r;

        snprintf(bus_arg, sizeof bus_arg, "--bus=%s", bus_address);
        r = fe_harness_spawn_vufsd(h, extra);
        ck_assert_msg(r == 0, "starting vufsd (%s): %s", exe, strerror(-r));
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
}

/* fsctl's output (stdout and stderr) into out; returns its exit status. */
static int fsctl(char *out, size_t size, const char *args) {
        _cleanup_free_ char *cmd = NULL;
        const char *bin = getenv("FSCTL_BINARY");
        size_t n = 0;
        FILE *p;
        int st;

        ck_assert_msg(bin, "FSCTL_BINARY not set (meson sets it)");
        ck_assert_int_ge(asprintf(&cmd, "%s --address '%s' -i up1 %s 2>&1", bin, bus_address, args), 0);
        p = popen(cmd, "r");
        ck_assert_ptr_nonnull(p);
        while (n + 1 < size && !feof(p)) {
                size_t k = fread(out + n, 1, size - 1 - n, p);
                if (k == 0)
                        break;
                n += k;
        }
        out[n] = '\0';
        st = pclose(p);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The Version line of fsctl status, once the instance answers. */
static void version(char *ret, size_t size) {
        char out[4096];
        const char *v;

        for (int i = 0; i < 200; i++) {
                if (fsctl(out, sizeof out, "status") == 0 && (v = strstr(out, "Version:"))) {
                        v += strlen("Version:");
                        v += strspn(v, " ");
                        snprintf(ret, size, "%.*s", (int) strcspn(v, "\n"), v);
                        return;
                }
                usleep(50 * 1000);
        }
        ck_abort_msg("fsctl status gave no version: %s", out);
}

/* Whether pid runs the file now at exe (not an older one replaced since). */
static bool runs_installed(pid_t pid) {
        char p[64];
        struct stat a, b;

        snprintf(p, sizeof p, "/proc/%d/exe", (int) pid);
        return stat(p, &a) == 0 && stat(exe, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static char *host_content(const char *name) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        char *buf = calloc(1, 4096);
        int fd = open(p, O_RDONLY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_ge(read(fd, buf, 4095), 0);
        close(fd);
        return buf;
}

static int dirent_count(int n) {
        ck_assert_msg(n >= 0, "too many names");
        return n;
}

/* A NOTIFY_SOCKET for the vufsd started next, as the service manager's: returns its fd. */
static int notify_socket(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        ck_assert_int_ge(fd, 0);
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s/notify", h->dir);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(setenv("NOTIFY_SOCKET", sa.sun_path, 1), 0);
        return fd;
}

/* Whether a STATUS= with want arrives within 10 s (what systemctl status shows). */
static bool status_says(int fd, const char *want, char *last, size_t size) {
        for (int i = 0; i < 200; i++) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char buf[1024];
                ssize_t n;

                if (poll(&p, 1, 50) <= 0)
                        continue;
                while ((n = recv(fd, buf, sizeof buf - 1, 0)) > 0) {
                        buf[n] = '\0';
                        if (strstr(buf, "STATUS="))
                                snprintf(last, size, "%s", buf);
                        if (strstr(buf, "STATUS=") && strstr(buf, want))
                                return true;
                }
        }
        return false;
}

enum { DIR_ENTRIES = 60 };

/* Upgrades with fsctl; returns its output's first line. */
static void upgrade(char *out, size_t size) {
        int st = fsctl(out, size, "upgrade");
        ck_assert_msg(st == 0, "fsctl upgrade failed (%d): %s", st, out);
}

/* The guest's session across an upgrade to another build: node ids, a file open for write, a
 * directory half listed, requests in flight when the upgrade starts; then the new process runs the
 * file now installed and reports its version. */
START_TEST(test_upgrade_keeps_the_session) {
        char v0[128], v1[128], out[4096], names[8192] = "";
        struct fuse_entry_out ef, ed, e;
        uint64_t wfh, dfh, off = 0;
        uint8_t buf[4096];
        FeFuseReq *inflight[8];
        pid_t before, after;
        int n, got = 0, notify;
        char status[1024] = "";

        ck_assert_int_eq(fe_harness_put_file(h, "data", "0123456789"), 0);
        {
                _cleanup_free_ char *d = fe_harness_path(h, "dir");
                ck_assert_int_eq(mkdir(d, 0755), 0);
        }
        for (int i = 0; i < DIR_ENTRIES; i++) {
                char name[32];
                snprintf(name, sizeof name, "dir/entry-%02d", i);
                ck_assert_int_eq(fe_harness_put_file(h, name, ""), 0);
        }
        notify = notify_socket();
        start("--crash-restarts=5");
        ck_assert_int_eq(unsetenv("NOTIFY_SOCKET"), 0);
        version(v0, sizeof v0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "data", &ef), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "dir", &ed), 0);
        ck_assert_int_eq(fe_fuse_open(c, ef.nodeid, O_RDWR, &wfh), 0);
        ck_assert_int_eq(fe_fuse_write(c, ef.nodeid, wfh, 0, "ABCD", 4), 4);
        ck_assert_int_eq(fe_fuse_opendir(c, ed.nodeid, &dfh), 0);
        /* A small buffer: a part of the directory. */
        n = fe_fuse_readdir(c, false, ed.nodeid, dfh, 0, buf, 512);
        ck_assert_int_gt(n, 0);
        got += dirent_count(fe_fuse_dirent_names(buf, n, names, sizeof names, &off));
        ck_assert_int_lt(got, DIR_ENTRIES);

        install(binary(1));
        before = fe_harness_serving_pid(h);
        /* Requests in flight when the upgrade starts: submitted, not waited for. */
        for (unsigned i = 0; i < ELEMENTSOF(inflight); i++) {
                struct fuse_getattr_in gi = {};
                ck_assert_int_eq(fe_fuse_req_new(&inflight[i], c, FUSE_GETATTR, ef.nodeid, sizeof(struct fuse_attr_out)), 0);
                ck_assert_int_eq(fe_fuse_req_add(inflight[i], &gi, sizeof gi), 0);
                ck_assert_int_eq(fe_fuse_submit(c, inflight[i], -1), 0);
        }
        upgrade(out, sizeof out);
        for (unsigned i = 0; i < ELEMENTSOF(inflight); i++) {
                FeFuseReq *done;
                while (!inflight[i]->done)
                        ck_assert_int_eq(fe_fuse_wait(c, inflight[i]->queue, 10000, &done), 0);
                ck_assert_msg(inflight[i]->status == 0 && inflight[i]->oh.error == 0, "GETATTR %u in flight: %d %d", i,
                              inflight[i]->status, inflight[i]->oh.error);
                fe_fuse_req_free(c, inflight[i]);
        }
        ck_assert_msg(!fe_vu_closed(fe, 100), "the frontend connection was closed");
        after = fe_harness_serving_pid(h);
        ck_assert_msg(after > 0 && after != before, "no new serving process (before %d, after %d)", before, after);
        ck_assert_msg(runs_installed(after), "the new serving process does not run the file at %s", exe);
        version(v1, sizeof v1);
        ck_assert_msg(strcmp(v0, v1) != 0 && strstr(v1, "+test-hooks"), "version %s before, %s after", v0, v1);
        /* The service manager's STATUS= says it too (systemctl status). */
        ck_assert_msg(status_says(notify, v1, status, sizeof status), "no STATUS= with %s; the last: %s", v1, status);
        close(notify);

        /* The same node ids, the same handles, correct data. */
        ck_assert_int_eq(fe_fuse_write(c, ef.nodeid, wfh, 4, "EF", 2), 2);
        ck_assert_int_eq(fe_fuse_read(c, ef.nodeid, wfh, 0, buf, 10), 10);
        ck_assert_int_eq(memcmp(buf, "ABCDEF6789", 10), 0);
        {
                _cleanup_free_ char *content = host_content("data");
                ck_assert_str_eq(content, "ABCDEF6789");
        }
        ck_assert_int_eq(fe_fuse_lookup(c, ed.nodeid, "entry-07", &e), 0);
        /* A name looked up again is the node the guest has (not a second one: the new process's
         * copy of the share's mount against the old one's fds), and no directory is a submount. */
        {
                struct fuse_entry_out again, sub;
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "data", &again), 0);
                ck_assert_uint_eq(again.nodeid, ef.nodeid);
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "dir", &again), 0);
                ck_assert_uint_eq(again.nodeid, ed.nodeid);
                ck_assert(!(again.attr.flags & FUSE_ATTR_SUBMOUNT));
                ck_assert_int_eq(fe_fuse_mkdir(c, ed.nodeid, "sub", 0755, &sub), 0);
                ck_assert(!(sub.attr.flags & FUSE_ATTR_SUBMOUNT));
                ck_assert_int_eq(fe_fuse_lookup(c, ed.nodeid, "sub", &again), 0);
                ck_assert_uint_eq(again.nodeid, sub.nodeid);
                ck_assert_int_eq(fe_fuse_rmdir(c, ed.nodeid, "sub"), 0);
        }
        /* The listing goes on from where it was: every name once. */
        for (;;) {
                n = fe_fuse_readdir(c, false, ed.nodeid, dfh, off, buf, 512);
                ck_assert_int_ge(n, 0);
                if (n == 0)
                        break;
                got += dirent_count(fe_fuse_dirent_names(buf, n, names, sizeof names, &off));
        }
        ck_assert_int_eq(got, DIR_ENTRIES);
        ck_assert_msg(fe_fuse_entries_once(names, DIR_ENTRIES, (char *) buf, sizeof buf), "%s", (char *) buf);
        ck_assert_int_eq(fe_fuse_release(c, ef.nodeid, wfh, false), 0);
        ck_assert_int_eq(fe_fuse_release(c, ed.nodeid, dfh, true), 0);
        ck_assert_uint_eq(c->proto_errors, 0);
        ck_assert_int_eq(fsctl(out, sizeof out, "stats"), 0);
        ck_assert_msg(strstr(out, "Upgrades: 1"), "fsctl stats: %s", out);
        ck_assert_msg(!strstr(out, "Restarts:"), "an upgrade counted as a restart: %s", out);
}
END_TEST

/* 20 upgrades in a row alternating the two builds (more than --crash-restarts allows deaths: an
 * upgrade is not a crash); a file stays open for write throughout, each upgrade visible in the
 * version; the pause of each (fsctl stats --json) printed, median and worst. */
START_TEST(test_upgrades_in_a_row) {
        enum { UPGRADES = 20 };
        uint64_t pause_us[UPGRADES];
        char v[128], out[8192];
        struct fuse_entry_out e;
        uint64_t fh;
        uint8_t buf[64];

        ck_assert_int_eq(fe_harness_put_file(h, "log", ""), 0);
        start("--crash-restarts=2");
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "log", &e), 0);
        ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_WRONLY, &fh), 0);
        for (unsigned k = 0; k < UPGRADES; k++) {
                const char *p;
                char want[32];

                install(binary((k + 1) % 2));
                upgrade(out, sizeof out);
                version(v, sizeof v);
                ck_assert_msg(((k + 1) % 2 == 1) == (strstr(v, "+test-hooks") != NULL), "upgrade %u: version %s", k, v);
                snprintf((char *) buf, sizeof buf, "%02u", k);
                ck_assert_int_eq(fe_fuse_write(c, e.nodeid, fh, 2 * k, buf, 2), 2);
                ck_assert_int_eq(fsctl(out, sizeof out, "stats --json"), 0);
                p = strstr(out, "\"last_upgrade_pause_usec\":");
                ck_assert_msg(p, "no last_upgrade_pause_usec: %s", out);
                pause_us[k] = strtoull(p + strlen("\"last_upgrade_pause_usec\":"), NULL, 10);
                snprintf(want, sizeof want, "\"upgrades\":%u", k + 1);
                ck_assert_msg(strstr(out, want), "upgrade %u: %s", k, out);
        }
        {
                _cleanup_free_ char *content = host_content("log");
                ck_assert_int_eq(strlen(content), 2 * UPGRADES);
                ck_assert_int_eq(memcmp(content, "000102030405", 12), 0);
        }
        ck_assert_uint_eq(c->proto_errors, 0);
        qsort(pause_us, UPGRADES, sizeof pause_us[0], fe_cmp_u64);
        fprintf(stderr, "pause per upgrade over %d upgrades: median %.1f ms, worst %.1f ms\n", UPGRADES,
                (double) pause_us[UPGRADES / 2] / 1000.0, (double) pause_us[UPGRADES - 1] / 1000.0);
}
END_TEST

/* n files f000, f001, ... in the share, each with its own content. */
static void put_numbered(int n) {
        char name[32], data[32];

        for (int i = 0; i < n; i++) {
                snprintf(name, sizeof name, "f%03d", i);
                snprintf(data, sizeof data, "content of %03d", i);
                ck_assert_int_eq(fe_harness_put_file(h, name, data), 0);
        }
}

/* The guest looks up and opens each of them: its node id and handle in node[i], fh[i]. */
static void open_numbered(int n, uint64_t *node, uint64_t *fh) {
        char name[32];

        for (int i = 0; i < n; i++) {
                struct fuse_entry_out e;
                snprintf(name, sizeof name, "f%03d", i);
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, name, &e), 0);
                node[i] = e.nodeid;
                ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDONLY, &fh[i]), 0);
        }
}

/* Each of them reads its own content through its handle. */
static void read_numbered(int n, const uint64_t *node, const uint64_t *fh) {
        char data[32];
        uint8_t buf[32];

        for (int i = 0; i < n; i++) {
                snprintf(data, sizeof data, "content of %03d", i);
                ck_assert_int_eq(fe_fuse_read(c, node[i], fh[i], 0, buf, (uint32_t) strlen(data)), (int) strlen(data));
                ck_assert_msg(memcmp(buf, data, strlen(data)) == 0, "file %d reads %.14s", i, buf);
        }
}

/* More fds than one message carries (the keeper's list slot, sent KEEPER_MAX_FDS at a time): 150
 * files looked up and open, each handle reading its own file after the upgrade. */
START_TEST(test_many_open_files) {
        enum { FILES = 150 };
        uint64_t node[FILES], fh[FILES];
        char out[4096];

        put_numbered(FILES);
        start("--crash-restarts=5");
        open_numbered(FILES, node, fh);
        install(binary(1));
        upgrade(out, sizeof out);
        read_numbered(FILES, node, fh);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

/* The fds a process holds now. */
static int fd_count(pid_t pid) {
        char dir[64];
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *e;
        int n = 0;

        snprintf(dir, sizeof dir, "/proc/%d/fd", (int) pid);
        d = opendir(dir);
        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        return n;
}

/* Nodes of files deleted on the host that the guest still holds (it has not forgotten them) have
 * no name to be restored under: each upgrade hands their fds over, and the new process must keep
 * them within --max-inode-fds as the old one did (evictable, ESTALE once evicted), not beside it:
 * else every upgrade adds a clock's worth of fds until one is refused for want of fds. */
START_TEST(test_deleted_nodes_bounded) {
        enum { ROUNDS = 4, FILES = 100, MAX_FDS = 64 };
        char bus_arg[600], out[4096];
        const char *extra[] = { bus_arg, "--instance=up1", "--crash-restarts=5", "--max-inode-fds=64", NULL };
        int fds[ROUNDS];

        snprintf(bus_arg, sizeof bus_arg, "--bus=%s", bus_address);
        ck_assert_int_eq(fe_harness_spawn_vufsd(h, extra), 0);
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
        for (int round = 0; round < ROUNDS; round++) {
                for (int i = 0; i < FILES; i++) {
                        struct fuse_entry_out e;
                        _cleanup_free_ char *path = NULL;
                        char name[32];
                        uint64_t fh;
                        snprintf(name, sizeof name, "r%d-%03d", round, i);
                        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, name, O_RDWR, 0644, &e, &fh), 0);
                        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
                        path = fe_harness_path(h, name);
                        ck_assert_int_eq(unlink(path), 0); /* on the host: the guest keeps its node */
                }
                install(binary((round + 1) % 2));
                upgrade(out, sizeof out);
                fds[round] = fd_count(fe_harness_serving_pid(h));
        }
        /* The clock holds at most MAX_FDS node fds whatever happens; a growth of a clock's worth
         * per upgrade is the failure. */
        ck_assert_msg(fds[ROUNDS - 1] - fds[0] < MAX_FDS / 2, "the serving process held %d, %d, %d, %d fds after upgrades",
                      fds[0], fds[1], fds[2], fds[3]);
        fprintf(stderr, "fds of the serving process after each upgrade: %d, %d, %d, %d\n", fds[0], fds[1], fds[2], fds[3]);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* A serving process that dies after an upgrade is replaced by the binary now installed, not by a
 * fork of the spawner's older code (a crash must not bring back what a security update replaced),
 * and the guest's session survives the death as it survives any (docs/survival.md). */
START_TEST(test_crash_after_upgrade_runs_installed) {
        struct fuse_entry_out e;
        char out[4096], v0[128], v1[128], v2[128], buf[16];
        uint64_t fh;
        pid_t upgraded, restarted = 0;
        uint64_t until;

        ck_assert_int_eq(fe_harness_put_file(h, "data", "0123456789"), 0);
        start("--crash-restarts=5");
        version(v0, sizeof v0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "data", &e), 0);
        ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDWR, &fh), 0);
        install(binary(1));
        upgrade(out, sizeof out);
        version(v1, sizeof v1);
        ck_assert_str_ne(v0, v1);
        upgraded = fe_harness_serving_pid(h);
        ck_assert_int_eq(kill(upgraded, SIGKILL), 0);
        for (until = (uint64_t) time(NULL) + 10; (uint64_t) time(NULL) < until; usleep(5000)) {
                restarted = fe_harness_serving_pid(h);
                if (restarted > 0 && restarted != upgraded)
                        break;
        }
        ck_assert_msg(restarted > 0 && restarted != upgraded, "no process took over from %d", (int) upgraded);
        ck_assert_int_eq(fe_fuse_write(c, e.nodeid, fh, 0, "AB", 2), 2);
        ck_assert_int_eq(fe_fuse_read(c, e.nodeid, fh, 0, buf, 10), 10);
        ck_assert_int_eq(memcmp(buf, "AB23456789", 10), 0);
        ck_assert_msg(runs_installed(restarted), "the process after the crash does not run the file at %s", exe);
        version(v2, sizeof v2);
        ck_assert_str_eq(v1, v2);
        ck_assert_int_eq(fsctl(out, sizeof out, "stats"), 0);
        ck_assert_msg(strstr(out, "Restarts: 1") && strstr(out, "Upgrades: 1"), "fsctl stats: %s", out);
        /* What the takeover after the death restored: the file's node and its open file. */
        ck_assert_msg(strstr(out, "requests replayed, 1 nodes and 1 open files restored"), "fsctl stats: %s", out);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* An upgrade refused because the save runs out of fds (it duplicates every fd it hands over: here
 * 400 open files under an RLIMIT_NOFILE of 1024) leaves the guest served by the running process:
 * the duplicates are closed before the rings restart, which needs an fd of its own per queue (its
 * epoll). Before, the rings stayed stopped ("cannot wait on its kick fd: Too many open files", seen
 * in the systemd suite) and every later request went unanswered. */
START_TEST(test_refused_save_serves_on) {
        enum { FILES = 400 };
        struct rlimit rl = { 1024, 1024 };
        uint64_t node[FILES], fh[FILES];
        char v0[128], v1[128], out[4096];
        pid_t before;

        put_numbered(FILES);
        /* Inherited by vufsd, which cannot raise it past the hard limit (this test's process only). */
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        start("--crash-restarts=5");
        version(v0, sizeof v0);
        open_numbered(FILES, node, fh);
        install(binary(1));
        before = fe_harness_serving_pid(h);
        ck_assert_int_ne(fsctl(out, sizeof out, "upgrade"), 0);
        ck_assert_msg(strstr(out, "Too many open files"), "fsctl upgrade: %s", out);
        ck_assert_int_eq(fe_harness_serving_pid(h), before);
        read_numbered(FILES, node, fh);
        version(v1, sizeof v1);
        ck_assert_str_eq(v0, v1);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* The guest's locks are held throughout: a POSIX lock (its owner's open file description goes to
 * the new process in an fd slot, and with it the lock) and a flock (with its handle's fd). After the
 * upgrade a host process and a second guest owner see both held, and the owners release them. */
START_TEST(test_locks_kept) {
        static const uint64_t owner = 0x1111, other = 0x2222;
        _cleanup_free_ char *path = NULL;
        struct fuse_entry_out e;
        uint64_t fh, fh_flock;
        char out[4096];

        ck_assert_int_eq(fe_harness_put_file(h, "lk", "locked file"), 0);
        path = fe_harness_path(h, "lk");
        start("--crash-restarts=5");
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "lk", &e), 0);
        ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDWR, &fh), 0);
        ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDONLY, &fh_flock), 0);
        ck_assert_int_eq(fe_fuse_setlk(c, e.nodeid, fh, owner, false, F_WRLCK, 0, 99), 0);
        ck_assert_int_eq(fe_fuse_setlk(c, e.nodeid, fh_flock, owner, true, F_RDLCK, 0, UINT64_MAX), 0);
        ck_assert_int_eq(test_host_lock_type(path, 0, 100), F_WRLCK);

        install(binary(1));
        upgrade(out, sizeof out);

        check_locks_kept(c, path, e.nodeid, fh, fh_flock, owner, other);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* The listening socket goes to the new binary too: with --keep-listening a frontend that leaves
 * after an upgrade is followed by another that the new process accepts. */
START_TEST(test_listening_socket_kept) {
        char bus_arg[600], out[4096];
        const char *extra[] = { bus_arg, "--instance=up1", "--crash-restarts=5", "--keep-listening", NULL };
        struct fuse_entry_out e;

        snprintf(bus_arg, sizeof bus_arg, "--bus=%s", bus_address);
        ck_assert_int_eq(fe_harness_spawn_vufsd(h, extra), 0);
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
        install(binary(1));
        upgrade(out, sizeof out);
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "first", 0755, &e), 0);
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "first", &e), 0);
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "second", 0755, &e), 0);
        ck_assert(runs_installed(fe_harness_serving_pid(h)));
}
END_TEST

/* No binary at the path any more: the upgrade falls back to the running code with the same
 * session, and says so; the guest is served on. */
START_TEST(test_missing_binary_falls_back) {
        char v0[128], v1[128], out[4096];
        struct fuse_entry_out e;
        uint64_t fh;
        uint8_t buf[16];
        pid_t before, after;

        ck_assert_int_eq(fe_harness_put_file(h, "data", "0123456789"), 0);
        start("--crash-restarts=5");
        version(v0, sizeof v0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "data", &e), 0);
        ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDONLY, &fh), 0);
        before = fe_harness_serving_pid(h);
        ck_assert_int_eq(unlink(exe), 0);
        (void) fsctl(out, sizeof out, "upgrade");
        ck_assert_msg(strstr(out, "fell back") || strstr(out, "failed"), "fsctl upgrade: %s", out);
        after = fe_harness_serving_pid(h);
        ck_assert_msg(after > 0 && after != before, "no new serving process");
        version(v1, sizeof v1);
        ck_assert_str_eq(v0, v1);
        ck_assert_int_eq(fe_fuse_read(c, e.nodeid, fh, 0, buf, 10), 10);
        ck_assert_int_eq(memcmp(buf, "0123456789", 10), 0);
        ck_assert_int_eq(fe_fuse_roundtrip(c, "more", 64 * 1024, 3), 0);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* A binary that starts and fails before it takes over (here a script that exits 1, as a vufsd
 * whose libraries are missing would): the running code takes over with the same session. */
START_TEST(test_broken_binary_falls_back) {
        _cleanup_free_ char *script = NULL;
        char out[4096];
        struct fuse_entry_out e;
        uint64_t fh;
        uint8_t buf[16];
        FILE *f;

        ck_assert_int_eq(fe_harness_put_file(h, "data", "0123456789"), 0);
        start("--crash-restarts=1");
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "data", &e), 0);
        ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDONLY, &fh), 0);
        ck_assert_int_ge(asprintf(&script, "%s/broken", h->dir), 0);
        f = fopen(script, "we");
        ck_assert_ptr_nonnull(f);
        fputs("#!/bin/sh\necho 'broken vufsd: exiting' >&2\nexit 1\n", f);
        fclose(f);
        install(script);
        (void) fsctl(out, sizeof out, "upgrade");
        ck_assert_msg(strstr(out, "fell back"), "fsctl upgrade: %s", out);
        ck_assert_int_eq(fe_fuse_read(c, e.nodeid, fh, 0, buf, 10), 10);
        ck_assert_int_eq(memcmp(buf, "0123456789", 10), 0);
        ck_assert(fe_backend_alive(h->backend));
        /* Not a crash either: one upgrade more, still within --crash-restarts=1. */
        install(binary(1));
        upgrade(out, sizeof out);
        ck_assert_int_eq(fe_fuse_read(c, e.nodeid, fh, 0, buf, 10), 10);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* Without --crash-restarts there is no spawner to start the new binary: a clear error naming the
 * option, and the guest served on by the same process. */
START_TEST(test_needs_crash_restarts) {
        char out[4096];
        struct fuse_entry_out e;
        pid_t before;

        start("--log-level=info");
        before = fe_harness_daemon_pid(h);
        ck_assert_int_ne(fsctl(out, sizeof out, "upgrade"), 0);
        ck_assert_msg(strstr(out, "--crash-restarts"), "fsctl upgrade: %s", out);
        ck_assert_int_eq(fe_harness_daemon_pid(h), before);
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "still", 0755, &e), 0);
}
END_TEST

static Suite *upgrade_suite(void) {
        Suite *s = suite_create("frontend-upgrade");
        TCase *tc = tcase_create("upgrade");

        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_upgrade_keeps_the_session);
        tcase_add_test(tc, test_upgrades_in_a_row);
        tcase_add_test(tc, test_many_open_files);
        tcase_add_test(tc, test_deleted_nodes_bounded);
        tcase_add_test(tc, test_refused_save_serves_on);
        tcase_add_test(tc, test_locks_kept);
        tcase_add_test(tc, test_crash_after_upgrade_runs_installed);
        tcase_add_test(tc, test_listening_socket_kept);
        tcase_add_test(tc, test_missing_binary_falls_back);
        tcase_add_test(tc, test_broken_binary_falls_back);
        tcase_add_test(tc, test_needs_crash_restarts);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(upgrade_suite)
