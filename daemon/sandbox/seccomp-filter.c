/* seccomp-filter.c: the allowlist of system calls the daemon makes once it serves a guest (not
 * seccomp.c: that name would shadow libseccomp's <seccomp.h> on the include path). */
#include "seccomp-filter.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* Found by running the frontend, D-Bus and real-guest tests under --seccomp=log (see
 * docs/security.md for how to repeat that after a libc or libsystemd update). Grouped by who needs
 * them; the ones with argument conditions are in seccomp_install(). */
static const char *const allowed[] = {
        /* memory (malloc, thread stacks, guest memory regions) */
        "brk", "mmap", "munmap", "mremap", "mprotect", "madvise",
        /* each started ring's in-flight table (vhost/inflight.c): anonymous memory with a name,
         * no path reached, sealed with fcntl */
        "memfd_create",
        /* threads: queue threads, pool workers, glibc internals */
        "futex", "set_robust_list", "rseq", "exit", "exit_group", "gettid", "getpid",
        "sched_yield", "sched_getaffinity", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
        "sigaltstack", "restart_syscall",
        /* time, timers, sleeping */
        "clock_gettime", "clock_getres", "gettimeofday", "clock_nanosleep", "nanosleep",
        "timerfd_create", "timerfd_settime", "timerfd_gettime",
        /* event loop (sd-event), kick/call eventfds, signals */
        "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll",
        "eventfd2", "signalfd4", "pipe2",
        /* fd basics */
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
        "pwritev2", "close", "dup", "dup3", "fcntl", "lseek",
        /* vhost-user socket, D-Bus, the supervisor channel: every socket exists before the
         * lockdown (no socket(), no connect(): in chroot mode, with the host's network namespace,
         * they would reach the host's abstract sockets) */
        "accept4", "sendmsg", "sendto", "recvmsg", "recvfrom", "getsockopt", "setsockopt",
        "getsockname", "getpeername", "shutdown",
        /* the passthrough filesystem */
        "openat", "openat2", "newfstatat", "fstat", "statx", "statfs", "fstatfs", "readlinkat",
        "getdents64", "mkdirat", "mknodat", "symlinkat", "linkat", "unlinkat", "renameat",
        "renameat2", "fchmod", "fchmodat", "fchown", "fchownat", "utimensat", "ftruncate",
        "fallocate", "fsync", "fdatasync", "syncfs", "copy_file_range", "flock", "faccessat",
        "faccessat2", "fadvise64", "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr",
        "fsetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr",
        "fremovexattr", "fchdir", "chdir", "getcwd",
        /* per-request identities (credentials.c), with the caller's supplementary group
         * (FUSE_CREATE_SUPP_GROUP) */
        "setresuid", "setresgid", "setgroups", "getuid", "geteuid", "getgid", "getegid", "getresuid",
        "getresgid", "umask",
        /* libc and libraries */
        "getrandom", "uname", "getrusage",
};

static const char *const syscall_filter_table[_SYSCALL_FILTER_MAX] = {
        [SYSCALL_FILTER_NONE] = "none",
        [SYSCALL_FILTER_KILL] = "kill",
        [SYSCALL_FILTER_LOG] = "log",
        [SYSCALL_FILTER_TRAP] = "trap",
};

DEFINE_STRING_TABLE_LOOKUP(syscall_filter, SyscallFilter, _SYSCALL_FILTER_MAX);

SyscallFilter syscall_filter_default(void) {
#ifdef SANITIZER_BUILD
        return SYSCALL_FILTER_NONE;
#else
        return SYSCALL_FILTER_KILL;
#endif
}

size_t seccomp_allowlist_size(void) {
        size_t n = 0;
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
                bool dup = false;
                for (size_t j = 0; j < i && !dup; j++)
                        dup = streq(allowed[i], allowed[j]);
                if (!dup && seccomp_syscall_resolve_name(allowed[i]) >= 0)
                        n++;
        }
        /* clone, unshare, prctl, tgkill, prlimit64: allowed with conditions */
        return n + 5;
}

/* Trap mode: name the call by number (scmp_sys_resolver or ausyscall turn it into a name), then
 * die of SIGSYS as kill mode would. Only async-signal-safe calls. */
