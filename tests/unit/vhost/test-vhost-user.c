/* test-vhost-user.c: vhost-user message decoding, validation and replies against a fake backend. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "vhost-user.h"
#include "test-main.h"

/* The fake backend: records what reached it, answers as told. */
typedef struct FakeBackend {
        unsigned calls;
        char last[32];
        unsigned idx, num;
        int fd;                 /* the fd the last vring fd call was given (kept open) */
        uint64_t features, protocol_features;
        bool owner, reset;
        int fail;               /* returned by the next int operation */
        unsigned before_reply;  /* before_reply() calls */
        char applied[32];       /* the last operation when before_reply() was called */
        bool reply_out;         /* a reply was on the socket already at a before_reply() */
} FakeBackend;

#define FAKE_OFFERED ((1ULL << 32) | (1ULL << VHOST_USER_F_PROTOCOL_FEATURES))
#define FAKE_OFFERED_PROTOCOL ((1ULL << VHOST_USER_PROTOCOL_F_MQ) | (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK))

static FakeBackend fb;
static int sv[2] = { -1, -1 }; /* [0]: the backend's end, [1]: the frontend's */

static int took(const char *what) {
        int r = fb.fail;
        fb.calls++;
        snprintf(fb.last, sizeof fb.last, "%s", what);
        fb.fail = 0;
        return r;
}

static uint64_t f_offered_features(void *b) {
        return FAKE_OFFERED;
}
static uint64_t f_offered_protocol_features(void *b) {
        return FAKE_OFFERED_PROTOCOL;
}
static uint64_t f_protocol_features(void *b) {
        return fb.protocol_features;
}
static unsigned f_queue_count(void *b) {
        return 3;
}
static int f_set_features(void *b, uint64_t features) {
        fb.features = features;
        return took("set_features");
}
static void f_set_protocol_features(void *b, uint64_t features) {
        fb.protocol_features = features;
        (void) took("set_protocol_features");
}
static void f_set_owner(void *b) {
        fb.owner = true;
        (void) took("set_owner");
}
static void f_reset(void *b) {
        fb.reset = true;
        (void) took("reset");
}
static int f_set_mem_table(void *b, const VhostUserMemory *m, const int *fds, unsigned n_fds) {
        fb.num = m->nregions;
        return took("set_mem_table");
}
static int f_add_mem_region(void *b, const VhostUserMemoryRegion *reg, int fd) {
        safe_close(fd);
        return took("add_mem_region");
}
static int f_remove_mem_region(void *b, const VhostUserMemoryRegion *reg) {
        return took("remove_mem_region");
}
static int f_set_vring_num(void *b, unsigned idx, unsigned num) {
        fb.idx = idx;
        fb.num = num;
        return took("set_vring_num");
}
static int f_set_vring_addr(void *b, const struct vhost_vring_addr *addr) {
        fb.idx = addr->index;
        return took("set_vring_addr");
}
static int f_set_vring_base(void *b, unsigned idx, unsigned base) {
        fb.idx = idx;
        fb.num = base;
        return took("set_vring_base");
}
static int f_get_vring_base(void *b, unsigned idx, unsigned *ret) {
        fb.idx = idx;
        *ret = 4242;
        return took("get_vring_base");
}
static int vring_fd(const char *what, unsigned idx, int fd) {
        fb.idx = idx;
        safe_close(fb.fd);
        fb.fd = fd;
        return took(what);
}
static int f_set_vring_kick(void *b, unsigned idx, int fd) {
        return vring_fd("set_vring_kick", idx, fd);
}
static int f_set_vring_call(void *b, unsigned idx, int fd) {
        return vring_fd("set_vring_call", idx, fd);
}
static int f_set_vring_err(void *b, unsigned idx, int fd) {
        return vring_fd("set_vring_err", idx, fd);
}
static int f_set_vring_enable(void *b, unsigned idx, bool enable) {
        fb.idx = idx;
        fb.num = enable;
        return took("set_vring_enable");
}

static void f_before_reply(void *b) {
        char c;
        fb.before_reply++;
        snprintf(fb.applied, sizeof fb.applied, "%s", fb.last);
        if (recv(sv[1], &c, 1, MSG_DONTWAIT | MSG_PEEK) > 0)
                fb.reply_out = true;
}

