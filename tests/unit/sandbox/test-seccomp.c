/* test-seccomp.c: the daemon's allowlist, installed in a forked child: forbidden calls die with
 * SIGSYS (kill, trap) or are logged by the kernel (log); what the daemon needs keeps working. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seccomp-filter.h"
#include "util.h"
#include "test-main.h"

typedef void (*Action)(void);

/* The test process: another process, from the filtered child's point of view (read before the
 * fork: getppid() is not on the allowlist). */
static pid_t parent_pid;

/* Which filter run_filtered() installs: the daemon's, or the supervisor's (sandbox.c) with the
 * test process as the daemon it watches, with or without the socket-file calls. */
static bool supervisor, supervisor_files;
static bool file_handles; /* the daemon's filter with --inode-file-handles in use */
static bool make_handles; /* ... with live migration's handles made (not opened) */

#ifdef __SANITIZE_ADDRESS__
static const bool sanitizer_build = true;
#else
static const bool sanitizer_build = false;
#endif

/* Runs action in a child under filter f; returns the waitpid status. The child's stderr goes to
 * err (if not NULL). */
static int run_filtered(SyscallFilter f, Action action, char *err, size_t errlen) {
        int p[2], st;
        pid_t pid;

        ck_assert_int_eq(pipe(p), 0);
        parent_pid = getpid();
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                dup2(p[1], STDERR_FILENO);
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                    (supervisor ? seccomp_install_supervisor(f, parent_pid, supervisor_files, false)
                                : seccomp_install(f, file_handles, make_handles)) < 0)
                        _exit(90);
                action();
                _exit(0);
        }
        close(p[1]);
        if (err) {
                ssize_t n, got = 0;
                while ((n = read(p[0], err + got, errlen - 1 - (size_t) got)) > 0)
                        got += n;
                err[got] = '\0';
        }
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        return st;
}

static void do_allowed(void) {
        struct rlimit rl;
        if (getpid() <= 0 || write(STDERR_FILENO, "", 0) < 0)
                _exit(91);
        /* getrlimit/setrlimit on itself (glibc: prlimit64 with pid 0) */
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || prlimit(getpid(), RLIMIT_NOFILE, NULL, &rl) < 0)
                _exit(94);
        /* signals to its own threads (raise, pthread_kill) */
        if (syscall(SYS_tgkill, getpid(), gettid(), 0) < 0)
                _exit(95);
        /* per-thread umask as credentials.c does it */
        if (unshare(CLONE_FS) < 0)
                _exit(92);
        /* one name beneath a directory as passthrough/beneath.c opens it: the kernel's check must
         * run, not a filter's ENOSYS that would send every open to the fallback */
        struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int fd = (int) syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof how);
        if (fd < 0)
                _exit(96);
        close(fd);
}

static void *thread_main(void *p) {
        return p;
}

static void do_thread(void) {
        pthread_t t;
        void *ret;
        /* clone3 answers ENOSYS, glibc falls back to clone(CLONE_THREAD) */
        if (pthread_create(&t, NULL, thread_main, (void *) 42) != 0 || pthread_join(t, &ret) != 0 || ret != (void *) 42)
                _exit(93);
}

/* How many bytes a socket holds (vhost-user.c): the one ioctl allowed. The socket pair is made
 * before the filter (which allows no new socket) and holds 3 bytes. */
static int fionread_sv[2] = { -1, -1 };
static void do_fionread(void) {
        int n = -1;
        if (ioctl(fionread_sv[0], FIONREAD, &n) < 0 || n != 3)
                _exit(94);
}

/* Any other ioctl, here a terminal's. */
static void do_other_ioctl(void) {
        struct winsize ws;
        (void) ioctl(0, TIOCGWINSZ, &ws);
}

static void do_sysinfo(void) {
        struct sysinfo si;
        (void) syscall(SYS_sysinfo, &si);
}

static void do_inet_socket(void) {
        (void) socket(AF_INET, SOCK_STREAM, 0);
}

/* Every socket the daemon uses exists before the lockdown (the bus, the vhost-user listener, the
 * supervisor channel): a new one, even AF_UNIX, could reach host abstract sockets in chroot mode. */
static void do_unix_socket(void) {
        (void) socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

static void do_connect(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "\0vufsd-test" };
        (void) connect(0, (struct sockaddr *) &sa, sizeof sa);
}

/* Signals and rlimits: only the daemon's own process. The parent is another process. */
static void do_tgkill_other(void) {
        (void) syscall(SYS_tgkill, parent_pid, parent_pid, 0);
}

static void do_kill_other(void) {
        (void) kill(parent_pid, 0);
}

static void do_prlimit_other(void) {
        struct rlimit rl;
        (void) prlimit(parent_pid, RLIMIT_NOFILE, NULL, &rl);
}

static void do_fork(void) {
        pid_t pid = fork();
        if (pid == 0)
                _exit(0);
}

static void do_unshare_ns(void) {
        (void) unshare(CLONE_NEWNS);
}

