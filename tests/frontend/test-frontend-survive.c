/* test-frontend-survive.c: crash survival (docs/survival.md) through the real daemon in its default
 * sandbox: the serving process is killed (SIGKILL, as the OOM killer does; SIGSEGV, SIGABRT) under
 * a frontend that stays connected, and the next process serves the same connection, rings and FUSE
 * session; a crash loop ends vufsd with a reason. */
#define _GNU_SOURCE 1
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "locks-kept.h"
#include "test-main.h"

static FeHarness *h;
static Frontend *fe;
static FeFuse *c;

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

static void teardown(void) {
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        h = fe_harness_free(h);
}

static void start(const char *restarts) {
        const char *extra[] = { restarts, NULL };
        int r = fe_harness_spawn_vufsd(h, extra);

        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
}

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* Kills the serving process with sig and waits for its successor (another pid). */
static pid_t kill_serving(int sig) {
        pid_t old = fe_harness_serving_pid(h), now = 0;
        uint64_t until = now_ms() + 5000;

        ck_assert_int_gt(old, 0);
        ck_assert_int_eq(kill(old, sig), 0);
        while (now_ms() < until) {
                now = fe_harness_serving_pid(h);
                if (now > 0 && now != old)
                        return now;
                usleep(2000);
        }
        ck_abort_msg("no serving process took over from pid %d within 5 s (vufsd %s)", (int) old,
                     fe_backend_alive(h->backend) ? "still running" : "exited");
        return 0;
}

static bool exists(const char *name) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        struct stat st;
        return lstat(p, &st) == 0;
}

/* The guest's connection survives a SIGKILL: the same session (no second INIT) serves lookups,
 * creations and data through the same rings. */
START_TEST(test_sigkill_keeps_the_connection) {
        struct fuse_entry_out e;

        start("--crash-restarts=5");
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "before", 0755, &e), 0);
        kill_serving(SIGKILL);
        ck_assert_msg(!fe_vu_closed(fe, 200), "the frontend connection was closed");
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "before", &e), 0);
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "after", 0755, &e), 0);
        ck_assert(exists("after"));
        ck_assert_int_eq(fe_fuse_roundtrip(c, "data", 256 * 1024, 7), 0);
        ck_assert_int_eq(fe_vu_ping(fe), 0);
}
END_TEST

/* Host directories in the listing besides "subdir": a directory listed with attributes through a
 * handle kept across a death must not look like a submount (below). */
#define SUBDIRS 6

/* What the guest holds survives a SIGKILL (the keeper's journal, docs/survival.md): node ids, a
 * file open for write with its offset-free data, a directory half listed, a POSIX lock and a flock;
 * the new process answers on all of them as the dead one would have, and a host process sees the
 * locks held across the death. */
