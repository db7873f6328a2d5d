/* vufs-posix.c: POSIX behaviour probe, run in a guest on the share and on a tmpfs and diffed.
 *
 * Usage: vufs-posix DIR OTHERDIR
 *   DIR       an empty directory on the filesystem under test (the probe works in DIR/t)
 *   OTHERDIR  a directory on another filesystem (for EXDEV)
 *
 * Runs as root (it switches to uids 1000/1001 in forked children for the permission checks) and
 * prints one line per assertion, "name: result", where result is "ok", an errno name or an observed
 * value. Nothing in the output depends on the filesystem's identity (no inode numbers, device
 * numbers, absolute times, block counts or paths), so two runs diff cleanly; every place where a
 * correct filesystem may legitimately answer otherwise is listed in docs/conformance.md. The exit
 * status is 0 when the probe ran to the end (its verdict is the diff, not the status), 2 on a
 * setup failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <linux/falloc.h>
#include <linux/fs.h>

#include "probe-util.h"

#define UID_A 1000
#define GID_A 1000
#define UID_B 1001
#define GID_B 1001

static unsigned n_assert;
static const char *other_dir;

/* ---- output ---- */

static void say(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *name, const char *fmt, ...) {
        va_list ap;

        printf("%s: ", name);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
        n_assert++;
}

/* r: a system call's return value (< 0 = failed with errno). */
static void chk(const char *name, long r) {
        say(name, "%s", r < 0 ? ename(errno) : "ok");
}

static void die(const char *what) {
        fprintf(stderr, "vufs-posix: setup failed: %s: %m\n", what);
        exit(2);
}

static const char *ftype(mode_t m) {
        switch (m & S_IFMT) {
        case S_IFREG: return "reg";
        case S_IFDIR: return "dir";
        case S_IFLNK: return "lnk";
        case S_IFIFO: return "fifo";
        case S_IFSOCK: return "sock";
        case S_IFCHR: return "chr";
        case S_IFBLK: return "blk";
        default: return "?";
        }
}

/* The fields two correct filesystems agree on (no size for directories: it is the filesystem's). */
static void say_st(const char *name, const struct stat *st) {
        char extra[64] = "";

        if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
                snprintf(extra, sizeof(extra), " rdev=%u:%u", major(st->st_rdev), minor(st->st_rdev));
        else if (!S_ISDIR(st->st_mode))
                snprintf(extra, sizeof(extra), " size=%lld", (long long) st->st_size);
        say(name, "%s mode=%04o nlink=%lu uid=%u gid=%u%s", ftype(st->st_mode), st->st_mode & 07777,
            (unsigned long) st->st_nlink, st->st_uid, st->st_gid, extra);
}

static void say_stat(const char *name, const char *path) {
        struct stat st;

        if (lstat(path, &st) < 0)
                say(name, "%s", ename(errno));
        else
                say_st(name, &st);
}

static void say_fstat(const char *name, int fd) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                say(name, "%s", ename(errno));
        else
                say_st(name, &st);
}

static void say_mode(const char *name, const char *path) {
        struct stat st;

        if (lstat(path, &st) < 0)
                say(name, "%s", ename(errno));
        else
                say(name, "%04o", st.st_mode & 07777);
}

static void say_nlink(const char *name, const char *path) {
        struct stat st;

        if (lstat(path, &st) < 0)
                say(name, "%s", ename(errno));
        else
                say(name, "%lu", (unsigned long) st.st_nlink);
}

static uint32_t fnv(const void *p, size_t n) {
        const unsigned char *b = p;
        uint32_t h = 2166136261u;

        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * 16777619u;
        return h;
}

static void pattern(void *buf, size_t len, unsigned seed) {
        unsigned char *b = buf;

        for (size_t i = 0; i < len; i++)
                b[i] = (unsigned char) ((i * 31 + seed * 7 + (i >> 9)) & 0xff);
}

/* The whole content: "size=N fnv=H" (or the errno name). */
static void say_content(const char *name, const char *path) {
        static char buf[4 << 20];
        ssize_t n, total = 0;
        int fd = open(path, O_RDONLY);

        if (fd < 0) {
                say(name, "%s", ename(errno));
                return;
        }
        while ((n = read(fd, buf + total, sizeof(buf) - (size_t) total)) > 0)
                total += n;
        if (n < 0)
                say(name, "read %s", ename(errno));
        else if (total < 64 && memchr(buf, 0, (size_t) total) == NULL)
                say(name, "\"%.*s\"", (int) total, buf);
        else
                say(name, "size=%zd fnv=%08x", total, fnv(buf, (size_t) total));
        close(fd);
}

static int put_file(const char *path, const char *s, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
        ssize_t n;

        if (fd < 0)
                return -1;
        n = write(fd, s, strlen(s));
        close(fd);
        return n == (ssize_t) strlen(s) ? 0 : -1;
}

/* A preparation step whose failure shows in later assertions: noted on stderr, not fatal. */
static void try(long r, const char *what) {
        if (r < 0)
                fprintf(stderr, "vufs-posix: preparation step %s failed: %m\n", what);
}

static void must(int r, const char *what) {
        if (r < 0)
                die(what);
}

/* ---- children ---- */

static void become(uid_t uid, gid_t gid) {
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
                fprintf(stderr, "vufs-posix: cannot become %u:%u: %m\n", uid, gid);
                _exit(3);
        }
}

/* Runs fn in a child as uid/gid (uid 0: stays root); the child prints its own assertions while the
 * parent waits, so the output order is fixed. */
static void as_user(uid_t uid, gid_t gid, void (*fn)(void *), void *ud) {
        pid_t pid;
        int status;

        fflush(stdout);
        pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                if (uid != 0)
                        become(uid, gid);
                fn(ud);
                fflush(stdout);
                _exit(0);
        }
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "vufs-posix: child as %u failed (status 0x%x)\n", uid, status);
                exit(2);
        }
}

/* A child that reports through a pipe: returns its pid; *ret_fd reads its messages. */
static pid_t spawn(void (*fn)(int wfd, void *), void *ud, int *ret_fd) {
        int p[2];
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                die("pipe");
        fflush(stdout);
        pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                close(p[0]);
                fn(p[1], ud);
                _exit(0);
        }
        close(p[1]);
        *ret_fd = p[0];
        return pid;
}

static void reap(pid_t pid) {
        int status;

        for (int i = 0; i < 300; i++) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                        return;
                msleep(100);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
}

/* ---- chmod / chown ---- */

