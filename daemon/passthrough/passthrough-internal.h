/* passthrough-internal.h: the Passthrough state shared by passthrough.c, locks.c and xattr.c. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "fd-budget.h"
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
};

/* Re-opens an inode for I/O through /proc/self/fd (regular files and directories only), the fd
 * charged to the budget: -ENFILE when it is spent; fd_budget_close() gives it back. */
int open_inode(Passthrough *p, Inode *i, int flags);

struct statx;
/* statx() of the fd itself, without following it and without automounting. */
int statx_fd(int fd, struct statx *stx);
/* The name of fd in /proc/self/fd (relative to Passthrough.proc_self_fd). */
void proc_name(char buf[static 16], int fd);
