/* test-mapped-mode.c: --privileged-files=map (daemon/passthrough/mapped-mode.c) through the FsOps:
 * what the guest sees, what the host holds, the kernel's rules on the mapped bits, and attributes
 * a host user forges, copies, cuts short or pads, which are never honoured. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "passthrough.h"
#include "test-main.h"

#define HOST_USER 1000

static char dir[] = "/tmp/test-mapped-mode-XXXXXX";
static Passthrough *pt;
static const FsOps *ops = &passthrough_ops;
static const FsCtx root_ctx = { .uid = 0, .gid = 0 };

/* A file capability: VFS_CAP_REVISION_2, permitted and effective CAP_SETUID. */
static const struct {
        uint32_t magic_etc;
        struct {
                uint32_t permitted, inheritable;
        } data[2];
} fcap = { .magic_etc = 0x02000000 | 0x000001, .data = { { 1u << CAP_SETUID, 0 }, { 0, 0 } } };

static FsOptions map_options(uint8_t key_byte) {
        FsOptions o = FS_OPTIONS_DEFAULT;
        o.privileged_files = PRIVILEGED_FILES_MAP;
        o.has_privileged_key = true;
        memset(o.privileged_key, key_byte, sizeof o.privileged_key);
        o.shared_dir = dir;
        return o;
}

static void start(FsOptions o) {
        pt = passthrough_free(pt);
        ck_assert_int_eq(passthrough_new(&pt, &o), 0);
}

static void setup(void) {
        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chmod(dir, 0755), 0);
        start(map_options(0x5a));
        ck_assert_int_eq(passthrough_privileged_files(pt), PRIVILEGED_FILES_MAP);
}

static void teardown(void) {
        char cmd[128];
        pt = passthrough_free(pt);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
        snprintf(dir, sizeof dir, "/tmp/test-mapped-mode-XXXXXX");
}

static char *path(const char *rel) {
        static char buf[256];
        snprintf(buf, sizeof buf, "%s/%s", dir, rel);
        return buf;
}

static mode_t host_mode(const char *rel) {
        struct stat st;
        ck_assert_int_eq(lstat(path(rel), &st), 0);
        return st.st_mode;
}

static bool host_has_xattr(const char *rel, const char *name) {
        return lgetxattr(path(rel), name, NULL, 0) >= 0;
}

/* What the guest sees of name in the root, by a fresh LOOKUP (the lookup is forgotten again). */
static struct stat guest_lookup(const char *name) {
        FsEntry e;
        ck_assert_int_eq(ops->lookup(pt, &root_ctx, 1, name, &e), 0);
        ops->forget(pt, e.nodeid, 1);
        return e.st;
}

static mode_t guest_getattr(uint64_t nodeid) {
        struct stat st;
        ck_assert_int_eq(ops->getattr(pt, &root_ctx, nodeid, FS_NO_FH, &st), 0);
        return st.st_mode;
}

/* A new regular file the guest made with mode, and its node. */
static uint64_t create(const char *name, mode_t mode) {
        FsEntry e;
        uint64_t fh;
        int r = ops->create(pt, &root_ctx, 1, name, mode, O_RDWR, false, &e, &fh);
        ck_assert_msg(r == 0, "CREATE %s %o: %s", name, mode, strerror(-r));
        ck_assert_uint_eq(e.st.st_mode & 07777, mode & 07777);
        ck_assert_int_eq(ops->release(pt, &root_ctx, e.nodeid, fh, 0, false), 0);
        return e.nodeid;
}

static int chmod_(uint64_t nodeid, mode_t mode, struct stat *st) {
        FsSetattr sa = { .valid = FS_SET_MODE, .mode = mode };
        struct stat dummy;
        return ops->setattr(pt, &root_ctx, nodeid, &sa, st ? st : &dummy);
}

