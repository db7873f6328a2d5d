/* test-frontend-handles.c: --inode-file-handles in the running daemon (issue 16): with handles the
 * daemon's open fds stay flat however many inodes the guest has looked up, and grow by one per
 * inode with never; a handle whose file was deleted (or whose inode number went to a new file)
 * answers ESTALE, never the other file; mandatory refuses a filesystem without handles at start,
 * prefer falls back per share and per inode. The shares are filesystems of their own (tmpfs,
 * ramfs, a loop-mounted ext4): a subdirectory of a larger filesystem gets no handles (the
 * "shocker" guard), which is checked too. Needs root (mounts). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

#define N_FILES 1200

static FeHarness *h;
static char loop_image[256];

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
        loop_image[0] = '\0';
}

static void teardown(void) {
        /* Lazily, with every submount: the daemon may still be exiting. */
        (void)umount2(h->share, MNT_DETACH);
        if (loop_image[0])
                unlink(loop_image);
        h = fe_harness_free(h);
}

static void mount_fs(const char *type, const char *where) {
        int r = mount(type, where, type, 0, type[0] == 't' ? "mode=0755" : NULL);
        ck_assert_msg(r == 0, "mount -t %s %s: %m (this test needs root)", type, where);
}

/* An ext4 of its own on a loop device: it recycles a freed inode number for the next file. */
static void mount_ext4(const char *where) {
        char cmd[2048];
        int r;

        snprintf(loop_image, sizeof loop_image, "%s.ext4", h->dir);
        snprintf(cmd, sizeof cmd,
                 "truncate -s 32M '%s' && mkfs.ext4 -q -F -N 256 '%s' >/dev/null 2>&1 && mount -o loop '%s' '%s'",
                 loop_image, loop_image, loop_image, where);
        r = system(cmd);
        ck_assert_msg(r == 0, "%s: status %d (needs root, e2fsprogs and a loop device)", cmd, r);
}

static void host_file(const char *name, const char *text) {
        char *p = fe_harness_path(h, name);
        int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_msg(fd >= 0, "%s: %m", p);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        free(p);
}

static unsigned open_fds(pid_t pid) {
        int n = fe_harness_count_fds(pid);

        ck_assert_msg(n >= 0, "/proc/%d/fd: %s", (int)pid, strerror(-n));
        return (unsigned)n;
}

static FeFuse *start(const char *const *extra, Frontend **ret_fe) {
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        int r;

        r = fe_harness_spawn_vufsd(h, extra);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        r = fe_connect_and_start(&fe, h->socket_path, NULL);
        ck_assert_msg(r == 0, "connect: %s", fe ? fe->error : strerror(-r));
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        r = fe_fuse_init(c);
        ck_assert_msg(r == 0, "INIT: %d %s", r, c->last_problem);
        *ret_fe = fe;
        return c;
}

static void stop(FeFuse *c, Frontend *fe) {
        ck_assert_msg(c->proto_errors == 0, "%s", c->last_problem);
        fe_fuse_free(c);
        fe_free(fe);
        ck_assert_int_eq(fe_backend_wait(h->backend, 10000, NULL), 0);
}

/* Looks up n files of parent (host names f-0..) without forgetting any, checks each answer, and
 * returns how many fds the daemon opened meanwhile. */
static int lookups_fd_growth(FeFuse *c, uint64_t parent, const char *dir, unsigned n) {
        unsigned before = open_fds(fe_harness_daemon_pid(h)), after;
        char name[64], *p;
        struct fuse_entry_out e;
        struct fuse_attr_out a;
        struct stat st;
        int r;

        for (unsigned i = 0; i < n; i++) {
                snprintf(name, sizeof name, "f-%u", i);
                r = fe_fuse_lookup(c, parent, name, &e);
                ck_assert_msg(r == 0, "LOOKUP %s: %d %s", name, r, c->last_problem);
                snprintf(name, sizeof name, "%s/f-%u", dir, i);
                p = fe_harness_path(h, name);
                ck_assert_int_eq(lstat(p, &st), 0);
                free(p);
                ck_assert_uint_eq(e.attr.ino, st.st_ino);
                if (i % 16 == 0) { /* and the inode opens again (by handle, if so remembered) */
                        r = fe_fuse_getattr(c, e.nodeid, &a);
                        ck_assert_msg(r == 0, "GETATTR %s: %d %s", name, r, c->last_problem);
                        ck_assert_uint_eq(a.attr.ino, st.st_ino);
                }
        }
        after = open_fds(fe_harness_daemon_pid(h));
        return (int)after - (int)before;
}

