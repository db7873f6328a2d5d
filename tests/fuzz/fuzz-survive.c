/* fuzz-survive.c: kills of the serving process interleaved with vhost-user and FUSE traffic, and the
 * takeover after each (docs/survival.md, issue 35).
 *
 * This target is the frontend, the guest and the supervisor at once; the serving process is real:
 * a fork()ed child that builds a Manager (manager_new(), as vufsd's serving process does), serves
 * the connection through the manager's own loop (on_connection_io(): vhost_user_handle() and
 * survive_checkpoint() after each message) and dies by a real SIGKILL, either from its device's
 * step hook at a chosen point of a request's life (device.h's DeviceStep: after the pop, after the
 * host call, with the reply written, with the used entry written, with the used index published),
 * the hook test-frontend-survive's vufsd-test-hooks uses, or from this process at whatever moment
 * it is at. Nothing of the dead process's memory survives, only what would: the records it stored
 * in the keeper (the real keeper_handle(), run here as the supervisor does), the in-flight tables
 * and guest memory in their memfds, the connection, and the shared directory. The process that
 * takes over runs survive_resume() (FUSE_INIT replayed, device_restore() through the device_set_*()
 * checks, inflight_adopt(), the rings resumed, fuse_server_replay() for requests whose host call
 * was done): in a child for every kill but the last, and in this process itself after the last, so
 * that libFuzzer sees the takeover's coverage. Records and tables can be poisoned between a death
 * and the takeover: a taken-over predecessor is untrusted.
 *
 * Input: one byte of set-up (bits 0-1 thread mode: inline, pool, auto; bit 2 event idx; bit 3 a
 * ring of 32 instead of 16), then a program of operations, one opcode byte and its arguments (a
 * missing byte reads as 0):
 *   0-2 fuse   k n a     a FUSE request of kind k (fuse_request()) on name n, argument a: posted in
 *                        the request queue and kicked
 *   3   kill   s o       arms the hook: the next request with opcode kill_opcodes[o] (0: any)
 *                        reaching step s%5 kills the serving process; the next one takes over
 *   4   die    -         SIGKILL now, from outside
 *   5   wait   t         lets the serving threads run (t%16)*100 us; with t&0x80 then until every
 *                        request posted is answered (at most 500 ms)
 *   6   vhost  m a       m%4: 0 SET_VRING_CALL (a new eventfd), 1 SET_VRING_ENABLE 0 then 1 and a
 *                        kick, 2 SET_FEATURES again, 3 a raw request number a with no payload
 *   7   poison t o v     before the next takeover: byte o (two bytes, LE) of t%3 (0 the request
 *                        queue's in-flight table, 1 the device record, 2 the FUSE_INIT record)
 *                        becomes v
 * At most 3 serving processes die per input; without a kill in the program the serving process is
 * killed at its end. Oracle: no crash, sanitizer report, leak or hang in either process; and unless
 * the program poisoned something or sent a raw message, every request is answered exactly once
 * (each used entry names a head in flight, its reply carries the request's unique, the used index
 * ends equal to the avail index) within 5 s of the program's end. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "device-snapshot.h"
#include "fuzz-common.h"
#include "keeper.h"
#include "manager.h"
#include "sandbox.h"
#include "survive.h"
#include "vhost-user.h"

#define MEM_SIZE 0x40000u
#define MEM_UADDR 0x7f0000000000ULL
#define RING_GPA 0x0u /* desc +0, avail +0x400, used +0x800 */
#define BUF_GPA 0x1000u /* request i: in at +i*0x1000, out at +i*0x1000+0x600 */
#define MAX_REQS 60
#define OUT_LEN 0xa00u
#define MAX_OPS 64
#define MAX_DEATHS 3
#define REQ_QUEUE 1

/* Shared with the serving children: what their step hook kills at. */
typedef struct KillPlan {
        _Atomic int step; /* DeviceStep, -1: none */
        _Atomic uint32_t opcode; /* 0: any */
} KillPlan;

static const uint32_t kill_opcodes[] = { 0, FUSE_MKDIR, FUSE_CREATE, FUSE_WRITE, FUSE_UNLINK, FUSE_RENAME,
                                         FUSE_LINK, FUSE_RMDIR, FUSE_SETXATTR, FUSE_LOOKUP };

typedef struct Req {
        uint64_t unique;
        uint32_t opcode;
        uint16_t head;
        bool garbage;
        int answered;
} Req;

typedef struct Poison {
        uint8_t target, value;
        uint16_t off;
} Poison;

static struct {
        Config config;
        KillPlan *plan;
        /* this input */
        int fe, keeper_fd; /* the frontend's end; the supervisor's end of the current child's channel */
        pid_t child;
        Manager *m; /* the serving process here, after the last death */
        int memfd, kick, call;
        uint8_t *mem;
        unsigned num;
        uint16_t avail_idx, last_used;
        Req reqs[MAX_REQS];
        unsigned n_reqs;
        int slot_req[32]; /* per pair of descriptors: the request in flight in it, -1 */
        uint64_t nodeid, fh;
        bool strict, poisoned, over;
        Poison poison[8];
        unsigned n_poison, deaths;
        uint64_t features;
        const Input *in; /* the program's rest */
} S;

