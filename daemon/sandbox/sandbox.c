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
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <stdarg.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "capabilities.h"
#include "keeper.h"
#include "sandbox-internal.h"
#include "log.h"
#include "userns.h"
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
        return SANDBOX_NAMESPACE; /* unprivileged in a user namespace of its own (userns.h) */
#endif
}

int sandbox_netns_fd(void) {
        return netns_fd;
}

void sandbox_parent_signals(sigset_t *ret) {
        sigemptyset(ret);
        sigaddset(ret, SIGTERM);
        sigaddset(ret, SIGINT);
        sigaddset(ret, SIGHUP);
        sigaddset(ret, SIGCHLD);
}

int sandbox_channel_fd(void) {
        return control_fd;
}

void sandbox_set_channel_fd(int fd) {
        control_fd = fd;
}

/* ---- the supervisor (the original process, outside the sandbox) ---- */

/* Notification fields the daemon may send through the supervisor: those it sends. MAINPID, FDSTORE
 * and the like are not passed on (a compromised daemon must not redirect the service manager), nor
 * the timing ones it never sends: EXTEND_TIMEOUT_USEC would let it hold off its stop for ever while
 * ignoring SIGTERM, WATCHDOG_USEC turn its watchdog off (test-sandbox notify_injected). */
static bool notify_field_allowed(const char *line, size_t len) {
        static const char *const fields[] = {
                "READY=", "STOPPING=", "STATUS=", "ERRNO=", "WATCHDOG=",
        };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                size_t n = strlen(fields[i]);
                if (len >= n && memcmp(line, fields[i], n) == 0)
                        return true;
        }
        return false;
}

/* What the supervisor keeps once it has locked itself down: a socket already connected to the
 * service manager's NOTIFY_SOCKET (its path may be outside the supervisor's root, and socket() is
 * not allowed any more), and the socket's and lock file's names inside its root. */
typedef struct Supervisor {
        pid_t child;
        SandboxMode mode;
        int notify_fd;
        int lock_fd;       /* SOCK.pid, locked: held here, never by the daemon (issue 31 finding 10) */
        char *socket_name; /* NULL: no socket to remove (--fd) */
        char *lock_name;
        const SupervisorControl *control; /* the control plane; NULL when there is none */
} Supervisor;

/* Reads one notification the daemon sent over the channel and forwards its allowed lines.
 * Returns 1 when one was read, 0 when none was there, -ECONNRESET when the daemon closed it. */
