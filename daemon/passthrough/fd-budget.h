/* fd-budget.h: a bound on the file descriptors guest requests can make the daemon hold. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct FdBudget {
        _Atomic uint64_t used;
        uint64_t max;
} FdBudget;

/* Takes one fd from the budget; false (and nothing taken) when it is spent: answer ENFILE. */
static inline bool fd_budget_take(FdBudget *b) {
        uint64_t u = atomic_fetch_add(&b->used, 1);
        if (u >= b->max) {
                atomic_fetch_sub(&b->used, 1);
                return false;
        }
        return true;
}

static inline void fd_budget_release(FdBudget *b) {
        atomic_fetch_sub(&b->used, 1);
}

/* The pair for every fd the daemon opens on a guest's behalf: fd_budget_openat() opens as openat()
 * does with one fd charged to the budget and returns the fd, -ENFILE when the budget is spent, or
 * openat's negative errno (nothing charged then); fd_budget_close() closes such an fd and gives its
 * charge back, and returns -1 (fd = fd_budget_close(b, fd)). fd_budget_take()/_release() remain for
 * charging an fd that was opened elsewhere (the share root). */
int fd_budget_openat(FdBudget *b, int dirfd, const char *path, int flags, mode_t mode);
int fd_budget_close(FdBudget *b, int fd);

/* Raises RLIMIT_NOFILE towards want (0 = 1,000,000) but never above the kernel's nr_open nor
 * file-max minus a reserve left to the rest of the host (CVE-2020-10717). Returns the resulting
 * soft limit, or a negative errno. */
int64_t fd_budget_raise_rlimit(uint64_t want);

/* The budget for guest-held fds under the current RLIMIT_NOFILE: the limit minus a reserve for the
 * daemon's own fds (sockets, eventfds, memory regions, transient opens). */
uint64_t fd_budget_default_max(void);
