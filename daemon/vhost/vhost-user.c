/* vhost-user.c: receiving frontend messages with their fds, and one handler per request type. */
#include "vhost-user.h"

#include <endian.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "guest-memory.h" /* GUEST_MEMORY_MAX_REGIONS */
#include "log.h"

static const char *const request_names[_VHOST_USER_MAX] = {
        [VHOST_USER_GET_FEATURES] = "GET_FEATURES",
        [VHOST_USER_SET_FEATURES] = "SET_FEATURES",
        [VHOST_USER_SET_OWNER] = "SET_OWNER",
        [VHOST_USER_RESET_OWNER] = "RESET_OWNER",
        [VHOST_USER_SET_MEM_TABLE] = "SET_MEM_TABLE",
        [VHOST_USER_SET_LOG_BASE] = "SET_LOG_BASE",
        [VHOST_USER_SET_LOG_FD] = "SET_LOG_FD",
        [VHOST_USER_SET_VRING_NUM] = "SET_VRING_NUM",
        [VHOST_USER_SET_VRING_ADDR] = "SET_VRING_ADDR",
        [VHOST_USER_SET_VRING_BASE] = "SET_VRING_BASE",
        [VHOST_USER_GET_VRING_BASE] = "GET_VRING_BASE",
        [VHOST_USER_SET_VRING_KICK] = "SET_VRING_KICK",
        [VHOST_USER_SET_VRING_CALL] = "SET_VRING_CALL",
        [VHOST_USER_SET_VRING_ERR] = "SET_VRING_ERR",
        [VHOST_USER_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
        [VHOST_USER_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
        [VHOST_USER_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
        [VHOST_USER_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
        [VHOST_USER_SET_BACKEND_REQ_FD] = "SET_BACKEND_REQ_FD",
        [VHOST_USER_GET_CONFIG] = "GET_CONFIG",
        [VHOST_USER_SET_CONFIG] = "SET_CONFIG",
        [VHOST_USER_GET_INFLIGHT_FD] = "GET_INFLIGHT_FD",
        [VHOST_USER_SET_INFLIGHT_FD] = "SET_INFLIGHT_FD",
        [VHOST_USER_RESET_DEVICE] = "RESET_DEVICE",
        [VHOST_USER_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
        [VHOST_USER_ADD_MEM_REG] = "ADD_MEM_REG",
        [VHOST_USER_REM_MEM_REG] = "REM_MEM_REG",
        [VHOST_USER_SET_DEVICE_STATE_FD] = "SET_DEVICE_STATE_FD",
        [VHOST_USER_CHECK_DEVICE_STATE] = "CHECK_DEVICE_STATE",
};

const char *vhost_user_request_to_string(uint32_t request) {
        if (request < _VHOST_USER_MAX && request_names[request])
                return request_names[request];
        return "UNKNOWN";
}

void vhost_user_msg_close_fds(VhostUserMsg *msg) {
        for (unsigned i = 0; i < msg->n_fds; i++)
                msg->fds[i] = safe_close(msg->fds[i]);
        msg->n_fds = 0;
}

static int read_full(int fd, void *buf, size_t len) {
        uint8_t *p = buf;

        while (len > 0) {
                ssize_t n = recv(fd, p, len, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        /* EAGAIN here is the receive timeout: a frontend that stops mid-message. */
                        return errno == EAGAIN ? -ETIMEDOUT : negative_errno();
                }
                if (n == 0)
                        return -ECONNRESET;
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

/* Waits until len bytes are queued on the stream fd, or the frontend stopped writing, at most
 * about a second (a frontend that wrote part of a message and stalls is then read as before:
 * blocking on the rest). */
static void wait_queued(int fd, size_t len) {
        for (unsigned k = 0; k < 1000; k++) {
                struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
                int queued = 0;
                if (ioctl(fd, SIOCINQ, &queued) < 0 || queued < 0 || (size_t) queued >= len)
                        return;
                if (poll(&p, 1, 0) < 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        return; /* nothing more will come */
                (void) usleep(1000);
        }
}

int vhost_user_recv(int fd, VhostUserMsg *msg) {
        union {
                struct cmsghdr align;
                uint8_t buf[CMSG_SPACE(VHOST_USER_MAX_FDS * sizeof(int))];
        } control;
        struct iovec iov[2] = { { &msg->hdr, sizeof msg->hdr }, { &msg->payload, 0 } };
        struct msghdr mh = {
                .msg_iov = iov,
                .msg_iovlen = 1,
                .msg_control = &control,
                .msg_controllen = sizeof control,
        };
        VhostUserHeader peek;
        size_t got_payload = 0;
        ssize_t n;
        int r;

        msg->n_fds = 0;
        /* The message is taken off the socket in one call once it is all there: a serving process
         * that dies while it waits for a payload (its frontend wrote the header first) has taken
         * nothing, and the one that takes over (docs/survival.md) reads the message whole, not
         * its payload as the next header. So the header is peeked first (no fds: they stay with
         * the message), for the size. QEMU writes a message at once: nothing to wait for. */
        do
                n = recv(fd, &peek, sizeof peek, MSG_PEEK | MSG_WAITALL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        if (n == 0)
                return -ECONNRESET;
        if ((size_t) n == sizeof peek && peek.size <= sizeof msg->payload) {
                wait_queued(fd, sizeof peek + peek.size);
                iov[1].iov_len = peek.size;
                mh.msg_iovlen = 2;
        }
        do
                n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        if (n == 0)
                return -ECONNRESET;
        if ((size_t) n > sizeof msg->hdr)
                got_payload = (size_t) n - sizeof msg->hdr;

        /* Collect fds first so they are closed whatever else is wrong with the message. */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                unsigned k = (unsigned) ((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                for (unsigned i = 0; i < k; i++) {
                        int f;
                        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
                        if (msg->n_fds < VHOST_USER_MAX_FDS)
                                msg->fds[msg->n_fds++] = f;
                        else
                                safe_close(f);
                }
        }
        if (mh.msg_flags & MSG_CTRUNC) {
                log_warning("vhost-user message carried more fds than any request uses");
                vhost_user_msg_close_fds(msg);
                return -EBADMSG;
        }
        if ((size_t) n < sizeof msg->hdr) {
                r = read_full(fd, (uint8_t *) &msg->hdr + n, sizeof msg->hdr - (size_t) n);
                if (r < 0)
                        goto fail;
        }
        if ((msg->hdr.flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION ||
            (msg->hdr.flags & VHOST_USER_REPLY_MASK)) {
                log_warning("vhost-user message with flags 0x%x: wrong version or a reply", msg->hdr.flags);
                r = -EBADMSG;
                goto fail;
        }
        if (msg->hdr.size > sizeof msg->payload) {
                log_warning("vhost-user %s with a %u byte payload, larger than any request",
                            vhost_user_request_to_string(msg->hdr.request), msg->hdr.size);
                r = -EBADMSG;
                goto fail;
        }
        /* The payload read with the header is the size the peek saw, which is this header's; the
         * rest of it (a message split where the kernel stops a read: after the part with the fds)
         * comes now. */
        if (got_payload > msg->hdr.size) {
                r = -EBADMSG;
                goto fail;
        }
        memset((uint8_t *) &msg->payload + got_payload, 0, sizeof msg->payload - got_payload);
        r = read_full(fd, (uint8_t *) &msg->payload + got_payload, msg->hdr.size - got_payload);
        if (r < 0)
                goto fail;
        return 0;
fail:
        vhost_user_msg_close_fds(msg);
        return r;
}

static int send_reply(const VhostUserBackendOps *ops, void *d, int fd, const VhostUserMsg *req, const void *payload,
                      uint32_t size) {
        VhostUserHeader h = {
                .request = req->hdr.request,
                .flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK,
                .size = size,
        };
        struct iovec iov[2] = { { &h, sizeof h }, { (void *) payload, size } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
        ssize_t n;

        if (ops->before_reply)
                ops->before_reply(d);
        do
                n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        /* EAGAIN is the send timeout (SO_SNDTIMEO, set with the receive timeout when the connection
         * is accepted): the frontend has not read its replies for that long. */
        if (n < 0 && errno == EAGAIN)
                return log_warning_errno(ETIMEDOUT, "vhost-user %s: the frontend does not read replies, giving up",
                                         vhost_user_request_to_string(req->hdr.request));
        if (n < 0)
                return negative_errno();
        if ((size_t) n != sizeof h + size)
                return -EIO;
        return 0;
}

static int reply_u64(const VhostUserBackendOps *ops, void *d, int fd, const VhostUserMsg *req, uint64_t v) {
        return send_reply(ops, d, fd, req, &v, sizeof v);
}

/* Checks the payload is exactly as large as the request's layout. */
static int expect_size(const VhostUserMsg *msg, size_t size) {
        if (msg->hdr.size != size)
                return log_warning_errno(EINVAL, "vhost-user %s: payload of %u bytes, expected %zu",
                                         vhost_user_request_to_string(msg->hdr.request), msg->hdr.size, size);
        return 0;
}

static int expect_fds(VhostUserMsg *msg, unsigned n) {
        if (msg->n_fds != n)
                return log_warning_errno(EINVAL, "vhost-user %s: %u fds, expected %u",
                                         vhost_user_request_to_string(msg->hdr.request), msg->n_fds, n);
        return 0;
}

/* A request that only exists with a protocol feature: refused without it. */
static int has_protocol(const VhostUserBackendOps *ops, void *d, unsigned bit, const VhostUserMsg *msg) {
        bool implemented = bit == VHOST_USER_PROTOCOL_F_LOG_SHMFD ? ops->set_log_base != NULL
                                                                  : ops->set_device_state_fd && ops->check_device_state;

        if (!implemented || !(ops->protocol_features(d) & (1ULL << bit)))
                return log_warning_errno(EPROTO, "vhost-user %s without its protocol feature negotiated",
                                         vhost_user_request_to_string(msg->hdr.request));
        return 0;
}

/* A request of a protocol feature with its exact payload size and fd count. */
static int expect_feature_request(const VhostUserBackendOps *ops, void *d, unsigned bit, VhostUserMsg *msg, size_t size,
                                  unsigned n_fds) {
        int r = has_protocol(ops, d, bit, msg);
        if (r >= 0)
                r = expect_size(msg, size);
        if (r >= 0)
                r = expect_fds(msg, n_fds);
        return r;
}

/* KICK/CALL/ERR: u64 with the queue index and a "no fd" bit; takes the fd out of msg. */
static int vring_fd_payload(VhostUserMsg *msg, unsigned *idx, int *fd) {
        int r = expect_size(msg, sizeof(uint64_t));
        if (r < 0)
                return r;
        if (msg->payload.u64 & ~(uint64_t) (VHOST_USER_VRING_IDX_MASK | VHOST_USER_VRING_NOFD_MASK))
                return log_warning_errno(EINVAL, "vhost-user %s: unknown bits in 0x%" PRIx64,
                                         vhost_user_request_to_string(msg->hdr.request), msg->payload.u64);
        *idx = msg->payload.u64 & VHOST_USER_VRING_IDX_MASK;
        r = expect_fds(msg, (msg->payload.u64 & VHOST_USER_VRING_NOFD_MASK) ? 0 : 1);
        if (r < 0)
                return r;
        *fd = msg->n_fds ? msg->fds[0] : -1;
        msg->n_fds = 0;
        return 0;
}

typedef struct __attribute__((packed)) VhostUserConfigHeader {
        uint32_t offset, size, flags;
} VhostUserConfigHeader;

/* GET_CONFIG: the requested window of the config space. A window outside it gets the header
 * alone, which QEMU (and the Rust vhost-user-backend) read as a failed request; the connection
 * stays. */
static int handle_get_config(const VhostUserBackendOps *ops, void *d, int fd, const VhostUserMsg *msg) {
        struct __attribute__((packed)) {
                VhostUserConfigHeader h;
                uint8_t region[VHOST_USER_CONFIG_SPACE_MAX];
        } reply = {};
        uint8_t space[VHOST_USER_CONFIG_SPACE_MAX] = {};
        VhostUserConfigHeader req;
        size_t n = ops->get_config ? ops->get_config(d, space, sizeof space) : 0;

        if (msg->hdr.size < sizeof req) {
                log_warning("vhost-user GET_CONFIG: payload of %u bytes is shorter than its header", msg->hdr.size);
                return send_reply(ops, d, fd, msg, &reply.h, 0);
        }
        memcpy(&req, msg->payload.raw, sizeof req);
        reply.h = req;
        if (req.offset > n || req.size > n - req.offset || msg->hdr.size != sizeof req + req.size) {
                log_debug("vhost-user GET_CONFIG: window %u+%u outside the %zu-byte config space", req.offset,
                          req.size, n);
                return send_reply(ops, d, fd, msg, &reply.h, sizeof reply.h);
        }
        memcpy(reply.region, space + req.offset, req.size);
        return send_reply(ops, d, fd, msg, &reply, (uint32_t) (sizeof reply.h + req.size));
}

/* Handles one request. Returns >= 0 (the ack value is 0) or negative errno (ack non-zero);
 * *replied is set when the handler sent the request's own reply. */
static int dispatch(const VhostUserBackendOps *ops, void *d, int fd, VhostUserMsg *msg, bool *replied) {
        unsigned idx, base;
        int vfd, r;

        switch (msg->hdr.request) {
        case VHOST_USER_GET_FEATURES:
                *replied = true;
                return reply_u64(ops, d, fd, msg, ops->offered_features(d));

        case VHOST_USER_SET_FEATURES:
                r = expect_size(msg, sizeof(uint64_t));
                return r < 0 ? r : ops->set_features(d, msg->payload.u64);

        case VHOST_USER_GET_PROTOCOL_FEATURES:
                *replied = true;
                return reply_u64(ops, d, fd, msg, ops->offered_protocol_features(d));

        case VHOST_USER_SET_PROTOCOL_FEATURES:
                r = expect_size(msg, sizeof(uint64_t));
                if (r < 0)
                        return r;
                if (msg->payload.u64 & ~ops->offered_protocol_features(d))
                        return log_warning_errno(EINVAL, "Frontend acked protocol features we did not offer: 0x%" PRIx64,
                                                 msg->payload.u64);
                ops->set_protocol_features(d, msg->payload.u64);
                return 0;

        case VHOST_USER_GET_CONFIG:
                *replied = true;
                if (!(ops->protocol_features(d) & (1ULL << VHOST_USER_PROTOCOL_F_CONFIG)))
                        log_debug("vhost-user GET_CONFIG without PROTOCOL_F_CONFIG negotiated");
                return handle_get_config(ops, d, fd, msg);

        case VHOST_USER_SET_CONFIG:
                /* virtio-fs has no writable config field. */
                return log_warning_errno(EPERM, "vhost-user SET_CONFIG refused: the config space is read-only");

        case VHOST_USER_SET_OWNER:
                ops->set_owner(d);
                return 0;

        case VHOST_USER_RESET_OWNER:
        case VHOST_USER_RESET_DEVICE:
                /* Deprecated/unused by QEMU for fs; treat as "stop everything" and keep the session. */
                ops->reset(d);
                return 0;

        case VHOST_USER_GET_QUEUE_NUM:
                *replied = true;
                return reply_u64(ops, d, fd, msg, ops->queue_count(d));

        case VHOST_USER_GET_MAX_MEM_SLOTS:
                *replied = true;
                return reply_u64(ops, d, fd, msg, GUEST_MEMORY_MAX_REGIONS);

        case VHOST_USER_SET_MEM_TABLE:
                if (msg->hdr.size < 8 || msg->payload.memory.nregions > VHOST_USER_MAX_RAM_SLOTS ||
                    msg->hdr.size != 8 + msg->payload.memory.nregions * sizeof(VhostUserMemoryRegion))
                        return log_warning_errno(EINVAL, "SET_MEM_TABLE: size %u does not match %u regions",
                                                 msg->hdr.size, msg->payload.memory.nregions);
                return ops->set_mem_table(d, &msg->payload.memory, msg->fds, msg->n_fds);

        case VHOST_USER_ADD_MEM_REG:
                r = expect_size(msg, sizeof(VhostUserMemRegMsg));
                if (r >= 0)
                        r = expect_fds(msg, 1);
                return r < 0 ? r : ops->add_mem_region(d, &msg->payload.memreg.region, msg->fds[0]);

        case VHOST_USER_REM_MEM_REG:
                /* May carry an fd it does not need; it is closed with the message. */
                r = expect_size(msg, sizeof(VhostUserMemRegMsg));
                return r < 0 ? r : ops->remove_mem_region(d, &msg->payload.memreg.region);

        case VHOST_USER_SET_VRING_NUM:
                r = expect_size(msg, sizeof(struct vhost_vring_state));
                return r < 0 ? r : ops->set_vring_num(d, msg->payload.state.index, msg->payload.state.num);

        case VHOST_USER_SET_VRING_ADDR:
                r = expect_size(msg, sizeof(struct vhost_vring_addr));
                if (r < 0)
                        return r;
                if (msg->payload.addr.flags & ~(1u << VHOST_VRING_F_LOG))
                        return log_warning_errno(EINVAL, "SET_VRING_ADDR with unknown flags 0x%x", msg->payload.addr.flags);
                return ops->set_vring_addr(d, &msg->payload.addr);

        case VHOST_USER_SET_VRING_BASE:
                r = expect_size(msg, sizeof(struct vhost_vring_state));
                return r < 0 ? r : ops->set_vring_base(d, msg->payload.state.index, msg->payload.state.num);

        case VHOST_USER_GET_VRING_BASE: {
                struct vhost_vring_state s;
                r = expect_size(msg, sizeof(struct vhost_vring_state));
                if (r >= 0)
                        r = ops->get_vring_base(d, msg->payload.state.index, &base);
                /* The frontend waits for this reply whatever happened; an unknown queue reads 0. */
                s = (struct vhost_vring_state) { .index = msg->payload.state.index, .num = r < 0 ? 0 : base };
                *replied = true;
                return send_reply(ops, d, fd, msg, &s, sizeof s);
        }

        case VHOST_USER_SET_VRING_KICK:
                r = vring_fd_payload(msg, &idx, &vfd);
                return r < 0 ? r : ops->set_vring_kick(d, idx, vfd);

        case VHOST_USER_SET_VRING_CALL:
                r = vring_fd_payload(msg, &idx, &vfd);
                return r < 0 ? r : ops->set_vring_call(d, idx, vfd);

        case VHOST_USER_SET_VRING_ERR:
                r = vring_fd_payload(msg, &idx, &vfd);
                return r < 0 ? r : ops->set_vring_err(d, idx, vfd);

        case VHOST_USER_SET_VRING_ENABLE:
                r = expect_size(msg, sizeof(struct vhost_vring_state));
                if (r < 0)
                        return r;
                if (msg->payload.state.num > 1)
                        return log_warning_errno(EINVAL, "SET_VRING_ENABLE with %u", msg->payload.state.num);
                return ops->set_vring_enable(d, msg->payload.state.index, msg->payload.state.num == 1);

        case VHOST_USER_SET_LOG_BASE:
                /* Answered with a u64 whatever happened (QEMU waits for a reply, libvhost-user and the
                 * Rust backends send one): 0, or 1 when the log was refused. */
                *replied = true;
                r = expect_feature_request(ops, d, VHOST_USER_PROTOCOL_F_LOG_SHMFD, msg, sizeof(VhostUserLog), 1);
                if (r >= 0) {
                        r = ops->set_log_base(d, msg->payload.log.mmap_size, msg->payload.log.mmap_offset, msg->fds[0]);
                        msg->n_fds = 0;
                }
                return reply_u64(ops, d, fd, msg, r < 0 ? 1 : 0);

        case VHOST_USER_SET_DEVICE_STATE_FD:
                *replied = true;
                r = expect_feature_request(ops, d, VHOST_USER_PROTOCOL_F_DEVICE_STATE, msg, sizeof(VhostUserTransferState), 1);
                if (r >= 0 && msg->payload.transfer.direction != VHOST_USER_TRANSFER_SAVE &&
                    msg->payload.transfer.direction != VHOST_USER_TRANSFER_LOAD)
                        r = log_warning_errno(EINVAL, "SET_DEVICE_STATE_FD: unknown direction %u", msg->payload.transfer.direction);
                if (r >= 0 && msg->payload.transfer.phase != VHOST_USER_TRANSFER_PHASE_STOPPED)
                        r = log_warning_errno(EINVAL, "SET_DEVICE_STATE_FD: phase %u (only a stopped device is migrated)",
                                              msg->payload.transfer.phase);
                if (r >= 0) {
                        r = ops->set_device_state_fd(d, msg->payload.transfer.direction, msg->fds[0]);
                        msg->n_fds = 0;
                }
                /* Never a pipe of our own: the frontend's end is used. */
                return reply_u64(ops, d, fd, msg, (r < 0 ? 1 : 0) | VHOST_USER_TRANSFER_NO_FD);

        case VHOST_USER_CHECK_DEVICE_STATE:
                *replied = true;
                r = expect_feature_request(ops, d, VHOST_USER_PROTOCOL_F_DEVICE_STATE, msg, 0, 0);
                if (r >= 0)
                        r = ops->check_device_state(d);
                return reply_u64(ops, d, fd, msg, r < 0 ? 1 : 0);

        default:
                log_warning("Unsupported vhost-user request %u (%s), size %u: refusing it", msg->hdr.request,
                            vhost_user_request_to_string(msg->hdr.request), msg->hdr.size);
                return -EOPNOTSUPP;
        }
}

int vhost_user_handle(const VhostUserBackendOps *ops, void *d, int fd, VhostUserMsg *msg) {
        bool replied = false, need_ack;
        int r, s;

        log_debug("vhost-user %s flags 0x%x size %u fds %u", vhost_user_request_to_string(msg->hdr.request),
                  msg->hdr.flags, msg->hdr.size, msg->n_fds);

        need_ack = (msg->hdr.flags & VHOST_USER_NEED_REPLY_MASK) &&
                   (ops->protocol_features(d) & (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK));
        r = dispatch(ops, d, fd, msg, &replied);
        vhost_user_msg_close_fds(msg); /* whatever the handler did not take */

        if (replied) /* r is the result of sending the request's own reply */
                return r;
        if (r < 0)
                log_debug_errno(r, "vhost-user %s failed: %m", vhost_user_request_to_string(msg->hdr.request));
        if (need_ack) {
                s = reply_u64(ops, d, fd, msg, r < 0 ? 1 : 0);
                if (s < 0)
                        return s;
        }
        return 0;
}
