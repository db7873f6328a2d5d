/* attributes.h: an inode's attributes as the guest reads and changes them, and the set-id rules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fs-ops.h"
#include "inode-map.h"
#include "passthrough.h"

/* The host mode for the mode the guest gives an inode of type (S_IFMT bits): set-id bits
 * --privileged-files lets through; in map mode a regular file's are left to mapped-mode.h. */
mode_t guest_mode(const Passthrough *p, mode_t mode, mode_t type);
/* Clears setuid, and setgid when group-executable, as an unprivileged write or truncate would. */
int kill_suidgid(Passthrough *p, Inode *i, int io_fd);

/* FsOps.getattr, setattr, readlink and access. */
int pt_getattr(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, struct stat *ret);
int pt_setattr(void *fs, const FsCtx *c, uint64_t nodeid, const FsSetattr *a, struct stat *ret);
int pt_readlink(void *fs, const FsCtx *c, uint64_t nodeid, char *buf, size_t size);
int pt_access(void *fs, const FsCtx *c, uint64_t nodeid, int mask);