static void make_files(const char *dir, unsigned n) {
        char name[128];

        for (unsigned i = 0; i < n; i++) {
                snprintf(name, sizeof name, "%s%sf-%u", dir, *dir ? "/" : "", i);
                host_file(name, "x");
        }
}

/* vufsd exits with status 1 before it serves (the socket may or may not have been made). */
static void assert_start_fails(const char *const *extra, const char *what) {
        char buf[64];
        int r = fe_harness_spawn_vufsd(h, extra), st = -1;

        if (r == -ECHILD)
                return; /* exited before listening: the harness reaped it */
        ck_assert_msg(r == 0, "%s: spawn %s", what, strerror(-r));
        ck_assert_int_eq(fe_backend_wait(h->backend, 10000, &st), 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: vufsd %s, want exit 1", what,
                      fe_backend_describe(st, buf, sizeof buf));
}

static int growth_with(const char *const *extra, unsigned n) {
        Frontend *fe;
        FeFuse *c = start(extra, &fe);
        int g = lookups_fd_growth(c, FUSE_ROOT_ID, "", n);
        stop(c, fe);
        return g;
}

/* prefer (the default) on a share of its own: N lookups open no fd that stays; never: one each. */
START_TEST(test_fds_flat_with_handles) {
        const char *const prefer[] = { "--bus=none", NULL };
        const char *const never[] = { "--bus=none", "--inode-file-handles=never", NULL };
        const char *const mandatory[] = { "--bus=none", "--inode-file-handles=mandatory", "--sandbox=chroot", NULL };
        int g;

        mount_fs("tmpfs", h->share);
        make_files("", N_FILES);
        g = growth_with(prefer, N_FILES);
        ck_assert_msg(g < 16, "prefer: %d fds more after %d lookups", g, N_FILES);
        g = growth_with(mandatory, N_FILES);
        ck_assert_msg(g < 16, "mandatory (chroot sandbox): %d fds more after %d lookups", g, N_FILES);
        g = growth_with(never, N_FILES);
        ck_assert_msg(g >= N_FILES, "never: only %d fds more after %d lookups", g, N_FILES);
}
END_TEST

/* A share that is a subdirectory of a larger filesystem: a handle could open any file of it, so
 * prefer keeps fds (as never), unless --allow-handles-beyond-share; mandatory refuses to start. */
START_TEST(test_subtree_share_gets_no_handles) {
        const char *const prefer[] = { "--bus=none", NULL };
        const char *const beyond[] = { "--bus=none", "--allow-handles-beyond-share", NULL };
        const char *const mandatory[] = { "--bus=none", "--inode-file-handles=mandatory", NULL };
        int g;

        make_files("", N_FILES);
        g = growth_with(prefer, N_FILES);
        ck_assert_msg(g >= N_FILES, "prefer on a subtree share: only %d fds more after %d lookups", g, N_FILES);
        g = growth_with(beyond, N_FILES);
        ck_assert_msg(g < 16, "--allow-handles-beyond-share: %d fds more after %d lookups", g, N_FILES);
        assert_start_fails(mandatory, "mandatory on a subtree share");
}
END_TEST

/* ramfs makes no file handles: mandatory fails at start, prefer serves with fds. A ramfs mounted
 * below a tmpfs share: its inodes keep fds (per inode), the tmpfs ones do not. */
