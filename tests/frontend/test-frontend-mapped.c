/* test-frontend-mapped.c: --privileged-files=map, the default, through vufsd itself: guest root's
 * set-uid program, device node and file capability are what the guest sees, never what the host
 * holds; a host user's copy of the metadata is not honoured; the metadata outlives a restart of
 * vufsd (the key in the harness's StateDirectory). In every sandbox mode, as the caller and as
 * nobody. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/fuse.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

#define MAPPED_XATTR "user.vufsd.privileged"
#define HOST_USER 1000

static const char *const sandboxes[] = { "namespace", "chroot", "none" };

static FeHarness *h;
static Frontend *fe;
static FeFuse *c;

/* A file capability value as setcap writes it: VFS_CAP_REVISION_2 with the effective flag, then
 * permitted CAP_SETUID (bit 7), nothing inheritable, nothing in the upper words. */
static const uint8_t fcap[20] = { 0x01, 0x00, 0x00, 0x02, 1u << CAP_SETUID };

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

static void stop(void) {
        c = fe_fuse_free(c);
        fe = fe_free(fe);
}

static void teardown(void) {
        stop();
        h = fe_harness_free(h);
}

/* vufsd with its defaults (map) and --sandbox=MODE, as the caller or as nobody, past INIT. */
static void start(int mode, bool nobody) {
        const char *argv[] = { "--bus=none", "--xattr", "--sandbox", sandboxes[mode], NULL };
        int r;

        fe_harness_sanitizer_env();
        r = nobody ? fe_harness_spawn_vufsd_as_nobody(h, argv) : fe_harness_spawn_vufsd(h, argv);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        ck_assert_int_eq(fe_harness_session(h, &fe, &c), 0);
}

/* One request: a fixed argument block, a name, a value; the reply's payload into out. Returns
 * the reply's error or payload length (a protocol failure fails the test). */
static int req(uint32_t op, uint64_t nodeid, const void *in, size_t inlen, const char *name, const void *v,
               size_t vlen, void *out, size_t outcap) {
        const FeFuseArg args[] = { { in, inlen }, { name, name ? strlen(name) + 1 : 0 }, { v, vlen } };
        int r = fe_fuse_request(c, op, nodeid, args, ELEMENTSOF(args), out, outcap);

        ck_assert_msg(r != -EPROTO && r != -ETIMEDOUT, "opcode %u: %s", op, c->last_problem);
        return r;
}

static struct fuse_attr lookup_attr(const char *name) {
        struct fuse_entry_out e;
        int r = fe_fuse_lookup(c, FUSE_ROOT_ID, name, &e);
        ck_assert_msg(r == 0, "LOOKUP %s: %s", name, strerror(-r));
        return e.attr;
}

static uint64_t node(const char *name) {
        struct fuse_entry_out e;
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, name, &e), 0);
        return e.nodeid;
}

static struct stat host_stat(const char *name) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        struct stat st;
        ck_assert_msg(lstat(p, &st) == 0, "lstat %s: %m", p);
        return st;
}

static int getxattr_(uint64_t nodeid, const char *name, void *buf, size_t size) {
        struct fuse_getxattr_in in = { .size = (uint32_t) size };
        struct fuse_getxattr_out o;
        int r = req(FUSE_GETXATTR, nodeid, &in, sizeof in, name, NULL, 0, size ? buf : (void *) &o,
                    size ? size : sizeof o);
        return r < 0 ? r : size ? r : (int) o.size;
}

static int setxattr_(uint64_t nodeid, const char *name, const void *value, size_t size) {
        struct fuse_setxattr_in in = { .size = (uint32_t) size };
        size_t inlen = (c->init.flags & FUSE_SETXATTR_EXT) ? sizeof in : FUSE_COMPAT_SETXATTR_IN_SIZE;
        return req(FUSE_SETXATTR, nodeid, &in, inlen, name, value, size, NULL, 0);
}

/* What guest root makes: a set-uid program, a device node with /dev/mem's numbers, a file
 * capability. */
static void guest_makes(void) {
        struct fuse_create_in ci = { .flags = O_RDWR, .mode = S_IFREG | 04755 };
        struct fuse_mknod_in mi = { .mode = S_IFCHR | 0666, .rdev = (1 << 8) | 1 };
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o;
        } co;
        struct fuse_entry_out e;
        char list[512];
        int r;

        r = req(FUSE_CREATE, FUSE_ROOT_ID, &ci, sizeof ci, "suid", NULL, 0, &co, sizeof co);
        ck_assert_msg(r >= 0, "CREATE 04755: %s", strerror(-r));
        ck_assert_msg((co.e.attr.mode & 07777) == 04755, "CREATE 04755: the guest sees %o", co.e.attr.mode & 07777);
        r = req(FUSE_MKNOD, FUSE_ROOT_ID, &mi, sizeof mi, "mem", NULL, 0, &e, sizeof e);
        ck_assert_msg(r >= 0, "MKNOD S_IFCHR 1:1: %s", strerror(-r));
        ck_assert_msg(S_ISCHR(e.attr.mode) && e.attr.rdev == ((1 << 8) | 1), "MKNOD: the guest sees mode %o rdev %#x",
                      e.attr.mode, e.attr.rdev);
        r = setxattr_(co.e.nodeid, "security.capability", &fcap, sizeof fcap);
        ck_assert_msg(r == 0, "SETXATTR security.capability: %s", strerror(-r));
        ck_assert_int_eq(getxattr_(co.e.nodeid, "security.capability", NULL, 0), sizeof fcap);
        ck_assert_int_eq(getxattr_(co.e.nodeid, MAPPED_XATTR, NULL, 0), -ENODATA);
        ck_assert_int_lt(setxattr_(co.e.nodeid, MAPPED_XATTR, "x", 1), 0);
        r = req(FUSE_LISTXATTR, co.e.nodeid, &(struct fuse_getxattr_in){ .size = sizeof list }, sizeof(struct fuse_getxattr_in),
                NULL, NULL, 0, list, sizeof list);
        ck_assert_int_eq(r, sizeof "security.capability");
        ck_assert_str_eq(list, "security.capability");
}

