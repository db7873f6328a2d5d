/* keeper.c: records and fds kept by the supervisor for the next serving process (keeper.h). */
#include "keeper.h"

#include <errno.h>
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

void keeper_clear(void) {
        for (unsigned i = 0; i < KEEPER_SLOTS; i++)
                slot_clear(i);
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
        if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
                return -errno;
        return 0;
}

bool keeper_handle(int ctl, const void *buf, size_t n, int *fds, size_t n_fds) {
        const uint8_t *p = buf;
        unsigned slot;

        if (n < 2 || (p[0] != KEEPER_TAG_STORE && p[0] != KEEPER_TAG_FETCH))
                return false;
        slot = p[1];
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

int keeper_fetch(unsigned slot, void *buf, size_t size, int *fds, size_t max, size_t *ret_n_fds) {
        uint8_t hdr[2] = { KEEPER_TAG_FETCH, (uint8_t) slot }, got[2];
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
        if (send(ctl, hdr, sizeof hdr, MSG_NOSIGNAL) != sizeof hdr)
                return -errno;
        n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
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
