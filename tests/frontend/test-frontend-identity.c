/* test-frontend-identity.c: requests of a guest user act with that user's rights on the host.
 *
 * The guest kernel (virtiofs mounts with default_permissions) checks a request against the
 * attributes it has cached, or, for a CREATE of a name it believes absent, checks only the
 * parent. The host may have changed the file meanwhile, or made it in the guest's blind spot. So
 * every request here is one the guest kernel could send for a user, and the daemon alone stands
 * between that user and a file it may not use (docs/security.md, "Acting as the caller").
 *
 * Layout on the host (one mkdtemp directory per case): DIR/share (mode 0777) holds files of root
 * and of uid 1000 with the modes each check needs. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

#define USER 1000
#define SECRET "root-only content\n"
/* The open flag the kernel adds for execve() (__FMODE_EXEC), which a FUSE OPEN carries. */
#define FE_FMODE_EXEC 040

static FeHarness *h;
static Frontend *fe;
static FeFuse *c;

/* ---- host side ---- */

static void host_file(const char *name, uid_t uid, gid_t gid, mode_t mode, const char *content) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        ck_assert_msg(fd >= 0, "%s: %s", p, strerror(errno));
        ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
        ck_assert_int_eq(fchown(fd, uid, gid), 0);
        ck_assert_int_eq(fchmod(fd, mode), 0);
        close(fd);
}

/* The file's content on the host (at most 255 bytes), in a static buffer. */
static const char *host_content(const char *name) {
        static char buf[256];
        _cleanup_free_ char *p = fe_harness_path(h, name);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        ck_assert_msg(fd >= 0, "%s: %s", p, strerror(errno));
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        ck_assert_int_ge(n, 0);
        buf[n] = 0;
        return buf;
}

static struct stat host_stat(const char *name) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        struct stat st;

        ck_assert_msg(lstat(p, &st) == 0, "%s: %s", p, strerror(errno));
        return st;
}

/* ---- the session ---- */

static void start(void) {
        const char *extra[] = { "--bus=none", "--log-level=warning", "--xattr", NULL };
        int r;

        ck_assert_int_eq(fe_harness_new(&h), 0);
        ck_assert_int_eq(chmod(h->share, 0777), 0); /* the guest user may create in it */
        r = fe_harness_spawn_vufsd(h, extra);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
}

static void finish(void) {
        char buf[64];
        int st = 0;

        ck_assert_msg(c->proto_errors == 0, "protocol errors: %s", c->last_problem);
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        ck_assert_msg(fe_backend_wait(h->backend, 10000, &st) == 0, "vufsd still running 10 s after the disconnect");
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "vufsd %s", fe_backend_describe(st, buf, sizeof buf));
        h = fe_harness_free(h);
}

static void as(uid_t uid, gid_t gid) {
        c->uid = uid;
        c->gid = gid;
}

/* CREATE of name as the current identity; on success the handle is released again (the entry's
 * lookup is kept: the tests compare nodeids). */
static int create(const char *name, uint32_t flags, struct fuse_entry_out *ret_e, uint64_t *ret_fh) {
        struct fuse_entry_out e;
        uint64_t fh;
        int r = fe_fuse_create(c, FUSE_ROOT_ID, name, flags, S_IFREG | 0644, &e, &fh);

        ck_assert_msg(r != -EPROTO && r != -ETIMEDOUT, "CREATE %s: %s", name, c->last_problem);
        if (r == 0 && ret_e)
                *ret_e = e;
        if (r == 0 && ret_fh)
                *ret_fh = fh;
        else if (r == 0)
                ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
        return r;
}

/* A request with a fixed argument and up to two strings and a value; the reply into out. */
static int call(uint32_t op, uint64_t nodeid, const void *in, size_t inlen, const char *name, const void *value,
                size_t vlen, void *out, size_t outcap) {
        FeFuseReq *rq;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&rq, c, op, nodeid, outcap), 0);
        if (inlen > 0)
                ck_assert_int_eq(fe_fuse_req_add(rq, in, inlen), 0);
        if (name)
                ck_assert_int_eq(fe_fuse_req_add_str(rq, name), 0);
        if (vlen > 0)
                ck_assert_int_eq(fe_fuse_req_add(rq, value, vlen), 0);
        r = fe_fuse_call(c, rq);
        ck_assert_msg(r != -EPROTO && r != -ETIMEDOUT, "opcode %u: %s", op, c->last_problem);
        if (r == 0 && out)
                memcpy(out, rq->payload, MIN(outcap, rq->payload_len));
        fe_fuse_req_free(c, rq);
        return r;
}