START_TEST(test_filesystem_without_handles) {
        const char *const prefer[] = { "--bus=none", NULL };
        const char *const mandatory[] = { "--bus=none", "--inode-file-handles=mandatory", NULL };
        struct fuse_entry_out e;
        char *sub;
        Frontend *fe;
        FeFuse *c;
        int r, g;

        mount_fs("ramfs", h->share);
        assert_start_fails(mandatory, "mandatory on ramfs");
        make_files("", 200);
        g = growth_with(prefer, 200);
        ck_assert_msg(g >= 200, "prefer on ramfs: only %d fds more after 200 lookups", g);
        ck_assert_int_eq(umount2(h->share, MNT_DETACH), 0);

        mount_fs("tmpfs", h->share);
        sub = fe_harness_path(h, "sub");
        ck_assert_int_eq(mkdir(sub, 0755), 0);
        mount_fs("ramfs", sub);
        free(sub);
        make_files("", 300);
        make_files("sub", 300);
        c = start(prefer, &fe);
        g = lookups_fd_growth(c, FUSE_ROOT_ID, "", 300);
        ck_assert_msg(g < 16, "tmpfs part: %d fds more after 300 lookups", g);
        r = fe_fuse_lookup(c, FUSE_ROOT_ID, "sub", &e);
        ck_assert_msg(r == 0, "LOOKUP sub: %d %s", r, c->last_problem);
        g = lookups_fd_growth(c, e.nodeid, "sub", 300);
        ck_assert_msg(g >= 300, "ramfs submount: only %d fds more after 300 lookups", g);
        stop(c, fe);
}
END_TEST

static int reply_errno(int r) {
        return r < 0 ? -r : 0;
}

/* The file behind a remembered nodeid deleted on the host: GETATTR and OPEN answer ESTALE (or
 * ENOENT), and a new file of the same name is a new node, never reached through the old one. */
static void check_stale(const char *const *extra, bool recycle) {
        struct fuse_entry_out old, neu;
        struct fuse_attr_out a;
        struct stat st;
        char *p = fe_harness_path(h, "victim"), name[32];
        uint64_t fh;
        Frontend *fe;
        FeFuse *c;
        int r;

        host_file("victim", "old");
        c = start(extra, &fe);
        r = fe_fuse_lookup(c, FUSE_ROOT_ID, "victim", &old);
        ck_assert_msg(r == 0, "LOOKUP: %d %s", r, c->last_problem);
        ck_assert_int_eq(fe_fuse_getattr(c, old.nodeid, &a), 0);
        ck_assert_int_eq(unlink(p), 0);
        /* Until a new file has the old inode number (ext4 hands the freed one out again). */
        for (unsigned k = 0; k < 64; k++) {
                host_file("victim", "new");
                ck_assert_int_eq(stat(p, &st), 0);
                if (!recycle || st.st_ino == old.attr.ino)
                        break;
                snprintf(name, sizeof name, "keep-%u", k);
                char *q = fe_harness_path(h, name);
                ck_assert_int_eq(rename(p, q), 0); /* keeps that number busy; try the next file */
                free(q);
        }
        if (recycle)
                ck_assert_msg(st.st_ino == old.attr.ino, "no inode number recycled: the case is not reached");
        r = fe_fuse_getattr(c, old.nodeid, &a);
        ck_assert_msg(r == -ESTALE || r == -ENOENT, "GETATTR of the deleted file's node: %d (%s)", r,
                      r == 0 ? "answered" : strerror(reply_errno(r)));
        r = fe_fuse_open(c, old.nodeid, O_RDONLY, &fh);
        ck_assert_msg(r == -ESTALE || r == -ENOENT, "OPEN of the deleted file's node: %d", r);
        r = fe_fuse_setattr_size(c, old.nodeid, 0, &a);
        ck_assert_msg(r == -ESTALE || r == -ENOENT, "SETATTR of the deleted file's node: %d", r);
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_int_eq(st.st_size, 3); /* the new file untouched */
        r = fe_fuse_lookup(c, FUSE_ROOT_ID, "victim", &neu);
        ck_assert_msg(r == 0, "LOOKUP of the new file: %d %s", r, c->last_problem);
        ck_assert_uint_ne(neu.nodeid, old.nodeid);
        ck_assert_int_eq(fe_fuse_getattr(c, neu.nodeid, &a), 0);
        ck_assert_uint_eq(a.attr.ino, st.st_ino);
        free(p);
        stop(c, fe);
}

