/* sandbox.h: confining the daemon to the shared directory (namespaces + pivot_root, or chroot).
 *
 * Two steps, because the daemon needs host paths while it starts (the listening socket, the D-Bus
 * socket) but must hold its filesystem handles inside the sandbox's mount namespace:
 *
 *   sandbox_prepare()  first thing after the configuration, before anything opens a file.
 *                      namespace: new pid namespace (the daemon forks; the original process stays
 *                      outside as a small supervisor), new mount namespace, a fresh /proc for the
 *                      new pid namespace and the shared directory bind-mounted onto itself
 *                      (nosuid,nodev; made from the fd main resolved the path to, issue 31
 *                      finding 8), so the root fd and /proc/self/fd the filesystem layer opens
 *                      next already live where the daemon will be confined.
 *                      chroot: the supervisor fork only (signals, notifications, the socket).
 *                      none: the supervisor fork too, without chroot for the supervisor: it
 *                      holds SOCK.pid and the control plane in every mode (issue 31).
 *                      Not root, or --uid-map/--gid-map given: the child is cloned into a new
 *                      user namespace (and its pid namespace) first; the supervisor writes its
 *                      maps (userns.h) before it goes on; in chroot mode it also gets a mount
 *                      namespace, for the detached /proc/self/fd.
 *                      The supervisor locks itself down before it reads anything from the daemon:
 *                      chroot to the socket's directory, no capabilities, no-new-privs, not
 *                      dumpable, its own seccomp allowlist.
 *   sandbox_enter()    right before the main loop: NOTIFY_SOCKET unset (notifications go over
 *                      the supervisor channel), new network namespace, pivot_root into the
 *                      shared directory's fd (or chroot), never its path.
 *
 * Every failure is fatal to the caller (fail closed) and logged with what to do instead. */
#pragma once

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "seccomp-filter.h"
#include "userns.h"

typedef enum SandboxMode {
        SANDBOX_NONE,
        SANDBOX_CHROOT,
        SANDBOX_NAMESPACE,
        _SANDBOX_MODE_MAX,
        _SANDBOX_MODE_INVALID = -EINVAL,
} SandboxMode;

const char *sandbox_mode_to_string(SandboxMode m);
SandboxMode sandbox_mode_from_string(const char *s);

/* The mode when none is configured: namespace, also unprivileged (in a user namespace of its own,
 * see userns.h). Sanitizer builds default to none:
 * the sanitizer runtimes read /proc and ptrace threads at exit, which the sandbox forbids. */
SandboxMode sandbox_mode_default(void);

/* What the supervisor runs besides signals and notifications: the control plane (the D-Bus
 * connection, daemon/control-relay.c). It handles no guest input, so it lives outside the serving
 * process, which keeps only its end of a socket pair (the control channel) and no bus connection
 * at all (issue 31 findings 3 and 9). The callbacks run in the supervisor only. */
typedef struct SupervisorControl {
        void *userdata;
        /* After the fork, before the supervisor locks itself down (it may still switch ids and read
         * the user database). channel: the supervisor's end of the control channel, taken (closed
         * when there is none). 1: the control plane is up; 0: none (logged; the daemon serves
         * without it). */
        int (*start)(void *userdata, int channel);
        /* The fds to watch (at most n) and a timeout in ms (-1: none); returns how many. */
        size_t (*watch)(void *userdata, struct pollfd *fds, size_t n, int *ret_timeout_ms);
        /* Something was ready, or the timeout passed. */
        void (*dispatch)(void *userdata);
        /* The daemon is gone: let go of the name and the connection. */
        void (*stop)(void *userdata);
        /* A serving process started after a death serves the object on a new channel (taken): the
         * old one may end in the middle of a message (--crash-restarts, docs/survival.md). */
        void (*reopen)(void *userdata, int channel);
} SupervisorControl;

/* Step 1 (see above). Returns 1 in the process that goes on to run the daemon; 0 in the supervisor
 * once the daemon has exited, with *ret_exit_status the status to exit with; negative errno (logged)
 * on failure. shared_dir is the configured path, for messages only; *share_fd the share as main
 * resolved it (share-dir.h), replaced by an fd of the same directory in the new mount namespace
 * (namespace mode: the root of the mount made of it, the future root). Every mode forks a
 * supervisor, --sandbox=none too (no namespaces there, no chroot for the supervisor): only it
 * writes and holds the socket's SOCK.pid (*lock_fd, -1 without one; taken at the fork: set to -1,
 * the daemon's copy closed) and removes the socket files, and only it holds the control plane
 * (control, NULL for none). *ret_control_fd is the daemon's end of the control channel, -1 when
 * there is no control plane. */
