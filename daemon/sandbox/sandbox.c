/* sandbox.c: pid/mount/network namespaces, pivot_root or chroot, and the supervisor process. */
#include "sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "util.h"

/* The daemon's end of the supervisor channel (the notification relay socket travels over it). */
static int control_fd = -1;
static int netns_fd = -1;

static const char *const sandbox_mode_table[_SANDBOX_MODE_MAX] = {
        [SANDBOX_NONE] = "none",
        [SANDBOX_CHROOT] = "chroot",
        [SANDBOX_NAMESPACE] = "namespace",
};

DEFINE_STRING_TABLE_LOOKUP(sandbox_mode, SandboxMode, _SANDBOX_MODE_MAX);

SandboxMode sandbox_mode_default(void) {
#ifdef SANITIZER_BUILD
        return SANDBOX_NONE;
#else
        return geteuid() == 0 ? SANDBOX_NAMESPACE : SANDBOX_NONE;
#endif
}

int sandbox_netns_fd(void) {
        return netns_fd;
}

/* ---- the supervisor (the original process, outside the sandbox) ---- */

/* Notification fields the daemon may send through the supervisor. MAINPID, FDSTORE and the like
 * are not passed on: a compromised daemon must not redirect the service manager. */
static bool notify_field_allowed(const char *line, size_t len) {
        static const char *const fields[] = {
                "READY=", "RELOADING=", "STOPPING=", "STATUS=", "ERRNO=", "BUSERROR=",
                "WATCHDOG=", "WATCHDOG_USEC=", "EXTEND_TIMEOUT_USEC=", "MONOTONIC_USEC=",
        };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                size_t n = strlen(fields[i]);
                if (len >= n && memcmp(line, fields[i], n) == 0)
                        return true;
        }
        return false;
}

/* Reads one datagram from the relay socket and forwards its allowed lines with sd_notify().
 * Returns false when nothing was there. */
static bool relay_forward_one(int relay, pid_t child) {
        char buf[4096], out[4096];
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 16)];
        } control;
        struct iovec iov = { buf, sizeof buf - 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof control };
        const struct ucred *cred = NULL;
        size_t n_out = 0;
        ssize_t n;

        n = recvmsg(relay, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                    c->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
                        cred = (const struct ucred *) CMSG_DATA(c);
                else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        /* fd passing (FDSTORE) is not relayed */
                        int *fds = (int *) CMSG_DATA(c);
                        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                                safe_close(fds[i]);
                }
        }
        /* In chroot mode the relay's abstract name is visible to the whole host: only the daemon
         * (the kernel translates its pid into ours) may speak. */
        if (!cred || cred->pid != child)
                return true;
        buf[n] = '\0';
        for (char *line = buf, *end; line && *line; line = end ? end + 1 : NULL) {
                size_t len;
                end = strchr(line, '\n');
                len = end ? (size_t) (end - line) : strlen(line);
                if (len == 0 || !notify_field_allowed(line, len) || n_out + len + 2 > sizeof out)
                        continue;
                memcpy(out + n_out, line, len);
                n_out += len;
                out[n_out++] = '\n';
        }
        if (n_out > 0) {
                out[n_out - 1] = '\0';
                (void) sd_notify(false, out);
        }
        return true;
}

/* Receives the relay socket the daemon created inside its network namespace. */
static int receive_relay(int ctl) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control;
        char byte;
        struct iovec iov = { &byte, 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof control };
        struct cmsghdr *c;
        ssize_t n;

        n = recvmsg(ctl, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n <= 0)
                return n == 0 ? -ECONNRESET : -errno;
        c = CMSG_FIRSTHDR(&mh);
        if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
                return -EBADMSG;
        return *(int *) CMSG_DATA(c);
}

/* The daemon removes its socket at exit, but inside the sandbox the path means something else:
 * the supervisor removes it, if no other daemon has taken the path over meanwhile. */