static void next_generation(void);
static unsigned in_flight(void);

static void die(const char *why) {
        fprintf(stderr, "fuzz-survive: %s\n", why);
        abort();
}

static void on_signal(int sig) {
}

/* VUFSD_FUZZ_SIGNALS=1: a signal every 7 ms whose handler does not restart system calls, as
 * libFuzzer's alarm (every 6 s) does not: every wait of the code in this process (the takeover's
 * fetches from the keeper above all) must go on after EINTR. */
static void signal_storm(void) {
        struct sigaction sa = { .sa_handler = on_signal };
        struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGPROF };
        struct itimerspec every = { { 0, 7000000 }, { 0, 7000000 } };
        timer_t t;

        if (sigaction(SIGPROF, &sa, NULL) < 0 || timer_create(CLOCK_MONOTONIC, &sev, &t) < 0 ||
            timer_settime(t, 0, &every, NULL) < 0)
                abort();
}

static void setup(void) {
        static KillPlan *plan;

        if (getenv("VUFSD_FUZZ_SIGNALS"))
                signal_storm();

        fuzz_quiet_logging();
        (void) fuzz_shared_dir();
        /* A serving process killed with data in the frontend's socket: writes must not SIGPIPE. */
        signal(SIGPIPE, SIG_IGN);
        fuzz_confine();
        config_init(&S.config);
        S.config.shared_dir = strdup(fuzz_shared_dir());
        if (!S.config.shared_dir)
                abort();
        S.config.fs.shared_dir = S.config.shared_dir;
        /* Lock waits are not what this target is about (fuzz-vhost-sequence says why). */
        S.config.fs.posix_lock = false;
        S.config.fs.flock = false;
        S.config.poll_us = 0;
        S.config.pool_size = 2;
        survive_enable(true);
        plan = mmap(NULL, sizeof *plan, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (plan == MAP_FAILED)
                abort();
        S.plan = plan;
}

/* ---- the frontend: vhost-user messages on the connection ---- */

static void send_msg(uint32_t request, const void *payload, uint32_t size, int fd) {
        uint8_t buf[12 + 256];
        uint32_t hdr[3] = { request, VHOST_USER_VERSION, size };
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct iovec iov = { buf, 12 + size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (size > 256)
                abort();
        /* Every message asks for an ack (REPLY_ACK): the guest goes on once the serving process has
         * applied it, as QEMU does for the messages it waits for. */
        hdr[1] |= VHOST_USER_NEED_REPLY_MASK;
        memcpy(buf, hdr, 12);
        if (size)
                memcpy(buf + 12, payload, size);
        if (fd >= 0) {
                struct cmsghdr *c;
                mh.msg_control = &control;
                mh.msg_controllen = sizeof control.buf;
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof fd);
        }
        (void) sendmsg(S.fe, &mh, MSG_NOSIGNAL);
}

static void pump(void);
static uint64_t now_us(void);

/* The ack of a request (REPLY_ACK), skipping other replies; false after 2 s (the serving process
 * died with the message read and not applied: docs/survival.md "Not done"). */
static bool wait_ack(uint32_t request) {
        uint64_t end = now_us() + 2000000;

        while (now_us() < end) {
                uint32_t hdr[3];
                uint8_t payload[256];
                ssize_t n = recv(S.fe, hdr, sizeof hdr, MSG_DONTWAIT | MSG_PEEK);

                if (n == (ssize_t) sizeof hdr && hdr[2] <= sizeof payload) {
                        if (recv(S.fe, hdr, sizeof hdr, 0) != sizeof hdr)
                                return false;
                        if (hdr[2] && recv(S.fe, payload, hdr[2], MSG_WAITALL) != (ssize_t) hdr[2])
                                return false;
                        if (hdr[0] == request)
                                return true;
                        continue;
                }
                pump();
                usleep(50);
        }
        return false;
}

static void send_acked(uint32_t request, const void *payload, uint32_t size, int fd) {
        send_msg(request, payload, size, fd);
        if (!wait_ack(request))
                S.strict = false;
}

static void send_u64(uint32_t request, uint64_t v, int fd) {
        send_acked(request, &v, sizeof v, fd);
}

static void send_state(uint32_t request, unsigned idx, unsigned num) {
        struct vhost_vring_state st = { .index = idx, .num = num };
        send_acked(request, &st, sizeof st, -1);
}

/* ---- the supervisor: the keeper's records ---- */

/* Every message on the channel the keeper reads, handled as sandbox.c's supervisor does. */
/* One message of the keeper's channel and its fds (at most KEEPER_MAX_FDS, owned by the caller). */
static ssize_t recv_record(int fd, uint8_t *buf, size_t size, int fds[static KEEPER_MAX_FDS], size_t *ret_n_fds,
                           int flags) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * KEEPER_MAX_FDS)];
        } control;
        struct iovec iov = { buf, size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof control };
        ssize_t n = recvmsg(fd, &mh, flags | MSG_CMSG_CLOEXEC);

        *ret_n_fds = 0;
        if (n <= 0)
                return n;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                                memcpy(&fds[(*ret_n_fds)++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        return n;
}

static void keeper_pump(int fd) {
        for (;;) {
                uint8_t buf[KEEPER_MAX_RECORD + 64];
                int fds[KEEPER_MAX_FDS];
                size_t n_fds;
                ssize_t n = recv_record(fd, buf, sizeof buf, fds, &n_fds, MSG_DONTWAIT);

                if (n <= 0)
                        return;
                /* sandbox.c's supervisor reads KEEPER_MAX_RECORD + 15 bytes: a longer one it drops. */
                if (n > KEEPER_MAX_RECORD + 15)
                        die("a keeper message longer than the supervisor reads");
                (void) keeper_handle(fd, buf, (size_t) n, fds, n_fds);
        }
}

/* The keeper answers the serving process here while it takes over (survive_resume() waits for
 * each record) and takes its stores after. */
static atomic_bool keeper_stop;
static void *keeper_thread(void *arg) {
        int fd = *(int *) arg;

        while (!atomic_load(&keeper_stop)) {
                struct pollfd p = { fd, POLLIN, 0 };
                if (poll(&p, 1, 5) > 0)
                        keeper_pump(fd);
        }
        keeper_pump(fd);
        return NULL;
}

/* A slot's record and fds out of the keeper and back in, changed by the program's poison. */
static void keeper_records(bool dump);

static void apply_poison(void) {
        if (S.n_poison == 0)
                return;
        keeper_records(false);
        S.n_poison = 0;
}

/* Each record slot out of the keeper and back in: poisoned as the program says, or (dump) printed
 * for a report. */
static void keeper_records(bool dump) {
        int sp[2];

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                abort();
        for (unsigned slot = KEEPER_SLOT_DEVICE; slot <= KEEPER_SLOT_SESSION; slot++) {
                uint8_t fetch[6] = { KEEPER_TAG_FETCH, (uint8_t) slot }, buf[KEEPER_MAX_RECORD + 2];
                int fds[KEEPER_MAX_FDS];
                size_t n_fds, len;
                ssize_t n;

                (void) keeper_handle(sp[0], fetch, sizeof fetch, NULL, 0);
                n = recv_record(sp[1], buf, sizeof buf, fds, &n_fds, 0);
                if (n < 2)
                        abort();
                len = (size_t) n - 2;
                if (dump) {
                        fprintf(stderr, "fuzz-survive: keeper slot %u: %zu bytes, %zu fds:", slot, len, n_fds);
                        for (size_t i = 0; i < len && i < 64; i++)
                                fprintf(stderr, " %02x", buf[2 + i]);
                        fputc('\n', stderr);
                }
                for (unsigned i = 0; !dump && i < S.n_poison; i++) {
                        Poison *p = &S.poison[i];
                        if (p->target == 0 && slot == KEEPER_SLOT_DEVICE && len >= 8 + sizeof(DeviceSnapshot)) {
                                DeviceSnapshot ds;
                                int8_t t;
                                memcpy(&ds, buf + 2 + 8, sizeof ds);
                                t = ds.queues[REQ_QUEUE].table;
                                if (t >= 0 && (size_t) t < n_fds) {
                                        off_t size = lseek(fds[t], 0, SEEK_END);
                                        if (size > 0)
                                                (void) pwrite(fds[t], &p->value, 1, p->off % size);
                                }
                        } else if (len > 0 && ((p->target == 1 && slot == KEEPER_SLOT_DEVICE) ||
                                               (p->target == 2 && slot == KEEPER_SLOT_SESSION)))
                                buf[2 + p->off % len] = p->value;
                }
                buf[0] = KEEPER_TAG_STORE;
                (void) keeper_handle(sp[0], buf, len + 2, fds, n_fds);
        }
        close(sp[0]);
        close(sp[1]);
}

/* ---- the serving processes ---- */

static void step_hook(DeviceStep step, const void *header) {
        struct fuse_in_header h;
        uint32_t op = atomic_load(&S.plan->opcode);

        memcpy(&h, header, sizeof h);
        if ((int) step == atomic_load(&S.plan->step) && (op == 0 || h.opcode == op))
                raise(SIGKILL);
}

/* In the child: a serving process, the first one (serves conn) or one that takes over. Never
 * returns: it dies by SIGKILL. */
static _Noreturn void serve_child(int channel, int conn) {
        Manager *m;
        int r;

        sandbox_set_channel_fd(channel);
        if (manager_new(&m, &S.config) < 0)
                _exit(2);
        device_set_step_hook(m->device, step_hook);
        if (conn >= 0) {
                if (manager_attach_connection(m, conn) < 0)
                        _exit(2);
                survive_checkpoint(m);
        } else {
                r = survive_resume(m);
                if (r <= 0) /* refused what it was given, or nothing kept: vufsd exits, or listens */
                        _exit(r < 0 ? 3 : 4);
        }
        for (;;)
                if (sd_event_run(m->event, UINT64_MAX) < 0)
                        _exit(2);
}

static void start_child(int conn) {
        int sp[2];
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                abort();
        atomic_store(&S.plan->step, -1);
        pid = fork();
        if (pid < 0)
                abort();
        if (pid == 0) {
                close(sp[0]);
                serve_child(sp[1], conn);
        }
        close(sp[1]);
        S.keeper_fd = sp[0];
        S.child = pid;
}

/* The child is gone: how it ended says whether that is a finding. */
static void reap(int status) {
        char why[96];

        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                return;
        /* Nothing kept (killed before its first record): the connection is not taken over. */
        if ((WIFEXITED(status) && WEXITSTATUS(status) == 4) ||
            (WIFEXITED(status) && WEXITSTATUS(status) == 3 && S.poisoned)) {
                S.over = true; /* a poisoned record refused: vufsd would exit, nothing more to serve */
                return;
        }
        snprintf(why, sizeof why, "a serving process ended with status 0x%x", (unsigned) status);
        die(why);
}

static void child_gone(void) {
        keeper_pump(S.keeper_fd); /* its last stores */
        S.keeper_fd = safe_close(S.keeper_fd);
        S.child = 0;
}

static pthread_t keeper_tid;
static int own_channel[2] = { -1, -1 };

/* After the last death: this process takes over, and serves until the input ends. */
static void take_over_here(void) {
        int r;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, own_channel) < 0)
                abort();
        atomic_store(&keeper_stop, false);
        if (pthread_create(&keeper_tid, NULL, keeper_thread, &own_channel[0]) != 0)
                abort();
        sandbox_set_channel_fd(own_channel[1]);
        if (manager_new(&S.m, &S.config) < 0)
                die("manager_new");
        r = survive_resume(S.m);
        if (r <= 0) {
                if (r < 0 && !S.poisoned) {
                        fprintf(stderr, "fuzz-survive: survive_resume(): %s\n", strerror(-r));
                        keeper_records(true);
                        die("the takeover failed on records nobody poisoned");
                }
                S.over = true;
        }
}

