/* test-frontend-inode-fds.c: a bounded set of inode fds on a directory share (--max-inode-fds,
 * issue 34). With a budget of two fds nearly every request finds its inode's fd given back and
 * re-opens it by name from the nearest ancestor that holds one; between the eviction and the
 * re-open the host renames, replaces, links and moves what the guest holds. The guest must get
 * the inode it had, or ESTALE (ENOENT where the name is gone), never another file and never one
 * outside the share; and the daemon's fds stay within the budget while it walks a tree.
 *
 * Layout on the host (one mkdtemp directory per case):
 *   DIR/share/                the share: a/b/c, a/b/inner.txt, file, d/f, p0..p7 (padding the
 *                             clock: looking them up evicts every other node's fd)
 *   DIR/outside/              next to the share: secret.txt and f, both SECRET
 * Each case runs in --sandbox=namespace, chroot and none; with vufsd as the caller (root when the
 * suite runs as root) and as nobody (through setpriv, root only). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "host-tree.h"
#include "test-main.h"
#include "util.h"

#define SECRET "vufs-inode-fds-secret"
#define INSIDE "inside the share"
#define OTHER "another file now"
#define BUDGET "2"    /* --max-inode-fds */
#define N_PADS 8      /* nodes looked up to push every other fd out of the clock */
#define FD_SLACK 24   /* the daemon's own fds besides the budget: sockets, eventfds, memory */

static FeHarness *h;
static Frontend *fe;
static FeFuse *c;
static uint64_t pads[N_PADS];
static int fds_at_start;

static void host_unlink(const char *rel) {
        char p[512];
        fe_host_path(h, p, sizeof p, rel);
        ck_assert_msg(unlink(p) == 0, "unlink %s: %m", p);
}

static void host_link(const char *from, const char *to) {
        char a[512], b[512];
        fe_host_path(h, a, sizeof a, from);
        fe_host_path(h, b, sizeof b, to);
        ck_assert_msg(link(a, b) == 0, "link %s %s: %m", a, b);
}

static void setup(void) {
        char name[16];

        ck_assert_int_eq(fe_harness_new(&h), 0);
        fe_host_make_tree(h, SECRET, INSIDE);
        fe_host_write(h, "outside/f", SECRET);
        for (int i = 0; i < N_PADS; i++) {
                snprintf(name, sizeof name, "share/p%d", i);
                fe_host_write(h, name, "pad");
        }
}

static void teardown(void) {
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        h = fe_harness_free(h);
}

static int daemon_fds(void) {
        int n = fe_harness_count_fds(fe_harness_daemon_pid(h));
        ck_assert_msg(n >= 0, "counting the daemon's fds: %s", strerror(-n));
        return n;
}

static int getattr(uint64_t nodeid, struct fuse_attr_out *a) {
        struct fuse_attr_out tmp;
        return fe_tree_answered(c, fe_fuse_getattr(c, nodeid, a ? a : &tmp), "GETATTR");
}

/* vufsd with --sandbox=MODE and a budget of two inode fds, as the caller or as nobody, a client
 * past INIT, and the padding nodes. */
static void start(int mode, bool nobody) {
        const char *argv[] = { "--bus=none", "--sandbox", fe_tree_sandboxes[mode], "--max-inode-fds=" BUDGET,
                               "--inode-file-handles=never", NULL };
        char name[16];

        fe_tree_start(h, argv, nobody, &fe, &c);
        fds_at_start = daemon_fds();
        for (int i = 0; i < N_PADS; i++) {
                snprintf(name, sizeof name, "p%d", i);
                pads[i] = fe_tree_node(c, FUSE_ROOT_ID, name);
        }
}

/* Every node's fd out of the clock: the padding nodes take it over (two rounds, so that the
 * clock's second chance is spent too). */
static void evict_all(void) {
        for (int round = 0; round < 2; round++)
                for (int i = 0; i < N_PADS; i++)
                        ck_assert_int_eq(getattr(pads[i], NULL), 0);
}

