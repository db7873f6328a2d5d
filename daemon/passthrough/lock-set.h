/* lock-set.h: the POSIX lock ranges one lock owner holds on one inode, as the kernel keeps them:
 * every granted SETLK (an unlock too) replaces what it covers, splitting the ranges it cuts and
 * merging with neighbours of its type. vufsd keeps it beside each owner's OFD (locks.c) so that a
 * saved session can name every lock the guest holds (state-save.c); the kernel has no call that
 * lists one open file description's locks. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct LockRange {
        uint64_t start, end; /* inclusive; end LOCK_SET_EOF: to the end of the file */
        short type;          /* F_RDLCK or F_WRLCK */
} LockRange;

#define LOCK_SET_EOF ((uint64_t) INT64_MAX)
/* The most ranges all owners of one passthrough may hold together: what a saved session carries
 * (STATE_MAX_LOCKS); 48 bytes each with the spare array, so at most about 50 MB. */
#define LOCK_RANGES_MAX (1u << 20)

typedef struct LockSet {
        LockRange *r;     /* n ranges, sorted by start, none overlapping, adjacent ones of other types */
        LockRange *spare; /* where the next apply builds, swapped with r */
        size_t n, cap;    /* both arrays hold cap */
} LockSet;

/* Room for the next apply (at most two ranges more): call before asking the kernel, so that a lock
 * it grants can always be recorded. -ENOMEM (nothing changed) otherwise. */
int lock_set_reserve(LockSet *s);
/* Applies a granted F_RDLCK, F_WRLCK or F_UNLCK of [start, end] (start <= end <= LOCK_SET_EOF).
 * Never fails after lock_set_reserve(). */
void lock_set_apply(LockSet *s, uint64_t start, uint64_t end, short type);
void lock_set_done(LockSet *s);
