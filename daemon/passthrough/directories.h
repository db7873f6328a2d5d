/* directories.h: open directories of the passthrough: opendir, readdir(plus), releasedir, fsyncdir. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fs-ops.h"
#include "passthrough.h"

/* FsOps.opendir, readdir, releasedir and fsyncdir. */
int pt_opendir(void *fs, const FsCtx *c, uint64_t nodeid, int flags, uint64_t *ret_fh);
int pt_readdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const FsDirFiller *fill);
int pt_releasedir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh);
int pt_fsyncdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync);
