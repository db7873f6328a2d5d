/* beneath.h: host opens that stay beneath the share root (docs/security.md "Paths beneath the
 * share"). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "fd-budget.h"
#include "inode-map.h"

/* How many levels beneath_open_parent() walks up before it gives up (ENOENT): deeper than any
 * path the guest kernel can name in one request (PATH_MAX / 2). */
#define BENEATH_MAX_DEPTH 4096

/* Opens the one name in the directory dirfd, never leaving it and following no symlink or magic
 * link. A name with a '/' or "..", which would be more than one name or leave dirfd, is refused
 * with EXDEV, as openat2() refuses an escape (fuse/fs-names.c validated guest names already: this
 * is the host call's own guard, not a second validation). Then openat2() with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS and O_NOFOLLOW where the kernel has it, the kernel's
 * own check of the same rule; elsewhere openat() with O_NOFOLLOW, which for one name already
 * follows nothing. A symlink opens as itself with O_PATH and is ELOOP otherwise. The fd is charged
 * to the budget (-ENFILE when it is spent). */
int beneath_openat(FdBudget *b, int dirfd, const char *name, int flags, mode_t mode);

/* Opens a relative path of several names ("a/b/c", validated by the caller: no empty, "." or ".."
 * component) in dirfd one name at a time through beneath_openat(): every directory on the way
 * opened O_PATH|O_DIRECTORY|O_NOFOLLOW (a symlink there is ENOTDIR), the last name with flags. One
 * budget fd at a time is held for the walk; the result is charged to the budget. */
int beneath_open_path(FdBudget *b, int dirfd, const char *path, int flags);

/* Opens (O_PATH, charged to the budget) the parent of the directory dirfd and proves that it is
 * the directory root names or lies beneath it: walks up from it through "..", at most
 * BENEATH_MAX_DEPTH levels, until it meets root's (device, inode, mount) or the top of the
 * process's tree. -ENOENT when root was not met: the host moved dirfd out of the share. */
int beneath_open_parent(FdBudget *b, int dirfd, const InodeKey *root);

/* For the unit test: false makes beneath_openat() take the fallback, as on a kernel without
 * openat2(); true goes back to asking the kernel. */
void beneath_use_openat2(bool use);