START_TEST(test_session_survives_a_kill) {
        static const uint64_t owner = 0x1111, other = 0x2222;
        _cleanup_free_ char *path = NULL;
        struct fuse_entry_out held, child, child2, f, ed, e;
        struct fuse_attr_out a;
        uint64_t wfh, ffh, dfh, off = 0;
        uint8_t buf[4096];
        char names[8192] = "";
        int n, listed = 0;

        path = fe_harness_path(h, "dir");
        ck_assert_int_eq(mkdir(path, 0755), 0);
        free(path);
        ck_assert_int_eq(fe_harness_put_file(h, "dir/.keep", ""), 0);
        for (int i = 0; i < 40; i++) {
                char name[32];
                snprintf(name, sizeof name, "dir/entry-%02d", i);
                ck_assert_int_eq(fe_harness_put_file(h, name, ""), 0);
        }
        for (int i = 0; i < SUBDIRS; i++) {
                char name[32];
                snprintf(name, sizeof name, "dir/sub-%d", i);
                path = fe_harness_path(h, name);
                ck_assert_int_eq(mkdir(path, 0755), 0);
                free(path);
                path = NULL;
        }
        start("--crash-restarts=5");
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "held", 0755, &held), 0);
        ck_assert_int_eq(fe_fuse_create(c, held.nodeid, "data", O_RDWR, 0644, &f, &wfh), 0);
        ck_assert_int_eq(fe_fuse_write(c, f.nodeid, wfh, 0, "ABCD", 4), 4);
        ck_assert_int_eq(fe_fuse_open(c, f.nodeid, O_RDONLY, &ffh), 0);
        ck_assert_int_eq(fe_fuse_setlk(c, f.nodeid, wfh, owner, false, F_WRLCK, 0, 99), 0);
        ck_assert_int_eq(fe_fuse_setlk(c, f.nodeid, ffh, owner, true, F_RDLCK, 0, UINT64_MAX), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "dir", &ed), 0);
        ck_assert_int_eq(fe_fuse_opendir(c, ed.nodeid, &dfh), 0);
        n = fe_fuse_readdir(c, false, ed.nodeid, dfh, 0, buf, 512);
        ck_assert_int_gt(n, 0);
        listed += fe_fuse_dirent_names(buf, n, names, sizeof names, &off);
        ck_assert_int_lt(listed, 41);
        path = fe_harness_path(h, "held/data");

        kill_serving(SIGKILL);

        ck_assert_msg(!fe_vu_closed(fe, 100), "the frontend connection was closed");
        /* The node ids: no ESTALE. */
        ck_assert_int_eq(fe_fuse_getattr(c, held.nodeid, &a), 0);
        ck_assert_int_eq(fe_fuse_mkdir(c, held.nodeid, "child", 0755, &child), 0);
        ck_assert(exists("held/child"));
        /* A directory made in a restored one is no submount of it (the guest would mount it
         * automatically, and its rmdir answer EBUSY). */
        ck_assert_msg(!(child.attr.flags & FUSE_ATTR_SUBMOUNT), "a new directory announced as a submount");
        /* The open files, with their locks held throughout. */
        ck_assert_int_eq(fe_fuse_write(c, f.nodeid, wfh, 4, "EF", 2), 2);
        ck_assert_int_eq(fe_fuse_read(c, f.nodeid, ffh, 0, buf, 16), 6);
        ck_assert_int_eq(memcmp(buf, "ABCDEF", 6), 0);
        check_locks_kept(c, path, f.nodeid, wfh, ffh, owner, other);
        /* The listing goes on: every name once. */
        for (;;) {
                n = fe_fuse_readdir(c, false, ed.nodeid, dfh, off, buf, 512);
                ck_assert_int_ge(n, 0);
                if (n == 0)
                        break;
                n = fe_fuse_dirent_names(buf, n, names, sizeof names, &off);
                ck_assert_int_ge(n, 0);
                listed += n;
        }
        ck_assert_int_eq(listed, 41 + SUBDIRS);
        /* Listed with attributes through the handle opened before the death: each entry the node
         * this process has for it (not a second one found through the dead process's copy of the
         * share's mount), and none announced as a submount. */
        ck_assert_int_eq(fe_fuse_mkdir(c, ed.nodeid, "subdir", 0755, &e), 0);
        off = 0;
        listed = 0;
        for (;;) { /* the whole listing: the directories may come in any chunk */
                n = fe_fuse_readdir(c, true, ed.nodeid, dfh, off, buf, sizeof buf);
                ck_assert_int_ge(n, 0);
                if (n == 0)
                        break;
                for (int pos = 0; pos + (int) FUSE_NAME_OFFSET_DIRENTPLUS <= n;) {
                        const struct fuse_direntplus *d = (const void *) (buf + pos);
                        char name[NAME_MAX + 1];
                        snprintf(name, sizeof name, "%.*s", (int) d->dirent.namelen, d->dirent.name);
                        off = d->dirent.off;
                        pos += (int) FUSE_DIRENTPLUS_SIZE(d);
                        if (d->entry_out.nodeid == 0 || d->entry_out.nodeid == ed.nodeid ||
                            strcmp(name, "..") == 0)
                                continue;
                        listed++;
                        ck_assert_msg(!(d->entry_out.attr.flags & FUSE_ATTR_SUBMOUNT), "%s announced as a submount",
                                      name);
                        /* What a LOOKUP through the directory's node finds is the same node. */
                        ck_assert_int_eq(fe_fuse_lookup(c, ed.nodeid, name, &child2), 0);
                        ck_assert_msg(child2.nodeid == d->entry_out.nodeid, "%s: node %" PRIu64 " listed, %" PRIu64
                                      " looked up", name, (uint64_t) d->entry_out.nodeid, (uint64_t) child2.nodeid);
                        ck_assert_int_eq(fe_fuse_forget(c, d->entry_out.nodeid, 2), 0);
                }
        }
        ck_assert_int_eq(listed, 41 + SUBDIRS + 1);
        ck_assert_msg(fe_fuse_entries_once(names, 40, (char *) buf, sizeof buf), "%s", (char *) buf);
        ck_assert_int_eq(fe_fuse_release(c, f.nodeid, wfh, false), 0);
        ck_assert_int_eq(fe_fuse_release(c, f.nodeid, ffh, false), 0);
        ck_assert_int_eq(fe_fuse_release(c, ed.nodeid, dfh, true), 0);
        /* A directory the guest held across the death empties and goes, as rm -rf does it. */
        for (int i = 0; i < 40; i++) {
                char name[32];
                snprintf(name, sizeof name, "entry-%02d", i);
                ck_assert_int_eq(fe_fuse_unlink(c, ed.nodeid, name), 0);
        }
        ck_assert_int_eq(fe_fuse_unlink(c, ed.nodeid, ".keep"), 0);
        ck_assert_int_eq(fe_fuse_rmdir(c, ed.nodeid, "subdir"), 0);
        for (int i = 0; i < SUBDIRS; i++) {
                char name[32];
                snprintf(name, sizeof name, "sub-%d", i);
                ck_assert_int_eq(fe_fuse_rmdir(c, ed.nodeid, name), 0);
        }
        ck_assert_int_eq(fe_fuse_rmdir(c, FUSE_ROOT_ID, "dir"), 0);
        /* And again: what changed after the first takeover is what the second restores. */
        ck_assert_int_eq(fe_fuse_open(c, f.nodeid, O_RDWR, &wfh), 0);
        kill_serving(SIGKILL);
        ck_assert_int_eq(fe_fuse_getattr(c, child.nodeid, &a), 0);
        ck_assert_int_eq(fe_fuse_write(c, f.nodeid, wfh, 6, "G", 1), 1);
        ck_assert_int_eq(fe_fuse_release(c, f.nodeid, wfh, false), 0);
        ck_assert_int_eq(fe_fuse_release(c, f.nodeid, ffh, false), -EBADF); /* released before the death */
        ck_assert_int_eq(fe_fuse_lookup(c, held.nodeid, "data", &e), 0);
        ck_assert_uint_eq(e.nodeid, f.nodeid);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* Whether this run remembers inodes by file handle (the -handles run of the suite). */
static bool handles_mode(void) {
        const char *extra = getenv("VUFSD_TEST_EXTRA_ARGS");
        return extra && strstr(extra, "--inode-file-handles=mandatory");
}

/* A node whose name leads to another file after the death (a host user moved things meanwhile) is
 * not taken for it. Without an open file its id answers ESTALE, and Linux looks the path up again,
 * which finds the new file under a new id; a node the guest holds open stays the file it opened
 * (its open file is the inode), as it would without the death. A node remembered by file handle
 * is found by that handle: the moved file, as without the death. */
START_TEST(test_moved_node_answers_estale) {
        struct fuse_entry_out e, e2, o;
        struct fuse_attr_out a;
        char buf[8] = "";
        uint64_t fh;

        ck_assert_int_eq(fe_harness_put_file(h, "held", "old"), 0);
        ck_assert_int_eq(fe_harness_put_file(h, "open", "opened"), 0);
        start("--crash-restarts=5");
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "held", &e), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "open", &o), 0);
        ck_assert_int_eq(fe_fuse_open(c, o.nodeid, O_RDONLY, &fh), 0);
        for (int k = 0; k < 2; k++) {
                const char *name = k == 0 ? "held" : "open";
                _cleanup_free_ char *from = fe_harness_path(h, name), *to = NULL;
                char moved[16];
                snprintf(moved, sizeof moved, "moved-%s", name);
                to = fe_harness_path(h, moved);
                ck_assert_int_eq(rename(from, to), 0);
                ck_assert_int_eq(fe_harness_put_file(h, name, "new"), 0);
        }
        kill_serving(SIGKILL);
        ck_assert_int_eq(fe_fuse_getattr(c, e.nodeid, &a), handles_mode() ? 0 : -ESTALE);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "held", &e2), 0);
        ck_assert_uint_ne(e2.nodeid, e.nodeid);
        ck_assert_int_eq(fe_fuse_getattr(c, e2.nodeid, &a), 0);
        ck_assert_uint_eq(a.attr.size, 3);
        /* The open one: its node and its open file are the moved file. */
        ck_assert_int_eq(fe_fuse_getattr(c, o.nodeid, &a), 0);
        ck_assert_uint_eq(a.attr.size, 6);
        ck_assert_int_eq(fe_fuse_read(c, o.nodeid, fh, 0, buf, sizeof buf), 6);
        ck_assert_int_eq(memcmp(buf, "opened", 6), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "open", &e2), 0);
        ck_assert_uint_ne(e2.nodeid, o.nodeid);
        ck_assert_int_eq(fe_fuse_release(c, o.nodeid, fh, false), 0);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* A file the guest holds open after its last name went (a temporary file: created, unlinked, used;
 * a file renamed over) is still that file after a death, twice: its node answers, its open files
 * read and write it, its locks stay held, and nothing of it shows in the share. */
