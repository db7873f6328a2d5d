/* test-frontend-userns.c: vufsd started as an ordinary user (nobody, through setpriv) with the
 * default sandbox, and as root with --uid-map/--gid-map: it serves FUSE requests from inside a user
 * namespace of its own; files created by guest uids show the mapped host owners; unmapped guest
 * ids get EPERM (docs/id-mapping.md).
 *
 * The subordinate-range case needs newuidmap/newgidmap (package uidmap) and a range for nobody in
 * /etc/subuid and /etc/subgid: the test adds "nobody:SUB_BASE:65536" when no line for nobody is
 * there and removes what it added. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

#define TEST_UID FE_NOBODY
#define SUB_BASE 200000u
#define ROOT_MAP_BASE 300000u

static FeHarness *h;

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

static void teardown(void) {
        h = fe_harness_free(h);
}

/* The harness directory (socket and lock file) is the test user's; the share belongs to owner. */
static void give_dirs(uid_t share_owner) {
        /* 01777: guest users may create at the top too. */
        int r = fe_harness_give_dirs(h, share_owner, 01777);
        ck_assert_msg(r == 0, "giving the directories away: %s", strerror(-r));
}

/* vufsd as TEST_UID or as root, off the bus, with extra args. */
static void spawn(bool as_user, const char *const *extra) {
        const char *argv[32];
        unsigned n = 0;
        int r;

        argv[n++] = "--bus=none";
#ifdef SANITIZER_BUILD
        /* Sanitizer builds default to no sandbox (util.h): root's vufsd asks for it as nobody's
         * does (fe_harness_spawn_vufsd_as_nobody()). */
        if (!as_user)
                argv[n++] = "--sandbox=namespace";
#endif
        for (unsigned i = 0; extra && extra[i]; i++) {
                ck_assert_uint_lt(n, ELEMENTSOF(argv) - 1);
                argv[n++] = extra[i];
        }
        argv[n] = NULL;
        fe_harness_sanitizer_env(); /* the sandboxed daemon cannot run the leak scan */
        r = as_user ? fe_harness_spawn_vufsd_as_nobody(h, argv) : fe_harness_spawn_vufsd(h, argv);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
}

static FeFuse *client(void) {
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        int r = fe_connect_and_start(&fe, h->socket_path, NULL);

        ck_assert_msg(r == 0, "connect: %s", fe ? fe->error : strerror(-r));
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        r = fe_fuse_init(c);
        ck_assert_msg(r == 0, "INIT: %d %s", r, c->last_problem);
        return c;
}

static void as(FeFuse *c, uint32_t uid, uint32_t gid) {
        c->uid = uid;
        c->gid = gid;
}

/* The sandboxed daemon: the backend (supervisor) process's only child. */
static pid_t daemon_pid(void) {
        char path[64], buf[64] = {};
        FILE *f;
        int pid = -1;

        snprintf(path, sizeof path, "/proc/%i/task/%i/children", (int)h->backend->pid, (int)h->backend->pid);
        for (int i = 0; i < 100; i++) {
                f = fopen(path, "re");
                ck_assert_ptr_nonnull(f);
                if (fgets(buf, sizeof buf, f) && sscanf(buf, "%d", &pid) == 1) {
                        fclose(f);
                        return pid;
                }
                fclose(f);
                usleep(10000);
        }
        ck_abort_msg("the supervisor %i has no child", (int)h->backend->pid);
        return -1;
}

static char *read_text(const char *path) {
        char buf[512] = {};
        FILE *f = fopen(path, "re");
        size_t n;

        ck_assert_msg(f, "%s: %m", path);
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        return strdup(buf);
}