/* ---- the guest ---- */

static struct vring_desc *ring_desc(void) {
        return (struct vring_desc *) (S.mem + RING_GPA);
}
static struct vring_avail *ring_avail(void) {
        return (struct vring_avail *) (S.mem + RING_GPA + 0x400);
}
static struct vring_used *ring_used(void) {
        return (struct vring_used *) (S.mem + RING_GPA + 0x800);
}

static void consume_used(void) {
        struct vring_used *u = ring_used();
        uint16_t idx = __atomic_load_n(&u->idx, __ATOMIC_ACQUIRE);

        if ((uint16_t) (idx - S.last_used) > S.num) {
                if (S.strict)
                        die("the used index moved past every request the guest posted");
                S.last_used = idx;
                return;
        }
        while (S.last_used != idx) {
                struct vring_used_elem e = u->ring[S.last_used % S.num];
                int ri = e.id < S.num && e.id % 2 == 0 ? S.slot_req[e.id / 2] : -1;
                Req *rq;
                struct fuse_out_header oh;

                S.last_used++;
                if (ri < 0) {
                        if (S.strict)
                                die("a used entry for a head not in flight: a request answered twice");
                        continue;
                }
                rq = &S.reqs[ri];
                rq->answered++;
                S.slot_req[e.id / 2] = -1;
                if (e.len > OUT_LEN) {
                        if (S.strict)
                                die("a reply longer than its buffer");
                        continue;
                }
                if (e.len < sizeof oh || rq->garbage)
                        continue;
                memcpy(&oh, S.mem + BUF_GPA + ri * 0x1000u + 0x600, sizeof oh);
                if (oh.unique != rq->unique || oh.len != e.len) {
                        if (S.strict)
                                die("a reply that is not its request's (unique or length)");
                        continue;
                }
                if (oh.error == 0 && e.len >= sizeof oh + sizeof(struct fuse_entry_out) &&
                    (rq->opcode == FUSE_MKDIR || rq->opcode == FUSE_CREATE || rq->opcode == FUSE_LOOKUP ||
                     rq->opcode == FUSE_MKNOD || rq->opcode == FUSE_LINK || rq->opcode == FUSE_SYMLINK)) {
                        struct fuse_entry_out eo;
                        memcpy(&eo, S.mem + BUF_GPA + ri * 0x1000u + 0x600 + sizeof oh, sizeof eo);
                        S.nodeid = eo.nodeid;
                        if (rq->opcode == FUSE_CREATE &&
                            e.len >= sizeof oh + sizeof eo + sizeof(struct fuse_open_out)) {
                                struct fuse_open_out oo;
                                memcpy(&oo, S.mem + BUF_GPA + ri * 0x1000u + 0x600 + sizeof oh + sizeof eo,
                                       sizeof oo);
                                S.fh = oo.fh;
                        }
                }
        }
}

