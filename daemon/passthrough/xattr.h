/* xattr.h: extended attributes of the passthrough filesystem, and the security labels of new inodes. */
#pragma once

#include <sys/types.h>

#include "fs-ops.h"
#include "inode-map.h"
#include "passthrough.h"

/* Sets the request's security labels (FsCtx.labels) on a new inode, with the daemon's privileges. */
int xattr_set_labels(Passthrough *p, Inode *i, const FsCtx *c);

/* Removes the host attribute --xattrmap renamed security.capability to (FsOptions.capability_xattr)
 * on the events the host kernel removes the real one on: write, truncate, chown. io_fd: an I/O fd
 * of the inode, or -1. No-op without such a rename. */
int xattr_drop_capability(Passthrough *p, Inode *i, int io_fd);

/* FsOps.setxattr, getxattr, listxattr and removexattr. */
int pt_setxattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, const void *value, size_t size,
                int flags, bool kill_sgid);
ssize_t pt_getxattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name, void *buf, size_t size);
ssize_t pt_listxattr(void *fs, const FsCtx *c, uint64_t nodeid, void *buf, size_t size);
int pt_removexattr(void *fs, const FsCtx *c, uint64_t nodeid, const char *name);