static void do_execve(void) {
        execl("/bin/true", "true", (char *) NULL);
}

static void do_ptrace(void) {
        (void)syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0);
}

/* What --inode-file-handles makes: a handle of "/", opened again by it. */
static void do_file_handle(void) {
        struct {
                struct file_handle fh;
                unsigned char buf[MAX_HANDLE_SZ];
        } h = { .fh.handle_bytes = MAX_HANDLE_SZ };
        int mnt, fd, dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (dir < 0 || name_to_handle_at(dir, "", &h.fh, &mnt, AT_EMPTY_PATH) < 0)
                _exit(91);
        fd = open_by_handle_at(dir, &h.fh, O_PATH | O_CLOEXEC);
        if (fd < 0 && errno != EPERM) /* EPERM: no CAP_DAC_READ_SEARCH, but the call was made */
                _exit(92);
        _exit(0);
}

static void do_make_handle(void) {
        struct {
                struct file_handle fh;
                unsigned char buf[MAX_HANDLE_SZ];
        } h = { .fh.handle_bytes = MAX_HANDLE_SZ };
        int mnt, dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        _exit(dir < 0 || name_to_handle_at(dir, "", &h.fh, &mnt, AT_EMPTY_PATH) < 0 ? 91 : 0);
}

static void do_open_by_handle(void) {
        struct {
                struct file_handle fh;
                unsigned char buf[8];
        } h = { .fh.handle_bytes = 8 };
        (void)open_by_handle_at(AT_FDCWD, &h.fh, O_PATH);
}

static void assert_killed(SyscallFilter f, Action a, const char *what) {
        int st = run_filtered(f, a, NULL, 0);
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "%s under %s: status 0x%x, expected SIGSYS", what,
                      syscall_filter_to_string(f), st);
}

/* The supervisor's calls: its own threads and limits, signals and waits to the daemon only. */
static void do_supervisor_allowed(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                _exit(1);
        if (syscall(SYS_tgkill, getpid(), gettid(), 0) < 0)
                _exit(2);
        if (kill(parent_pid, 0) < 0)
                _exit(3);
        if (write(STDERR_FILENO, "", 0) < 0)
                _exit(4);
}

static void do_open_null(void) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                _exit(5);
        close(fd);
}

START_TEST(test_supervisor) {
        int st;

        supervisor = true;
        supervisor_files = false;
        /* Sanitizer runtimes make calls of their own (sigaltstack) that the supervisor's list
         * leaves out; such builds run it without a filter (syscall_filter_default()). */
        if (!sanitizer_build) {
                st = run_filtered(SYSCALL_FILTER_KILL, do_supervisor_allowed, NULL, 0);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
        }
        assert_killed(SYSCALL_FILTER_KILL, do_open_null, "open without socket files");
        assert_killed(SYSCALL_FILTER_KILL, do_prlimit_other, "prlimit64 on the daemon");
        assert_killed(SYSCALL_FILTER_KILL, do_tgkill_other, "tgkill to the daemon");
        assert_killed(SYSCALL_FILTER_KILL, do_sysinfo, "sysinfo");
        assert_killed(SYSCALL_FILTER_KILL, do_fork, "fork");
        supervisor_files = true;
        if (!sanitizer_build) {
                st = run_filtered(SYSCALL_FILTER_KILL, do_open_null, NULL, 0);
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "open with socket files: status 0x%x", st);
        }
        supervisor = supervisor_files = false;
}
END_TEST

START_TEST(test_names) {
        ck_assert_int_eq(syscall_filter_from_string("kill"), SYSCALL_FILTER_KILL);
        ck_assert_int_eq(syscall_filter_from_string("log"), SYSCALL_FILTER_LOG);
        ck_assert_int_eq(syscall_filter_from_string("trap"), SYSCALL_FILTER_TRAP);
        ck_assert_int_eq(syscall_filter_from_string("none"), SYSCALL_FILTER_NONE);
        ck_assert_int_eq(syscall_filter_from_string("allow"), -EINVAL);
        ck_assert_int_gt(seccomp_allowlist_size(), 60);
        ck_assert_int_lt(seccomp_allowlist_size(), 160);
}
END_TEST

START_TEST(test_allowed_calls_work) {
        int st = run_filtered(SYSCALL_FILTER_KILL, do_allowed, NULL, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
        st = run_filtered(SYSCALL_FILTER_KILL, do_thread, NULL, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "threads: status 0x%x", st);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fionread_sv), 0);
        ck_assert_int_eq(write(fionread_sv[1], "abc", 3), 3);
        st = run_filtered(SYSCALL_FILTER_KILL, do_fionread, NULL, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "FIONREAD: status 0x%x", st);
        close(fionread_sv[0]);
        close(fionread_sv[1]);
}
END_TEST