/* The daemon holds about the budget, however many nodes the guest holds. */
static void assert_fds_bounded(const char *when) {
        int n = daemon_fds();

        ck_assert_msg(n <= fds_at_start + atoi(BUDGET) + 4, "%s: the daemon holds %d fds, %d at start, budget %s",
                      when, n, fds_at_start, BUDGET);
}

/* A node's answer after the host changed its name: its own contents, or ESTALE/ENOENT; never
 * another file's. */
static void assert_own_or_stale(uint64_t nodeid, const char *own, const char *what) {
        char buf[128];
        int r = fe_tree_read(c, nodeid, buf, sizeof buf);

        ck_assert_msg(r == -ESTALE || r == -ENOENT || (r >= 0 && strcmp(buf, own) == 0),
                      "%s: read %d \"%s\", want \"%s\" or ESTALE", what, r, r >= 0 ? buf : strerror(-r), own);
}

/* The guest walks a tree of 300 files in 20 directories with a budget of two fds: every file reads
 * back right, and the daemon's fds stay at the budget. */
static void walk_bounded(int mode, bool nobody) {
        char name[64], buf[64], want[64];
        uint64_t dirs[20], f;

        for (int d = 0; d < 20; d++) {
                snprintf(name, sizeof name, "share/w%d", d);
                fe_host_mkdir(h, name);
                for (int i = 0; i < 15; i++) {
                        snprintf(name, sizeof name, "share/w%d/f%d", d, i);
                        snprintf(want, sizeof want, "file %d of %d", i, d);
                        fe_host_write(h, name, want);
                }
        }
        start(mode, nobody);
        for (int d = 0; d < 20; d++) {
                snprintf(name, sizeof name, "w%d", d);
                dirs[d] = fe_tree_node(c, FUSE_ROOT_ID, name);
        }
        for (int pass = 0; pass < 2; pass++)
                for (int d = 0; d < 20; d++)
                        for (int i = 0; i < 15; i++) {
                                snprintf(name, sizeof name, "f%d", i);
                                f = fe_tree_node(c, dirs[d], name);
                                ck_assert_int_gt(fe_tree_read(c, f, buf, sizeof buf), 0);
                                snprintf(want, sizeof want, "file %d of %d", i, d);
                                ck_assert_str_eq(buf, want);
                                ck_assert_int_eq(getattr(dirs[(d + 7) % 20], NULL), 0);
                        }
        assert_fds_bounded("after walking 300 files twice");
}

/* The host renames a directory the guest walks, between eviction and re-open: the old way leads
 * nowhere (ESTALE); the guest's next lookup finds the directory and what it holds again. */
static void host_renamed_dir(int mode, bool nobody) {
        struct fuse_entry_out e;
        uint64_t a, b, inner;
        char buf[128];

        start(mode, nobody);
        a = fe_tree_node(c, FUSE_ROOT_ID, "a");
        b = fe_tree_node(c, a, "b");
        inner = fe_tree_node(c, b, "inner.txt");
        evict_all();
        fe_host_rename(h, "share/a/b", "share/b2");
        ck_assert_int_eq(getattr(b, NULL), -ESTALE);
        assert_own_or_stale(inner, INSIDE, "a file of a renamed directory");
        ck_assert_int_eq(fe_tree_lookup(c, FUSE_ROOT_ID, "b2", &e), 0);
        ck_assert_uint_ne(e.nodeid, b); /* a new node: the stale one keeps answering ESTALE */
        ck_assert_int_eq(fe_tree_lookup(c, e.nodeid, "inner.txt", NULL), 0);
        evict_all();
        ck_assert_int_eq(fe_tree_read(c, inner, buf, sizeof buf), (int) strlen(INSIDE));
        ck_assert_str_eq(buf, INSIDE);
        assert_fds_bounded("after the renames");
}