/* The daemon is in a user namespace other than ours, with this uid_map (whitespace squeezed). */
static void assert_userns(const char *want_map) {
        char path[64], mine[64] = {}, its[64] = {};
        pid_t pid = daemon_pid();
        char *map;
        char squeezed[512];
        size_t k = 0;

        ck_assert_int_gt(readlink("/proc/self/ns/user", mine, sizeof mine - 1), 0);
        snprintf(path, sizeof path, "/proc/%i/ns/user", (int)pid);
        ck_assert_int_gt(readlink(path, its, sizeof its - 1), 0);
        ck_assert_msg(strcmp(mine, its) != 0, "the daemon %i is in our user namespace %s", (int)pid, mine);
        /* The socket exists before the sandbox (main.c): the map may be a moment behind it. */
        snprintf(path, sizeof path, "/proc/%i/uid_map", (int)pid);
        for (int i = 0;; i++) {
                map = read_text(path);
                if (*map || i == 200)
                        break;
                free(map);
                usleep(10000);
        }
        for (const char *p = map; *p && k < sizeof squeezed - 1; p++) {
                if (*p == ' ' && (k == 0 || squeezed[k - 1] == ' ' || squeezed[k - 1] == '\n'))
                        continue;
                squeezed[k++] = *p;
        }
        squeezed[k] = '\0';
        ck_assert_msg(strcmp(squeezed, want_map) == 0, "uid_map \"%s\", expected \"%s\"", squeezed, want_map);
        free(map);
}

static void assert_host_owner(const char *name, uid_t uid, gid_t gid) {
        char *p = fe_harness_path(h, name);
        struct stat st;

        ck_assert_msg(lstat(p, &st) == 0, "%s: %m", p);
        ck_assert_msg(st.st_uid == uid && st.st_gid == gid, "%s is %u:%u on the host, expected %u:%u", name,
                      (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)uid, (unsigned)gid);
        free(p);
}

static int create_file(FeFuse *c, uint64_t parent, const char *name, struct fuse_entry_out *e) {
        uint64_t fh = 0;
        int r = fe_fuse_create(c, parent, name, O_WRONLY, 0644, e, &fh);
        if (r == 0)
                (void)fe_fuse_release(c, e->nodeid, fh, false);
        return r;
}

static int symlink_req(FeFuse *c, uint64_t parent, const char *name, const char *target, struct fuse_entry_out *e) {
        FeFuseReq *req = NULL;
        int r = fe_fuse_req_new(&req, c, FUSE_SYMLINK, parent, sizeof *e);

        ck_assert_int_eq(r, 0);
        fe_fuse_req_add_str(req, name);
        fe_fuse_req_add_str(req, target);
        r = fe_fuse_call(c, req);
        if (r == 0 && e)
                memcpy(e, req->payload, sizeof *e);
        fe_fuse_req_free(c, req);
        return r;
}

static int link_req(FeFuse *c, uint64_t node, uint64_t newparent, const char *name, struct fuse_entry_out *e) {
        struct fuse_link_in in = { .oldnodeid = node };
        FeFuseReq *req = NULL;
        int r = fe_fuse_req_new(&req, c, FUSE_LINK, newparent, sizeof *e);

        ck_assert_int_eq(r, 0);
        fe_fuse_req_add(req, &in, sizeof in);
        fe_fuse_req_add_str(req, name);
        r = fe_fuse_call(c, req);
        if (r == 0 && e)
                memcpy(e, req->payload, sizeof *e);
        fe_fuse_req_free(c, req);
        return r;
}

static int chown_req(FeFuse *c, uint64_t node, int64_t uid, int64_t gid, struct fuse_attr_out *ret) {
        struct fuse_setattr_in in = {};
        struct fuse_attr_out out;
        FeFuseReq *req = NULL;
        int r;

        if (uid >= 0) {
                in.valid |= FATTR_UID;
                in.uid = (uint32_t)uid;
        }
        if (gid >= 0) {
                in.valid |= FATTR_GID;
                in.gid = (uint32_t)gid;
        }
        r = fe_fuse_req_new(&req, c, FUSE_SETATTR, node, sizeof out);
        ck_assert_int_eq(r, 0);
        fe_fuse_req_add(req, &in, sizeof in);
        r = fe_fuse_call(c, req);
        if (r == 0 && ret)
                memcpy(ret, req->payload, sizeof *ret);
        fe_fuse_req_free(c, req);
        return r;
}

static void client_free(FeFuse *c) {
        Frontend *fe = c->fe;
        fe_fuse_free(c);
        fe_free(fe);
}

static void stop(void) {
        int st = fe_backend_stop(h->backend, 5000);
        char buf[64];
        ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "vufsd: %s",
                      fe_backend_describe(st, buf, sizeof buf));
}