static void t_chmod(void) {
        struct stat a, b;

        must(put_file("cm", "x", 0644), "cm");
        chk("chmod.file", chmod("cm", 0600));
        say_mode("chmod.file.mode", "cm");
        chk("chmod.file.all_bits", chmod("cm", 07777));
        say_mode("chmod.file.all_bits.mode", "cm");
        chk("chmod.file.zero", chmod("cm", 0));
        say_mode("chmod.file.zero.mode", "cm");
        /* Root reads and writes a mode 0 file. */
        say_content("chmod.file.zero.root_reads", "cm");
        must(mkdir("cmd", 0755), "cmd");
        chk("chmod.dir", chmod("cmd", 01750));
        say_mode("chmod.dir.mode", "cmd");
        int fd = open("cm", O_RDONLY);
        chk("chmod.fchmod", fchmod(fd, 0640));
        say_mode("chmod.fchmod.mode", "cm");
        close(fd);
        chk("chmod.enoent", chmod("nope", 0644));
        chk("chmod.fchmodat.nofollow", fchmodat(AT_FDCWD, "cm", 0644, AT_SYMLINK_NOFOLLOW));
        must(symlink("cm", "cm.lnk"), "cm.lnk");
        chk("chmod.through_symlink", chmod("cm.lnk", 0604));
        say_mode("chmod.through_symlink.target_mode", "cm");
        say_mode("chmod.through_symlink.link_mode", "cm.lnk");
        /* ctime moves, mtime does not. */
        struct timespec old[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
        utimensat(AT_FDCWD, "cm", old, 0);
        lstat("cm", &a);
        msleep(20);
        chmod("cm", 0640);
        lstat("cm", &b);
        say("chmod.ctime_changed", "%s", (b.st_ctim.tv_sec != a.st_ctim.tv_sec || b.st_ctim.tv_nsec != a.st_ctim.tv_nsec) ? "yes" : "no");
        say("chmod.mtime_kept", "%s", b.st_mtim.tv_sec == 1000000000 ? "yes" : "no");
}

static void t_chown(void) {
        struct stat st;

        must(put_file("co", "x", 0644), "co");
        chk("chown.file", chown("co", 1234, 5678));
        say_stat("chown.file.stat", "co");
        chk("chown.keep", chown("co", (uid_t) -1, (gid_t) -1));
        say_stat("chown.keep.stat", "co");
        chk("chown.gid_only", chown("co", (uid_t) -1, 42));
        say_stat("chown.gid_only.stat", "co");
        int fd = open("co", O_RDONLY);
        chk("chown.fchown", fchown(fd, 0, 0));
        say_fstat("chown.fchown.stat", fd);
        close(fd);
        must(symlink("co", "co.lnk"), "co.lnk");
        chk("chown.lchown", lchown("co.lnk", 77, 88));
        say_stat("chown.lchown.link", "co.lnk");
        say_stat("chown.lchown.target", "co");
        chk("chown.through_symlink", chown("co.lnk", 99, 99));
        say_stat("chown.through_symlink.target", "co");
        must(mkdir("cod", 0755), "cod");
        chk("chown.dir", chown("cod", UID_A, GID_A));
        say_stat("chown.dir.stat", "cod");
        /* Root's chown clears set-id bits of an executable; a set-gid without group x stays. */
        must(put_file("co.suid", "#!/bin/sh\n", 0755), "co.suid");
        must(chmod("co.suid", 06755), "chmod co.suid");
        chk("chown.suid_exec", chown("co.suid", UID_A, GID_A));
        say_mode("chown.suid_exec.mode", "co.suid");
        must(put_file("co.sgid", "x", 0644), "co.sgid");
        must(chmod("co.sgid", 02644), "chmod co.sgid");
        chk("chown.sgid_noexec", chown("co.sgid", UID_A, GID_A));
        say_mode("chown.sgid_noexec.mode", "co.sgid");
        must(mkdir("cod.sgid", 0755), "cod.sgid");
        must(chmod("cod.sgid", 02755), "chmod cod.sgid");
        chk("chown.sgid_dir", chown("cod.sgid", UID_A, GID_A));
        say_mode("chown.sgid_dir.mode", "cod.sgid");
        chk("chown.enoent", chown("nope", 1, 1));
        lstat("co", &st);
        say("chown.large_ids", "%s", chown("co", 4000000000u, 4000000001u) < 0 ? ename(errno) : "ok");
        say_stat("chown.large_ids.stat", "co");
}

/* ---- link / unlink ---- */

static void t_link(void) {
        must(put_file("ln1", "link data", 0644), "ln1");
        chk("link.create", link("ln1", "ln2"));
        say_nlink("link.nlink_src", "ln1");
        say_nlink("link.nlink_dst", "ln2");
        say_content("link.content", "ln2");
        struct stat a, b;
        lstat("ln1", &a);
        lstat("ln2", &b);
        say("link.same_inode", "%s", a.st_ino == b.st_ino ? "yes" : "no");
        must(mkdir("lnd", 0755), "lnd");
        chk("link.into_subdir", link("ln1", "lnd/ln3"));
        say_nlink("link.nlink3", "ln1");
        chk("link.exists", link("ln1", "ln2"));
        chk("link.enoent", link("nope", "ln4"));
        chk("link.dir", link("lnd", "lnd2"));
        chk("link.dst_dir_missing", link("ln1", "nodir/x"));
        int fd = open("ln1", O_RDWR);
        chk("unlink.one", unlink("ln2"));
        say_nlink("unlink.nlink_after", "ln1");
        chk("unlink.again", unlink("ln2"));
        chk("unlink.two", unlink("lnd/ln3"));
        chk("unlink.last", unlink("ln1"));
        say_fstat("unlink.open_fd_stat", fd);
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        say("unlink.open_fd_read", "%s", n < 0 ? ename(errno) : buf);
        n = pwrite(fd, "more", 4, 9);
        say("unlink.open_fd_write", "%s", n < 0 ? ename(errno) : "ok");
        say_fstat("unlink.open_fd_stat2", fd);
        close(fd);
        chk("unlink.dir", unlink("lnd"));
        chk("unlink.enoent", unlink("nope"));
        chk("unlink.enotdir", unlink("cm/x"));
        must(symlink("lnd", "lnd.lnk"), "lnd.lnk");
        chk("unlink.symlink_to_dir", unlink("lnd.lnk"));
        say_stat("unlink.symlink_to_dir.target", "lnd");
        /* A symlink can be hard-linked; the link is to the symlink itself. */
        must(symlink("target-x", "ln.sym"), "ln.sym");
        chk("link.symlink", link("ln.sym", "ln.sym2"));
        say_stat("link.symlink.stat", "ln.sym2");
        chk("link.linkat_follow_dangling", linkat(AT_FDCWD, "ln.sym", AT_FDCWD, "ln.sym3", AT_SYMLINK_FOLLOW));
}

/* ---- mkdir / rmdir ---- */

static void t_mkdir(void) {
        mode_t old = umask(022);

        chk("mkdir.umask022", mkdir("md1", 0777));
        say_stat("mkdir.umask022.stat", "md1");
        umask(0);
        chk("mkdir.umask0", mkdir("md2", 0777));
        say_mode("mkdir.umask0.mode", "md2");
        umask(077);
        chk("mkdir.umask077", mkdir("md3", 0777));
        say_mode("mkdir.umask077.mode", "md3");
        umask(022);
        chk("mkdir.sticky", mkdir("md4", 01777));
        say_mode("mkdir.sticky.mode", "md4");
        chk("mkdir.exists", mkdir("md1", 0755));
        chk("mkdir.exists_file", mkdir("cm", 0755));
        chk("mkdir.enoent_parent", mkdir("nope/x", 0755));
        chk("mkdir.enotdir_parent", mkdir("cm/x", 0755));
        chk("mkdir.trailing_slash", mkdir("md5/", 0755));
        say_nlink("mkdir.parent_nlink.before", "md1");
        must(mkdir("md1/a", 0755), "md1/a");
        must(mkdir("md1/b", 0755), "md1/b");
        say_nlink("mkdir.parent_nlink.after", "md1");
        say_nlink("mkdir.child_nlink", "md1/a");
        must(put_file("md1/a/f", "x", 0644), "md1/a/f");
        chk("rmdir.nonempty", rmdir("md1/a"));
        chk("rmdir.notdir", rmdir("md1/a/f"));
        chk("rmdir.enoent", rmdir("md1/zz"));
        chk("rmdir.dot", rmdir("md1/."));
        chk("rmdir.dotdot", rmdir("md1/a/.."));
        chk("rmdir.empty", rmdir("md1/b"));
        say_nlink("rmdir.parent_nlink", "md1");
        chk("rmdir.trailing_slash", rmdir("md5/"));
        must(symlink("md2", "md2.lnk"), "md2.lnk");
        chk("rmdir.symlink", rmdir("md2.lnk"));
        /* A directory removed while it is the cwd of a process: entries can no longer be created. */
        must(mkdir("md6", 0755), "md6");
        int dfd = open("md6", O_RDONLY | O_DIRECTORY);
        chk("rmdir.open_dir", rmdir("md6"));
        say("rmdir.open_dir.create_inside", "%s",
            openat(dfd, "x", O_CREAT | O_WRONLY, 0644) < 0 ? ename(errno) : "ok");
        struct stat st;
        fstat(dfd, &st);
        say("rmdir.open_dir.nlink", "%lu", (unsigned long) st.st_nlink);
        close(dfd);
        umask(old);
}

/* ---- mkfifo / mknod / sockets ---- */

static void t_mknod(void) {
        int fd;

        chk("mkfifo.create", mkfifo("ff", 0640));
        say_stat("mkfifo.stat", "ff");
        chk("mkfifo.exists", mkfifo("ff", 0640));
        fd = open("ff", O_WRONLY | O_NONBLOCK);
        say("mkfifo.open_wr_nonblock_noreader", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0)
                close(fd);
        fd = open("ff", O_RDWR);
        if (fd < 0) {
                say("mkfifo.rdwr", "%s", ename(errno));
        } else {
                char buf[8] = "";
                ssize_t w = write(fd, "pipe", 4), r = read(fd, buf, sizeof(buf) - 1);
                say("mkfifo.rdwr", "w=%zd r=%zd \"%s\"", w, r, buf);
                close(fd);
        }
        chk("mknod.reg", mknod("mn.reg", S_IFREG | 0600, 0));
        say_stat("mknod.reg.stat", "mn.reg");
        chk("mknod.fifo", mknod("mn.fifo", S_IFIFO | 0666, 0));
        say_stat("mknod.fifo.stat", "mn.fifo");
        chk("mknod.sock", mknod("mn.sock", S_IFSOCK | 0755, 0));
        say_stat("mknod.sock.stat", "mn.sock");
        chk("mknod.chr", mknod("mn.null", S_IFCHR | 0666, makedev(1, 3)));
        say_stat("mknod.chr.stat", "mn.null");
        chk("mknod.blk", mknod("mn.blk", S_IFBLK | 0600, makedev(7, 200)));
        say_stat("mknod.blk.stat", "mn.blk");
        chk("mknod.chr_bigdev", mknod("mn.big", S_IFCHR | 0600, makedev(300, 70000)));
        say_stat("mknod.chr_bigdev.stat", "mn.big");
        chk("mknod.exists", mknod("mn.reg", S_IFREG | 0600, 0));
        chk("mknod.dir_type", mknod("mn.dir", S_IFDIR | 0755, 0));
        chk("mknod.bad_type", mknod("mn.bad", 0170000 | 0644, 0));
        /* The guest's own driver answers I/O on a device node. */
        fd = open("mn.null", O_RDWR);
        if (fd < 0) {
                say("mknod.chr.io", "%s", ename(errno));
        } else {
                char c;
                ssize_t w = write(fd, "zz", 2), r = read(fd, &c, 1);
                say("mknod.chr.io", "w=%zd r=%zd", w, r);
                close(fd);
        }
        fd = open("mn.blk", O_RDONLY);
        say("mknod.blk.open", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0)
                close(fd);
        fd = open("mn.sock", O_RDONLY);
        say("mknod.sock.open", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0)
                close(fd);

        /* A socket made by bind(), then a connection through the name. */
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char cwd[PATH_MAX];
        int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), cs;

        if (!getcwd(cwd, sizeof(cwd)))
                die("getcwd");
        snprintf(sa.sun_path, sizeof(sa.sun_path), "us");
        chk("socket.bind", bind(ls, (struct sockaddr *) &sa, sizeof(sa)));
        say_stat("socket.bind.stat", "us");
        chk("socket.listen", listen(ls, 1));
        cs = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        chk("socket.connect", connect(cs, (struct sockaddr *) &sa, sizeof(sa)));
        close(cs);
        close(ls);
        cs = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        chk("socket.connect_closed", connect(cs, (struct sockaddr *) &sa, sizeof(sa)));
        close(cs);
        ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        chk("socket.bind_exists", bind(ls, (struct sockaddr *) &sa, sizeof(sa)));
        close(ls);
        chk("socket.unlink", unlink("us"));
}

static void u_mknod(void *ud) {
        (void) ud;
        chk("mknod.user.fifo", mknod("pub/u.fifo", S_IFIFO | 0644, 0));
        chk("mknod.user.chr", mknod("pub/u.chr", S_IFCHR | 0644, makedev(1, 3)));
        chk("mknod.user.blk", mknod("pub/u.blk", S_IFBLK | 0644, makedev(7, 0)));
        say_stat("mknod.user.fifo.stat", "pub/u.fifo");
}

/* ---- open ---- */