/* The guest renames a directory and moves a file out of it (RENAME through the guest, which its
 * kernel follows without a new LOOKUP): the nodes re-open by their new names, no ESTALE. */
static void guest_renamed(int mode, bool nobody) {
        uint64_t a, b, inner, d, df;
        char buf[128];

        start(mode, nobody);
        a = fe_tree_node(c, FUSE_ROOT_ID, "a");
        b = fe_tree_node(c, a, "b");
        inner = fe_tree_node(c, b, "inner.txt");
        d = fe_tree_node(c, FUSE_ROOT_ID, "d");
        df = fe_tree_node(c, d, "f");
        ck_assert_int_eq(fe_tree_answered(c, fe_fuse_rename(c, FUSE_ROOT_ID, "a", FUSE_ROOT_ID, "a2"), "RENAME"), 0);
        ck_assert_int_eq(fe_tree_answered(c, fe_fuse_rename(c, d, "f", b, "f2"), "RENAME"), 0);
        evict_all();
        ck_assert_int_eq(fe_tree_read(c, inner, buf, sizeof buf), (int) strlen(INSIDE));
        ck_assert_str_eq(buf, INSIDE);
        evict_all();
        ck_assert_int_eq(fe_tree_read(c, df, buf, sizeof buf), (int) strlen(INSIDE));
        ck_assert_str_eq(buf, INSIDE);
        ck_assert_int_eq(getattr(b, NULL), 0);
        assert_fds_bounded("after the guest's renames");
}

/* The name the guest found a file by now holds another file (renamed there, or made anew where the
 * inode number may be recycled): never read through the old node. */
static void name_replaced(int mode, bool nobody) {
        struct fuse_entry_out e;
        uint64_t file, df;
        char buf[128];

        start(mode, nobody);
        file = fe_tree_node(c, FUSE_ROOT_ID, "file");
        df = fe_tree_node(c, fe_tree_node(c, FUSE_ROOT_ID, "d"), "f");
        evict_all();
        fe_host_rename(h, "share/file", "share/file.old");
        fe_host_write(h, "share/file", OTHER);
        host_unlink("share/d/f");
        fe_host_write(h, "share/d/f", OTHER); /* may get d/f's inode number back */
        assert_own_or_stale(file, INSIDE, "a name given to another file");
        assert_own_or_stale(df, INSIDE, "a name removed and made again");
        ck_assert_int_eq(fe_tree_lookup(c, FUSE_ROOT_ID, "file", &e), 0);
        ck_assert_int_eq(fe_tree_read(c, e.nodeid, buf, sizeof buf), (int) strlen(OTHER));
        ck_assert_str_eq(buf, OTHER);
}

/* The names of a directory and a file the guest holds become symlinks leading out of the share:
 * the re-open follows none of them. */
static void name_replaced_by_symlink(int mode, bool nobody) {
        struct fuse_attr_out a;
        uint64_t d, f, file;
        char buf[128];
        int r;

        start(mode, nobody);
        d = fe_tree_node(c, FUSE_ROOT_ID, "d");
        f = fe_tree_node(c, d, "f");
        file = fe_tree_node(c, FUSE_ROOT_ID, "file");
        evict_all();
        fe_host_rename(h, "share/d", "share/d.old");
        fe_host_symlink(h, "../outside", "share/d");
        fe_host_rename(h, "share/file", "share/file.old");
        fe_host_symlink(h, "../outside/secret.txt", "share/file");
        r = fe_tree_read(c, f, buf, sizeof buf);
        ck_assert_msg(r == -ESTALE || r == -ENOENT, "a file under a name now a symlink out: %d \"%s\"", r,
                      r >= 0 ? buf : strerror(-r));
        r = getattr(d, &a);
        ck_assert_msg(r == -ESTALE || r == -ENOENT, "a directory now a symlink out: %d", r);
        r = fe_tree_read(c, file, buf, sizeof buf);
        ck_assert_msg(r == -ESTALE || r == -ENOENT, "a file now a symlink out: %d \"%s\"", r,
                      r >= 0 ? buf : strerror(-r));
}