/* Unprivileged, no map: guest root is the user; any other guest id is unmapped (EPERM). */
START_TEST(test_unprivileged_default_map) {
        struct fuse_entry_out e, d;
        struct fuse_attr_out a;
        FeFuse *c;

        give_dirs(TEST_UID);
        spawn(true, NULL);
        assert_userns("0 65534 1\n");
        c = client();

        as(c, 0, 0);
        ck_assert_int_eq(create_file(c, 1, "root-file", &e), 0);
        ck_assert_uint_eq(e.attr.uid, 0); /* the guest sees its root */
        assert_host_owner("root-file", TEST_UID, TEST_UID);
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "root-dir", 0755, &d), 0);
        assert_host_owner("root-dir", TEST_UID, TEST_UID);
        ck_assert_int_eq(symlink_req(c, 1, "root-link", "root-file", NULL), 0);
        assert_host_owner("root-link", TEST_UID, TEST_UID);
        ck_assert_int_eq(link_req(c, e.nodeid, d.nodeid, "hard", NULL), 0);

        /* unmapped guest ids: EPERM, never EINVAL and never a file under another owner */
        as(c, 1000, 1000);
        ck_assert_int_eq(create_file(c, 1, "user-file", &e), -EPERM);
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "user-dir", 0755, NULL), -EPERM);
        ck_assert_int_eq(symlink_req(c, 1, "user-link", "x", NULL), -EPERM);
        as(c, 0, 1000); /* root with an unmapped group, the case users see EINVAL for */
        ck_assert_int_eq(create_file(c, 1, "root-unmapped-gid", &e), -EPERM);
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "root-unmapped-gid-dir", 0755, NULL), -EPERM);
        as(c, 0, 0);
        ck_assert_int_eq(fe_fuse_lookup(c, 1, "root-file", &e), 0);
        ck_assert_int_eq(chown_req(c, e.nodeid, 1000, -1, NULL), -EPERM);
        ck_assert_int_eq(chown_req(c, e.nodeid, -1, 1000, NULL), -EPERM);
        ck_assert_int_eq(chown_req(c, e.nodeid, 0, 0, &a), 0);
        assert_host_owner("root-file", TEST_UID, TEST_UID);
        client_free(c);
        stop();
}
END_TEST

/* The user's subordinate range from /etc/subuid, as libvirt passes <idmap>. */
static bool added_subuid, added_subgid;

static bool ensure_sub_range(const char *file) {
        _cleanup_free_ char *text = NULL;
        FILE *f;

        if (access(file, F_OK) == 0) {
                text = read_text(file);
                /* another range for nobody (tests/vm/test-userns.sh adds one) does not matter */
                if (strncmp(text, "nobody:200000:65536\n", 20) == 0 || strstr(text, "\nnobody:200000:65536\n"))
                        return false;
        }
        f = fopen(file, "ae");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "nobody:%u:65536\n", SUB_BASE);
        fclose(f);
        return true;
}

static void remove_sub_range(const char *file) {
        char *text = read_text(file), *p;
        FILE *f;

        p = strstr(text, "nobody:200000:65536\n");
        if (p) {
                memmove(p, p + strlen("nobody:200000:65536\n"), strlen(p + strlen("nobody:200000:65536\n")) + 1);
                if (!*text)
                        (void)unlink(file); /* it did not exist before (ensure_sub_range() adds a line only) */
                else if ((f = fopen(file, "we"))) {
                        fputs(text, f);
                        fclose(f);
                }
        }
        free(text);
}

/* Unchecked fixture (in the parent process): the range is removed also when the case fails. */
static void setup_sub(void) {
        if (!test_have_root())
                return;
        added_subuid = ensure_sub_range("/etc/subuid");
        added_subgid = ensure_sub_range("/etc/subgid");
}

static void teardown_sub(void) {
        if (added_subuid)
                remove_sub_range("/etc/subuid");
        if (added_subgid)
                remove_sub_range("/etc/subgid");
}

#define SUB(id) (SUB_BASE + (id))