static void on_sigsys(int sig, siginfo_t *si, void *ctx) {
        char buf[128] = "<2>vufsd: a system call outside the seccomp allowlist was made: number ";
        size_t n = strlen(buf);
        char digits[16];
        int d = 0;
        unsigned v = (unsigned) si->si_syscall;

        (void) ctx;
        do
                digits[d++] = (char) ('0' + v % 10);
        while ((v /= 10) > 0 && d < (int) sizeof digits);
        while (d > 0 && n < sizeof buf - 2)
                buf[n++] = digits[--d];
        buf[n++] = '\n';
        if (write(STDERR_FILENO, buf, n) < 0) {
                /* nothing left to tell it to */
        }
        (void) raise(sig); /* SA_RESETHAND | SA_NODEFER: the default action, now */
        _exit(128 + sig);
}

/* A filter context whose default action is f's (NULL for SYSCALL_FILTER_NONE, *ret_r = 0). */
static scmp_filter_ctx filter_new(SyscallFilter f, int *ret_r) {
        scmp_filter_ctx ctx;
        uint32_t def;
        int r;

        *ret_r = 0;

        switch (f) {
        case SYSCALL_FILTER_NONE:
                return NULL;
        case SYSCALL_FILTER_KILL:
                def = SCMP_ACT_KILL_PROCESS;
                break;
        case SYSCALL_FILTER_LOG:
                def = SCMP_ACT_LOG;
                break;
        case SYSCALL_FILTER_TRAP: {
                struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER };
                def = SCMP_ACT_TRAP;
                if (sigaction(SIGSYS, &sa, NULL) < 0) {
                        *ret_r = -errno;
                        return NULL;
                }
                break;
        }
        default:
                *ret_r = -EINVAL;
                return NULL;
        }

        ctx = seccomp_init(def);
        if (!ctx) {
                *ret_r = -ENOMEM;
                return NULL;
        }
        /* Every thread, the ones the executor may have started already included. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
        if (r < 0) {
                seccomp_release(ctx);
                *ret_r = r;
                return NULL;
        }
        return ctx;
}

/* Allows each named call with any arguments; a name this architecture lacks is skipped, and one
 * listed twice (an alias) is no error. */
static int allow_names(scmp_filter_ctx ctx, const char *const *names, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int r, nr = seccomp_syscall_resolve_name(names[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue; /* not on this architecture */
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
                if (r < 0 && r != -EEXIST)
                        return r;
        }
        return 0;
}

/* What both processes may do to themselves only: signal their own threads (raise, pthread_kill,
 * capabilities_apply; the pid is the process's in its own pid namespace, as getpid() says) and
 * read or set their own resource limits (glibc's getrlimit/setrlimit pass pid 0). */
static int allow_self(scmp_filter_ctx ctx) {
        int r;

        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t) getpid()));
        if (r < 0)
                return r;
        return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1, SCMP_A0(SCMP_CMP_EQ, 0));
}

/* Only with --inode-file-handles in use (prefer/mandatory on a share that allows handles): with
 * CAP_DAC_READ_SEARCH, open_by_handle_at() opens any inode of a mounted filesystem by a guessed
 * handle (the "shocker" escape), so a daemon without handles has neither (docs/security.md). */
static const char *const file_handle_calls[] = { "name_to_handle_at", "open_by_handle_at" };
/* statmount(2)'s number, the same on every architecture of the common system call table. */
#define SYS_STATMOUNT 457

