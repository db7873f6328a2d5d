/* file-io.h: open files of the passthrough: open, create, read, write, sync, release. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fs-ops.h"
#include "passthrough.h"

/* FSYNC and FSYNCDIR: is_dir says which kind of handle fh must be. */
int fsync_handle(Passthrough *p, uint64_t nodeid, uint64_t fh, int is_dir, bool datasync);

/* FsOps.open, handle_kept, create, open_created, tmpfile, read, write, flush, release, fsync,
 * fallocate, lseek and copy_file_range. */
int pt_open(void *fs, const FsCtx *c, uint64_t nodeid, int flags, bool kill_priv, uint64_t *ret_fh);
int pt_handle_kept(void *fs, uint64_t nodeid, uint64_t fh, bool dir);
int pt_create(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, int flags, bool kill_priv,
              FsEntry *ret, uint64_t *ret_fh);
int pt_open_created(void *fs, const FsCtx *c, uint64_t parent, const char *name, int flags, FsEntry *ret,
                    uint64_t *ret_fh);
int pt_tmpfile(void *fs, const FsCtx *c, uint64_t parent, mode_t mode, int flags, FsEntry *ret, uint64_t *ret_fh);
ssize_t pt_read(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const struct iovec *iov,
                unsigned niov);
ssize_t pt_write(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const struct iovec *iov,
                 unsigned niov, bool kill_priv);
int pt_flush(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner);
int pt_release(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t lock_owner, bool flock_unlock);
int pt_fsync(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync);
int pt_fallocate(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int mode, uint64_t off, uint64_t len);
int64_t pt_lseek(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, int64_t off, int whence);
ssize_t pt_copy_file_range(void *fs, const FsCtx *c, uint64_t nodeid_in, uint64_t fh_in, uint64_t off_in,
                           uint64_t nodeid_out, uint64_t fh_out, uint64_t off_out, uint64_t len, unsigned flags);
