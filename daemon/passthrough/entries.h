/* entries.h: creating, removing, renaming and linking directory entries of the passthrough. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "fs-ops.h"
#include "passthrough.h"

typedef struct MappedMeta MappedMeta;

/* Gives a just-created entry e (name in dir; NULL for an unnamed O_TMPFILE) the request's security
 * labels and, map given, its mapped metadata (e->st then what the guest sees); when that fails the
 * entry goes again. */
int finish_new_entry(Passthrough *p, const FsCtx *c, int dirfd, const char *name, FsEntry *e,
                     const MappedMeta *map);
/* What a new regular file or device node of the guest's mode (and rdev) needs in map mode: the
 * metadata to store (in *m; NULL when none) and the host's mode to make it with (*host_mode, set
 * only when metadata is returned). */
const MappedMeta *new_entry_map(Passthrough *p, const FsCtx *c, mode_t mode, dev_t rdev, MappedMeta *m,
                                mode_t *host_mode);

/* Right before a host call that makes or removes name in dirfd (request-progress.h): records
 * whether name is there, which a process taking over after a death in the call compares with what
 * it finds. Only when someone records it (--crash-restarts): one fstatat. */
void entry_progress_started(int dirfd, const char *name);

/* FsOps.mknod, mkdir, symlink, unlink, rmdir, rename and link. */
int pt_mknod(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev, FsEntry *ret);
int pt_mkdir(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, FsEntry *ret);
int pt_symlink(void *fs, const FsCtx *c, uint64_t parent, const char *name, const char *target, FsEntry *ret);
int pt_unlink(void *fs, const FsCtx *c, uint64_t parent, const char *name);
int pt_rmdir(void *fs, const FsCtx *c, uint64_t parent, const char *name);
int pt_rename(void *fs, const FsCtx *c, uint64_t parent, const char *name, uint64_t newparent, const char *newname,
              unsigned flags);
int pt_link(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t newparent, const char *newname, FsEntry *ret);
