/* respawn.c: the spawner that starts a new serving process when one dies (sandbox.h,
 * docs/survival.md). It runs where sandbox_prepare() left the daemon: in its namespaces, before
 * the serving process locks itself down, so each new one goes through the same sandbox steps
 * (pivot_root, capabilities, seccomp) the first did. It reads nothing but (see below) one report
 * pipe of a binary started for an upgrade: no socket, only
 * its signals and its child's wait status; the records and fds a new process resumes from are the
 * supervisor's (keeper.c).
 *
 * Live upgrade: a serving process that exits with SANDBOX_EXIT_UPGRADE left its session with the
 * keeper; the next one is the binary now installed at vufsd's path, executed in a forked child
 * where a forked serving process would go on (same namespaces, same fds, before the share is
 * entered), so it enters the share and locks down as the first one did. The spawner itself keeps
 * its code: it reads no guest input. */
#include "sandbox.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "keeper.h"
#include "log.h"
#include "sandbox-internal.h"
#include "util.h"

static unsigned generation, restarts_done, upgrades_done, upgrade_failures;
static bool upgrading, executed;
/* An upgrade took over: from then on a serving process that dies is replaced by the binary at
 * vufsd's path again, not by a fork of the spawner's (older) code, so that a crash never brings back
 * the code an upgrade replaced (a security fix). */
static bool installed_runs;
static int report_fd = -1; /* in a binary executed for an upgrade: tells the spawner it took over */
static uint64_t death_usec;

unsigned sandbox_generation(void) {
        return generation;
}

unsigned sandbox_restarts(void) {
        return restarts_done;
}

unsigned sandbox_upgrades(void) {
        return upgrades_done;
}

unsigned sandbox_upgrade_failures(void) {
        return upgrade_failures;
}

bool sandbox_upgrading(void) {
        return upgrading;
}

bool sandbox_upgrade_executed(void) {
        return executed;
}

uint64_t sandbox_death_usec(void) {
        return death_usec;
}

static uint64_t mono_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

/* Why the serving process is gone, for the journal. */
static void describe_death(int status, char *buf, size_t size) {
        if (WIFEXITED(status))
                snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
        else
                snprintf(buf, size, "was killed by signal %s%s", sigabbrev_np(WTERMSIG(status)) ?: "?",
                         WCOREDUMP(status) ? " (core dumped)" : "");
}

/* A new control channel: the supervisor's relay gets one end, *channel becomes the other (the old
 * one closed: its stream may end in the middle of a message of the process that died). */
static int new_control_channel(int *channel) {
        char tag = KEEPER_TAG_CHANNEL;
        struct iovec iov = { &tag, 1 };
        int pair[2], r;

        *channel = safe_close(*channel);
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        r = keeper_send_fds(sandbox_channel_fd(), &iov, 1, &pair[0], 1);
        safe_close(pair[0]);
        if (r < 0) {
                safe_close(pair[1]);
                return r;
        }
        *channel = pair[1];
        return 0;
}

static int keep_across_exec(int fd) {
        int flags;

        if (fd < 0)
                return 0;
        flags = fcntl(fd, F_GETFD);
        if (flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0)
                return -errno;
        return 0;
}

/* In the forked child: executes the binary at ex->exe with what this child would serve with and
 * report, a pipe to the spawner: the new binary writes one byte to it once it has taken over
 * (sandbox_upgrade_took_over()); its end of file before that byte means it never did. Returns
 * only when the binary cannot be executed, after writing the errno (an int) to report. */
static int exec_next(const SandboxExec *ex, int share_fd, int control_channel, int report, bool restart) {
        char env[192];
        int r;

        snprintf(env, sizeof env, "%d,%d,%d,%d,%u,%u,%u,%u,%d,%d,%d,%" PRIu64, sandbox_channel_fd(), control_channel,
                 share_fd, ex->listen_fd, generation, restarts_done, upgrades_done, upgrade_failures, (int) getppid(),
                 report, restart ? 1 : 0, death_usec);
        r = keep_across_exec(report);
        if (r >= 0)
                r = keep_across_exec(sandbox_channel_fd());
        if (r >= 0)
                r = keep_across_exec(control_channel);
        if (r >= 0)
                r = keep_across_exec(share_fd);
        if (r >= 0)
                r = keep_across_exec(ex->listen_fd);
        if (r >= 0 && setenv(VUFSD_UPGRADE_ENV, env, 1) < 0)
                r = -errno;
        if (r >= 0) {
                execv(ex->exe, ex->argv);
                r = -errno;
        }
        (void) unsetenv(VUFSD_UPGRADE_ENV);
        if (write(report, &r, sizeof r) < 0) /* the spawner then sees end of file and the exit */
                log_debug_errno(errno, "Cannot report the failed execve(): %m");
        return r;
}

void sandbox_upgrade_took_over(void) {
        char ok = 'R';

        if (report_fd < 0)
                return;
        if (write(report_fd, &ok, 1) != 1)
                log_warning_errno(errno, "Cannot tell the spawner the upgrade took over: %m");
        report_fd = safe_close(report_fd);
}