START_TEST(test_kill) {
        assert_killed(SYSCALL_FILTER_KILL, do_sysinfo, "sysinfo");
        assert_killed(SYSCALL_FILTER_KILL, do_inet_socket, "socket(AF_INET)");
        assert_killed(SYSCALL_FILTER_KILL, do_unix_socket, "socket(AF_UNIX)");
        assert_killed(SYSCALL_FILTER_KILL, do_connect, "connect");
        assert_killed(SYSCALL_FILTER_KILL, do_tgkill_other, "tgkill to another process");
        assert_killed(SYSCALL_FILTER_KILL, do_kill_other, "kill to another process");
        assert_killed(SYSCALL_FILTER_KILL, do_prlimit_other, "prlimit64 on another process");
        assert_killed(SYSCALL_FILTER_KILL, do_fork, "fork");
        assert_killed(SYSCALL_FILTER_KILL, do_unshare_ns, "unshare(CLONE_NEWNS)");
        assert_killed(SYSCALL_FILTER_KILL, do_execve, "execve");
        assert_killed(SYSCALL_FILTER_KILL, do_ptrace, "ptrace");
        assert_killed(SYSCALL_FILTER_KILL, do_other_ioctl, "ioctl(TIOCGWINSZ)");
}
END_TEST

/* name_to_handle_at and open_by_handle_at only in the filter of a daemon that uses file handles:
 * with CAP_DAC_READ_SEARCH, open_by_handle_at opens any inode of a filesystem by a guessed handle. */
START_TEST(test_file_handle_calls) {
        int st;

        file_handles = false;
        assert_killed(SYSCALL_FILTER_KILL, do_file_handle, "name_to_handle_at without file handles");
        assert_killed(SYSCALL_FILTER_KILL, do_open_by_handle, "open_by_handle_at without file handles");
        file_handles = true;
        st = run_filtered(SYSCALL_FILTER_KILL, do_file_handle, NULL, 0);
        file_handles = false;
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "with file handles: status 0x%x", st);
        /* Live migration's handles: made, never opened. */
        make_handles = true;
        st = run_filtered(SYSCALL_FILTER_KILL, do_make_handle, NULL, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "making a handle for migration: status 0x%x", st);
        assert_killed(SYSCALL_FILTER_KILL, do_open_by_handle, "open_by_handle_at with handles made for migration");
        make_handles = false;
}
END_TEST

START_TEST(test_trap_names_the_call) {
        char err[512];
        char want[64];
        int st = run_filtered(SYSCALL_FILTER_TRAP, do_sysinfo, err, sizeof err);

        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "status 0x%x", st);
        snprintf(want, sizeof want, "number %d\n", (int) SYS_sysinfo);
        ck_assert_msg(strstr(err, want), "stderr: %s", err);
}
END_TEST

/* Log mode: the call goes through, the kernel writes an audit record (type=1326) naming the pid
 * and the system call number. The record is read from the kernel log when it can be read. */
START_TEST(test_log) {
        char line[1024], want_pid[32], want_nr[32];
        bool found = false;
        int st, p[2];
        pid_t pid;
        FILE *f;

        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_install(SYSCALL_FILTER_LOG, false, false) < 0)
                        _exit(90);
                do_sysinfo();
                do_inet_socket();
                _exit(0);
        }
        close(p[1]);
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "log mode must not kill: status 0x%x", st);

        snprintf(want_pid, sizeof want_pid, " pid=%i ", (int) pid);
        snprintf(want_nr, sizeof want_nr, " syscall=%d ", (int) SYS_sysinfo);
        for (int attempt = 0; attempt < 20 && !found; attempt++) {
                f = popen("dmesg 2>/dev/null", "re");
                if (!f)
                        break;
                while (fgets(line, sizeof line, f))
                        if (strstr(line, "type=1326") && strstr(line, want_pid) && strstr(line, want_nr))
                                found = true;
                if (pclose(f) != 0 && !found) {
                        fprintf(stderr, "dmesg not readable here: the audit record is not checked\n");
                        return;
                }
                if (!found)
                        usleep(100000);
        }
        ck_assert_msg(found, "no seccomp audit record for pid %i, syscall %d in dmesg", (int) pid, (int) SYS_sysinfo);
}
END_TEST

START_TEST(test_none) {
        int st = run_filtered(SYSCALL_FILTER_NONE, do_sysinfo, NULL, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
}
END_TEST

static Suite *seccomp_suite(void) {
        Suite *s = suite_create("seccomp");
        TCase *tc = tcase_create("filter");
        /* Log first: the kernel rate-limits audit lines (printk_ratelimit, 10 per 5 s), and every
         * kill below writes one. */
        tcase_add_test(tc, test_log);
        tcase_add_test(tc, test_names);
        tcase_add_test(tc, test_allowed_calls_work);
        tcase_add_test(tc, test_file_handle_calls);
        tcase_add_test(tc, test_kill);
        tcase_add_test(tc, test_trap_names_the_call);
        tcase_add_test(tc, test_none);
        tcase_add_test(tc, test_supervisor);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        /* The forks are the test's own: Check's fork mode would only add another level. */
        return test_main_run_mode(seccomp_suite(), CK_NOFORK);
}
