/* harness.h: temporary directory, shared dir and socket for a backend under test. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "frontend.h"
#include "fuse-client.h"

#define FE_VIRTIOFSD_PATH "/usr/lib/qemu/virtiofsd"

typedef struct FeHarness {
        char *dir;              /* mkdtemp directory, removed with everything in it */
        char *share;            /* dir/share: the shared directory */
        char *socket_path;      /* dir/vhost.sock */
        FeBackend *backend;
} FeHarness;

int fe_harness_new(FeHarness **ret);
/* Stops the backend (SIGTERM, then SIGKILL) and removes the directory. */
FeHarness *fe_harness_free(FeHarness *h);

/* Starts $VUFSD_BINARY --socket-path SOCK --shared-dir SHARE [extra...]; extra is NULL-terminated or NULL.
 * -ENOENT if VUFSD_BINARY is not set. */
int fe_harness_spawn_vufsd(FeHarness *h, const char *const *extra);
/* The unprivileged identity of the tests that run vufsd as an ordinary user. */
#define FE_NOBODY 65534
#define FE_NOBODY_STR "65534"
/* fe_harness_spawn_vufsd() as nobody (setpriv --reuid/--regid, no supplementary groups); in a
 * sanitizer build with --sandbox=namespace before extra, the sandbox of a normal build. */
int fe_harness_spawn_vufsd_as_nobody(FeHarness *h, const char *const *extra);
/* Gives the harness directory to nobody (0755) and the share to share_owner (user and group) with
 * share_mode, for a vufsd started by fe_harness_spawn_vufsd_as_nobody(). */
int fe_harness_give_dirs(FeHarness *h, uid_t share_owner, mode_t share_mode);
/* Connects a frontend to the started backend (10 s timeouts), negotiates, starts its queues and
 * sends FUSE INIT: the session most tests begin with. On failure the reason goes to stderr and
 * nothing is kept. */
int fe_harness_session(FeHarness *h, Frontend **ret_fe, FeFuse **ret_c);
/* Starts QEMU's C virtiofsd (root, chroot sandbox) on the same paths; -ENOENT if it is not installed. */
int fe_harness_spawn_virtiofsd(FeHarness *h);
/* Path of name inside the shared directory (static buffer per call site is the caller's problem: malloc'd). */
char *fe_harness_path(FeHarness *h, const char *name);
/* The process serving the guest: the supervisor's child when the sandbox forked one (read from
 * /proc/PID/task/PID/children), else the backend process itself. */
pid_t fe_harness_daemon_pid(const FeHarness *h);
/* The first child of pid (from /proc/PID/task/PID/children), 0 when it has none. */
pid_t fe_harness_first_child(pid_t pid);
/* With --crash-restarts: the serving process (supervisor -> spawner -> serving process), 0 when
 * there is none at the moment. */
pid_t fe_harness_serving_pid(const FeHarness *h);
/* Writes content to name in the shared directory (created or truncated); 0 or a negative errno. */
int fe_harness_put_file(FeHarness *h, const char *name, const char *content);
/* qsort() comparison of uint64_t (pauses, latencies: medians and worst cases). */
int fe_cmp_u64(const void *a, const void *b);
/* How many fds pid has open (the entries of /proc/PID/fd), or a negative errno. */
int fe_harness_count_fds(pid_t pid);
/* A "Field: N kB" line of /proc/PID/status (RssAnon, VmRSS), in kB, or -1 if absent or unreadable. */
long fe_harness_status_kb(pid_t pid, const char *field);

/* For a sanitizer build of the daemon sandboxed explicitly, called first in main() so that every
 * vufsd the test starts inherits it: LeakSanitizer's exit-time scan needs /proc and ptrace, which
 * the sandbox and the filter take away; the leak check is the unit tests' job there. Inline: it
 * depends on how the test itself is built. */
static inline void fe_harness_sanitizer_env(void) {
#if defined(__SANITIZE_ADDRESS__)
        const char *o = getenv("ASAN_OPTIONS");
        char buf[512];
        snprintf(buf, sizeof buf, "%s%sdetect_leaks=0", o ?: "", o && *o ? ":" : "");
        setenv("ASAN_OPTIONS", buf, 1);
#endif
}
