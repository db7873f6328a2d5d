/* userns.h: the user namespace of an unprivileged (or id-mapping) vufsd.
 *
 * An ordinary user cannot create pid, mount or network namespaces, chroot or keep capabilities; in
 * a user namespace of its own it can, and everything it then holds is namespace-local: the
 * capabilities act only on inodes whose owner is mapped into the namespace, and the host sees the
 * daemon's processes and the files it creates as the host ids the maps name. So a taken-over
 * unprivileged daemon reaches no more than the user who started it (docs/id-mapping.md).
 *
 * The namespace is made when vufsd does not run as root or when --uid-map/--gid-map is given
 * (sandbox_prepare() clones the daemon into it). Its maps are written by the supervisor, outside:
 *
 *   no map given           namespace id 0 = the caller's own uid/gid, count 1 (guest root is the
 *                          host user, as with the Rust virtiofsd); written directly after
 *                          "deny" to /proc/PID/setgroups (the kernel requires it for an
 *                          unprivileged writer of gid_map)
 *   a map of the caller's  the same, written directly
 *   own id only
 *   anything else          as root: written directly; otherwise through the setuid helpers
 *                          newuidmap/newgidmap (package uidmap), which allow what /etc/subuid and
 *                          /etc/subgid grant the user
 *
 * Inside, the daemon becomes uid 0 / gid 0 of the namespace (config_verify() requires both maps to
 * map namespace id 0), so that per-request credential switching works as it does for root. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ID_MAP_MAX_ENTRIES 32

/* One --uid-map/--gid-map entry (":namespace_id:host_id:count:", libvirt's and virtiofsd's form):
 * namespace ids [inside, inside + count) are host ids [outside, outside + count). */
typedef struct IdMapEntry {
        uint32_t inside, outside, count;
} IdMapEntry;

typedef struct IdMapList {
        unsigned n;
        IdMapEntry e[ID_MAP_MAX_ENTRIES];
} IdMapList;

/* Whether the daemon runs in a user namespace: not root, or a map given. */
bool userns_wanted(const IdMapList *uid_map, const IdMapList *gid_map);

/* Whether namespace id `inside` is mapped by l. */
bool id_map_contains(const IdMapList *l, uint32_t inside);

/* The text for /proc/PID/uid_map (or gid_map): one "inside outside count" line per entry, or
 * "0 OWN 1" for an empty list. -ENOBUFS when it does not fit. */
int userns_format_map(const IdMapList *l, uint32_t own, char *buf, size_t size);

/* In the supervisor, for the child it cloned into a new user namespace: writes the child's gid and
 * uid maps (directly or through newgidmap/newuidmap, see above). Logs and returns negative errno;
 * the caller kills the child then. */
int userns_write_maps(pid_t child, const IdMapList *uid_map, const IdMapList *gid_map);

/* In the child once the maps are written: uid and gid 0 of the namespace (real, effective, saved),
 * keeping the namespace's capabilities. */
int userns_become_root(void);

/* Whether this process's user namespace forbids setgroups() ("deny" in /proc/self/setgroups):
 * then the supplementary groups stay what the host gave the user (the user's own rights). */
bool userns_setgroups_denied(void);