/* Everything that runs while the guest waits: the supervisor's channel, the frontend's replies,
 * this process's own serving loop, the used ring, the child's death. */
static void pump(void) {
        int status;

        if (S.child > 0) {
                keeper_pump(S.keeper_fd);
                if (waitpid(S.child, &status, WNOHANG) == S.child) {
                        child_gone();
                        reap(status);
                        next_generation();
                }
        }
        if (S.m)
                while (sd_event_run(S.m->event, 0) > 0)
                        ;
        consume_used();
}

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

static void pump_for(unsigned us) {
        uint64_t end = now_us() + us;
        do {
                pump();
                if (us)
                        usleep(50);
        } while (now_us() < end);
}

static unsigned in_flight(void) {
        unsigned n = 0;
        for (unsigned k = 0; k < S.num / 2; k++)
                n += S.slot_req[k] >= 0;
        return n;
}

static const char *const names[] = { "a", "b", "c", "file", "dir" };

static size_t put_name(uint8_t *p, uint8_t n) {
        const char *s = names[n % 5];
        memcpy(p, s, strlen(s) + 1);
        return strlen(s) + 1;
}

/* A request's fixed part at p; its length. */
static size_t put(uint8_t *p, const void *v, size_t n) {
        memcpy(p, v, n);
        return n;
}

