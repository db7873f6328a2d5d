/* frontend.c: backend process control and the QEMU side of the vhost-user protocol. */
#include "frontend.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "util.h"

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

_printf_(3, 4) static int fail(Frontend *fe, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(fe->error, sizeof(fe->error), fmt, ap);
        va_end(ap);
        return r;
}

/* ---- backend process ---- */

int fe_backend_spawn(FeBackend **ret, char *const argv[], const char *socket_path, int timeout_ms) {
        int64_t deadline = now_ms() + timeout_ms;
        pid_t parent = getpid();
        FeBackend *b;

        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->socket_path = strdup(socket_path);
        if (!b->socket_path) {
                free(b);
                return -ENOMEM;
        }
        b->pid = fork();
        if (b->pid < 0) {
                int r = negative_errno();
                fe_backend_free(b);
                return r;
        }
        if (b->pid == 0) {
                /* Die with the test: a failed Check test exits without running its teardown. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(127);
                execv(argv[0], argv);
                fprintf(stderr, "exec %s: %m\n", argv[0]);
                _exit(127);
        }
        for (;;) {
                struct stat st;
                if (stat(socket_path, &st) == 0 && S_ISSOCK(st.st_mode))
                        break;
                if (!fe_backend_alive(b)) {
                        fe_backend_free(b);
                        return -ECHILD;
                }
                if (now_ms() > deadline) {
                        fe_backend_free(b);
                        return -ETIMEDOUT;
                }
                sleep_ms(5);
        }
        *ret = b;
        return 0;
}

bool fe_backend_alive(FeBackend *b) {
        int st;
        if (b->reaped)
                return false;
        if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
                b->reaped = true;
                b->status = st;
                return false;
        }
        return true;
}

int fe_backend_wait(FeBackend *b, int timeout_ms, int *ret_status) {
        int64_t deadline = now_ms() + timeout_ms;
        while (fe_backend_alive(b)) {
                if (now_ms() > deadline)
                        return -ETIMEDOUT;
                sleep_ms(5);
        }
        if (ret_status)
                *ret_status = b->status;
        return 0;
}

int fe_backend_stop(FeBackend *b, int timeout_ms) {
        int st;
        if (!fe_backend_alive(b))
                return b->status;
        kill(b->pid, SIGTERM);
        if (fe_backend_wait(b, timeout_ms, &st) == 0)
                return st;
        kill(b->pid, SIGKILL);
        if (waitpid(b->pid, &st, 0) < 0)
                return negative_errno();
        b->reaped = true;
        b->status = st;
        return st;
}

FeBackend *fe_backend_free(FeBackend *b) {
        if (!b)
                return NULL;
        if (b->pid > 0)
                fe_backend_stop(b, 2000);
        free(b->socket_path);
        free(b);
        return NULL;
}

const char *fe_backend_describe(int status, char *buf, size_t len) {
        if (WIFEXITED(status))
                snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
                snprintf(buf, len, "killed by signal %d (%s)%s", WTERMSIG(status), strsignal(WTERMSIG(status)),
                         WCOREDUMP(status) ? ", core dumped" : "");
        else
                snprintf(buf, len, "wait status 0x%x", status);
        return buf;
}

/* ---- connection ---- */

void fe_options_init(FeOptions *o) {
        *o = (FeOptions) {
                .mem_size = 64ull << 20,
                .mem_layout = FE_MEM_QEMU_SPLIT,
                .add_mem_reg = false,
                .num_queues = 2,
                .queue_size = 128,
                .features_mask = (1ull << VIRTIO_F_VERSION_1) | (1ull << FE_VU_F_PROTOCOL_FEATURES) |
                                 (1ull << VIRTIO_RING_F_INDIRECT_DESC) | (1ull << VIRTIO_RING_F_EVENT_IDX),
                .protocol_mask = (1ull << FE_VU_PROTOCOL_F_MQ) | (1ull << FE_VU_PROTOCOL_F_REPLY_ACK) |
                                 (1ull << FE_VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS),
                .ring_region = -1,
                .timeout_ms = 5000,
        };
}

int fe_connect(Frontend **ret, const char *socket_path, const FeOptions *opts) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int64_t deadline;
        Frontend *fe;
        int r;

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        fe = calloc(1, sizeof(*fe));
        if (!fe)
                return -ENOMEM;
        if (opts)
                fe->opts = *opts;
        else
                fe_options_init(&fe->opts);
        if (fe->opts.num_queues == 0 || fe->opts.num_queues > FE_MAX_QUEUES) {
                free(fe);
                return -EINVAL;
        }
        deadline = now_ms() + fe->opts.timeout_ms;
        for (;;) {
                fe->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fe->sock < 0) {
                        r = negative_errno();
                        goto fail;
                }
                if (connect(fe->sock, (struct sockaddr *) &sa, sizeof(sa)) == 0)
                        break;
                r = negative_errno();
                fe->sock = safe_close(fe->sock);
                /* Between bind() and listen() connect() is refused; the socket file may not exist yet. */
                if ((r != -ECONNREFUSED && r != -ENOENT) || now_ms() > deadline)
                        goto fail;
                sleep_ms(5);
        }
        r = fe_mem_new(&fe->mem, fe->opts.mem_size, fe->opts.mem_layout);
        if (r < 0)
                goto fail;
        *ret = fe;
        return 0;
fail:
        fe_free(fe);
        return r;
}

