/* test-passthrough.c: the FsOps over a temporary directory, called directly. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "passthrough.h"
#include "test-main.h"

static char dir[] = "/tmp/test-passthrough-XXXXXX";
static Passthrough *pt;
static const FsOps *ops = &passthrough_ops;
static const FsCtx root_ctx = { .uid = 0, .gid = 0 };
static uint64_t baseline_fds;

static void start(FsOptions o) {
        o.shared_dir = dir;
        ck_assert_int_eq(passthrough_new(&pt, &o), 0);
        baseline_fds = passthrough_fds_used(pt);
        ck_assert_uint_eq(baseline_fds, 1); /* the root */
}

static void setup(void) {
        ck_assert_ptr_nonnull(mkdtemp(dir));
        start(FS_OPTIONS_DEFAULT);
}

/* The old behaviour (--allow-privileged-files): the guest may make set-id files and devices. */
static void restart_privileged(void) {
        FsOptions o = FS_OPTIONS_DEFAULT;
        o.privileged_files = PRIVILEGED_FILES_ALLOW;
        pt = passthrough_free(pt);
        start(o);
}

static void teardown(void) {
        char cmd[128];
        pt = passthrough_free(pt);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
        snprintf(dir, sizeof dir, "/tmp/test-passthrough-XXXXXX");
}

static char *path(const char *rel) {
        static char buf[256];
        snprintf(buf, sizeof buf, "%s/%s", dir, rel);
        return buf;
}

START_TEST(test_lifecycle_counts) {
        FsEntry e, e2;
        uint64_t fh;

        ck_assert_int_eq(ops->create(pt, &root_ctx, 1, "f", 0644, O_RDWR, false, &e, &fh), 0);
        ck_assert_uint_eq(passthrough_fds_used(pt), 3); /* root, inode, handle */
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 1, "f", &e2), 0);
        ck_assert_uint_eq(e2.nodeid, e.nodeid);
        ck_assert_uint_eq(passthrough_fds_used(pt), 3);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 0, false), 0);
        ck_assert_uint_eq(passthrough_fds_used(pt), 2);
        ops->forget(pt, e.nodeid, 1);
        ck_assert_uint_eq(passthrough_inode_count(pt), 2);
        ops->forget(pt, e.nodeid, 1);
        ck_assert_uint_eq(passthrough_inode_count(pt), 1);
        ck_assert_uint_eq(passthrough_fds_used(pt), baseline_fds);
        /* session reset drops every node and handle */
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 1, "f", &e), 0);
        ck_assert_int_eq(ops->open(pt, &root_ctx, e.nodeid, O_RDONLY, false, &fh), 0);
        ops->session_reset(pt, false);
        ck_assert_uint_eq(passthrough_inode_count(pt), 1);
        ck_assert_uint_eq(passthrough_handle_count(pt), 0);
        ck_assert_uint_eq(passthrough_fds_used(pt), baseline_fds);
        ck_assert_int_eq(ops->getattr(pt, &root_ctx, e.nodeid, FS_NO_FH, &e.st), -EBADF);
}
END_TEST

START_TEST(test_writeback_flags) {
        FsEntry e;
        uint64_t fh;
        char buf[8] = { 0 };
        struct iovec iov = { buf, sizeof buf };
        struct iovec w = { "abc", 3 };

        ck_assert_int_eq(ops->create(pt, &root_ctx, 1, "f", 0644, O_WRONLY | O_APPEND, false, &e, &fh), 0);
        ck_assert_int_eq(ops->write(pt, &root_ctx, e.nodeid, fh, 0, &w, 1, false), 3);
        /* a write-only handle cannot read without writeback */
        ck_assert_int_eq(ops->read(pt, &root_ctx, e.nodeid, fh, 0, &iov, 1), -EBADF);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 0, false), 0);
        ops->session_reset(pt, true);
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 1, "f", &e), 0);
        ck_assert_int_eq(ops->open(pt, &root_ctx, e.nodeid, O_WRONLY | O_APPEND, false, &fh), 0);
        /* with writeback the host fd is readable and not appending: offset 0 is overwritten */
        ck_assert_int_eq(ops->read(pt, &root_ctx, e.nodeid, fh, 0, &iov, 1), 3);
        w = (struct iovec) { "X", 1 };
        ck_assert_int_eq(ops->write(pt, &root_ctx, e.nodeid, fh, 0, &w, 1, false), 1);
        ck_assert_int_eq(ops->read(pt, &root_ctx, e.nodeid, fh, 0, &iov, 1), 3);
        ck_assert(memcmp(buf, "Xbc", 3) == 0);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 0, false), 0);
}
END_TEST