static const VhostUserBackendOps fake_ops = {
        .before_reply = f_before_reply,
        .offered_features = f_offered_features,
        .offered_protocol_features = f_offered_protocol_features,
        .protocol_features = f_protocol_features,
        .queue_count = f_queue_count,
        .set_features = f_set_features,
        .set_protocol_features = f_set_protocol_features,
        .set_owner = f_set_owner,
        .reset = f_reset,
        .set_mem_table = f_set_mem_table,
        .add_mem_region = f_add_mem_region,
        .remove_mem_region = f_remove_mem_region,
        .set_vring_num = f_set_vring_num,
        .set_vring_addr = f_set_vring_addr,
        .set_vring_base = f_set_vring_base,
        .get_vring_base = f_get_vring_base,
        .set_vring_kick = f_set_vring_kick,
        .set_vring_call = f_set_vring_call,
        .set_vring_err = f_set_vring_err,
        .set_vring_enable = f_set_vring_enable,
};

static void setup(void) {
        fb = (FakeBackend) { .fd = -1 };
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        log_set_max_level(LOG_CRIT); /* the refusals below log warnings by design */
}

static void teardown(void) {
        safe_close(fb.fd);
        safe_close(sv[0]);
        safe_close(sv[1]);
}

/* Handles one message as the backend would; returns vhost_user_handle()'s result. */
static int handle(uint32_t request, uint32_t flags, const void *payload, uint32_t size, int fd) {
        VhostUserMsg msg = { .hdr = { .request = request, .flags = VHOST_USER_VERSION | flags, .size = size } };

        ck_assert_uint_le(size, sizeof msg.payload);
        if (payload)
                memcpy(&msg.payload, payload, size);
        if (fd >= 0)
                msg.fds[msg.n_fds++] = fd;
        return vhost_user_handle(&fake_ops, &fb, sv[0], &msg);
}

/* Reads one reply (header + u64 or vring state payload); false when none is waiting. */
static bool reply(uint32_t request, void *payload, uint32_t size) {
        VhostUserHeader h;
        uint8_t buf[64];
        ssize_t n = recv(sv[1], buf, sizeof buf, MSG_DONTWAIT);

        if (n < 0 && errno == EAGAIN)
                return false;
        ck_assert_int_eq(n, (ssize_t) (sizeof h + size));
        memcpy(&h, buf, sizeof h);
        ck_assert_uint_eq(h.request, request);
        ck_assert_uint_eq(h.flags, VHOST_USER_VERSION | VHOST_USER_REPLY_MASK);
        ck_assert_uint_eq(h.size, size);
        memcpy(payload, buf + sizeof h, size);
        return true;
}

static uint64_t ack_of(uint32_t request) {
        uint64_t v = 99;
        ck_assert(reply(request, &v, sizeof v));
        return v;
}

static void with_reply_ack(void) {
        uint64_t pf = FAKE_OFFERED_PROTOCOL;
        ck_assert_int_eq(handle(VHOST_USER_SET_PROTOCOL_FEATURES, 0, &pf, sizeof pf, -1), 0);
        ck_assert_uint_eq(fb.protocol_features, pf);
}