static void t_open(void) {
        int fd, fd2;
        char buf[64];
        ssize_t n;

        umask(022);
        fd = open("o1", O_CREAT | O_EXCL | O_WRONLY, 0666);
        say("open.creat_excl", "%s", fd < 0 ? ename(errno) : "ok");
        say_stat("open.creat_excl.stat", "o1");
        if (fd >= 0) {
                n = write(fd, "0123456789", 10);
                say("open.write", "%zd", n);
                n = read(fd, buf, 1);
                say("open.read_on_wronly", "%s", n < 0 ? ename(errno) : "ok");
                close(fd);
        }
        chk("open.creat_excl_exists", open("o1", O_CREAT | O_EXCL | O_WRONLY, 0644));
        fd = open("o1", O_CREAT | O_WRONLY, 0600);
        say("open.creat_existing", "%s", fd < 0 ? ename(errno) : "ok");
        say_stat("open.creat_existing.stat", "o1");
        close(fd);
        fd = open("o1", O_WRONLY | O_TRUNC);
        say("open.trunc", "%s", fd < 0 ? ename(errno) : "ok");
        say_stat("open.trunc.stat", "o1");
        close(fd);
        put_file("o1", "abc", 0644);
        fd = open("o1", O_RDONLY | O_TRUNC);
        say("open.rdonly_trunc", "%s", fd < 0 ? ename(errno) : "ok");
        say_stat("open.rdonly_trunc.stat", "o1");
        close(fd);
        put_file("o1", "abc", 0644);
        fd = open("o1", O_WRONLY | O_APPEND);
        fd2 = open("o1", O_WRONLY | O_APPEND);
        lseek(fd, 0, SEEK_SET);
        n = write(fd, "def", 3);
        say("open.append.write", "%zd", n);
        say("open.append.offset", "%lld", (long long) lseek(fd, 0, SEEK_CUR));
        n = write(fd2, "gh", 2);
        say("open.append.second_fd", "%zd", n);
        n = pwrite(fd, "XY", 2, 0);
        say("open.append.pwrite", "%zd", n);
        close(fd);
        close(fd2);
        say_content("open.append.content", "o1");
        chk("open.directory_on_file", open("o1", O_RDONLY | O_DIRECTORY));
        chk("open.trailing_slash_file", open("o1/", O_RDONLY));
        chk("open.creat_trailing_slash", open("o2/", O_CREAT | O_WRONLY, 0644));
        chk("open.enoent", open("nope", O_RDONLY));
        chk("open.enoent_dir", open("nope/x", O_RDONLY));
        chk("open.enotdir", open("o1/x", O_RDONLY));
        must(mkdir("od", 0755), "od");
        chk("open.dir_wronly", open("od", O_WRONLY));
        chk("open.dir_rdwr", open("od", O_RDWR));
        chk("open.dir_creat", open("od", O_CREAT | O_RDONLY, 0644));
        chk("open.dir_creat_excl", open("od", O_CREAT | O_EXCL | O_RDONLY, 0644));
        fd = open("od", O_RDONLY);
        say("open.dir_rdonly", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0) {
                n = read(fd, buf, sizeof(buf));
                say("open.dir_read", "%s", n < 0 ? ename(errno) : "ok");
                close(fd);
        }
        must(symlink("o1", "o1.lnk"), "o1.lnk");
        chk("open.nofollow_symlink", open("o1.lnk", O_RDONLY | O_NOFOLLOW));
        fd = open("o1.lnk", O_PATH | O_NOFOLLOW);
        say("open.path_nofollow_symlink", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0) {
                say_fstat("open.path_nofollow_symlink.stat", fd);
                close(fd);
        }
        fd = open("o1.lnk", O_RDONLY);
        say("open.follow_symlink", "%s", fd < 0 ? ename(errno) : "ok");
        close(fd);
        must(symlink("o3.target", "o3.lnk"), "o3.lnk");
        chk("open.creat_excl_dangling", open("o3.lnk", O_CREAT | O_EXCL | O_WRONLY, 0644));
        fd = open("o3.lnk", O_CREAT | O_WRONLY, 0640);
        say("open.creat_through_dangling", "%s", fd < 0 ? ename(errno) : "ok");
        close(fd);
        say_stat("open.creat_through_dangling.target", "o3.target");
        struct {
                const char *name;
                mode_t umask, mode;
        } modes[] = {
                { "open.mode.u022_0666", 022, 0666 }, { "open.mode.u027_0666", 027, 0666 },
                { "open.mode.u000_0777", 0, 0777 },   { "open.mode.u077_0755", 077, 0755 },
                { "open.mode.u000_4755", 0, 04755 },  { "open.mode.u022_2775", 022, 02775 },
                { "open.mode.u000_1777", 0, 01777 },  { "open.mode.u022_0000", 022, 0 },
        };
        for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
                char name[32];
                snprintf(name, sizeof(name), "om%zu", i);
                umask(modes[i].umask);
                fd = open(name, O_CREAT | O_EXCL | O_RDWR, modes[i].mode);
                if (fd < 0)
                        say(modes[i].name, "%s", ename(errno));
                else
                        say_fstat(modes[i].name, fd);
                close(fd);
                unlink(name);
        }
        umask(022);
        /* A mode 0 file created O_RDWR is writable through the new descriptor. */
        fd = open("o0", O_CREAT | O_EXCL | O_RDWR, 0);
        n = write(fd, "w", 1);
        say("open.mode0_write_via_creating_fd", "%zd", n);
        close(fd);
        fd = open("o4", O_CREAT | O_RDWR, 0644);
        n = pwrite(fd, "end", 3, 100000);
        say("open.pwrite_past_eof", "%zd", n);
        memset(buf, 'x', sizeof(buf));
        n = pread(fd, buf, 8, 50000);
        say("open.pread_hole", "%zd zero=%s", n, memcmp(buf, "\0\0\0\0\0\0\0\0", 8) == 0 ? "yes" : "no");
        n = pread(fd, buf, 8, 100003);
        say("open.pread_eof", "%zd", n);
        n = pread(fd, buf, 8, 1 << 30);
        say("open.pread_far", "%zd", n);
        close(fd);
        say_stat("open.pwrite_past_eof.stat", "o4");
        chk("open.bad_fd_write", write(fd, "x", 1));
        /* Bigger data, written and read back in pieces that cross pages. */
        static char big[3 << 20], back[3 << 20];
        pattern(big, sizeof(big), 5);
        fd = open("o5", O_CREAT | O_TRUNC | O_RDWR, 0644);
        n = 0;
        for (size_t off = 0; off < sizeof(big);) {
                size_t len = off % 3 == 0 ? 65537 : 200003;
                if (len > sizeof(big) - off)
                        len = sizeof(big) - off;
                ssize_t w = write(fd, big + off, len);
                if (w <= 0)
                        break;
                off += (size_t) w;
                n += w;
        }
        say("open.big.write", "%zd", n);
        n = pread(fd, back, sizeof(back), 0);
        say("open.big.read", "%zd same=%s", n, n == (ssize_t) sizeof(big) && memcmp(big, back, sizeof(big)) == 0 ? "yes" : "no");
        n = pread(fd, back, 5000, 1234567);
        say("open.big.read_middle", "%zd same=%s", n, memcmp(back, big + 1234567, 5000) == 0 ? "yes" : "no");
        chk("open.fsync", fsync(fd));
        chk("open.fdatasync", fdatasync(fd));
        close(fd);
        say_content("open.big.content", "o5");
        /* O_DIRECT: aligned I/O works (tmpfs refuses O_DIRECT only before 6.6: see the docs). */
        fd = open("o5", O_RDONLY | O_DIRECT);
        say("open.o_direct", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0)
                close(fd);
        /* copy_file_range within the filesystem. */
        int in = open("o5", O_RDONLY), out = open("o6", O_CREAT | O_TRUNC | O_WRONLY, 0644);
        loff_t oin = 1000, oout = 0;
        n = copy_file_range(in, &oin, out, &oout, 100000, 0);
        say("open.copy_file_range", "%s", n < 0 ? ename(errno) : n == 100000 ? "100000" : "short");
        close(in);
        close(out);
        n = 0;
        fd = open("o6", O_RDONLY);
        n = pread(fd, back, 100000, 0);
        say("open.copy_file_range.content", "%zd same=%s", n, n == 100000 && memcmp(back, big + 1000, 100000) == 0 ? "yes" : "no");
        close(fd);
        /* Shared writable mapping: stores reach read(). */
        fd = open("o7", O_CREAT | O_TRUNC | O_RDWR, 0644);
        try(ftruncate(fd, 8192), "ftruncate");
        char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
                say("open.mmap_shared", "%s", ename(errno));
                say("open.mmap_shared.msync", "no mapping");
        } else {
                memcpy(m + 4000, "mapped", 6);
                chk("open.mmap_shared.msync", msync(m, 8192, MS_SYNC));
                munmap(m, 8192);
                memset(buf, 0, sizeof(buf));
                n = pread(fd, buf, 6, 4000);
                say("open.mmap_shared", "%zd \"%s\"", n, buf);
        }
        close(fd);
        /* Private read-only mapping of a file (executables). */
        fd = open("o5", O_RDONLY);
        m = mmap(NULL, 65536, PROT_READ, MAP_PRIVATE, fd, 0);
        say("open.mmap_private", "%s", m == MAP_FAILED ? ename(errno) : memcmp(m, big, 65536) == 0 ? "same" : "differs");
        if (m != MAP_FAILED)
                munmap(m, 65536);
        close(fd);
}

/* ---- rename ---- */

static int renameat2_(const char *a, const char *b, unsigned flags) {
        return (int) syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, flags);
}

static void t_rename(void) {
        int fd;

        must(mkdir("rn", 0755), "rn");
        if (chdir("rn") < 0)
                die("chdir rn");
        put_file("a", "A", 0644);
        chk("rename.file", rename("a", "b"));
        say_stat("rename.file.old", "a");
        say_content("rename.file.new", "b");
        put_file("c", "C", 0600);
        fd = open("c", O_RDONLY);
        put_file("d", "D", 0644);
        chk("rename.over_file", rename("d", "c"));
        say_content("rename.over_file.content", "c");
        say_stat("rename.over_file.stat", "c");
        say_fstat("rename.over_file.replaced_fd", fd);
        close(fd);
        chk("rename.same_name", rename("c", "c"));
        try(link("c", "c2"), "link");
        chk("rename.hardlinks_same_inode", rename("c", "c2"));
        say_stat("rename.hardlinks_same_inode.src", "c");
        say_stat("rename.hardlinks_same_inode.dst", "c2");
        mkdir("d1", 0755);
        put_file("d1/f", "F", 0644);
        chk("rename.dir", rename("d1", "d2"));
        say_content("rename.dir.child", "d2/f");
        mkdir("d3", 0755);
        chk("rename.dir_over_empty_dir", rename("d2", "d3"));
        say_content("rename.dir_over_empty_dir.child", "d3/f");
        mkdir("d4", 0755);
        put_file("d4/g", "G", 0644);
        chk("rename.dir_over_nonempty_dir", rename("d3", "d4"));
        chk("rename.dir_over_file", rename("d3", "b"));
        chk("rename.file_over_dir", rename("b", "d3"));
        chk("rename.into_own_subdir", rename("d4", "d4/sub"));
        mkdir("d4/s1", 0755);
        chk("rename.into_own_deep_subdir", rename("d4", "d4/s1/x"));
        chk("rename.enoent", rename("nope", "x"));
        chk("rename.enoent_target_dir", rename("b", "nope/x"));
        chk("rename.dot", rename("d4/.", "x"));
        chk("rename.dotdot", rename("d4/s1/..", "x"));
        chk("rename.onto_dot", rename("b", "d4/."));
        /* Directory moves keep both parents' link counts right. */
        mkdir("p1", 0755);
        mkdir("p2", 0755);
        mkdir("p1/m", 0755);
        say_nlink("rename.move_dir.p1_before", "p1");
        chk("rename.move_dir", rename("p1/m", "p2/m"));
        say_nlink("rename.move_dir.p1_after", "p1");
        say_nlink("rename.move_dir.p2_after", "p2");
        say_stat("rename.move_dir.dotdot", "p2/m/..");
        /* renameat2 flags. */
        put_file("n1", "N1", 0644);
        put_file("n2", "N2", 0644);
        chk("rename2.noreplace_exists", renameat2_("n1", "n2", RENAME_NOREPLACE));
        say_content("rename2.noreplace_exists.src", "n1");
        chk("rename2.noreplace_new", renameat2_("n1", "n3", RENAME_NOREPLACE));
        say_stat("rename2.noreplace_new.old", "n1");
        chk("rename2.exchange", renameat2_("n2", "n3", RENAME_EXCHANGE));
        say_content("rename2.exchange.n2", "n2");
        say_content("rename2.exchange.n3", "n3");
        chk("rename2.exchange_missing", renameat2_("n2", "n9", RENAME_EXCHANGE));
        mkdir("x1", 0700);
        put_file("x1/in", "IN", 0644);
        chk("rename2.exchange_file_dir", renameat2_("n2", "x1", RENAME_EXCHANGE));
        say_stat("rename2.exchange_file_dir.n2", "n2");
        say_stat("rename2.exchange_file_dir.x1", "x1");
        say_content("rename2.exchange_file_dir.child", "n2/in");
        chk("rename2.exchange_noreplace", renameat2_("n2", "x1", RENAME_EXCHANGE | RENAME_NOREPLACE));
        chk("rename2.bad_flags", renameat2_("n2", "x1", 0x80));
        put_file("w1", "W", 0644);
        chk("rename2.whiteout", renameat2_("w1", "w2", RENAME_WHITEOUT));
        say_stat("rename2.whiteout.old", "w1");
        say_content("rename2.whiteout.new", "w2");
        /* Across filesystems. */
        char other[PATH_MAX];
        snprintf(other, sizeof(other), "%s/xdev", other_dir);
        chk("rename.exdev", rename("n3", other));
        chk("link.exdev", link("n3", other));
        say_stat("rename.exdev.src", "n3");
        if (chdir("..") < 0)
                die("chdir ..");
}

