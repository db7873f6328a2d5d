/* locks.h: POSIX (OFD-backed) and flock locks of the passthrough filesystem. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fs-ops.h"
#include "handle-map.h"
#include "inode-map.h"
#include "lock-set.h"
#include "passthrough.h"

/* Drops the OFD lock fd of one lock owner (its POSIX locks go with it): FLUSH. */
void plock_drop_owner(Passthrough *p, Inode *i, uint64_t owner);
/* Drops every lock owner's locks taken through h, which was just released (RELEASE: the last
 * close of the guest's open file; OFD locks end there). Waits on h notice the release too. */
void plock_drop_handle(Passthrough *p, Handle *h);

/* FsOps.getlk and FsOps.setlk. */
int pt_getlk(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, FsLock *lk);
int pt_setlk(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t owner, const FsLock *lk, bool is_flock,
             bool wait);

/* ---- the locks of a saved session (state-save.c, state-load.c; rings stopped) ---- */

/* Calls fn for every lock owner with an entry on i: its owner, the fh it locks through, its OFD
 * (borrowed) and its ranges (borrowed, n may be 0), under the owner's lock; then, if it has
 * pending ranges, again with those (and its OFD only if it had no granted range, -1 otherwise). Stops at fn's first
 * negative return and returns it. */
int plock_foreach(Inode *i, int (*fn)(uint64_t owner, uint64_t fh, int fd, const LockRange *r, size_t n, void *ud),
                  void *ud);
/* The flock h holds as granted to the guest (or pending): F_UNLCK, F_RDLCK or F_WRLCK. */
short handle_flock_type(Handle *h);
/* Takes [start, end] (end LOCK_SET_EOF: to the end) of type for owner through h without waiting,
 * registered as a guest's SETLK registers it; fd: the owner's OFD handed over (taken over; its
 * locks come with it), or -1 to open one. When another open file holds a conflicting lock, the
 * range becomes pending (the guest holds it as far as it can tell; vufsd retries it until
 * locks_pending_begin()'s deadline) and 1 is returned; 0 when taken. */
int plock_restore(Passthrough *p, Handle *h, uint64_t owner, int fd, uint64_t start, uint64_t end, short type);
/* flock(LOCK_NB) of type through h, recorded; pending as above (1) on a conflict. */
int flock_restore(Passthrough *p, Handle *h, short type);

/* ---- pending locks: taken again after a migration's load once free (docs/migration.md) ---- */

int locks_pending_init(Passthrough *p);
void locks_pending_done(Passthrough *p);
/* The deadline of the locks that become pending from now on: timeout_usec from now. */
void locks_pending_begin(Passthrough *p, uint64_t timeout_usec);