static uint64_t node(const char *name) {
        struct fuse_entry_out e;
        int r = fe_fuse_lookup(c, FUSE_ROOT_ID, name, &e);

        ck_assert_msg(r == 0, "LOOKUP %s: %s", name, strerror(-r));
        return e.nodeid;
}

static int setattr(uint64_t nodeid, struct fuse_setattr_in in) {
        struct fuse_attr_out out;
        return call(FUSE_SETATTR, nodeid, &in, sizeof in, NULL, NULL, 0, &out, sizeof out);
}

/* OPEN (OPENDIR for a directory) as the current identity, released again on success. */
static int open_node(uint64_t nodeid, uint32_t flags, bool dir) {
        struct fuse_open_in in = { .flags = flags };
        struct fuse_open_out out;
        int r = call(dir ? FUSE_OPENDIR : FUSE_OPEN, nodeid, &in, sizeof in, NULL, NULL, 0, &out, sizeof out);

        if (r == 0)
                ck_assert_int_eq(fe_fuse_release(c, nodeid, out.fh, dir), 0);
        return r;
}

static int set_xattr(uint64_t nodeid, const char *name, const char *value) {
        struct fuse_setxattr_in in = { .size = (uint32_t)strlen(value) };
        size_t inlen = (c->init.flags & FUSE_SETXATTR_EXT) ? sizeof in : FUSE_COMPAT_SETXATTR_IN_SIZE;
        return call(FUSE_SETXATTR, nodeid, &in, inlen, name, value, strlen(value), NULL, 0);
}

static int get_xattr(uint64_t nodeid, const char *name) {
        struct fuse_getxattr_in in = { .size = 64 };
        char out[64];
        return call(FUSE_GETXATTR, nodeid, &in, sizeof in, name, NULL, 0, out, sizeof out);
}

/* ---- CREATE without O_EXCL on a name that exists (issue 31 finding 1) ---- */

START_TEST(test_create_existing_as_caller) {
        struct fuse_entry_out e, l;
        char buf[64];
        uint64_t fh;
        int r;

        start();
        host_file("secret", 0, 0, 0600, SECRET);
        host_file("mine", USER, USER, 0600, "mine\n");
        host_file("public", 0, 0, 0666, "public\n");
        host_file("group", 0, USER, 0660, "group\n");

        as(USER, USER);
        /* Another user's private file: the guest kernel checked only the parent. */
        r = create("secret", O_RDWR | O_CREAT, &e, &fh);
        if (r == 0) {
                int n = fe_fuse_read(c, e.nodeid, fh, 0, buf, sizeof buf - 1);
                ck_assert_msg(false, "CREATE O_RDWR|O_CREAT of root:root 0600 as uid %d: %d, READ %d: %.*s", USER, r,
                              n, MAX(n, 0), buf);
        }
        ck_assert_int_eq(r, -EACCES);
        ck_assert_int_eq(create("secret", O_RDONLY | O_CREAT, NULL, NULL), -EACCES);
        ck_assert_int_eq(create("secret", O_WRONLY | O_CREAT | O_TRUNC, NULL, NULL), -EACCES);
        ck_assert_str_eq(host_content("secret"), SECRET);
        ck_assert_uint_eq(host_stat("secret").st_mode & 07777, 0600);
        /* O_EXCL still answers EEXIST, for any file. */
        ck_assert_int_eq(create("secret", O_RDWR | O_CREAT | O_EXCL, NULL, NULL), -EEXIST);
        ck_assert_int_eq(create("mine", O_RDWR | O_CREAT | O_EXCL, NULL, NULL), -EEXIST);

        /* What the caller may open still opens, and the node is the existing inode. */
        ck_assert_int_eq(create("mine", O_RDWR | O_CREAT, &e, &fh), 0);
        ck_assert_uint_eq(e.attr.ino, host_stat("mine").st_ino);
        ck_assert_uint_eq(e.attr.size, 5);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "mine", &l), 0);
        ck_assert_uint_eq(l.nodeid, e.nodeid);
        ck_assert_int_eq(fe_fuse_read(c, e.nodeid, fh, 0, buf, sizeof buf), 5);
        ck_assert_int_eq(memcmp(buf, "mine\n", 5), 0);
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
        ck_assert_int_eq(create("mine", O_WRONLY | O_CREAT | O_TRUNC, &e, NULL), 0);
        ck_assert_uint_eq(e.attr.size, 0);
        ck_assert_int_eq(host_stat("mine").st_size, 0);
        ck_assert_int_eq(create("public", O_RDWR | O_CREAT, &e, &fh), 0);
        ck_assert_int_eq(fe_fuse_write(c, e.nodeid, fh, 0, "PUBLIC", 6), 6);
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
        ck_assert_str_eq(host_content("public"), "PUBLIC\n");
        ck_assert_int_eq(create("group", O_RDWR | O_CREAT, NULL, NULL), 0);

        /* Guest root acts as host root in the share, as before. */
        as(0, 0);
        ck_assert_int_eq(create("secret", O_RDWR | O_CREAT, &e, &fh), 0);
        ck_assert_int_eq(fe_fuse_read(c, e.nodeid, fh, 0, buf, sizeof buf), (int)strlen(SECRET));
        ck_assert_int_eq(fe_fuse_release(c, e.nodeid, fh, false), 0);
        finish();
}
END_TEST