static int relay_forward_one(Supervisor *s, int ctl) {
        /* Static: room for a keeper record (keeper.h), too large for the stack of a loop. */
        static char buf[KEEPER_MAX_RECORD + 16];
        static union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * KEEPER_MAX_FDS)];
        } control;
        char out[4096];
        int fds[KEEPER_MAX_FDS];
        size_t n_fds = 0;
        struct iovec iov = { buf, sizeof buf - 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof control };
        size_t n_out = 0;
        ssize_t n;

        n = recvmsg(ctl, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -ECONNRESET;
        if (n == 0)
                return -ECONNRESET;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        int *f = (int *) CMSG_DATA(c);
                        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                                if (n_fds < ELEMENTSOF(fds))
                                        fds[n_fds++] = f[i];
                                else
                                        safe_close(f[i]);
                }
        /* The spawner's new control channel for the next serving process (respawn.c). */
        if (n == 1 && buf[0] == KEEPER_TAG_CHANNEL && n_fds == 1) {
                if (s->control && s->control->reopen)
                        s->control->reopen(s->control->userdata, fds[0]);
                else
                        safe_close(fds[0]);
                return 1;
        }
        /* A journal entry that lost its fd (the supervisor's own fd limit): the journal no longer
         * describes the session. */
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && n >= 1 && buf[0] >= KEEPER_TAG_JPUT &&
            buf[0] <= KEEPER_TAG_JCOMMIT) {
                keeper_journal_fail();
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                return 1;
        }
        /* A record for the keeper (crash survival): kept, never relayed nor read. */
        if (!(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && keeper_handle(ctl, buf, (size_t) n, fds, n_fds))
                return 1;
        /* fd passing (FDSTORE) is not relayed */
        for (size_t i = 0; i < n_fds; i++)
                safe_close(fds[i]);
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
        if (n_out > 0 && s->notify_fd >= 0)
                (void) send(s->notify_fd, out, n_out - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        return 1;
}

/* A datagram socket connected to $NOTIFY_SOCKET ("@" marks an abstract name), or -1. */
static int notify_socket_connect(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *e = getenv("NOTIFY_SOCKET");
        _cleanup_close_ int fd = -1;
        size_t len;

        if (!e || (e[0] != '/' && e[0] != '@'))
                return -1;
        len = strlen(e);
        if (len >= sizeof sa.sun_path)
                return -1;
        memcpy(sa.sun_path, e, len);
        if (e[0] == '@')
                sa.sun_path[0] = '\0';
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        if (connect(fd, (struct sockaddr *) &sa,
                    (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len + (e[0] == '/' ? 1 : 0))) < 0) {
                log_warning_errno(errno, "Cannot connect to NOTIFY_SOCKET %s: %m", e);
                return -1;
        }
        return TAKE_FD(fd);
}

/* The daemon removes its socket at exit, but inside the sandbox the path means something else:
 * the supervisor removes it (its root is the socket's directory), if no other daemon has taken
 * the path over meanwhile. */
static void remove_socket(Supervisor *s) {
        _cleanup_close_ int fd = -1;

        /* Our own lock first: the same file opened again below must get it. In between another
         * daemon may take the path; then the files are its own and stay. */
        s->lock_fd = safe_close(s->lock_fd);
        if (!s->socket_name)
                return;
        fd = open(s->lock_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
                return;
        (void) unlink(s->socket_name);
        (void) unlink(s->lock_name);
}

/* Issue 13 item 8: the supervisor reads what the sandboxed daemon sends, so a taken-over daemon
 * must find nothing here either. Its root becomes the socket's directory (all it touches later),
 * it keeps no capability (uid 0 may still signal the daemon, also uid 0, and unlink in a
 * directory root owns), no-new-privs, and an allowlist of its own. */
static int supervisor_lockdown(Supervisor *s, const char *socket_path, SyscallFilter filter) {
        /* Not root, or --sandbox=none (the service manager sandboxes, and may not grant
         * CAP_SYS_CHROOT): no chroot, see below. */
        bool no_chroot = geteuid() != 0 || s->mode == SANDBOX_NONE;
        int r;

        s->notify_fd = notify_socket_connect();
        if (socket_path) {
                _cleanup_free_ char *dir = strdup(socket_path);
                char *slash;
                const char *base;

                if (!dir)
                        return -ENOMEM;
                slash = strrchr(dir, '/');
                base = slash ? slash + 1 : dir;
                s->socket_name = strdup(base);
                if (!s->socket_name || asprintf(&s->lock_name, "%s.pid", base) < 0)
                        return -ENOMEM;
                if (slash == dir)
                        dir[1] = '\0';
                else if (slash)
                        *slash = '\0';
                if (no_chroot) {
                        /* An unprivileged supervisor cannot chroot (that takes CAP_SYS_CHROOT in
                         * the host's user namespace); it is the user itself, without capabilities,
                         * and its filter allows only these few calls: it works relative to the
                         * socket's directory instead. With --sandbox=none the daemon itself sees
                         * the whole host: a chroot here would confine nothing it cannot reach. */
                        if (chdir(slash ? dir : ".") < 0)
                                return log_error_errno(errno, "Cannot enter %s: %m", slash ? dir : ".");
                } else if (chroot(slash ? dir : ".") < 0 || chdir("/") < 0)
                        return log_error_errno(errno, "Cannot confine the supervisor to %s: %m", slash ? dir : ".");
        }
        r = capabilities_apply(0, -1, -1);
        if (r < 0)
                return log_error_errno(r, "Cannot drop the supervisor's capabilities: %m");
        /* Not dumpable: a process of the same uid without CAP_SYS_PTRACE (the daemon as root
         * with --sandbox=none, which sees the host's /proc) cannot open our /proc/PID/mem and
         * rewrite the process that holds the bus connection and SOCK.pid. Not with the filter off:
         * the sanitizer runtimes, for which it is off by default, ptrace at exit. */
        if (filter != SYSCALL_FILTER_NONE && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return log_error_errno(errno, "Cannot make the supervisor non-dumpable: %m");
        r = seccomp_install_supervisor(filter, s->child, s->socket_name, s->control);
        if (r < 0)
                return log_error_errno(r, "Cannot install the supervisor's seccomp filter: %m");
        return 0;
}

/* Exits the way the daemon did: a signal death is re-raised so the service manager sees it. */
int sandbox_exit_like(int status) {
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

/* Starts the control plane while the supervisor still has its privileges (the bus connection is
 * made as the bus user and needs the user database). Returns the byte that tells the daemon to go
 * on: '1' with a control channel to serve on, '0' without. */
static char supervisor_start_control(Supervisor *s, int channel) {
        if (!s->control || channel < 0)
                return '0';
        if (s->control->start(s->control->userdata, channel) <= 0) {
                /* No control plane: the daemon serves without it (start() said why). */
                s->control = NULL;
                return '0';
        }
        return '1';
}

static int supervise(Supervisor *s, int ctl, int channel, const char *socket_path, SyscallFilter filter) {
        _cleanup_close_ int sfd = -1;
        pid_t child = s->child;
        sigset_t mask;
        char go;
        int r;

        sandbox_parent_signals(&mask);
        sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0) {
                (void) kill(child, SIGKILL);
                return log_error_errno(errno, "signalfd() failed: %m");
        }
        go = supervisor_start_control(s, channel);
        r = supervisor_lockdown(s, socket_path, filter);
        if (r < 0) {
                (void) kill(child, SIGKILL); /* fail closed: the daemon does not run unsupervised */
                return r;
        }
        /* The daemon waits for this: the instance's name is owned before it listens (bus.h). */
        if (send(ctl, &go, 1, MSG_NOSIGNAL) != 1) {
                (void) kill(child, SIGKILL);
                return log_error_errno(errno, "Cannot start the sandboxed daemon: %m");
        }
        for (;;) {
                struct pollfd p[2 + 4] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = ctl, .events = POLLIN },
                };
                size_t n = 2;
                struct signalfd_siginfo si;
                int status, timeout = -1;

                if (s->control)
                        n += s->control->watch(s->control->userdata, p + 2, ELEMENTSOF(p) - 2, &timeout);
                if (poll(p, n, timeout) < 0) {
                        if (errno == EINTR)
                                continue;
                        (void) kill(child, SIGKILL);
                        return log_error_errno(errno, "poll() failed: %m");
                }
                if (s->control)
                        s->control->dispatch(s->control->userdata);
                if (p[1].revents) {
                        while ((r = relay_forward_one(s, ctl)) > 0)
                                ;
                        if (r < 0)
                                ctl = -1; /* the daemon is done with the channel (or gone) */
                }
                while (read(sfd, &si, sizeof si) == sizeof si) {
                        if (si.ssi_signo == SIGCHLD)
                                continue;
                        /* The daemon handles TERM and INT; HUP ends it too, as in virtiofsd. */
                        (void) kill(child, si.ssi_signo == SIGHUP ? SIGTERM : (int) si.ssi_signo);
                }
                if (waitpid(child, &status, WNOHANG) == child) {
                        if (ctl >= 0)
                                while (relay_forward_one(s, ctl) > 0)
                                        ;
                        if (s->control)
                                s->control->stop(s->control->userdata);
                        keeper_clear();
                        remove_socket(s);
                        return sandbox_exit_like(status);
                }
        }
}

/* ---- the daemon's side ---- */

/* A supervisor's pid in LISTEN_PID / WATCHDOG_PID means "the daemon": that is now us. */
void sandbox_adopt_env_pid(const char *name, pid_t parent) {
        const char *v = getenv(name);
        char buf[32];

        snprintf(buf, sizeof buf, "%i", (int) parent);
        if (v && streq(v, buf)) {
                snprintf(buf, sizeof buf, "%i", (int) getpid());
                (void) setenv(name, buf, 1);
        }
}

/* unshare(CLONE_NEWNS) with *share_fd (main's one resolution of the share) carried over: the
 * working directory is the one path the kernel moves into the new namespace's copy of its mount, so
 * the share is entered first and "." opened again afterwards, the same directory on the copy. */
int sandbox_unshare_mounts(int *share_fd) {
        int fd;

        if (fchdir(*share_fd) < 0)
                return log_error_errno(errno, "Cannot enter the shared directory: %m");
        if (unshare(CLONE_NEWNS) < 0)
                return log_error_errno(errno, "Cannot create a mount namespace: %m");
        /* Slave, not private: mounts the host adds under the shared directory still appear (and
         * are announced as submounts); nothing we do propagates back. */
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                return log_error_errno(errno, "Cannot make the mount namespace a slave: %m");
        fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(errno, "Cannot open the shared directory in the new mount namespace: %m");
        safe_close(*share_fd);
        *share_fd = fd;
        return 0;
}

static int prepare_mounts(const char *shared_dir, int *share_fd, bool privileged_files) {
        int r, tree;

        r = sandbox_unshare_mounts(share_fd);
        if (r < 0)
                return r;
        /* /proc of the new pid namespace: /proc/self/fd (the filesystem layer re-opens inodes
         * through it) then shows only this daemon, and ".." from it leads nowhere outside. */
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME, NULL) < 0)
                return log_error_errno(errno, "Cannot mount /proc for the pid namespace: %m");
        /* The shared directory becomes a mount of its own, the future root: the root fd the
         * filesystem layer opens next is on it, so ".." from it stops at the sandbox's root. Made
         * from the fd, on the directory the fd is (the working directory), never from the path:
         * the tree's fd is the share from now on. */
        tree = open_tree(AT_FDCWD, ".", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (tree < 0)
                return log_error_errno(errno, "Cannot bind-mount %s: %m", shared_dir);
        if (move_mount(tree, "", AT_FDCWD, ".", MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                r = log_error_errno(errno, "Cannot bind-mount %s: %m", shared_dir);
                safe_close(tree);
                return r;
        }
        safe_close(*share_fd);
        *share_fd = tree;
        /* nosuid,nodev on the share and everything below it, in this namespace only (issue 13
         * item 10): defence in depth for the daemon's own opens (a device node is never opened
         * through it even if a check were missed). What protects host users is the passthrough
         * refusing device nodes (entries.c, inode-fd.c) and dropping set-id bits (attributes.c);
         * see docs/security.md. */
        if (!privileged_files &&
            mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE,
                          &(struct mount_attr){ .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV },
                          sizeof(struct mount_attr)) < 0)
                return log_error_errno(errno, "Cannot mount %s nosuid,nodev: %m", shared_dir);
        return 0;
}

