/* respawn.c: the spawner that starts a new serving process when one dies (sandbox.h,
 * docs/survival.md). It runs where sandbox_prepare() left the daemon: in its namespaces, before
 * the serving process locks itself down, so each new one goes through the same sandbox steps
 * (pivot_root, capabilities, seccomp) the first did. It reads nothing: no socket, no pipe, only
 * its signals and its child's wait status; the records and fds a new process resumes from are the
 * supervisor's (keeper.c). */
#include "sandbox.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "keeper.h"
#include "log.h"
#include "sandbox-internal.h"
#include "util.h"

static unsigned generation;
static uint64_t death_usec;

unsigned sandbox_generation(void) {
        return generation;
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

int sandbox_respawn(unsigned max_restarts, SandboxMode mode, int *share_fd, int *control_channel) {
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

        for (;;) {
                pid_t child;
                int status;

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
                        if (mode == SANDBOX_NAMESPACE)
                                return sandbox_unshare_mounts(share_fd) < 0 ? -1 : 1;
                        return 1;
                }
                for (;;) {
                        struct pollfd p = { .fd = sfd, .events = POLLIN };
                        struct signalfd_siginfo si;

                        if (waitpid(child, &status, WNOHANG) == child)
                                break;
                        if (poll(&p, 1, -1) < 0 && errno != EINTR)
                                return log_error_errno(errno, "poll() failed: %m");
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
                generation++;
        }
}
