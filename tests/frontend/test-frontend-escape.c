/* test-frontend-escape.c: hand-made FUSE requests that try to leave the shared directory.
 *
 * Layout on the host (one mkdtemp directory per test):
 *   DIR/share/                  the share: file, dir/, fifo, char and block devices, a socket,
 *                               symlinks pointing outside (absolute and relative) and at ".."
 *   DIR/sentinel/secret.txt     a file with a random secret next to the share
 * Every request below must fail or stay inside the share. Afterwards: the sentinel is unchanged
 * (names, types, modes, sizes, times, contents, xattrs), no new name appeared next to the share or
 * at the absolute paths the requests named, no reply ever carried the secret, and vufsd still
 * serves. Run twice: with vufsd's default sandbox and with --sandbox=none, where only the
 * daemon's own checks stand between the guest and the host. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/fuse.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

#define NEVER_ISSUED 0x7fff0000ull

static FeHarness *h;
static Frontend *fe;
static FeFuse *c;
static char secret[64];
static char marker[64];   /* prefix of every name a request tries to create outside */
static char sentinel_before[16384];
static char outside_before[4096];
static unsigned n_requests;

/* ---- host-side state ---- */

static void snap_add(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void snap_add(char *buf, size_t size, const char *fmt, ...) {
        size_t len = strlen(buf);
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf + len, size - len, fmt, ap);
        va_end(ap);
}

/* Everything about a directory tree that a write, create, chmod, utimes or setxattr would change. */
static void snapshot_tree(const char *path, char *buf, size_t size) {
        struct stat st;
        char xl[1024];
        ssize_t n;

        ck_assert_int_eq(lstat(path, &st), 0);
        snap_add(buf, size, "%s mode=%o uid=%u gid=%u size=%lld mtime=%lld.%09ld ctime=%lld.%09ld nlink=%lu", path,
                 st.st_mode, st.st_uid, st.st_gid, (long long) st.st_size, (long long) st.st_mtim.tv_sec,
                 st.st_mtim.tv_nsec, (long long) st.st_ctim.tv_sec, st.st_ctim.tv_nsec, (unsigned long) st.st_nlink);
        n = llistxattr(path, xl, sizeof(xl));
        snap_add(buf, size, " xattrs=%zd", n);
        if (S_ISREG(st.st_mode)) {
                char data[256] = "";
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                ck_assert_int_ge(fd, 0);
                n = read(fd, data, sizeof(data) - 1);
                close(fd);
                snap_add(buf, size, " data=%.*s", (int) MAX(n, 0), data);
        }
        snap_add(buf, size, "\n");
        if (S_ISDIR(st.st_mode)) {
                struct dirent **list;
                int k = scandir(path, &list, NULL, alphasort);
                ck_assert_int_ge(k, 0);
                for (int i = 0; i < k; i++) {
                        char sub[1024];
                        if (strcmp(list[i]->d_name, ".") != 0 && strcmp(list[i]->d_name, "..") != 0) {
                                snprintf(sub, sizeof(sub), "%s/%s", path, list[i]->d_name);
                                snapshot_tree(sub, buf, size);
                        }
                        free(list[i]);
                }
                free(list);
        }
}

/* The names next to the share (the harness directory without the share's own contents). */
static void snapshot_outside(char *buf, size_t size) {
        struct dirent **list;
        int k = scandir(h->dir, &list, NULL, alphasort);

        buf[0] = 0;
        ck_assert_int_ge(k, 0);
        for (int i = 0; i < k; i++) {
                snap_add(buf, size, "%s ", list[i]->d_name);
                free(list[i]);
        }
        free(list);
}

static void snapshot_sentinel(char *buf, size_t size) {
        char path[512];

        buf[0] = 0;
        snprintf(path, sizeof(path), "%s/sentinel", h->dir);
        snapshot_tree(path, buf, size);
}

/* No name starting with the marker in the places a request could have reached. */
static void assert_no_marker_in(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d)))
                ck_assert_msg(strncmp(de->d_name, marker, strlen(marker)) != 0, "%s/%s was created outside the share", dir,
                              de->d_name);
        closedir(d);
}

static void share_path(char *buf, size_t size, const char *name) {
        snprintf(buf, size, "%s/%s", h->share, name);
}

static void setup_host(void) {
        char p[512], q[512];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd, s;

        srand((unsigned) time(NULL) ^ (unsigned) getpid());
        snprintf(secret, sizeof(secret), "vufs-secret-%08x%08x", (unsigned) rand(), (unsigned) rand());
        snprintf(marker, sizeof(marker), "vufs-esc-%d-", (int) getpid());

        snprintf(p, sizeof(p), "%s/sentinel", h->dir);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/sentinel/secret.txt", h->dir);
        fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, secret, strlen(secret)), (ssize_t) strlen(secret));
        close(fd);
        snprintf(p, sizeof(p), "%s/sentinel/subdir", h->dir);
        ck_assert_int_eq(mkdir(p, 0700), 0);

        share_path(p, sizeof(p), "file");
        fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "inside", 6), 6);
        close(fd);
        share_path(p, sizeof(p), "dir");
        ck_assert_int_eq(mkdir(p, 0755), 0);
        share_path(p, sizeof(p), "fifo");
        ck_assert_int_eq(mkfifo(p, 0666), 0);
        share_path(p, sizeof(p), "null");
        ck_assert_int_eq(mknod(p, S_IFCHR | 0666, makedev(1, 3)), 0);
        share_path(p, sizeof(p), "zero");
        ck_assert_int_eq(mknod(p, S_IFCHR | 0666, makedev(1, 5)), 0);
        share_path(p, sizeof(p), "blk");
        ck_assert_int_eq(mknod(p, S_IFBLK | 0600, makedev(7, 0)), 0);
        share_path(sa.sun_path, sizeof(sa.sun_path), "sock");
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(bind(s, (struct sockaddr *) &sa, sizeof(sa)), 0);
        close(s);
        /* Symlinks out of the share: absolute, relative, to the sentinel directory, to /, to "..". */
        snprintf(q, sizeof(q), "%s/sentinel/secret.txt", h->dir);
        share_path(p, sizeof(p), "out-abs");
        ck_assert_int_eq(symlink(q, p), 0);
        share_path(p, sizeof(p), "out-rel");
        ck_assert_int_eq(symlink("../sentinel/secret.txt", p), 0);
        share_path(p, sizeof(p), "out-dir");
        ck_assert_int_eq(symlink("../sentinel", p), 0);
        share_path(p, sizeof(p), "out-root");
        ck_assert_int_eq(symlink("/", p), 0);
        share_path(p, sizeof(p), "dotdot");
        ck_assert_int_eq(symlink("..", p), 0);
        share_path(p, sizeof(p), "dir/up2");
        ck_assert_int_eq(symlink("../../sentinel/secret.txt", p), 0);

        snapshot_sentinel(sentinel_before, sizeof(sentinel_before));
}

