/* survive.h: crash survival, the serving process's side (docs/survival.md): what it keeps in the
 * supervisor (keeper.h) while it serves, and how the process started after its death takes over. */
#pragma once

#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct Manager Manager;

/* Turned on by the manager when --crash-restarts is given (then the keeper exists). */
void survive_enable(bool on);
bool survive_enabled(void);

/* After each change of the frontend's configuration (a vhost-user message, a connection accepted
 * or lost): the device's record and fds, and the connection, replace what the keeper had. */
void survive_checkpoint(Manager *m);
/* A FUSE_INIT the server accepted (header and the argument bytes the guest sent, at most n): the
 * next process replays it, so the guest's session goes on without a second INIT. Any thread. */
void survive_note_init(const struct fuse_in_header *h, const void *args, size_t n);
/* In a process started after a death (sandbox_generation() > 0), before the loop runs: replays the
 * session, configures the device as the keeper's record says (rings resumed from their in-flight
 * tables) and serves the kept connection. 1: resumed; 0: nothing was kept (no frontend yet). */
int survive_resume(Manager *m);

/* A test build's hooks into the device (tests/frontend/test-hooks.c, linked into vufsd-test-hooks
 * only); in vufsd a weak definition that does nothing, so nothing of it is reachable there. */
typedef struct Device Device;
void survive_test_hooks_install(Device *d);