START_TEST(test_deleted_file_kept_open) {
        static const uint64_t owner = 0x3333;
        struct fuse_entry_out t, r, e, gone, now;
        struct fuse_attr_out a;
        struct fuse_file_lock lk;
        uint64_t tfh, rfh, rfh2;
        char buf[16] = "";

        ck_assert_int_eq(fe_harness_put_file(h, "replaced", "first"), 0);
        start("--crash-restarts=5");
        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "tmp", O_RDWR, 0600, &t, &tfh), 0);
        ck_assert_int_eq(fe_fuse_write(c, t.nodeid, tfh, 0, "scratch", 7), 7);
        ck_assert_int_eq(fe_fuse_unlink(c, FUSE_ROOT_ID, "tmp"), 0);
        ck_assert_int_eq(fe_fuse_setlk(c, t.nodeid, tfh, owner, false, F_WRLCK, 0, 9), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "replaced", &r), 0);
        ck_assert_int_eq(fe_fuse_open(c, r.nodeid, O_RDONLY, &rfh), 0);
        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "replaced.new", O_RDWR, 0644, &e, &rfh2), 0);
        ck_assert_int_eq(fe_fuse_write(c, e.nodeid, rfh2, 0, "second", 6), 6);
        ck_assert_int_eq(fe_fuse_rename(c, FUSE_ROOT_ID, "replaced.new", FUSE_ROOT_ID, "replaced"), 0);
        for (int round = 0; round < 2; round++) {
                kill_serving(SIGKILL);
                ck_assert_int_eq(fe_fuse_getattr(c, t.nodeid, &a), 0);
                ck_assert_uint_eq(a.attr.nlink, 0);
                ck_assert_int_eq(fe_fuse_write(c, t.nodeid, tfh, 7, "!", 1), 1);
                ck_assert_int_eq(fe_fuse_read(c, t.nodeid, tfh, 0, buf, sizeof buf), 8);
                ck_assert_int_eq(memcmp(buf, "scratch!", 8), 0);
                ck_assert_int_eq(fe_fuse_getlk(c, t.nodeid, tfh, owner + 1, F_WRLCK, 0, 9, &lk), 0);
                ck_assert_int_eq(lk.type, F_WRLCK);
                ck_assert_int_eq(fe_fuse_getattr(c, r.nodeid, &a), 0);
                ck_assert_uint_eq(a.attr.size, 5);
                ck_assert_int_eq(fe_fuse_read(c, r.nodeid, rfh, 0, buf, sizeof buf), 5);
                ck_assert_int_eq(memcmp(buf, "first", 5), 0);
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "tmp", &gone), -ENOENT);
                /* The file renamed over the old one is that name's node. */
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "replaced", &now), 0);
                ck_assert_uint_eq(now.nodeid, e.nodeid);
                ck_assert_int_eq(fe_fuse_forget(c, now.nodeid, 1), 0);
        }
        ck_assert_int_eq(fe_fuse_release(c, t.nodeid, tfh, false), 0);
        ck_assert_int_eq(fe_fuse_release(c, r.nodeid, rfh, false), 0);
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, rfh2, false), 0);
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* Every way a process dies of a signal, several times in a row, within the bound. */
START_TEST(test_signals_in_a_row) {
        static const int sigs[] = { SIGKILL, SIGSEGV, SIGABRT, SIGKILL };
        struct fuse_entry_out e;
        char name[32];

        start("--crash-restarts=5");
        for (size_t i = 0; i < ELEMENTSOF(sigs); i++) {
                kill_serving(sigs[i]);
                snprintf(name, sizeof name, "d%zu", i);
                ck_assert_msg(fe_fuse_mkdir(c, FUSE_ROOT_ID, name, 0755, &e) == 0, "mkdir after kill %zu: %s", i,
                              c->last_problem);
                ck_assert(exists(name));
        }
}
END_TEST

/* A crash loop is bounded: the sixth death within a minute with --crash-restarts=5 ends vufsd,
 * which says why and exits as the process died (pid 1 of a pid namespace: 128 + signal). */
START_TEST(test_crash_loop_ends_vufsd) {
        int status;
        char buf[64];

        start("--crash-restarts=2");
        kill_serving(SIGKILL);
        kill_serving(SIGKILL);
        ck_assert_int_eq(kill(fe_harness_serving_pid(h), SIGKILL), 0);
        ck_assert_int_eq(fe_backend_wait(h->backend, 5000, &status), 0);
        ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "vufsd %s",
                      fe_backend_describe(status, buf, sizeof buf));
        ck_assert(fe_vu_closed(fe, 2000));
}
END_TEST

/* --keep-listening: a frontend that left is not brought back by a restart; the next one that
 * connects gets a fresh session from the new process. */
START_TEST(test_restart_after_the_frontend_left) {
        const char *extra[] = { "--crash-restarts=5", "--keep-listening", NULL };
        struct fuse_entry_out e;

        ck_assert_int_eq(fe_harness_spawn_vufsd(h, extra), 0);
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "first", 0755, &e), 0);
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        usleep(100 * 1000); /* the disconnect reaches the serving process */
        kill_serving(SIGKILL);
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "first", &e), 0);
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "second", 0755, &e), 0);
}
END_TEST

