/* lookup.h: how a name becomes a counted inode (LOOKUP, FORGET), and the directories requests act in. */
#pragma once

#include <stdint.h>

#include "fs-ops.h"
#include "inode-fd.h"
#include "inode-map.h"
#include "passthrough.h"

struct statx;
/* The mount fd table's key for an inode with stx whose handle came with mnt_id. */
uint64_t mount_key(const struct statx *stx, int mnt_id);
/* Counts a guest lookup of the inode fd (O_PATH, one budget fd, taken over) refers to, found as
 * name in dir (NULL/NULL: no name to re-open it by). */
int remember_inode(Passthrough *p, int fd, const struct statx *stx, Inode *dir, const char *name, Inode **ret);
/* The same for a node restored from a saved session (state-load.c): linked under nodeid with
 * nlookup lookups (inode_map_insert()), by handle or by fd; with an fd it keeps it (outside the
 * clock of cached fds: no single name re-opens it). */
int remember_inode_at(Passthrough *p, int fd, const struct statx *stx, uint64_t nodeid, uint64_t nlookup, Inode **ret);
/* Looks name up in dir without following a symlink and counts the lookup. */
int lookup_child(Passthrough *p, Inode *dir, int dirfd, const char *name, FsEntry *e);
/* The node the map holds for what name in dirfd is now (one in-flight reference, no lookup
 * counted), or NULL: what a RENAME through the guest is about to move, so that its path follows
 * (inode_map_set_path()). */
Inode *inode_of_name(Passthrough *p, int dirfd, const char *name);
/* Counts one more lookup of an inode already held and fills e. */
int entry_again(Passthrough *p, Inode *i, FsEntry *e);
/* The directory nodeid (-ENOTDIR when it is none), and with an fd for one operation relative to it. */
int get_dir(Passthrough *p, uint64_t nodeid, Inode **ret);
int get_dir_fd(Passthrough *p, uint64_t nodeid, Inode **ret, InodeFd *ret_fd);

/* FsOps.lookup and forget. */
int pt_lookup(void *fs, const FsCtx *c, uint64_t parent, const char *name, FsEntry *ret);
void pt_forget(void *fs, uint64_t nodeid, uint64_t nlookup);