/* ---- symlinks ---- */

static void t_symlink(void) {
        char buf[PATH_MAX + 8], target[PATH_MAX + 8];
        ssize_t n;
        int fd;

        put_file("sl.t", "target data", 0644);
        chk("symlink.create", symlink("sl.t", "sl1"));
        n = readlink("sl1", buf, sizeof(buf));
        say("symlink.readlink", "%zd \"%.*s\"", n, n > 0 ? (int) n : 0, buf);
        say_stat("symlink.lstat", "sl1");
        say_content("symlink.follow", "sl1");
        n = readlink("sl1", buf, 3);
        say("symlink.readlink_short_buffer", "%zd \"%.*s\"", n, n > 0 ? (int) n : 0, buf);
        chk("symlink.readlink_not_link", readlink("sl.t", buf, sizeof(buf)));
        chk("symlink.readlink_enoent", readlink("nope", buf, sizeof(buf)));
        chk("symlink.exists", symlink("x", "sl1"));
        chk("symlink.exists_file", symlink("x", "sl.t"));
        chk("symlink.dangling", symlink("does/not/exist", "sl2"));
        say_stat("symlink.dangling.lstat", "sl2");
        struct stat st;
        chk("symlink.dangling.stat", stat("sl2", &st));
        chk("symlink.dangling.open", open("sl2", O_RDONLY));
        chk("symlink.absolute", symlink("/proc/self", "sl3"));
        n = readlink("sl3", buf, sizeof(buf));
        say("symlink.absolute.readlink", "%zd \"%.*s\"", n, n > 0 ? (int) n : 0, buf);
        chk("symlink.loop_a", symlink("sl.loopb", "sl.loopa"));
        chk("symlink.loop_b", symlink("sl.loopa", "sl.loopb"));
        chk("symlink.loop.stat", stat("sl.loopa", &st));
        chk("symlink.loop.open", open("sl.loopa", O_RDONLY));
        chk("symlink.loop.creat", open("sl.loopa", O_RDWR | O_CREAT, 0644));
        chk("symlink.self", symlink("sl.self", "sl.self"));
        chk("symlink.self.stat", stat("sl.self", &st));
        chk("symlink.loop.chdir", chdir("sl.loopa"));
        /* 41 links in a chain: one more than the kernel follows. */
        for (int i = 0; i < 41; i++) {
                char from[32], to[32];
                snprintf(from, sizeof(from), "ch%d", i);
                snprintf(to, sizeof(to), i == 40 ? "sl.t" : "ch%d", i + 1);
                try(symlink(to, from), "symlink");
        }
        chk("symlink.chain40.stat", stat("ch1", &st));
        chk("symlink.chain41.stat", stat("ch0", &st));
        mkdir("sl.dir", 0755);
        put_file("sl.dir/f", "in dir", 0644);
        try(symlink("sl.dir", "sl.dlnk"), "symlink");
        say_content("symlink.dir_traverse", "sl.dlnk/f");
        chk("symlink.dir_trailing_slash_unlink", unlink("sl.dlnk/"));
        /* Target lengths: the longest allowed and one more. */
        memset(target, 'a', PATH_MAX);
        target[PATH_MAX - 1] = 0;
        chk("symlink.target_4095", symlink(target, "sl.long"));
        n = readlink("sl.long", buf, sizeof(buf));
        say("symlink.target_4095.readlink", "%zd same=%s", n, n == PATH_MAX - 1 && memcmp(buf, target, (size_t) n) == 0 ? "yes" : "no");
        say_stat("symlink.target_4095.lstat", "sl.long");
        target[PATH_MAX - 1] = 'a';
        target[PATH_MAX] = 0;
        chk("symlink.target_4096", symlink(target, "sl.long2"));
        chk("symlink.target_empty", symlink("", "sl.empty"));
        /* Through a symlink to a directory with ".." */
        mkdir("sl.dir/sub", 0755);
        try(symlink("sl.dir/sub", "sl.sub"), "symlink");
        say_content("symlink.dotdot_after_link", "sl.sub/../f");
        fd = open("sl1", O_RDONLY | O_NOFOLLOW);
        say("symlink.nofollow", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0)
                close(fd);
}

/* ---- truncate ---- */