START_TEST(test_get_replies) {
        uint64_t v;
        struct vhost_vring_state st = { .index = 2 };

        ck_assert_int_eq(handle(VHOST_USER_GET_FEATURES, 0, NULL, 0, -1), 0);
        ck_assert(reply(VHOST_USER_GET_FEATURES, &v, sizeof v));
        ck_assert_uint_eq(v, FAKE_OFFERED);
        ck_assert_int_eq(handle(VHOST_USER_GET_PROTOCOL_FEATURES, 0, NULL, 0, -1), 0);
        ck_assert(reply(VHOST_USER_GET_PROTOCOL_FEATURES, &v, sizeof v));
        ck_assert_uint_eq(v, FAKE_OFFERED_PROTOCOL);
        ck_assert_int_eq(handle(VHOST_USER_GET_QUEUE_NUM, 0, NULL, 0, -1), 0);
        ck_assert(reply(VHOST_USER_GET_QUEUE_NUM, &v, sizeof v));
        ck_assert_uint_eq(v, 3);
        ck_assert_int_eq(handle(VHOST_USER_GET_VRING_BASE, 0, &st, sizeof st, -1), 0);
        ck_assert(reply(VHOST_USER_GET_VRING_BASE, &st, sizeof st));
        ck_assert_uint_eq(st.index, 2);
        ck_assert_uint_eq(st.num, 4242);
        /* GET_VRING_BASE is answered whatever happens: a failed stop reads 0. */
        fb.fail = -EINVAL;
        ck_assert_int_eq(handle(VHOST_USER_GET_VRING_BASE, 0, &st, sizeof st, -1), 0);
        ck_assert(reply(VHOST_USER_GET_VRING_BASE, &st, sizeof st));
        ck_assert_uint_eq(st.num, 0);
        /* Even with a payload of the wrong size, without asking the backend. */
        fb.calls = 0;
        ck_assert_int_eq(handle(VHOST_USER_GET_VRING_BASE, 0, &st, 4, -1), 0);
        ck_assert(reply(VHOST_USER_GET_VRING_BASE, &st, sizeof st));
        ck_assert_uint_eq(st.num, 0);
        ck_assert_uint_eq(fb.calls, 0);
}
END_TEST

START_TEST(test_acks) {
        uint64_t v = FAKE_OFFERED;
        struct vhost_vring_state st = { .index = 1, .num = 256 };

        /* Without REPLY_ACK: no ack even when asked for. */
        ck_assert_int_eq(handle(VHOST_USER_SET_FEATURES, VHOST_USER_NEED_REPLY_MASK, &v, sizeof v, -1), 0);
        ck_assert(!reply(VHOST_USER_SET_FEATURES, &v, sizeof v));
        ck_assert_str_eq(fb.last, "set_features");
        with_reply_ack();
        /* With it: 0 for success, non-zero for failure; only when asked for. */
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_NUM, VHOST_USER_NEED_REPLY_MASK, &st, sizeof st, -1), 0);
        ck_assert_uint_eq(ack_of(VHOST_USER_SET_VRING_NUM), 0);
        ck_assert_uint_eq(fb.idx, 1);
        ck_assert_uint_eq(fb.num, 256);
        fb.fail = -EINVAL;
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_NUM, VHOST_USER_NEED_REPLY_MASK, &st, sizeof st, -1), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_VRING_NUM), 0);
        fb.fail = -EINVAL;
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_NUM, 0, &st, sizeof st, -1), 0);
        ck_assert(!reply(VHOST_USER_SET_VRING_NUM, &v, sizeof v));
        /* Owner and reset reach the backend. */
        ck_assert_int_eq(handle(VHOST_USER_SET_OWNER, VHOST_USER_NEED_REPLY_MASK, NULL, 0, -1), 0);
        ck_assert_uint_eq(ack_of(VHOST_USER_SET_OWNER), 0);
        ck_assert(fb.owner);
        ck_assert_int_eq(handle(VHOST_USER_RESET_DEVICE, 0, NULL, 0, -1), 0);
        ck_assert(fb.reset);
}
END_TEST

/* Malformed requests are refused here: the backend never sees them, the connection stays. */
/* A backend that keeps its state for a process taking over after its death stores it before the
 * frontend hears of a change: killed after an ack and before the store, it would lose a change the
 * frontend was told is made (fuzz-survive: a SET_VRING_ENABLE acked and lost, the ring never ran). */
