/* inode-fd.h: the fds of an inode for one operation: its O_PATH fd, an fd for I/O, its statx. */
#pragma once

#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "fd-budget.h"
#include "fs-ops.h"
#include "inode-fd-cache.h"
#include "inode-map.h"
#include "passthrough.h"

/* Every file of the passthrough reaches a host inode through here (inode_fd(), open_inode()):
 * lookup, entries, attributes, file I/O, directories, locks and xattrs all sit above this unit,
 * which calls none of them. */

/* STATX_MNT_ID_UNIQUE where the kernel has it (the mount keys of the inode map and the mount fd
 * table then never meet a reused id), STATX_MNT_ID's answer otherwise. */
#define STATX_WANT (STATX_BASIC_STATS | STATX_MNT_IDS | STATX_BTIME)

/* Open flags a guest may pass through to the host for I/O; everything else is dropped. */
#define OPEN_FLAGS_ALLOWED                                                                                            \
        (O_ACCMODE | O_APPEND | O_TRUNC | O_DIRECT | O_SYNC | O_DSYNC | O_NOATIME | O_NONBLOCK | O_LARGEFILE |        \
         O_DIRECTORY | O_EXCL)

/* An O_PATH fd of an inode for one operation: the inode's own fd (borrowed, with one user counted
 * on pin, so the clock does not close it meanwhile; the caller's reference on the inode outlives
 * the InodeFd) or one opened for this operation (by its file handle, or by name when the clock had
 * no room), checked to be the inode, and charged to the budget (owned: inode_fd_done() closes it). */
typedef struct InodeFd {
        FdBudget *budget;
        int fd;
        bool owned;
        Inode *pin;
} InodeFd;
#define INODE_FD_NULL ((InodeFd){ .fd = -1 })

/* The fd, or -ESTALE when the handle no longer opens this inode (deleted on the host) or its name
 * no longer leads to it (re-open by name, below), -ENFILE when the budget is spent. ret_stx, if
 * given, gets the inode's statx (made anyway in handle mode for the check). */
struct statx;
int inode_fd(Passthrough *p, Inode *i, InodeFd *ret, struct statx *ret_stx);
static inline void inode_fd_done(InodeFd *f) {
        if (f->owned)
                fd_budget_close(f->budget, f->fd);
        else if (f->pin)
                fdword_release(&f->pin->fdword);
        *f = INODE_FD_NULL;
}

/* Re-opens an inode for I/O through /proc/self/fd (regular files and directories only), the fd
 * charged to the budget: -ENFILE when it is spent; fd_budget_close() gives it back. */
int open_inode(Passthrough *p, Inode *i, int flags);
/* The same for the guest caller c, who needs need on the inode (host-permission.h); c NULL: none. */
int open_inode_for(Passthrough *p, Inode *i, int flags, const FsCtx *c, int need);

/* statx() of the fd itself, without following it and without automounting. */
int statx_fd(int fd, struct statx *stx);
/* A struct stat for the guest from a statx. */
void stat_from_statx(struct stat *st, const struct statx *x);
/* The inode's current attributes, through inode_fd(). */
int stat_inode(Passthrough *p, Inode *i, struct stat *st);
/* The name of fd in /proc/self/fd (relative to Passthrough.proc_self_fd). */
void proc_name(char buf[static 16], int fd);

/* Path-based calls on an O_PATH fd (xattrs: O_PATH fds refuse f*xattr()) name its /proc/self/fd
 * link relative to Passthrough.proc_self_fd, never through "/proc": in the sandbox the root is the
 * share, which has no /proc. So the calling thread's working directory moves there (in an
 * fs_struct of its own) until proc_cwd_leave(), which keeps errno. Nested pairs are allowed. */
int proc_cwd_enter(Passthrough *p);
void proc_cwd_leave(void);