/* Issue 13 item 10: set-id bits the guest asks for are dropped by default, on every path that
 * sets a mode; a directory keeps set-group-id (inheritance only). */
START_TEST(test_guest_setid_dropped) {
        FsSetattr sa = { .valid = FS_SET_MODE, .mode = 06755 };
        FsEntry e;
        uint64_t fh;
        struct stat st;

        ck_assert_int_eq(ops->create(pt, &root_ctx, 1, "c", 04755, O_RDWR, false, &e, &fh), 0);
        ck_assert_int_eq(stat(path("c"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, e.nodeid, &sa, &st), 0);
        ck_assert_int_eq(stat(path("c"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 0, false), 0);
        ck_assert_int_eq(ops->mknod(pt, &root_ctx, 1, "m", S_IFREG | 06755, 0, &e), 0);
        ck_assert_int_eq(stat(path("m"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        ck_assert_int_eq(ops->mkdir(pt, &root_ctx, 1, "d", 0755, &e), 0);
        sa.mode = 06775;
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, e.nodeid, &sa, &st), 0);
        ck_assert_int_eq(stat(path("d"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 02775);
}
END_TEST

START_TEST(test_killpriv) {
        FsEntry e;
        uint64_t fh;
        struct iovec w = { "x", 1 };
        struct stat st;
        FsSetattr sa = { .valid = FS_SET_MODE, .mode = 06755 };

        restart_privileged(); /* set-id files to kill the bits of */
        ck_assert_int_eq(ops->create(pt, &root_ctx, 1, "s", 0755, O_RDWR, false, &e, &fh), 0);
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, e.nodeid, &sa, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 06755);
        /* an ordinary write by the (privileged) daemon keeps the bits */
        ck_assert_int_eq(ops->write(pt, &root_ctx, e.nodeid, fh, 0, &w, 1, false), 1);
        ck_assert_int_eq(stat(path("s"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 06755);
        /* with kill_priv (HANDLE_KILLPRIV_V2 + WRITE_KILL_SUIDGID) they go, as for an unprivileged writer */
        ck_assert_int_eq(ops->write(pt, &root_ctx, e.nodeid, fh, 0, &w, 1, true), 1);
        ck_assert_int_eq(stat(path("s"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        /* setattr KILL_SUIDGID with a truncate; sgid without group exec stays (mandatory-lock marker) */
        sa.mode = 06745;
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, e.nodeid, &sa, &st), 0);
        sa = (FsSetattr){ .valid = FS_SET_SIZE | FS_SET_KILL_SUIDGID, .size = 0 };
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, e.nodeid, &sa, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 02745);
        /* open with O_TRUNC and kill_priv */
        sa = (FsSetattr){ .valid = FS_SET_MODE, .mode = 04755 };
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, e.nodeid, &sa, &st), 0);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 0, false), 0);
        ck_assert_int_eq(ops->open(pt, &root_ctx, e.nodeid, O_WRONLY | O_TRUNC, true, &fh), 0);
        ck_assert_int_eq(stat(path("s"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 0, false), 0);
}
END_TEST

START_TEST(test_open_type_checks) {
        FsEntry e;
        uint64_t fh;

        ck_assert_int_eq(mkfifo(path("fifo"), 0666), 0);
        ck_assert_int_eq(symlink("/etc/passwd", path("link")), 0);
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 1, "fifo", &e), 0);
        ck_assert_int_eq(ops->open(pt, &root_ctx, e.nodeid, O_RDWR, false, &fh), -ENXIO);
        ck_assert_int_eq(ops->opendir(pt, &root_ctx, e.nodeid, O_RDONLY, &fh), -ENOTDIR);
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 1, "link", &e), 0);
        ck_assert(S_ISLNK(e.st.st_mode));
        ck_assert_int_eq(ops->open(pt, &root_ctx, e.nodeid, O_RDONLY, false, &fh), -ELOOP);
        /* nothing was opened: the budget is back at nodes only */
        ck_assert_uint_eq(passthrough_fds_used(pt), 3);
        ck_assert_uint_eq(passthrough_handle_count(pt), 0);
        /* lookups below a non-directory */
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, e.nodeid, "x", &e), -ENOTDIR);
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 4242, "x", &e), -EBADF);
}
END_TEST

