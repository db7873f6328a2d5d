/* host-permission.h: a guest caller's rights on an inode, judged on the host's current attributes. */
#pragma once

#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-ops.h"

/* The daemon opens and changes inodes with its own identity where acting as the caller would lose
 * the caller's supplementary groups, which FUSE carries only for creating requests. The guest
 * kernel checked the request (default_permissions), but on attributes it cached: the host may
 * have made the file another user's or private since. This is the host-side half of that check,
 * on the inode's current owner, group and mode; docs/security.md "Acting as the caller".
 *
 * need is R_OK, W_OK, X_OK or HOST_MAY_OWNER (the owner's changes: mode, owner, explicit times,
 * ACLs). Guest root (uid 0) may do everything, as the share's root acts as host root. For the
 * permission bits: the owner class when the caller owns the inode, the group class when the
 * request's gid or one of its groups is the inode's, else the group or the other class: a
 * supplementary group the request does not carry is the guest's to judge (the caller's groups are
 * guest state, not the file's). With an ACL the group class is its mask. -EPERM for a change only
 * the owner may make, -EACCES for missing permission bits. */
#define HOST_MAY_OWNER 010
int host_permission(const FsCtx *c, const struct statx *stx, int need);

/* Whether host_permission() can refuse c anything: not for guest root, whose requests then need no
 * statx for it (guest root's creates and removes stay as cheap as before). */
static inline bool host_permission_applies(const FsCtx *c) {
        return c->uid != 0;
}

/* What an open with these guest flags needs: read, write or both, write for O_TRUNC, and execute
 * instead of read for the kernel's open for execve() (__FMODE_EXEC). */
int host_open_need(int guest_flags);