/* Set-id bits of regular files: the guest sees them, the host has none, only the marker. */
START_TEST(test_setid_mapped) {
        FsEntry e;
        struct stat st;
        uint64_t n;

        n = create("suid", 04755);
        ck_assert_msg((host_mode("suid") & 07777) == 01755, "CREATE 04755: host mode %o",
                      host_mode("suid") & 07777);
        ck_assert(host_has_xattr("suid", FS_PRIVILEGED_XATTR));
        ck_assert_uint_eq(guest_getattr(n) & 07777, 04755);
        ck_assert_uint_eq(guest_lookup("suid").st_mode & 07777, 04755);
        /* chmod replaces the mapped bits */
        ck_assert_int_eq(chmod_(n, 06711, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 06711);
        ck_assert_uint_eq(host_mode("suid") & 07777, 01711);
        ck_assert_int_eq(chmod_(n, 01644, &st), 0); /* a guest's own sticky bit is mapped too */
        ck_assert_uint_eq(st.st_mode & 07777, 01644);
        ck_assert_uint_eq(host_mode("suid") & 07777, 01644);
        ck_assert_int_eq(chmod_(n, 0640, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0640);
        ck_assert_uint_eq(host_mode("suid") & 07777, 0640);
        ck_assert(!host_has_xattr("suid", FS_PRIVILEGED_XATTR));
        /* MKNOD of a regular file, TMPFILE */
        ck_assert_int_eq(ops->mknod(pt, &root_ctx, 1, "sgid", S_IFREG | 02755, 0, &e), 0);
        ck_assert_uint_eq(e.st.st_mode & 07777, 02755);
        ck_assert_uint_eq(host_mode("sgid") & 07777, 01755);
        /* directories: as asked, on the host too (nothing there is a privilege) */
        ck_assert_int_eq(ops->mkdir(pt, &root_ctx, 1, "d", 0755, &e), 0);
        ck_assert_int_eq(chmod_(e.nodeid, 07755, &st), 0);
        ck_assert_uint_eq(host_mode("d") & 07777, 07755);
        ck_assert_uint_eq(st.st_mode & 07777, 07755);
}
END_TEST

/* A READDIRPLUS filler that notes the type and mode given for the name "null". */
static unsigned plus_type;
static mode_t plus_mode;

static bool fits_always(void *data, size_t namelen) {
        return true;
}

static int note_null(void *data, const char *name, size_t namelen, uint64_t ino, unsigned type, uint64_t off,
                     const FsEntry *entry) {
        if (namelen == 4 && memcmp(name, "null", 4) == 0) {
                plus_type = type;
                plus_mode = entry ? entry->st.st_mode : 0;
        }
        if (entry && entry->nodeid)
                ops->forget(pt, entry->nodeid, 1);
        return 0;
}

/* A guest's device node is an empty regular file with its owner's permissions on the host. */
START_TEST(test_device_mapped) {
        FsEntry e;
        struct stat st;

        ck_assert_int_eq(ops->mknod(pt, &root_ctx, 1, "null", S_IFCHR | 0666, makedev(1, 3), &e), 0);
        ck_assert_msg(S_ISCHR(e.st.st_mode) && (e.st.st_mode & 07777) == 0666, "MKNOD reply mode %o", e.st.st_mode);
        ck_assert_uint_eq(e.st.st_rdev, makedev(1, 3));
        ck_assert_msg(S_ISREG(host_mode("null")) && (host_mode("null") & 07777) == 01600, "host mode %o",
                      host_mode("null"));
        st = guest_lookup("null");
        ck_assert(S_ISCHR(st.st_mode));
        ck_assert_uint_eq(st.st_rdev, makedev(1, 3));
        ck_assert_int_eq(ops->getattr(pt, &root_ctx, e.nodeid, FS_NO_FH, &st), 0);
        ck_assert(S_ISCHR(st.st_mode));
        ck_assert_int_eq(chmod_(e.nodeid, 04640, &st), 0);
        ck_assert_uint_eq(st.st_mode, S_IFCHR | 04640);
        ck_assert_uint_eq(st.st_rdev, makedev(1, 3));
        ck_assert_uint_eq(host_mode("null") & 07777, 01600);
        ck_assert_int_eq(ops->mknod(pt, &root_ctx, 1, "sda", S_IFBLK | 0660, makedev(8, 0), &e), 0);
        ck_assert(S_ISBLK(e.st.st_mode));
        ck_assert_uint_eq(e.st.st_rdev, makedev(8, 0));
        ck_assert(S_ISREG(host_mode("sda")));
        ck_assert_uint_eq(host_mode("sda") & 0077, 0);
        /* READDIRPLUS gives the guest's type with the guest's attributes */
        {
                const FsDirFiller fill = { .plus = true, .fits = fits_always, .add = note_null };
                uint64_t fh;
                ck_assert_int_eq(ops->opendir(pt, &root_ctx, 1, O_RDONLY, &fh), 0);
                ck_assert_int_eq(ops->readdir(pt, &root_ctx, 1, fh, 0, &fill), 0);
                ck_assert_int_eq(ops->releasedir(pt, &root_ctx, 1, fh), 0);
                ck_assert_msg(plus_type == DT_CHR && S_ISCHR(plus_mode), "READDIRPLUS: type %u mode %o", plus_type,
                              plus_mode);
        }
        /* a whiteout stays what it is: it opens nothing */
        ck_assert_int_eq(ops->mknod(pt, &root_ctx, 1, "wh", S_IFCHR, makedev(0, 0), &e), 0);
        ck_assert(S_ISCHR(host_mode("wh")));
}
END_TEST

/* security.capability is kept in the mapped metadata; the kernel's rules drop it. */
START_TEST(test_capability_mapped) {
        uint64_t n = create("prog", 0755);
        FsSetattr sa = { .valid = FS_SET_SIZE, .size = 0 };
        struct iovec w = { "x", 1 };
        char buf[256];
        struct stat st;
        uint64_t fh;
        ssize_t len;

        ck_assert_int_eq(ops->setxattr(pt, &root_ctx, n, "security.capability", &fcap, sizeof fcap, 0, false), 0);
        ck_assert_msg(!host_has_xattr("prog", "security.capability"), "a file capability appeared on the host");
        ck_assert_int_eq(ops->getxattr(pt, &root_ctx, n, "security.capability", NULL, 0), sizeof fcap);
        ck_assert_int_eq(ops->getxattr(pt, &root_ctx, n, "security.capability", buf, 4), -ERANGE);
        ck_assert_int_eq(ops->getxattr(pt, &root_ctx, n, "security.capability", buf, sizeof buf), sizeof fcap);
        ck_assert(memcmp(buf, &fcap, sizeof fcap) == 0);
        ck_assert_int_eq(ops->setxattr(pt, &root_ctx, n, "security.capability", &fcap, sizeof fcap, XATTR_CREATE,
                                       false),
                         -EEXIST);
        len = ops->listxattr(pt, &root_ctx, n, buf, sizeof buf);
        ck_assert_int_eq(len, sizeof "security.capability");
        ck_assert_str_eq(buf, "security.capability");
        ck_assert_int_ge(ops->listxattr(pt, &root_ctx, n, NULL, 0), len);
        /* the guest's mode is unchanged by a capability */
        ck_assert_uint_eq(guest_getattr(n) & 07777, 0755);
        /* every write drops it */
        ck_assert_int_eq(ops->open(pt, &root_ctx, n, O_RDWR, false, &fh), 0);
        ck_assert_int_eq(ops->write(pt, &root_ctx, n, fh, 0, &w, 1, false), 1);
        ck_assert_int_eq(ops->getxattr(pt, &root_ctx, n, "security.capability", buf, sizeof buf), -ENODATA);
        /* so does a truncate, and a chown */
        ck_assert_int_eq(ops->setxattr(pt, &root_ctx, n, "security.capability", &fcap, sizeof fcap, 0, false), 0);
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, n, &sa, &st), 0);
        ck_assert_int_eq(ops->getxattr(pt, &root_ctx, n, "security.capability", buf, sizeof buf), -ENODATA);
        ck_assert_int_eq(ops->setxattr(pt, &root_ctx, n, "security.capability", &fcap, sizeof fcap, 0, false), 0);
        sa = (FsSetattr){ .valid = FS_SET_UID, .uid = HOST_USER };
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, n, &sa, &st), 0);
        ck_assert_int_eq(ops->getxattr(pt, &root_ctx, n, "security.capability", buf, sizeof buf), -ENODATA);
        /* and removexattr */
        ck_assert_int_eq(ops->setxattr(pt, &root_ctx, n, "security.capability", &fcap, sizeof fcap, 0, false), 0);
        ck_assert_int_eq(ops->removexattr(pt, &root_ctx, n, "security.capability"), 0);
        ck_assert_int_eq(ops->getxattr(pt, &root_ctx, n, "security.capability", buf, sizeof buf), -ENODATA);
        ck_assert_int_eq(ops->removexattr(pt, &root_ctx, n, "security.capability"), -ENODATA);
        ck_assert_uint_eq(host_mode("prog") & 07777, 0755); /* nothing mapped is left: no marker */
        ck_assert_int_eq(ops->release(pt, &root_ctx, n, fh, 0, false), 0);
}
END_TEST