START_TEST(test_budget_enfile) {
        FsEntry e;
        uint64_t fh;

        pt = passthrough_free(pt);
        {
                FsOptions o = FS_OPTIONS_DEFAULT;
                o.max_fds = 2;
                start(o);
        }
        /* create needs two (inode + handle): refused, and nothing is left behind */
        ck_assert_int_eq(ops->create(pt, &root_ctx, 1, "c", 0644, O_RDWR, false, &e, &fh), -ENFILE);
        ck_assert_uint_eq(passthrough_fds_used(pt), 1);
        ck_assert_uint_eq(passthrough_inode_count(pt), 1);
        ck_assert_int_eq(ops->mkdir(pt, &root_ctx, 1, "d", 0755, &e), 0);
        ck_assert_int_eq(ops->opendir(pt, &root_ctx, e.nodeid, O_RDONLY, &fh), -ENFILE);
        ck_assert_int_eq(ops->syncfs(pt, &root_ctx, 1), -ENFILE);
        ops->forget(pt, e.nodeid, 1);
        ck_assert_int_eq(ops->syncfs(pt, &root_ctx, 1), 0);
        ck_assert_uint_eq(passthrough_fds_used(pt), 1);
}
END_TEST

START_TEST(test_symlink_and_mknod_as_caller) {
        FsEntry e;
        FsCtx c = { .uid = 65534, .gid = 65534, .umask = 0, .has_umask = true };
        char buf[64];
        struct stat st;

        ck_assert_int_eq(chmod(dir, 0777), 0);
        ck_assert_int_eq(ops->symlink(pt, &c, 1, "sl", "../../../../etc/shadow", &e), 0);
        ck_assert_int_eq(lstat(path("sl"), &st), 0);
        ck_assert_uint_eq(st.st_uid, 65534);
        ck_assert_int_eq(ops->readlink(pt, &c, e.nodeid, buf, sizeof buf), 22);
        ck_assert(memcmp(buf, "../../../../etc/shadow", 22) == 0);
        ck_assert_int_eq(ops->readlink(pt, &c, e.nodeid, buf, 10), -ENAMETOOLONG);
        /* devices only where privileged: the caller is not */
        ck_assert_int_eq(ops->mknod(pt, &c, 1, "null", S_IFCHR | 0666, makedev(1, 3), &e), -EPERM);
        /* by default not even for root (issue 13 item 10: a host user could open it) */
        ck_assert_int_eq(ops->mknod(pt, &root_ctx, 1, "null", S_IFCHR | 0666, makedev(1, 3), &e), -EPERM);
        ck_assert_int_eq(lstat(path("null"), &st), -1);
        restart_privileged();
        ck_assert_int_eq(ops->mknod(pt, &c, 1, "null", S_IFCHR | 0666, makedev(1, 3), &e), -EPERM);
        ck_assert_int_eq(ops->mknod(pt, &root_ctx, 1, "null", S_IFCHR | 0666, makedev(1, 3), &e), 0);
        ck_assert(S_ISCHR(e.st.st_mode));
        ck_assert_int_eq(ops->mknod(pt, &c, 1, "fifo", S_IFIFO | 0666, 0, &e), 0);
        ck_assert_uint_eq(e.st.st_uid, 65534);
        ck_assert_int_eq(ops->mknod(pt, &c, 1, "weird", 0170000 | 0666, 0, &e), -EINVAL);
        ck_assert_uint_eq(geteuid(), 0);
}
END_TEST