Frontend *fe_free(Frontend *fe) {
        if (!fe)
                return NULL;
        safe_close(fe->sock);
        for (unsigned i = 0; i < FE_MAX_QUEUES; i++)
                fe_vring_free(fe->vq[i]);
        fe_mem_free(fe->mem);
        free(fe);
        return NULL;
}

/* ---- messages ---- */

int fe_vu_send_bytes(Frontend *fe, const void *buf, size_t len, const int *fds, unsigned nfds) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * FE_VU_MAX_FDS * 2)];
                struct cmsghdr align;
        } control = {};
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;

        if (nfds > FE_VU_MAX_FDS * 2)
                return -EINVAL;
        if (nfds > 0) {
                struct cmsghdr *c;
                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        do
                n = sendmsg(fe->sock, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return fail(fe, negative_errno(), "sendmsg: %m");
        if ((size_t) n != len) {
                /* The rest without fds. */
                const char *p = (const char *) buf + n;
                size_t left = len - (size_t) n;
                while (left > 0) {
                        n = send(fe->sock, p, left, MSG_NOSIGNAL);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                return fail(fe, n < 0 ? negative_errno() : -EPIPE, "send: %m");
                        p += n;
                        left -= (size_t) n;
                }
        }
        return 0;
}

int fe_vu_send_raw(Frontend *fe, uint32_t request, uint32_t flags, uint32_t size, const void *payload,
                   size_t payload_len, const int *fds, unsigned nfds) {
        _cleanup_free_ uint8_t *buf = malloc(sizeof(FeVuHeader) + payload_len);
        FeVuHeader h = { .request = request, .flags = flags, .size = size };

        if (!buf)
                return -ENOMEM;
        memcpy(buf, &h, sizeof(h));
        if (payload_len)
                memcpy(buf + sizeof(h), payload, payload_len);
        return fe_vu_send_bytes(fe, buf, sizeof(h) + payload_len, fds, nfds);
}

static int read_full(Frontend *fe, void *buf, size_t len, int64_t deadline) {
        uint8_t *p = buf;
        while (len > 0) {
                struct pollfd pfd = { .fd = fe->sock, .events = POLLIN };
                int64_t left = deadline - now_ms();
                ssize_t n;
                int k;

                if (left < 0)
                        left = 0;
                k = poll(&pfd, 1, (int) left);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        return -ETIMEDOUT;
                n = recv(fe->sock, p, len, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        return -ECONNRESET;
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

int fe_vu_recv(Frontend *fe, FeVuHeader *hdr, void *payload, size_t max, int timeout_ms) {
        int64_t deadline = now_ms() + timeout_ms;
        uint8_t discard[256];
        int r;

        r = read_full(fe, hdr, sizeof(*hdr), deadline);
        if (r < 0)
                return r == -ECONNRESET ? fail(fe, r, "backend closed the connection")
                                        : fail(fe, r, "reading reply header: %s", strerror(-r));
        if (hdr->size > 4096)
                return fail(fe, -EPROTO, "reply size %u too large", hdr->size);
        if (hdr->size <= max)
                r = read_full(fe, payload, hdr->size, deadline);
        else {
                r = read_full(fe, payload, max, deadline);
                if (r >= 0)
                        r = read_full(fe, discard, hdr->size - max, deadline);
        }
        if (r < 0)
                return fail(fe, r, "reading reply payload: %s", strerror(-r));
        return (int) hdr->size;
}

bool fe_vu_closed(Frontend *fe, int timeout_ms) {
        struct pollfd pfd = { .fd = fe->sock, .events = POLLIN | POLLRDHUP };
        char c;
        if (poll(&pfd, 1, timeout_ms) <= 0)
                return false;
        if (pfd.revents & (POLLHUP | POLLRDHUP | POLLERR))
                return true;
        return recv(fe->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static bool has_inherent_reply(uint32_t request) {
        switch (request) {
        case FE_VU_GET_FEATURES:
        case FE_VU_GET_PROTOCOL_FEATURES:
        case FE_VU_GET_VRING_BASE:
        case FE_VU_GET_QUEUE_NUM:
        case FE_VU_GET_MAX_MEM_SLOTS:
        case FE_VU_GET_STATUS:
        case FE_VU_GET_CONFIG:
        case FE_VU_GET_INFLIGHT_FD:
        case FE_VU_SET_LOG_BASE: /* with LOG_SHMFD, the only way the test frontend sends it */
        case FE_VU_SET_DEVICE_STATE_FD:
        case FE_VU_CHECK_DEVICE_STATE:
                return true;
        default:
                return false;
        }
}

int fe_vu_request(Frontend *fe, uint32_t request, bool need_reply, const void *payload, size_t size,
                  const int *fds, unsigned nfds, void *reply, size_t reply_size) {
        uint32_t flags = FE_VU_VERSION | (need_reply ? FE_VU_FLAG_NEED_REPLY : 0);
        uint64_t ack;
        FeVuHeader h;
        int r;

        r = fe_vu_send_raw(fe, request, flags, (uint32_t) size, payload, size, fds, nfds);
        if (r < 0)
                return r;
        if (has_inherent_reply(request)) {
                r = fe_vu_recv(fe, &h, reply, reply_size, fe->opts.timeout_ms);
                if (r < 0)
                        return r;
                if (h.request != request || h.flags != (FE_VU_VERSION | FE_VU_FLAG_REPLY) ||
                    h.size != reply_size)
                        return fail(fe, -EPROTO, "bad reply to request %u: request %u flags 0x%x size %u (want %zu)",
                                    request, h.request, h.flags, h.size, reply_size);
                return 0;
        }
        if (!need_reply)
                return 0;
        r = fe_vu_recv(fe, &h, &ack, sizeof(ack), fe->opts.timeout_ms);
        if (r < 0)
                return r;
        if (h.request != request || h.flags != (FE_VU_VERSION | FE_VU_FLAG_REPLY) || h.size != sizeof(ack))
                return fail(fe, -EPROTO, "bad ack to request %u: request %u flags 0x%x size %u", request, h.request,
                            h.flags, h.size);
        fe->last_ack = ack;
        if (ack != 0)
                return fail(fe, -EBADE, "request %u acked with %" PRIu64, request, ack);
        return 0;
}

int fe_vu_get_u64(Frontend *fe, uint32_t request, uint64_t *ret) {
        return fe_vu_request(fe, request, false, NULL, 0, NULL, 0, ret, sizeof(*ret));
}

int fe_vu_set_u64(Frontend *fe, uint32_t request, uint64_t value, bool need_reply) {
        return fe_vu_request(fe, request, need_reply, &value, sizeof(value), NULL, 0, NULL, 0);
}

int fe_vu_vring_state(Frontend *fe, uint32_t request, unsigned index, unsigned num, bool need_reply) {
        struct vhost_vring_state s = { .index = index, .num = num };
        return fe_vu_request(fe, request, need_reply, &s, sizeof(s), NULL, 0, NULL, 0);
}

int fe_vu_get_vring_base(Frontend *fe, unsigned index, unsigned *ret_num) {
        struct vhost_vring_state s = { .index = index }, reply = {};
        int r = fe_vu_request(fe, FE_VU_GET_VRING_BASE, false, &s, sizeof(s), NULL, 0, &reply, sizeof(reply));
        if (r < 0)
                return r;
        if (reply.index != index)
                return fail(fe, -EPROTO, "GET_VRING_BASE %u answered for index %u", index, reply.index);
        *ret_num = reply.num;
        return 0;
}

int fe_vu_vring_addr(Frontend *fe, const struct vhost_vring_addr *addr, bool need_reply) {
        return fe_vu_request(fe, FE_VU_SET_VRING_ADDR, need_reply, addr, sizeof(*addr), NULL, 0, NULL, 0);
}

int fe_vu_vring_fd(Frontend *fe, uint32_t request, unsigned index, int fd, bool need_reply) {
        uint64_t v = index | (fd < 0 ? FE_VU_VRING_NOFD_MASK : 0);
        return fe_vu_request(fe, request, need_reply, &v, sizeof(v), fd < 0 ? NULL : &fd, fd < 0 ? 0 : 1, NULL,
                             0);
}

int fe_vu_set_mem_table(Frontend *fe) {
        FeVuMemTable t = { .nregions = fe->mem->n_regions };
        int fds[FE_VU_MAX_FDS];

        for (unsigned i = 0; i < fe->mem->n_regions; i++)
                fds[i] = fe_mem_region_msg(fe->mem, i, &t.regions[i]);
        return fe_vu_request(fe, FE_VU_SET_MEM_TABLE, fe_ack(fe), &t, 8 + sizeof(FeVuRegion) * t.nregions, fds,
                             t.nregions, NULL, 0);
}

int fe_vu_add_mem_reg(Frontend *fe, unsigned region) {
        FeVuMemRegMsg m = {};
        int fd = fe_mem_region_msg(fe->mem, region, &m.region);
        return fe_vu_request(fe, FE_VU_ADD_MEM_REG, fe_ack(fe), &m, sizeof(m), &fd, 1, NULL, 0);
}

int fe_vu_rem_mem_reg(Frontend *fe, unsigned region) {
        FeVuMemRegMsg m = {};
        (void) fe_mem_region_msg(fe->mem, region, &m.region);
        return fe_vu_request(fe, FE_VU_REM_MEM_REG, fe_ack(fe), &m, sizeof(m), NULL, 0, NULL, 0);
}

int fe_vu_ping(Frontend *fe) {
        uint64_t f;
        int r = fe_vu_get_u64(fe, FE_VU_GET_FEATURES, &f);
        if (r < 0)
                return r;
        if (f != fe->backend_features)
                return fail(fe, -EPROTO, "GET_FEATURES changed: 0x%" PRIx64 " then 0x%" PRIx64, fe->backend_features,
                            f);
        return 0;
}

/* ---- QEMU sequences ---- */

#define TRY(expr, what)                                                                   \
        do {                                                                              \
                int _r = (expr);                                                          \
                if (_r < 0) {                                                             \
                        char _prev[sizeof(fe->error)];                                    \
                        memcpy(_prev, fe->error, sizeof(_prev));                          \
                        return fail(fe, _r, "%s: %s (%s)", what, strerror(-_r), _prev);   \
                }                                                                         \
        } while (0)

int fe_negotiate(Frontend *fe) {
        fe->error[0] = 0;
        TRY(fe_vu_get_u64(fe, FE_VU_GET_FEATURES, &fe->backend_features), "GET_FEATURES");
        if (!(fe->backend_features & (1ull << FE_VU_F_PROTOCOL_FEATURES)))
                return fail(fe, -EPROTO, "backend does not offer F_PROTOCOL_FEATURES (0x%" PRIx64 ")",
                            fe->backend_features);
        if (!(fe->backend_features & (1ull << VIRTIO_F_VERSION_1)))
                return fail(fe, -EPROTO, "backend does not offer VERSION_1 (0x%" PRIx64 ")", fe->backend_features);
        TRY(fe_vu_get_u64(fe, FE_VU_GET_PROTOCOL_FEATURES, &fe->backend_protocol), "GET_PROTOCOL_FEATURES");
        fe->protocol = fe->backend_protocol & fe->opts.protocol_mask;
        TRY(fe_vu_set_u64(fe, FE_VU_SET_PROTOCOL_FEATURES, fe->protocol, false), "SET_PROTOCOL_FEATURES");
        if (fe_has_protocol(fe, FE_VU_PROTOCOL_F_MQ)) {
                TRY(fe_vu_get_u64(fe, FE_VU_GET_QUEUE_NUM, &fe->queue_num), "GET_QUEUE_NUM");
                if (fe->queue_num < fe->opts.num_queues)
                        return fail(fe, -ERANGE, "backend serves %" PRIu64 " queues, %u wanted", fe->queue_num,
                                    fe->opts.num_queues);
        }
        if (fe_has_protocol(fe, FE_VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS))
                TRY(fe_vu_get_u64(fe, FE_VU_GET_MAX_MEM_SLOTS, &fe->max_mem_slots), "GET_MAX_MEM_SLOTS");
        TRY(fe_vu_request(fe, FE_VU_SET_OWNER, false, NULL, 0, NULL, 0, NULL, 0), "SET_OWNER");
        TRY(fe_vu_ping(fe), "second GET_FEATURES");

        /* QEMU hands over call and err fds for every queue long before rings or memory exist. */
        for (unsigned q = 0; q < fe->opts.num_queues; q++) {
                if (!fe->vq[q]) {
                        int r = fe_vring_new(&fe->vq[q], fe->mem, q, fe->opts.queue_size, fe->opts.ring_region);
                        if (r < 0)
                                return fail(fe, r, "allocating ring %u: %s", q, strerror(-r));
                }
                TRY(fe_vu_vring_fd(fe, FE_VU_SET_VRING_CALL, q, fe->vq[q]->call_fd, false), "SET_VRING_CALL");
                TRY(fe_vu_vring_fd(fe, FE_VU_SET_VRING_ERR, q, fe->vq[q]->err_fd, false), "SET_VRING_ERR");
        }
        return 0;
}

static int send_memory(Frontend *fe) {
        bool use_add = fe->opts.add_mem_reg && fe_has_protocol(fe, FE_VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS);

        if (!use_add) {
                TRY(fe_vu_set_mem_table(fe), "SET_MEM_TABLE");
                return 0;
        }
        if (fe->mem_regs_added)
                return 0; /* QEMU does not resend unchanged memory in this mode */
        for (unsigned i = 0; i < fe->mem->n_regions; i++)
                TRY(fe_vu_add_mem_reg(fe, i), "ADD_MEM_REG");
        fe->mem_regs_added = true;
        return 0;
}

int fe_start(Frontend *fe, bool fresh_rings) {
        unsigned n = fe->opts.num_queues;

        fe->error[0] = 0;
        for (unsigned q = 0; q < n; q++) {
                if (!fe->vq[q] || (fresh_rings && fe->ever_started)) {
                        fe->vq[q] = fe_vring_free(fe->vq[q]);
                        int r = fe_vring_new(&fe->vq[q], fe->mem, q, fe->opts.queue_size, fe->opts.ring_region);
                        if (r < 0)
                                return fail(fe, r, "allocating ring %u: %s", q, strerror(-r));
                        fe->vring_base[q] = 0;
                }
                TRY(fe_vu_vring_fd(fe, FE_VU_SET_VRING_CALL, q, fe_vring_new_call_fd(fe->vq[q]), false),
                    "SET_VRING_CALL");
        }
        fe->features = fe->backend_features & fe->opts.features_mask;
        TRY(fe_vu_set_u64(fe, FE_VU_SET_FEATURES, fe->features, false), "SET_FEATURES");
        {
                int r = send_memory(fe);
                if (r < 0)
                        return r;
        }
        for (unsigned q = 0; q < n; q++) {
                FeVring *vr = fe->vq[q];
                struct vhost_vring_addr a;

                vr->event_idx = fe_has_feature(fe, VIRTIO_RING_F_EVENT_IDX);
                TRY(fe_vu_vring_state(fe, FE_VU_SET_VRING_NUM, q, vr->num, false), "SET_VRING_NUM");
                TRY(fe_vu_vring_state(fe, FE_VU_SET_VRING_BASE, q, fe->vring_base[q], false), "SET_VRING_BASE");
                fe_vring_addr(vr, &a);
                TRY(fe_vu_vring_addr(fe, &a, false), "SET_VRING_ADDR");
                TRY(fe_vu_vring_fd(fe, FE_VU_SET_VRING_KICK, q, vr->kick_fd, false), "SET_VRING_KICK");
        }
        for (unsigned q = 0; q < n; q++)
                TRY(fe_vu_vring_state(fe, FE_VU_SET_VRING_ENABLE, q, 1, false), "SET_VRING_ENABLE");
        for (unsigned q = 0; q < n; q++)
                TRY(fe_vu_vring_fd(fe, FE_VU_SET_VRING_CALL, q, fe_vring_new_call_fd(fe->vq[q]), false),
                    "SET_VRING_CALL");
        /* Synchronise: every message above is processed once this round trip returns. */
        TRY(fe_vu_ping(fe), "GET_FEATURES after start");
        fe->started = true;
        fe->ever_started = true;
        return 0;
}

int fe_stop(Frontend *fe) {
        unsigned n = fe->opts.num_queues;

        fe->error[0] = 0;
        for (unsigned q = 0; q < n; q++)
                TRY(fe_vu_vring_state(fe, FE_VU_SET_VRING_ENABLE, q, 0, false), "SET_VRING_ENABLE 0");
        for (unsigned q = 0; q < n; q++) {
                unsigned base;
                TRY(fe_vu_get_vring_base(fe, q, &base), "GET_VRING_BASE");
                fe->vring_base[q] = (uint16_t) base;
        }
        for (unsigned q = 0; q < n; q++)
                TRY(fe_vu_vring_fd(fe, FE_VU_SET_VRING_CALL, q, fe_vring_new_call_fd(fe->vq[q]), false),
                    "SET_VRING_CALL");
        fe->started = false;
        return 0;
}

int fe_connect_and_start(Frontend **ret, const char *socket_path, const FeOptions *opts) {
        Frontend *fe;
        int r;

        r = fe_connect(&fe, socket_path, opts);
        if (r < 0)
                return r;
        r = fe_negotiate(fe);
        if (r >= 0)
                r = fe_start(fe, true);
        if (r < 0) {
                fprintf(stderr, "frontend: %s\n", fe->error);
                fe_free(fe);
                return r;
        }
        *ret = fe;
        return 0;
}

/* ---- live migration (QEMU 8.2's vhost_save_backend_state() and vhost_load_backend_state()) ---- */

/* SET_DEVICE_STATE_FD with fd (closed here); on success *ret_keep is the other end of the pipe,
 * on failure both are closed. QEMU's checks of the reply: no error, no pipe of the backend's. */
static int transfer_start(Frontend *fe, uint32_t direction, int *ret_keep) {
        struct {
                uint32_t direction, phase;
        } t = { direction, 0 };
        uint64_t reply;
        int p[2], send, r;

        if (pipe2(p, O_CLOEXEC) < 0)
                return fail(fe, negative_errno(), "pipe: %m");
        send = direction == FE_VU_TRANSFER_SAVE ? p[1] : p[0];
        *ret_keep = direction == FE_VU_TRANSFER_SAVE ? p[0] : p[1];
        r = fe_vu_request(fe, FE_VU_SET_DEVICE_STATE_FD, false, &t, sizeof t, &send, 1, &reply, sizeof reply);
        close(send);
        if (r == 0 && ((reply & 0xff) != 0 || !(reply & FE_VU_TRANSFER_NO_FD)))
                r = fail(fe, -EBADE, "SET_DEVICE_STATE_FD(%u) answered 0x%" PRIx64, direction, reply);
        if (r < 0)
                *ret_keep = safe_close(*ret_keep);
        return r;
}

int fe_check_state(Frontend *fe, uint64_t *ret) {
        return fe_vu_request(fe, FE_VU_CHECK_DEVICE_STATE, false, NULL, 0, NULL, 0, ret, sizeof *ret);
}

int fe_save_state(Frontend *fe, uint8_t **ret, size_t *ret_len) {
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0;
        uint64_t check;
        int fd, r;

        r = transfer_start(fe, FE_VU_TRANSFER_SAVE, &fd);
        if (r < 0)
                return r;
        for (;;) {
                ssize_t n;
                if (len == cap) {
                        uint8_t *nb = realloc(buf, cap = cap ? cap * 2 : 65536);
                        if (!nb) {
                                free(buf);
                                close(fd);
                                return -ENOMEM;
                        }
                        buf = nb;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t) n;
        }
        close(fd);
        r = fe_check_state(fe, &check);
        if (r == 0 && check != 0)
                r = fail(fe, -EBADE, "CHECK_DEVICE_STATE after saving answered %" PRIu64, check);
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

int fe_load_state(Frontend *fe, const uint8_t *buf, size_t len, uint64_t *ret_check) {
        int fd, r;

        /* vufsd may refuse the stream and close its end while we write: EPIPE, not a signal. */
        signal(SIGPIPE, SIG_IGN);
        r = transfer_start(fe, FE_VU_TRANSFER_LOAD, &fd);
        if (r < 0)
                return r;
        while (len > 0) {
                ssize_t n = write(fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break; /* refused: CHECK_DEVICE_STATE says why */
                buf += n;
                len -= (size_t) n;
        }
        close(fd);
        return fe_check_state(fe, ret_check);
}