/* ---- requests ---- */

/* One hand-made request: fixed argument block, up to two strings, reply payload copied to out.
 * The reply must be well formed; no reply may contain the secret. Returns the reply's error. */
static int req(uint32_t op, uint64_t nodeid, const void *in, size_t inlen, const char *s1, const char *s2,
               void *out, size_t outcap) {
        FeFuseReq *rq;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&rq, c, op, nodeid, outcap), 0);
        if (inlen > 0)
                ck_assert_int_eq(fe_fuse_req_add(rq, in, inlen), 0);
        if (s1)
                ck_assert_int_eq(fe_fuse_req_add_str(rq, s1), 0);
        if (s2)
                ck_assert_int_eq(fe_fuse_req_add_str(rq, s2), 0);
        r = fe_fuse_call(c, rq);
        ck_assert_msg(r != -EPROTO && r != -ETIMEDOUT, "opcode %u on node %" PRIu64 ": %s", op, nodeid, c->last_problem);
        if (r == 0 && rq->payload_len > 0) {
                ck_assert_msg(!memmem(rq->payload, rq->payload_len, secret, strlen(secret)),
                              "opcode %u on node %" PRIu64 " returned the secret", op, nodeid);
                if (out)
                        memcpy(out, rq->payload, MIN(outcap, rq->payload_len));
        }
        fe_fuse_req_free(c, rq);
        n_requests++;
        return r;
}

static int lookup(uint64_t parent, const char *name, struct fuse_entry_out *e) {
        struct fuse_entry_out tmp;
        int r = req(FUSE_LOOKUP, parent, NULL, 0, name, NULL, &tmp, sizeof(tmp));

        if (r == 0 && tmp.nodeid == 0)
                r = -ENOENT;
        if (e)
                *e = tmp;
        return r;
}

static uint64_t node(uint64_t parent, const char *name) {
        struct fuse_entry_out e;
        int r = lookup(parent, name, &e);

        ck_assert_msg(r == 0, "LOOKUP %s: %s", name, strerror(-r));
        return e.nodeid;
}

static int open_node(uint64_t nodeid, uint32_t flags, uint64_t *fh) {
        struct fuse_open_in in = { .flags = flags };
        struct fuse_open_out o = {};
        int r = req(FUSE_OPEN, nodeid, &in, sizeof(in), NULL, NULL, &o, sizeof(o));

        *fh = o.fh;
        return r;
}

static int create(uint64_t parent, const char *name, uint32_t flags, uint64_t *fh) {
        struct fuse_create_in in = { .flags = flags, .mode = S_IFREG | 0644, .umask = 022 };
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o;
        } out = {};
        int r = req(FUSE_CREATE, parent, &in, sizeof(in), name, NULL, &out, sizeof(out));

        if (fh)
                *fh = out.o.fh;
        return r;
}

static int mkdir_(uint64_t parent, const char *name) {
        struct fuse_mkdir_in in = { .mode = 0755, .umask = 022 };
        struct fuse_entry_out e;
        return req(FUSE_MKDIR, parent, &in, sizeof(in), name, NULL, &e, sizeof(e));
}

static int mknod_(uint64_t parent, const char *name, uint32_t mode, uint32_t rdev) {
        struct fuse_mknod_in in = { .mode = mode, .rdev = rdev, .umask = 022 };
        struct fuse_entry_out e;
        return req(FUSE_MKNOD, parent, &in, sizeof(in), name, NULL, &e, sizeof(e));
}

static int symlink_(uint64_t parent, const char *name, const char *target) {
        struct fuse_entry_out e;
        return req(FUSE_SYMLINK, parent, NULL, 0, name, target, &e, sizeof(e));
}

static int link_(uint64_t oldnode, uint64_t newparent, const char *newname) {
        struct fuse_link_in in = { .oldnodeid = oldnode };
        struct fuse_entry_out e;
        return req(FUSE_LINK, newparent, &in, sizeof(in), newname, NULL, &e, sizeof(e));
}

static int rename2(uint64_t parent, const char *name, uint64_t newparent, const char *newname, uint32_t flags) {
        struct fuse_rename2_in in = { .newdir = newparent, .flags = flags };
        return req(FUSE_RENAME2, parent, &in, sizeof(in), name, newname, NULL, 0);
}

static int rename1(uint64_t parent, const char *name, uint64_t newparent, const char *newname) {
        struct fuse_rename_in in = { .newdir = newparent };
        return req(FUSE_RENAME, parent, &in, sizeof(in), name, newname, NULL, 0);
}

static int read_(uint64_t nodeid, uint64_t fh, void *buf, uint32_t size) {
        struct fuse_read_in in = { .fh = fh, .size = size };
        FeFuseReq *rq;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&rq, c, FUSE_READ, nodeid, size), 0);
        fe_fuse_req_add(rq, &in, sizeof(in));
        r = fe_fuse_call(c, rq);
        ck_assert_msg(r != -EPROTO && r != -ETIMEDOUT, "READ: %s", c->last_problem);
        if (r == 0) {
                ck_assert_msg(!memmem(rq->payload, rq->payload_len, secret, strlen(secret)), "READ returned the secret");
                memcpy(buf, rq->payload, MIN(size, rq->payload_len));
                r = (int) rq->payload_len;
        }
        fe_fuse_req_free(c, rq);
        n_requests++;
        return r;
}

static int write_(uint64_t nodeid, uint64_t fh, const char *data) {
        return fe_fuse_write(c, nodeid, fh, 0, data, (uint32_t) strlen(data));
}

static int setattr(uint64_t nodeid, const struct fuse_setattr_in *in) {
        struct fuse_attr_out o;
        return req(FUSE_SETATTR, nodeid, in, sizeof(*in), NULL, NULL, &o, sizeof(o));
}

static int setxattr_(uint64_t nodeid, const char *name, const char *value) {
        struct fuse_setxattr_in in = { .size = (uint32_t) strlen(value) };
        size_t inlen = (c->init.flags & FUSE_SETXATTR_EXT) ? sizeof(in) : FUSE_COMPAT_SETXATTR_IN_SIZE;
        FeFuseReq *rq;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&rq, c, FUSE_SETXATTR, nodeid, 0), 0);
        fe_fuse_req_add(rq, &in, inlen);
        fe_fuse_req_add_str(rq, name);
        fe_fuse_req_add(rq, value, strlen(value));
        r = fe_fuse_call(c, rq);
        ck_assert_msg(r != -EPROTO && r != -ETIMEDOUT, "SETXATTR: %s", c->last_problem);
        fe_fuse_req_free(c, rq);
        n_requests++;
        return r;
}