/* In the sandbox the root is the shared directory: no /proc by path. xattrs must still work,
 * on files, directories and symlinks, and the calling thread's working directory is "/" after. */
static int xattr_in_chroot(void) {
        FsOptions o = FS_OPTIONS_DEFAULT;
        FsEntry f, d, l;
        uint64_t fh;
        char buf[64], cwd[64];
        ssize_t n;

        /* Made in this process: its /proc/self/fd is the one that lists our fds. */
        passthrough_free(pt);
        o.shared_dir = dir;
        o.xattr = true;
        if (passthrough_new(&pt, &o) < 0)
                return 9;
        if (chroot(dir) < 0 || chdir("/") < 0)
                return 10;
        if (access("/proc/self/fd", F_OK) == 0)
                return 11;
        if (ops->create(pt, &root_ctx, 1, "xf", 0644, O_RDWR, false, &f, &fh) < 0)
                return 12;
        if (ops->mkdir(pt, &root_ctx, 1, "xd", 0755, &d) < 0)
                return 20;
        if (ops->symlink(pt, &root_ctx, 1, "xl", "xf", &l) < 0)
                return 21;
        if (ops->setxattr(pt, &root_ctx, f.nodeid, "trusted.t", "vf", 2, 0, false) != 0 ||
            ops->setxattr(pt, &root_ctx, d.nodeid, "trusted.t", "vd", 2, XATTR_CREATE, false) != 0 ||
            ops->setxattr(pt, &root_ctx, l.nodeid, "trusted.t", "vl", 2, 0, false) != 0)
                return 13;
        n = ops->getxattr(pt, &root_ctx, f.nodeid, "trusted.t", buf, sizeof buf);
        if (n != 2 || memcmp(buf, "vf", 2) != 0)
                return 14;
        if (ops->getxattr(pt, &root_ctx, l.nodeid, "trusted.t", NULL, 0) != 2)
                return 15;
        if (ops->listxattr(pt, &root_ctx, d.nodeid, buf, sizeof buf) != (ssize_t) sizeof "trusted.t")
                return 16;
        if (ops->removexattr(pt, &root_ctx, f.nodeid, "trusted.t") != 0 ||
            ops->getxattr(pt, &root_ctx, f.nodeid, "trusted.t", buf, sizeof buf) != -ENODATA)
                return 17;
        if (!getcwd(cwd, sizeof cwd) || strcmp(cwd, "/") != 0)
                return 18;
        /* The symlink's xattr went to the symlink, not to its target. */
        if (lgetxattr("/xl", "trusted.t", buf, sizeof buf) != 2 || getxattr("/xf", "trusted.t", buf, sizeof buf) >= 0)
                return 19;
        return 0;
}

START_TEST(test_xattr_without_proc_path) {
        int status;
        pid_t pid;

        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(xattr_in_chroot());
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "step %d failed", WEXITSTATUS(status));
}
END_TEST

/* Security labels through FsCtx: set on every kind of new inode; a label the host refuses leaves
 * nothing behind (no name, no node, no handle, no fd). */
