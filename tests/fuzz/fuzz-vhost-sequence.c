/* fuzz-vhost-sequence.c: sequences of vhost-user messages (memory tables added, removed and
 * replaced, rings started, stopped and re-enabled, features, call fds swapped, resets, guest memory
 * truncated) while FUSE requests run on the queue threads. Unlike fuzz-vhost-user, fds travel:
 * the target is the frontend and the guest at once, with real memfds and eventfds, and the daemon's
 * queue threads (and an auto-mode executor's workers) run concurrently with the messages, as they
 * do under QEMU. Each input is a new connection; device_reset() at its end waits for everything.
 *
 * Input: a program of operations, each one opcode byte followed by its argument bytes (a missing
 * argument reads as 0):
 *   0 features  a            SET_FEATURES: VERSION_1 | PROTOCOL_FEATURES, a&1 event idx, a&2 indirect
 *   1 memtable  m            SET_MEM_TABLE with region A if m&1, region B if m&2 (none: refused)
 *   2 addreg    r            ADD_MEM_REG region r&1 (A or B)
 *   3 remreg    r            REM_MEM_REG region r&1
 *   4 start     q s p base   ring q%3: size 1<<(s%7), in region p&1, SET_VRING_NUM/BASE/ADDR/CALL/KICK, ENABLE 1
 *   5 stop      q            ENABLE 0, GET_VRING_BASE
 *   6 enable    q e          SET_VRING_ENABLE e&1
 *   7 fuse      q k b        a FUSE request of kind k (init, lookup, getattr, opendir+readdir, read,
 *                            statfs, forget, garbage) on ring q, buffers in region b&1, b&2 indirect;
 *                            published and kicked
 *   8 kick      q            the kick eventfd
 *   9 call      q n          SET_VRING_CALL: n&1 a new eventfd, else NOFD
 *  10 reset     -            RESET_DEVICE
 *  11 wait      t            lets the queue threads run: (t%16) * 50 us
 *  12 poke      q o v        the guest scribbles v into ring q's memory at offset o*2 (desc, avail, used)
 *  13 truncate  r            the frontend shrinks region r&1's memfd to 0 (the daemon survives SIGBUS)
 *  14 protocol  p            SET_PROTOCOL_FEATURES (p: MQ, REPLY_ACK, CONFIGURE_MEM_SLOTS bits)
 *  15 raw       req len ...  any request number with len%64 payload bytes from the input, no fds
 * Ring memory: region A gpa 0 (64 KiB), region B gpa 0x20000 (64 KiB), each its own memfd; ring q
 * lives at 0x1000 * q in its region (desc +0, avail +0x400, used +0x800), buffers from +0x4000. */
#include <fcntl.h>
#include <linux/fuse.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device.h"
#include "executor.h"
#include "fuse-handler.h"
#include "fuse-server.h"
#include "passthrough.h"
#include "fuzz-common.h"
#include "stats.h"
#include "vhost-user.h"

#define REGION_SIZE 0x10000u
#define N_QUEUES 3 /* hiprio + 2 request queues */
#define MAX_OPS 96
#define RING_MAX 64

static const uint64_t region_gpa[2] = { 0x0, 0x20000 };
static const uint64_t region_uaddr[2] = { 0x7f0000000000ULL, 0x7f0000400000ULL };

static Passthrough *pt;
static FuseServer *fs;
static Device *dev;
static int sv[2] = { -1, -1 };

typedef struct Ring {
        unsigned num;
        int region;
        uint16_t avail_idx, next_desc;
        int kick_fd;
        bool configured;
} Ring;

typedef struct Session {
        int memfd[2];
        uint8_t *host[2]; /* our own view of each region */
        Ring rings[N_QUEUES];
        uint64_t unique;
        unsigned buf_next[2];
} Session;

static void setup(void) {
        static Executor *e;
        static Stats *st;
        FsOptions o = FS_OPTIONS_DEFAULT;
        RequestHandler h;
        int sz = 1 << 20;

        fuzz_quiet_logging();
        o.shared_dir = fuzz_shared_dir();
        /* Lock waits would last until a stop cancels them: 200 ms each, not what this target is about. */
        o.posix_lock = false;
        o.flock = false;
        if (passthrough_new(&pt, &o) < 0 || fuse_server_new(&fs, &o, &passthrough_ops, pt) < 0)
                abort();
        h = fuse_request_handler(fs);
        if (device_new(&dev, &h, N_QUEUES - 1) < 0 || executor_new(&e, THREAD_MODE_AUTO, 2) < 0 || stats_new(&st) < 0)
                abort();
        device_attach(dev, e, st);
        /* Replies go to sv[1] and are drained after every message. */
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        (void) setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        fuzz_confine();
}