/* Without --crash-restarts nothing changes: the death ends vufsd and the connection. */
START_TEST(test_default_is_off) {
        int status;

        start("--log-level=info");
        ck_assert_int_eq(kill(fe_harness_daemon_pid(h), SIGKILL), 0);
        ck_assert_int_eq(fe_backend_wait(h->backend, 5000, &status), 0);
        ck_assert(fe_vu_closed(fe, 2000));
}
END_TEST

/* Waits up to timeout_ms for a notification on fd that has "WATCHDOG=1" in it. */
static bool watchdog_ping(int fd, int timeout_ms) {
        uint64_t until = now_ms() + (uint64_t) timeout_ms;
        char buf[512];

        for (uint64_t now; (now = now_ms()) < until;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t n;

                if (poll(&p, 1, (int) (until - now)) <= 0)
                        continue;
                n = recv(fd, buf, sizeof buf - 1, 0);
                if (n <= 0)
                        continue;
                buf[n] = '\0';
                if (strstr(buf, "WATCHDOG=1"))
                        return true;
        }
        return false;
}

/* A serving process that takes over pings the service manager's watchdog at once, not half an
 * interval later: deaths closer together than that would starve the watchdog and the service
 * manager would kill the unit (the systemd suite's crash case saw it: five kills 5 s apart under
 * WatchdogSec=30s). The interval here is 120 s: only a ping at the takeover arrives in time. */
START_TEST(test_watchdog_pinged_at_takeover) {
        _cleanup_free_ char *path = fe_harness_path(h, "notify.sock");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
        strcpy(sa.sun_path, path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(setenv("NOTIFY_SOCKET", path, 1), 0);
        ck_assert_int_eq(setenv("WATCHDOG_USEC", "120000000", 1), 0);
        start("--crash-restarts=5");
        ck_assert_int_eq(unsetenv("NOTIFY_SOCKET"), 0);
        ck_assert_int_eq(unsetenv("WATCHDOG_USEC"), 0);
        ck_assert_msg(watchdog_ping(fd, 5000), "no WATCHDOG=1 from the first serving process");
        for (int k = 1; k <= 2; k++) {
                kill_serving(SIGKILL);
                ck_assert_msg(watchdog_ping(fd, 5000), "no WATCHDOG=1 within 5 s of the takeover after kill %d", k);
        }
        close(fd);
}
END_TEST

/* ---- a kill at each step of one request's life (vufsd-test-hooks) ---- */

static const char *const steps[] = { "popped", "host", "replied", "pushed", "published" };

/* Starts vufsd-test-hooks set to kill its first serving process at steps[step] of the first request
 * with opcode. */
static void start_killing_at(unsigned step, uint32_t opcode) {
        const char *hooks = getenv("VUFSD_TEST_HOOKS_BINARY");
        char v[64];

        ck_assert_msg(hooks, "VUFSD_TEST_HOOKS_BINARY is not set (meson sets it)");
        ck_assert_int_eq(setenv("VUFSD_BINARY", hooks, 1), 0);
        snprintf(v, sizeof v, "%s:%u", steps[step], opcode);
        ck_assert_int_eq(setenv("VUFSD_TEST_KILL", v, 1), 0);
        start("--crash-restarts=5");
        ck_assert_int_eq(unsetenv("VUFSD_TEST_KILL"), 0);
}

/* The process the request was sent to was killed and another took over. A reply published before
 * the kill may reach the test first: the takeover is waited for. */
static void assert_taken_over(pid_t first) {
        uint64_t until = now_ms() + 5000;
        pid_t now = 0;

        while (now_ms() < until && ((now = fe_harness_serving_pid(h)) == first || now == 0))
                usleep(2000);
        ck_assert_msg(now != first && now > 0, "the serving process was not killed: the hook did not fire");
}

static int symlink_req(const char *name, const char *target) {
        FeFuseReq *req;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&req, c, FUSE_SYMLINK, FUSE_ROOT_ID, sizeof(struct fuse_entry_out)), 0);
        ck_assert_int_eq(fe_fuse_req_add_str(req, name), 0);
        ck_assert_int_eq(fe_fuse_req_add_str(req, target), 0);
        r = fe_fuse_call(c, req);
        fe_fuse_req_free(c, req);
        return r;
}

static int link_req(uint64_t nodeid, const char *newname, struct fuse_entry_out *e) {
        struct fuse_link_in li = { .oldnodeid = nodeid };
        int r = fe_fuse_request(c, FUSE_LINK, FUSE_ROOT_ID,
                                (FeFuseArg[]){ { &li, sizeof li }, { newname, strlen(newname) + 1 } }, 2, e, sizeof *e);

        return r < 0 ? r : 0;
}

/* The content of name in the share ("" when it cannot be read). */
static void read_file(const char *name, char *buf, size_t size) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        FILE *f = fopen(p, "re");
        size_t n = 0;

        if (f) {
                n = fread(buf, 1, size - 1, f);
                fclose(f);
        }
        buf[n] = '\0';
}

/* What test_kill_at_each_step sends. */
typedef enum KillCase {
        KILL_MKDIR,
        KILL_UNLINK,
        KILL_RMDIR,
        KILL_RENAME,
        KILL_SYMLINK,
        KILL_CREATE,      /* O_CREAT of a new name */
        KILL_CREATE_EXCL, /* O_CREAT|O_EXCL of a new name */
        KILL_LINK,
        _KILL_CASE_MAX,
} KillCase;

static const uint32_t kill_case_opcode[_KILL_CASE_MAX] = {
        [KILL_MKDIR] = FUSE_MKDIR,   [KILL_UNLINK] = FUSE_UNLINK, [KILL_RMDIR] = FUSE_RMDIR,
        [KILL_RENAME] = FUSE_RENAME, [KILL_SYMLINK] = FUSE_SYMLINK, [KILL_CREATE] = FUSE_CREATE,
        [KILL_CREATE_EXCL] = FUSE_CREATE, [KILL_LINK] = FUSE_LINK,
};

/* CREATE killed at step: answered with an entry and a handle, the file made once. A handle from
 * the process that took over (the request ran or was answered there: steps popped and host) writes;
 * one from the killed process's reply does not survive it (docs/survival.md). */
