/* keeper.c: records and fds kept by the supervisor for the next serving process (keeper.h). */
#include "keeper.h"

#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "sandbox.h"
#include "util.h"

/* Static: the supervisor's filter has brk and mmap, but a fixed bound is simpler to reason
 * about (4 x 16 KiB, 4 x 128 fds). */
static struct {
        uint8_t data[KEEPER_MAX_RECORD];
        size_t len;
        int fds[KEEPER_MAX_FDS];
        size_t n_fds;
} slots[KEEPER_SLOTS];

static void slot_clear(unsigned i) {
        for (size_t k = 0; k < slots[i].n_fds; k++)
                safe_close(slots[i].fds[k]);
        slots[i].n_fds = 0;
        slots[i].len = 0;
}

/* The list slot's fds: any number (a session's nodes and handles), so on the heap (the
 * supervisor's filter has brk, mmap and munmap), bounded by KEEPER_MAX_LIST_FDS. */
static struct {
        int *fds;
        size_t n, cap;
} list;

static void list_clear(void) {
        for (size_t k = 0; k < list.n; k++)
                safe_close(list.fds[k]);
        list.n = 0;
}

static bool list_append(int *fds, size_t n_fds) {
        if (n_fds == 0) /* a store that empties the list */
                return true;
        if (list.n + n_fds > KEEPER_MAX_LIST_FDS)
                return false;
        if (list.n + n_fds > list.cap) {
                /* malloc, copy, free rather than realloc(): a large realloc() is an mremap(), which
                 * the supervisor's filter allows only with a control plane. */
                size_t cap = MAX(list.cap * 2, list.n + n_fds + 64);
                int *p = malloc(cap * sizeof(int));
                if (!p)
                        return false;
                if (list.n > 0)
                        memcpy(p, list.fds, list.n * sizeof(int));
                free(list.fds);
                list.fds = p;
                list.cap = cap;
        }
        memcpy(list.fds + list.n, fds, n_fds * sizeof(int));
        list.n += n_fds;
        return true;
}

void keeper_clear(void) {
        for (unsigned i = 0; i < KEEPER_SLOTS; i++)
                slot_clear(i);
        list_clear();
        keeper_journal_clear();
}

static void close_fds(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
}

