/* fs-names.h: the one choke point for names and strings that come from the guest. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "fs-ops.h" /* fs_name_is_dot_or_dotdot() */

/* Takes one NUL-terminated string from the front of the buffer *p of *left bytes and advances past
 * its NUL. -EINVAL when no NUL lies inside the buffer. *ret_len excludes the NUL. */
int fs_string_take(const char **p, size_t *left, const char **ret, size_t *ret_len);

/* A directory-entry name as the guest may create or name it: -ENOENT when empty, -EINVAL when it
 * contains '/' or is "." or "..", -ENAMETOOLONG above NAME_MAX. With allow_dots, "." and ".." pass
 * (LOOKUP resolves them itself, keeping ".." at the share root on the root). */
int fs_name_validate(const char *name, size_t len, bool allow_dots);

/* A symlink target: data that is stored, never followed. -ENOENT when empty, -ENAMETOOLONG when it
 * does not fit PATH_MAX with its NUL. */
int fs_symlink_target_validate(const char *target, size_t len);

/* An extended-attribute name: -ERANGE when empty or longer than XATTR_NAME_MAX (as the kernel). */
int fs_xattr_name_validate(const char *name, size_t len);