static void remove_socket(const char *socket_path) {
        _cleanup_free_ char *lock_path = NULL;
        _cleanup_close_ int fd = -1;

        if (!socket_path || asprintf(&lock_path, "%s.lock", socket_path) < 0)
                return;
        fd = open(lock_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
                return;
        (void) unlink(socket_path);
        (void) unlink(lock_path);
}

/* Exits the way the daemon did: a signal death is re-raised so the service manager sees it. */
static int exit_like(int status) {
        int sig;

        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        sig = WTERMSIG(status);
        log_error("The sandboxed daemon was killed by signal %s%s", sigabbrev_np(sig) ?: "?",
                  sig == SIGSYS ? " (a system call outside the seccomp allowlist; see --seccomp=log)" : "");
        {
                struct rlimit no_core = {};
                sigset_t set;
                (void) setrlimit(RLIMIT_CORE, &no_core); /* the daemon's core is the useful one */
                signal(sig, SIG_DFL);
                sigemptyset(&set);
                sigaddset(&set, sig);
                sigprocmask(SIG_UNBLOCK, &set, NULL);
                raise(sig);
        }
        return 128 + sig;
}

static int supervise(pid_t child, int ctl, const char *socket_path) {
        _cleanup_close_ int sfd = -1, relay = -1;
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0) {
                (void) kill(child, SIGKILL);
                return log_error_errno(errno, "signalfd() failed: %m");
        }
        for (;;) {
                struct pollfd p[3] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = ctl, .events = POLLIN },
                        { .fd = relay, .events = POLLIN },
                };
                struct signalfd_siginfo si;
                int status;

                if (poll(p, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        (void) kill(child, SIGKILL);
                        return log_error_errno(errno, "poll() failed: %m");
                }
                if (p[1].revents) {
                        int fd = receive_relay(ctl);
                        if (fd >= 0) {
                                safe_close(relay);
                                relay = fd;
                        } else if (fd != -EAGAIN)
                                ctl = -1; /* the daemon is done with the channel (or gone) */
                }
                if (p[2].revents)
                        while (relay_forward_one(relay, child))
                                ;
                while (read(sfd, &si, sizeof si) == sizeof si) {
                        if (si.ssi_signo == SIGCHLD)
                                continue;
                        /* The daemon handles TERM and INT; HUP ends it too, as in virtiofsd. */
                        (void) kill(child, si.ssi_signo == SIGHUP ? SIGTERM : (int) si.ssi_signo);
                }
                if (waitpid(child, &status, WNOHANG) == child) {
                        if (relay >= 0)
                                while (relay_forward_one(relay, child))
                                        ;
                        remove_socket(socket_path);
                        return exit_like(status);
                }
        }
}

/* ---- the daemon's side ---- */

/* A supervisor's pid in LISTEN_PID / WATCHDOG_PID means "the daemon": that is now us. */
static void adopt_env_pid(const char *name, pid_t parent) {
        const char *v = getenv(name);
        char buf[32];

        snprintf(buf, sizeof buf, "%i", (int) parent);
        if (v && streq(v, buf)) {
                snprintf(buf, sizeof buf, "%i", (int) getpid());
                (void) setenv(name, buf, 1);
        }
}

static int prepare_mounts(const char *shared_dir) {
        if (unshare(CLONE_NEWNS) < 0)
                return log_error_errno(errno, "Cannot create a mount namespace: %m");
        /* Slave, not private: mounts the host adds under the shared directory still appear (and
         * are announced as submounts); nothing we do propagates back. */
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                return log_error_errno(errno, "Cannot make the mount namespace a slave: %m");
        /* /proc of the new pid namespace: /proc/self/fd (the filesystem layer re-opens inodes
         * through it) then shows only this daemon, and ".." from it leads nowhere outside. */
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME, NULL) < 0)
                return log_error_errno(errno, "Cannot mount /proc for the pid namespace: %m");
        /* The shared directory becomes a mount of its own, the future root: the root fd the
         * filesystem layer opens next is on it, so ".." from it stops at the sandbox's root. */
        if (mount(shared_dir, shared_dir, NULL, MS_BIND | MS_REC, NULL) < 0)
                return log_error_errno(errno, "Cannot bind-mount %s: %m", shared_dir);
        return 0;
}

int sandbox_prepare(SandboxMode mode, const char *shared_dir, const char *socket_path, int *ret_exit_status) {
        sigset_t mask, old;
        int ctl[2];
        pid_t parent = getpid(), child;
        int r;

        if (mode == SANDBOX_NONE)
                return 1;
        if (mode == SANDBOX_NAMESPACE && unshare(CLONE_NEWPID) < 0)
                return log_error_errno(errno, "--sandbox=namespace: cannot create a pid namespace: %m "
                                              "(needs CAP_SYS_ADMIN; use --sandbox=chroot in a container, "
                                              "or --sandbox=none when the service manager sandboxes vufsd)");
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
                return log_error_errno(errno, "socketpair() failed: %m");

        /* Blocked before the fork: a SIGTERM arriving right after it is forwarded, not lost. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, &old);

        child = fork();
        if (child < 0) {
                r = log_error_errno(errno, "fork() failed: %m");
                sigprocmask(SIG_SETMASK, &old, NULL);
                safe_close(ctl[0]);
                safe_close(ctl[1]);
                return r;
        }
        if (child > 0) {
                safe_close(ctl[1]);
                /* Nothing the daemon serves stays open here. */
                if (ctl[0] > 3)
                        (void) close_range(3, ctl[0] - 1, 0);
                (void) close_range(ctl[0] + 1, ~0U, 0);
                r = supervise(child, ctl[0], socket_path);
                safe_close(ctl[0]);
                if (r < 0)
                        return r;
                *ret_exit_status = r;
                return 0;
        }

        /* The daemon. It must not outlive the supervisor (systemd tracks the supervisor). */
        safe_close(ctl[0]);
        control_fd = ctl[1];
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        adopt_env_pid("LISTEN_PID", parent);
        adopt_env_pid("WATCHDOG_PID", parent);
        if (mode == SANDBOX_NAMESPACE) {
                r = prepare_mounts(shared_dir);
                if (r < 0)
                        return r;
        }
        return 1;
}

