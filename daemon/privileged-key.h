/* privileged-key.h: the key --privileged-files=map authenticates its metadata with, kept outside the share. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fs-options.h"

/* Where the key lives when --privileged-files-key is not given (malloc'd): under the service's
 * StateDirectory= ($STATE_DIRECTORY), else /var/lib/vufsd/ as root, else the user's state directory
 * ($XDG_STATE_HOME/vufsd/, ~/.local/state/vufsd/). The file is privileged-files.key. */
int privileged_key_default_path(char **ret);

/* Reads the key at path, or makes it (32 random bytes, 0600, its directory 0700 if missing) when
 * there is none. A key file must be a regular file of exactly FS_PRIVILEGED_KEY_SIZE bytes, owned
 * by the caller, readable by nobody else: anything else is refused (-EPERM, -EINVAL), so a key
 * another user could read or write is never used. */
int privileged_key_load(const char *path, uint8_t key[static FS_PRIVILEGED_KEY_SIZE]);