START_TEST(test_before_reply) {
        struct vhost_vring_state st = { .index = 1, .num = 1 };
        uint64_t v;

        with_reply_ack();
        fb.before_reply = 0;
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_ENABLE, VHOST_USER_NEED_REPLY_MASK, &st, sizeof st, -1), 0);
        ck_assert_uint_eq(fb.before_reply, 1);
        ck_assert_str_eq(fb.applied, "set_vring_enable"); /* after the change... */
        ck_assert(!fb.reply_out);                           /* ...before its ack */
        ck_assert_uint_eq(ack_of(VHOST_USER_SET_VRING_ENABLE), 0);
        /* A reply of its own (GET_VRING_BASE stops the ring): the same. */
        ck_assert_int_eq(handle(VHOST_USER_GET_VRING_BASE, 0, &st, sizeof st, -1), 0);
        ck_assert_uint_eq(fb.before_reply, 2);
        ck_assert_str_eq(fb.applied, "get_vring_base");
        ck_assert(!fb.reply_out);
        ck_assert(reply(VHOST_USER_GET_VRING_BASE, &st, sizeof st));
        /* No reply, no call (the caller stores after the message as before). */
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_NUM, 0, &st, sizeof st, -1), 0);
        ck_assert_uint_eq(fb.before_reply, 2);
        ck_assert(!reply(VHOST_USER_SET_VRING_NUM, &v, sizeof v));
}
END_TEST

START_TEST(test_refused_before_backend) {
        uint64_t v = 1ULL << 60;
        struct vhost_vring_state st = { .index = 0, .num = 2 };
        VhostUserMemory mem = { .nregions = 2 };
        int p[2];

        with_reply_ack();
        fb.calls = 0;
        /* Protocol features that were not offered. */
        ck_assert_int_eq(handle(VHOST_USER_SET_PROTOCOL_FEATURES, VHOST_USER_NEED_REPLY_MASK, &v, sizeof v, -1), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_PROTOCOL_FEATURES), 0);
        ck_assert_uint_eq(fb.protocol_features, FAKE_OFFERED_PROTOCOL);
        /* Payload sizes. */
        ck_assert_int_eq(handle(VHOST_USER_SET_FEATURES, VHOST_USER_NEED_REPLY_MASK, &v, 4, -1), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_FEATURES), 0);
        {
                uint8_t raw[sizeof st + 1] = { 0 };
                ck_assert_int_eq(handle(VHOST_USER_SET_VRING_NUM, VHOST_USER_NEED_REPLY_MASK, raw, sizeof raw, -1), 0);
        }
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_VRING_NUM), 0);
        ck_assert_int_eq(handle(VHOST_USER_SET_MEM_TABLE, VHOST_USER_NEED_REPLY_MASK, &mem,
                                8 + 1 * sizeof(VhostUserMemoryRegion), -1), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_MEM_TABLE), 0);
        mem.nregions = VHOST_USER_MAX_RAM_SLOTS + 1;
        ck_assert_int_eq(handle(VHOST_USER_SET_MEM_TABLE, VHOST_USER_NEED_REPLY_MASK, &mem, 8, -1), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_MEM_TABLE), 0);
        /* SET_VRING_ENABLE with a value other than 0/1; an address flag other than dirty logging. */
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_ENABLE, VHOST_USER_NEED_REPLY_MASK, &st, sizeof st, -1), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_VRING_ENABLE), 0);
        {
                struct vhost_vring_addr a = { .index = 1, .flags = 1u << 5 };
                ck_assert_int_eq(handle(VHOST_USER_SET_VRING_ADDR, VHOST_USER_NEED_REPLY_MASK, &a, sizeof a, -1), 0);
                ck_assert_uint_ne(ack_of(VHOST_USER_SET_VRING_ADDR), 0);
        }
        /* Vring fd messages: unknown bits, an fd missing or one too many. */
        v = 1ULL << 20;
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_KICK, VHOST_USER_NEED_REPLY_MASK, &v, sizeof v, -1), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_VRING_KICK), 0);
        v = 1;
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_CALL, VHOST_USER_NEED_REPLY_MASK, &v, sizeof v, -1), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_VRING_CALL), 0);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        v = 1 | VHOST_USER_VRING_NOFD_MASK;
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_ERR, VHOST_USER_NEED_REPLY_MASK, &v, sizeof v, p[0]), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_VRING_ERR), 0);
        /* The fd nobody took was closed with the message. */
        ck_assert_int_eq(fcntl(p[0], F_GETFD), -1);
        close(p[1]);
        /* Unknown and unsupported requests. */
        ck_assert_int_eq(handle(200, VHOST_USER_NEED_REPLY_MASK, NULL, 0, -1), 0);
        ck_assert_uint_ne(ack_of(200), 0);
        ck_assert_int_eq(handle(VHOST_USER_SET_LOG_BASE, VHOST_USER_NEED_REPLY_MASK, NULL, 0, -1), 0);
        ck_assert_uint_ne(ack_of(VHOST_USER_SET_LOG_BASE), 0);
        ck_assert_uint_eq(fb.calls, 0);
}
END_TEST