/* Hard links: the first name goes (on the host, and through the guest); the node is reached through
 * the other name, or answers ESTALE until the guest looks that name up. */
static void hard_links(int mode, bool nobody) {
        struct fuse_entry_out e;
        uint64_t x, y;
        char buf[128];

        fe_host_write(h, "share/x1", INSIDE);
        host_link("share/x1", "share/x2");
        fe_host_write(h, "share/y1", INSIDE);
        start(mode, nobody);
        /* On the host. */
        x = fe_tree_node(c, FUSE_ROOT_ID, "x1");
        evict_all();
        host_unlink("share/x1");
        assert_own_or_stale(x, INSIDE, "a hard link whose first name went on the host");
        ck_assert_int_eq(fe_tree_lookup(c, FUSE_ROOT_ID, "x2", &e), 0);
        evict_all();
        ck_assert_int_eq(fe_tree_read(c, e.nodeid, buf, sizeof buf), (int) strlen(INSIDE));
        ck_assert_str_eq(buf, INSIDE);
        /* Through the guest: LINK, UNLINK of the first name, then the second name is the way. */
        y = fe_tree_node(c, FUSE_ROOT_ID, "y1");
        {
                struct fuse_link_in in = { .oldnodeid = y };
                FeFuseReq *rq;
                ck_assert_int_eq(fe_fuse_req_new(&rq, c, FUSE_LINK, FUSE_ROOT_ID, sizeof(struct fuse_entry_out)), 0);
                ck_assert_int_eq(fe_fuse_req_add(rq, &in, sizeof in), 0);
                ck_assert_int_eq(fe_fuse_req_add_str(rq, "y2"), 0);
                ck_assert_int_eq(fe_tree_answered(c, fe_fuse_call(c, rq), "LINK"), 0);
                fe_fuse_req_free(c, rq);
        }
        ck_assert_int_eq(fe_tree_answered(c, fe_fuse_unlink(c, FUSE_ROOT_ID, "y1"), "UNLINK"), 0);
        evict_all();
        assert_own_or_stale(y, INSIDE, "a hard link whose first name the guest removed");
        ck_assert_int_eq(fe_tree_lookup(c, FUSE_ROOT_ID, "y2", &e), 0);
        evict_all();
        ck_assert_int_eq(fe_tree_read(c, e.nodeid, buf, sizeof buf), (int) strlen(INSIDE));
        ck_assert_str_eq(buf, INSIDE);
}

/* GETATTR through the open file fh (what the guest kernel sends for fstat). */
static int getattr_fh(uint64_t nodeid, uint64_t fh, struct fuse_attr_out *a) {
        struct fuse_getattr_in in = { .getattr_flags = FUSE_GETATTR_FH, .fh = fh };
        FeFuseReq *rq;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&rq, c, FUSE_GETATTR, nodeid, sizeof *a), 0);
        ck_assert_int_eq(fe_fuse_req_add(rq, &in, sizeof in), 0);
        r = fe_tree_answered(c, fe_fuse_call(c, rq), "GETATTR");
        if (r >= 0) {
                ck_assert_uint_ge(rq->payload_len, sizeof *a);
                memcpy(a, rq->payload, sizeof *a);
        }
        fe_fuse_req_free(c, rq);
        return r;
}

/* A file the guest created, holds open and unlinked: its reads, writes and fstat go through its
 * own fd, and its node answers for it or ESTALE, never for a file made under its old name. */