START_TEST(test_security_labels) {
        static char big[65536];
        FsSecLabel l = { .name = "security.vufstest", .value = "lbl", .size = 3 };
        FsSecLabel bad = { .name = "security.vufstest", .value = big, .size = sizeof big };
        FsCtx c = { .labels = &l, .n_labels = 1 };
        const char *names[] = { "d", "p", "s", "f" };
        FsEntry e;
        uint64_t fh;
        char buf[16];
        struct stat st;
        bool host_refuses;

        ck_assert_int_eq(ops->mkdir(pt, &c, 1, "d", 0755, &e), 0);
        ck_assert_int_eq(ops->mknod(pt, &c, 1, "p", S_IFIFO | 0644, 0, &e), 0);
        ck_assert_int_eq(ops->symlink(pt, &c, 1, "s", "target", &e), 0);
        ck_assert_int_eq(ops->create(pt, &c, 1, "f", 0644, O_RDWR, false, &e, &fh), 0);
        ck_assert_int_eq(ops->release(pt, &c, e.nodeid, fh, 0, false), 0);
        for (size_t i = 0; i < 4; i++) {
                ck_assert_int_eq(lgetxattr(path(names[i]), "security.vufstest", buf, sizeof buf), 3);
                ck_assert(memcmp(buf, "lbl", 3) == 0);
        }
        ck_assert_int_eq(ops->tmpfile(pt, &c, 1, 0600, O_RDWR, &e, &fh), 0);
        ck_assert_int_eq(ops->getxattr(pt, &c, e.nodeid, "security.vufstest", buf, sizeof buf), 3);
        ck_assert_int_eq(ops->release(pt, &c, e.nodeid, fh, 0, false), 0);
        /* An existing file opened by create() is not relabelled. */
        l.value = "new";
        ck_assert_int_eq(ops->create(pt, &c, 1, "f", 0644, O_RDWR, false, &e, &fh), 0);
        ck_assert_int_eq(ops->release(pt, &c, e.nodeid, fh, 0, false), 0);
        ck_assert_int_eq(lgetxattr(path("f"), "security.vufstest", buf, sizeof buf), 3);
        ck_assert(memcmp(buf, "lbl", 3) == 0);
        ops->session_reset(pt, false);
        ck_assert_uint_eq(passthrough_fds_used(pt), baseline_fds);

        memset(big, 'L', sizeof big);
        ck_assert_int_eq(mknod(path("probe"), S_IFREG | 0600, 0), 0);
        host_refuses = setxattr(path("probe"), "security.vufstest", big, sizeof big, 0) < 0;
        ck_assert_int_eq(unlink(path("probe")), 0);
        c.labels = &bad;
        ck_assert_int_eq(ops->mkdir(pt, &c, 1, "bd", 0755, &e) < 0, host_refuses);
        ck_assert_int_eq(ops->mknod(pt, &c, 1, "bp", S_IFIFO | 0644, 0, &e) < 0, host_refuses);
        ck_assert_int_eq(ops->symlink(pt, &c, 1, "bs", "target", &e) < 0, host_refuses);
        ck_assert_int_eq(ops->create(pt, &c, 1, "bf", 0644, O_RDWR, false, &e, &fh) < 0, host_refuses);
        ck_assert_int_eq(ops->tmpfile(pt, &c, 1, 0600, O_RDWR, &e, &fh) < 0, host_refuses);
        if (host_refuses) {
                ck_assert_int_eq(lstat(path("bd"), &st), -1);
                ck_assert_int_eq(lstat(path("bp"), &st), -1);
                ck_assert_int_eq(lstat(path("bs"), &st), -1);
                ck_assert_int_eq(lstat(path("bf"), &st), -1);
                ck_assert_uint_eq(passthrough_inode_count(pt), 1);
                ck_assert_uint_eq(passthrough_handle_count(pt), 0);
                ck_assert_uint_eq(passthrough_fds_used(pt), baseline_fds);
        }
}
END_TEST