/* SETXATTR with a binary value (a file capability holds NUL bytes). */
static int setxattr_bin(uint64_t nodeid, const char *name, const void *value, size_t size) {
        struct fuse_setxattr_in in = { .size = (uint32_t)size };
        size_t inlen = (c->init.flags & FUSE_SETXATTR_EXT) ? sizeof(in) : FUSE_COMPAT_SETXATTR_IN_SIZE;
        FeFuseReq *rq;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&rq, c, FUSE_SETXATTR, nodeid, 0), 0);
        fe_fuse_req_add(rq, &in, inlen);
        fe_fuse_req_add_str(rq, name);
        fe_fuse_req_add(rq, value, size);
        r = fe_fuse_call(c, rq);
        ck_assert_msg(r != -EPROTO && r != -ETIMEDOUT, "SETXATTR: %s", c->last_problem);
        fe_fuse_req_free(c, rq);
        n_requests++;
        return r;
}

/* ---- the session ---- */

static void start(const char *sandbox, const char *more) {
        const char *extra[] = { "--xattr", "--bus=none", sandbox, more, NULL };
        FeOptions o;
        int r;

        ck_assert_int_eq(fe_harness_new(&h), 0);
        setup_host();
        r = fe_harness_spawn_vufsd(h, extra);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        fe_options_init(&o);
        o.timeout_ms = 10000;
        ck_assert_int_eq(fe_connect(&fe, h->socket_path, &o), 0);
        ck_assert_msg(fe_negotiate(fe) == 0, "negotiate: %s", fe->error);
        ck_assert_msg(fe_start(fe, true) == 0, "start: %s", fe->error);
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        r = fe_fuse_init(c);
        ck_assert_msg(r == 0, "INIT: %d %s", r, c->last_problem);
        /* After start-up: the socket and its lock file are vufsd's own. */
        snapshot_outside(outside_before, sizeof(outside_before));
}

/* Nothing outside changed, nothing was created, and vufsd still serves. */
static void finish(void) {
        char now[sizeof(sentinel_before)], outside[sizeof(outside_before)];
        char buf[64];
        int r, st = 0;

        ck_assert_msg(fe_backend_alive(h->backend), "vufsd is gone: %s",
                      fe_backend_describe(h->backend->status, buf, sizeof(buf)));
        ck_assert_msg(c->proto_errors == 0, "protocol errors: %s", c->last_problem);
        snapshot_sentinel(now, sizeof(now));
        ck_assert_msg(strcmp(now, sentinel_before) == 0, "the sentinel changed:\nbefore:\n%s\nafter:\n%s",
                      sentinel_before, now);
        snapshot_outside(outside, sizeof(outside));
        ck_assert_msg(strcmp(outside, outside_before) == 0, "names next to the share changed: before [%s] after [%s]",
                      outside_before, outside);
        assert_no_marker_in(h->dir);
        assert_no_marker_in("/tmp");
        assert_no_marker_in("/");
        assert_no_marker_in("/etc");
        c->proto_errors = 0;
        r = fe_fuse_roundtrip(c, "still-serving", 100000, 7);
        ck_assert_msg(r == 0, "vufsd no longer serves: %s", c->last_problem);
        ck_assert_int_eq(c->proto_errors, 0);
        fprintf(stderr, "escape: %u hostile requests, vufsd still serving\n", n_requests);
        n_requests = 0;
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        /* It ends cleanly once the frontend is gone: no crash, no sanitizer report at exit. */
        r = fe_backend_wait(h->backend, 10000, &st);
        ck_assert_msg(r == 0, "vufsd still running 10 s after the disconnect");
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "vufsd %s", fe_backend_describe(st, buf, sizeof(buf)));
        h = fe_harness_free(h);
}

static char *out_name(const char *where, const char *suffix) {
        static char buf[8][512];
        static unsigned i;
        char *b = buf[i++ % 8];

        snprintf(b, 512, "%s%s%s", where, marker, suffix);
        return b;
}

/* ---- the attempts ---- */