/* HANDLE_KILLPRIV_V2: a write, truncate or truncating open with kill_priv, and every chown, clear
 * mapped set-user-id, and set-group-id where group-executable; rename and link keep them. */
START_TEST(test_killpriv_mapped) {
        uint64_t n = create("s", 06755), fh;
        FsSetattr sa;
        struct iovec w = { "x", 1 };
        struct stat st;
        FsEntry e;

        ck_assert_int_eq(ops->open(pt, &root_ctx, n, O_RDWR, false, &fh), 0);
        ck_assert_int_eq(ops->write(pt, &root_ctx, n, fh, 0, &w, 1, false), 1); /* a privileged writer */
        ck_assert_uint_eq(guest_getattr(n) & 07777, 06755);
        ck_assert_int_eq(ops->write(pt, &root_ctx, n, fh, 0, &w, 1, true), 1);
        ck_assert_uint_eq(guest_getattr(n) & 07777, 0755);
        ck_assert_uint_eq(host_mode("s") & 07777, 0755);
        ck_assert_int_eq(ops->release(pt, &root_ctx, n, fh, 0, false), 0);
        /* SETATTR with FS_SET_KILL_SUIDGID; set-group-id without group-execute stays */
        ck_assert_int_eq(chmod_(n, 06745, NULL), 0);
        sa = (FsSetattr){ .valid = FS_SET_SIZE | FS_SET_KILL_SUIDGID, .size = 0 };
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, n, &sa, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 02745);
        /* a truncating open with kill_priv */
        ck_assert_int_eq(chmod_(n, 04755, NULL), 0);
        ck_assert_int_eq(ops->open(pt, &root_ctx, n, O_WRONLY | O_TRUNC, true, &fh), 0);
        ck_assert_uint_eq(guest_getattr(n) & 07777, 0755);
        ck_assert_int_eq(ops->release(pt, &root_ctx, n, fh, 0, false), 0);
        /* chown: the owner changes, the bits go (set-group-id without group-execute stays) */
        ck_assert_int_eq(chmod_(n, 06745, NULL), 0);
        sa = (FsSetattr){ .valid = FS_SET_UID | FS_SET_GID, .uid = HOST_USER, .gid = HOST_USER };
        ck_assert_int_eq(ops->setattr(pt, &root_ctx, n, &sa, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 02745);
        ck_assert_uint_eq(guest_lookup("s").st_mode & 07777, 02745); /* signed again for the new owner */
        /* rename and link: the same inode, the same bits */
        ck_assert_int_eq(chmod_(n, 04711, NULL), 0);
        ck_assert_int_eq(ops->rename(pt, &root_ctx, 1, "s", 1, "renamed", 0), 0);
        ck_assert_uint_eq(guest_lookup("renamed").st_mode & 07777, 04711);
        ck_assert_int_eq(ops->link(pt, &root_ctx, n, 1, "linked", &e), 0);
        ck_assert_uint_eq(e.st.st_mode & 07777, 04711);
        ck_assert_uint_eq(guest_lookup("linked").st_mode & 07777, 04711);
        ck_assert_uint_eq(host_mode("linked") & 07777, 01711);
}
END_TEST