/* One message with its fds; SEQPACKET: whole or not at all. */
int keeper_send_fds(int sock, const struct iovec *iov, size_t n_iov, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * KEEPER_MAX_FDS)];
        } control = {};
        struct msghdr mh = { .msg_iov = (struct iovec *) iov, .msg_iovlen = n_iov };

        if (n_fds > KEEPER_MAX_FDS)
                return -E2BIG;
        if (n_fds > 0) {
                struct cmsghdr *c;

                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        /* SEQPACKET: interrupted, nothing went; sent again rather than a record lost. */
        while (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

ssize_t keeper_recv(int sock, struct msghdr *mh) {
        ssize_t n;

        /* The answer comes whatever interrupted the wait: read now, or the next fetch takes it. */
        while ((n = recvmsg(sock, mh, MSG_CMSG_CLOEXEC)) < 0)
                if (errno != EINTR)
                        return -errno;
        return n;
}

/* The list slot: a store empties it and adds its fds, an append adds them, a fetch (the slot
 * byte, then a u32 index) answers the KEEPER_MAX_FDS from that index on, with the list's length
 * (u32) as its record. An append that does not fit empties the list: the fetcher then finds fewer
 * fds than its record names and refuses the whole. */
static bool list_handle(int ctl, const uint8_t *p, size_t n, int *fds, size_t n_fds) {
        if (p[0] == KEEPER_TAG_STORE || p[0] == KEEPER_TAG_APPEND) {
                if (p[0] == KEEPER_TAG_STORE)
                        list_clear();
                if (n_fds > KEEPER_MAX_FDS || !list_append(fds, n_fds)) {
                        close_fds(fds, n_fds);
                        list_clear();
                }
                return true;
        }
        close_fds(fds, n_fds);
        {
                uint8_t hdr[2] = { KEEPER_TAG_RECORD, KEEPER_SLOT_UPGRADE_FDS };
                uint32_t from = 0, total = (uint32_t) list.n;
                struct iovec iov[2] = { { hdr, sizeof hdr }, { &total, sizeof total } };
                size_t k;

                if (n >= 6)
                        memcpy(&from, p + 2, sizeof from);
                from = MIN(from, total);
                k = MIN((size_t) (total - from), (size_t) KEEPER_MAX_FDS);
                (void) keeper_send_fds(ctl, iov, 2, list.fds ? list.fds + from : NULL, k);
        }
        return true;
}

bool keeper_handle(int ctl, const void *buf, size_t n, int *fds, size_t n_fds) {
        const uint8_t *p = buf;
        unsigned slot;

        if (n >= 1 && keeper_journal_handle(ctl, p, n, fds, n_fds))
                return true;
        if (n < 2 || (p[0] != KEEPER_TAG_STORE && p[0] != KEEPER_TAG_FETCH && p[0] != KEEPER_TAG_APPEND))
                return false;
        slot = p[1];
        if (slot == KEEPER_SLOT_UPGRADE_FDS)
                return list_handle(ctl, p, n, fds, n_fds);
        if (slot >= KEEPER_SLOTS || n - 2 > KEEPER_MAX_RECORD || n_fds > KEEPER_MAX_FDS) {
                close_fds(fds, n_fds);
                return true;
        }
        if (p[0] == KEEPER_TAG_STORE) {
                slot_clear(slot);
                memcpy(slots[slot].data, p + 2, n - 2);
                slots[slot].len = n - 2;
                memcpy(slots[slot].fds, fds, sizeof(int) * n_fds);
                slots[slot].n_fds = n_fds;
                return true;
        }
        close_fds(fds, n_fds); /* a fetch carries none */
        {
                uint8_t hdr[2] = { KEEPER_TAG_RECORD, (uint8_t) slot };
                struct iovec iov[2] = { { hdr, sizeof hdr }, { slots[slot].data, slots[slot].len } };
                (void) keeper_send_fds(ctl, iov, 2, slots[slot].fds, slots[slot].n_fds);
        }
        return true;
}

int keeper_store(unsigned slot, const void *record, size_t len, const int *fds, size_t n_fds) {
        uint8_t hdr[2] = { KEEPER_TAG_STORE, (uint8_t) slot };
        struct iovec iov[2] = { { hdr, sizeof hdr }, { (void *) record, len } };
        int ctl = sandbox_channel_fd();

        if (ctl < 0)
                return -ENOTCONN;
        if (slot >= KEEPER_SLOTS || len > KEEPER_MAX_RECORD)
                return -EINVAL;
        return keeper_send_fds(ctl, iov, 2, fds, n_fds);
}

static int fetch_from(unsigned slot, uint32_t from, void *buf, size_t size, int *fds, size_t max, size_t *ret_n_fds) {
        uint8_t hdr[6] = { KEEPER_TAG_FETCH, (uint8_t) slot }, got[2];
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * KEEPER_MAX_FDS)];
        } control;
        struct iovec iov[2] = { { got, sizeof got }, { buf, size } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = &control,
                             .msg_controllen = sizeof control };
        int ctl = sandbox_channel_fd();
        size_t n_fds = 0;
        ssize_t n;

        *ret_n_fds = 0;
        if (ctl < 0)
                return -ENOTCONN;
        memcpy(hdr + 2, &from, sizeof from);
        n = keeper_send_fds(ctl, &(struct iovec) { hdr, sizeof hdr }, 1, NULL, 0);
        if (n >= 0)
                n = keeper_recv(ctl, &mh);
        if (n < 0)
                return (int) n;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        int *f = (int *) CMSG_DATA(c);
                        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                                if (n_fds < max)
                                        fds[n_fds++] = f[i];
                                else
                                        safe_close(f[i]);
                }
        *ret_n_fds = n_fds;
        if (n < 2 || got[0] != KEEPER_TAG_RECORD || got[1] != slot || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                close_fds(fds, n_fds);
                *ret_n_fds = 0;
                return -EBADMSG;
        }
        return (int) (n - 2);
}

int keeper_fetch(unsigned slot, void *buf, size_t size, int *fds, size_t max, size_t *ret_n_fds) {
        return fetch_from(slot, 0, buf, size, fds, max, ret_n_fds);
}

int keeper_store_list(const int *fds, size_t n) {
        int ctl = sandbox_channel_fd();

        if (ctl < 0)
                return -ENOTCONN;
        for (size_t at = 0; at == 0 || at < n; at += KEEPER_MAX_FDS) {
                uint8_t hdr[2] = { at == 0 ? KEEPER_TAG_STORE : KEEPER_TAG_APPEND, KEEPER_SLOT_UPGRADE_FDS };
                struct iovec iov = { hdr, sizeof hdr };
                int r = keeper_send_fds(ctl, &iov, 1, fds ? fds + at : NULL, MIN(n - at, (size_t) KEEPER_MAX_FDS));
                if (r < 0)
                        return r;
        }
        return 0;
}

int keeper_fetch_list(size_t n_want, int **ret) {
        _cleanup_free_ int *all = NULL;
        size_t have = 0;

        *ret = NULL;
        if (n_want > KEEPER_MAX_LIST_FDS)
                return -E2BIG;
        all = malloc(MAX(n_want, (size_t) 1) * sizeof(int));
        if (!all)
                return -ENOMEM;
        while (have < n_want) {
                uint32_t total;
                size_t got;
                int r = fetch_from(KEEPER_SLOT_UPGRADE_FDS, (uint32_t) have, &total, sizeof total, all + have,
                                   n_want - have, &got);
                if (r >= 0 && (r != sizeof total || total != n_want || got == 0)) {
                        close_fds(all + have, got);
                        r = -EBADMSG;
                }
                if (r < 0) {
                        close_fds(all, have);
                        return r;
                }
                have += got;
        }
        *ret = TAKE_PTR(all);
        return 0;
}