static void drain(void) {
        char sink[4096];
        while (recv(sv[1], sink, sizeof sink, MSG_DONTWAIT) > 0)
                ;
}

/* One message; fds are the caller's (dup'd here, the handler closes what it does not take). */
static void send_msg(uint32_t request, const void *payload, uint32_t size, const int *fds, unsigned n_fds) {
        VhostUserMsg msg = { .hdr = { .request = request, .flags = VHOST_USER_VERSION, .size = size } };

        if (size > sizeof msg.payload)
                abort();
        if (payload && size)
                memcpy(&msg.payload, payload, size);
        for (unsigned i = 0; i < n_fds && i < VHOST_USER_MAX_FDS; i++) {
                msg.fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                if (msg.fds[i] < 0)
                        abort();
                msg.n_fds++;
        }
        /* Every other message asks for an ack, as QEMU does for memory messages. */
        if (request == VHOST_USER_SET_MEM_TABLE || request == VHOST_USER_ADD_MEM_REG ||
            request == VHOST_USER_REM_MEM_REG)
                msg.hdr.flags |= VHOST_USER_NEED_REPLY_MASK;
        (void) vhost_user_handle(&device_vhost_ops, dev, sv[0], &msg);
        drain();
}

static void region_msg(Session *s, unsigned r, VhostUserMemoryRegion *ret) {
        *ret = (VhostUserMemoryRegion) {
                .guest_phys_addr = region_gpa[r],
                .memory_size = REGION_SIZE,
                .userspace_addr = region_uaddr[r],
                .mmap_offset = 0,
        };
}

static uint64_t ring_base_gpa(unsigned q, int region) {
        return region_gpa[region] + 0x1000u * q;
}

static uint8_t *gpa_host(Session *s, uint64_t gpa, size_t len) {
        for (unsigned r = 0; r < 2; r++)
                if (gpa >= region_gpa[r] && gpa + len <= region_gpa[r] + REGION_SIZE)
                        return s->host[r] ? s->host[r] + (gpa - region_gpa[r]) : NULL;
        return NULL;
}

static void op_start(Session *s, Input *in) {
        unsigned q = next(in) % N_QUEUES, num = 1u << (next(in) % 7);
        int region = next(in) & 1;
        unsigned base = next(in);
        Ring *rg = &s->rings[q];
        uint64_t b = ring_base_gpa(q, region);
        struct vhost_vring_state st;
        struct vhost_vring_addr a = {
                .index = q,
                .desc_user_addr = region_uaddr[region] + (b - region_gpa[region]),
                .avail_user_addr = region_uaddr[region] + (b - region_gpa[region]) + 0x400,
                .used_user_addr = region_uaddr[region] + (b - region_gpa[region]) + 0x800,
        };
        int call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        uint64_t idx = q;

        if (call < 0)
                abort();
        if (rg->kick_fd < 0) {
                rg->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (rg->kick_fd < 0)
                        abort();
        }
        /* A fresh ring in guest memory (the guest driver's part). */
        {
                uint8_t *h = gpa_host(s, b, 0x1000);
                if (h)
                        memset(h, 0, 0x1000);
                if (h)
                        ((struct vring_avail *) (h + 0x400))->idx = (uint16_t) base;
                if (h)
                        ((struct vring_used *) (h + 0x800))->idx = (uint16_t) base;
        }
        *rg = (Ring) { .num = num, .region = region, .avail_idx = (uint16_t) base, .kick_fd = rg->kick_fd,
                       .configured = true };
        st = (struct vhost_vring_state) { .index = q, .num = num };
        send_msg(VHOST_USER_SET_VRING_NUM, &st, sizeof st, NULL, 0);
        st.num = base;
        send_msg(VHOST_USER_SET_VRING_BASE, &st, sizeof st, NULL, 0);
        send_msg(VHOST_USER_SET_VRING_ADDR, &a, sizeof a, NULL, 0);
        send_msg(VHOST_USER_SET_VRING_CALL, &idx, sizeof idx, &call, 1);
        send_msg(VHOST_USER_SET_VRING_KICK, &idx, sizeof idx, &rg->kick_fd, 1);
        st = (struct vhost_vring_state) { .index = q, .num = 1 };
        send_msg(VHOST_USER_SET_VRING_ENABLE, &st, sizeof st, NULL, 0);
        close(call);
}