/* Whatever sits at the name is never followed or opened for I/O unless it is a regular file. */
START_TEST(test_create_existing_not_regular) {
        _cleanup_free_ char *link = NULL, *fifo = NULL, *dir = NULL;

        start();
        host_file("target", USER, USER, 0666, "target\n");
        link = fe_harness_path(h, "link");
        fifo = fe_harness_path(h, "fifo");
        dir = fe_harness_path(h, "dir");
        ck_assert_int_eq(symlink("target", link), 0);
        ck_assert_int_eq(mkfifo(fifo, 0666), 0);
        ck_assert_int_eq(mkdir(dir, 0777), 0);
        for (int k = 0; k < 2; k++) {
                as(k == 0 ? USER : 0, k == 0 ? USER : 0);
                ck_assert_int_eq(create("link", O_RDWR | O_CREAT, NULL, NULL), -ELOOP);
                ck_assert_int_eq(create("fifo", O_RDONLY | O_CREAT, NULL, NULL), -ENXIO);
                ck_assert_int_eq(create("dir", O_RDONLY | O_CREAT, NULL, NULL), -EISDIR);
        }
        ck_assert_str_eq(host_content("target"), "target\n");
        finish();
}
END_TEST

/* OPEN, OPENDIR, SETATTR and xattrs of a file whose attributes the guest cached before the host
 * changed them: the guest kernel's check passed on the old ones; the host's current ones decide. A
 * group the request does not name is the guest's to judge: FUSE carries no supplementary groups. */