/* copy_file_range copies data, never the metadata: the destination keeps its own (and, written
 * to, loses its capability); the source keeps its bits. */
START_TEST(test_copy_file_range) {
        uint64_t src = create("src", 04755), dst = create("dst", 02711), fs, fd;
        struct iovec w = { "data", 4 };
        char buf[64];

        ck_assert_int_eq(ops->setxattr(pt, &root_ctx, dst, "security.capability", &fcap, sizeof fcap, 0, false), 0);
        ck_assert_int_eq(ops->open(pt, &root_ctx, src, O_RDWR, false, &fs), 0);
        ck_assert_int_eq(ops->open(pt, &root_ctx, dst, O_RDWR, false, &fd), 0);
        ck_assert_int_eq(ops->write(pt, &root_ctx, src, fs, 0, &w, 1, false), 4);
        ck_assert_int_eq(ops->copy_file_range(pt, &root_ctx, src, fs, 0, dst, fd, 0, 4, 0), 4);
        ck_assert_uint_eq(guest_getattr(src) & 07777, 04755);
        ck_assert_uint_eq(guest_getattr(dst) & 07777, 02711);
        ck_assert_int_eq(ops->getxattr(pt, &root_ctx, dst, "security.capability", buf, sizeof buf), -ENODATA);
        ck_assert_int_eq(ops->release(pt, &root_ctx, src, fs, 0, false), 0);
        ck_assert_int_eq(ops->release(pt, &root_ctx, dst, fd, 0, false), 0);
}
END_TEST

