/* dirty-log.h: the frontend's dirty log during a live migration: one bit per 4 KiB page of guest
 * memory the backend wrote (VHOST_F_LOG_ALL, SET_LOG_BASE with PROTOCOL_F_LOG_SHMFD).
 *
 * While it is on, QEMU copies guest memory to the destination as the guest runs and copies again
 * every page marked here: a page the backend wrote (a reply, data read into a guest buffer, the
 * used ring) that it did not see marked would reach the destination stale. A DirtyLog is an
 * immutable mapping, reference counted like a memory snapshot: a queue holds the log it marks
 * under its own lock, and a new SET_LOG_BASE replaces it queue by queue. Marking is an atomic OR
 * per byte of the bitmap (QEMU clears bits concurrently with atomic exchanges). */
#pragma once

#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#include "guest-memory.h"

#define DIRTY_LOG_PAGE 4096u
/* The largest log accepted: a bit per page of 64 TiB of guest memory. */
#define DIRTY_LOG_MAX_BYTES (2ull << 30)

typedef struct DirtyLog {
        _Atomic unsigned n_ref;
        uint8_t *bits;   /* size bytes */
        uint64_t size;
        void *map_base;  /* the mapping (from file offset 0) */
        size_t map_len;
} DirtyLog;

/* Maps size bytes of fd (a memfd or file; not taken) from offset. -EINVAL for a size of 0 or over
 * DIRTY_LOG_MAX_BYTES, -ERANGE when the file is shorter, -EBADF when it is no regular file. */
int dirty_log_new(DirtyLog **ret, int fd, uint64_t size, uint64_t offset);
DirtyLog *dirty_log_ref(DirtyLog *l);
DirtyLog *dirty_log_unref(DirtyLog *l);

/* Marks the pages of [gpa, gpa+len); pages past the log's end are not marked (the frontend sized
 * it for its memory). */
void dirty_log_mark(DirtyLog *l, uint64_t gpa, uint64_t len);
/* Marks the guest pages behind n iovecs of mem (host addresses inside its regions). */
void dirty_log_mark_iov(DirtyLog *l, const GuestMemory *mem, const struct iovec *iov, unsigned n);
