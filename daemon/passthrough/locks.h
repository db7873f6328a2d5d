/* locks.h: POSIX (OFD-backed) and flock locks of the passthrough filesystem. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fs-ops.h"
#include "handle-map.h"
#include "inode-map.h"
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
