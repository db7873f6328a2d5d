/* host-permission.c: a guest caller's rights on an inode, judged on the host's current attributes. */
#include "host-permission.h"

#include <errno.h>
#include <stdbool.h>

/* The flag Linux adds to an open for execve(); a FUSE OPEN carries it in its flags. */
#define OPEN_FLAG_EXEC 040

int host_open_need(int guest_flags) {
        int need;

        switch (guest_flags & O_ACCMODE) {
        case O_RDONLY:
                need = (guest_flags & OPEN_FLAG_EXEC) ? X_OK : R_OK;
                break;
        case O_WRONLY:
                need = W_OK;
                break;
        default:
                need = R_OK | W_OK;
        }
        if (guest_flags & O_TRUNC)
                need |= W_OK;
        return need;
}

static bool in_group(const FsCtx *c, gid_t gid) {
        if (c->gid == gid)
                return true;
        for (unsigned k = 0; k < c->n_groups; k++)
                if (c->groups[k] == gid)
                        return true;
        return false;
}

/* Whether the class bits (rwx in the low three bits) grant need. */
static bool class_grants(unsigned bits, int need) {
        return ((unsigned)need & 07 & ~bits) == 0;
}

int host_permission(const FsCtx *c, const struct statx *stx, int need) {
        unsigned mode = stx->stx_mode;
        bool owner = c->uid == stx->stx_uid;

        if (c->uid == 0)
                return 0;
        if ((need & HOST_MAY_OWNER) && !owner)
                return -EPERM;
        need &= R_OK | W_OK | X_OK;
        if (need == 0)
                return 0;
        if (owner)
                return class_grants(mode >> 6, need) ? 0 : -EACCES;
        if (in_group(c, stx->stx_gid))
                return class_grants(mode >> 3, need) ? 0 : -EACCES;
        return class_grants(mode >> 3, need) || class_grants(mode, need) ? 0 : -EACCES;
}