static void unlinked_open(int mode, bool nobody) {
        struct fuse_entry_out e;
        struct fuse_attr_out a;
        uint64_t fh;
        char buf[128];
        int r;

        start(mode, nobody);
        r = fe_tree_answered(c, fe_fuse_create(c, FUSE_ROOT_ID, "u", O_RDWR, 0644, &e, &fh), "CREATE");
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(fe_tree_answered(c, fe_fuse_write(c, e.nodeid, fh, 0, INSIDE, strlen(INSIDE)), "WRITE"),
                         (int) strlen(INSIDE));
        ck_assert_int_eq(fe_tree_answered(c, fe_fuse_unlink(c, FUSE_ROOT_ID, "u"), "UNLINK"), 0);
        fe_host_write(h, "share/u", OTHER);
        evict_all();
        r = fe_tree_answered(c, fe_fuse_read(c, e.nodeid, fh, 0, buf, sizeof buf - 1), "READ");
        ck_assert_int_eq(r, (int) strlen(INSIDE));
        buf[r] = 0;
        ck_assert_str_eq(buf, INSIDE);
        r = getattr(e.nodeid, &a);
        ck_assert_msg(r == -ESTALE || (r == 0 && a.attr.nlink == 0 && a.attr.size == strlen(INSIDE)),
                      "GETATTR of the unlinked file: %d (nlink %u, size %" PRIu64 ")", r, r == 0 ? a.attr.nlink : 0,
                      r == 0 ? (uint64_t) a.attr.size : 0);
        r = getattr_fh(e.nodeid, fh, &a);
        ck_assert_msg(r == 0, "GETATTR (fstat) of the open unlinked file: %s", strerror(-r));
        ck_assert_uint_eq(a.attr.nlink, 0);
        ck_assert_uint_eq(a.attr.size, strlen(INSIDE));
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
}

/* A directory the guest walks is moved out of the share: what it and its subtree answer is ESTALE
 * or ENOENT; nothing next to the share is ever reached. */
static void moved_out(int mode, bool nobody) {
        uint64_t a, b, cc, inner;
        int r;

        start(mode, nobody);
        a = fe_tree_node(c, FUSE_ROOT_ID, "a");
        b = fe_tree_node(c, a, "b");
        cc = fe_tree_node(c, b, "c");
        inner = fe_tree_node(c, b, "inner.txt");
        evict_all();
        fe_host_rename(h, "share/a/b", "outside/b");
        fe_host_rename(h, "outside/secret.txt", "outside/b/secret.txt");
        r = getattr(cc, NULL);
        ck_assert_msg(r == -ESTALE || r == -ENOENT, "GETATTR of a directory moved out: %d", r);
        r = fe_tree_lookup(c, b, "secret.txt", NULL);
        ck_assert_msg(r == -ESTALE || r == -ENOENT, "LOOKUP in a directory moved out: %d", r);
        r = fe_tree_lookup(c, cc, "..", NULL);
        ck_assert_msg(r == -ESTALE || r == -ENOENT, "LOOKUP .. of a directory moved out: %d", r);
        assert_own_or_stale(inner, INSIDE, "a file of a directory moved out");
}

FE_TREE_TEST(walk_bounded)
FE_TREE_TEST(host_renamed_dir)
FE_TREE_TEST(guest_renamed)
FE_TREE_TEST(name_replaced)
FE_TREE_TEST(name_replaced_by_symlink)
FE_TREE_TEST(hard_links)
FE_TREE_TEST(unlinked_open)
FE_TREE_TEST(moved_out)

static Suite *inode_fds_suite(void) {
        Suite *s = suite_create("frontend-inode-fds");
        TCase *tc = tcase_create("inode-fds");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        fe_tree_add_modes(tc, test_walk_bounded, false);
        fe_tree_add_modes(tc, test_host_renamed_dir, false);
        fe_tree_add_modes(tc, test_guest_renamed, false);
        fe_tree_add_modes(tc, test_name_replaced, false);
        fe_tree_add_modes(tc, test_name_replaced_by_symlink, false);
        fe_tree_add_modes(tc, test_hard_links, false);
        fe_tree_add_modes(tc, test_unlinked_open, false);
        fe_tree_add_modes(tc, test_moved_out, false);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(inode_fds_suite)