/* fork() into a new user namespace (and, in namespace mode, a new pid namespace owned by it, whose
 * pid 1 the child is): an unprivileged process cannot unshare(CLONE_NEWPID) before a plain fork()
 * as root does, and clone() makes both at once. The raw system call because glibc's clone() wants a
 * function and a stack; we are single-threaded here (sandbox_prepare() runs before any thread), so
 * nothing of fork()'s at-fork work is missed. glibc's cached thread id of the main thread stays the
 * parent's: nothing in the daemon signals its main thread through pthread_kill(). */
static pid_t clone_into_userns(SandboxMode mode) {
        unsigned long flags = CLONE_NEWUSER | SIGCHLD;

        if (mode == SANDBOX_NAMESPACE)
                flags |= CLONE_NEWPID;
        return (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, 0);
}

/* Closes every fd from 3 up except the n in keep (the supervisor's: nothing the daemon serves
 * stays open there). */
static void close_all_but(const int *keep, size_t n) {
        unsigned from = 3;

        for (;;) {
                unsigned next = ~0U;
                for (size_t i = 0; i < n; i++)
                        if (keep[i] >= (int) from && (unsigned) keep[i] < next)
                                next = (unsigned) keep[i];
                if (next > from)
                        (void) close_range(from, next == ~0U ? ~0U : next - 1, 0);
                if (next == ~0U)
                        return;
                from = next + 1;
        }
}

