/* test-frontend-host-moves.c: the host changes the share under a walking guest; nothing the guest
 * is answered may lie outside the share (docs/security.md "Paths beneath the share").
 *
 * Layout on the host (one mkdtemp directory per case):
 *   DIR/share/                the share: a/b/c, a/b/inner.txt, file, d/f
 *   DIR/outside/secret.txt    a file next to the share, readable by everyone
 * While the guest holds nodes for directories in the share, the test (as root or as the caller)
 * moves them out of the share to DIR/outside (same filesystem), renames them inside it, replaces
 * them with symlinks to / and to DIR/outside, and (root only) bind-mounts an outside directory
 * into the share. The guest then looks up "..", opens, renames and links across those. Each case
 * runs in --sandbox=namespace, chroot and none; with vufsd as the caller (root when the suite runs
 * as root) and as nobody (through setpriv, root only). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "host-tree.h"
#include "util.h"
#include "test-main.h"

#define SECRET "vufs-host-moves-secret"
#define INSIDE "inside the share"

static FeHarness *h;
static Frontend *fe;
static FeFuse *c;
static char mounted[512]; /* a bind mount the case made, detached in teardown */

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
        mounted[0] = 0;
        fe_host_make_tree(h, SECRET, INSIDE);
}

static void teardown(void) {
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        if (mounted[0])
                (void) umount2(mounted, MNT_DETACH);
        h = fe_harness_free(h);
}

/* vufsd with --sandbox=MODE, as the caller or as nobody, and a client past INIT. */
static void start(int mode, bool nobody) {
        const char *argv[] = { "--bus=none", "--sandbox", fe_tree_sandboxes[mode], NULL };
        fe_tree_start(h, argv, nobody, &fe, &c);
}

/* "..": what LOOKUP of ".." from a node that lies outside the share must be. If the daemon gave a
 * node, the test walks on to the file next to the share, to say in the failure what was reached. */
static void assert_dotdot_refused(uint64_t nodeid, const char *what) {
        struct fuse_entry_out e;
        char buf[128] = "";
        int r = fe_tree_lookup(c, nodeid, "..", &e);

        if (r == 0) {
                struct fuse_entry_out s, up;
                uint64_t at = e.nodeid;
                /* The parent may be DIR/outside itself or below it: up to three levels. */
                for (int i = 0; i < 3 && fe_tree_lookup(c, at, "secret.txt", &s) != 0; i++)
                        at = fe_tree_lookup(c, at, "..", &up) == 0 ? up.nodeid : at;
                if (fe_tree_lookup(c, at, "secret.txt", &s) == 0 && fe_tree_read(c, s.nodeid, buf, sizeof buf) > 0)
                        ck_abort_msg("LOOKUP \"..\" of %s gave node %" PRIu64 " outside the share; the guest read "
                                     "\"%s\" next to it",
                                     what, e.nodeid, buf);
        }
        ck_assert_msg(r == -ENOENT || r == -ESTALE, "LOOKUP \"..\" of %s: %s (node %" PRIu64 "), want ENOENT", what,
                      r == 0 ? "a node" : strerror(-r), r == 0 ? e.nodeid : 0);
}

/* LOOKUP ".." of nodeid answers the node parent. */
static void assert_parent(uint64_t nodeid, uint64_t parent) {
        struct fuse_entry_out e;

        ck_assert_int_eq(fe_tree_lookup(c, nodeid, "..", &e), 0);
        ck_assert_uint_eq(e.nodeid, parent);
}

/* The guest's nodes for share/a, a/b and a/b/c. */
static void walk_abc(uint64_t *a, uint64_t *b, uint64_t *cc) {
        *a = fe_tree_node(c, FUSE_ROOT_ID, "a");
        *b = fe_tree_node(c, *a, "b");
        *cc = fe_tree_node(c, *b, "c");
}

static int link_(uint64_t oldnode, uint64_t newparent, const char *newname) {
        struct fuse_link_in in = { .oldnodeid = oldnode };
        FeFuseReq *rq;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&rq, c, FUSE_LINK, newparent, sizeof(struct fuse_entry_out)), 0);
        ck_assert_int_eq(fe_fuse_req_add(rq, &in, sizeof in), 0);
        ck_assert_int_eq(fe_fuse_req_add_str(rq, newname), 0);
        r = fe_tree_answered(c, fe_fuse_call(c, rq), "LINK");
        fe_fuse_req_free(c, rq);
        return r;
}

