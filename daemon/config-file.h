/* config-file.h: the per-instance configuration file (/etc/vufsd/NAME.conf, GKeyFile syntax). */
#pragma once

#include <stdbool.h>

#include "config.h"

/* The directory holding NAME.conf files: $sysconfdir/vufsd as configured at build time. */
#ifndef VUFSD_CONFIG_DIR
#define VUFSD_CONFIG_DIR "/etc/vufsd"
#endif

/* Checks an instance name for use as a file name and in unit names: 1..64 characters of
 * [A-Za-z0-9_.:@-], not starting with a dot. Returns 0 or -EINVAL. */
int config_file_instance_name_valid(const char *name);

/* Returns (allocated) VUFSD_CONFIG_DIR/NAME.conf, or -EINVAL for a bad name (printed). */
int config_file_path_for_instance(const char *instance, char **ret);

/* Applies the file at path on top of c (defaults). Unknown groups and keys, values out of range
 * and syntax errors are errors, printed with the file name. A missing file is an error when
 * must_exist, otherwise it returns 0 and changes nothing. Returns 1 when a file was applied,
 * 0 when none was found, negative errno after printing what is wrong. */
int config_file_load(Config *c, const char *path, bool must_exist);