/* A directory on another mount than its parent is marked; its own children are not. */
START_TEST(test_submount_entries) {
        FsEntry e, t;

        /* A private mount namespace of this forked test process: nothing outlives it. */
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_int_eq(mkdir(path("m"), 0755), 0);
        ck_assert_int_eq(mkdir(path("plain"), 0755), 0);
        ck_assert_int_eq(mount("vufstest", path("m"), "tmpfs", 0, "size=1m"), 0);
        ck_assert_int_eq(mkdir(path("m/inner"), 0755), 0);
        ck_assert_int_eq(mknod(path("m/file"), S_IFREG | 0644, 0), 0);
        /* The root handle from setup() is a mount of the old namespace: start over in this one. */
        pt = passthrough_free(pt);
        start(FS_OPTIONS_DEFAULT);
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 1, "m", &t), 0);
        ck_assert(t.submount);
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 1, "plain", &e), 0);
        ck_assert(!e.submount);
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, t.nodeid, "inner", &e), 0);
        ck_assert(!e.submount);
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, t.nodeid, "file", &e), 0);
        ck_assert(!e.submount);
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, t.nodeid, ".", &e), 0);
        ck_assert(!e.submount);
        ops->session_reset(pt, false);
        ck_assert_int_eq(umount2(path("m"), MNT_DETACH), 0);
}
END_TEST

/* A lock owner's OFD (locks.c) is one fd of the budget: refused with ENFILE when it is spent, with
 * nothing left behind, and given back when the handle's RELEASE drops the owner's locks. */
START_TEST(test_lock_budget) {
        FsLock wr = { .start = 0, .end = 9, .type = F_WRLCK, .pid = 1 };
        FsEntry e;
        uint64_t fh;

        pt = passthrough_free(pt);
        {
                FsOptions o = FS_OPTIONS_DEFAULT;
                o.max_fds = 3; /* root, inode, handle: none left for a lock */
                start(o);
        }
        ck_assert_int_eq(ops->create(pt, &root_ctx, 1, "l", 0644, O_RDWR, false, &e, &fh), 0);
        ck_assert_uint_eq(passthrough_fds_used(pt), 3);
        ck_assert_int_eq(ops->setlk(pt, &root_ctx, e.nodeid, fh, 7, &wr, false, false), -ENFILE);
        ck_assert_uint_eq(passthrough_fds_used(pt), 3);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 7, false), 0);
        ck_assert_uint_eq(passthrough_fds_used(pt), 2);

        pt = passthrough_free(pt);
        {
                FsOptions o = FS_OPTIONS_DEFAULT;
                o.max_fds = 4;
                start(o);
        }
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 1, "l", &e), 0);
        ck_assert_int_eq(ops->open(pt, &root_ctx, e.nodeid, O_RDWR, false, &fh), 0);
        ck_assert_int_eq(ops->setlk(pt, &root_ctx, e.nodeid, fh, 7, &wr, false, false), 0);
        ck_assert_uint_eq(passthrough_fds_used(pt), 4);
        /* the same owner again: its OFD is reused, nothing more charged */
        wr.start = 20, wr.end = 29;
        ck_assert_int_eq(ops->setlk(pt, &root_ctx, e.nodeid, fh, 7, &wr, false, false), 0);
        ck_assert_uint_eq(passthrough_fds_used(pt), 4);
        /* another owner: the budget is spent */
        ck_assert_int_eq(ops->setlk(pt, &root_ctx, e.nodeid, fh, 8, &wr, false, false), -ENFILE);
        ck_assert_uint_eq(passthrough_fds_used(pt), 4);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 7, false), 0);
        ck_assert_uint_eq(passthrough_fds_used(pt), 2);
        ops->forget(pt, e.nodeid, 1);
        ck_assert_uint_eq(passthrough_fds_used(pt), baseline_fds);
}
END_TEST

/* The guest cannot grow vufsd's copy of its lock ranges without bound: every other byte locked
 * makes one range each; past the bound (10 here, LOCK_RANGES_MAX in a daemon) a lock, or an unlock
 * that would split a range, answers ENOLCK, while a whole-file unlock still frees them all and
 * locking works again. Before the bound every range was kept. */