int sandbox_take_upgrade_env(int *ret_control_channel, int *ret_share_fd, int *ret_listen_fd, pid_t *ret_main_pid) {
        const char *e = getenv(VUFSD_UPGRADE_ENV);
        int chan, control, share, listen_fd, main_pid, report, restart = 0;
        unsigned gen, restarts, upgrades, failures;
        uint64_t died = 0;

        if (!e)
                return 0;
        /* The last two fields (a restart after a death rather than an upgrade, and when the
         * process died) are newer: a spawner of an older vufsd leaves them out. */
        if (sscanf(e, "%d,%d,%d,%d,%u,%u,%u,%u,%d,%d,%d,%" SCNu64, &chan, &control, &share, &listen_fd, &gen,
                   &restarts, &upgrades, &failures, &main_pid, &report, &restart, &died) < 10 ||
            chan < 0 || share < 0 || gen == 0 || report < 0)
                return -EBADMSG;
        (void) unsetenv(VUFSD_UPGRADE_ENV);
        /* Close-on-exec again, as they were in the spawner. */
        for (int fd, i = 0; i < 5; i++)
                if ((fd = (int[]) { chan, control, share, listen_fd, report }[i]) >= 0)
                        (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
        sandbox_set_channel_fd(chan);
        report_fd = report;
        generation = gen;
        restarts_done = restarts;
        upgrades_done = upgrades;
        upgrade_failures = failures;
        upgrading = restart == 0;
        executed = true;
        death_usec = restart ? died : 0; /* CLOCK_MONOTONIC: the same clock across execve() */
        *ret_control_channel = control;
        *ret_share_fd = share;
        *ret_listen_fd = listen_fd;
        *ret_main_pid = main_pid;
        return 1;
}

int sandbox_respawn(unsigned max_restarts, SandboxMode mode, int *share_fd, int *control_channel,
                    const SandboxExec *exec) {
        uint64_t restarts[RESPAWN_MAX_RESTARTS] = {};
        unsigned n_restarts = 0, cursor = 0;
        _cleanup_close_ int sfd = -1;
        sigset_t mask, old;
        bool stopping = false;
        pid_t spawner;

        max_restarts = MIN(max_restarts, (unsigned) RESPAWN_MAX_RESTARTS);
        sandbox_parent_signals(&mask);
        sigprocmask(SIG_BLOCK, &mask, &old);
        sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                return log_error_errno(errno, "signalfd() failed: %m");
        /* The spawner keeps the privileges a new serving process starts with; nothing may take it
         * over: not dumpable (a process of its uid cannot open its memory or ptrace it), no new
         * privileges through execve(). */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return log_error_errno(errno, "Cannot lock the spawner down: %m");

        /* What the next serving process is: forked (the first, and after a death), the binary at
         * exec->exe (after an upgrade exit), or forked again with the session an upgrade left
         * (its binary could not be executed, or refused the session). */
        enum { NEXT_FORK, NEXT_EXEC, NEXT_EXEC_RESTART } next = NEXT_FORK;
        bool exec_restart = false; /* the child now running was executed for a restart */
        int report[2] = { -1, -1 };
        /* The new binary has not said yet that it took over: its death (any exit or signal) is a
         * failed upgrade, not a crash, and the running code takes over. */
        bool unconfirmed = false;

        for (;;) {
                pid_t child;
                int status;

                if (next != NEXT_FORK && pipe2(report, O_CLOEXEC) < 0) {
                        log_error_errno(errno, "Live upgrade: pipe2() failed: %m; the running code takes over");
                        next = NEXT_FORK;
                }
                if (generation > 0 && *control_channel >= 0 && new_control_channel(control_channel) < 0)
                        log_warning("No control channel for the next serving process: it serves without the bus");
                spawner = getpid();
                child = fork();

                if (child < 0)
                        return log_error_errno(errno, "Cannot start a serving process: %m");
                if (child == 0) {
                        sfd = safe_close(sfd);
                        sigprocmask(SIG_SETMASK, &old, NULL);
                        /* Dies with the spawner; dumpable again (its core is the useful one). */
                        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                        (void) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
                        /* Socket activation and the watchdog name the daemon by pid: this one. */
                        sandbox_adopt_env_pid("LISTEN_PID", spawner);
                        sandbox_adopt_env_pid("WATCHDOG_PID", spawner);
                        /* A mount namespace of its own: its pivot_root and the detaching of the
                         * old root must not change the spawner's, from which the next serving
                         * process starts the same way. */
                        if (mode == SANDBOX_NAMESPACE && sandbox_unshare_mounts(share_fd) < 0)
                                return -1;
                        if (next != NEXT_FORK) {
                                int r;

                                report[0] = safe_close(report[0]);
                                r = exec_next(exec, *share_fd, *control_channel, report[1], next == NEXT_EXEC_RESTART);
                                report[1] = safe_close(report[1]);
                                /* The running code serves on, with the session the upgrade left. */
                                log_error_errno(r, "%s: cannot execute %s: %m; the running vufsd takes over "
                                                   "the guest's session instead",
                                                next == NEXT_EXEC ? "Live upgrade" : "Restart", exec->exe);
                                if (next == NEXT_EXEC) {
                                        upgrades_done--;
                                        upgrade_failures++;
                                }
                        }
                        return 1;
                }
                report[1] = safe_close(report[1]);
                unconfirmed = next != NEXT_FORK;
                exec_restart = next == NEXT_EXEC_RESTART;
                next = NEXT_FORK;
                for (;;) {
                        struct pollfd p[2] = { { .fd = sfd, .events = POLLIN }, { .fd = report[0], .events = POLLIN } };
                        struct signalfd_siginfo si;

                        if (waitpid(child, &status, WNOHANG) == child)
                                break;
                        if (poll(p, report[0] >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
                                return log_error_errno(errno, "poll() failed: %m");
                        /* The one thing the spawner reads from a child, and only from one it started
                         * for an upgrade: one byte (took over), an int (the execve() failed, the
                         * child goes on as the running code), or end of file (it is dying). */
                        if (report[0] >= 0 && p[1].revents) {
                                int word = 0;
                                ssize_t n = read(report[0], &word, sizeof word);

                                if (n < 0 && errno == EINTR)
                                        continue;
                                if (n == 1) {
                                        unconfirmed = false;
                                        installed_runs = true;
                                } else if (n == (ssize_t) sizeof word) {
                                        unconfirmed = false;
                                        if (!exec_restart) {
                                                upgrades_done--;
                                                upgrade_failures++;
                                        }
                                }
                                report[0] = safe_close(report[0]);
                        }
                        while (read(sfd, &si, sizeof si) == sizeof si) {
                                if (si.ssi_signo == SIGCHLD)
                                        continue;
                                /* Passed on as the supervisor does: the process ends, and it is not
                                 * started again. */
                                stopping = true;
                                (void) kill(child, si.ssi_signo == SIGHUP ? SIGTERM : (int) si.ssi_signo);
                        }
                }
                death_usec = mono_usec();
                report[0] = safe_close(report[0]);
                if (!stopping && unconfirmed && exec_restart) {
                        char why[64];

                        /* The installed binary cannot serve the guest after a death: the running
                         * code does (the death itself was counted). */
                        describe_death(status, why, sizeof why);
                        log_error("The vufsd at %s (pid %d) %s before it took over the guest's session after a "
                                  "restart; the running vufsd takes over instead",
                                  exec->exe, (int) child, why);
                        unconfirmed = false;
                        generation++;
                        continue;
                }
                if (!stopping && unconfirmed) {
                        char why[64];

                        describe_death(status, why, sizeof why);
                        log_error("The new vufsd (pid %d) %s before it took over the guest's session (its reason, if "
                                  "it gave one, is above); the running vufsd takes over instead",
                                  (int) child, why);
                        unconfirmed = false;
                        upgrades_done--;
                        upgrade_failures++;
                        generation++;
                        continue;
                }
                if (!stopping && WIFEXITED(status) && WEXITSTATUS(status) == SANDBOX_EXIT_UPGRADE) {
                        /* Not a crash: not counted against max_restarts. */
                        upgrades_done++;
                        upgrading = true;
                        generation++;
                        if (exec && exec->exe) {
                                log_info("The serving process (pid %d) stopped for an upgrade; starting %s",
                                         (int) child, exec->exe);
                                next = NEXT_EXEC;
                        } else {
                                log_error("The serving process (pid %d) stopped for an upgrade, but vufsd's path is "
                                          "unknown; the running vufsd takes over the guest's session", (int) child);
                                upgrades_done--;
                                upgrade_failures++;
                        }
                        continue;
                }
                if (stopping || WIFEXITED(status))
                        _exit(sandbox_exit_like(status));
                {
                        char why[64];
                        unsigned recent = 0;

                        describe_death(status, why, sizeof why);
                        for (unsigned i = 0; i < n_restarts; i++)
                                recent += death_usec - restarts[i] < RESPAWN_WINDOW_SEC * 1000000ULL;
                        if (recent >= max_restarts) {
                                log_error("The serving process (pid %d) %s; it was restarted %u times within %u s, "
                                          "giving up", (int) child, why, recent, RESPAWN_WINDOW_SEC);
                                _exit(sandbox_exit_like(status));
                        }
                        restarts[cursor] = death_usec;
                        cursor = (cursor + 1) % RESPAWN_MAX_RESTARTS;
                        n_restarts = MIN(n_restarts + 1, (unsigned) RESPAWN_MAX_RESTARTS);
                        log_error("The serving process (pid %d) %s; starting another (restart %u of %u within %u s)",
                                  (int) child, why, recent + 1, max_restarts, RESPAWN_WINDOW_SEC);
                }
                restarts_done++;
                upgrading = false;
                generation++;
                if (installed_runs && exec && exec->exe)
                        next = NEXT_EXEC_RESTART;
        }
}