START_TEST(test_stale_attributes) {
        _cleanup_free_ char *d = NULL;
        uint64_t secret, mine, group, other_group, exec_only, dir;

        start();
        host_file("secret", 0, 0, 0600, SECRET);
        host_file("mine", USER, USER, 0600, "mine\n");
        host_file("group", 0, USER, 0660, "group\n");
        host_file("other-group", 0, 2000, 0640, "other-group\n");
        host_file("exec-only", 0, 0, 0711, "#!exec\n");
        d = fe_harness_path(h, "dir");
        ck_assert_int_eq(mkdir(d, 0700), 0);
        secret = node("secret");
        mine = node("mine");
        group = node("group");
        other_group = node("other-group");
        exec_only = node("exec-only");
        dir = node("dir");
        ck_assert_int_eq(set_xattr(secret, "user.x", "root"), 0);

        as(USER, USER);
        int r = open_node(secret, O_RDONLY, false);
        ck_assert_msg(r == -EACCES, "OPEN O_RDONLY of root:root 0600 as uid %d: %d", USER, r);
        ck_assert_int_eq(open_node(secret, O_WRONLY, false), -EACCES);
        ck_assert_int_eq(open_node(secret, O_RDONLY | O_TRUNC, false), -EACCES);
        ck_assert_int_eq(open_node(dir, O_RDONLY | O_DIRECTORY, true), -EACCES);
        r = setattr(secret, (struct fuse_setattr_in){ .valid = FATTR_MODE, .mode = 0666 });
        ck_assert_msg(r == -EPERM, "SETATTR mode of root:root 0600 as uid %d: %d", USER, r);
        ck_assert_int_eq(setattr(secret, (struct fuse_setattr_in){ .valid = FATTR_GID, .gid = USER }), -EPERM);
        ck_assert_int_eq(setattr(secret, (struct fuse_setattr_in){ .valid = FATTR_MTIME, .mtime = 1 }), -EPERM);
        ck_assert_int_eq(setattr(secret, (struct fuse_setattr_in){ .valid = FATTR_MTIME | FATTR_MTIME_NOW }), -EACCES);
        ck_assert_int_eq(setattr(secret, (struct fuse_setattr_in){ .valid = FATTR_SIZE, .size = 0 }), -EACCES);
        ck_assert_int_eq(set_xattr(secret, "user.x", "user"), -EACCES);
        ck_assert_int_eq(get_xattr(secret, "user.x"), -EACCES);
        struct fuse_access_in ai = { .mask = R_OK };
        ck_assert_int_eq(call(FUSE_ACCESS, secret, &ai, sizeof ai, NULL, NULL, 0, NULL, 0), -EACCES);
        ck_assert_int_eq(call(FUSE_ACCESS, mine, &ai, sizeof ai, NULL, NULL, 0, NULL, 0), 0);
        ck_assert_uint_eq(host_stat("secret").st_mode & 07777, 0600);
        ck_assert_uint_eq(host_stat("secret").st_gid, 0);
        ck_assert_int_ne(host_stat("secret").st_mtime, 1);
        ck_assert_str_eq(host_content("secret"), SECRET);

        /* What the caller may do still works. */
        ck_assert_int_eq(open_node(mine, O_RDWR | O_TRUNC, false), 0);
        ck_assert_int_eq(setattr(mine, (struct fuse_setattr_in){ .valid = FATTR_MODE, .mode = 0640 }), 0);
        ck_assert_int_eq(setattr(mine, (struct fuse_setattr_in){ .valid = FATTR_MTIME, .mtime = 1 }), 0);
        ck_assert_int_eq(set_xattr(mine, "user.x", "mine"), 0);
        ck_assert_int_eq(get_xattr(mine, "user.x"), 0);
        ck_assert_int_eq(open_node(group, O_RDWR, false), 0);
        ck_assert_int_eq(setattr(group, (struct fuse_setattr_in){ .valid = FATTR_SIZE, .size = 1 }), 0);
        ck_assert_int_eq(setattr(group, (struct fuse_setattr_in){ .valid = FATTR_MTIME | FATTR_MTIME_NOW }), 0);
        ck_assert_int_eq(open_node(other_group, O_RDONLY, false), 0); /* the guest judged the membership */
        ck_assert_int_eq(open_node(other_group, O_WRONLY, false), -EACCES);
        ck_assert_int_eq(open_node(exec_only, O_RDONLY | FE_FMODE_EXEC, false), 0); /* execve() */
        ck_assert_int_eq(open_node(exec_only, O_RDONLY, false), -EACCES);

        /* Guest root acts as host root. */
        as(0, 0);
        ck_assert_int_eq(open_node(secret, O_RDWR, false), 0);
        ck_assert_int_eq(open_node(dir, O_RDONLY | O_DIRECTORY, true), 0);
        ck_assert_int_eq(setattr(secret, (struct fuse_setattr_in){ .valid = FATTR_MODE, .mode = 0640 }), 0);
        ck_assert_uint_eq(host_stat("secret").st_mode & 07777, 0640);
        finish();
}
END_TEST