static void check_create(unsigned step, uint32_t flags) {
        struct fuse_entry_out e;
        char buf[32];
        uint64_t fh;
        int r;

        r = fe_fuse_create(c, FUSE_ROOT_ID, "newfile", flags | O_WRONLY, 0100644, &e, &fh);
        ck_assert_msg(r == 0, "CREATE 0%o killed %s: %d (%s)", flags, steps[step], r, c->last_problem);
        ck_assert(exists("newfile"));
        ck_assert_msg((e.attr.mode & S_IFMT) == S_IFREG && e.nodeid > FUSE_ROOT_ID, "CREATE's entry: mode 0%o",
                      e.attr.mode);
        if (step > 1)
                return;
        r = fe_fuse_write(c, e.nodeid, fh, 0, "made once", 9);
        ck_assert_msg(r == 9, "WRITE on the handle CREATE killed %s answered: %d (%s)", steps[step], r,
                      c->last_problem);
        read_file("newfile", buf, sizeof buf);
        ck_assert_str_eq(buf, "made once");
}

/* LINK killed at step: its own new name, not EEXIST. Killed right after the pop it runs again with
 * a node id the new process does not know: ESTALE, upon which Linux looks the name up again and
 * retries (LOOKUP_REVAL), as done here. */
static void check_link(unsigned step) {
        struct fuse_entry_out e, l;
        struct stat st;
        int r;

        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "victim", &e), 0);
        r = link_req(e.nodeid, "hardlink", &l);
        if (r == -ESTALE && step == 0) {
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "victim", &e), 0);
                r = link_req(e.nodeid, "hardlink", &l);
        }
        ck_assert_msg(r == 0, "LINK killed %s: %d (%s)", steps[step], r, c->last_problem);
        ck_assert_msg(l.nodeid > FUSE_ROOT_ID && l.attr.nlink == 2, "LINK's entry: node %llu, nlink %u",
                      (unsigned long long) l.nodeid, l.attr.nlink);
        {
                _cleanup_free_ char *p = fe_harness_path(h, "victim");
                ck_assert_int_eq(stat(p, &st), 0);
        }
        ck_assert_int_eq(st.st_nlink, 2);
        ck_assert(exists("hardlink"));
}

/* Each non-idempotent request by name, killed at each step: answered once, as if nothing had
 * happened (its own MKDIR or CREATE|O_EXCL not EEXIST, its own UNLINK not ENOENT, its own LINK
 * not EEXIST), the host changed once. */
START_TEST(test_kill_at_each_step) {
        unsigned step = (unsigned) _i % ELEMENTSOF(steps);
        KillCase kc = (KillCase) ((unsigned) _i / ELEMENTSOF(steps));
        struct fuse_entry_out e;
        pid_t first;
        int r;

        /* What each one acts on exists before vufsd starts. */
        ck_assert_int_eq(fe_harness_put_file(h, "victim", "x"), 0);
        {
                _cleanup_free_ char *d = fe_harness_path(h, "emptydir");
                ck_assert_int_eq(mkdir(d, 0755), 0);
        }
        start_killing_at(step, kill_case_opcode[kc]);
        first = fe_harness_serving_pid(h);
        switch (kc) {
        case KILL_MKDIR:
                r = fe_fuse_mkdir(c, FUSE_ROOT_ID, "newdir", 0755, &e);
                ck_assert_msg(r == 0, "MKDIR killed %s: %d (%s)", steps[step], r, c->last_problem);
                ck_assert(exists("newdir"));
                break;
        case KILL_UNLINK:
                r = fe_fuse_unlink(c, FUSE_ROOT_ID, "victim");
                ck_assert_msg(r == 0, "UNLINK killed %s: %d (%s)", steps[step], r, c->last_problem);
                ck_assert(!exists("victim"));
                break;
        case KILL_RMDIR:
                r = fe_fuse_rmdir(c, FUSE_ROOT_ID, "emptydir");
                ck_assert_msg(r == 0, "RMDIR killed %s: %d (%s)", steps[step], r, c->last_problem);
                ck_assert(!exists("emptydir"));
                break;
        case KILL_RENAME:
                r = fe_fuse_rename(c, FUSE_ROOT_ID, "victim", FUSE_ROOT_ID, "renamed");
                ck_assert_msg(r == 0, "RENAME killed %s: %d (%s)", steps[step], r, c->last_problem);
                ck_assert(!exists("victim") && exists("renamed"));
                break;
        case KILL_SYMLINK:
                r = symlink_req("link", "victim");
                ck_assert_msg(r == 0, "SYMLINK killed %s: %d (%s)", steps[step], r, c->last_problem);
                ck_assert(exists("link"));
                break;
        case KILL_CREATE:
                check_create(step, O_CREAT);
                break;
        case KILL_CREATE_EXCL:
                check_create(step, O_CREAT | O_EXCL);
                break;
        case KILL_LINK:
                check_link(step);
                break;
        case _KILL_CASE_MAX:
                ck_abort();
        }
        assert_taken_over(first);
        ck_assert_uint_eq(c->proto_errors, 0);
        /* The session goes on. */
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "victim", &e), exists("victim") ? 0 : -ENOENT);
}
END_TEST

/* Makes name an empty file in the share, starts vufsd killing at steps[step] of the first request
 * with opcode and opens name with flags; returns the serving process. */
static pid_t open_killing_at(unsigned step, uint32_t opcode, const char *name, uint32_t flags,
                             struct fuse_entry_out *e, uint64_t *fh) {
        ck_assert_int_eq(fe_harness_put_file(h, name, ""), 0);
        start_killing_at(step, opcode);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, name, e), 0);
        ck_assert_int_eq(fe_fuse_open(c, e->nodeid, flags, fh), 0);
        return fe_harness_serving_pid(h);
}

/* The size of name in the share. */
static off_t host_size(const char *name) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        struct stat st;

        ck_assert_int_eq(stat(p, &st), 0);
        return st.st_size;
}

/* The requests that change no name, killed at each step of their life: each answered once, right,
 * on the same node ids and handles, by the process that took over. OPEN, OPENDIR, RELEASE and
 * RELEASEDIR of these record their host call's result (run twice, a release would answer EBADF and
 * an open would leave its first open file to nobody), so only they have a "host" step; the others
 * run again whenever their reply was not written. */
typedef enum PlainCase {
        PLAIN_LOOKUP,
        PLAIN_GETATTR,
        PLAIN_OPEN,
        PLAIN_READ,
        PLAIN_READDIR,
        PLAIN_SETATTR,
        PLAIN_SETLK,
        PLAIN_FSYNC,
        PLAIN_RELEASE,
        PLAIN_RELEASEDIR,
        PLAIN_OPENDIR,
        _PLAIN_MAX,
} PlainCase;