static void t_truncate(void) {
        struct stat a, b;
        char buf[16];
        int fd;

        put_file("tr", "0123456789", 0644);
        chk("truncate.shrink", truncate("tr", 4));
        say_content("truncate.shrink.content", "tr");
        chk("truncate.grow", truncate("tr", 100000));
        say_content("truncate.grow.content", "tr");
        chk("truncate.shrink_again", truncate("tr", 2));
        chk("truncate.grow_again", truncate("tr", 6));
        say_content("truncate.regrow_zeros", "tr");
        fd = open("tr", O_RDWR);
        chk("ftruncate.grow", ftruncate(fd, 1 << 20));
        say_fstat("ftruncate.grow.stat", fd);
        chk("ftruncate.zero", ftruncate(fd, 0));
        say_fstat("ftruncate.zero.stat", fd);
        chk("ftruncate.negative", ftruncate(fd, -1));
        try(pwrite(fd, "abcdef", 6, 0), "pwrite");
        chk("ftruncate.after_write", ftruncate(fd, 3));
        memset(buf, 0, sizeof(buf));
        say("ftruncate.read_back", "%zd \"%s\"", pread(fd, buf, sizeof(buf) - 1, 0), buf);
        close(fd);
        fd = open("tr", O_RDONLY);
        chk("ftruncate.rdonly_fd", ftruncate(fd, 0));
        close(fd);
        chk("truncate.negative", truncate("tr", -1));
        chk("truncate.dir", truncate(".", 0));
        chk("truncate.enoent", truncate("nope", 0));
        chk("truncate.huge", truncate("tr", (off_t) 1 << 40));
        say_stat("truncate.after_huge.stat", "tr");
        /* mtime and ctime move on a size change. */
        struct timespec old[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
        utimensat(AT_FDCWD, "tr", old, 0);
        lstat("tr", &a);
        msleep(20); /* more than a tick of the coarse clock timestamps come from */
        try(truncate("tr", 10), "truncate");
        lstat("tr", &b);
        say("truncate.mtime_changed", "%s", b.st_mtim.tv_sec != a.st_mtim.tv_sec ? "yes" : "no");
        say("truncate.ctime_changed", "%s",
            b.st_ctim.tv_sec != a.st_ctim.tv_sec || b.st_ctim.tv_nsec != a.st_ctim.tv_nsec ? "yes" : "no");
        /* Also through an open O_TRUNC. */
        utimensat(AT_FDCWD, "tr", old, 0);
        fd = open("tr", O_WRONLY | O_TRUNC);
        close(fd);
        lstat("tr", &b);
        say("truncate.open_trunc_mtime_changed", "%s", b.st_mtim.tv_sec != 1000000000 ? "yes" : "no");
        /* Writes move mtime too. */
        utimensat(AT_FDCWD, "tr", old, 0);
        fd = open("tr", O_WRONLY);
        try(write(fd, "w", 1), "write");
        close(fd);
        lstat("tr", &b);
        say("write.mtime_changed", "%s", b.st_mtim.tv_sec != 1000000000 ? "yes" : "no");
}

/* ---- utimensat ---- */

static void say_times(const char *name, const char *path, int flags) {
        struct stat st;

        if (fstatat(AT_FDCWD, path, &st, flags) < 0)
                say(name, "%s", ename(errno));
        else
                say(name, "atime=%lld.%09ld mtime=%lld.%09ld", (long long) st.st_atim.tv_sec, st.st_atim.tv_nsec,
                    (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

static bool near_now(const struct timespec *t) {
        struct timespec now;

        clock_gettime(CLOCK_REALTIME, &now);
        return t->tv_sec > now.tv_sec - 600 && t->tv_sec <= now.tv_sec + 600;
}

static void t_utimensat(void) {
        struct timespec ts[2] = { { 1000000000, 123456789 }, { 1200000000, 500000000 } };
        struct stat st;

        put_file("ut", "u", 0644);
        chk("utimensat.explicit", utimensat(AT_FDCWD, "ut", ts, 0));
        say_times("utimensat.explicit.times", "ut", 0);
        struct timespec omit_a[2] = { { 0, UTIME_OMIT }, { 1300000000, 1 } };
        chk("utimensat.omit_atime", utimensat(AT_FDCWD, "ut", omit_a, 0));
        say_times("utimensat.omit_atime.times", "ut", 0);
        struct timespec omit_m[2] = { { 1100000000, 7 }, { 0, UTIME_OMIT } };
        chk("utimensat.omit_mtime", utimensat(AT_FDCWD, "ut", omit_m, 0));
        say_times("utimensat.omit_mtime.times", "ut", 0);
        struct timespec omit_both[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };
        chk("utimensat.omit_both", utimensat(AT_FDCWD, "ut", omit_both, 0));
        say_times("utimensat.omit_both.times", "ut", 0);
        struct timespec now_m[2] = { { 0, UTIME_OMIT }, { 0, UTIME_NOW } };
        chk("utimensat.now_mtime", utimensat(AT_FDCWD, "ut", now_m, 0));
        lstat("ut", &st);
        say("utimensat.now_mtime.atime", "%lld.%09ld", (long long) st.st_atim.tv_sec, st.st_atim.tv_nsec);
        say("utimensat.now_mtime.mtime_near_now", "%s", near_now(&st.st_mtim) ? "yes" : "no");
        chk("utimensat.null", utimensat(AT_FDCWD, "ut", NULL, 0));
        lstat("ut", &st);
        say("utimensat.null.near_now", "%s", near_now(&st.st_atim) && near_now(&st.st_mtim) ? "yes" : "no");
        struct timespec neg[2] = { { -1, 0 }, { 0, 1000000000 } };
        chk("utimensat.bad_nsec", utimensat(AT_FDCWD, "ut", neg, 0));
        struct timespec pre1970[2] = { { -86400, 0 }, { -1, 999999999 } };
        chk("utimensat.pre_1970", utimensat(AT_FDCWD, "ut", pre1970, 0));
        say_times("utimensat.pre_1970.times", "ut", 0);
        int fd = open("ut", O_RDONLY);
        chk("utimensat.futimens", futimens(fd, ts));
        say_times("utimensat.futimens.times", "ut", 0);
        close(fd);
        try(symlink("ut", "ut.lnk"), "symlink");
        utimensat(AT_FDCWD, "ut", ts, 0);
        struct timespec lts[2] = { { 1400000000, 11 }, { 1450000000, 22 } };
        chk("utimensat.symlink_nofollow", utimensat(AT_FDCWD, "ut.lnk", lts, AT_SYMLINK_NOFOLLOW));
        say_times("utimensat.symlink_nofollow.link", "ut.lnk", AT_SYMLINK_NOFOLLOW);
        say_times("utimensat.symlink_nofollow.target", "ut", 0);
        chk("utimensat.symlink_follow", utimensat(AT_FDCWD, "ut.lnk", lts, 0));
        say_times("utimensat.symlink_follow.target", "ut", 0);
        mkdir("utd", 0755);
        chk("utimensat.dir", utimensat(AT_FDCWD, "utd", ts, 0));
        say_times("utimensat.dir.times", "utd", 0);
        chk("utimensat.enoent", utimensat(AT_FDCWD, "nope", ts, 0));
        /* Directory mtime moves when an entry is added. */
        utimensat(AT_FDCWD, "utd", ts, 0);
        put_file("utd/new", "n", 0644);
        lstat("utd", &st);
        say("utimensat.dir_mtime_after_create", "%s", st.st_mtim.tv_sec != ts[1].tv_sec ? "changed" : "same");
}

static void u_utimensat(void *ud) {
        struct timespec ts[2] = { { 1000000000, 0 }, { 1000000000, 0 } };

        (void) ud;
        /* ut.pub: root's, mode 0666; ut.priv: root's, mode 0644. */
        chk("utimensat.user.null_writable", utimensat(AT_FDCWD, "ut.pub", NULL, 0));
        chk("utimensat.user.explicit_not_owner", utimensat(AT_FDCWD, "ut.pub", ts, 0));
        chk("utimensat.user.null_not_writable", utimensat(AT_FDCWD, "ut.priv", NULL, 0));
        struct timespec now[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
        chk("utimensat.user.now_writable", utimensat(AT_FDCWD, "ut.pub", now, 0));
}

/* ---- xattrs ---- */

static void say_list(const char *name, const char *path, const char *prefix) {
        char buf[4096], *names[64];
        ssize_t n = llistxattr(path, buf, sizeof(buf));
        size_t k = 0;
        char out[1024] = "";

        if (n < 0) {
                say(name, "%s", ename(errno));
                return;
        }
        for (char *p = buf; p < buf + n && k < 64; p += strlen(p) + 1)
                if (strncmp(p, prefix, strlen(prefix)) == 0)
                        names[k++] = p;
        /* Sorted: list order is the filesystem's. */
        for (size_t i = 0; i < k; i++)
                for (size_t j = i + 1; j < k; j++)
                        if (strcmp(names[j], names[i]) < 0) {
                                char *t = names[i];
                                names[i] = names[j];
                                names[j] = t;
                        }
        for (size_t i = 0; i < k; i++) {
                strncat(out, names[i], sizeof(out) - strlen(out) - 2);
                strncat(out, " ", sizeof(out) - strlen(out) - 1);
        }
        say(name, "[%s]", out);
}

static void t_xattr_ns(const char *ns) {
        char name[96], attr[64], buf[8192];
        ssize_t n;

#define N(s) (snprintf(name, sizeof(name), "xattr.%s%s", ns, s), name)
#define A(s) (snprintf(attr, sizeof(attr), "%s%s", ns, s), attr)
        put_file("xa", "x", 0644);
        n = getxattr("xa", A("missing"), buf, sizeof(buf));
        say(N("get_missing"), "%s", n < 0 ? ename(errno) : "found");
        chk(N("set"), setxattr("xa", A("one"), "hello", 5, 0));
        n = getxattr("xa", A("one"), NULL, 0);
        say(N("size_probe"), "%s", n < 0 ? ename(errno) : (snprintf(buf, 32, "%zd", n), buf));
        memset(buf, 0, sizeof(buf));
        n = getxattr("xa", A("one"), buf, 5);
        say(N("get_exact"), "%zd \"%s\"", n, n > 0 ? buf : "");
        n = getxattr("xa", A("one"), buf, 2);
        say(N("get_small"), "%s", n < 0 ? ename(errno) : "ok");
        chk(N("create_exists"), setxattr("xa", A("one"), "x", 1, XATTR_CREATE));
        chk(N("replace_missing"), setxattr("xa", A("two"), "x", 1, XATTR_REPLACE));
        chk(N("replace"), setxattr("xa", A("one"), "bye", 3, XATTR_REPLACE));
        memset(buf, 0, sizeof(buf));
        n = getxattr("xa", A("one"), buf, sizeof(buf));
        say(N("replace.value"), "%zd \"%s\"", n, n > 0 ? buf : "");
        chk(N("create_new"), setxattr("xa", A("two"), "22", 2, XATTR_CREATE));
        chk(N("empty_value"), setxattr("xa", A("empty"), "", 0, 0));
        n = getxattr("xa", A("empty"), buf, sizeof(buf));
        say(N("empty_value.get"), "%s", n < 0 ? ename(errno) : (snprintf(buf, 32, "%zd", n), buf));
        say_list(N("list"), "xa", ns);
        n = listxattr("xa", NULL, 0);
        say(N("list_size_probe"), "%s", n < 0 ? ename(errno) : n > 0 ? "positive" : "zero");
        n = listxattr("xa", buf, 3);
        say(N("list_small"), "%s", n < 0 ? ename(errno) : "ok");
        chk(N("remove"), removexattr("xa", A("two")));
        chk(N("remove_again"), removexattr("xa", A("two")));
        say_list(N("list_after_remove"), "xa", ns);
        pattern(buf, 4000, 3);
        chk(N("value_4000"), setxattr("xa", A("big"), buf, 4000, 0));
        static char back[70000];
        n = getxattr("xa", A("big"), back, sizeof(back));
        say(N("value_4000.get"), "%zd same=%s", n, n == 4000 && memcmp(back, buf, 4000) == 0 ? "yes" : "no");
        chk(N("value_too_big"), setxattr("xa", A("huge"), back, 65537, 0));
        char longname[300];
        snprintf(longname, sizeof(longname), "%s%0260d", ns, 0);
        chk(N("name_too_long"), setxattr("xa", longname, "x", 1, 0));
        chk(N("name_empty_suffix"), setxattr("xa", ns, "x", 1, 0));
        chk(N("bad_flags"), setxattr("xa", A("f"), "x", 1, 4));
        int fd = open("xa", O_RDONLY);
        chk(N("fset"), fsetxattr(fd, A("f"), "fv", 2, 0));
        n = fgetxattr(fd, A("f"), buf, sizeof(buf));
        say(N("fget"), "%zd", n);
        chk(N("fremove"), fremovexattr(fd, A("f")));
        close(fd);
        mkdir("xad", 0755);
        chk(N("dir.set"), setxattr("xad", A("d"), "dv", 2, 0));
        n = getxattr("xad", A("d"), buf, sizeof(buf));
        say(N("dir.get"), "%zd", n);
        try(symlink("xa", "xa.lnk"), "symlink");
        chk(N("symlink.lset"), lsetxattr("xa.lnk", A("l"), "lv", 2, 0));
        n = lgetxattr("xa.lnk", A("l"), buf, sizeof(buf));
        say(N("symlink.lget"), "%s", n < 0 ? ename(errno) : "found");
        chk(N("symlink.set_follows"), setxattr("xa.lnk", A("t"), "tv", 2, 0));
        n = getxattr("xa", A("t"), buf, sizeof(buf));
        say(N("symlink.set_follows.target"), "%s", n < 0 ? ename(errno) : "found");
        mkfifo("xa.fifo", 0644);
        chk(N("fifo.set"), lsetxattr("xa.fifo", A("p"), "pv", 2, 0));
        chk(N("enoent"), setxattr("nope", A("x"), "x", 1, 0));
        unlink("xa");
        unlink("xa.lnk");
        unlink("xa.fifo");
        rmdir("xad");
#undef N
#undef A
}

static void t_xattr(void) {
        char buf[64];

        t_xattr_ns("trusted.");
        t_xattr_ns("user.");
        put_file("xa2", "x", 0644);
        chk("xattr.unknown_namespace", setxattr("xa2", "bogus.x", "x", 1, 0));
        ssize_t n = getxattr("xa2", "bogus.x", buf, sizeof(buf));
        say("xattr.unknown_namespace.get", "%s", n < 0 ? ename(errno) : "found");
}

static void u_xattr(void *ud) {
        char buf[64];

        (void) ud;
        /* xa.user: root's, 0644, with trusted.t set. */
        chk("xattr.user.trusted_set", setxattr("xa.user", "trusted.u", "x", 1, 0));
        ssize_t n = getxattr("xa.user", "trusted.t", buf, sizeof(buf));
        say("xattr.user.trusted_get", "%s", n < 0 ? ename(errno) : "found");
        chk("xattr.user.user_set_not_writable", setxattr("xa.user", "user.u", "x", 1, 0));
}

/* ---- fallocate / lseek ---- */

static void t_fallocate(void) {
        static char buf[65536];
        int fd = open("fa", O_CREAT | O_TRUNC | O_RDWR, 0644);
        ssize_t n;

        chk("fallocate.plain", fallocate(fd, 0, 0, 8192));
        say_fstat("fallocate.plain.stat", fd);
        n = pread(fd, buf, 8192, 0);
        say("fallocate.plain.zeros", "%zd zero=%s", n, n == 8192 && buf[0] == 0 && memcmp(buf, buf + 1, 8191) == 0 ? "yes" : "no");
        chk("fallocate.keep_size", fallocate(fd, FALLOC_FL_KEEP_SIZE, 8192, 65536));
        say_fstat("fallocate.keep_size.stat", fd);
        chk("fallocate.grow_offset", fallocate(fd, 0, 100000, 5000));
        say_fstat("fallocate.grow_offset.stat", fd);
        pattern(buf, sizeof(buf), 9);
        try(pwrite(fd, buf, 65536, 0), "pwrite");
        chk("fallocate.punch_hole", fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8192, 16384));
        say_fstat("fallocate.punch_hole.stat", fd);
        memset(buf, 1, sizeof(buf));
        n = pread(fd, buf, 16384, 8192);
        say("fallocate.punch_hole.zeros", "%zd zero=%s", n, buf[0] == 0 && memcmp(buf, buf + 1, 16383) == 0 ? "yes" : "no");
        static char full[65536];
        pattern(full, sizeof(full), 9);
        n = pread(fd, buf, 4096, 4096);
        say("fallocate.punch_hole.before_kept", "%zd same=%s", n, memcmp(buf, full + 4096, 4096) == 0 ? "yes" : "no");
        n = pread(fd, buf, 4096, 8192 + 16384);
        say("fallocate.punch_hole.after_kept", "%zd same=%s", n, memcmp(buf, full + 8192 + 16384, 4096) == 0 ? "yes" : "no");
        chk("fallocate.punch_no_keep_size", fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096));
        chk("fallocate.zero_len", fallocate(fd, 0, 0, 0));
        chk("fallocate.negative_off", fallocate(fd, 0, -1, 10));
        chk("fallocate.bad_mode", fallocate(fd, 0x4000, 0, 10));
        close(fd);
        fd = open("fa", O_RDONLY);
        chk("fallocate.rdonly_fd", fallocate(fd, 0, 0, 10));
        close(fd);
        fd = open("fa", O_WRONLY | O_APPEND);
        chk("fallocate.append_fd_punch", fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
        close(fd);
        fd = open(".", O_RDONLY);
        chk("fallocate.dir", fallocate(fd, 0, 0, 10));
        close(fd);
        fd = open("ff", O_RDWR);
        chk("fallocate.fifo", fallocate(fd, 0, 0, 10));
        close(fd);
}

static void t_lseek(void) {
        static char buf[4096];
        int fd = open("sk", O_CREAT | O_TRUNC | O_RDWR, 0644);
        off_t r;

#define SEEK(name, off, wh) (r = lseek(fd, off, wh), say(name, "%s", r < 0 ? ename(errno) : (snprintf(buf, 32, "%lld", (long long) r), buf)))
        memset(buf, 'd', sizeof(buf));
        try(pwrite(fd, buf, 4096, 0), "pwrite");
        try(pwrite(fd, buf, 4096, 1 << 20), "pwrite");
        fsync(fd);
        SEEK("lseek.data_0", 0, SEEK_DATA);
        SEEK("lseek.hole_0", 0, SEEK_HOLE);
        SEEK("lseek.data_in_hole", 8192, SEEK_DATA);
        SEEK("lseek.hole_in_second", (1 << 20) + 100, SEEK_HOLE);
        SEEK("lseek.data_at_eof", (1 << 20) + 4096, SEEK_DATA);
        SEEK("lseek.hole_at_eof", (1 << 20) + 4096, SEEK_HOLE);
        SEEK("lseek.data_past_eof", 5 << 20, SEEK_DATA);
        SEEK("lseek.hole_past_eof", 5 << 20, SEEK_HOLE);
        SEEK("lseek.data_negative", -1, SEEK_DATA);
        SEEK("lseek.end", -10, SEEK_END);
        SEEK("lseek.cur", 5, SEEK_CUR);
        SEEK("lseek.set_negative", -5, SEEK_SET);
        SEEK("lseek.set_far", (off_t) 1 << 40, SEEK_SET);
        SEEK("lseek.bad_whence", 0, 17);
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096);
        SEEK("lseek.after_punch.data_0", 0, SEEK_DATA);
        SEEK("lseek.after_punch.hole_0", 0, SEEK_HOLE);
        close(fd);
        fd = open("sk0", O_CREAT | O_TRUNC | O_RDWR, 0644);
        SEEK("lseek.empty.data", 0, SEEK_DATA);
        SEEK("lseek.empty.hole", 0, SEEK_HOLE);
        close(fd);
#undef SEEK
}

/* ---- O_TMPFILE ---- */

static void t_tmpfile(void) {
        char path[64];
        int fd = open(".", O_TMPFILE | O_RDWR, 0640);
        ssize_t n;

        say("tmpfile.open", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0) {
                n = write(fd, "tmpdata", 7);
                say("tmpfile.write", "%zd", n);
                say_fstat("tmpfile.stat", fd);
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                chk("tmpfile.linkat", linkat(AT_FDCWD, path, AT_FDCWD, "tmpf", AT_SYMLINK_FOLLOW));
                say_stat("tmpfile.linked.stat", "tmpf");
                say_content("tmpfile.linked.content", "tmpf");
                say_fstat("tmpfile.fd_after_link", fd);
                close(fd);
        }
        umask(027);
        fd = open(".", O_TMPFILE | O_WRONLY, 0666);
        say("tmpfile.umask", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0) {
                say_fstat("tmpfile.umask.stat", fd);
                close(fd);
        }
        umask(022);
        fd = open(".", O_TMPFILE | O_RDWR | O_EXCL, 0600);
        say("tmpfile.excl", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0) {
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                chk("tmpfile.excl.linkat", linkat(AT_FDCWD, path, AT_FDCWD, "tmpf2", AT_SYMLINK_FOLLOW));
                close(fd);
        }
        chk("tmpfile.rdonly", open(".", O_TMPFILE | O_RDONLY, 0600));
        chk("tmpfile.on_file", open("tmpf", O_TMPFILE | O_RDWR, 0600));
        chk("tmpfile.enoent", open("nope", O_TMPFILE | O_RDWR, 0600));
}

/* ---- readdir ---- */

static int cmpstr(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void t_readdir(void) {
        char *names[600];
        size_t k = 0;
        char line[8192] = "";
        DIR *d;
        struct dirent *de;

        mkdir("rd", 0755);
        for (int i = 0; i < 300; i++) {
                char p[64];
                snprintf(p, sizeof(p), "rd/entry-with-a-longer-name-%03d", i);
                put_file(p, "", 0644);
        }
        mkdir("rd/sub", 0755);
        try(symlink("x", "rd/lnk"), "symlink");
        mkfifo("rd/fifo", 0644);
        d = opendir("rd");
        while (d && (de = readdir(d)) && k < 600) {
                char *s;
                if (asprintf(&s, "%s/%u", de->d_name, de->d_type) < 0)
                        die("asprintf");
                names[k++] = s;
        }
        say("readdir.count", "%zu", k);
        qsort(names, k, sizeof(names[0]), cmpstr);
        for (size_t i = 0; i < k; i++)
                if (strncmp(names[i], "entry-", 6) != 0) {
                        strncat(line, names[i], sizeof(line) - strlen(line) - 2);
                        strncat(line, " ", sizeof(line) - strlen(line) - 1);
                }
        say("readdir.special_entries", "%s", line);
        uint32_t h = 0;
        for (size_t i = 0; i < k; i++) {
                h = h * 31 + fnv(names[i], strlen(names[i]));
                free(names[i]);
        }
        say("readdir.all_names", "%08x", h);
        /* Removing entries while listing: each remaining entry is seen once. */
        rewinddir(d);
        int seen = 0, removed = 0;
        while ((de = readdir(d))) {
                if (strncmp(de->d_name, "entry-", 6) == 0) {
                        seen++;
                        char p[300];
                        snprintf(p, sizeof(p), "rd/%s", de->d_name);
                        if (unlink(p) == 0)
                                removed++;
                }
        }
        say("readdir.unlink_while_listing", "seen=%d removed=%d", seen, removed);
        closedir(d);
        d = opendir("rd");
        k = 0;
        while (d && (de = readdir(d)))
                k++;
        say("readdir.after_unlink.count", "%zu", k);
        closedir(d);
        chk("readdir.opendir_file", opendir("cm") ? 0 : -1);
}

/* ---- names and error codes ---- */

static void t_names(void) {
        char n255[300], n256[300], deep[PATH_MAX + 64];
        struct stat st;

        memset(n255, 'n', 255);
        n255[255] = 0;
        memset(n256, 'n', 256);
        n256[256] = 0;
        chk("name.255.create", put_file(n255, "x", 0644));
        say_stat("name.255.stat", n255);
        chk("name.255.unlink", unlink(n255));
        chk("name.256.create", open(n256, O_CREAT | O_WRONLY, 0644));
        chk("name.256.stat", stat(n256, &st));
        chk("name.256.mkdir", mkdir(n256, 0755));
        chk("name.256.symlink", symlink("x", n256));
        put_file("nm", "x", 0644);
        chk("name.256.rename", rename("nm", n256));
        chk("name.256.link", link("nm", n256));
        chk("name.256.mknod", mknod(n256, S_IFIFO | 0644, 0));
        chk("name.256.setxattr_path", setxattr(n256, "trusted.x", "x", 1, 0));
        /* A path longer than PATH_MAX. */
        deep[0] = 0;
        while (strlen(deep) < PATH_MAX + 10)
                strcat(deep, "./");
        strcat(deep, "nm");
        chk("name.path_too_long", stat(deep, &st));
        chk("name.empty", stat("", &st));
        chk("name.odd_bytes", put_file("odd \001\t\\*?\"<>|\377 name", "o", 0644));
        say_content("name.odd_bytes.content", "odd \001\t\\*?\"<>|\377 name");
        chk("name.utf8", put_file("nämé-日本", "u", 0644));
        say_stat("name.utf8.stat", "nämé-日本");
        chk("name.dot_file", put_file(".hidden", "h", 0644));
        say_stat("name.dot_file.stat", ".hidden");
        chk("name.dotdot_prefix", put_file("..x", "h", 0644));
        say_stat("name.dotdot_prefix.stat", "..x");
        /* ".." at the test dir's level leads to its parent, which is a directory. */
        say_stat("name.dotdot_is_dir", "..");
        chk("error.enotdir_path", stat("nm/x", &st));
        chk("error.enotdir_trailing", stat("nm/", &st));
        chk("error.eisdir_write", open(".", O_WRONLY));
        chk("error.enoent_empty_parent", open("nope/nope", O_RDONLY));
        char other[PATH_MAX];
        snprintf(other, sizeof(other), "%s/xdev2", other_dir);
        put_file(other, "o", 0644);
        chk("error.exdev_rename_in", rename(other, "xdev-in"));
        chk("error.exdev_link_in", link(other, "xdev-in"));
        unlink(other);
}

/* ---- permissions as an unprivileged user ---- */

static void u_perm(void *ud) {
        struct stat st;
        int fd;

        (void) ud;
        chk("perm.user.stat_in_0700_dir", stat("priv/f", &st));
        chk("perm.user.open_in_0700_dir", open("priv/f", O_RDONLY));
        chk("perm.user.create_in_0700_dir", open("priv/new", O_CREAT | O_WRONLY, 0644));
        chk("perm.user.opendir_0700", opendir("priv") ? 0 : -1);
        chk("perm.user.chdir_0700", chdir("priv"));
        chk("perm.user.chmod_roots_file", chmod("rootf", 0777));
        chk("perm.user.chown_roots_file", chown("rootf", UID_A, GID_A));
        chk("perm.user.chown_own_file_to_root", chown("pub/mine", 0, 0));
        chk("perm.user.write_roots_0644", open("rootf", O_WRONLY));
        chk("perm.user.read_roots_0644", open("rootf", O_RDONLY) < 0 ? -1 : 0);
        chk("perm.user.read_roots_0600", open("rootf.600", O_RDONLY));
        chk("perm.user.truncate_roots", truncate("rootf", 0));
        chk("perm.user.unlink_in_roots_dir", unlink("rootf"));
        chk("perm.user.mkdir_in_roots_dir", mkdir("userdir", 0755));
        chk("perm.user.rename_in_roots_dir", rename("rootf", "rootf2"));
        chk("perm.user.link_roots_file", link("rootf", "pub/hl"));
        chk("perm.user.access_r", access("rootf", R_OK));
        chk("perm.user.access_w", access("rootf", W_OK));
        chk("perm.user.access_x_dir", access("priv", X_OK));
        chk("perm.user.exec_noexec", execl("rootf", "rootf", (char *) NULL));
        /* Own files in a world-writable directory. */
        fd = open("pub/u1", O_CREAT | O_EXCL | O_WRONLY, 0640);
        say("perm.user.create_in_pub", "%s", fd < 0 ? ename(errno) : "ok");
        close(fd);
        say_stat("perm.user.create_in_pub.stat", "pub/u1");
        chk("perm.user.mkdir_in_pub", mkdir("pub/ud", 0750));
        say_stat("perm.user.mkdir_in_pub.stat", "pub/ud");
        chk("perm.user.chmod_own", chmod("pub/u1", 0604));
        say_mode("perm.user.chmod_own.mode", "pub/u1");
        chk("perm.user.chgrp_own_not_member", chown("pub/u1", (uid_t) -1, 4242));
        chk("perm.user.chmod_sgid_not_member", chmod("pub/mine.g", 02755));
        say_mode("perm.user.chmod_sgid_not_member.mode", "pub/mine.g");
        /* Set-gid directory: the group is inherited, and so is the set-gid bit on subdirectories. */
        put_file("sgid/uf", "x", 0644);
        say_stat("perm.user.sgid_dir.file", "sgid/uf");
        mkdir("sgid/ud", 0755);
        say_stat("perm.user.sgid_dir.subdir", "sgid/ud");
        /* Writing clears the set-uid bit of a file the user does not own but may write. */
        fd = open("pub/suid", O_WRONLY);
        say("perm.user.write_suid.open", "%s", fd < 0 ? ename(errno) : "ok");
        if (fd >= 0) {
                say("perm.user.write_suid.write", "%zd", write(fd, "w", 1));
                close(fd);
        }
        say_mode("perm.user.write_suid.mode", "pub/suid");
        chk("perm.user.truncate_sgid", truncate("pub/sgid", 1));
        say_mode("perm.user.truncate_sgid.mode", "pub/sgid");
        /* Sticky directory. */
        fd = open("sticky/a-file", O_CREAT | O_WRONLY, 0666);
        say("perm.user.sticky.create", "%s", fd < 0 ? ename(errno) : "ok");
        close(fd);
        chk("perm.user.sticky.unlink_roots", unlink("sticky/root-file"));
        chk("perm.user.sticky.rename_roots", rename("sticky/root-file", "sticky/x"));
        chk("perm.user.sticky.rename_over_roots", rename("sticky/a-file", "sticky/root-file"));
        chk("perm.user.sticky.write_roots_0666", open("sticky/root-file", O_WRONLY) < 0 ? -1 : 0);
        chk("perm.user.mknod_fifo_pub", mknod("pub/uf", S_IFIFO | 0600, 0));
        chk("perm.user.mknod_chr", mknod("pub/uc", S_IFCHR | 0600, makedev(1, 3)));
        chk("perm.user.setxattr_trusted", setxattr("pub/u1", "trusted.x", "x", 1, 0));
        chk("perm.user.utimensat_roots_dir", utimensat(AT_FDCWD, "priv", NULL, 0));
}

static void u_perm_b(void *ud) {
        (void) ud;
        /* uid 1001 against uid 1000's files in the sticky directory. */
        chk("perm.user_b.sticky.unlink_others", unlink("sticky/a-file"));
        chk("perm.user_b.sticky.rename_others", rename("sticky/a-file", "sticky/b"));
        int fd = open("sticky/b-file", O_CREAT | O_WRONLY, 0644);
        say("perm.user_b.sticky.create", "%s", fd < 0 ? ename(errno) : "ok");
        close(fd);
        chk("perm.user_b.sticky.unlink_own", unlink("sticky/b-file"));
        chk("perm.user_b.read_others_0640", open("pub/u1", O_RDONLY));
        chk("perm.user_b.group_read", open("pub/grp", O_RDONLY) < 0 ? -1 : 0);
        chk("perm.user_b.group_write_denied", open("pub/grp", O_WRONLY));
        chk("perm.user_b.others_dir_0750", open("pub/ud/x", O_CREAT | O_WRONLY, 0644));
}

static void u_perm_a_again(void *ud) {
        (void) ud;
        chk("perm.user.sticky.unlink_own", unlink("sticky/a-file"));
}

static void t_perm(void) {
        mkdir("priv", 0700);
        put_file("priv/f", "secret", 0644);
        put_file("rootf", "root", 0644);
        put_file("rootf.600", "root", 0600);
        mkdir("pub", 0777);
        chmod("pub", 0777);
        put_file("pub/mine", "m", 0644);
        try(chown("pub/mine", UID_A, GID_A), "chown");
        put_file("pub/mine.g", "m", 0755);
        try(chown("pub/mine.g", UID_A, 4242), "chown");
        put_file("pub/suid", "#!/bin/sh\n", 0755);
        chmod("pub/suid", 06777);
        put_file("pub/sgid", "#!/bin/sh\n", 0755);
        chmod("pub/sgid", 02777);
        put_file("pub/grp", "g", 0640);
        try(chown("pub/grp", 0, GID_B), "chown");
        mkdir("sgid", 0777);
        try(chown("sgid", 0, 2000), "chown");
        chmod("sgid", 02777);
        say_mode("perm.setup.sgid_dir", "sgid");
        mkdir("sticky", 0777);
        chmod("sticky", 01777);
        put_file("sticky/root-file", "r", 0666);
        chmod("sticky/root-file", 0666);
        put_file("ut.pub", "u", 0666);
        chmod("ut.pub", 0666);
        put_file("ut.priv", "u", 0644);
        put_file("xa.user", "x", 0644);
        setxattr("xa.user", "trusted.t", "v", 1, 0);
        as_user(UID_A, GID_A, u_perm, NULL);
        as_user(UID_B, GID_B, u_perm_b, NULL);
        as_user(UID_A, GID_A, u_perm_a_again, NULL);
        as_user(UID_A, GID_A, u_utimensat, NULL);
        as_user(UID_A, GID_A, u_xattr, NULL);
        as_user(UID_A, GID_A, u_mknod, NULL);
        /* Root's view afterwards: ownership the users left behind. */
        say_stat("perm.after.pub_u1", "pub/u1");
        say_stat("perm.after.rootf", "rootf");
}

/* ---- locks ---- */

typedef struct LockArg {
        int type;
        off_t start, len;
        bool flock_lock;
        int flock_op;
        bool interruptible;
} LockArg;

static void on_alarm(int sig) {
        (void) sig;
}

static const char *ltype(short t) {
        return t == F_RDLCK ? "rd" : t == F_WRLCK ? "wr" : t == F_UNLCK ? "un" : "?";
}

/* Child: tells the parent it is about to block, takes a lock (blocking), reports, holds it a while. */
static void c_blocking(int wfd, void *ud) {
        LockArg *a = ud;
        char msg[PROBE_MSG];
        int fd = open("lk", O_RDWR), r;

        if (a->interruptible) {
                struct sigaction sa = { .sa_handler = on_alarm };
                sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART: the wait ends with EINTR */
        }
        send_msg(wfd, "waiting");
        if (a->flock_lock) {
                r = flock(fd, a->flock_op);
        } else {
                struct flock fl = { .l_type = (short) a->type, .l_whence = SEEK_SET, .l_start = a->start, .l_len = a->len };
                r = fcntl(fd, F_SETLKW, &fl);
        }
        snprintf(msg, sizeof(msg), "acquired %s", r < 0 ? ename(errno) : "ok");
        send_msg(wfd, msg);
        /* Hold the lock until the parent closes its end of the pipe (POLLERR on our end). */
        struct pollfd pfd = { .fd = wfd, .events = 0 };
        poll(&pfd, 1, WAIT_LONG_MS);
        close(fd);
}

/* Child: I/O on unrelated files while another child waits for a lock. */
static void c_other_io(int wfd, void *ud) {
        static char buf[256 << 10], back[256 << 10];
        int fd;
        bool ok = true;

        (void) ud;
        pattern(buf, sizeof(buf), 11);
        fd = open("io-other", O_CREAT | O_TRUNC | O_RDWR, 0644);
        ok = ok && fd >= 0 && write(fd, buf, sizeof(buf)) == (ssize_t) sizeof(buf);
        ok = ok && fsync(fd) == 0;
        ok = ok && pread(fd, back, sizeof(back), 0) == (ssize_t) sizeof(back) && memcmp(buf, back, sizeof(buf)) == 0;
        close(fd);
        ok = ok && mkdir("io-dir", 0755) == 0 && rename("io-other", "io-dir/f") == 0;
        ok = ok && unlink("io-dir/f") == 0 && rmdir("io-dir") == 0;
        /* A lock on another file is not held up either. */
        fd = open("lk-other", O_CREAT | O_RDWR, 0644);
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
        ok = ok && fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0;
        close(fd);
        send_msg(wfd, ok ? "io ok" : "io failed");
}

/* Child: non-blocking probes against the parent's locks. */
static void c_probe_posix(void *ud) {
        const char *pfx = ud;
        char name[96];
        int fd = open("lk", O_RDWR);
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 10 };

#define NM(s) (snprintf(name, sizeof(name), "%s%s", pfx, s), name)
        chk(NM("setlk_conflict"), fcntl(fd, F_SETLK, &fl));
        fl = (struct flock) { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 10 };
        if (fcntl(fd, F_GETLK, &fl) < 0) {
                say(NM("getlk"), "%s", ename(errno));
        } else {
                say(NM("getlk"), "type=%s start=%lld len=%lld", ltype(fl.l_type), (long long) fl.l_start,
                    (long long) fl.l_len);
                say(NM("getlk_pid"), "%s", fl.l_type == F_UNLCK ? "-" : fl.l_pid == getppid() ? "holder" :
                                           fl.l_pid == 0 ? "0" : "other");
        }
        fl = (struct flock) { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
        chk(NM("setlk_read_vs_write"), fcntl(fd, F_SETLK, &fl));
        fl = (struct flock) { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 200, .l_len = 10 };
        chk(NM("setlk_disjoint"), fcntl(fd, F_SETLK, &fl));
        fl = (struct flock) { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 300, .l_len = 0 };
        if (fcntl(fd, F_GETLK, &fl) < 0)
                say(NM("getlk_to_eof"), "%s", ename(errno));
        else
                say(NM("getlk_to_eof"), "type=%s start=%lld len=%lld", ltype(fl.l_type), (long long) fl.l_start,
                    (long long) fl.l_len);
        close(fd);
#undef NM
}

/* Child: what a whole-file write lock (or, for names ending in "tail", one from byte 150) meets. */
static void c_probe_free(void *ud) {
        const char *name = ud;
        int fd = open("lk", O_RDWR);
        size_t len = strlen(name);
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };

        if (len > 4 && strcmp(name + len - 4, "tail") == 0)
                fl.l_start = 150;
        if (fcntl(fd, F_GETLK, &fl) < 0)
                say(name, "%s", ename(errno));
        else
                say(name, "type=%s start=%lld len=%lld", ltype(fl.l_type), (long long) fl.l_start, (long long) fl.l_len);
        close(fd);
}

static void c_probe_split(void *ud) {
        int fd = open("lk", O_RDWR);
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 40, .l_len = 20 };

        (void) ud;
        fcntl(fd, F_GETLK, &fl);
        say("lock.posix.split.gap", "type=%s", ltype(fl.l_type));
        fl = (struct flock) { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 50 };
        fcntl(fd, F_GETLK, &fl);
        say("lock.posix.split.left", "type=%s start=%lld len=%lld", ltype(fl.l_type), (long long) fl.l_start, (long long) fl.l_len);
        fl = (struct flock) { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 55, .l_len = 0 };
        fcntl(fd, F_GETLK, &fl);
        say("lock.posix.split.right", "type=%s start=%lld len=%lld", ltype(fl.l_type), (long long) fl.l_start, (long long) fl.l_len);
        fl = (struct flock) { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
        fcntl(fd, F_GETLK, &fl);
        say("lock.posix.split.read_probe", "type=%s", ltype(fl.l_type));
        close(fd);
}

static void c_flock_probe(void *ud) {
        const char *pfx = ud;
        char name[96];
        int fd = open("lk", O_RDWR);

        snprintf(name, sizeof(name), "%sex_nb", pfx);
        chk(name, flock(fd, LOCK_EX | LOCK_NB));
        snprintf(name, sizeof(name), "%ssh_nb", pfx);
        chk(name, flock(fd, LOCK_SH | LOCK_NB));
        close(fd);
}

static void c_posix_vs_flock(void *ud) {
        int fd = open("lk", O_RDWR);
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };

        (void) ud;
        chk("lock.flock_vs_posix.independent", fcntl(fd, F_SETLK, &fl));
        close(fd);
}

/* Blocking wait: child waits, another child does I/O meanwhile, the parent then releases. */
static void blocking_round(const char *pfx, LockArg *arg, int hold_fd, bool flock_hold) {
        char name[96], msg[PROBE_MSG];
        int bfd, ifd, r;
        pid_t b, io;

#define NM(s) (snprintf(name, sizeof(name), "%s%s", pfx, s), name)
        b = spawn(c_blocking, arg, &bfd);
        r = recv_msg(bfd, msg, WAIT_LONG_MS);
        say(NM("waiter_started"), "%s", r < 0 ? ename(-r) : msg);
        say(NM("waiter_sleeps"), "%s", wait_sleeping(b) ? "yes" : "no");
        msleep(300);
        r = recv_msg(bfd, msg, 0);
        say(NM("blocked_while_held"), "%s", r == -ETIMEDOUT ? "yes" : r < 0 ? ename(-r) : msg);
        /* Other I/O in the same filesystem completes while the waiter is blocked. */
        long long t0 = now_ms();
        io = spawn(c_other_io, NULL, &ifd);
        r = recv_msg(ifd, msg, WAIT_LONG_MS);
        say(NM("other_io_meanwhile"), "%s", r < 0 ? ename(-r) : msg);
        (void) t0;
        reap(io);
        close(ifd);
        r = recv_msg(bfd, msg, 0);
        say(NM("still_blocked_after_io"), "%s", r == -ETIMEDOUT ? "yes" : r < 0 ? ename(-r) : msg);
        if (flock_hold) {
                chk(NM("release"), flock(hold_fd, LOCK_UN));
        } else {
                struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
                chk(NM("release"), fcntl(hold_fd, F_SETLK, &fl));
        }
        r = recv_msg(bfd, msg, WAIT_LONG_MS);
        say(NM("acquired_after_release"), "%s", r < 0 ? ename(-r) : msg);
        /* While the waiter holds it now, we cannot take it. */
        if (flock_hold) {
                int fd2 = open("lk", O_RDWR);
                chk(NM("parent_blocked_out"), flock(fd2, LOCK_EX | LOCK_NB));
                close(fd2);
        } else {
                struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };
                chk(NM("parent_blocked_out"), fcntl(hold_fd, F_SETLK, &fl));
        }
        close(bfd);
        reap(b);
#undef NM
}

static void t_locks(void) {
        int fd, fd2;
        struct flock fl;
        char msg[PROBE_MSG];

        put_file("lk", "lock file with some bytes", 0644);
        fd = open("lk", O_RDWR);
        fl = (struct flock) { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };
        chk("lock.posix.setlk", fcntl(fd, F_SETLK, &fl));
        fl = (struct flock) { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };
        fcntl(fd, F_GETLK, &fl);
        say("lock.posix.getlk_own", "type=%s", ltype(fl.l_type));
        as_user(0, 0, c_probe_posix, "lock.posix.probe.");
        /* The child's locks went away with it. */
        as_user(0, 0, c_probe_free, "lock.posix.child_exit_released_tail");
        /* Split: unlock the middle, downgrade the rest to read. */
        fl = (struct flock) { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 40, .l_len = 15 };
        chk("lock.posix.unlock_middle", fcntl(fd, F_SETLK, &fl));
        as_user(0, 0, c_probe_split, NULL);
        fl = (struct flock) { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };
        chk("lock.posix.downgrade", fcntl(fd, F_SETLK, &fl));
        as_user(0, 0, c_probe_free, "lock.posix.after_downgrade");
        fl = (struct flock) { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };
        chk("lock.posix.upgrade", fcntl(fd, F_SETLK, &fl));
        /* Blocking F_SETLKW between two processes while a third does I/O. */
        LockArg la = { .type = F_WRLCK, .start = 0, .len = 100 };
        blocking_round("lock.posix.setlkw.", &la, fd, false);
        /* The waiter took and dropped it; take it again for the interrupt test. */
        fl = (struct flock) { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };
        chk("lock.posix.retake", fcntl(fd, F_SETLK, &fl));
        /* A signal ends a blocked F_SETLKW with EINTR (FUSE INTERRUPT) and no lock is granted later. */
        la.interruptible = true;
        int bfd;
        pid_t b = spawn(c_blocking, &la, &bfd);
        recv_msg(bfd, msg, WAIT_LONG_MS);
        say("lock.posix.interrupt.waiter_sleeps", "%s", wait_sleeping(b) ? "yes" : "no");
        msleep(300);
        kill(b, SIGUSR1);
        /* A filesystem that cannot cancel the wait (Linux's virtio-fs driver sends no FUSE
         * INTERRUPT) keeps the waiter until the lock is free: release it after a while so the
         * waiter ends either way, and report what it saw. */
        int r = recv_msg(bfd, msg, 5000);
        fl = (struct flock) { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
        chk("lock.posix.interrupt.release", fcntl(fd, F_SETLK, &fl));
        if (r == -ETIMEDOUT)
                r = recv_msg(bfd, msg, WAIT_LONG_MS);
        say("lock.posix.interrupt.result", "%s", r < 0 ? ename(-r) : msg);
        close(bfd);
        reap(b);
        as_user(0, 0, c_probe_free, "lock.posix.interrupt.nothing_left");
        /* Closing any descriptor of the file drops the process's POSIX locks. */
        fl = (struct flock) { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
        fcntl(fd, F_SETLK, &fl);
        as_user(0, 0, c_probe_free, "lock.posix.close_other_fd.before");
        fd2 = open("lk", O_RDONLY);
        close(fd2);
        as_user(0, 0, c_probe_free, "lock.posix.close_other_fd.after");
        close(fd);

        /* flock. */
        fd = open("lk", O_RDWR);
        chk("lock.flock.ex", flock(fd, LOCK_EX));
        as_user(0, 0, c_flock_probe, "lock.flock.vs_ex.");
        as_user(0, 0, c_posix_vs_flock, NULL);
        chk("lock.flock.downgrade_sh", flock(fd, LOCK_SH));
        as_user(0, 0, c_flock_probe, "lock.flock.vs_sh.");
        chk("lock.flock.un", flock(fd, LOCK_UN));
        as_user(0, 0, c_flock_probe, "lock.flock.vs_none.");
        /* The lock belongs to the open file description: a dup keeps it after the first close. */
        flock(fd, LOCK_EX);
        fd2 = dup(fd);
        close(fd);
        as_user(0, 0, c_flock_probe, "lock.flock.dup_keeps.");
        close(fd2);
        as_user(0, 0, c_flock_probe, "lock.flock.last_close_releases.");
        /* Blocking flock with I/O meanwhile. */
        fd = open("lk", O_RDWR);
        chk("lock.flock.ex_again", flock(fd, LOCK_EX));
        LockArg fa = { .flock_lock = true, .flock_op = LOCK_EX };
        blocking_round("lock.flock.blocking.", &fa, fd, true);
        close(fd);
}

/* ---- statfs ---- */

static void t_statfs(void) {
        struct statfs sf;

        if (statfs(".", &sf) < 0) {
                say("statfs", "%s", ename(errno));
                return;
        }
        say("statfs.namelen", "%ld", (long) sf.f_namelen);
        say("statfs.sane", "%s", sf.f_bsize > 0 && sf.f_blocks > 0 ? "yes" : "no");
}

int main(int argc, char **argv) {
        char cwd[PATH_MAX];

        if (argc != 3) {
                fprintf(stderr, "usage: vufs-posix DIR OTHERDIR\n");
                return 2;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        other_dir = argv[2];
        if (geteuid() != 0) {
                fprintf(stderr, "vufs-posix: must run as root\n");
                return 2;
        }
        umask(022);
        if (chdir(argv[1]) < 0)
                die(argv[1]);
        if (mkdir("t", 0755) < 0 || chmod("t", 0755) < 0 || chdir("t") < 0)
                die("t");
        if (!getcwd(cwd, sizeof(cwd)))
                die("getcwd");

        static const struct {
                const char *name;
                void (*fn)(void);
        } groups[] = {
                { "chmod", t_chmod },
                { "chown", t_chown },
                { "link", t_link },
                { "mkdir", t_mkdir },
                { "mknod", t_mknod },
                { "open", t_open },
                { "rename", t_rename },
                { "symlink", t_symlink },
                { "truncate", t_truncate },
                { "utimensat", t_utimensat },
                { "xattr", t_xattr },
                { "fallocate", t_fallocate },
                { "lseek", t_lseek },
                { "tmpfile", t_tmpfile },
                { "readdir", t_readdir },
                { "names", t_names },
                { "perm", t_perm },
                { "locks", t_locks },
                { "statfs", t_statfs },
        };
        for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
                /* Progress on stderr: where a hang happened shows on the console. */
                fprintf(stderr, "vufs-posix: %s\n", groups[i].name);
                groups[i].fn();
        }
        fprintf(stderr, "vufs-posix: done in %s (%u assertions in the main process)\n", cwd, n_assert);
        return 0;
}