int sandbox_prepare(SandboxMode mode, const char *shared_dir, int *share_fd, const char *socket_path,
                    SyscallFilter filter, bool privileged_files, const IdMapList *uid_map, const IdMapList *gid_map, int *lock_fd,
                    const SupervisorControl *control, int *ret_control_fd, int *ret_exit_status) {
        sigset_t mask, old;
        int ctl[2], chan[2] = { -1, -1 };
        pid_t parent = getpid(), child;
        bool userns;
        char go;
        int r;

        *ret_control_fd = -1;
        userns = mode != SANDBOX_NONE && userns_wanted(uid_map, gid_map);
        if (mode == SANDBOX_NAMESPACE && !userns && unshare(CLONE_NEWPID) < 0)
                return log_error_errno(errno, "--sandbox=namespace: cannot create a pid namespace: %m "
                                              "(needs CAP_SYS_ADMIN; use --sandbox=chroot in a container, "
                                              "or --sandbox=none when the service manager sandboxes vufsd)");
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
                return log_error_errno(errno, "socketpair() failed: %m");
        /* The control channel: a stream the daemon serves its object on (bus.c), the supervisor's
         * end relays it to the bus (control-relay.c). */
        if (control && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) < 0) {
                r = log_error_errno(errno, "socketpair() failed: %m");
                safe_close(ctl[0]);
                safe_close(ctl[1]);
                return r;
        }

        /* Blocked before the fork: a SIGTERM arriving right after it is forwarded, not lost. */
        sandbox_parent_signals(&mask);
        sigprocmask(SIG_BLOCK, &mask, &old);

        child = userns ? clone_into_userns(mode) : fork();
        if (child < 0) {
                if (userns)
                        r = log_error_errno(errno,
                                            "--sandbox=%s: cannot create a user namespace: %m (are user "
                                            "namespaces disabled, sysctl user.max_user_namespaces=0 or a "
                                            "container's seccomp policy? Use --sandbox=none when the "
                                            "service manager sandboxes vufsd)",
                                            sandbox_mode_to_string(mode));
                else
                        r = log_error_errno(errno, "fork() failed: %m");
                sigprocmask(SIG_SETMASK, &old, NULL);
                safe_close(ctl[0]);
                safe_close(ctl[1]);
                safe_close(chan[0]);
                safe_close(chan[1]);
                return r;
        }
        /* Taken by the fork: the supervisor keeps the lock, the daemon closes its copy. */
        int lock = TAKE_FD(*lock_fd);
        if (child > 0) {
                Supervisor s = { .child = child, .mode = mode, .notify_fd = -1, .lock_fd = lock,
                                 .control = control };
                const int keep[] = { ctl[0], chan[0], lock };

                safe_close(ctl[1]);
                safe_close(chan[1]);
                if (userns) {
                        /* The child waits for its maps: until they exist it has no usable ids. */
                        r = userns_write_maps(child, uid_map, gid_map);
                        if (r < 0) {
                                (void)kill(child, SIGKILL);
                                (void)waitpid(child, NULL, 0);
                                sigprocmask(SIG_SETMASK, &old, NULL);
                                safe_close(ctl[0]);
                                safe_close(chan[0]);
                                return r;
                        }
                }
                /* Nothing the daemon serves stays open here. */
                close_all_but(keep, ELEMENTSOF(keep));
                r = supervise(&s, ctl[0], chan[0], socket_path, filter);
                safe_close(ctl[0]);
                safe_close(s.notify_fd);
                safe_close(s.lock_fd);
                free(s.socket_name);
                free(s.lock_name);
                if (r < 0)
                        return r;
                *ret_exit_status = r;
                return 0;
        }

        /* The daemon. It must not outlive the supervisor (systemd tracks the supervisor). */
        safe_close(ctl[0]);
        safe_close(chan[0]);
        /* The pid file is the supervisor's alone: a taken-over daemon must not rewrite the pid a
         * launcher kills by (issue 31 finding 10). */
        safe_close(lock);
        control_fd = ctl[1];
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* No byte: the supervisor failed (and kills us) or died. It sends one once its maps are
         * written (user namespace) and the instance's bus name is owned: '1' when there is a
         * control channel to serve, '0' when not. */
        if (recv(control_fd, &go, 1, 0) != 1)
                _exit(EXIT_FAILURE);
        if (go == '1')
                *ret_control_fd = TAKE_FD(chan[1]);
        else
                safe_close(chan[1]);
        if (userns) {
                r = userns_become_root();
                if (r < 0)
                        return r;
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
        sandbox_adopt_env_pid("LISTEN_PID", parent);
        sandbox_adopt_env_pid("WATCHDOG_PID", parent);
        if (mode == SANDBOX_NAMESPACE) {
                r = prepare_mounts(shared_dir, share_fd, privileged_files);
                if (r < 0)
                        return r;
        } else if (userns) {
                /* chroot mode in a user namespace: a mount namespace of its own (owned by the
                 * user namespace) lets the passthrough detach /proc/self/fd from the rest of /proc
                 * (open_tree() needs CAP_SYS_ADMIN over the mount namespace), which an
                 * unprivileged chroot could not otherwise do. */
                r = sandbox_unshare_mounts(share_fd);
                if (r < 0)
                        return r;
        }
        return 1;
}