/* One request of kind k into buf; its length. */
static size_t fuse_request(Input *in, Req *rq, uint8_t *buf) {
        struct fuse_in_header *h = (struct fuse_in_header *) buf;
        uint8_t kind = next(in), n = next(in), a = next(in);
        size_t len = sizeof *h;
        uint8_t *p = buf + sizeof *h;

        *h = (struct fuse_in_header) { .unique = rq->unique, .nodeid = FUSE_ROOT_ID, .pid = 4242 };
        switch (kind % 16) {
        case 0:
                h->opcode = FUSE_MKDIR;
                len += put(p, &(struct fuse_mkdir_in) { .mode = 0755, .umask = 022 }, sizeof(struct fuse_mkdir_in));
                len += put_name(buf + len, n);
                break;
        case 1:
                h->opcode = FUSE_CREATE;
                len += put(p, &(struct fuse_create_in) { .flags = O_RDWR | O_CREAT | ((a & 1) ? O_EXCL : 0) |
                                                           ((a & 2) ? O_APPEND : 0) | ((a & 4) ? O_TRUNC : 0),
                                                  .mode = 0100644, .umask = 022 }, sizeof(struct fuse_create_in));
                len += put_name(buf + len, n);
                break;
        case 2: {
                struct fuse_write_in w = { .fh = (a & 0x80) ? a & 7 : S.fh, .offset = (a & 0x70) * 16u,
                                           .size = 8 + n % 64 };
                h->opcode = FUSE_WRITE;
                h->nodeid = S.nodeid ?: FUSE_ROOT_ID;
                memcpy(p, &w, sizeof w);
                len += sizeof w;
                memset(buf + len, 'w', w.size);
                len += w.size;
                break;
        }
        case 3:
                h->opcode = FUSE_UNLINK;
                len += put_name(p, n);
                break;
        case 4:
                h->opcode = FUSE_RENAME;
                len += put(p, &(struct fuse_rename_in) { .newdir = FUSE_ROOT_ID }, sizeof(struct fuse_rename_in));
                len += put_name(buf + len, n);
                len += put_name(buf + len, a);
                break;
        case 5:
                h->opcode = FUSE_RMDIR;
                len += put_name(p, n);
                break;
        case 6:
                h->opcode = FUSE_LINK;
                len += put(p, &(struct fuse_link_in) { .oldnodeid = S.nodeid ?: 2 }, sizeof(struct fuse_link_in));
                len += put_name(buf + len, n);
                break;
        case 7:
                h->opcode = FUSE_SYMLINK;
                len += put_name(p, n);
                len += put_name(buf + len, a);
                break;
        case 8:
                h->opcode = FUSE_MKNOD;
                len += put(p, &(struct fuse_mknod_in) { .mode = 0100600, .umask = 022 }, sizeof(struct fuse_mknod_in));
                len += put_name(buf + len, n);
                break;
        case 9:
                h->opcode = FUSE_LOOKUP;
                len += put_name(p, n);
                break;
        case 10:
                h->opcode = FUSE_GETATTR;
                h->nodeid = (a & 1) ? S.nodeid : FUSE_ROOT_ID;
                len += sizeof(struct fuse_getattr_in);
                break;
        case 11:
        case 12:
                h->opcode = (kind % 16 == 11) ? FUSE_SETXATTR : FUSE_REMOVEXATTR;
                h->nodeid = S.nodeid ?: FUSE_ROOT_ID;
                if (h->opcode == FUSE_SETXATTR) {
                        len += put(p, &(struct fuse_setxattr_in) { .size = 2, .flags = a & 3 },
                                   sizeof(struct fuse_setxattr_in));
                }
                memcpy(buf + len, "user.k", 7);
                len += 7;
                if (h->opcode == FUSE_SETXATTR) {
                        memcpy(buf + len, "vv", 2);
                        len += 2;
                }
                break;
        case 13:
                h->opcode = FUSE_FALLOCATE;
                h->nodeid = S.nodeid ?: FUSE_ROOT_ID;
                len += put(p, &(struct fuse_fallocate_in) { .fh = S.fh, .length = 512u * (1 + n % 8), .mode = a & 3 },
                           sizeof(struct fuse_fallocate_in));
                break;
        case 14:
                h->opcode = FUSE_OPEN;
                h->nodeid = S.nodeid ?: FUSE_ROOT_ID;
                len += put(p, &(struct fuse_open_in) { .flags = (a & 1) ? O_RDWR : O_RDONLY },
                           sizeof(struct fuse_open_in));
                break;
        default: /* whatever the input says after a header's worth of it */
                rq->garbage = true;
                h->opcode = kind;
                for (unsigned i = 0; i < n % 48; i++)
                        buf[len++] = next(in);
                break;
        }
        h->len = (uint32_t) len;
        rq->opcode = h->opcode;
        return len;
}