/* Service-manager notifications from inside the sandbox: NOTIFY_SOCKET's path is not visible
 * any more (and an abstract one is in another network namespace), so the daemon binds a relay
 * socket where it can reach it, hands it to the supervisor, and points NOTIFY_SOCKET at it. The
 * supervisor is the main process the service manager knows; it forwards READY, STATUS, WATCHDOG
 * and the like. */
static int setup_notify_relay(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        char byte = 0, name[64];
        struct iovec iov = { &byte, 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof control };
        struct cmsghdr *c;
        _cleanup_close_ int fd = -1;
        uint64_t rnd = 0;
        int one = 1;

        if (!getenv("NOTIFY_SOCKET") || control_fd < 0)
                return 0;
        if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
                return log_error_errno(errno, "getrandom() failed: %m");
        snprintf(name, sizeof name, "vufsd-notify-%016" PRIx64, rnd);
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return log_error_errno(errno, "socket() failed: %m");
        memcpy(sa.sun_path + 1, name, strlen(name));
        if (bind(fd, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))) < 0)
                return log_error_errno(errno, "Cannot bind the notification relay: %m");
        if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0)
                return log_error_errno(errno, "SO_PASSCRED failed: %m");

        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        if (sendmsg(control_fd, &mh, MSG_NOSIGNAL) < 0)
                return log_error_errno(errno, "Cannot pass the notification relay to the supervisor: %m");
        /* "@" marks an abstract address for sd_notify(). */
        {
                char at[sizeof name + 1];
                snprintf(at, sizeof at, "@%s", name);
                if (setenv("NOTIFY_SOCKET", at, 1) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int enter_root(SandboxMode mode, const char *shared_dir) {
        struct stat want, got;

        if (stat(shared_dir, &want) < 0)
                return log_error_errno(errno, "Cannot stat %s: %m", shared_dir);
        if (chdir(shared_dir) < 0)
                return log_error_errno(errno, "Cannot enter %s: %m", shared_dir);
        if (mode == SANDBOX_NAMESPACE) {
                /* The old root ends up stacked on the new one; detaching it leaves only the share. */
                if (syscall(SYS_pivot_root, ".", ".") < 0)
                        return log_error_errno(errno, "pivot_root into %s failed: %m", shared_dir);
                if (umount2(".", MNT_DETACH) < 0)
                        return log_error_errno(errno, "Cannot detach the old root: %m");
        } else if (chroot(".") < 0)
                return log_error_errno(errno, "chroot into %s failed: %m%s", shared_dir,
                                       errno == EPERM ? " (needs CAP_SYS_CHROOT)" : "");
        if (chdir("/") < 0 || stat("/", &got) < 0)
                return log_error_errno(errno, "Cannot enter the new root: %m");
        if (got.st_dev != want.st_dev || got.st_ino != want.st_ino)
                return log_error_errno(EXDEV, "The sandbox's root is not %s", shared_dir);
        return 0;
}

int sandbox_enter(SandboxMode mode, const char *shared_dir) {
        int r;

        if (mode == SANDBOX_NONE)
                return 0;
        if (mode == SANDBOX_NAMESPACE) {
                /* Late, not in sandbox_prepare(): the D-Bus connection may use an abstract socket of
                 * the host's network namespace; connections made before keep working. */
                if (unshare(CLONE_NEWNET) < 0)
                        return log_error_errno(errno, "Cannot create a network namespace: %m");
                netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
                if (netns_fd < 0)
                        return log_error_errno(errno, "Cannot open the new network namespace: %m");
        }
        r = setup_notify_relay();
        if (r < 0)
                return r;
        control_fd = safe_close(control_fd);
        r = enter_root(mode, shared_dir);
        if (r < 0)
                return r;
        log_debug("Sandbox: %s, root %s", sandbox_mode_to_string(mode), shared_dir);
        return 0;
}