START_TEST(test_unprivileged_subordinate_map) {
        static const char *const maps[] = { "--uid-map=:0:200000:65536:", "--gid-map=:0:200000:65536:", NULL };
        struct fuse_entry_out e, sg, x;
        struct fuse_attr_out a;
        FeFuse *c;

        if (access("/usr/bin/newuidmap", X_OK) < 0) {
                fprintf(stderr, "SKIP: newuidmap is not installed (package uidmap, tools/install-deps.sh)\n");
                ck_abort_msg("newuidmap missing");
        }
        give_dirs(SUB(0));
        spawn(true, maps);
        assert_userns("0 200000 65536\n");
        c = client();

        as(c, 0, 0);
        ck_assert_int_eq(create_file(c, 1, "root-file", &e), 0);
        assert_host_owner("root-file", SUB(0), SUB(0));
        as(c, 1000, 1000);
        ck_assert_int_eq(create_file(c, 1, "user-file", &e), 0);
        ck_assert_uint_eq(e.attr.uid, 1000);
        assert_host_owner("user-file", SUB(1000), SUB(1000));
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "user-dir", 0755, NULL), 0);
        assert_host_owner("user-dir", SUB(1000), SUB(1000));
        ck_assert_int_eq(symlink_req(c, 1, "user-link", "user-file", NULL), 0);
        assert_host_owner("user-link", SUB(1000), SUB(1000));
        ck_assert_int_eq(link_req(c, e.nodeid, 1, "user-hard", &x), 0);
        ck_assert_uint_eq(x.attr.nlink, 2);
        assert_host_owner("user-hard", SUB(1000), SUB(1000));

        /* chown within the map (as guest root), and to an id outside it */
        as(c, 0, 0);
        ck_assert_int_eq(fe_fuse_lookup(c, 1, "root-file", &e), 0);
        ck_assert_int_eq(chown_req(c, e.nodeid, 1000, 2000, &a), 0);
        ck_assert_uint_eq(a.attr.uid, 1000);
        ck_assert_uint_eq(a.attr.gid, 2000);
        assert_host_owner("root-file", SUB(1000), SUB(2000));
        ck_assert_int_eq(chown_req(c, e.nodeid, 70000, -1, NULL), -EPERM);
        ck_assert_int_eq(chown_req(c, e.nodeid, -1, 70000, NULL), -EPERM);
        assert_host_owner("root-file", SUB(1000), SUB(2000));

        /* a set-gid directory of group 2000: what guest user 1000 makes in it is group 2000 */
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "sgid", 0777, &sg), 0);
        ck_assert_int_eq(chown_req(c, sg.nodeid, -1, 2000, NULL), 0);
        {
                struct fuse_setattr_in in = { .valid = FATTR_MODE, .mode = S_IFDIR | 02777 };
                FeFuseReq *req = NULL;
                ck_assert_int_eq(fe_fuse_req_new(&req, c, FUSE_SETATTR, sg.nodeid, sizeof a), 0);
                fe_fuse_req_add(req, &in, sizeof in);
                ck_assert_int_eq(fe_fuse_call(c, req), 0);
                fe_fuse_req_free(c, req);
        }
        as(c, 1000, 1000);
        ck_assert_int_eq(create_file(c, sg.nodeid, "in-sgid", &x), 0);
        ck_assert_uint_eq(x.attr.gid, 2000);
        assert_host_owner("sgid/in-sgid", SUB(1000), SUB(2000));
        ck_assert_int_eq(fe_fuse_mkdir(c, sg.nodeid, "sub", 0755, &x), 0);
        ck_assert_uint_eq(x.attr.gid, 2000);
        ck_assert_msg(x.attr.mode & S_ISGID, "a directory made in a set-gid directory is set-gid: %o", x.attr.mode);
        assert_host_owner("sgid/sub", SUB(1000), SUB(2000));

        /* guest ids past the map */
        as(c, 70000, 1000);
        ck_assert_int_eq(create_file(c, 1, "unmapped-uid", &x), -EPERM);
        as(c, 1000, 70000);
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "unmapped-gid", 0755, NULL), -EPERM);
        ck_assert_int_eq(symlink_req(c, 1, "unmapped-gid-link", "x", NULL), -EPERM);
        client_free(c);
        stop();
}
END_TEST

