/* share-dir.h: the shared directory's path resolved once, with every directory on the way checked
 * (issue 31 finding 8).
 *
 * The path is walked one component at a time from "/", symlinks followed by hand (their targets
 * walked the same way), each step relative to the fd of the directory before: nothing is looked up
 * twice. A directory the walk looks a name up in must be owned by root or by trusted_uid (the
 * daemon's own user), and must not be writable by its group or others unless it is sticky, in
 * which case the entry found in it (directory or symlink) must be owned by root or trusted_uid
 * too: anyone else could swap that entry for a symlink to / between two looks, or rename the
 * directory it is. The share itself (the last directory) may be anyone's: nothing is looked up in
 * it here. */
#pragma once

#include <sys/types.h>

/* An O_PATH fd of the directory path names (absolute), or a negative errno: -EPERM when a
 * directory on the way fails the rule above, *ret_why then a sentence naming it (free() it); the
 * path's own errors otherwise (-ENOENT, -ENOTDIR, -ELOOP after 40 symlinks, -ENAMETOOLONG). */
int share_dir_open(const char *path, uid_t trusted_uid, char **ret_why);