START_TEST(test_stale_handle_tmpfs) {
        const char *const prefer[] = { "--bus=none", NULL };
        mount_fs("tmpfs", h->share);
        check_stale(prefer, false);
}
END_TEST

START_TEST(test_stale_handle_recycled_inode) {
        const char *const prefer[] = { "--bus=none", "--inode-file-handles=mandatory", NULL };
        mount_ext4(h->share);
        check_stale(prefer, true);
}
END_TEST

/* Issue 31 finding 4: a mount the host adds under the share after the daemon started, bind-mounting
 * a subtree of the root filesystem (the harness directory's), gets a mount id the kernel frees and
 * hands out again: the ids of the mounts pivot_root detached were in the daemon's start list of
 * whole filesystems. Such a mount must never get a mount fd (a handle on it reaches every file of
 * the root filesystem): its inodes keep O_PATH fds, one per lookup. Several mounts, so that some
 * take an id freed at the daemon's start. The share is a shared mount, so the host's later mounts
 * reach the daemon's (slave) namespace. */
START_TEST(test_later_subtree_mount_gets_no_handles) {
        const char *const mandatory[] = { "--bus=none", "--inode-file-handles=mandatory", NULL };
        const char *const prefer[] = { "--bus=none", NULL };
        enum { N_MOUNTS = 24, N_SUB = 24 };
        const char *const *modes[] = { prefer, mandatory };
        char outside[512], name[64], *p;
        struct fuse_entry_out e;
        Frontend *fe;
        FeFuse *c;
        int r, g;

        mount_fs("tmpfs", h->share);
        ck_assert_int_eq(mount(NULL, h->share, NULL, MS_SHARED, NULL), 0);
        snprintf(outside, sizeof outside, "%s/outside", h->dir);
        ck_assert_int_eq(mkdir(outside, 0755), 0);
        for (unsigned i = 0; i < N_SUB; i++) {
                char f[600];
                snprintf(f, sizeof f, "%s/f-%u", outside, i);
                int fd = open(f, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
                ck_assert_int_ge(fd, 0);
                close(fd);
        }
        for (unsigned m = 0; m < ELEMENTSOF(modes); m++) {
                c = start(modes[m], &fe);
                for (unsigned k = 0; k < N_MOUNTS; k++) {
                        snprintf(name, sizeof name, "sub-%u-%u", m, k);
                        p = fe_harness_path(h, name);
                        ck_assert_int_eq(mkdir(p, 0755), 0);
                        ck_assert_msg(mount(outside, p, NULL, MS_BIND, NULL) == 0, "bind %s: %m", p);
                        free(p);
                        r = fe_fuse_lookup(c, FUSE_ROOT_ID, name, &e);
                        if (m == 1) {
                                /* mandatory: an inode that cannot have a handle (the mount's root
                                 * already) is the lookup's error */
                                ck_assert_msg(r == -EOPNOTSUPP, "mandatory, LOOKUP %s, a later subtree mount: %d",
                                              name, r);
                                continue;
                        }
                        ck_assert_msg(r == 0, "LOOKUP %s: %d %s", name, r, c->last_problem);
                        g = lookups_fd_growth(c, e.nodeid, name, N_SUB);
                        ck_assert_msg(g >= N_SUB, "%s, a later bind mount of a root-filesystem subtree: only %d fds more "
                                      "after %d lookups (remembered by handle through a mount fd)", name, g, N_SUB);
                }
                stop(c, fe);
        }
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("handles");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, test_fds_flat_with_handles);
        tcase_add_test(tc, test_subtree_share_gets_no_handles);
        tcase_add_test(tc, test_filesystem_without_handles);
        tcase_add_test(tc, test_stale_handle_tmpfs);
        tcase_add_test(tc, test_stale_handle_recycled_inode);
        tcase_add_test(tc, test_later_subtree_mount_gets_no_handles);
        suite_add_tcase(s, tc);
}

TEST_MAIN("frontend-handles", add_tests)