static const uint32_t plain_opcode[_PLAIN_MAX] = {
        [PLAIN_LOOKUP] = FUSE_LOOKUP,   [PLAIN_GETATTR] = FUSE_GETATTR, [PLAIN_OPEN] = FUSE_OPEN,
        [PLAIN_READ] = FUSE_READ,       [PLAIN_READDIR] = FUSE_READDIR, [PLAIN_SETATTR] = FUSE_SETATTR,
        [PLAIN_SETLK] = FUSE_SETLK,     [PLAIN_FSYNC] = FUSE_FSYNC,     [PLAIN_RELEASE] = FUSE_RELEASE,
        [PLAIN_RELEASEDIR] = FUSE_RELEASEDIR, [PLAIN_OPENDIR] = FUSE_OPENDIR,
};

/* Four steps each, and the host step of the four that record their result. */
static const PlainCase plain_recorded[] = { PLAIN_RELEASE, PLAIN_RELEASEDIR, PLAIN_OPEN, PLAIN_OPENDIR };
#define PLAIN_CASES (_PLAIN_MAX * 4 + (int) ELEMENTSOF(plain_recorded))

/* The _i-th of the PLAIN_CASES pairs of opcode and step. */
static void plain_case(int i, PlainCase *k, unsigned *step) {
        static const unsigned no_host[] = { 0, 2, 3, 4 };

        if (i >= _PLAIN_MAX * 4) {
                *k = plain_recorded[i - _PLAIN_MAX * 4];
                *step = 1;
                return;
        }
        *k = (PlainCase) (i / 4);
        *step = no_host[i % 4];
}

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

/* How many fds of any process are open files (not O_PATH) of st's inode. */
static int open_files_of(const struct stat *st) {
        _cleanup_(closedirp) DIR *proc = opendir("/proc");
        struct dirent *p;
        int n = 0;

        ck_assert_ptr_nonnull(proc);
        while ((p = readdir(proc))) {
                char dir[300];
                DIR *fds;
                struct dirent *f;
                if (p->d_name[0] < '1' || p->d_name[0] > '9')
                        continue;
                snprintf(dir, sizeof dir, "/proc/%s/fd", p->d_name);
                fds = opendir(dir);
                if (!fds)
                        continue; /* gone meanwhile */
                while ((f = readdir(fds))) {
                        char link[600], info[4096];
                        struct stat t;
                        FILE *fi;
                        unsigned long flags = 0;
                        snprintf(link, sizeof link, "%s/%s", dir, f->d_name);
                        if (f->d_name[0] == '.' || stat(link, &t) < 0 || t.st_dev != st->st_dev || t.st_ino != st->st_ino)
                                continue;
                        snprintf(link, sizeof link, "/proc/%s/fdinfo/%s", p->d_name, f->d_name);
                        fi = fopen(link, "re");
                        if (!fi)
                                continue;
                        while (fgets(info, sizeof info, fi))
                                if (sscanf(info, "flags: %lo", &flags) == 1)
                                        break;
                        fclose(fi);
                        if (!(flags & O_PATH))
                                n++;
                }
                closedir(fds);
        }
        return n;
}

/* No process holds name of the share open (the keeper closes a released handle's copy once its
 * journal entry is removed: within 2 s). */
static void assert_nothing_open(const char *name) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        struct stat st;
        int n = 0;

        ck_assert_int_eq(stat(p, &st), 0);
        for (int k = 0; k < 200 && (n = open_files_of(&st)) > 0; k++)
                usleep(10000);
        ck_assert_msg(n == 0, "%d open files of %s left after the guest released all its handles", n, name);
}

START_TEST(test_plain_request_killed_at_each_step) {
        PlainCase k;
        unsigned step;
        _cleanup_free_ char *path = NULL;
        struct fuse_entry_out e, d;
        struct fuse_attr_out a;
        uint64_t fh = 0, dfh = 0;
        uint8_t buf[4096];
        pid_t first;
        int r = 0;

        plain_case(_i, &k, &step);
        ck_assert_int_eq(fe_harness_put_file(h, "file", "0123456789"), 0);
        path = fe_harness_path(h, "dir");
        ck_assert_int_eq(mkdir(path, 0755), 0);
        free(path);
        path = fe_harness_path(h, "file");
        start_killing_at(step, plain_opcode[k]);
        first = fe_harness_serving_pid(h);
        if (k != PLAIN_LOOKUP)
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "file", &e), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "dir", &d), 0);
        if (k >= PLAIN_READ && k != PLAIN_READDIR && k != PLAIN_SETATTR && k != PLAIN_RELEASEDIR && k != PLAIN_OPENDIR)
                ck_assert_int_eq(fe_fuse_open(c, e.nodeid, O_RDWR, &fh), 0);
        if (k == PLAIN_RELEASEDIR)
                ck_assert_int_eq(fe_fuse_opendir(c, d.nodeid, &dfh), 0);
        switch (k) {
        case PLAIN_LOOKUP:
                r = fe_fuse_lookup(c, FUSE_ROOT_ID, "file", &e);
                break;
        case PLAIN_GETATTR:
                r = fe_fuse_getattr(c, e.nodeid, &a);
                break;
        case PLAIN_OPEN:
                r = fe_fuse_open(c, e.nodeid, O_RDWR, &fh);
                break;
        case PLAIN_READ:
                r = fe_fuse_read(c, e.nodeid, fh, 2, buf, 4) == 4 && memcmp(buf, "2345", 4) == 0 ? 0 : -EIO;
                break;
        case PLAIN_READDIR:
                ck_assert_int_eq(fe_fuse_opendir(c, FUSE_ROOT_ID, &dfh), 0);
                r = fe_fuse_readdir(c, false, FUSE_ROOT_ID, dfh, 0, buf, sizeof buf);
                r = r > 0 && memmem(buf, (size_t) r, "file", 4) ? 0 : -EIO;
                break;
        case PLAIN_SETATTR:
                r = fe_fuse_setattr_size(c, e.nodeid, 4, &a);
                break;
        case PLAIN_SETLK:
                r = fe_fuse_setlk(c, e.nodeid, fh, 0x77, false, F_WRLCK, 0, 9);
                break;
        case PLAIN_FSYNC:
                r = fe_fuse_fsync(c, e.nodeid, fh);
                break;
        case PLAIN_RELEASE:
                r = fe_fuse_release(c, e.nodeid, fh, false);
                break;
        case PLAIN_RELEASEDIR:
                r = fe_fuse_release(c, d.nodeid, dfh, true);
                break;
        case PLAIN_OPENDIR:
                r = fe_fuse_opendir(c, d.nodeid, &dfh);
                break;
        default:
                ck_abort();
        }
        ck_assert_msg(r == 0, "opcode %u killed %s: %d (%s)", plain_opcode[k], steps[step], r, c->last_problem);
        assert_taken_over(first);
        /* What the guest holds works in the new process. */
        ck_assert_int_eq(fe_fuse_getattr(c, e.nodeid, &a), 0);
        ck_assert_uint_eq(a.attr.size, k == PLAIN_SETATTR ? 4 : 10);
        if (k == PLAIN_SETLK)
                ck_assert_int_eq(test_host_lock_type(path, 0, 10), F_WRLCK);
        if (fh && k != PLAIN_RELEASE) {
                ck_assert_int_eq(fe_fuse_write(c, e.nodeid, fh, 0, "AB", 2), 2);
                ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
        }
        if (k == PLAIN_OPENDIR) {
                r = fe_fuse_readdir(c, false, d.nodeid, dfh, 0, buf, sizeof buf);
                ck_assert_int_gt(r, 0);
                ck_assert_int_eq(fe_fuse_release(c, d.nodeid, dfh, true), 0);
        }
        if (k == PLAIN_RELEASE || k == PLAIN_RELEASEDIR) /* released once, whichever process did it */
                ck_assert_int_eq(k == PLAIN_RELEASE ? fe_fuse_release(c, e.nodeid, fh, false)
                                                     : fe_fuse_release(c, d.nodeid, dfh, true),
                                 -EBADF);
        if (k == PLAIN_SETLK)
                ck_assert_int_eq(test_host_lock_type(path, 0, 10), F_UNLCK);
        /* Every handle the guest got is released: no open file of either is left in any process
         * (the serving one, the keeper's copies), as none would be without the death. */
        assert_nothing_open("file");
        assert_nothing_open("dir");
        ck_assert_uint_eq(c->proto_errors, 0);
}
END_TEST