static int rename_(uint64_t parent, const char *name, uint64_t newparent, const char *newname) {
        return fe_tree_answered(c, fe_fuse_rename(c, parent, name, newparent, newname), "RENAME");
}

/* The guest walks to share/a/b/c; the host moves a/b next to the secret; ".." from b and from c
 * leads nowhere, b's own subtree stays the guest's. */
static void dotdot_moved_out(int mode, bool nobody) {
        uint64_t a, b, cc, inner;
        char buf[128];

        start(mode, nobody);
        walk_abc(&a, &b, &cc);
        /* Before the move ".." answers the parent the guest knows, up to the root. */
        assert_parent(cc, b);
        assert_parent(b, a);
        assert_parent(a, FUSE_ROOT_ID);

        fe_host_rename(h, "share/a/b", "outside/b");
        assert_dotdot_refused(b, "a directory moved next to the share");
        assert_dotdot_refused(cc, "a subdirectory of it");
        /* What it holds is still its own: the moved directory's subtree (docs/security.md). */
        inner = fe_tree_node(c, b, "inner.txt");
        ck_assert_int_eq(fe_tree_read(c, inner, buf, sizeof buf), (int) strlen(INSIDE));
        ck_assert_int_eq(fe_tree_lookup(c, b, "secret.txt", NULL), -ENOENT);
        /* The share itself is unchanged for it. */
        assert_parent(a, FUSE_ROOT_ID);
}

/* The host renames directories the guest is walking, inside the share: ".." follows them; then one
 * goes out, and the guest's RENAME and LINK through it reach only its subtree. */
static void renamed_while_walking(int mode, bool nobody) {
        struct fuse_entry_out e;
        uint64_t a, b, cc, file;

        start(mode, nobody);
        walk_abc(&a, &b, &cc);
        file = fe_tree_node(c, FUSE_ROOT_ID, "file");
        fe_host_rename(h, "share/a", "share/z");
        fe_host_rename(h, "share/z/b", "share/b2");
        assert_parent(cc, b);
        assert_parent(b, FUSE_ROOT_ID);
        ck_assert_int_eq(fe_tree_lookup(c, FUSE_ROOT_ID, "z", &e), 0);
        ck_assert_uint_eq(e.nodeid, a);
        ck_assert_int_eq(rename_(b, "inner.txt", a, "inner.txt"), 0);
        ck_assert_int_eq(link_(file, a, "file-link"), 0);

        fe_host_rename(h, "share/z", "outside/z");
        assert_dotdot_refused(a, "a renamed directory moved next to the share");
        /* Names in the moved directory are still its own, never its neighbours'. */
        ck_assert_int_eq(fe_tree_lookup(c, a, "secret.txt", NULL), -ENOENT);
        ck_assert_int_eq(rename_(a, "secret.txt", FUSE_ROOT_ID, "got-secret"), -ENOENT);
        ck_assert_int_eq(link_(file, a, "../secret.txt"), -EINVAL);
        ck_assert_int_eq(rename_(a, "..", FUSE_ROOT_ID, "got-parent"), -EINVAL);
        ck_assert_int_eq(fe_tree_lookup(c, FUSE_ROOT_ID, "got-secret", NULL), -ENOENT);
        ck_assert_int_eq(fe_tree_lookup(c, FUSE_ROOT_ID, "got-parent", NULL), -ENOENT);
}

/* The host replaces directories with symlinks (to / and to the directory next to the share)
 * between the guest's lookups: the new names are symlinks the daemon never follows. */