static void post(Input *in, Req *rq, uint8_t *req, size_t len) {
        unsigned k, ri = (unsigned) (rq - S.reqs);
        struct vring_desc *d = ring_desc();
        struct vring_avail *av = ring_avail();

        for (k = 0; k < S.num / 2 && S.slot_req[k] >= 0; k++)
                ;
        if (k == S.num / 2)
                return; /* no free slot: the request is not sent */
        memcpy(S.mem + BUF_GPA + ri * 0x1000u, req, len);
        memset(S.mem + BUF_GPA + ri * 0x1000u + 0x600, 0, OUT_LEN);
        rq->head = (uint16_t) (2 * k);
        d[2 * k] = (struct vring_desc) { .addr = BUF_GPA + ri * 0x1000u, .len = (uint32_t) len,
                                         .flags = VRING_DESC_F_NEXT, .next = (uint16_t) (2 * k + 1) };
        d[2 * k + 1] = (struct vring_desc) { .addr = BUF_GPA + ri * 0x1000u + 0x600, .len = OUT_LEN,
                                             .flags = VRING_DESC_F_WRITE };
        S.slot_req[k] = (int) ri;
        av->ring[S.avail_idx % S.num] = rq->head;
        __atomic_store_n(&av->idx, (uint16_t) (S.avail_idx + 1), __ATOMIC_RELEASE);
        S.avail_idx++;
        S.n_reqs++;
        (void) eventfd_write(S.kick, 1);
}

static void op_fuse(Input *in) {
        uint8_t buf[0x600];
        Req *rq;
        size_t len;

        if (S.n_reqs >= MAX_REQS) {
                (void) next(in), (void) next(in), (void) next(in);
                return;
        }
        rq = &S.reqs[S.n_reqs];
        *rq = (Req) { .unique = 2 * (S.n_reqs + 1) };
        len = fuse_request(in, rq, buf);
        /* A full ring: the guest waits for an answer first (at most 200 ms). */
        for (unsigned i = 0; i < 400 && in_flight() == S.num / 2; i++)
                pump_for(500);
        post(in, rq, buf, len);
}

static bool kills_after(const Input *in) {
        /* A cheap look: any kill or die opcode byte left (an argument byte may look like one, which
         * only makes one more child). */
        for (size_t i = 0; in && i < in->left; i++)
                if (in->p[i] % 8 == 3 || in->p[i] % 8 == 4)
                        return true;
        return false;
}

/* The serving process died: the next one takes over, another child while the program has kills
 * left, else this process. */
static void next_generation(void) {
        if (S.over)
                return;
        S.deaths++;
        if (getenv("VUFSD_FUZZ_VERBOSE"))
                fprintf(stderr, "fuzz-survive: death %u (step armed %d), %u requests posted, %u in flight\n", S.deaths,
                        atomic_load(&S.plan->step), S.n_reqs, in_flight());
        apply_poison();
        if (kills_after(S.in) && S.deaths < MAX_DEATHS)
                start_child(-1);
        else
                take_over_here();
}