static void names_with_slashes(void) {
        uint64_t dir = node(FUSE_ROOT_ID, "dir"), fh;
        char abs_etc[128];

        snprintf(abs_etc, sizeof(abs_etc), "/etc/%sx", marker);
        /* LOOKUP: '/' in a name, ".." chains, absolute names. */
        ck_assert_int_lt(lookup(FUSE_ROOT_ID, "../sentinel", NULL), 0);
        ck_assert_int_lt(lookup(FUSE_ROOT_ID, "../sentinel/secret.txt", NULL), 0);
        ck_assert_int_lt(lookup(dir, "../../sentinel", NULL), 0);
        ck_assert_int_lt(lookup(FUSE_ROOT_ID, "/etc/passwd", NULL), 0);
        ck_assert_int_lt(lookup(FUSE_ROOT_ID, "dir/../../sentinel", NULL), 0);
        ck_assert_int_lt(lookup(FUSE_ROOT_ID, "", NULL), 0);
        ck_assert_int_lt(lookup(FUSE_ROOT_ID, "sentinel", NULL), 0);
        /* ".." at the root is the root. */
        struct fuse_entry_out up, root;
        struct fuse_attr_out ra;
        struct stat st;
        ck_assert_int_eq(lookup(FUSE_ROOT_ID, "..", &up), 0);
        ck_assert_int_eq(fe_fuse_getattr(c, FUSE_ROOT_ID, &ra), 0);
        ck_assert_int_eq(lstat(h->share, &st), 0);
        ck_assert_uint_eq(up.attr.ino, st.st_ino);
        ck_assert_uint_eq(ra.attr.ino, st.st_ino);
        ck_assert_int_lt(lookup(up.nodeid, "sentinel", NULL), 0);
        ck_assert_int_eq(lookup(up.nodeid, "..", &root), 0);
        ck_assert_uint_eq(root.attr.ino, st.st_ino);
        /* ".." below the root goes up inside the share only. */
        ck_assert_int_eq(lookup(dir, "..", &up), 0);
        ck_assert_uint_eq(up.attr.ino, st.st_ino);

        /* Creating operations with such names. */
        ck_assert_int_lt(create(FUSE_ROOT_ID, out_name("../", "c"), O_RDWR | O_CREAT, &fh), 0);
        ck_assert_int_lt(create(FUSE_ROOT_ID, out_name(h->dir, "/c"), O_RDWR | O_CREAT, &fh), 0);
        ck_assert_int_lt(create(dir, out_name("../../", "c"), O_RDWR | O_CREAT, &fh), 0);
        ck_assert_int_lt(create(FUSE_ROOT_ID, "..", O_RDWR | O_CREAT, &fh), 0);
        ck_assert_int_lt(create(FUSE_ROOT_ID, ".", O_RDWR | O_CREAT, &fh), 0);
        ck_assert_int_lt(create(FUSE_ROOT_ID, "../sentinel/secret.txt", O_RDWR | O_CREAT | O_TRUNC, &fh), 0);
        ck_assert_int_lt(mkdir_(FUSE_ROOT_ID, "a/b"), 0);
        ck_assert_int_lt(mkdir_(FUSE_ROOT_ID, out_name("../", "d")), 0);
        ck_assert_int_lt(mkdir_(FUSE_ROOT_ID, ".."), 0);
        ck_assert_int_lt(mkdir_(FUSE_ROOT_ID, "/tmp"), 0);
        ck_assert_int_lt(mknod_(FUSE_ROOT_ID, out_name("../", "n"), S_IFIFO | 0644, 0), 0);
        ck_assert_int_lt(mknod_(FUSE_ROOT_ID, out_name("/tmp/", "n"), S_IFREG | 0644, 0), 0);
        /* SYMLINK with an absolute name (GHSA-2gv2-cffp-j227) and with a ".." name. */
        ck_assert_int_lt(symlink_(FUSE_ROOT_ID, abs_etc, "/etc/passwd"), 0);
        ck_assert_int_lt(symlink_(FUSE_ROOT_ID, "/etc/x", "anything"), 0);
        ck_assert_int_lt(symlink_(FUSE_ROOT_ID, out_name("../", "s"), "x"), 0);
        ck_assert_int_lt(symlink_(dir, out_name("../../", "s"), "x"), 0);
        ck_assert_int_lt(symlink_(FUSE_ROOT_ID, "..", "x"), 0);
        ck_assert_int_lt(access(abs_etc, F_OK), 0);
        /* Removing operations. */
        ck_assert_int_lt(req(FUSE_UNLINK, FUSE_ROOT_ID, NULL, 0, "../sentinel/secret.txt", NULL, NULL, 0), 0);
        ck_assert_int_lt(req(FUSE_UNLINK, dir, NULL, 0, "../../sentinel/secret.txt", NULL, NULL, 0), 0);
        ck_assert_int_lt(req(FUSE_RMDIR, FUSE_ROOT_ID, NULL, 0, "../sentinel/subdir", NULL, NULL, 0), 0);
        ck_assert_int_lt(req(FUSE_RMDIR, FUSE_ROOT_ID, NULL, 0, "..", NULL, NULL, 0), 0);
        ck_assert_int_lt(req(FUSE_RMDIR, dir, NULL, 0, "..", NULL, NULL, 0), 0);
        ck_assert_int_lt(req(FUSE_UNLINK, FUSE_ROOT_ID, NULL, 0, "/etc/passwd", NULL, NULL, 0), 0);
        /* TMPFILE carries a placeholder name; a hostile one must not pick the directory. */
        struct fuse_create_in ti = { .flags = O_RDWR, .mode = S_IFREG | 0600, .umask = 022 };
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o;
        } tout;
        int r = req(FUSE_TMPFILE, FUSE_ROOT_ID, &ti, sizeof(ti), "../sentinel", NULL, &tout, sizeof(tout));
        if (r == 0) {
                /* Made in the share (the name is not a path): writing to it stays inside. */
                ck_assert_int_eq(write_(tout.e.nodeid, tout.o.fh, "tmp"), 3);
        }
        /* Names with an embedded NUL stop at it: "file\0/../../x" is "file". */
        struct fuse_entry_out e;
        FeFuseReq *rq;
        ck_assert_int_eq(fe_fuse_req_new(&rq, c, FUSE_LOOKUP, FUSE_ROOT_ID, sizeof(e)), 0);
        fe_fuse_req_add(rq, "file\0/../../sentinel", 21);
        r = fe_fuse_call(c, rq);
        ck_assert(r != -EPROTO && r != -ETIMEDOUT);
        fe_fuse_req_free(c, rq);
}

