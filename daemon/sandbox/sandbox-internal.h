/* sandbox-internal.h: what the files of daemon/sandbox/ share and nothing else uses. */
#pragma once

/* Logs a signal death, then exits the way a process with this wait status did (a signal is
 * raised again where it can be: not as pid 1 of a pid namespace, which gets 128 + signal). */
int sandbox_exit_like(int status);

#include <signal.h>
#include <sys/types.h>

/* TERM, INT, HUP (passed on to the child) and CHLD: what the supervisor and the spawner read
 * through a signalfd. */
void sandbox_parent_signals(sigset_t *ret);

/* A pid of parent in the environment variable name (LISTEN_PID, WATCHDOG_PID: "the daemon") is
 * the calling process's now. */
void sandbox_adopt_env_pid(const char *name, pid_t parent);

/* unshare(CLONE_NEWNS) with *share_fd carried over to the new namespace's copy of its mount. */
int sandbox_unshare_mounts(int *share_fd);