/* Without HANDLE_KILLPRIV_V2 the guest kernel clears the bits of a file a user who is not its owner
 * writes or truncates with a SETATTR of the mode, sent as that user: write permission suffices, as
 * for the kernel's own write. Any other mode change still needs the owner. */
START_TEST(test_killpriv_by_writer) {
        const FsCtx user = { .uid = HOST_USER, .gid = HOST_USER };
        uint64_t n = create("shared", 06755);
        FsSetattr sa = { .valid = FS_SET_MODE, .mode = 0777 };
        struct stat st;
        int r;

        ck_assert_int_eq(chmod_(n, 06777, NULL), 0); /* writable by the user, owned by root */
        r = ops->setattr(pt, &user, n, &sa, &st);
        ck_assert_msg(r == 0, "a writer's SETATTR clearing 06777 to 0777: %s", strerror(-r));
        ck_assert_uint_eq(st.st_mode & 07777, 0777);
        ck_assert_int_eq(chmod_(n, 02777, NULL), 0);
        sa = (FsSetattr){ .valid = FS_SET_MODE | FS_SET_SIZE, .mode = 0777, .size = 0 };
        r = ops->setattr(pt, &user, n, &sa, &st);
        ck_assert_msg(r == 0, "a writer's truncate clearing 02777: %s", strerror(-r));
        ck_assert_uint_eq(st.st_mode & 07777, 0777);
        ck_assert_int_eq(chmod_(n, 04777, NULL), 0);
        sa = (FsSetattr){ .valid = FS_SET_MODE, .mode = 0666 };
        ck_assert_int_eq(ops->setattr(pt, &user, n, &sa, &st), -EPERM);
        sa = (FsSetattr){ .valid = FS_SET_MODE, .mode = 06777 };
        ck_assert_int_eq(ops->setattr(pt, &user, n, &sa, &st), -EPERM);
        ck_assert_uint_eq(guest_getattr(n) & 07777, 04777);
}
END_TEST