int seccomp_install(SyscallFilter f, bool file_handles, bool make_handles) {
        static const int prctl_ok[] = {
                PR_SET_NAME, PR_GET_NAME,                 /* thread names (GLib, pthread_setname_np) */
                PR_GET_DUMPABLE, PR_SET_VMA,              /* glibc malloc names its arenas */
                PR_CAPBSET_READ, PR_GET_NO_NEW_PRIVS,     /* read-only queries */
                PR_GET_SECUREBITS, PR_GET_KEEPCAPS,
        };
        scmp_filter_ctx ctx;
        int r;

        ctx = filter_new(f, &r);
        if (!ctx)
                return r;

        r = allow_names(ctx, allowed, ELEMENTSOF(allowed));
        if (r >= 0 && file_handles)
                r = allow_names(ctx, file_handle_calls, ELEMENTSOF(file_handle_calls));
        else if (r >= 0 && make_handles) /* the first of them: makes a handle, opens nothing */
                r = allow_names(ctx, file_handle_calls, 1);
        /* With handles, statmount(2) too: a mount seen for the first time is asked whether it shows
         * its whole filesystem (file-handle.h, issue 31 finding 4). By number: libseccomp older
         * than 2.6 does not know its name; read-only, about mounts of this namespace. */
        if (r >= 0 && file_handles) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SYS_STATMOUNT, 0);
                if (r == -EEXIST)
                        r = 0;
        }
        if (r < 0)
                goto out;
        r = allow_self(ctx);
        if (r < 0)
                goto out;
        /* ... and naming its own pid rather than 0. */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1,
                             SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t) getpid()));
        if (r < 0)
                goto out;
        /* Threads, never processes: fork() stays forbidden. clone3 keeps its flags in memory the
         * filter cannot see, so it fails with ENOSYS and glibc falls back to clone. */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
        if (r < 0)
                goto out;
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
                goto out;
        /* One ioctl: how many bytes the vhost-user socket holds (vhost-user.c takes a message
         * off it only once it is all there, so that a death never leaves half of one). Every
         * other request, on any fd (a terminal's, a device's), stays refused. */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, FIONREAD));
        if (r < 0)
                goto out;
        /* credentials.c gives a request thread its own umask; no other namespace may be made. */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_EQ, CLONE_FS));
        if (r < 0)
                goto out;
        for (size_t i = 0; i < ELEMENTSOF(prctl_ok); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
                                     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t) prctl_ok[i]));
                if (r < 0)
                        goto out;
        }
        r = seccomp_load(ctx);
out:
        seccomp_release(ctx);
        return r;
}

/* The supervisor's calls (sandbox.c): poll its fds, read signals and the daemon's notifications,
 * pass them on over the already connected notification socket, forward signals to the daemon,
 * reap it, remove the socket (inside its chroot), exit the way the daemon did. */
int seccomp_install_supervisor(SyscallFilter f, pid_t child, bool socket_files, bool control) {
        static const char *const sup_allowed[] = {
                "poll", "ppoll", "read", "recvmsg", "recvfrom", "sendto", "sendmsg", "write", "close",
                "brk", "mmap", "munmap", "madvise", "futex", "getpid", "gettid", "rt_sigaction",
                "rt_sigprocmask", "rt_sigreturn", "restart_syscall", "clock_gettime", "exit",
                "exit_group",
        };
        static const char *const sup_files[] = { "openat", "open", "flock", "unlink", "unlinkat" };
        /* sd-bus on the bus connection and the control channel, both connected before this: no
         * socket(), no connect(), no file. */
        static const char *const sup_control[] = {
                "readv", "writev", "mremap", "getrandom",
                /* sd-bus starting the control channel of a serving process started after a death
                 * (--crash-restarts; respawn.c): on an fd it was handed, no new one is made */
                "fcntl", "newfstatat", "fstat", "getsockopt", "setsockopt", "getsockname", "getpeername",
        };
        scmp_filter_ctx ctx;
        int r;

        ctx = filter_new(f, &r);
        if (!ctx)
                return r;
        r = allow_names(ctx, sup_allowed, ELEMENTSOF(sup_allowed));
        if (r >= 0 && socket_files)
                r = allow_names(ctx, sup_files, ELEMENTSOF(sup_files));
        if (r >= 0 && control)
                r = allow_names(ctx, sup_control, ELEMENTSOF(sup_control));
        if (r < 0)
                goto out;
        /* Signals and waits: the daemon only; raise() at the end: itself only. */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t) child));
        if (r < 0)
                goto out;
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(wait4), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t) child));
        if (r < 0)
                goto out;
        r = allow_self(ctx);
        if (r < 0)
                goto out;
        r = seccomp_load(ctx);
out:
        seccomp_release(ctx);
        return r;
}