/* Guest buffer space from +0x4000 of a region, handed out round-robin (a hostile guest reuses
 * buffers still in flight: that is allowed to give wrong answers, not to crash). */
static uint64_t buf_alloc(Session *s, int region, size_t len) {
        unsigned off;

        len = (len + 63) & ~(size_t) 63;
        if (s->buf_next[region] + len > REGION_SIZE - 0x4000)
                s->buf_next[region] = 0;
        off = s->buf_next[region];
        s->buf_next[region] += (unsigned) len;
        return region_gpa[region] + 0x4000 + off;
}

static size_t fuse_request(Session *s, Input *in, unsigned kind, uint8_t *buf, size_t cap, size_t *out_len) {
        struct fuse_in_header *h = (struct fuse_in_header *) buf;
        size_t len = sizeof *h;

        memset(buf, 0, cap);
        *h = (struct fuse_in_header) { .unique = ++s->unique, .nodeid = FUSE_ROOT_ID };
        *out_len = 4096;
        switch (kind % 8) {
        case 0: {
                struct fuse_init_in i = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION,
                                          .max_readahead = 1 << 16, .flags = FUSE_ASYNC_READ | FUSE_DO_READDIRPLUS };
                h->opcode = FUSE_INIT;
                memcpy(buf + len, &i, sizeof i);
                len += sizeof i;
                break;
        }
        case 1:
                h->opcode = FUSE_LOOKUP;
        {
                const char *name = (next(in) & 1) ? "file" : "dir";
                memcpy(buf + len, name, strlen(name) + 1);
                len += strlen(name) + 1;
        }
                break;
        case 2:
                h->opcode = FUSE_GETATTR;
                len += sizeof(struct fuse_getattr_in);
                break;
        case 3:
                h->opcode = (next(in) & 1) ? FUSE_READDIRPLUS : FUSE_OPENDIR;
                if (h->opcode == FUSE_OPENDIR)
                        len += sizeof(struct fuse_open_in);
                else {
                        struct fuse_read_in r = { .fh = next(in), .size = 2048 };
                        memcpy(buf + len, &r, sizeof r);
                        len += sizeof r;
                }
                break;
        case 4: {
                struct fuse_read_in r = { .fh = next(in), .offset = next(in), .size = 1024 };
                h->opcode = FUSE_READ;
                memcpy(buf + len, &r, sizeof r);
                len += sizeof r;
                break;
        }
        case 5:
                h->opcode = FUSE_STATFS;
                break;
        case 6: {
                struct fuse_forget_in f = { .nlookup = 1 };
                h->opcode = FUSE_FORGET;
                h->nodeid = 2 + next(in) % 4;
                memcpy(buf + len, &f, sizeof f);
                len += sizeof f;
                *out_len = 0;
                break;
        }
        default: /* whatever the input says, header included */
                len = 0;
                for (unsigned n = next(in) % 96; n > 0 && len < cap; n--)
                        buf[len++] = next(in);
                break;
        }
        if (kind % 8 != 7)
                h->len = (uint32_t) len;
        return len;
}