/* Runs fn as the host user HOST_USER in a child (a host user's own setfattr). */
static void as_host_user(void (*fn)(void)) {
        pid_t pid = fork();
        int status;

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (setresgid(HOST_USER, HOST_USER, HOST_USER) < 0 || setresuid(HOST_USER, HOST_USER, HOST_USER) < 0)
                        _exit(2);
                fn();
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "host user's child: status %#x", status);
}

static char genuine[512];
static ssize_t genuine_len;

/* The host user writes what a guest root's set-uid file carries onto files of its own: copied
 * as it is, cut short, padded, and made up; and sets the marker on each. */
static void forge(void) {
        char buf[8192];
        static const struct {
                const char *name;
                int how;
        } files[] = { { "copied", 0 }, { "truncated", 1 }, { "oversized", 2 }, { "made-up", 3 } };

        for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
                const char *p = path(files[k].name);
                size_t len = (size_t) genuine_len;
                int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0755);
                if (fd < 0)
                        _exit(3);
                close(fd);
                memcpy(buf, genuine, len);
                if (files[k].how == 1)
                        len -= 1;
                else if (files[k].how == 2) {
                        memset(buf + len, 0, 1024);
                        len += 1024;
                } else if (files[k].how == 3)
                        buf[len - 1] ^= 1;
                if (setxattr(p, FS_PRIVILEGED_XATTR, buf, len, 0) < 0 || chmod(p, 01755) < 0)
                        _exit(4);
        }
}

