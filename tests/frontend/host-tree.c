/* host-tree.c: Check helpers of the frontend tests where the host changes the share under a guest. */
#include "host-tree.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test-main.h"
#include "util.h"

const char *const fe_tree_sandboxes[3] = { "namespace", "chroot", "none" };

void fe_host_path(FeHarness *h, char *buf, size_t size, const char *rel) {
        snprintf(buf, size, "%s/%s", h->dir, rel);
}

void fe_host_mkdir(FeHarness *h, const char *rel) {
        char p[512];
        fe_host_path(h, p, sizeof p, rel);
        ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s: %m", p);
}

void fe_host_write(FeHarness *h, const char *rel, const char *data) {
        char p[512];
        int fd;

        fe_host_path(h, p, sizeof p, rel);
        fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_msg(fd >= 0, "create %s: %m", p);
        ck_assert_int_eq(write(fd, data, strlen(data)), (ssize_t) strlen(data));
        close(fd);
}

void fe_host_rename(FeHarness *h, const char *from, const char *to) {
        char a[512], b[512];
        fe_host_path(h, a, sizeof a, from);
        fe_host_path(h, b, sizeof b, to);
        ck_assert_msg(rename(a, b) == 0, "rename %s %s: %m", a, b);
}

void fe_host_symlink(FeHarness *h, const char *target, const char *rel) {
        char p[512];
        fe_host_path(h, p, sizeof p, rel);
        ck_assert_msg(symlink(target, p) == 0, "symlink %s: %m", p);
}

void fe_host_make_tree(FeHarness *h, const char *secret, const char *inside) {
        fe_host_mkdir(h, "outside");
        fe_host_write(h, "outside/secret.txt", secret);
        fe_host_mkdir(h, "share/a");
        fe_host_mkdir(h, "share/a/b");
        fe_host_mkdir(h, "share/a/b/c");
        fe_host_write(h, "share/a/b/inner.txt", inside);
        fe_host_write(h, "share/file", inside);
        fe_host_mkdir(h, "share/d");
        fe_host_write(h, "share/d/f", inside);
}

void fe_tree_add_modes(TCase *tc, const TTest *t, bool root_only) {
        const int n = (int) ELEMENTSOF(fe_tree_sandboxes);

        if (test_have_root())
                tcase_add_loop_test(tc, t, 0, 2 * n);
        else {
                if (!root_only)
                        tcase_add_loop_test(tc, t, 0, n);
                fprintf(stderr, "SKIP %s%s: needs root\n", t->name, root_only ? "" : " as nobody");
        }
}

static uid_t chown_to;

static int chown_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        ck_assert_msg(lchown(path, chown_to, chown_to) == 0, "chown %s: %m", path);
        return 0;
}

void fe_host_chown_share(FeHarness *h, uid_t uid) {
        chown_to = uid; /* nftw() takes no user data; a test runs one case at a time */
        ck_assert_int_eq(nftw(h->share, chown_one, 16, FTW_PHYS), 0);
}

void fe_tree_start(FeHarness *h, const char *const *argv, bool nobody, Frontend **ret_fe, FeFuse **ret_c) {
        int r;

        if (nobody) {
                fe_host_chown_share(h, FE_NOBODY);
                r = fe_harness_give_dirs(h, FE_NOBODY, 0755);
                ck_assert_msg(r == 0, "giving the directories away: %s", strerror(-r));
        }
        fe_harness_sanitizer_env();
        r = nobody ? fe_harness_spawn_vufsd_as_nobody(h, argv) : fe_harness_spawn_vufsd(h, argv);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        r = fe_connect_and_start(ret_fe, h->socket_path, NULL);
        ck_assert_msg(r == 0, "connect: %s", *ret_fe ? (*ret_fe)->error : strerror(-r));
        ck_assert_int_eq(fe_fuse_new(ret_c, *ret_fe), 0);
        r = fe_fuse_init(*ret_c);
        ck_assert_msg(r == 0, "INIT: %d %s", r, (*ret_c)->last_problem);
}

int fe_tree_answered(FeFuse *c, int r, const char *what) {
        ck_assert_msg(r != -EPROTO && r != -ETIMEDOUT, "%s: %s", what, c->last_problem);
        return r;
}

int fe_tree_lookup(FeFuse *c, uint64_t parent, const char *name, struct fuse_entry_out *e) {
        struct fuse_entry_out tmp = {};
        int r = fe_tree_answered(c, fe_fuse_lookup(c, parent, name, &tmp), "LOOKUP");
        if (e)
                *e = tmp;
        return r;
}

uint64_t fe_tree_node(FeFuse *c, uint64_t parent, const char *name) {
        struct fuse_entry_out e;
        int r = fe_tree_lookup(c, parent, name, &e);

        ck_assert_msg(r == 0, "LOOKUP %s: %s", name, strerror(-r));
        return e.nodeid;
}

int fe_tree_read(FeFuse *c, uint64_t nodeid, char *buf, size_t size) {
        uint64_t fh;
        int r, n;

        buf[0] = 0;
        r = fe_tree_answered(c, fe_fuse_open(c, nodeid, O_RDONLY, &fh), "OPEN");
        if (r < 0)
                return r;
        n = fe_tree_answered(c, fe_fuse_read(c, nodeid, fh, 0, buf, (uint32_t) size - 1), "READ");
        buf[MAX(n, 0)] = 0;
        ck_assert_int_eq(fe_fuse_release(c, nodeid, fh, false), 0);
        return n;
}