int sandbox_prepare(SandboxMode mode, const char *shared_dir, int *share_fd, const char *socket_path,
                    SyscallFilter filter, bool privileged_files, const IdMapList *uid_map, const IdMapList *gid_map,
                    int *lock_fd, const SupervisorControl *control, int *ret_control_fd, int *ret_exit_status);

/* sd_notify() for the daemon: over the supervisor channel (the filter allows no socket()). */
int sandbox_notify(const char *state);
int sandbox_notifyf(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* WATCHDOG=1 at once and then at half of $WATCHDOG_USEC through sandbox_notify()
 * (sd_event_set_watchdog() would use sd_notify()). 0 when the service manager wants no watchdog. */
int sandbox_watchdog_attach(sd_event *e);

/* Step 2 (see above). Single-threaded or not: threads created after sandbox_prepare() share the
 * mount namespace; the network namespace is re-entered by every thread in capabilities_apply()'s
 * per-thread pass (see capabilities.h). */
int sandbox_enter(SandboxMode mode, const char *shared_dir, int share_fd);

/* The new network namespace (namespace mode, after sandbox_enter()), -1 otherwise: other threads
 * join it with setns(). */
int sandbox_netns_fd(void);

/* The daemon's end of the supervisor channel (-1 before sandbox_prepare()): keeper.c's records
 * travel over it. */
int sandbox_channel_fd(void);
/* The same, handed over by the spawner to a binary it executed (sandbox_take_upgrade_env()). */
void sandbox_set_channel_fd(int fd);

/* Crash survival (docs/survival.md), in the process sandbox_prepare() returned 1 in, before it does
 * anything else: that process stays as the spawner and forks the serving process, which returns 1
 * here and goes on as the daemon. When a serving process dies of a signal the spawner forks
 * another within milliseconds (at most max_restarts within RESPAWN_WINDOW_SEC, then it gives up
 * and exits as the process did, saying why); one that exits, or that it passed SIGTERM or SIGINT
 * on to, ends it the same way. Never returns in the spawner. */
#define RESPAWN_WINDOW_SEC 60
#define RESPAWN_MAX_RESTARTS 64
/* Live upgrade (docs/survival.md "Live upgrade"): a serving process that exits with
 * SANDBOX_EXIT_UPGRADE has left its session with the keeper; the spawner then starts the binary at
 * exe (recorded by main() at start) with argv and VUFSD_UPGRADE_ENV in its environment, which names
 * the fds a forked serving process would have inherited (sandbox_take_upgrade_env() in the new
 * main()). A new binary that refuses the session exits with SANDBOX_EXIT_UPGRADE_REFUSED; then, as
 * when it cannot be executed at all or ends in any way before it says it took over
 * (sandbox_upgrade_took_over()), the running code is forked with the same session. Neither counts
 * as a crash. */
#define SANDBOX_EXIT_UPGRADE 120
#define SANDBOX_EXIT_UPGRADE_REFUSED 121
#define VUFSD_UPGRADE_ENV "VUFSD_UPGRADE_FDS"
typedef struct SandboxExec {
        const char *exe;   /* NULL: upgrades fall back to the running code */
        char *const *argv;
        int listen_fd;     /* main()'s listening socket (--socket-path), -1 when none */
} SandboxExec;
/* *control_channel: the daemon's end of the control channel (-1: none); each process after the
 * first gets a new one, whose other end goes to the supervisor's control plane. */
int sandbox_respawn(unsigned max_restarts, SandboxMode mode, int *share_fd, int *control_channel,
                    const SandboxExec *exec);
/* In main() of a binary the spawner executed for an upgrade (VUFSD_UPGRADE_ENV set): takes the fds
 * it names (supervisor channel, control channel, share, listening socket; close-on-exec again) and
 * the counters, and removes the variable. 0 when it is not set, 1 when taken, -EBADMSG when it is
 * malformed. */
int sandbox_take_upgrade_env(int *ret_control_channel, int *ret_share_fd, int *ret_listen_fd, pid_t *ret_main_pid);
/* 0 in the first serving process, n in the one started after the n-th death or upgrade. */
unsigned sandbox_generation(void);
/* Deaths by a signal, upgrades done, and upgrades that fell back to the running code, so far. */
unsigned sandbox_restarts(void);
unsigned sandbox_upgrades(void);
unsigned sandbox_upgrade_failures(void);
/* Whether this serving process was started by an upgrade (the new binary, or the fallback). */
bool sandbox_upgrading(void);
/* Whether this process is a binary the spawner executed for an upgrade (not the running code
 * forked as the fallback). */
bool sandbox_upgrade_executed(void);
/* In that binary, once it serves the guest's session: tells the spawner (until then its death is
 * a failed upgrade, and the running code takes over). */
void sandbox_upgrade_took_over(void);
/* CLOCK_MONOTONIC µs when the previous serving process was found dead (0 in the first). */
uint64_t sandbox_death_usec(void);
