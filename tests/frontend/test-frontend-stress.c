/* test-frontend-stress.c: live mode switching under deep multi-queue load, through the test frontend.
 *
 * The backend runs in this process (device, executor, statistics and FUSE server from the daemon
 * library, served over a real vhost-user socket by a small loop like the manager's), so the test can
 * switch modes through executor_set_mode() directly (the control plane calls the same function) and
 * sanitizers see both sides. The frontend plays QEMU over the socket with shared-memory rings.
 *
 * VUFSD_STRESS_SECONDS sets the storm's length (default 20). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "device.h"
#include "executor.h"
#include "fuse-client.h"
#include "fuse-handler.h"
#include "fuse-server.h"
#include "passthrough.h"
#include "stats.h"
#include "vhost-user.h"
#include "test-main.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
/* Thread creation costs 10-50 ms under TSan here and every byte copied is checked: fewer workers
 * per switch and smaller I/O keep the storm a storm. */
#define SLOW_FACTOR 5
#define MAX_SWITCH_POOL 8
#define MAX_IO (32u * 1024u)
#define MIN_SWITCHES_PER_S 1
#else
#define SLOW_FACTOR 1
#define MAX_SWITCH_POOL 256
#define MAX_IO SLOT_SIZE
#define MIN_SWITCHES_PER_S 10
#endif

#define N_QUEUES 4
#define QUEUE_DEPTH 48    /* requests in flight per queue */
#define N_SLOTS 96        /* file regions per queue, each written and read back */
#define SLOT_SIZE (128u * 1024u)

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static void sleep_us(unsigned us) {
        struct timespec ts = { us / 1000000, (long) (us % 1000000) * 1000 };
        nanosleep(&ts, NULL);
}

/* ---- the backend, in process ---- */

typedef struct Backend {
        char dir[64], share[80], socket_path[80];
        FsOptions opts;
        Passthrough *pt;
        FuseServer *fs;
        Device *dev;
        Executor *ex;
        Stats *stats;
        int listen_fd;
        pthread_t thread;
} Backend;

/* One frontend connection, like the manager's loop: messages until EOF, then everything reset. */
static void *backend_main(void *userdata) {
        Backend *b = userdata;
        int conn = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);

        if (conn < 0)
                return NULL;
        for (;;) {
                VhostUserMsg msg;

                if (vhost_user_recv(conn, &msg) < 0)
                        break;
                if (vhost_user_handle(&device_vhost_ops, b->dev, conn, &msg) < 0)
                        break;
        }
        device_reset(b->dev);
        fuse_server_reset(b->fs);
        close(conn);
        return NULL;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        if (flag == FTW_DP)
                rmdir(path);
        else
                unlink(path);
        return 0;
}

/* A failed assertion ends the test process at once: remove the directory then too. */
static char cleanup_dir[64];