START_TEST(test_lock_ranges_bounded) {
        FsLock lk = { .type = F_WRLCK, .pid = 1 };
        FsEntry e;
        uint64_t fh;
        int r = 0, n;

        passthrough_set_lock_ranges_max(pt, 10);
        ck_assert_int_eq(ops->create(pt, &root_ctx, 1, "ranges", 0644, O_RDWR, false, &e, &fh), 0);
        for (n = 0; n < 100; n++) {
                lk.start = lk.end = 2 * (uint64_t) n;
                r = ops->setlk(pt, &root_ctx, e.nodeid, fh, 7, &lk, false, false);
                if (r < 0)
                        break;
        }
        ck_assert_int_eq(r, -ENOLCK);
        ck_assert_int_eq(n, 9); /* 9 held: a tenth could make 11 */
        lk.type = F_UNLCK, lk.start = 0, lk.end = UINT64_MAX;
        ck_assert_int_eq(ops->setlk(pt, &root_ctx, e.nodeid, fh, 7, &lk, false, false), 0);
        lk.type = F_WRLCK, lk.start = lk.end = 1000;
        ck_assert_int_eq(ops->setlk(pt, &root_ctx, e.nodeid, fh, 8, &lk, false, false), 0);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 7, false), 0);
}
END_TEST

/* Offsets the host's off_t cannot hold are refused, for reads and writes alike (io_handle()). */
START_TEST(test_io_offset_bounds) {
        char byte = 'x';
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        FsEntry e;
        uint64_t fh;

        ck_assert_int_eq(ops->create(pt, &root_ctx, 1, "o", 0644, O_RDWR, false, &e, &fh), 0);
        ck_assert_int_eq(ops->write(pt, &root_ctx, e.nodeid, fh, (uint64_t) INT64_MAX + 1, &iov, 1, false), -EINVAL);
        ck_assert_int_eq(ops->read(pt, &root_ctx, e.nodeid, fh, (uint64_t) INT64_MAX + 1, &iov, 1), -EINVAL);
        ck_assert_int_eq(ops->read(pt, &root_ctx, e.nodeid, fh, UINT64_MAX, &iov, 1), -EINVAL);
        ck_assert_int_eq(ops->write(pt, &root_ctx, e.nodeid, fh, 0, &iov, 1, false), 1);
        ck_assert_int_eq(ops->read(pt, &root_ctx, e.nodeid, fh, 0, &iov, 1), 1);
        /* a handle that is not this node's */
        ck_assert_int_eq(ops->read(pt, &root_ctx, 1, fh, 0, &iov, 1), -EBADF);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 0, false), 0);
        ck_assert_int_eq(ops->read(pt, &root_ctx, e.nodeid, fh, 0, &iov, 1), -EBADF);
}
END_TEST

/* CREATE without O_EXCL of an existing name opens it as the caller (issue 31 finding 1), while
 * another thread keeps exchanging what the name holds: the caller's own file, root's private
 * file, a symlink to it and a FIFO. The reply is the user's file, or a refusal; never root's
 * content, never a followed link, never a blocked open of the FIFO. */
static _Atomic bool swapping;

static void *swap_victim(void *arg) {
        const char *others[] = { "secret", "lnk", "fifo" };
        int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(dfd, 0);
        for (unsigned k = 0; atomic_load(&swapping); k++)
                ck_assert_int_eq(renameat2(dfd, "victim", dfd, others[k % 3], RENAME_EXCHANGE), 0);
        close(dfd);
        return arg;
}

