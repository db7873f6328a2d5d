/* capabilities.h: the capability sets the daemon keeps, --modcaps, no-new-privs.
 *
 * Raw capget/capset/prctl (libcap is not a dependency). Capabilities are per thread in Linux:
 * capabilities_apply() changes the calling thread and then every other thread of the process
 * (a signal makes each one apply the same change to itself, as glibc does for setuid()). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* What the passthrough needs: CHOWN, DAC_OVERRIDE, FOWNER, FSETID, SETGID, SETUID; with
 * privileged_files (--allow-privileged-files) also MKNOD and SETFCAP, the set the C virtiofsd
 * keeps. */
uint64_t capabilities_default(bool privileged_files);

/* What --inode-file-handles adds when the share uses handles: DAC_READ_SEARCH, for
 * open_by_handle_at(). */
uint64_t capabilities_file_handles(void);

/* Applies a --modcaps list to *mask: "+name" adds, "-name" removes; items separated by ':' or ','
 * (virtiofsd uses ':'), names with or without "cap_", any case. -EINVAL (printed) when an item is
 * not understood. */
int capabilities_modify(uint64_t *mask, const char *spec);

/* Capability number for a name ("chown", "CAP_CHOWN"), or -EINVAL. */
int capability_from_name(const char *name);
const char *capability_to_name(int cap);

/* For every thread: drops everything but keep from the bounding, permitted and effective sets,
 * clears the inheritable and ambient sets, and sets PR_SET_NO_NEW_PRIVS. If netns_fd >= 0 the
 * other threads also join that network namespace (created by the calling thread). Without
 * CAP_SETPCAP (an unprivileged daemon) the bounding set is left alone: there is nothing to gain
 * through it with no-new-privs set. task_dir_fd is an open /proc/self/task (the sandbox may hide
 * /proc). Returns 0 or negative errno; on failure some threads may already be reduced. */
int capabilities_apply(uint64_t keep, int netns_fd, int task_dir_fd);