static void through_symlinks(void) {
        const char *links[] = { "out-abs", "out-rel", "out-dir", "out-root", "dotdot" };
        struct stat sst;
        char sp[512];

        snprintf(sp, sizeof(sp), "%s/sentinel/secret.txt", h->dir);
        ck_assert_int_eq(lstat(sp, &sst), 0);
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                struct fuse_entry_out e;
                uint64_t fh;
                char buf[4096];

                ck_assert_int_eq(lookup(FUSE_ROOT_ID, links[i], &e), 0);
                /* The node is the link itself, never what it points at. */
                ck_assert_msg(S_ISLNK(e.attr.mode), "%s: mode %o", links[i], e.attr.mode);
                ck_assert_uint_ne(e.attr.ino, sst.st_ino);
                ck_assert_int_lt(open_node(e.nodeid, O_RDONLY, &fh), 0);
                ck_assert_int_lt(open_node(e.nodeid, O_RDWR | O_TRUNC, &fh), 0);
                ck_assert_int_lt(open_node(e.nodeid, O_WRONLY | O_APPEND, &fh), 0);
                ck_assert_int_lt(fe_fuse_opendir(c, e.nodeid, &fh), 0);
                ck_assert_int_lt(lookup(e.nodeid, "secret.txt", NULL), 0);
                ck_assert_int_lt(lookup(e.nodeid, "sentinel", NULL), 0);
                ck_assert_int_lt(lookup(e.nodeid, "..", NULL), 0);
                ck_assert_int_lt(create(e.nodeid, out_name("", "c"), O_RDWR | O_CREAT, &fh), 0);
                ck_assert_int_lt(mkdir_(e.nodeid, out_name("", "d")), 0);
                ck_assert_int_lt(symlink_(e.nodeid, out_name("", "s"), "x"), 0);
                ck_assert_int_lt(mknod_(e.nodeid, out_name("", "n"), S_IFIFO | 0600, 0), 0);
                /* CREATE of the link's name without O_EXCL must not open the target. */
                ck_assert_int_lt(create(FUSE_ROOT_ID, links[i], O_RDWR | O_CREAT | O_TRUNC, &fh), 0);
                ck_assert_int_lt(create(FUSE_ROOT_ID, links[i], O_WRONLY | O_CREAT | O_APPEND, &fh), 0);
                /* Attribute changes act on the link (or are refused), never on the target. */
                struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };
                (void) setattr(e.nodeid, &sa);
                sa = (struct fuse_setattr_in) { .valid = FATTR_MODE, .mode = 0777 };
                (void) setattr(e.nodeid, &sa);
                sa = (struct fuse_setattr_in) { .valid = FATTR_MTIME | FATTR_ATIME, .mtime = 1, .atime = 1 };
                (void) setattr(e.nodeid, &sa);
                sa = (struct fuse_setattr_in) { .valid = FATTR_UID | FATTR_GID, .uid = 4321, .gid = 4321 };
                (void) setattr(e.nodeid, &sa);
                (void) setxattr_(e.nodeid, "trusted.escape", "x");
                (void) setxattr_(e.nodeid, "user.escape", "x");
                char xbuf[256];
                struct fuse_getxattr_in gi = { .size = sizeof(xbuf) };
                (void) req(FUSE_GETXATTR, e.nodeid, &gi, sizeof(gi), "user.escape", NULL, xbuf, sizeof(xbuf));
                (void) req(FUSE_LISTXATTR, e.nodeid, &gi, sizeof(gi), NULL, NULL, xbuf, sizeof(xbuf));
                /* READLINK returns the link text only. */
                memset(buf, 0, sizeof(buf));
                ck_assert_int_eq(req(FUSE_READLINK, e.nodeid, NULL, 0, NULL, NULL, buf, sizeof(buf) - 1), 0);
                /* A hard link of the link is a link, inside the share. */
                if (link_(e.nodeid, FUSE_ROOT_ID, out_name("", "hl")) == 0) {
                        struct fuse_entry_out le;
                        ck_assert_int_eq(lookup(FUSE_ROOT_ID, out_name("", "hl"), &le), 0);
                        ck_assert(S_ISLNK(le.attr.mode));
                        ck_assert_int_lt(open_node(le.nodeid, O_RDONLY, &fh), 0);
                        ck_assert_int_eq(req(FUSE_UNLINK, FUSE_ROOT_ID, NULL, 0, out_name("", "hl"), NULL, NULL, 0), 0);
                }
        }
        /* A symlink deeper down that climbs out. */
        uint64_t dir = node(FUSE_ROOT_ID, "dir"), fh;
        struct fuse_entry_out e;
        ck_assert_int_eq(lookup(dir, "up2", &e), 0);
        ck_assert(S_ISLNK(e.attr.mode));
        ck_assert_int_lt(open_node(e.nodeid, O_RDONLY, &fh), 0);
        /* A symlink the guest creates pointing outside is only text. */
        ck_assert_int_eq(symlink_(FUSE_ROOT_ID, "guest-out", "../sentinel/secret.txt"), 0);
        ck_assert_int_eq(lookup(FUSE_ROOT_ID, "guest-out", &e), 0);
        ck_assert_int_lt(open_node(e.nodeid, O_RDONLY, &fh), 0);
        ck_assert_int_lt(open_node(e.nodeid, O_WRONLY | O_TRUNC, &fh), 0);
        ck_assert_int_lt(create(FUSE_ROOT_ID, "guest-out", O_WRONLY | O_CREAT | O_TRUNC, &fh), 0);
}

static void renames_and_links(void) {
        uint64_t file = node(FUSE_ROOT_ID, "file"), dir = node(FUSE_ROOT_ID, "dir");
        uint64_t outdir = node(FUSE_ROOT_ID, "out-dir"), dotdot = node(FUSE_ROOT_ID, "dotdot");
        uint64_t targets[] = { NEVER_ISSUED, 0, UINT64_MAX, outdir, dotdot, file };

        for (size_t i = 0; i < ELEMENTSOF(targets); i++) {
                ck_assert_int_lt(rename1(FUSE_ROOT_ID, "file", targets[i], out_name("", "r")), 0);
                ck_assert_int_lt(rename2(FUSE_ROOT_ID, "file", targets[i], out_name("", "r"), 0), 0);
                ck_assert_int_lt(rename2(FUSE_ROOT_ID, "file", targets[i], "secret.txt", RENAME_EXCHANGE), 0);
                ck_assert_int_lt(link_(file, targets[i], out_name("", "l")), 0);
                /* And the other way round: the source directory is not ours. */
                ck_assert_int_lt(rename1(targets[i], "secret.txt", FUSE_ROOT_ID, "stolen"), 0);
                ck_assert_int_lt(rename2(targets[i], "secret.txt", FUSE_ROOT_ID, "stolen", RENAME_NOREPLACE), 0);
        }
        ck_assert_int_lt(rename1(FUSE_ROOT_ID, "file", FUSE_ROOT_ID, out_name("../", "r")), 0);
        ck_assert_int_lt(rename1(FUSE_ROOT_ID, "file", dir, out_name("../../", "r")), 0);
        ck_assert_int_lt(rename1(FUSE_ROOT_ID, "file", FUSE_ROOT_ID, out_name("/tmp/", "r")), 0);
        ck_assert_int_lt(rename1(FUSE_ROOT_ID, "../sentinel/secret.txt", FUSE_ROOT_ID, "stolen"), 0);
        ck_assert_int_lt(rename1(dir, "../../sentinel", FUSE_ROOT_ID, "stolen"), 0);
        ck_assert_int_lt(rename2(FUSE_ROOT_ID, "file", FUSE_ROOT_ID, "../sentinel/secret.txt", RENAME_EXCHANGE), 0);
        ck_assert_int_lt(rename2(FUSE_ROOT_ID, "dir", FUSE_ROOT_ID, "..", 0), 0);
        ck_assert_int_lt(rename2(FUSE_ROOT_ID, "..", FUSE_ROOT_ID, "x", 0), 0);
        ck_assert_int_lt(rename2(FUSE_ROOT_ID, "file", FUSE_ROOT_ID, "x", RENAME_WHITEOUT | RENAME_EXCHANGE), 0);
        ck_assert_int_lt(link_(file, FUSE_ROOT_ID, out_name("../", "l")), 0);
        ck_assert_int_lt(link_(file, dir, out_name("../../", "l")), 0);
        ck_assert_int_lt(link_(file, FUSE_ROOT_ID, "/etc/x"), 0);
        ck_assert_int_lt(link_(NEVER_ISSUED, FUSE_ROOT_ID, out_name("", "l")), 0);
        ck_assert_int_lt(link_(0, FUSE_ROOT_ID, out_name("", "l2")), 0);
        /* The root cannot be renamed, linked or replaced. */
        ck_assert_int_lt(link_(FUSE_ROOT_ID, dir, "root-link"), 0);
        ck_assert_int_lt(rename1(dir, "..", FUSE_ROOT_ID, "x"), 0);
        /* The file is still where it was. */
        struct fuse_entry_out e;
        ck_assert_int_eq(lookup(FUSE_ROOT_ID, "file", &e), 0);
        ck_assert_uint_eq(e.attr.size, 6);
}