/* SIGKILL from outside, at whatever point the serving process is. */
static void death(void) {
        int status;

        if (S.child <= 0)
                return;
        if (getenv("VUFSD_FUZZ_VERBOSE")) {
                for (int t = S.child; t < S.child + 64; t++) {
                        char path[96], sc[128] = "", comm[32] = "";
                        FILE *f;
                        snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int) S.child, t);
                        if (!(f = fopen(path, "re")))
                                continue;
                        (void) !fgets(sc, sizeof sc, f);
                        fclose(f);
                        snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int) S.child, t);
                        if ((f = fopen(path, "re"))) {
                                (void) !fgets(comm, sizeof comm, f);
                                fclose(f);
                        }
                        comm[strcspn(comm, "\n")] = 0;
                        fprintf(stderr, "fuzz-survive: task %d %s: %s", t, comm, sc);
                }
        }
        (void) kill(S.child, SIGKILL);
        for (;;) {
                keeper_pump(S.keeper_fd);
                if (waitpid(S.child, &status, WNOHANG) == S.child)
                        break;
                usleep(100);
        }
        child_gone();
        reap(status);
        next_generation();
}

static void op_vhost(Input *in) {
        uint8_t m = next(in), a = next(in);

        switch (m % 4) {
        case 0: {
                int call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (call < 0)
                        abort();
                send_u64(VHOST_USER_SET_VRING_CALL, REQ_QUEUE, call);
                close(S.call);
                S.call = call;
                break;
        }
        case 1:
                send_state(VHOST_USER_SET_VRING_ENABLE, REQ_QUEUE, 0);
                send_state(VHOST_USER_SET_VRING_ENABLE, REQ_QUEUE, 1);
                (void) eventfd_write(S.kick, 1);
                break;
        case 2:
                send_u64(VHOST_USER_SET_FEATURES, S.features, -1);
                break;
        default:
                /* Anything, with no payload: a reset or a stop drops the guest's requests. */
                if (a != VHOST_USER_GET_FEATURES && a != VHOST_USER_GET_PROTOCOL_FEATURES &&
                    a != VHOST_USER_GET_QUEUE_NUM && a != VHOST_USER_GET_MAX_MEM_SLOTS)
                        S.strict = false;
                send_msg(a, NULL, 0, -1);
                pump_for(1000);
                {
                        char sink[4096];
                        while (recv(S.fe, sink, sizeof sink, MSG_DONTWAIT) > 0)
                                ;
                }
                break;
        }
}

/* QEMU's realize and the guest driver's start: features, memory, the request queue, FUSE_INIT. */
static void start_session(uint8_t setup_byte) {
        VhostUserMemory t = { .nregions = 1 };
        struct vhost_vring_addr addr = {
                .index = REQ_QUEUE,
                .desc_user_addr = MEM_UADDR + RING_GPA,
                .avail_user_addr = MEM_UADDR + RING_GPA + 0x400,
                .used_user_addr = MEM_UADDR + RING_GPA + 0x800,
        };
        int sv[2];
        static const ThreadMode modes[] = { THREAD_MODE_INLINE, THREAD_MODE_POOL, THREAD_MODE_AUTO };

        S.config.thread_mode = modes[(setup_byte & 3) % 3];
        S.num = (setup_byte & 8) ? 32 : 16;
        S.features = (1ULL << VIRTIO_F_VERSION_1) | (1ULL << VHOST_USER_F_PROTOCOL_FEATURES) |
                     ((setup_byte & 4) ? 1ULL << VIRTIO_RING_F_EVENT_IDX : 0);
        for (unsigned k = 0; k < ELEMENTSOF(S.slot_req); k++)
                S.slot_req[k] = -1;
        S.memfd = memfd_create("fuzz-survive", MFD_CLOEXEC);
        if (S.memfd < 0 || ftruncate(S.memfd, MEM_SIZE) < 0)
                abort();
        S.mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, S.memfd, 0);
        S.kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        S.call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (S.mem == MAP_FAILED || S.kick < 0 || S.call < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        S.fe = sv[0];
        start_child(sv[1]);
        close(sv[1]);

        {       /* not acked yet: REPLY_ACK is what it negotiates */
                uint64_t pf = (1ULL << VHOST_USER_PROTOCOL_F_MQ) | (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK);
                send_msg(VHOST_USER_SET_PROTOCOL_FEATURES, &pf, sizeof pf, -1);
        }
        send_acked(VHOST_USER_SET_OWNER, NULL, 0, -1);
        send_u64(VHOST_USER_SET_FEATURES, S.features, -1);
        t.regions[0] = (VhostUserMemoryRegion) { .guest_phys_addr = 0, .memory_size = MEM_SIZE,
                                                 .userspace_addr = MEM_UADDR };
        send_acked(VHOST_USER_SET_MEM_TABLE, &t, 8 + sizeof(VhostUserMemoryRegion), S.memfd);
        send_state(VHOST_USER_SET_VRING_NUM, REQ_QUEUE, S.num);
        send_state(VHOST_USER_SET_VRING_BASE, REQ_QUEUE, 0);
        send_acked(VHOST_USER_SET_VRING_ADDR, &addr, sizeof addr, -1);
        send_u64(VHOST_USER_SET_VRING_CALL, REQ_QUEUE, S.call);
        send_u64(VHOST_USER_SET_VRING_KICK, REQ_QUEUE, S.kick);
        send_state(VHOST_USER_SET_VRING_ENABLE, REQ_QUEUE, 1);
        {
                uint8_t buf[sizeof(struct fuse_in_header) + sizeof(struct fuse_init_in)];
                struct fuse_in_header h = { .len = sizeof buf, .opcode = FUSE_INIT, .unique = 1,
                                            .nodeid = FUSE_ROOT_ID };
                struct fuse_init_in i = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION,
                                          .max_readahead = 1 << 16, .flags = FUSE_ASYNC_READ };
                Req *rq = &S.reqs[S.n_reqs];
                memcpy(buf, &h, sizeof h);
                memcpy(buf + sizeof h, &i, sizeof i);
                *rq = (Req) { .unique = 1, .opcode = FUSE_INIT };
                post(NULL, rq, buf, sizeof buf);
        }
}