/* stderr into a file while the guest looks, for the log lines: the saved fd, or the text logged. */
static int log_begin(void) {
        int saved = dup(STDERR_FILENO), fd = open(path("log"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert_int_ge(saved, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
        close(fd);
        return saved;
}

static char *log_end(int saved) {
        static char buf[8192];
        int fd;
        ssize_t n;

        ck_assert_int_eq(dup2(saved, STDERR_FILENO), STDERR_FILENO);
        close(saved);
        fd = open(path("log"), O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = 0;
        ck_assert_int_eq(unlink(path("log")), 0);
        return buf;
}

static unsigned count(const char *haystack, const char *needle) {
        unsigned n = 0;
        for (const char *s = strstr(haystack, needle); s; s = strstr(s + 1, needle))
                n++;
        return n;
}

START_TEST(test_forgery_not_honoured) {
        const char *names[] = { "copied", "truncated", "oversized", "made-up" };
        struct stat st;
        char *log;
        int saved;

        /* guest root's set-uid-root program: genuine */
        (void) create("guest-suid", 04755);
        genuine_len = lgetxattr(path("guest-suid"), FS_PRIVILEGED_XATTR, genuine, sizeof genuine);
        ck_assert_int_gt(genuine_len, 0);
        ck_assert_int_eq(chmod(dir, 0777), 0); /* the host user may make files in the share */
        as_host_user(forge);
        saved = log_begin();
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
                st = guest_lookup(names[k]);
                ck_assert_msg((st.st_mode & 07777) == 01755 && st.st_uid == HOST_USER,
                              "%s: the guest sees mode %o uid %u (a host user's attribute was honoured)", names[k],
                              st.st_mode & 07777, st.st_uid);
        }
        log = log_end(saved);
        /* one line each, naming why */
        ck_assert_msg(count(log, "not honoured") == 4, "log: %s", log);
        ck_assert_uint_eq(count(log, "(too short)"), 1);
        ck_assert_uint_eq(count(log, "(too long)"), 1);
        ck_assert_uint_eq(count(log, "(not written by this vufsd for this file"), 2);
        /* a file host root gives to another owner is plain too: the owner is in the authenticator */
        ck_assert_int_eq(chown(path("guest-suid"), HOST_USER, HOST_USER), 0);
        ck_assert_int_eq(chmod(path("guest-suid"), 01755), 0);
        ck_assert_uint_eq(guest_lookup("guest-suid").st_mode & 07777, 01755);
}
END_TEST

/* The same for a device: a host user's copy of a genuine device's attribute is a plain file. */
static void forge_device(void) {
        int fd = open(path("mem"), O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0)
                _exit(3);
        close(fd);
        if (setxattr(path("mem"), FS_PRIVILEGED_XATTR, genuine, (size_t) genuine_len, 0) < 0 ||
            chmod(path("mem"), 01600) < 0)
                _exit(4);
}

START_TEST(test_forged_device_not_honoured) {
        FsEntry e;
        struct stat st;

        ck_assert_int_eq(ops->mknod(pt, &root_ctx, 1, "guest-mem", S_IFCHR | 0666, makedev(1, 1), &e), 0);
        genuine_len = lgetxattr(path("guest-mem"), FS_PRIVILEGED_XATTR, genuine, sizeof genuine);
        ck_assert_int_gt(genuine_len, 0);
        ck_assert_int_eq(chmod(dir, 0777), 0);
        as_host_user(forge_device);
        st = guest_lookup("mem");
        ck_assert_msg(S_ISREG(st.st_mode), "a host user's copy of /dev/mem's numbers is a device for the guest: %o",
                      st.st_mode);
        ck_assert(S_ISCHR(guest_lookup("guest-mem").st_mode));
}
END_TEST

/* The guest never reaches the attribute itself. */
/* A security label is a guest xattr name too, mapped by --xattrmap (":map:security.:user.:" turns
 * "security.vufsd.privileged" into the host name below) and written by xattr_set_labels(): that
 * write must not reach map mode's own attribute either. Before, a CREATE, MKDIR or MKNOD carrying
 * such a label wrote the guest's bytes into user.vufsd.privileged of the new inode. */
START_TEST(test_label_cannot_write_attribute) {
        FsSecLabel l = { .name = FS_PRIVILEGED_XATTR, .value = "guest bytes", .size = 11 };
        FsCtx c = { .uid = 0, .gid = 0, .labels = &l, .n_labels = 1 };
        FsEntry e;
        uint64_t fh;

        if (ops->create(pt, &c, 1, "f", 0644, O_RDWR, false, &e, &fh) == 0)
                ck_assert_int_eq(ops->release(pt, &c, e.nodeid, fh, 0, false), 0);
        ck_assert_msg(!host_has_xattr("f", FS_PRIVILEGED_XATTR), "CREATE's label wrote " FS_PRIVILEGED_XATTR);
        (void) ops->mkdir(pt, &c, 1, "d", 0755, &e);
        ck_assert_msg(!host_has_xattr("d", FS_PRIVILEGED_XATTR), "MKDIR's label wrote " FS_PRIVILEGED_XATTR);
        (void) ops->mknod(pt, &c, 1, "n", S_IFREG | 0644, 0, &e);
        ck_assert_msg(!host_has_xattr("n", FS_PRIVILEGED_XATTR), "MKNOD's label wrote " FS_PRIVILEGED_XATTR);
}
END_TEST

START_TEST(test_attribute_hidden) {
        uint64_t n = create("f", 04755);
        char buf[256];
        ssize_t len;

        ck_assert_int_eq(ops->getxattr(pt, &root_ctx, n, FS_PRIVILEGED_XATTR, buf, sizeof buf), -ENODATA);
        ck_assert_int_lt(ops->setxattr(pt, &root_ctx, n, FS_PRIVILEGED_XATTR, "x", 1, 0, false), 0);
        ck_assert_int_lt(ops->removexattr(pt, &root_ctx, n, FS_PRIVILEGED_XATTR), 0);
        ck_assert(host_has_xattr("f", FS_PRIVILEGED_XATTR));
        ck_assert_int_eq(ops->setxattr(pt, &root_ctx, n, "user.other", "v", 1, 0, false), 0);
        len = ops->listxattr(pt, &root_ctx, n, buf, sizeof buf);
        ck_assert_int_eq(len, sizeof "user.other");
        ck_assert_str_eq(buf, "user.other");
        ck_assert_uint_eq(guest_getattr(n) & 07777, 04755);
}
END_TEST

/* Files host root made are served as they are: a real set-uid program, a real device node, a
 * plain sticky file. */
START_TEST(test_host_files_as_they_are) {
        struct stat st;
        int fd;

        fd = open(path("real-suid"), O_WRONLY | O_CREAT, 0755);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(chmod(path("real-suid"), 04755), 0);
        ck_assert_uint_eq(guest_lookup("real-suid").st_mode & 07777, 04755);
        ck_assert_int_eq(mknod(path("real-null"), S_IFCHR | 0666, makedev(1, 3)), 0);
        st = guest_lookup("real-null");
        ck_assert(S_ISCHR(st.st_mode));
        ck_assert_uint_eq(st.st_rdev, makedev(1, 3));
        fd = open(path("sticky"), O_WRONLY | O_CREAT, 01644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(chmod(path("sticky"), 01644), 0);
        ck_assert_uint_eq(guest_lookup("sticky").st_mode & 07777, 01644);
}
END_TEST

/* The key persists: a restarted filesystem with the same key honours what the first wrote; one
 * with another key (or refuse) serves the plain file. */
START_TEST(test_key_across_restarts) {
        FsOptions o;

        (void) create("suid", 04755);
        start(map_options(0x5a));
        ck_assert_uint_eq(guest_lookup("suid").st_mode & 07777, 04755);
        start(map_options(0x33));
        ck_assert_uint_eq(guest_lookup("suid").st_mode & 07777, 01755);
        o = map_options(0x5a);
        o.privileged_files = PRIVILEGED_FILES_REFUSE;
        start(o);
        ck_assert_uint_eq(guest_lookup("suid").st_mode & 07777, 01755);
}
END_TEST

/* Without a key, or where the share has no user xattrs, map works as refuse. */
START_TEST(test_fallbacks) {
        FsOptions o = map_options(0x5a);

        o.has_privileged_key = false;
        start(o);
        ck_assert_int_eq(passthrough_privileged_files(pt), PRIVILEGED_FILES_REFUSE);
        o = map_options(0x5a);
        o.shared_dir = "/proc/sys"; /* procfs: no user.* attributes */
        pt = passthrough_free(pt);
        ck_assert_int_eq(passthrough_new(&pt, &o), 0);
        ck_assert_int_eq(passthrough_privileged_files(pt), PRIVILEGED_FILES_REFUSE);
}
END_TEST

int main(void) {
        Suite *s = suite_create("mapped-mode");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_root_test(tc, test_setid_mapped);
        tcase_add_root_test(tc, test_device_mapped);
        tcase_add_root_test(tc, test_capability_mapped);
        tcase_add_root_test(tc, test_killpriv_mapped);
        tcase_add_root_test(tc, test_killpriv_by_writer);
        tcase_add_root_test(tc, test_copy_file_range);
        tcase_add_root_test(tc, test_forgery_not_honoured);
        tcase_add_root_test(tc, test_forged_device_not_honoured);
        tcase_add_root_test(tc, test_attribute_hidden);
        tcase_add_root_test(tc, test_label_cannot_write_attribute);
        tcase_add_root_test(tc, test_host_files_as_they_are);
        tcase_add_root_test(tc, test_key_across_restarts);
        tcase_add_test(tc, test_fallbacks);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
