/* mapped-mode.h: --privileged-files=map: set-id bits, device nodes and file capabilities a guest
 * makes, kept as authenticated metadata the guest sees and the host does not act on.
 *
 * A regular host file carries mapped metadata when its mode has the sticky bit (which Linux
 * ignores on regular files): only then is the attribute FS_PRIVILEGED_XATTR read, so an ordinary
 * file costs nothing more than the statx every reply makes anyway. The attribute holds what the
 * guest asked for (the set-id and sticky bits of a regular file; the type, mode and device number
 * of a device node, which is an empty regular file with its owner's permissions on the host; a
 * security.capability value) and an HMAC-SHA256, keyed by FsOptions.privileged_key, over that and
 * the inode's identity: device, inode number, birth time (where the filesystem has one), owner and
 * group. Anything else (written by a host user, copied from another file, cut short, too long, a
 * file given to another owner on the host) is not honoured: the guest sees the plain file, and a
 * rate-limited line is logged. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fs-ops.h"
#include "inode-map.h"
#include "passthrough-internal.h"

/* A security.capability value is 20 (v2) or 24 (v3) bytes; room to spare, never more. */
#define MAPPED_CAP_MAX 64

typedef struct MappedMeta {
        /* A regular file: its set-id and sticky bits (07000). A device node: S_IFCHR or S_IFBLK
         * with the guest's 07777 bits. */
        mode_t mode;
        dev_t rdev;
        uint16_t cap_len; /* 0: no capability */
        uint8_t cap[MAPPED_CAP_MAX];
} MappedMeta;

static inline bool mapped_on(const Passthrough *p) {
        return p->privileged == PRIVILEGED_FILES_MAP;
}

/* Whether the host attributes stx carry the marker, so the attribute is worth reading. */
static inline bool mapped_marked(const Passthrough *p, const struct statx *stx) {
        return mapped_on(p) && S_ISREG(stx->stx_mode) && (stx->stx_mode & S_ISVTX);
}

static inline bool mapped_is_device(const MappedMeta *m) {
        return S_ISCHR(m->mode) || S_ISBLK(m->mode);
}

/* The attributes the guest sees of inode i (whose O_PATH fd is fd, or -1 to open one) from the
 * host's stx: stat_from_statx(), with i's mapped metadata applied when stx carries the marker. */
int guest_stat(Passthrough *p, Inode *i, int fd, const struct statx *stx, struct stat *st);
/* The same from a fresh statx of i (what stat_inode() is for a reply to the guest). */
int guest_stat_inode(Passthrough *p, Inode *i, struct stat *st);

/* i's mapped metadata: 1 and *ret when it has metadata vufsd wrote, 0 when it has none (not
 * marked, no attribute, or one that does not verify: then logged), or a negative errno. */
int mapped_get(Passthrough *p, Inode *i, MappedMeta *ret);
/* Stores m as i's metadata, signed for i as it is now, and sets the host mode: the marker plus
 * perm's 0777 bits (perm (mode_t)-1: the current ones); a device's are its owner's bits of m's
 * mode. An m with nothing to map removes the attribute and the marker. */
int mapped_put(Passthrough *p, Inode *i, const MappedMeta *m, mode_t perm);

/* What the kernel's killpriv rules take from mapped metadata (kill_suidgid(), chown, write):
 * MAPPED_KILL_SUIDGID set-user-id, and set-group-id where group-executable (host_mode: the host's
 * mode, for its group-execute bit); MAPPED_KILL_CAP the capability. Returns whether m changed. */
enum {
        MAPPED_KILL_SUIDGID = 1u << 0,
        MAPPED_KILL_CAP = 1u << 1,
};
bool mapped_kill(MappedMeta *m, unsigned what, mode_t host_mode);
/* mapped_kill() applied to i's stored metadata (nothing when i has none or it does not change).
 * Cheap for an inode never seen with the marker (the Inode's mapped hint). */
int mapped_kill_inode(Passthrough *p, Inode *i, unsigned what);

/* SETATTR's mode of a regular file: 1 when the mode was set here (the mapped bits stored, the
 * host's permission bits set), 0 when nothing is or was mapped and the caller's chmod does it. */
int mapped_chmod(Passthrough *p, Inode *i, mode_t mode);
/* After a chown of i, whose metadata m mapped_get() read before it: the kernel's rule for chown
 * applied, and m signed for the new owner and group. */
int mapped_after_chown(Passthrough *p, Inode *i, MappedMeta *m);

/* security.capability (under the name --xattrmap gives it) of a regular file in map mode: set
 * (XATTR_CREATE/XATTR_REPLACE as setxattr()), read (size 0: the length; -ENODATA when none is
 * mapped: the caller reads the host's) and removed (-ENODATA when none is mapped). */
int mapped_set_capability(Passthrough *p, Inode *i, const void *value, size_t size, int flags);
ssize_t mapped_get_capability(Passthrough *p, Inode *i, void *buf, size_t size);
int mapped_remove_capability(Passthrough *p, Inode *i);

/* Called once at start: map needs the key and user xattrs on the share (root_fd: its O_PATH fd);
 * without either it works as refuse, said once. */
void mapped_mode_init(Passthrough *p, int root_fd);