START_TEST(test_vring_fds) {
        uint64_t v;
        int p[2];

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        v = 2;
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_KICK, 0, &v, sizeof v, p[0]), 0);
        ck_assert_str_eq(fb.last, "set_vring_kick");
        ck_assert_uint_eq(fb.idx, 2);
        ck_assert_int_eq(fb.fd, p[0]); /* handed over, not closed */
        ck_assert_int_ge(fcntl(p[0], F_GETFD), 0);
        v = 1 | VHOST_USER_VRING_NOFD_MASK;
        ck_assert_int_eq(handle(VHOST_USER_SET_VRING_CALL, 0, &v, sizeof v, -1), 0);
        ck_assert_str_eq(fb.last, "set_vring_call");
        ck_assert_uint_eq(fb.idx, 1);
        ck_assert_int_eq(fb.fd, -1);
        close(p[1]);
}
END_TEST

/* A reply that cannot be sent ends the connection. */
START_TEST(test_dead_frontend) {
        safe_close(sv[1]);
        sv[1] = -1;
        ck_assert_int_lt(handle(VHOST_USER_GET_FEATURES, 0, NULL, 0, -1), 0);
}
END_TEST

/* A process that dies while a message it started to read is not all there (a frontend that wrote
 * the header first) consumed none of it: the process taking over reads that message whole, with
 * its fd, and not its payload as the next header (crash survival, docs/survival.md). */
START_TEST(test_reader_killed_mid_message) {
        struct {
                VhostUserHeader h;
                uint64_t v;
        } m = { .h = { .request = VHOST_USER_SET_VRING_KICK, .flags = VHOST_USER_VERSION, .size = sizeof(uint64_t) },
                .v = 3 };
        union {
                struct cmsghdr align;
                uint8_t buf[CMSG_SPACE(sizeof(int))];
        } control = { 0 };
        struct iovec iov = { &m.h, sizeof m.h };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        VhostUserMsg got;
        int p[2], status;
        pid_t reader;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &p[0], sizeof(int));
        ck_assert_int_eq(sendmsg(sv[1], &mh, 0), (ssize_t) sizeof m.h); /* the header and the fd */
        reader = fork();
        ck_assert_int_ge(reader, 0);
        if (reader == 0) {
                VhostUserMsg lost;
                (void) vhost_user_recv(sv[0], &lost);
                _exit(0);
        }
        usleep(100000); /* the reader waits for the payload */
        ck_assert_int_eq(kill(reader, SIGKILL), 0);
        ck_assert_int_eq(waitpid(reader, &status, 0), reader);
        ck_assert(WIFSIGNALED(status));
        ck_assert_int_eq(write(sv[1], &m.v, sizeof m.v), (ssize_t) sizeof m.v);
        ck_assert_int_eq(vhost_user_recv(sv[0], &got), 0);
        ck_assert_uint_eq(got.hdr.request, VHOST_USER_SET_VRING_KICK);
        ck_assert_uint_eq(got.hdr.size, sizeof(uint64_t));
        ck_assert_uint_eq(got.payload.u64, 3);
        ck_assert_uint_eq(got.n_fds, 1);
        vhost_user_msg_close_fds(&got);
        close(p[0]);
        close(p[1]);
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("vhost-user");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_get_replies);
        tcase_add_test(tc, test_acks);
        tcase_add_test(tc, test_before_reply);
        tcase_add_test(tc, test_refused_before_backend);
        tcase_add_test(tc, test_vring_fds);
        tcase_add_test(tc, test_dead_frontend);
        tcase_add_test(tc, test_reader_killed_mid_message);
        suite_add_tcase(s, tc);
}

TEST_MAIN("vhost-user", add_tests)