static void replaced_by_symlinks(int mode, bool nobody) {
        struct fuse_entry_out e;
        uint64_t d, f, dnew, anew, file, fh;
        char buf[128];

        start(mode, nobody);
        d = fe_tree_node(c, FUSE_ROOT_ID, "d");
        f = fe_tree_node(c, d, "f");
        file = fe_tree_node(c, FUSE_ROOT_ID, "file");
        fe_host_rename(h, "share/d", "outside/d");
        fe_host_symlink(h, "/", "share/d");
        fe_host_rename(h, "share/a", "outside/a");
        fe_host_symlink(h, "../outside", "share/a");

        ck_assert_int_eq(fe_tree_lookup(c, FUSE_ROOT_ID, "d", &e), 0);
        dnew = e.nodeid;
        ck_assert_uint_ne(dnew, d);
        ck_assert_uint_eq(e.attr.mode & S_IFMT, S_IFLNK);
        ck_assert_int_eq(fe_tree_lookup(c, FUSE_ROOT_ID, "a", &e), 0);
        anew = e.nodeid;
        ck_assert_uint_eq(e.attr.mode & S_IFMT, S_IFLNK);
        ck_assert_int_eq(fe_tree_lookup(c, dnew, "etc", NULL), -ENOTDIR);
        ck_assert_int_eq(fe_tree_lookup(c, anew, "secret.txt", NULL), -ENOTDIR);
        ck_assert_int_eq(fe_tree_lookup(c, anew, "..", NULL), -ENOTDIR);
        ck_assert_int_eq(fe_tree_answered(c, fe_fuse_open(c, anew, O_RDONLY, &fh), "OPEN"), -ELOOP);
        ck_assert_int_eq(fe_tree_answered(c, fe_fuse_opendir(c, dnew, &fh), "OPENDIR"), -ENOTDIR);
        ck_assert_int_eq(rename_(FUSE_ROOT_ID, "file", anew, "file"), -ENOTDIR);
        ck_assert_int_eq(link_(file, dnew, "file"), -ENOTDIR);
        ck_assert_int_eq(fe_tree_answered(c, fe_fuse_mkdir(c, anew, "x", 0755, NULL), "MKDIR"), -ENOTDIR);
        /* The nodes held from before are the moved directory and its file, never the new target. */
        ck_assert_int_eq(fe_tree_read(c, f, buf, sizeof buf), (int) strlen(INSIDE));
        ck_assert_str_eq(buf, INSIDE);
        assert_dotdot_refused(d, "a directory replaced by a symlink to /");
}

/* Whether the serving process is in the test's mount namespace (then it sees every host mount). */
static bool in_our_mount_ns(void) {
        char path[64], mine[64] = "", its[64] = "";

        snprintf(path, sizeof path, "/proc/%i/ns/mnt", (int) fe_harness_daemon_pid(h));
        ck_assert_int_gt(readlink("/proc/self/ns/mnt", mine, sizeof mine - 1), 0);
        ck_assert_int_gt(readlink(path, its, sizeof its - 1), 0);
        return strcmp(mine, its) == 0;
}

/* Root bind-mounts a directory from outside into the share: the guest may walk into it (the host
 * put it there), ".." from it is the share again, RENAME and LINK across it answer EXDEV, and a
 * directory moved out of the bind mount's source leads nowhere. */
static void bind_mounted(int mode, bool nobody) {
        struct fuse_entry_out e;
        uint64_t m, sub, file;
        char p[512];
        bool visible;

        fe_host_mkdir(h, "bindsrc");
        fe_host_mkdir(h, "bindsrc/sub");
        fe_host_mkdir(h, "share/m");
        start(mode, nobody);
        fe_host_path(h, mounted, sizeof mounted, "share/m");
        fe_host_path(h, p, sizeof p, "bindsrc");
        ck_assert_msg(mount(p, mounted, NULL, MS_BIND, NULL) == 0, "bind mount: %m");
        file = fe_tree_node(c, FUSE_ROOT_ID, "file");
        m = fe_tree_node(c, FUSE_ROOT_ID, "m");
        assert_parent(m, FUSE_ROOT_ID);
        /* A sandbox with a mount namespace of its own sees host mounts made after its start only
         * where the host's mount propagates them. */
        visible = fe_tree_lookup(c, m, "sub", &e) == 0;
        ck_assert_msg(visible || !in_our_mount_ns(), "--sandbox=%s shares our mounts but not the bind mount",
                      fe_tree_sandboxes[mode]);
        if (!visible)
                return;
        sub = e.nodeid;
        assert_parent(sub, m);
        ck_assert_int_eq(rename_(FUSE_ROOT_ID, "file", m, "file"), -EXDEV);
        ck_assert_int_eq(link_(file, m, "file"), -EXDEV);
        fe_host_rename(h, "bindsrc/sub", "outside/sub");
        assert_dotdot_refused(sub, "a directory moved out of a bind mount's source");
}

FE_TREE_TEST(dotdot_moved_out)
FE_TREE_TEST(renamed_while_walking)
FE_TREE_TEST(replaced_by_symlinks)
FE_TREE_TEST(bind_mounted)

static Suite *host_moves_suite(void) {
        Suite *s = suite_create("frontend-host-moves");
        TCase *tc = tcase_create("host-moves");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        fe_tree_add_modes(tc, test_dotdot_moved_out, false);
        fe_tree_add_modes(tc, test_renamed_while_walking, false);
        fe_tree_add_modes(tc, test_replaced_by_symlinks, false);
        fe_tree_add_modes(tc, test_bind_mounted, true); /* a bind mount */
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(host_moves_suite)
