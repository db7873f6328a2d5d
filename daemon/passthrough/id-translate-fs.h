/* id-translate-fs.h: an FsOps that applies --translate-uid/--translate-gid around another one.
 *
 * The one place ids cross between guest and host: the callers of the operations that act as the
 * caller (mknod, mkdir, symlink, create, tmpfile, access: uid, gid and supplementary groups) and
 * SETATTR's new owner go guest to host; every attribute handed back (getattr, setattr, lookup,
 * the creating operations, link, each READDIRPLUS entry) goes host to guest. A guest id that
 * forbid-guest names makes those operations answer -EPERM. Everything else is forwarded as it is.
 * Composed in only when a table translates something, so an untranslated daemon pays nothing. */
#pragma once

#include "fs-ops.h"
#include "id-translate.h"
#include "util.h"

typedef struct IdTranslateFs IdTranslateFs;

extern const FsOps id_translate_fs_ops;

/* Wraps ops/fs; uid and gid (either NULL for the identity) must outlive the object. */
int id_translate_fs_new(IdTranslateFs **ret, const FsOps *ops, void *fs, const IdTranslate *uid,
                        const IdTranslate *gid);
IdTranslateFs *id_translate_fs_free(IdTranslateFs *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(IdTranslateFs *, id_translate_fs_free);