static void op_fuse(Session *s, Input *in) {
        unsigned q = next(in) % N_QUEUES, kind = next(in), b = next(in);
        int region = b & 1;
        bool indirect = b & 2;
        Ring *rg = &s->rings[q];
        uint8_t *ring, reqbuf[256];
        struct vring_desc *desc;
        struct vring_avail *avail;
        uint64_t in_gpa, out_gpa;
        size_t in_len, out_len;
        uint8_t *host_in;
        uint16_t head;

        if (!rg->configured)
                return;
        ring = gpa_host(s, ring_base_gpa(q, rg->region), 0x1000);
        if (!ring)
                return;
        in_len = fuse_request(s, in, kind, reqbuf, sizeof reqbuf, &out_len);
        in_gpa = buf_alloc(s, region, in_len ? in_len : 1);
        host_in = gpa_host(s, in_gpa, in_len);
        if (!host_in)
                return;
        memcpy(host_in, reqbuf, in_len);
        out_gpa = buf_alloc(s, region, out_len ? out_len : 1);

        desc = (struct vring_desc *) ring;
        avail = (struct vring_avail *) (ring + 0x400);
        head = rg->next_desc % rg->num;
        if (indirect) {
                uint64_t t_gpa = buf_alloc(s, region, 2 * sizeof(struct vring_desc));
                struct vring_desc *t = (struct vring_desc *) gpa_host(s, t_gpa, 2 * sizeof *t);
                if (!t)
                        return;
                t[0] = (struct vring_desc) { .addr = in_gpa, .len = (uint32_t) in_len,
                                             .flags = out_len ? VRING_DESC_F_NEXT : 0, .next = 1 };
                t[1] = (struct vring_desc) { .addr = out_gpa, .len = (uint32_t) out_len, .flags = VRING_DESC_F_WRITE };
                desc[head] = (struct vring_desc) { .addr = t_gpa,
                                                   .len = (out_len ? 2 : 1) * (uint32_t) sizeof(struct vring_desc),
                                                   .flags = VRING_DESC_F_INDIRECT };
                rg->next_desc++;
        } else {
                uint16_t second = (uint16_t) ((head + 1) % rg->num);
                desc[head] = (struct vring_desc) { .addr = in_gpa, .len = (uint32_t) in_len,
                                                   .flags = out_len && rg->num > 1 ? VRING_DESC_F_NEXT : 0,
                                                   .next = second };
                if (out_len && rg->num > 1)
                        desc[second] = (struct vring_desc) { .addr = out_gpa, .len = (uint32_t) out_len,
                                                             .flags = VRING_DESC_F_WRITE };
                rg->next_desc += 2;
        }
        avail->ring[rg->avail_idx % rg->num] = head;
        __atomic_store_n(&avail->idx, (uint16_t) (rg->avail_idx + 1), __ATOMIC_RELEASE);
        rg->avail_idx++;
        if (rg->kick_fd >= 0)
                (void) eventfd_write(rg->kick_fd, 1);
}

static void op_poke(Session *s, Input *in) {
        unsigned q = next(in) % N_QUEUES, off = (unsigned) next(in) * 8;
        uint8_t v = next(in);
        Ring *rg = &s->rings[q];
        uint8_t *ring;

        if (!rg->configured)
                return;
        ring = gpa_host(s, ring_base_gpa(q, rg->region), 0x1000);
        if (ring)
                __atomic_store_n(&ring[off % 0xc00], v, __ATOMIC_RELAXED);
}

static void session_open(Session *s) {
        *s = (Session) { .memfd = { -1, -1 } };
        for (unsigned q = 0; q < N_QUEUES; q++)
                s->rings[q].kick_fd = -1;
        for (unsigned r = 0; r < 2; r++) {
                s->memfd[r] = memfd_create("fuzz-seq", MFD_CLOEXEC);
                if (s->memfd[r] < 0 || ftruncate(s->memfd[r], REGION_SIZE) < 0)
                        abort();
                s->host[r] = mmap(NULL, REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd[r], 0);
                if (s->host[r] == MAP_FAILED)
                        abort();
        }
}