static void special_files(void) {
        const char *names[] = { "fifo", "null", "zero", "blk", "sock" };
        uint32_t flags[] = { O_RDONLY, O_WRONLY, O_RDWR, O_RDONLY | O_NONBLOCK, O_WRONLY | O_NONBLOCK, O_RDWR | O_TRUNC };

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                struct fuse_entry_out e;
                uint64_t fh;
                char buf[64];

                ck_assert_int_eq(lookup(FUSE_ROOT_ID, names[i], &e), 0);
                for (size_t k = 0; k < ELEMENTSOF(flags); k++) {
                        int r = open_node(e.nodeid, flags[k], &fh);
                        ck_assert_msg(r < 0, "OPEN %s flags %o succeeded", names[i], flags[k]);
                }
                ck_assert_int_lt(fe_fuse_opendir(c, e.nodeid, &fh), 0);
                /* CREATE of the existing name must not open the node either (a FIFO would block). */
                int r = create(FUSE_ROOT_ID, names[i], O_RDWR | O_CREAT, &fh);
                ck_assert_msg(r < 0, "CREATE over %s opened it", names[i]);
                /* Truncating a device through SETATTR must not open it. */
                struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };
                (void) setattr(e.nodeid, &sa);
                /* I/O with fhs that were never issued for it. */
                ck_assert_int_lt(read_(e.nodeid, 1, buf, sizeof(buf)), 0);
                ck_assert_int_lt(read_(e.nodeid, NEVER_ISSUED, buf, sizeof(buf)), 0);
                ck_assert_int_lt(write_(e.nodeid, 0, "x"), 0);
        }
        /* Device nodes the guest makes are not opened for it either. */
        int r = mknod_(FUSE_ROOT_ID, "guest-zero", S_IFCHR | 0666, (1 << 8) | 5);
        if (r == 0) {
                uint64_t n = node(FUSE_ROOT_ID, "guest-zero"), fh;
                ck_assert_int_lt(open_node(n, O_RDONLY, &fh), 0);
                ck_assert_int_lt(create(FUSE_ROOT_ID, "guest-zero", O_RDWR | O_CREAT, &fh), 0);
        }
        r = mknod_(FUSE_ROOT_ID, "guest-fifo", S_IFIFO | 0666, 0);
        ck_assert_int_eq(r, 0);
        uint64_t n = node(FUSE_ROOT_ID, "guest-fifo"), fh;
        ck_assert_int_lt(open_node(n, O_RDONLY, &fh), 0);
        ck_assert_int_lt(open_node(n, O_WRONLY, &fh), 0);
}

/* ---- guest root on the host (issue 13 item 10) ---- */

static int create_mode(uint64_t parent, const char *name, uint32_t mode, uint64_t *ret_node) {
        struct fuse_create_in in = { .flags = O_RDWR, .mode = S_IFREG | mode, .umask = 0 };
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o;
        } out = {};
        int r = req(FUSE_CREATE, parent, &in, sizeof(in), name, NULL, &out, sizeof(out));

        if (ret_node)
                *ret_node = out.e.nodeid;
        return r;
}

static mode_t host_mode(const char *name) {
        char path[512];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", h->share, name);
        ck_assert_msg(lstat(path, &st) == 0, "%s: %s", path, strerror(errno));
        return st.st_mode;
}

static bool host_exists(const char *name) {
        char path[512];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", h->share, name);
        return lstat(path, &st) == 0;
}

/* A file the guest makes must not be a set-id program or a device node that a host user could
 * use (the share is a host directory: nosuid,nodev inside vufsd's own mount namespace protects
 * nobody else). This is --privileged-files=refuse; with privileged_files (--allow-privileged-files)
 * the old behaviour is back. map, the default, is test-frontend-mapped's. */
