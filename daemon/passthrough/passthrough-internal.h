/* passthrough-internal.h: the Passthrough state shared by passthrough.c, locks.c and xattr.c. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "fd-budget.h"
#include "file-handle.h"
#include "fs-options.h"
#include "handle-map.h"
#include "inode-map.h"
#include "passthrough.h"

struct Passthrough {
        FsOptions opts;
        char *shared_dir;
        FdBudget budget;
        InodeMap *inodes;
        HandleMap *handles;
        int proc_self_fd; /* /proc/self/fd: re-opening O_PATH handles without following links */
        _Atomic bool writeback; /* negotiated for the current session */
        /* --inode-file-handles: whether new inodes are remembered by handle (prefer/mandatory and
         * the share allows it, decided at start), and the mount fds the handles open on. */
        bool use_handles;
        bool handles_mandatory;
        MountFds mounts;
        _Atomic bool handle_fallback_logged; /* prefer: the first inode that kept an fd was logged */
};

/* An O_PATH fd of an inode for one operation: the inode's own fd (borrowed) or one opened by its
 * file handle, checked to be the inode, and charged to the budget (owned: inode_fd_done() closes
 * it). */
typedef struct InodeFd {
        FdBudget *budget;
        int fd;
        bool owned;
} InodeFd;
#define INODE_FD_NULL ((InodeFd){ .fd = -1 })

/* The fd, or -ESTALE when the handle no longer opens this inode (deleted on the host), -ENFILE
 * when the budget is spent. ret_stx, if given, gets the inode's statx (made anyway in handle mode
 * for the check). */
struct statx;
int inode_fd(Passthrough *p, Inode *i, InodeFd *ret, struct statx *ret_stx);
static inline void inode_fd_done(InodeFd *f) {
        if (f->owned)
                fd_budget_close(f->budget, f->fd);
        *f = INODE_FD_NULL;
}

/* Re-opens an inode for I/O through /proc/self/fd (regular files and directories only), the fd
 * charged to the budget: -ENFILE when it is spent; fd_budget_close() gives it back. */
int open_inode(Passthrough *p, Inode *i, int flags);

struct statx;
/* statx() of the fd itself, without following it and without automounting. */
int statx_fd(int fd, struct statx *stx);
/* The name of fd in /proc/self/fd (relative to Passthrough.proc_self_fd). */
void proc_name(char buf[static 16], int fd);
