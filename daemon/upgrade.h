/* upgrade.h: live upgrade, the serving process's side (docs/survival.md "Live upgrade"). Upgrade()
 * stops the rings at a quiescent point, hands the guest's session (nodes with their fds, open
 * handles with theirs, directory streams) to the keeper as one session-state stream (the
 * serializer live migration uses, session-state.h) in a sealed memfd, and ends the process with
 * SANDBOX_EXIT_UPGRADE; the spawner starts the binary now at vufsd's path, which takes over the
 * connection and rings as after a crash (survive.h) and restores the session before it serves. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct Manager Manager;

/* Only on the main thread, between two events. 0: the session is with the keeper and the loop
 * exits with SANDBOX_EXIT_UPGRADE; the caller answers its D-Bus call first. Negative errno with
 * the reason in err otherwise (-EOPNOTSUPP: no spawner, i.e. no --crash-restarts), and the rings
 * run on. */
int upgrade_start(Manager *m, char *err, size_t errlen);

/* In a serving process started after an upgrade (sandbox_upgrading()), after the FUSE session was
 * replayed and before the rings resume: restores the nodes and handles under the same ids, and
 * empties the keeper's upgrade slots. 1: restored; 0: no session was left (the guest had none);
 * negative: it cannot be used (the reason logged). */
int upgrade_resume(Manager *m);