static void guest_root_files(bool privileged_files) {
        struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = 06755 };
        uint64_t n;
        int r;

        ck_assert_uint_eq(c->uid, 0); /* guest root */
        r = create_mode(FUSE_ROOT_ID, "suid-root", 04755, &n);
        ck_assert_msg(r == 0, "CREATE 04755: %s", strerror(-r));
        r = create_mode(FUSE_ROOT_ID, "sgid-root", 02755, NULL);
        ck_assert_msg(r == 0, "CREATE 02755: %s", strerror(-r));
        ck_assert_int_eq(setattr(node(FUSE_ROOT_ID, "file"), &sa), 0);
        r = mknod_(FUSE_ROOT_ID, "suid-node", S_IFREG | 06755, 0);
        ck_assert_msg(r == 0, "MKNOD S_IFREG 06755: %s", strerror(-r));
        /* the same as a guest user for a file it owns */
        ck_assert_int_eq(
                setattr(n, &(struct fuse_setattr_in){ .valid = FATTR_UID | FATTR_GID, .uid = 1000, .gid = 1000 }), 0);
        c->uid = c->gid = 1000;
        ck_assert_int_eq(setattr(n, &sa), 0);
        c->uid = c->gid = 0;
        /* A file capability is a set-id bit by another name: cap_setuid+ep on a program in the
         * share is host root for any host user who runs it. VFS_CAP_REVISION_2, permitted and
         * effective CAP_SETUID. */
        struct {
                uint32_t magic_etc;
                struct {
                        uint32_t permitted, inheritable;
                } data[2];
        } fcap = { .magic_etc = 0x02000000 | 0x000001, .data = { { 1u << CAP_SETUID, 0 }, { 0, 0 } } };
        char fpath[512];
        snprintf(fpath, sizeof(fpath), "%s/%s", h->share, "sgid-root");
        r = setxattr_bin(node(FUSE_ROOT_ID, "sgid-root"), "security.capability", &fcap, sizeof(fcap));
        if (privileged_files) {
                ck_assert_msg(r == 0, "SETXATTR security.capability with --allow-privileged-files: %s", strerror(-r));
                ck_assert_int_gt(lgetxattr(fpath, "security.capability", NULL, 0), 0);
        } else {
                ck_assert_msg(r == -EPERM, "SETXATTR security.capability as guest root: %d", r);
                ck_assert_msg(lgetxattr(fpath, "security.capability", NULL, 0) < 0 && errno == ENODATA,
                              "a file capability appeared on the host");
        }
        if (privileged_files) {
                /* (the chown cleared it, the owner set it again) */
                ck_assert_uint_eq(host_mode("suid-root") & 07777, 06755);
                ck_assert_uint_eq(host_mode("sgid-root") & 07777, 02755);
                ck_assert_uint_eq(host_mode("file") & 07777, 06755);
                ck_assert_uint_eq(host_mode("suid-node") & 07777, 06755);
                r = mknod_(FUSE_ROOT_ID, "guest-null", S_IFCHR | 0666, (1 << 8) | 3);
                ck_assert_msg(r == 0, "MKNOD S_IFCHR with --allow-privileged-files: %s", strerror(-r));
                ck_assert(S_ISCHR(host_mode("guest-null")));
                return;
        }
        ck_assert_msg((host_mode("suid-root") & 07777) == 0755, "CREATE 04755 as guest root: host mode %o",
                      host_mode("suid-root") & 07777);
        ck_assert_msg((host_mode("sgid-root") & 07777) == 0755, "CREATE 02755: host mode %o",
                      host_mode("sgid-root") & 07777);
        ck_assert_msg((host_mode("file") & 06000) == 0, "SETATTR 06755 as guest root: host mode %o",
                      host_mode("file") & 07777);
        ck_assert_msg((host_mode("suid-node") & 06000) == 0, "MKNOD 06755: host mode %o",
                      host_mode("suid-node") & 07777);
        ck_assert_msg((host_mode("suid-root") & 06000) == 0, "SETATTR 06755 by the owner (uid 1000): host mode %o",
                      host_mode("suid-root") & 07777);
        /* Device nodes: refused, nothing appears on the host. */
        ck_assert_int_eq(mknod_(FUSE_ROOT_ID, "guest-null", S_IFCHR | 0666, (1 << 8) | 3), -EPERM);
        ck_assert_int_eq(mknod_(FUSE_ROOT_ID, "guest-sda", S_IFBLK | 0600, (8 << 8) | 0), -EPERM);
        ck_assert(!host_exists("guest-null"));
        ck_assert(!host_exists("guest-sda"));
        /* FIFOs, sockets and set-group-id directories (inheritance, not privilege) stay possible. */
        ck_assert_int_eq(mknod_(FUSE_ROOT_ID, "guest-fifo2", S_IFIFO | 0644, 0), 0);
        /* So do whiteouts, character devices 0:0 (an overlayfs upper layer on the share makes them
         * for every file it deletes): they open no device, and need no CAP_MKNOD on the host. */
        r = mknod_(FUSE_ROOT_ID, "guest-whiteout", S_IFCHR | 0, 0);
        ck_assert_msg(r == 0, "MKNOD of a whiteout (S_IFCHR 0:0): %s", strerror(-r));
        {
                char wpath[512];
                struct stat wst;
                snprintf(wpath, sizeof(wpath), "%s/%s", h->share, "guest-whiteout");
                ck_assert_int_eq(lstat(wpath, &wst), 0);
                ck_assert(S_ISCHR(wst.st_mode) && wst.st_rdev == makedev(0, 0));
        }
        {
                struct fuse_mkdir_in in = { .mode = 0775, .umask = 0 };
                struct fuse_entry_out e;
                ck_assert_int_eq(req(FUSE_MKDIR, FUSE_ROOT_ID, &in, sizeof(in), "sgid-dir", NULL, &e, sizeof(e)), 0);
                ck_assert_int_eq(setattr(e.nodeid, &(struct fuse_setattr_in){ .valid = FATTR_MODE, .mode = 02775 }),
                                 0);
                ck_assert_uint_eq(host_mode("sgid-dir") & 07777, 02775);
        }
}

