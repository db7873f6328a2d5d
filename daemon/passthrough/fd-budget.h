/* fd-budget.h: a bound on the file descriptors guest requests can make the daemon hold. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

/* Raises RLIMIT_NOFILE towards want (0 = 1,000,000) but never above the kernel's nr_open nor
 * file-max minus a reserve left to the rest of the host (CVE-2020-10717). Returns the resulting
 * soft limit, or a negative errno. */
int64_t fd_budget_raise_rlimit(uint64_t want);

/* The budget for guest-held fds under the current RLIMIT_NOFILE: the limit minus a reserve for the
 * daemon's own fds (sockets, eventfds, memory regions, transient opens). */
uint64_t fd_budget_default_max(void);