/* Podman's layout: the user's own id as 0, the subordinate range after it (newuidmap takes both). */
START_TEST(test_unprivileged_own_plus_subordinate) {
        static const char *const maps[] = { "--uid-map=:0:65534:1:", "--uid-map=:1:200000:65535:",
                                            "--gid-map=:0:65534:1:", "--gid-map=:1:200000:65535:", NULL };
        struct fuse_entry_out e;
        FeFuse *c;

        give_dirs(TEST_UID);
        spawn(true, maps);
        assert_userns("0 65534 1\n1 200000 65535\n");
        c = client();
        as(c, 0, 0);
        ck_assert_int_eq(create_file(c, 1, "root-file", &e), 0);
        assert_host_owner("root-file", TEST_UID, TEST_UID);
        as(c, 1000, 1000);
        ck_assert_int_eq(create_file(c, 1, "user-file", &e), 0);
        assert_host_owner("user-file", SUB(999), SUB(999));
        as(c, 65536, 1000);
        ck_assert_int_eq(create_file(c, 1, "unmapped", &e), -EPERM);
        client_free(c);
        stop();
}
END_TEST

/* Root with a map: written directly (no helper); guest root is host ROOT_MAP_BASE. */
START_TEST(test_root_with_map) {
        static const char *const maps[] = { "--uid-map=:0:300000:65536:", "--gid-map=:0:300000:65536:", NULL };
        struct fuse_entry_out e;
        FeFuse *c;

        /* the mapped root must be able to reach the share: it is not the host root any more */
        ck_assert_int_eq(chmod(h->dir, 0755), 0);
        ck_assert_int_eq(chown(h->share, ROOT_MAP_BASE, ROOT_MAP_BASE), 0);
        ck_assert_int_eq(chmod(h->share, 01777), 0);
        spawn(false, maps);
        assert_userns("0 300000 65536\n");
        c = client();
        as(c, 0, 0);
        ck_assert_int_eq(create_file(c, 1, "root-file", &e), 0);
        assert_host_owner("root-file", ROOT_MAP_BASE, ROOT_MAP_BASE);
        as(c, 1000, 1000);
        ck_assert_int_eq(fe_fuse_mkdir(c, 1, "user-dir", 0755, NULL), 0);
        assert_host_owner("user-dir", ROOT_MAP_BASE + 1000, ROOT_MAP_BASE + 1000);
        as(c, 65536, 0);
        ck_assert_int_eq(create_file(c, 1, "unmapped", &e), -EPERM);
        client_free(c);
        stop();
}
END_TEST

/* A map the user's /etc/subuid does not grant: vufsd exits with a message naming the option. */
START_TEST(test_unprivileged_map_refused) {
        static const char *const maps[] = { "--uid-map=:0:400000:10:", NULL };
        const char *bin = getenv("VUFSD_BINARY");
        char cmd[1024], out[4096] = {};
        FILE *p;
        size_t n;
        int st;

        give_dirs(TEST_UID);
        (void)maps;
        snprintf(cmd, sizeof cmd,
                 "setpriv --reuid=65534 --regid=65534 --clear-groups -- %s --socket-path %s --shared-dir %s "
                 "--bus=none --sandbox=namespace --uid-map=:0:400000:10: 2>&1",
                 bin, h->socket_path, h->share);
        p = popen(cmd, "r");
        ck_assert_ptr_nonnull(p);
        n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        st = pclose(p);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "vufsd started with a map nobody may use: %s", out);
        ck_assert_msg(strstr(out, "--uid-map") && strstr(out, "newuidmap"), "message: %s", out);
        ck_assert_msg(access(h->socket_path, F_OK) < 0, "the socket is left behind");
}
END_TEST

static Suite *userns_suite(void) {
        Suite *s = suite_create("frontend-userns");
        TCase *tc = tcase_create("userns");
        TCase *sub = tcase_create("subordinate");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_root_test(tc, test_unprivileged_default_map);
        tcase_add_root_test(tc, test_root_with_map);
        tcase_add_root_test(tc, test_unprivileged_map_refused);
        suite_add_tcase(s, tc);
        tcase_add_unchecked_fixture(sub, setup_sub, teardown_sub);
        tcase_add_checked_fixture(sub, setup, teardown);
        tcase_set_timeout(sub, 60);
        tcase_add_root_test(sub, test_unprivileged_subordinate_map);
        tcase_add_root_test(sub, test_unprivileged_own_plus_subordinate);
        suite_add_tcase(s, sub);
        return s;
}

TEST_MAIN_SUITE(userns_suite)