static void end_session(void) {
        /* The guest waits for every answer (5 s: sanitizers and a loaded machine). */
        if (S.strict && !S.over) {
                uint64_t end = now_us() + 5000000;
                while (in_flight() > 0 && now_us() < end)
                        pump_for(200);
                if (in_flight() > 0) {
                        for (unsigned k = 0; k < S.num / 2; k++)
                                if (S.slot_req[k] >= 0)
                                        fprintf(stderr, "fuzz-survive: unanswered: request %d, opcode %u, head %u\n",
                                                S.slot_req[k], S.reqs[S.slot_req[k]].opcode, 2 * k);
                        fprintf(stderr, "fuzz-survive: avail %u, used %u, %u deaths\n", S.avail_idx,
                                ring_used()->idx, S.deaths);
                        die("requests never answered after the takeover");
                }
                if (ring_used()->idx != S.avail_idx)
                        die("the used index is not the avail index with every request answered");
        }
        if (S.child > 0) { /* the takeover was refused or never happened */
                int status;
                (void) kill(S.child, SIGKILL);
                (void) waitpid(S.child, &status, 0);
                child_gone();
        }
        /* The frontend leaves. */
        S.fe = safe_close(S.fe);
        if (S.m) {
                pump_for(0);
                S.m = manager_free(S.m);
        }
        if (own_channel[1] >= 0) {
                atomic_store(&keeper_stop, true);
                pthread_join(keeper_tid, NULL);
                own_channel[0] = safe_close(own_channel[0]);
                own_channel[1] = safe_close(own_channel[1]);
                sandbox_set_channel_fd(-1);
        }
        keeper_clear();
        munmap(S.mem, MEM_SIZE);
        close(S.memfd);
        close(S.kick);
        close(S.call);
        fuzz_reset_shared_dir();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Input in = { data, size };

        if (!S.plan)
                setup();
        if (size > 1024)
                return 0;
        memset(S.reqs, 0, sizeof S.reqs);
        S.n_reqs = S.n_poison = S.deaths = 0;
        S.avail_idx = S.last_used = 0;
        S.nodeid = S.fh = 0;
        S.strict = true;
        S.poisoned = S.over = false;
        S.m = NULL;
        S.in = &in;
        start_session(next(&in));

        for (unsigned n = 0; n < MAX_OPS && in.left > 0 && !S.over; n++) {
                uint8_t op = next(&in) % 8;

                switch (op) {
                case 0 ... 2:
                        op_fuse(&in);
                        break;
                case 3: { /* armed for this serving process; pump() sees its death */
                        uint8_t st = next(&in), o = next(&in);
                        if (S.child > 0) {
                                atomic_store(&S.plan->opcode, kill_opcodes[o % ELEMENTSOF(kill_opcodes)]);
                                atomic_store(&S.plan->step, st % _DEVICE_STEP_MAX);
                        }
                        break;
                }
                case 4:
                        death();
                        break;
                case 5: {
                        uint8_t t = next(&in);
                        uint64_t end = now_us() + 500000;
                        pump_for((t % 16) * 100u);
                        /* Until every request is answered (the serving process may die meanwhile). */
                        while ((t & 0x80) && in_flight() > 0 && now_us() < end && !S.over)
                                pump_for(100);
                        break;
                }
                case 6:
                        op_vhost(&in);
                        break;
                case 7: {
                        Poison p = { .target = next(&in) % 3 };
                        p.off = next(&in);
                        p.off |= (uint16_t) (next(&in) << 8);
                        p.value = next(&in);
                        if (S.n_poison < ELEMENTSOF(S.poison))
                                S.poison[S.n_poison++] = p;
                        S.poisoned = true;
                        S.strict = false;
                        break;
                }
                }
                pump();
        }
        /* Every input ends served by this process, after at least one death. */
        S.in = NULL;
        if (S.child > 0 && !S.over)
                death();
        end_session();
        return 0;
}
