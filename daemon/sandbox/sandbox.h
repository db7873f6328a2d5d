/* sandbox.h: confining the daemon to the shared directory (namespaces + pivot_root, or chroot).
 *
 * Two steps, because the daemon needs host paths while it starts (the listening socket, the D-Bus
 * socket) but must hold its filesystem handles inside the sandbox's mount namespace:
 *
 *   sandbox_prepare()  first thing after the configuration, before anything opens a file.
 *                      namespace: new pid namespace (the daemon forks; the original process stays
 *                      outside as a small supervisor), new mount namespace, a fresh /proc for the
 *                      new pid namespace and the shared directory bind-mounted onto itself
 *                      (nosuid,nodev), so the root fd and /proc/self/fd the filesystem layer opens
 *                      next already live where the daemon will be confined.
 *                      chroot: the supervisor fork only (signals, notifications, the socket).
 *                      Not root, or --uid-map/--gid-map given: the child is cloned into a new
 *                      user namespace (and its pid namespace) first; the supervisor writes its
 *                      maps (userns.h) before it goes on; in chroot mode it also gets a mount
 *                      namespace, for the detached /proc/self/fd.
 *                      The supervisor locks itself down before it reads anything from the daemon:
 *                      chroot to the socket's directory, no capabilities, no-new-privs, its own
 *                      seccomp allowlist.
 *   sandbox_enter()    right before the main loop: notifications switch to the supervisor channel
 *                      (or a socket connected to NOTIFY_SOCKET), new network namespace,
 *                      pivot_root into the shared directory (or chroot).
 *
 * Every failure is fatal to the caller (fail closed) and logged with what to do instead. */
#pragma once

#include <errno.h>
#include <stdbool.h>

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

/* Step 1 (see above). Returns 1 in the process that goes on to run the daemon; 0 in the supervisor
 * once the daemon has exited, with *ret_exit_status the status to exit with; negative errno (logged)
 * on failure. shared_dir must be the configured path. */
int sandbox_prepare(SandboxMode mode, const char *shared_dir, const char *socket_path, SyscallFilter filter,
                    bool privileged_files, const IdMapList *uid_map, const IdMapList *gid_map, int *ret_exit_status);

/* sd_notify() for the daemon: over the supervisor channel in the sandbox, over a socket connected
 * before the lockdown without one (the filter allows no socket()). */
int sandbox_notify(const char *state);
int sandbox_notifyf(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* WATCHDOG=1 at half of $WATCHDOG_USEC through sandbox_notify() (sd_event_set_watchdog() would
 * use sd_notify()). 0 when the service manager wants no watchdog. */
int sandbox_watchdog_attach(sd_event *e);

/* Step 2 (see above). Single-threaded or not: threads created after sandbox_prepare() share the
 * mount namespace; the network namespace is re-entered by every thread in capabilities_apply()'s
 * per-thread pass (see capabilities.h). */
int sandbox_enter(SandboxMode mode, const char *shared_dir);

/* The new network namespace (namespace mode, after sandbox_enter()), -1 otherwise: other threads
 * join it with setns(). */
int sandbox_netns_fd(void);