/* Service-manager notifications (issue 13 item 9): after the lockdown the daemon may not create
 * sockets, so they go over one that exists already: the supervisor channel, in every mode (the
 * supervisor is the main process the service manager knows, and passes READY, STATUS, WATCHDOG
 * and the like on). */
int sandbox_notify(const char *state) {
        if (control_fd < 0)
                return sd_notify(false, state); /* before sandbox_prepare() */
        if (send(control_fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                return -errno;
        return 1;
}

/* sd-event's own watchdog support pings through sd_notify(), which needs socket(): this timer
 * pings through sandbox_notify() instead, at half the service manager's interval, and once right
 * away: a serving process that took over from one that died (--crash-restarts) must not wait half
 * the interval, or deaths closer together than that starve the watchdog and the service manager
 * kills the unit (the systemd suite's crash case saw it after five kills 5 s apart). */
static uint64_t watchdog_usec;

static int on_watchdog(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) sandbox_notify("WATCHDOG=1");
        if (sd_event_source_set_time_relative(s, watchdog_usec / 2) < 0)
                return 0;
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

int sandbox_watchdog_attach(sd_event *e) {
        uint64_t usec = 0;
        int r = sd_watchdog_enabled(false, &usec);

        if (r <= 0)
                return r;
        watchdog_usec = usec;
        return sd_event_add_time_relative(e, NULL, CLOCK_MONOTONIC, 0, 0, on_watchdog, NULL);
}

int sandbox_notifyf(const char *format, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int r;

        va_start(ap, format);
        r = vasprintf(&s, format, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        return sandbox_notify(s);
}

/* The new root is the share's fd (the mount prepare_mounts() made of it, in namespace mode), never
 * its path again; checked afterwards against that fd, mount included. */
static int enter_root(SandboxMode mode, const char *shared_dir, int share_fd) {
        struct statx want, got;
        unsigned mask = STATX_INO | STATX_MNT_ID;

        if (statx(share_fd, "", AT_EMPTY_PATH, mask, &want) < 0)
                return log_error_errno(errno, "Cannot stat %s: %m", shared_dir);
        if (fchdir(share_fd) < 0)
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
        if (chdir("/") < 0 || statx(AT_FDCWD, "/", 0, mask, &got) < 0)
                return log_error_errno(errno, "Cannot enter the new root: %m");
        if (got.stx_dev_major != want.stx_dev_major || got.stx_dev_minor != want.stx_dev_minor ||
            got.stx_ino != want.stx_ino || (got.stx_mask & want.stx_mask & STATX_MNT_ID && got.stx_mnt_id != want.stx_mnt_id))
                return log_error_errno(EXDEV, "The sandbox's root is not %s", shared_dir);
        return 0;
}

int sandbox_enter(SandboxMode mode, const char *shared_dir, int share_fd) {
        int r;

        /* Nothing may call sd_notify() any more: it would create a socket. */
        (void) unsetenv("NOTIFY_SOCKET");
        if (mode == SANDBOX_NONE)
                return 0;
        if (mode == SANDBOX_CHROOT) {
                /* The passthrough's /proc/self/fd is an anonymous mount only with CAP_SYS_ADMIN;
                 * without it ".." from it leads to the host's /proc and root. */
                _cleanup_close_ int probe =
                        (int) syscall(SYS_open_tree, AT_FDCWD, "/proc/self/fd", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (probe < 0)
                        log_warning("--sandbox=chroot without CAP_SYS_ADMIN: /proc/self/fd cannot be cut off "
                                    "from the rest of /proc and the host's root; a taken-over daemon is not "
                                    "contained (docs/security.md)");
        }
        if (mode == SANDBOX_NAMESPACE) {
                /* Late, not in sandbox_prepare(): the D-Bus connection may use an abstract socket of
                 * the host's network namespace; connections made before keep working. */
                if (unshare(CLONE_NEWNET) < 0)
                        return log_error_errno(errno, "Cannot create a network namespace: %m");
                netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
                if (netns_fd < 0)
                        return log_error_errno(errno, "Cannot open the new network namespace: %m");
        }
        r = enter_root(mode, shared_dir, share_fd);
        if (r < 0)
                return r;
        log_debug("Sandbox: %s, root %s", sandbox_mode_to_string(mode), shared_dir);
        return 0;
}