START_TEST(test_create_existing_as_caller) {
        const FsCtx user = { .uid = 1000, .gid = 1000 };
        unsigned opened = 0, refused = 0;
        struct stat mine;
        pthread_t t;
        int fd;

        ck_assert_int_eq(chmod(dir, 0777), 0);
        fd = open(path("secret"), O_WRONLY | O_CREAT | O_EXCL, 0600);
        ck_assert_int_eq(write(fd, "S", 1), 1);
        close(fd);
        fd = open(path("victim"), O_WRONLY | O_CREAT | O_EXCL, 0666);
        ck_assert_int_eq(write(fd, "M", 1), 1);
        ck_assert_int_eq(fchown(fd, 1000, 1000), 0);
        ck_assert_int_eq(fstat(fd, &mine), 0);
        close(fd);
        ck_assert_int_eq(symlink("secret", path("lnk")), 0);
        ck_assert_int_eq(mkfifo(path("fifo"), 0666), 0);

        /* Without a race first: root's private file is refused, O_EXCL still says EEXIST. */
        {
                FsEntry e;
                uint64_t fh;
                ck_assert_int_eq(ops->create(pt, &user, 1, "secret", 0644, O_RDWR | O_CREAT, false, &e, &fh), -EACCES);
                ck_assert_int_eq(
                        ops->create(pt, &user, 1, "secret", 0644, O_WRONLY | O_CREAT | O_TRUNC, false, &e, &fh), -EACCES);
                ck_assert_int_eq(ops->create(pt, &user, 1, "victim", 0644, O_RDWR | O_CREAT | O_EXCL, false, &e, &fh),
                                 -EEXIST);
                ck_assert_uint_eq(passthrough_inode_count(pt), 1);
                ck_assert_uint_eq(passthrough_fds_used(pt), baseline_fds);
        }

        atomic_store(&swapping, true);
        ck_assert_int_eq(pthread_create(&t, NULL, swap_victim, NULL), 0);
        for (unsigned k = 0; k < 20000 && (k < 2000 || opened == 0 || refused == 0); k++) {
                char byte = 0;
                struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
                FsEntry e;
                uint64_t fh;
                int r = ops->create(pt, &user, 1, "victim", 0644, O_RDWR | O_CREAT, false, &e, &fh);

                if (r < 0) {
                        ck_assert_msg(r == -EACCES || r == -ELOOP || r == -ENXIO, "CREATE during the exchange: %s",
                                      strerror(-r));
                        refused++;
                        continue;
                }
                ck_assert_int_eq(ops->read(pt, &user, e.nodeid, fh, 0, &iov, 1), 1);
                ck_assert_msg(byte == 'M', "CREATE as uid 1000 opened another file (read '%c')", byte);
                ck_assert_uint_eq(e.st.st_ino, mine.st_ino);
                ck_assert_int_eq(ops->release(pt, &user, e.nodeid, fh, 0, false), 0);
                ops->forget(pt, e.nodeid, 1);
                opened++;
        }
        atomic_store(&swapping, false);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        fprintf(stderr, "create of an exchanged name as uid 1000: %u opened, %u refused\n", opened, refused);
        ck_assert_msg(opened > 0 && refused > 0, "no race seen: %u opened, %u refused", opened, refused);
        ck_assert_uint_eq(passthrough_inode_count(pt), 1);
        ck_assert_uint_eq(passthrough_fds_used(pt), baseline_fds);
}
END_TEST

int main(void) {
        Suite *s = suite_create("passthrough");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_lifecycle_counts);
        tcase_add_test(tc, test_writeback_flags);
        tcase_add_root_test(tc, test_guest_setid_dropped);
        tcase_add_root_test(tc, test_killpriv);
        tcase_add_test(tc, test_open_type_checks);
        tcase_add_test(tc, test_budget_enfile);
        tcase_add_test(tc, test_lock_budget);
        tcase_add_test(tc, test_lock_ranges_bounded);
        tcase_add_test(tc, test_io_offset_bounds);
        tcase_add_root_test(tc, test_symlink_and_mknod_as_caller);
        tcase_add_root_test(tc, test_xattr_without_proc_path);
        tcase_add_root_test(tc, test_security_labels);
        tcase_add_root_test(tc, test_submount_entries);
        tcase_add_root_test(tc, test_create_existing_as_caller);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