static void cleanup_at_exit(void) {
        if (cleanup_dir[0])
                nftw(cleanup_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void backend_start(Backend *b, ThreadMode mode, unsigned pool_size, unsigned n_request_queues) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        *b = (Backend) { .listen_fd = -1 };
        /* tmpfs when there is one: the test is about threads, not about how fast this disk syncs. */
        snprintf(b->dir, sizeof b->dir, "%s/vufsd-stress.XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        ck_assert_ptr_nonnull(mkdtemp(b->dir));
        snprintf(cleanup_dir, sizeof cleanup_dir, "%s", b->dir);
        atexit(cleanup_at_exit);
        snprintf(b->share, sizeof b->share, "%s/share", b->dir);
        snprintf(b->socket_path, sizeof b->socket_path, "%s/vhost.sock", b->dir);
        ck_assert_int_eq(mkdir(b->share, 0755), 0);
        b->opts = FS_OPTIONS_DEFAULT;
        b->opts.shared_dir = b->share;
        ck_assert_int_eq(passthrough_new(&b->pt, &b->opts), 0);
        ck_assert_int_eq(fuse_server_new(&b->fs, &b->opts, &passthrough_ops, b->pt), 0);
        {
                RequestHandler h = fuse_request_handler(b->fs);
                ck_assert_int_eq(device_new(&b->dev, &h, n_request_queues), 0);
        }
        ck_assert_int_eq(executor_new(&b->ex, mode, pool_size), 0);
        ck_assert_int_eq(stats_new(&b->stats), 0);
        device_attach(b->dev, b->ex, b->stats);

        b->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(b->listen_fd, 0);
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", b->socket_path);
        ck_assert_int_eq(bind(b->listen_fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(listen(b->listen_fd, 1), 0);
        ck_assert_int_eq(pthread_create(&b->thread, NULL, backend_main, b), 0);
}

/* After the frontend closed its end. */
static void backend_stop(Backend *b) {
        pthread_join(b->thread, NULL);
        close(b->listen_fd);
        b->dev = device_free(b->dev);
        b->ex = executor_free(b->ex);
        b->stats = stats_free(b->stats);
        b->fs = fuse_server_free(b->fs);
        b->pt = passthrough_free(b->pt);
        nftw(b->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        cleanup_dir[0] = 0;
}

static Frontend *frontend_start(Backend *b, unsigned n_request_queues, uint16_t queue_size, uint64_t mem_size) {
        FeOptions o;
        Frontend *fe;

        fe_options_init(&o);
        o.num_queues = 1 + n_request_queues;
        o.queue_size = queue_size;
        o.mem_size = mem_size;
        o.timeout_ms = 10000 * SLOW_FACTOR;
        ck_assert_int_eq(fe_connect_and_start(&fe, b->socket_path, &o), 0);
        return fe;
}

/* ---- data: distinct per queue, slot and generation ---- */

static uint64_t mix64(uint64_t x) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ULL;
        x ^= x >> 33;
        return x;
}

static void fill(uint8_t *buf, size_t len, unsigned queue, unsigned slot, uint32_t gen) {
        uint64_t seed = ((uint64_t) queue << 56) ^ ((uint64_t) slot << 32) ^ gen;

        for (size_t i = 0; i < len; i += 8) {
                uint64_t w = mix64(seed + i);
                memcpy(buf + i, &w, MIN((size_t) 8, len - i));
        }
}

/* ---- the load: one thread per request queue ---- */

typedef enum OpKind { OP_WRITE, OP_READ, OP_GETATTR, OP_FSYNC } OpKind;

typedef struct Op {
        FeFuseReq *req;
        OpKind kind;
        unsigned slot;
        uint32_t gen, len;
} Op;

typedef struct Slot {
        uint32_t gen; /* 0 = never written */
        uint32_t len;
        bool busy;
} Slot;

typedef struct Load {
        unsigned queue; /* 1..N_QUEUES */
        FeFuse *c;
        uint64_t nodeid, fh;
        uint32_t max_io;
        uint64_t deadline;
        unsigned seed;
        Slot slots[N_SLOTS];
        Op ops[QUEUE_DEPTH];
        unsigned in_flight;
        uint8_t *buf, *expect;
        /* results */
        uint64_t submitted, completed, writes, reads, bytes_verified;
        char failure[256];
} Load;

static int load_fail(Load *l, const char *fmt, ...) _printf_(2, 3);
static int load_fail(Load *l, const char *fmt, ...) {
        va_list ap;

        if (!l->failure[0]) {
                va_start(ap, fmt);
                vsnprintf(l->failure, sizeof l->failure, fmt, ap);
                va_end(ap);
        }
        return -EPROTO;
}

static int load_submit(Load *l, Op *op) {
        unsigned r = (unsigned) rand_r(&l->seed), pick = r % 100;
        unsigned slot = (r >> 8) % N_SLOTS;
        Slot *s = &l->slots[slot];
        int k;

        *op = (Op) { .slot = slot };
        if (pick < 10 || s->busy) {
                struct fuse_getattr_in in = {};
                op->kind = OP_GETATTR;
                k = fe_fuse_req_new(&op->req, l->c, FUSE_GETATTR, l->nodeid, sizeof(struct fuse_attr_out));
                if (k >= 0)
                        k = fe_fuse_req_add(op->req, &in, sizeof in);
        } else if (pick < 12) {
                struct fuse_fsync_in in = { .fh = l->fh, .fsync_flags = (r >> 20) & 1 };
                op->kind = OP_FSYNC;
                k = fe_fuse_req_new(&op->req, l->c, FUSE_FSYNC, l->nodeid, 0);
                if (k >= 0)
                        k = fe_fuse_req_add(op->req, &in, sizeof in);
        } else if (pick < 55 || s->gen == 0) {
                static const uint32_t sizes[] = { 4096, 16384, 65536, 131072, 0 };
                uint32_t len = sizes[(r >> 16) % ELEMENTSOF(sizes)];
                struct fuse_write_in in;

                if (len == 0)
                        len = 1 + (r >> 12) % SLOT_SIZE;
                len = MIN(len, l->max_io);
                op->kind = OP_WRITE;
                op->gen = s->gen + 1;
                op->len = len;
                in = (struct fuse_write_in) { .fh = l->fh, .offset = (uint64_t) slot * SLOT_SIZE, .size = len };
                fill(l->buf, len, l->queue, slot, op->gen);
                k = fe_fuse_req_new(&op->req, l->c, FUSE_WRITE, l->nodeid, sizeof(struct fuse_write_out));
                if (k >= 0)
                        k = fe_fuse_req_add(op->req, &in, sizeof in);
                if (k >= 0)
                        k = fe_fuse_req_add_data(op->req, l->buf, len);
                s->busy = true;
        } else {
                struct fuse_read_in in = { .fh = l->fh, .offset = (uint64_t) slot * SLOT_SIZE, .size = s->len };
                op->kind = OP_READ;
                op->gen = s->gen;
                op->len = s->len;
                k = fe_fuse_req_new(&op->req, l->c, FUSE_READ, l->nodeid, s->len);
                if (k >= 0)
                        k = fe_fuse_req_add(op->req, &in, sizeof in);
                s->busy = true;
        }
        if (k >= 0)
                k = fe_fuse_submit(l->c, op->req, -1);
        if (k < 0)
                return load_fail(l, "queue %u: cannot submit: %s", l->queue, strerror(-k));
        l->submitted++;
        return 0;
}

static int load_check(Load *l, Op *op) {
        FeFuseReq *req = op->req;
        Slot *s = &l->slots[op->slot];

        if (req->status < 0)
                return load_fail(l, "queue %u: %s", l->queue, req->problem);
        if (req->oh.error != 0)
                return load_fail(l, "queue %u: opcode %u answered %d", l->queue, req->opcode, req->oh.error);
        switch (op->kind) {
        case OP_WRITE: {
                struct fuse_write_out wo;
                if (req->payload_len != sizeof wo)
                        return load_fail(l, "queue %u: WRITE reply of %zu bytes", l->queue, req->payload_len);
                memcpy(&wo, req->payload, sizeof wo);
                if (wo.size != op->len)
                        return load_fail(l, "queue %u: WRITE of %u wrote %u", l->queue, op->len, wo.size);
                s->gen = op->gen;
                s->len = op->len;
                s->busy = false;
                l->writes++;
                break;
        }
        case OP_READ:
                if (req->payload_len != op->len)
                        return load_fail(l, "queue %u slot %u: READ of %u returned %zu", l->queue, op->slot, op->len,
                                         req->payload_len);
                fill(l->expect, op->len, l->queue, op->slot, op->gen);
                if (memcmp(req->payload, l->expect, op->len) != 0)
                        return load_fail(l, "queue %u slot %u: READ returned wrong data (generation %u)", l->queue,
                                         op->slot, op->gen);
                s->busy = false;
                l->reads++;
                l->bytes_verified += op->len;
                break;
        case OP_GETATTR:
                if (req->payload_len != sizeof(struct fuse_attr_out))
                        return load_fail(l, "queue %u: GETATTR reply of %zu bytes", l->queue, req->payload_len);
                break;
        case OP_FSYNC:
                if (req->payload_len != 0)
                        return load_fail(l, "queue %u: FSYNC reply of %zu bytes", l->queue, req->payload_len);
                break;
        }
        return 0;
}

static void *load_main(void *userdata) {
        Load *l = userdata;

        l->buf = malloc(SLOT_SIZE);
        l->expect = malloc(SLOT_SIZE);
        for (;;) {
                FeFuseReq *done;
                Op *op = NULL;
                int r;

                while (now_ns() < l->deadline && l->in_flight < QUEUE_DEPTH && !l->failure[0]) {
                        if (load_submit(l, &l->ops[l->in_flight]) < 0)
                                break;
                        l->in_flight++;
                }
                if (l->in_flight == 0 || l->failure[0])
                        break;
                r = fe_fuse_wait(l->c, l->queue, 10000 * SLOW_FACTOR, &done);
                if (r < 0) {
                        load_fail(l, "queue %u: %u requests in flight, waiting failed (%s): %s", l->queue,
                                  l->in_flight, strerror(-r), l->c->last_problem);
                        break;
                }
                for (unsigned i = 0; i < l->in_flight; i++)
                        if (l->ops[i].req == done)
                                op = &l->ops[i];
                if (!op) {
                        load_fail(l, "queue %u: completion of a request not in flight", l->queue);
                        break;
                }
                l->completed++;
                r = load_check(l, op);
                fe_fuse_req_free(l->c, op->req);
                *op = l->ops[--l->in_flight];
                if (r < 0)
                        break;
        }
        free(l->buf);
        free(l->expect);
        return NULL;
}

/* ---- the switcher ---- */

/* How soon a switch takes effect. Every few switches one goes between inline and pool and is
 * watched for MEASURE_WINDOW_MS by an observer thread that polls the executor's counters (also
 * while the switcher is still inside executor_set_mode(), which may be creating workers): the
 * switch has taken effect once no request is routed the old way any more (to the pool after a
 * switch to inline, inline after a switch to pool). Its latency is the time of the last old-way
 * routing seen after the call returned (0 if none); also kept from the call's start, which adds the
 * time the switching thread itself waited for a CPU. Requests handed to the pool before the switch
 * still finish there; that is not routing. */
#define MEASURE_EVERY 16
#define MEASURE_WINDOW_MS 120

typedef struct SwitchLog {
        Executor *ex;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool armed, quit;
        ThreadMode mode;
        ExecutorState before;
        uint64_t t0;
        _Atomic uint64_t t1; /* when set_mode returned; 0 while it runs */

        unsigned n;
        uint64_t call_ns_max;
        uint64_t effect_ns[4096];       /* after the call returned */
        uint64_t effect_start_ns[4096]; /* after the call started */
        unsigned n_effect, n_late; /* late: an old-way routing seen after t0 at all */
} SwitchLog;

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static uint64_t old_way(const ExecutorState *st, ThreadMode new_mode) {
        return new_mode == THREAD_MODE_INLINE ? st->pool_runs : st->inline_runs;
}

static void *observer_main(void *userdata) {
        SwitchLog *log = userdata;

        pthread_mutex_lock(&log->lock);
        for (;;) {
                ExecutorState now;
                uint64_t last_old = 0, seen, t1;

                while (!log->armed && !log->quit)
                        pthread_cond_wait(&log->cond, &log->lock);
                if (log->quit)
                        break;
                pthread_mutex_unlock(&log->lock);
                seen = old_way(&log->before, log->mode);
                for (;;) {
                        uint64_t t;

                        executor_get_state(log->ex, &now);
                        t = now_ns();
                        if (old_way(&now, log->mode) != seen) {
                                seen = old_way(&now, log->mode);
                                last_old = t;
                        }
                        if (t - log->t0 > MEASURE_WINDOW_MS * 1000000ULL)
                                break;
                        sleep_us(200);
                }
                t1 = atomic_load(&log->t1);
                pthread_mutex_lock(&log->lock);
                log->effect_start_ns[log->n_effect] = last_old ? last_old - log->t0 : 0;
                /* t1 == 0: set_mode had not returned by the end of the window (call_ns_max reports
                 * such a slow call); an old-way routing then says nothing about after the call. */
                log->effect_ns[log->n_effect++] = t1 && last_old > t1 ? last_old - t1 : 0;
                log->n_late += last_old > 0;
                log->armed = false;
                pthread_cond_broadcast(&log->cond);
        }
        pthread_mutex_unlock(&log->lock);
        return NULL;
}

static void switch_once(Executor *ex, unsigned *seed, SwitchLog *log) {
        unsigned r = (unsigned) rand_r(seed);
        ThreadMode m = (ThreadMode) (r % 3);
        unsigned size = 1 + (r >> 4) % (r % 9 == 0 ? MAX_SWITCH_POOL : 8);
        ExecutorState before;
        bool observe = false;
        uint64_t t0, t1;

        executor_get_state(ex, &before);
        if (log->n % MEASURE_EVERY == 0 && log->n_effect < ELEMENTSOF(log->effect_ns)) {
                observe = true;
                m = before.mode == THREAD_MODE_POOL ? THREAD_MODE_INLINE : THREAD_MODE_POOL;
        }
        t0 = now_ns();
        if (observe) {
                pthread_mutex_lock(&log->lock);
                log->mode = m;
                log->before = before;
                log->t0 = t0;
                atomic_store(&log->t1, 0);
                log->armed = true;
                pthread_cond_broadcast(&log->cond);
                pthread_mutex_unlock(&log->lock);
        }
        ck_assert_int_eq(executor_set_mode(ex, m, size), 0);
        t1 = now_ns();
        atomic_store(&log->t1, t1);
        log->n++;
        log->call_ns_max = MAX(log->call_ns_max, t1 - t0);
        pthread_mutex_lock(&log->lock);
        while (log->armed)
                pthread_cond_wait(&log->cond, &log->lock);
        pthread_mutex_unlock(&log->lock);
}

static unsigned stress_seconds(void) {
        const char *e = getenv("VUFSD_STRESS_SECONDS");
        unsigned s = e ? (unsigned) atoi(e) : 20;
        return s ? s : 20;
}

START_TEST(test_switch_storm_under_load) {
        Backend b;
        Frontend *fe;
        FeFuse *setup;
        Load loads[N_QUEUES];
        pthread_t threads[N_QUEUES];
        SwitchLog *log = calloc(1, sizeof *log);
        pthread_t observer;
        StatsSnapshot *snap = malloc(sizeof *snap);
        ExecutorState st0, st1;
        unsigned seconds = stress_seconds(), seed = 4242;
        uint64_t total = 0, bytes = 0, t_start, deadline;
        uint32_t max_io;

        backend_start(&b, THREAD_MODE_AUTO, 4, N_QUEUES);
        fe = frontend_start(&b, N_QUEUES, 128, 256ULL << 20);
        ck_assert_int_eq(fe_fuse_new(&setup, fe), 0);
        ck_assert_int_eq(fe_fuse_init(setup), 0);
        max_io = MIN(setup->init.max_write, MAX_IO);
        ck_assert_uint_ge(max_io, 4096);

        for (unsigned i = 0; i < N_QUEUES; i++) {
                struct fuse_entry_out e;
                char name[16];
                Load *l = &loads[i];

                memset(l, 0, sizeof *l);
                l->queue = 1 + i;
                ck_assert_int_eq(fe_fuse_new(&l->c, fe), 0);
                l->c->queue = l->queue;
                l->c->next_unique = 2 + ((uint64_t) l->queue << 40); /* distinct per queue */
                snprintf(name, sizeof name, "q%u", l->queue);
                ck_assert_int_eq(fe_fuse_create(l->c, FUSE_ROOT_ID, name, O_RDWR, 0644, &e, &l->fh), 0);
                l->nodeid = e.nodeid;
                l->max_io = max_io;
                l->seed = 17 * l->queue;
        }

        /* Count the storm alone. */
        stats_reset(b.stats);
        executor_get_state(b.ex, &st0);
        t_start = now_ns();
        deadline = t_start + (uint64_t) seconds * 1000000000ULL;
        log->ex = b.ex;
        pthread_mutex_init(&log->lock, NULL);
        pthread_cond_init(&log->cond, NULL);
        ck_assert_int_eq(pthread_create(&observer, NULL, observer_main, log), 0);
        for (unsigned i = 0; i < N_QUEUES; i++) {
                loads[i].deadline = deadline;
                ck_assert_int_eq(pthread_create(&threads[i], NULL, load_main, &loads[i]), 0);
        }
        while (now_ns() < deadline) {
                switch_once(b.ex, &seed, log);
                sleep_us(1000 + (unsigned) rand_r(&seed) % 4000);
        }
        for (unsigned i = 0; i < N_QUEUES; i++)
                pthread_join(threads[i], NULL);
        pthread_mutex_lock(&log->lock);
        log->quit = true;
        pthread_cond_broadcast(&log->cond);
        pthread_mutex_unlock(&log->lock);
        pthread_join(observer, NULL);

        executor_get_state(b.ex, &st1);
        stats_snapshot(b.stats, snap);
        for (unsigned i = 0; i < N_QUEUES; i++) {
                total += loads[i].completed;
                bytes += loads[i].bytes_verified;
        }
        qsort(log->effect_ns, log->n_effect, sizeof log->effect_ns[0], cmp_u64);
        qsort(log->effect_start_ns, log->n_effect, sizeof log->effect_start_ns[0], cmp_u64);
        printf("stress: %u s, %" PRIu64 " requests (%.0f/s) on %u queues at depth %u, %.1f MiB read back and "
               "verified; %u switches, set_mode max %.2f ms; %u watched: old-way routing after the call started "
               "in %u, "
               "last one after the call returned: p50 %.3f ms, p99 %.3f ms, max %.3f ms (from the start: max "
               "%.3f ms); inline %" PRIu64 " pool %" PRIu64 " helper %" PRIu64
               " (auto inline/pool %" PRIu64 "/%" PRIu64 ")\n",
               seconds, total, total / ((now_ns() - t_start) / 1e9), N_QUEUES, QUEUE_DEPTH, bytes / 1048576.0,
               log->n, log->call_ns_max / 1e6, log->n_effect, log->n_late,
               log->n_effect ? log->effect_ns[log->n_effect / 2] / 1e6 : 0.0,
               log->n_effect ? log->effect_ns[log->n_effect * 99 / 100] / 1e6 : 0.0,
               log->n_effect ? log->effect_ns[log->n_effect - 1] / 1e6 : 0.0,
               log->n_effect ? log->effect_start_ns[log->n_effect - 1] / 1e6 : 0.0, st1.inline_runs - st0.inline_runs,
               st1.pool_runs - st0.pool_runs, st1.helper_runs - st0.helper_runs, st1.auto_inline - st0.auto_inline,
               st1.auto_pool - st0.auto_pool);
        fflush(stdout);

        /* Every request answered once, with the right data. */
        for (unsigned i = 0; i < N_QUEUES; i++) {
                Load *l = &loads[i];
                ck_assert_msg(!l->failure[0], "%s", l->failure);
                ck_assert_uint_eq(l->completed, l->submitted);
                ck_assert_uint_eq(l->c->proto_errors, 0);
                ck_assert_uint_gt(l->reads, 0);
                ck_assert_uint_gt(l->writes, 0);
        }
        /* ...and run once: the statistics count each request exactly once, per queue. */
        for (unsigned i = 0; i < N_QUEUES; i++) {
                ck_assert_uint_eq(snap->queue[1 + i].requests, loads[i].completed);
                ck_assert_uint_eq(snap->queue[1 + i].errors, 0);
        }
        ck_assert_uint_eq(snap->queue[0].requests, 0);
        ck_assert_uint_eq(snap->in_flight, 0);
        ck_assert_uint_eq(snap->op[FUSE_WRITE].requests, loads[0].writes + loads[1].writes + loads[2].writes +
                                                                  loads[3].writes);
        ck_assert_uint_eq((st1.inline_runs + st1.pool_runs + st1.helper_runs) -
                                  (st0.inline_runs + st0.pool_runs + st0.helper_runs),
                          total);
        ck_assert_uint_gt(st1.pool_runs, st0.pool_runs);
        ck_assert_uint_gt(st1.inline_runs, st0.inline_runs);

        ck_assert_uint_ge(log->n, seconds * MIN_SWITCHES_PER_S);
        ck_assert_uint_gt(log->n_effect, 0);
        /* A switch takes effect within 100 ms under load. */
        ck_assert_uint_lt(log->effect_ns[log->n_effect - 1], 100000000ULL * SLOW_FACTOR);

        for (unsigned i = 0; i < N_QUEUES; i++) {
                ck_assert_int_eq(fe_fuse_release(loads[i].c, loads[i].nodeid, loads[i].fh, false), 0);
                fe_fuse_free(loads[i].c);
        }
        fe_fuse_free(setup);
        fe_free(fe);
        backend_stop(&b);
        free(log);
        free(snap);
}
END_TEST

/* ---- blocking locks and stopping ---- */

typedef struct Stopper {
        Frontend *fe;
        int r;
        atomic_bool done;
} Stopper;

static void *stopper_main(void *userdata) {
        Stopper *s = userdata;

        s->r = fe_stop(s->fe);
        atomic_store(&s->done, true);
        return NULL;
}

/* A guest SETLKW waits for a lock the host holds. hold: the host never lets go, so stopping the
 * queue must cancel the wait (EINTR) instead of hanging; else the host lets go while the stop waits,
 * and the lock is granted. */
static void blocking_lock_case(ThreadMode mode, unsigned pool_size, bool hold) {
        Backend b;
        Frontend *fe;
        FeFuse *c;
        FeFuseReq *lk, *done = NULL;
        struct fuse_entry_out e;
        struct fuse_attr_out attr;
        struct fuse_lk_in in;
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
        Stopper stopper = {};
        pthread_t t;
        char path[128];
        uint64_t fh;
        int host_fd;

        backend_start(&b, mode, pool_size, 1);
        fe = frontend_start(&b, 1, 128, 64ULL << 20);
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        ck_assert_int_eq(fe_fuse_init(c), 0);
        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "locked", O_RDWR, 0644, &e, &fh), 0);

        /* The host holds the lock the guest will wait for. */
        snprintf(path, sizeof path, "%s/locked", b.share);
        host_fd = open(path, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(host_fd, 0);
        ck_assert_int_eq(fcntl(host_fd, F_OFD_SETLK, &fl), 0);

        in = (struct fuse_lk_in) {
                .fh = fh,
                .owner = 0x1234,
                .lk = { .start = 0, .end = INT64_MAX, .type = F_WRLCK },
        };
        ck_assert_int_eq(fe_fuse_req_new(&lk, c, FUSE_SETLKW, e.nodeid, 0), 0);
        ck_assert_int_eq(fe_fuse_req_add(lk, &in, sizeof in), 0);
        ck_assert_int_eq(fe_fuse_submit(c, lk, -1), 0);

        /* The queue keeps moving while the lock wait is pending (in every mode). */
        for (unsigned i = 0; i < 50; i++)
                ck_assert_int_eq(fe_fuse_getattr(c, e.nodeid, &attr), 0);
        ck_assert(!lk->done);

        /* Stopping the queue (GET_VRING_BASE) waits for the request still in flight elsewhere. */
        stopper.fe = fe;
        ck_assert_int_eq(pthread_create(&t, NULL, stopper_main, &stopper), 0);
        sleep_us(50000);
        ck_assert_msg(!atomic_load(&stopper.done), "GET_VRING_BASE answered with a request in flight");
        if (!hold)
                host_fd = safe_close(host_fd); /* the guest's wait ends with the lock granted */
        pthread_join(t, NULL);
        ck_assert_int_eq(stopper.r, 0);
        /* The completion is on the used ring before the stop was acknowledged. */
        ck_assert_int_eq(fe_fuse_wait(c, 1, 0, &done), 0);
        ck_assert_ptr_eq(done, lk);
        ck_assert_int_eq(lk->status, 0);
        ck_assert_int_eq(lk->oh.error, hold ? -EINTR : 0);
        fe_fuse_req_free(c, lk);
        safe_close(host_fd);

        /* And the device restarts where it stopped. */
        ck_assert_int_eq(fe_start(fe, false), 0);
        ck_assert_int_eq(fe_fuse_getattr(c, e.nodeid, &attr), 0);
        ck_assert_uint_eq(c->proto_errors, 0);

        fe_fuse_free(c);
        fe_free(fe);
        backend_stop(&b);
}

START_TEST(test_blocking_lock_inline) {
        blocking_lock_case(THREAD_MODE_INLINE, 4, true);
        blocking_lock_case(THREAD_MODE_INLINE, 4, false);
}
END_TEST

START_TEST(test_blocking_lock_pool_of_one) {
        blocking_lock_case(THREAD_MODE_POOL, 1, false);
}
END_TEST

START_TEST(test_blocking_lock_auto) {
        blocking_lock_case(THREAD_MODE_AUTO, 1, true);
}
END_TEST

/* No helper thread can be created when a guest SETLKW arrives (thread limit, memory): the queue
 * thread runs it itself, so it must be tried once and answered (ENOLCK) instead of waiting there
 * for as long as the holder likes, with the queue stopped behind it (issue 13 item 2). */
START_TEST(test_lock_wait_without_helper_thread) {
        Backend b;
        Frontend *fe;
        FeFuse *c;
        FeFuseReq *lk;
        struct fuse_entry_out e;
        struct fuse_attr_out attr;
        struct fuse_lk_in in;
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
        pthread_attr_t saved, huge;
        char path[128];
        uint64_t fh;
        int host_fd, r;

        backend_start(&b, THREAD_MODE_INLINE, 4, 1);
        fe = frontend_start(&b, 1, 128, 64ULL << 20);
        fe->opts.timeout_ms = 3000 * SLOW_FACTOR;
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        ck_assert_int_eq(fe_fuse_init(c), 0);
        ck_assert_int_eq(fe_fuse_create(c, FUSE_ROOT_ID, "locked", O_RDWR, 0644, &e, &fh), 0);
        snprintf(path, sizeof path, "%s/locked", b.share);
        host_fd = open(path, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(host_fd, 0);
        ck_assert_int_eq(fcntl(host_fd, F_OFD_SETLK, &fl), 0);

        /* From here no thread can be created in this process (the queue thread exists already). */
        ck_assert_int_eq(pthread_getattr_default_np(&saved), 0);
        ck_assert_int_eq(pthread_attr_init(&huge), 0);
        ck_assert_int_eq(pthread_attr_setstacksize(&huge, (size_t)1 << 50), 0);
        ck_assert_int_eq(pthread_setattr_default_np(&huge), 0);

        in = (struct fuse_lk_in){ .fh = fh, .owner = 0x1234, .lk = { .start = 0, .end = INT64_MAX, .type = F_WRLCK } };
        ck_assert_int_eq(fe_fuse_req_new(&lk, c, FUSE_SETLKW, e.nodeid, 0), 0);
        ck_assert_int_eq(fe_fuse_req_add(lk, &in, sizeof in), 0);
        ck_assert_int_eq(fe_fuse_submit(c, lk, -1), 0);
        r = fe_fuse_getattr(c, e.nodeid, &attr);
        ck_assert_int_eq(pthread_setattr_default_np(&saved), 0);
        if (r == -ETIMEDOUT) {
                host_fd = safe_close(host_fd); /* let the queue go, so the test can end */
                ck_abort_msg("the queue stopped behind a lock wait that had no helper thread");
        }
        ck_assert_int_eq(r, 0);
        ck_assert(lk->done);
        ck_assert_int_eq(lk->status, 0);
        ck_assert_int_eq(lk->oh.error, -ENOLCK);
        fe_fuse_req_free(c, lk);
        ck_assert_uint_eq(c->proto_errors, 0);

        pthread_attr_destroy(&huge);
        pthread_attr_destroy(&saved);
        safe_close(host_fd);
        fe_fuse_free(c);
        fe_free(fe);
        backend_stop(&b);
}
END_TEST

static Suite *stress_suite(void) {
        Suite *s = suite_create("frontend-stress");
        TCase *tc = tcase_create("stress");
        tcase_set_timeout(tc, stress_seconds() * 3 + 120);
        tcase_add_test(tc, test_blocking_lock_inline);
        tcase_add_test(tc, test_blocking_lock_pool_of_one);
        tcase_add_test(tc, test_blocking_lock_auto);
        tcase_add_test(tc, test_switch_storm_under_load);
        suite_add_tcase(s, tc);
        /* CK_RUN_CASE=helpers runs this one alone. */
        tc = tcase_create("helpers");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_lock_wait_without_helper_thread);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {

        /* A frontend that goes away mid-write must give EPIPE, not kill the test. */
        signal(SIGPIPE, SIG_IGN);
        return test_main_run(stress_suite());
}
