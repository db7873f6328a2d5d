/* chain.h: byte-stream reader/writer over the host iovecs of one descriptor chain.
 *
 * Every access to request or reply bytes in guest memory goes through a ChainIter: the FUSE layer
 * never does iovec arithmetic itself. The iovecs are already translated and bounds-checked by
 * guest-memory.c; the iterator only guarantees it never steps past them. Guest memory is shared with
 * a running guest, so callers copy what they validate (chain_read) instead of reading in place. */
#pragma once

#include <stddef.h>
#include <sys/uio.h>

typedef struct ChainIter {
        const struct iovec *iov;
        unsigned niov;
        unsigned idx;    /* current iovec */
        size_t off;      /* offset inside iov[idx] */
        size_t left;     /* bytes left in the whole stream */
        size_t consumed; /* bytes read, written or skipped so far */
} ChainIter;

void chain_iter_init(ChainIter *it, const struct iovec *iov, unsigned niov);

static inline size_t chain_left(const ChainIter *it) {
        return it->left;
}
static inline size_t chain_consumed(const ChainIter *it) {
        return it->consumed;
}

/* Copies exactly len bytes out; -EBADMSG (and nothing consumed) if fewer are left. */
int chain_read(ChainIter *it, void *dst, size_t len);
/* Copies exactly len bytes in; -ENOSPC (and nothing written) if fewer are left. */
int chain_write(ChainIter *it, const void *src, size_t len);
/* Skips len bytes; -EBADMSG if fewer are left. */
int chain_skip(ChainIter *it, size_t len);
/* Writes len zero bytes; -ENOSPC if fewer are left. */
int chain_zero(ChainIter *it, size_t len);

/* Describes the next len bytes as at most max iovecs (for preadv/pwritev straight on guest memory)
 * without consuming them. Returns the number of iovecs, -ENOSPC/-EBADMSG if fewer than len bytes are
 * left, -E2BIG if they need more than max iovecs. */
int chain_peek_iov(const ChainIter *it, size_t len, struct iovec *out, unsigned max);

/* A sub-iterator over the next len bytes (consumed from it). -EBADMSG if fewer are left. */
int chain_split(ChainIter *it, size_t len, ChainIter *ret);