/* What the host holds of it: no set-id bit, no device, no capability. */
static void host_holds_nothing(void) {
        _cleanup_free_ char *p = fe_harness_path(h, "suid");
        struct stat st = host_stat("suid");

        ck_assert_msg((st.st_mode & 06000) == 0, "host mode of guest root's 04755 program: %o", st.st_mode & 07777);
        ck_assert_msg(lgetxattr(p, "security.capability", NULL, 0) < 0 && errno == ENODATA,
                      "a file capability on the host");
        st = host_stat("mem");
        ck_assert_msg(S_ISREG(st.st_mode) && (st.st_mode & 0077) == 0 && st.st_size == 0,
                      "guest root's device node is on the host: mode %o size %lld", st.st_mode,
                      (long long) st.st_size);
}

/* A host user copies the metadata onto a file of its own, marker and all. */
static void host_user_copies(void) {
        _cleanup_free_ char *src = fe_harness_path(h, "suid"), *pub = fe_harness_path(h, "pub"),
                           *dst = fe_harness_path(h, "pub/copy");
        char val[512];
        ssize_t n = lgetxattr(src, MAPPED_XATTR, val, sizeof val);
        pid_t pid;
        int status;

        ck_assert_int_gt(n, 0);
        ck_assert_int_eq(chmod(h->dir, 0755), 0); /* reachable by the host user */
        ck_assert_int_eq(chmod(h->share, 0755), 0);
        ck_assert_int_eq(mkdir(pub, 0777), 0);
        ck_assert_int_eq(chmod(pub, 0777), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd;
                if (setresgid(HOST_USER, HOST_USER, HOST_USER) < 0 || setresuid(HOST_USER, HOST_USER, HOST_USER) < 0)
                        _exit(2);
                fd = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0755);
                if (fd < 0 || setxattr(dst, MAPPED_XATTR, val, (size_t) n, 0) < 0 || chmod(dst, 01755) < 0)
                        _exit(3);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "host user: status %#x", status);
}

static void mapped(int mode, bool nobody) {
        struct fuse_entry_out e;
        struct fuse_attr a;

        if (nobody)
                ck_assert_int_eq(fe_harness_give_dirs(h, FE_NOBODY, 0755), 0);
        start(mode, nobody);
        guest_makes();
        host_holds_nothing();
        /* restarted: the same key, the same metadata */
        stop();
        start(mode, nobody);
        a = lookup_attr("suid");
        ck_assert_msg((a.mode & 07777) == 04755, "after a restart the guest sees %o", a.mode & 07777);
        a = lookup_attr("mem");
        ck_assert(S_ISCHR(a.mode) && a.rdev == ((1 << 8) | 1));
        ck_assert_int_eq(getxattr_(node("suid"), "security.capability", NULL, 0), sizeof fcap);
        if (!test_have_root())
                return; /* a second host user needs root */
        host_user_copies();
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "pub", &e), 0);
        ck_assert_int_eq(fe_fuse_lookup(c, e.nodeid, "copy", &e), 0);
        ck_assert_msg((e.attr.mode & 07777) == 01755, "a host user's copy of the metadata: the guest sees %o",
                      e.attr.mode & 07777);
}

/* _i: the sandbox mode (0-2) with vufsd as the caller, the same plus 3 with vufsd as nobody. */
START_TEST(test_mapped) { mapped(_i % 3, _i >= 3); }
END_TEST

static Suite *mapped_suite(void) {
        Suite *s = suite_create("frontend-mapped");
        TCase *tc = tcase_create("mapped");
        const int n = (int) ELEMENTSOF(sandboxes);

        const char *extra = getenv("VUFSD_TEST_EXTRA_ARGS");
        /* The -handles run: open_by_handle_at() needs CAP_DAC_READ_SEARCH in the host's user
         * namespace, which vufsd as nobody has not (mandatory would refuse to start). */
        bool handles = extra && strstr(extra, "--inode-file-handles=mandatory");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        if (test_have_root() && !handles)
                tcase_add_loop_test(tc, test_mapped, 0, 2 * n);
        else {
                tcase_add_loop_test(tc, test_mapped, 0, n);
                fprintf(stderr, "SKIP test_mapped as nobody: %s\n", handles ? "no file handles unprivileged" : "needs root");
        }
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(mapped_suite)