static void never_issued(void) {
        uint64_t file = node(FUSE_ROOT_ID, "file"), dir = node(FUSE_ROOT_ID, "dir");
        uint64_t bad[] = { 0, NEVER_ISSUED, UINT64_MAX, FUSE_ROOT_ID + 1000000 };
        struct fuse_attr_out a;
        uint64_t fh, dfh;
        char buf[4096];

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint64_t n = bad[i];
                struct fuse_getxattr_in gi = { .size = 64 };
                struct fuse_lseek_in li = { .fh = 1, .offset = 0, .whence = SEEK_DATA };
                struct fuse_fallocate_in fi = { .fh = 1, .offset = 0, .length = 4096 };
                struct fuse_access_in ai = { .mask = R_OK };
                struct fuse_lk_in lk = { .fh = 1, .owner = 1, .lk = { .start = 0, .end = 10, .type = F_WRLCK } };
                struct fuse_lk_out lo;
                struct fuse_lseek_out so;
                struct fuse_statfs_out sf;

                ck_assert_int_lt(fe_fuse_getattr(c, n, &a), 0);
                ck_assert_int_lt(lookup(n, "file", NULL), 0);
                ck_assert_int_lt(lookup(n, "secret.txt", NULL), 0);
                ck_assert_int_lt(open_node(n, O_RDONLY, &fh), 0);
                ck_assert_int_lt(fe_fuse_opendir(c, n, &fh), 0);
                ck_assert_int_lt(create(n, out_name("", "c"), O_RDWR | O_CREAT, &fh), 0);
                ck_assert_int_lt(mkdir_(n, out_name("", "d")), 0);
                ck_assert_int_lt(symlink_(n, out_name("", "s"), "x"), 0);
                ck_assert_int_lt(mknod_(n, out_name("", "n"), S_IFREG | 0600, 0), 0);
                ck_assert_int_lt(req(FUSE_UNLINK, n, NULL, 0, "secret.txt", NULL, NULL, 0), 0);
                ck_assert_int_lt(req(FUSE_RMDIR, n, NULL, 0, "subdir", NULL, NULL, 0), 0);
                ck_assert_int_lt(req(FUSE_READLINK, n, NULL, 0, NULL, NULL, buf, 256), 0);
                ck_assert_int_lt(req(FUSE_GETXATTR, n, &gi, sizeof(gi), "user.x", NULL, buf, 64), 0);
                ck_assert_int_lt(req(FUSE_LISTXATTR, n, &gi, sizeof(gi), NULL, NULL, buf, 64), 0);
                ck_assert_int_lt(setxattr_(n, "user.x", "y"), 0);
                ck_assert_int_lt(req(FUSE_ACCESS, n, &ai, sizeof(ai), NULL, NULL, NULL, 0), 0);
                ck_assert_int_lt(req(FUSE_LSEEK, n, &li, sizeof(li), NULL, NULL, &so, sizeof(so)), 0);
                ck_assert_int_lt(req(FUSE_FALLOCATE, n, &fi, sizeof(fi), NULL, NULL, NULL, 0), 0);
                ck_assert_int_lt(req(FUSE_GETLK, n, &lk, sizeof(lk), NULL, NULL, &lo, sizeof(lo)), 0);
                ck_assert_int_lt(req(FUSE_SETLK, n, &lk, sizeof(lk), NULL, NULL, NULL, 0), 0);
                struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = 0777 };
                ck_assert_int_lt(setattr(n, &sa), 0);
                ck_assert_int_lt(read_(n, 1, buf, 64), 0);
                (void) req(FUSE_STATFS, n, NULL, 0, NULL, NULL, &sf, sizeof(sf));
                /* FORGET of a node never issued: no reply, no crash. */
                ck_assert_int_eq(fe_fuse_forget(c, n, 1000), 0);
        }
        /* Real nodes with fhs never issued, and fhs of another inode. */
        ck_assert_int_eq(open_node(file, O_RDWR, &fh), 0);
        ck_assert_int_eq(fe_fuse_opendir(c, dir, &dfh), 0);
        uint64_t fhs[] = { fh + 1000, fh ^ 0x8000000000000000ull, UINT64_MAX, dfh };
        for (size_t i = 0; i < ELEMENTSOF(fhs); i++) {
                struct fuse_flush_in fl = { .fh = fhs[i] };
                struct fuse_fsync_in fs = { .fh = fhs[i] };
                struct fuse_lseek_in li = { .fh = fhs[i], .whence = SEEK_END };
                struct fuse_fallocate_in fi = { .fh = fhs[i], .length = 10 };
                struct fuse_lseek_out so;
                struct fuse_copy_file_range_in cr = { .fh_in = fh, .nodeid_out = file, .fh_out = fhs[i], .len = 6 };
                struct fuse_write_out wo;

                ck_assert_int_lt(read_(file, fhs[i], buf, 64), 0);
                ck_assert_int_lt(write_(file, fhs[i], "clobber"), 0);
                ck_assert_int_lt(req(FUSE_FLUSH, file, &fl, sizeof(fl), NULL, NULL, NULL, 0), 0);
                ck_assert_int_lt(req(FUSE_FSYNC, file, &fs, sizeof(fs), NULL, NULL, NULL, 0), 0);
                ck_assert_int_lt(req(FUSE_LSEEK, file, &li, sizeof(li), NULL, NULL, &so, sizeof(so)), 0);
                ck_assert_int_lt(req(FUSE_FALLOCATE, file, &fi, sizeof(fi), NULL, NULL, NULL, 0), 0);
                ck_assert_int_lt(req(FUSE_COPY_FILE_RANGE, file, &cr, sizeof(cr), NULL, NULL, &wo, sizeof(wo)), 0);
                if (fhs[i] != dfh)
                        ck_assert_int_lt(fe_fuse_readdir(c, false, dir, fhs[i], 0, buf, sizeof(buf)), 0);
        }
        /* A file handle used with another node, and a directory handle used for file I/O. */
        ck_assert_int_lt(read_(dir, fh, buf, 64), 0);
        ck_assert_int_lt(read_(file, dfh, buf, 64), 0);
        ck_assert_int_lt(fe_fuse_readdir(c, false, file, dfh, 0, buf, sizeof(buf)), 0);
        ck_assert_int_lt(fe_fuse_readdir(c, false, dir, fh, 0, buf, sizeof(buf)), 0);
        /* Releasing handles that were never issued, then the real ones twice. */
        ck_assert_int_lt(fe_fuse_release(c, file, fh + 1000, false), 0);
        ck_assert_int_eq(fe_fuse_release(c, file, fh, false), 0);
        ck_assert_int_lt(fe_fuse_release(c, file, fh, false), 0);
        ck_assert_int_lt(read_(file, fh, buf, 64), 0);
        ck_assert_int_eq(fe_fuse_release(c, dir, dfh, true), 0);
        ck_assert_int_lt(fe_fuse_release(c, dir, dfh, true), 0);
        /* A forgotten node is gone: LOOKUP counted 1 per call above; forget far more. */
        struct fuse_entry_out e;
        ck_assert_int_eq(lookup(FUSE_ROOT_ID, "dir", &e), 0);
        ck_assert_int_eq(fe_fuse_forget(c, e.nodeid, UINT64_MAX), 0);
        ck_assert_int_lt(fe_fuse_getattr(c, e.nodeid, &a), 0);
        ck_assert_int_lt(lookup(e.nodeid, "x", NULL), 0);
        /* The root survives any FORGET. */
        ck_assert_int_eq(fe_fuse_forget(c, FUSE_ROOT_ID, UINT64_MAX), 0);
        ck_assert_int_eq(fe_fuse_getattr(c, FUSE_ROOT_ID, &a), 0);
        /* The file's data is what the host wrote. */
        char p[512], data[16] = "";
        share_path(p, sizeof(p), "file");
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(read(fd, data, sizeof(data) - 1), 6);
        close(fd);
        ck_assert_str_eq(data, "inside");
}

static void run_all(const char *sandbox) {
        start(sandbox, "--privileged-files=refuse");
        names_with_slashes();
        through_symlinks();
        renames_and_links();
        special_files();
        never_issued();
        guest_root_files(false);
        finish();
}

START_TEST(test_escape_default_sandbox) {
        run_all("--log-level=warning");
}
END_TEST

START_TEST(test_escape_no_sandbox) {
        run_all("--sandbox=none");
}
END_TEST

/* The option that restores the old behaviour really does (an administrator who shares a guest's
 * root filesystem needs set-id programs and device nodes in it). */
START_TEST(test_privileged_files_option) {
        start("--log-level=warning", "--allow-privileged-files");
        guest_root_files(true);
        finish();
}
END_TEST

static Suite *escape_suite(void) {
        Suite *s = suite_create("frontend-escape");
        TCase *tc = tcase_create("escape");

        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_escape_default_sandbox);
        tcase_add_test(tc, test_escape_no_sandbox);
        tcase_add_test(tc, test_privileged_files_option);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        if (geteuid() != 0) {
                /* Device nodes for the share and vufsd's default sandbox need root. */
                fprintf(stderr, "test-frontend-escape: needs root, skipping\n");
                return 77;
        }
        return test_main_run(escape_suite());
}