/* A request on an open file killed at each step of its life: answered with its result, the host
 * changed once. A WRITE in append mode (_i 0..4): its count, the bytes on the host once. A
 * FALLOCATE (_i 5..9): 0, the file allocated (a COLLAPSE_RANGE or INSERT_RANGE must not run
 * twice). Killed after the pop, the request runs in the next process, on the handle it restored
 * from the journal; killed later, it is answered from its recorded result. */
START_TEST(test_file_request_answered_once) {
        unsigned step = (unsigned) _i % 5; /* popped, host, replied, pushed, published */
        bool write = _i < 5;
        struct fuse_fallocate_in fi = { .offset = 0, .length = 65536 };
        struct fuse_entry_out e;
        pid_t first = open_killing_at(step, write ? FUSE_WRITE : FUSE_FALLOCATE, "file",
                                      write ? O_WRONLY | O_APPEND : O_WRONLY, &e, &fi.fh);
        int r;

        if (write)
                r = fe_fuse_write(c, e.nodeid, fi.fh, 0, "0123456789", 10);
        else
                r = fe_fuse_request(c, FUSE_FALLOCATE, e.nodeid, (FeFuseArg[]){ { &fi, sizeof fi } }, 1, NULL, 0);
        ck_assert_msg(r == (write ? 10 : 0), "%s killed %s: %d (%s)", write ? "WRITE" : "FALLOCATE", steps[step], r,
                      c->last_problem);
        assert_taken_over(first);
        ck_assert_int_eq(host_size("file"), write ? 10 : 65536);
}
END_TEST

/* A COPY_FILE_RANGE killed at each step: answered with its count, the bytes copied (after the pop:
 * run by the next process on the handles it restored). */
START_TEST(test_copy_file_range_answered_once) {
        unsigned step = (unsigned) _i; /* popped, host, replied, pushed, published */
        struct fuse_copy_file_range_in ci = { .len = 10 };
        struct fuse_entry_out e, src;
        struct fuse_write_out wo = { 0 };
        char buf[32];
        pid_t first = open_killing_at(step, FUSE_COPY_FILE_RANGE, "copy", O_WRONLY, &e, &ci.fh_out);
        int r;

        ck_assert_int_eq(fe_harness_put_file(h, "source", "0123456789"), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "source", &src), 0);
        ck_assert_int_eq(fe_fuse_open(c, src.nodeid, O_RDONLY, &ci.fh_in), 0);
        ci.nodeid_out = e.nodeid;
        r = fe_fuse_request(c, FUSE_COPY_FILE_RANGE, src.nodeid, (FeFuseArg[]){ { &ci, sizeof ci } }, 1, &wo, sizeof wo);
        ck_assert_msg(r == (int) sizeof wo && wo.size == 10, "COPY_FILE_RANGE killed %s: %d (%s)", steps[step], r, c->last_problem);
        assert_taken_over(first);
        read_file("copy", buf, sizeof buf);
        ck_assert_str_eq(buf, "0123456789");
}
END_TEST

/* SETXATTR with XATTR_CREATE (_i 0..3) and REMOVEXATTR (_i 4..7) killed after the host call or
 * later: answered 0, not EEXIST or ENODATA for their own change. */
