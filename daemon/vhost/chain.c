/* chain.c: byte-stream reader/writer over descriptor-chain iovecs. */
#include "chain.h"

#include <errno.h>
#include <string.h>

#include "util.h"

void chain_iter_init(ChainIter *it, const struct iovec *iov, unsigned niov) {
        *it = (ChainIter) { .iov = iov, .niov = niov };
        for (unsigned i = 0; i < niov; i++)
                it->left += iov[i].iov_len;
}

/* Walks len bytes, calling fn on each contiguous piece. The caller has checked len <= it->left. */
static void chain_walk(ChainIter *it, size_t len, void (*fn)(void *seg, size_t n, void *ud), void *ud) {
        while (len > 0) {
                const struct iovec *v = &it->iov[it->idx];
                size_t n = MIN(len, v->iov_len - it->off);

                if (n > 0 && fn)
                        fn((char *) v->iov_base + it->off, n, ud);
                it->off += n;
                it->left -= n;
                it->consumed += n;
                len -= n;
                if (it->off == v->iov_len) {
                        it->idx++;
                        it->off = 0;
                }
        }
        /* Step over zero-length iovecs so idx always points at the next byte. */
        while (it->idx < it->niov && it->off == it->iov[it->idx].iov_len) {
                it->idx++;
                it->off = 0;
        }
}

static void seg_copy_out(void *seg, size_t n, void *ud) {
        char **dst = ud;
        memcpy(*dst, seg, n);
        *dst += n;
}

static void seg_copy_in(void *seg, size_t n, void *ud) {
        const char **src = ud;
        memcpy(seg, *src, n);
        *src += n;
}

static void seg_zero(void *seg, size_t n, void *ud) {
        (void) ud;
        memset(seg, 0, n);
}

/* The common case on the data path: the next len bytes (a FUSE header, an argument, a reply struct)
 * lie inside the current iovec. Returns where they start and consumes them, or NULL (nothing
 * consumed) when they span iovecs; the caller then walks. The caller has checked len <= it->left. */
static inline char *chain_contiguous(ChainIter *it, size_t len) {
        const struct iovec *v;
        char *p;

        if (len == 0 || it->idx >= it->niov)
                return NULL;
        v = &it->iov[it->idx];
        if (v->iov_len - it->off < len)
                return NULL;
        p = (char *) v->iov_base + it->off;
        it->off += len;
        it->left -= len;
        it->consumed += len;
        /* Keep idx on the next byte, as chain_walk() does. */
        while (it->idx < it->niov && it->off == it->iov[it->idx].iov_len) {
                it->idx++;
                it->off = 0;
        }
        return p;
}

int chain_read(ChainIter *it, void *dst, size_t len) {
        char *p = dst, *q;
        if (len > it->left)
                return -EBADMSG;
        q = chain_contiguous(it, len);
        if (q)
                memcpy(dst, q, len);
        else
                chain_walk(it, len, seg_copy_out, &p);
        return 0;
}

int chain_write(ChainIter *it, const void *src, size_t len) {
        const char *p = src;
        char *q;
        if (len > it->left)
                return -ENOSPC;
        q = chain_contiguous(it, len);
        if (q)
                memcpy(q, src, len);
        else
                chain_walk(it, len, seg_copy_in, &p);
        return 0;
}

int chain_skip(ChainIter *it, size_t len) {
        if (len > it->left)
                return -EBADMSG;
        chain_walk(it, len, NULL, NULL);
        return 0;
}

int chain_zero(ChainIter *it, size_t len) {
        if (len > it->left)
                return -ENOSPC;
        chain_walk(it, len, seg_zero, NULL);
        return 0;
}

int chain_peek_iov(const ChainIter *it, size_t len, struct iovec *out, unsigned max) {
        unsigned n = 0, idx = it->idx;
        size_t off = it->off;

        if (len > it->left)
                return -ENOSPC;
        while (len > 0) {
                const struct iovec *v = &it->iov[idx];
                size_t k = MIN(len, v->iov_len - off);

                if (k > 0) {
                        if (n >= max)
                                return -E2BIG;
                        out[n++] = (struct iovec) { (char *) v->iov_base + off, k };
                }
                len -= k;
                idx++;
                off = 0;
        }
        return (int) n;
}

int chain_split(ChainIter *it, size_t len, ChainIter *ret) {
        if (len > it->left)
                return -EBADMSG;
        *ret = *it;
        ret->left = len;
        ret->consumed = 0;
        chain_walk(it, len, NULL, NULL);
        return 0;
}