/* UNLINK, RENAME and LINK in directories the host changed: write permission on the directory and
 * its sticky bit, on the host's attributes. */
START_TEST(test_stale_directories) {
        const char *dirs[][2] = { { "locked", "0755" }, { "sticky", "01777" }, { "project", "0770" } };
        struct fuse_link_in li;
        struct fuse_entry_out e;
        uint64_t locked, sticky, project, mine;

        start();
        for (size_t k = 0; k < ELEMENTSOF(dirs); k++) {
                _cleanup_free_ char *d = fe_harness_path(h, dirs[k][0]);
                ck_assert_int_eq(mkdir(d, 0), 0);
                ck_assert_int_eq(chown(d, 0, strcmp(dirs[k][0], "project") == 0 ? 2000 : 0), 0);
                ck_assert_int_eq(chmod(d, (mode_t)strtoul(dirs[k][1], NULL, 8)), 0);
        }
        host_file("locked/f", 0, 0, 0666, "f\n");
        host_file("sticky/root", 0, 0, 0666, "root\n");
        host_file("sticky/mine", USER, USER, 0644, "mine\n");
        host_file("project/f", 0, 2000, 0660, "f\n");
        host_file("mine", USER, USER, 0644, "mine\n");
        locked = node("locked");
        sticky = node("sticky");
        project = node("project");
        mine = node("mine");

        as(USER, USER);
        int r = fe_fuse_unlink(c, locked, "f");
        ck_assert_msg(r == -EACCES, "UNLINK in root's 0755 directory as uid %d: %d", USER, r);
        ck_assert_int_eq(fe_fuse_rename(c, locked, "f", FUSE_ROOT_ID, "taken"), -EACCES);
        ck_assert_int_eq(fe_fuse_rename(c, FUSE_ROOT_ID, "mine", locked, "mine"), -EACCES);
        li = (struct fuse_link_in){ .oldnodeid = mine };
        ck_assert_int_eq(call(FUSE_LINK, locked, &li, sizeof li, "l", NULL, 0, &e, sizeof e), -EACCES);
        r = fe_fuse_unlink(c, sticky, "root");
        ck_assert_msg(r == -EPERM, "UNLINK of root's file in a sticky directory as uid %d: %d", USER, r);
        ck_assert_int_eq(fe_fuse_rename(c, sticky, "mine", sticky, "root"), -EPERM);
        ck_assert_int_eq(fe_fuse_rename(c, sticky, "root", FUSE_ROOT_ID, "taken"), -EPERM);
        ck_assert_str_eq(host_content("locked/f"), "f\n");
        ck_assert_str_eq(host_content("sticky/root"), "root\n");

        /* Allowed: one's own entry in a sticky directory, a group's directory (the guest judged the
         * membership), the caller's own directory. */
        ck_assert_int_eq(fe_fuse_rename(c, sticky, "mine", sticky, "mine2"), 0);
        ck_assert_int_eq(fe_fuse_unlink(c, sticky, "mine2"), 0);
        ck_assert_int_eq(fe_fuse_unlink(c, project, "f"), 0);
        ck_assert_int_eq(call(FUSE_LINK, FUSE_ROOT_ID, &li, sizeof li, "l", NULL, 0, &e, sizeof e), 0);
        ck_assert_int_eq(fe_fuse_rename(c, FUSE_ROOT_ID, "l", FUSE_ROOT_ID, "l2"), 0);

        as(0, 0);
        ck_assert_int_eq(fe_fuse_unlink(c, locked, "f"), 0);
        ck_assert_int_eq(fe_fuse_unlink(c, sticky, "root"), 0);
        finish();
}
END_TEST

static Suite *identity_suite(void) {
        Suite *s = suite_create("frontend-identity");
        TCase *tc = tcase_create("identity");

        tcase_set_timeout(tc, 120);
        tcase_add_root_test(tc, test_create_existing_as_caller);
        tcase_add_root_test(tc, test_create_existing_not_regular);
        tcase_add_root_test(tc, test_stale_attributes);
        tcase_add_root_test(tc, test_stale_directories);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(identity_suite)