START_TEST(test_xattr_answered_once) {
        unsigned step = 1 + (unsigned) _i % 4; /* host, replied, pushed, published */
        bool remove = _i >= 4;
        const char *extra[] = { "--crash-restarts=5", "--xattr", NULL };
        struct fuse_setxattr_in si = { .size = 1, .flags = XATTR_CREATE };
        _cleanup_free_ char *path = NULL;
        const char *hooks = getenv("VUFSD_TEST_HOOKS_BINARY");
        struct fuse_entry_out e;
        char v[64], got[8];
        pid_t first;
        int r;

        ck_assert_int_eq(fe_harness_put_file(h, "attrs", ""), 0);
        path = fe_harness_path(h, "attrs");
        if (remove)
                ck_assert_int_eq(setxattr(path, "user.survive", "x", 1, 0), 0);
        ck_assert_ptr_nonnull(hooks);
        ck_assert_int_eq(setenv("VUFSD_BINARY", hooks, 1), 0);
        snprintf(v, sizeof v, "%s:%u", steps[step], remove ? FUSE_REMOVEXATTR : FUSE_SETXATTR);
        ck_assert_int_eq(setenv("VUFSD_TEST_KILL", v, 1), 0);
        ck_assert_int_eq(fe_harness_spawn_vufsd(h, extra), 0);
        ck_assert_int_eq(unsetenv("VUFSD_TEST_KILL"), 0);
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "attrs", &e), 0);
        first = fe_harness_serving_pid(h);
        if (remove)
                r = fe_fuse_request(c, FUSE_REMOVEXATTR, e.nodeid, (FeFuseArg[]){ { "user.survive", 13 } }, 1, NULL, 0);
        else
                r = fe_fuse_request(c, FUSE_SETXATTR, e.nodeid,
                                    (FeFuseArg[]){ { &si, (c->init.flags & FUSE_SETXATTR_EXT) ? sizeof si : 8 },
                                                   { "user.survive", 13 },
                                                   { "x", 1 } },
                                    3, NULL, 0);
        ck_assert_msg(r == 0, "%s killed %s: %d (%s)", remove ? "REMOVEXATTR" : "SETXATTR|XATTR_CREATE", steps[step], r,
                      c->last_problem);
        assert_taken_over(first);
        ck_assert_int_eq(getxattr(path, "user.survive", got, sizeof got), remove ? -1 : 1);
}
END_TEST

/* SIGKILL at a random moment of a request in flight (MKDIR, or CREATE with O_EXCL), 25 times: each
 * answered 0 exactly once, the name there; the pause a guest sees per kill (from the kill to the
 * reply of a LOOKUP sent right after it) is printed, median and worst. */
static void kill_storm(uint32_t opcode) {
        enum { KILLS = 25 };
        uint64_t pause_us[KILLS];
        struct fuse_entry_out e;

        srand(35);
        start("--crash-restarts=64");
        for (unsigned k = 0; k < KILLS; k++) {
                struct fuse_mkdir_in mi = { .mode = 0755 };
                struct fuse_create_in ci = { .flags = O_CREAT | O_EXCL | O_WRONLY, .mode = 0100644 };
                FeFuseReq *req, *done;
                struct timespec t0, t1;
                char name[16];
                pid_t old = fe_harness_serving_pid(h);

                snprintf(name, sizeof name, "s%u", k);
                if (opcode == FUSE_MKDIR) {
                        ck_assert_int_eq(fe_fuse_req_new(&req, c, opcode, FUSE_ROOT_ID, sizeof e), 0);
                        ck_assert_int_eq(fe_fuse_req_add(req, &mi, sizeof mi), 0);
                } else {
                        ck_assert_int_eq(fe_fuse_req_new(&req, c, opcode, FUSE_ROOT_ID,
                                                         sizeof e + sizeof(struct fuse_open_out)), 0);
                        ck_assert_int_eq(fe_fuse_req_add(req, &ci, sizeof ci), 0);
                }
                ck_assert_int_eq(fe_fuse_req_add_str(req, name), 0);
                ck_assert_int_eq(fe_fuse_submit(c, req, -1), 0);
                usleep((useconds_t) (rand() % 400));
                ck_assert_int_gt(old, 0);
                clock_gettime(CLOCK_MONOTONIC, &t0);
                ck_assert_int_eq(kill(old, SIGKILL), 0);
                while (!req->done)
                        ck_assert_int_eq(fe_fuse_wait(c, req->queue, 10000, &done), 0);
                ck_assert_msg(req->status == 0 && req->oh.error == 0, "%s %s around kill %u: status %d error %d",
                              opcode == FUSE_MKDIR ? "MKDIR" : "CREATE|O_EXCL", name, k, req->status, req->oh.error);
                fe_fuse_req_free(c, req);
                ck_assert(exists(name));
                assert_taken_over(old);
                ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, name, &e), 0);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                pause_us[k] = (uint64_t) ((int64_t) (t1.tv_sec - t0.tv_sec) * 1000000 +
                                          ((int64_t) t1.tv_nsec - (int64_t) t0.tv_nsec) / 1000);
        }
        ck_assert_uint_eq(c->proto_errors, 0);
        qsort(pause_us, KILLS, sizeof pause_us[0], fe_cmp_u64);
        fprintf(stderr, "pause per kill over %d kills: median %.1f ms, worst %.1f ms\n", KILLS,
                (double) pause_us[KILLS / 2] / 1000.0, (double) pause_us[KILLS - 1] / 1000.0);
        ck_assert_msg(pause_us[KILLS - 1] < 5000000, "a kill paused the guest %.1f s", (double) pause_us[KILLS - 1] / 1e6);
}

START_TEST(test_kill_storm) {
        kill_storm(FUSE_MKDIR);
}
END_TEST

START_TEST(test_kill_storm_create_excl) {
        kill_storm(FUSE_CREATE);
}
END_TEST

static Suite *survive_suite(void) {
        Suite *s = suite_create("frontend-survive");
        TCase *tc = tcase_create("survive");

        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_sigkill_keeps_the_connection);
        tcase_add_test(tc, test_signals_in_a_row);
        tcase_add_test(tc, test_session_survives_a_kill);
        tcase_add_test(tc, test_moved_node_answers_estale);
        tcase_add_test(tc, test_deleted_file_kept_open);
        tcase_add_test(tc, test_crash_loop_ends_vufsd);
        tcase_add_test(tc, test_default_is_off);
        tcase_add_test(tc, test_watchdog_pinged_at_takeover);
        tcase_add_test(tc, test_restart_after_the_frontend_left);
        tcase_add_loop_test(tc, test_kill_at_each_step, 0, _KILL_CASE_MAX * ELEMENTSOF(steps));
        tcase_add_loop_test(tc, test_file_request_answered_once, 0, 10);
        tcase_add_loop_test(tc, test_plain_request_killed_at_each_step, 0, PLAIN_CASES);
        tcase_add_loop_test(tc, test_copy_file_range_answered_once, 0, ELEMENTSOF(steps));
        tcase_add_loop_test(tc, test_xattr_answered_once, 0, 8);
        tcase_add_test(tc, test_kill_storm);
        tcase_add_test(tc, test_kill_storm_create_excl);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(survive_suite)