static void session_close(Session *s) {
        /* The frontend goes away: every queue stops, every request in flight completes first. */
        device_reset(dev);
        fuse_server_reset(fs);
        for (unsigned q = 0; q < N_QUEUES; q++)
                if (s->rings[q].kick_fd >= 0)
                        close(s->rings[q].kick_fd);
        for (unsigned r = 0; r < 2; r++) {
                if (s->host[r])
                        munmap(s->host[r], REGION_SIZE);
                close(s->memfd[r]);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Input in = { data, size };
        Session s;
        uint64_t v;

        if (!dev)
                setup();
        if (size > 4096)
                return 0;
        session_open(&s);
        /* QEMU's realize: protocol features with REPLY_ACK, owner. The program does the rest. */
        v = (1ULL << VHOST_USER_PROTOCOL_F_MQ) | (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
            (1ULL << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS);
        send_msg(VHOST_USER_SET_PROTOCOL_FEATURES, &v, sizeof v, NULL, 0);
        send_msg(VHOST_USER_SET_OWNER, NULL, 0, NULL, 0);

        for (unsigned n = 0; n < MAX_OPS && in.left > 0; n++) {
                uint8_t op = next(&in) % 16;

                switch (op) {
                case 0: {
                        uint8_t a = next(&in);
                        v = (1ULL << VIRTIO_F_VERSION_1) | (1ULL << VHOST_USER_F_PROTOCOL_FEATURES) |
                            ((a & 1) ? 1ULL << VIRTIO_RING_F_EVENT_IDX : 0) |
                            ((a & 2) ? 1ULL << VIRTIO_RING_F_INDIRECT_DESC : 0);
                        send_msg(VHOST_USER_SET_FEATURES, &v, sizeof v, NULL, 0);
                        break;
                }
                case 1: {
                        uint8_t m = next(&in);
                        VhostUserMemory t = {};
                        int fds[2];
                        for (unsigned r = 0; r < 2; r++)
                                if (m & (1u << r)) {
                                        region_msg(&s, r, &t.regions[t.nregions]);
                                        fds[t.nregions++] = s.memfd[r];
                                }
                        send_msg(VHOST_USER_SET_MEM_TABLE, &t, 8 + t.nregions * (uint32_t) sizeof(VhostUserMemoryRegion),
                                 fds, t.nregions);
                        break;
                }
                case 2:
                case 3: {
                        unsigned r = next(&in) & 1;
                        VhostUserMemRegMsg m = {};
                        region_msg(&s, r, &m.region);
                        send_msg(op == 2 ? VHOST_USER_ADD_MEM_REG : VHOST_USER_REM_MEM_REG, &m, sizeof m,
                                 op == 2 ? &s.memfd[r] : NULL, op == 2);
                        break;
                }
                case 4:
                        op_start(&s, &in);
                        break;
                case 5: {
                        struct vhost_vring_state st = { .index = next(&in) % N_QUEUES };
                        send_msg(VHOST_USER_SET_VRING_ENABLE, &st, sizeof st, NULL, 0);
                        send_msg(VHOST_USER_GET_VRING_BASE, &st, sizeof st, NULL, 0);
                        break;
                }
                case 6: {
                        struct vhost_vring_state st = { .index = next(&in) % N_QUEUES };
                        st.num = next(&in) & 1;
                        send_msg(VHOST_USER_SET_VRING_ENABLE, &st, sizeof st, NULL, 0);
                        break;
                }
                case 7:
                        op_fuse(&s, &in);
                        break;
                case 8: {
                        Ring *rg = &s.rings[next(&in) % N_QUEUES];
                        if (rg->kick_fd >= 0)
                                (void) eventfd_write(rg->kick_fd, 1);
                        break;
                }
                case 9: {
                        uint64_t idx = next(&in) % N_QUEUES;
                        if (next(&in) & 1) {
                                int call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                                if (call < 0)
                                        abort();
                                send_msg(VHOST_USER_SET_VRING_CALL, &idx, sizeof idx, &call, 1);
                                close(call);
                        } else {
                                idx |= VHOST_USER_VRING_NOFD_MASK;
                                send_msg(VHOST_USER_SET_VRING_CALL, &idx, sizeof idx, NULL, 0);
                        }
                        break;
                }
                case 10:
                        send_msg(VHOST_USER_RESET_DEVICE, NULL, 0, NULL, 0);
                        break;
                case 11:
                        usleep((next(&in) % 16) * 50);
                        break;
                case 12:
                        op_poke(&s, &in);
                        break;
                case 13: {
                        unsigned r = next(&in) & 1;
                        /* Our own view goes too: the guest's memory is gone for everyone. */
                        if (s.host[r]) {
                                munmap(s.host[r], REGION_SIZE);
                                s.host[r] = NULL;
                        }
                        if (ftruncate(s.memfd[r], 0) < 0)
                                abort();
                        break;
                }
                case 14:
                        v = next(&in) & ((1ULL << VHOST_USER_PROTOCOL_F_MQ) | (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK));
                        v |= 1ULL << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS;
                        send_msg(VHOST_USER_SET_PROTOCOL_FEATURES, &v, sizeof v, NULL, 0);
                        break;
                case 15: {
                        uint8_t raw[64];
                        uint32_t req = next(&in), len = next(&in) % 64;
                        for (unsigned i = 0; i < len; i++)
                                raw[i] = next(&in);
                        send_msg(req, raw, len, NULL, 0);
                        break;
                }
                }
        }
        session_close(&s);
        return 0;
}
